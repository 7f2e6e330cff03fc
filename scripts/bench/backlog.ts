// A backlog of 100k due attempts on a scaled clock (0.001: a 1 min retry wait takes 60 ms), in the
// processes of the delivery bench: `partner-platform serve` (embedded store) delivering to W webhooks
// of one receiver process, every third attempt failing (retried 60 ms later; never 5 failures in a row,
// so no webhook is disabled). Prints the drain rate, the server's peak RSS, and how late retries came
// against backlog ÷ throughput, the lateness a fair queue must allow.
// BENCH_BACKLOG_WEBHOOKS (1000) × BENCH_BACKLOG_EVENTS (100) first attempts; BENCH_SERVE_ARGS adds flags.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Bench, BenchResult } from "../bench.js";
import { cpuMicros, percentile, startServe, startWorker, watchRss } from "./lib/procs.js";

const WEBHOOKS = Number(process.env.BENCH_BACKLOG_WEBHOOKS ?? 1000);
const EVENTS = Number(process.env.BENCH_BACKLOG_EVENTS ?? 100);
const SCALE = 0.001;
const FIRST_WAIT_MS = 60_000 * SCALE;

const bench: Bench = async () => {
  const results: BenchResult[] = [];
  const receiver = startWorker("receiver.ts");
  const dir = mkdtempSync(path.join(tmpdir(), "bench-backlog-"));
  const load = startWorker("load.ts");
  let serve: Awaited<ReturnType<typeof startServe>> | undefined;
  try {
    const { origin, ca } = await receiver.call<{ origin: string; ca: string }>("info");
    writeFileSync(path.join(dir, "ca.pem"), ca);
    const extra = (process.env.BENCH_SERVE_ARGS ?? "").split(" ").filter(Boolean);
    serve = await startServe(["--port", "0", "--conformance", "--webhook-ca", path.join(dir, "ca.pem"), "--clock", `scaled:${SCALE}`, ...extra]);
    const idleMb = watchRss(serve.child.pid!).stop();
    await load.call("setup", { server: serve.url, urls: Array.from({ length: WEBHOOKS }, (_, i) => `${origin}/fail-third/${i}`), businessID: "4711" });
    await receiver.call("track", true);
    const total = WEBHOOKS * EVENTS;
    const rss = watchRss(serve.child.pid!, 200);
    const cpu = cpuMicros(serve.child.pid!);
    const start = performance.now();
    const triggerMs = await load.call<number>("trigger", { n: EVENTS, concurrency: 4, businessID: "4711" });
    // First attempts and retries: every third first attempt fails and is retried once.
    const expected = total + Math.floor(total / 3);
    let delivered = 0;
    const deadline = start + 600_000;
    let reported = start;
    while ((delivered = await receiver.call<number>("total")) < expected - WEBHOOKS && performance.now() < deadline) {
      if (performance.now() - reported > 10_000) {
        reported = performance.now();
        process.stderr.write(`backlog: ${delivered} of ~${expected} after ${((reported - start) / 1000).toFixed(0)} s, serve RSS ${Math.round(rss.peak())} MB peak\n`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const seconds = (performance.now() - start) / 1000;
    const peak = rss.stop();
    const cpuUs = (cpuMicros(serve.child.pid!) - cpu) / delivered;
    const gaps = await receiver.call<Record<string, number[]>>("gaps");
    const lateness = (gaps["2"] ?? []).map((g) => g - FIRST_WAIT_MS);
    const rate = delivered / seconds;
    results.push({
      name: `backlog of ${total} first attempts (${WEBHOOKS} webhooks × ${EVENTS} events, queued in ${(triggerMs / 1000).toFixed(1)} s), every third failing, scale ${SCALE}`,
      value: `${delivered} of ~${expected} attempts in ${seconds.toFixed(1)} s = ${Math.round(rate)}/s, ${Math.round(cpuUs)} µs CPU/attempt; serve RSS idle ${Math.round(idleMb)} MB, peak ${Math.round(peak)} MB`,
      target: "RSS ≤ 400 MB",
    });
    results.push({
      name: `retry lateness in that backlog (${lateness.length} retries due ${FIRST_WAIT_MS} ms after their failed attempt)`,
      value: lateness.length
        ? `p50 ${(percentile(lateness, 50) / 1000).toFixed(1)} s, p99 ${(percentile(lateness, 99) / 1000).toFixed(1)} s, max ${(Math.max(...lateness) / 1000).toFixed(1)} s real; backlog ÷ throughput = ${(total / rate).toFixed(1)} s`
        : "no retry arrived",
      target: "≤ backlog ÷ throughput",
    });
  } finally {
    await serve?.stop();
    load.kill();
    receiver.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
};
export default bench;
