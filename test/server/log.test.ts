// `serve`'s log is written in the background, many lines per write (D43): a graceful stop (SIGTERM)
// still writes every line logged before it, whole, in order. `partner-platform serve` in a process of
// its own, its stderr a pipe as under a supervisor.
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startServe } from "../../scripts/bench/lib/procs.js";
import { client } from "./helpers.js";

const N = 300;

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  if (r.status >= 300) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return r.json();
}

describe("serve's log on a graceful stop", () => {
  let receiver: Receiver;
  let dir: string;
  beforeAll(async () => {
    receiver = await startReceiver();
    dir = await mkdtemp(path.join(tmpdir(), "log-"));
    writeFileSync(path.join(dir, "ca.pem"), receiver.pki.caCert);
  });
  afterAll(async () => {
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("holds every delivery outcome and request logged before SIGTERM, each line whole", async () => {
    const serve = await startServe(["--port", "0", "--conformance", "--clock", "virtual", "--log-level", "info", "--webhook-ca", path.join(dir, "ca.pem")]);
    try {
      const form = new URLSearchParams({ grant_type: "client_credentials", client_id: client.clientId, client_secret: client.clientSecret, scope: "webhooks::write" });
      const token = (await (await fetch(`${serve.url}/oauth2/token`, { method: "POST", body: form })).json()) as { access_token: string };
      const { webhookID } = await post(
        `${serve.url}/api/v2/webhooks`,
        { url: receiver.url("log"), events: ["review.created"], businessID: "4711", secret: "whsec-log-0123456789" },
        { authorization: `Bearer ${token.access_token}` },
      );
      for (let i = 0; i < N; i++) await post(`${serve.url}/conformance/events`, { event: "review.created", businessID: "4711" });
      // Every attempt is made and recorded before the advance answers: its outcome is logged by then.
      await post(`${serve.url}/conformance/clock/advance`, { seconds: 0 });
      // A last request, answered (and logged) just before the stop.
      const last = await fetch(`${serve.url}/no-such-path-before-the-stop`);
      expect(last.status).toBe(404);
      await serve.stop();
      expect(serve.child.exitCode).toBe(0);

      const lines = serve.stderr().split("\n").filter(Boolean);
      // JSON.parse throws on a line cut or mixed with another.
      const entries = lines.map((line) => JSON.parse(line) as Record<string, any>);
      const outcomes = entries.filter((e) => e.delivery?.webhookId === webhookID);
      expect(outcomes).toHaveLength(N);
      expect(outcomes.every((e) => e.msg === "delivery attempt succeeded" && e.level === 30)).toBe(true);
      expect(entries.some((e) => e.req?.url === "/no-such-path-before-the-stop")).toBe(true);
      expect(entries.some((e) => e.res?.statusCode === 404)).toBe(true);
      // In the order they were logged.
      expect(entries.map((e) => e.time as number)).toEqual(entries.map((e) => e.time as number).sort((a, b) => a - b));
    } finally {
      await serve.stop();
    }
  }, 120_000);
});
