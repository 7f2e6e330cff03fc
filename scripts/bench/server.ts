// The reference server and the server certification: certification wall time (virtual and scaled
// time) and retry lateness in scaled time (throughput: scripts/bench/delivery.ts).
import { certifyReference } from "../../conformance/server/reference.js";
import { answers, startReceiver } from "../../conformance/harness/receiver.js";
import { loadConfig, startServer } from "../../src/server/index.js";
import { loadDeliveryRules } from "@partner-platform/sdk";
import type { Bench } from "../bench.js";

const client = loadConfig().clients[0]!;

async function certificationSeconds(clock: { kind: "virtual" } | { kind: "scaled"; factor: number }): Promise<[number, boolean]> {
  const start = performance.now();
  const report = await certifyReference(clock);
  return [(performance.now() - start) / 1000, report.passed];
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const bench: Bench = async () => {
  const results = [];
  // Delivery throughput is measured by scripts/bench/delivery.ts, every arm in a process of its own.
  const receiver = await startReceiver();
  // Lateness of retries in scaled time: one event to many webhooks, each failing its first attempt
  // (one failure per webhook, far from disabling); each retry is due one first wait later.
  const scale = 0.001;
  const firstWaitMs = loadDeliveryRules().retryWaitsSeconds[0]! * 1000 * scale;
  const scaledServer = await startServer({ clock: { mode: "scaled", scale }, allowPrivateWebhooks: true, webhookCa: receiver.pki.caCert, log: () => undefined });
  const webhooks = 40;
  for (let i = 1; i <= webhooks; i++) {
    receiver.script(`late-${i}`, [answers.status(500)], answers.ok);
    await scaledServer.db.query(
      "INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ($1, $2, $3, $4, '4711', 'whsec-bench-0123456789', 0)",
      [String(i), client.clientId, receiver.url(`late-${i}`), JSON.stringify(["review.created"])],
    );
  }
  await scaledServer.engine.emit("review.created", "4711", { reviewID: "1", businessID: "4711", rating: 4, reviewer: { name: "L" }, createdAt: "2026-11-22T14:00:00Z" });
  await receiver.waitFor((d) => d.filter((x) => x.endpoint.startsWith("late-")).length >= 2 * webhooks, 30_000, "retries");
  const lateness = Array.from({ length: webhooks }, (_, i) => {
    const [first, retry] = receiver.at(`late-${i + 1}`);
    return retry!.arrivedAt - first!.arrivedAt - firstWaitMs;
  });
  await scaledServer.close();
  await receiver.close();
  results.push({
    name: `retry lateness, scaled time ${scale} (${webhooks} retries due ${firstWaitMs} ms after their failure; first arrival to retry arrival, minus the wait)`,
    value: `p50 ${percentile(lateness, 50).toFixed(1)} ms, p99 ${percentile(lateness, 99).toFixed(1)} ms real`,
  });
  const [virtual, virtualOk] = await certificationSeconds({ kind: "virtual" });
  results.push({ name: "full server certification, virtual time (incl. server start)", value: `${virtual.toFixed(2)} s, ${virtualOk ? "certified" : "NOT certified"}`, target: "< 10 s" });
  const [scaled, scaledOk] = await certificationSeconds({ kind: "scaled", factor: 0.0001 });
  results.push({ name: "full server certification, scaled time 1e-4", value: `${scaled.toFixed(2)} s, ${scaledOk ? "certified" : "NOT certified"}` });

  return results;
};
export default bench;
