// Proof that the receiver certification certifies: the package's example receivers pass, and each
// broken receiver fails exactly the checks listed for it.
import { once } from "node:events";
import type { RequestListener } from "node:http";
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readRawBody, sendProblem, verifyDelivery } from "@partner-platform/sdk";
import { createExpressReceiver } from "../../examples/receivers/express.js";
import { createFastifyReceiver } from "../../examples/receivers/fastify.js";
import { createNodeReceiver } from "../../examples/receivers/node-http.js";
import { brokenReceivers, handWrittenReceiver, type RawReceiver } from "../../conformance/broken/receivers.js";
import { compareWithExpected, loadExpectedFailures } from "../../conformance/framework/expected-failures.js";
import { formatResult } from "../../conformance/framework/report.js";
import { certifyHandler, certifyReceiver, type ReceiverSuiteOptions } from "../../conformance/receiver/index.js";
import type { RunOptions } from "../../conformance/framework/check.js";
import { packageRoot } from "../../src/paths.js";
import { misnamedChecks, suites, unprovenChecks } from "../../scripts/check-tables.js";

// Outside ASCII, so that a receiver keying the HMAC with another encoding than UTF-8 is caught (D2).
const secret = "whsec-partner-receiver-é✓-0123456789";
const expected = loadExpectedFailures(path.join(packageRoot, "conformance/broken/receiver-expected-failures.json"));
// A short attempt timeout keeps the slow receiver's run short; the other receivers answer at once, and
// 1.5 s leaves room for a loaded machine (a first answer took 350 ms beside other work).
const slowReceiver = { timeoutMs: 1500, delayMs: 2000 };
const failures = (report: Awaited<ReturnType<typeof certifyReceiver>>) => report.results.filter((r) => r.status !== "passed").map(formatResult);

/** Certifies a node:http handler in process, or a receiver that speaks HTTP by hand on a port. */
async function certifyBroken(receiver: RequestListener | RawReceiver, options: Omit<ReceiverSuiteOptions, "url">, run: RunOptions = {}) {
  if (typeof receiver === "function") return certifyHandler(receiver, options, run);
  const server = createNetServer((socket) => receiver.connection(socket)).listen(0, "127.0.0.1");
  try {
    return await certifyReceiver({ url: await urlOf(server, "/"), ...options }, run);
  } finally {
    server.close();
  }
}

async function urlOf(server: NetServer, pathname: string): Promise<string> {
  if (!server.listening) await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}${pathname}`;
}

describe("receiver certification", () => {
  it("certifies the node:http example receiver", async () => {
    const server = createNodeReceiver(secret, () => undefined).listen(0, "127.0.0.1");
    try {
      expect(failures(await certifyReceiver({ url: await urlOf(server, "/"), secret }))).toEqual([]);
    } finally {
      server.close();
    }
  });

  it("certifies the Express example receiver", async () => {
    const server = createExpressReceiver(secret, () => undefined).listen(0, "127.0.0.1");
    try {
      expect(failures(await certifyReceiver({ url: await urlOf(server, "/webhooks/partner-platform"), secret }))).toEqual([]);
    } finally {
      server.close();
    }
  });

  it("certifies the Fastify example receiver", async () => {
    const app = createFastifyReceiver(secret, () => undefined);
    const origin = await app.listen({ port: 0, host: "127.0.0.1" });
    try {
      expect(failures(await certifyReceiver({ url: `${origin}/webhooks/partner-platform`, secret }))).toEqual([]);
    } finally {
      await app.close();
    }
  });

  // What D3 and D6 leave to a receiver: dropping events that are not fresh, acknowledged all the same (the
  // suite delivers one older than the last retry), and answering forgeries slowly (the timeout is the
  // service's, and the service sends none).
  it("certifies receivers that drop events more than 5 minutes old, or answer forgeries after the attempt timeout", async () => {
    const handled: string[] = [];
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const receiver =
      (policy: { maxAgeSeconds?: number; forgeryDelayMs?: number }): RequestListener =>
      (req, res) =>
        void (async () => {
          const body = await readRawBody(req, 1024 * 1024);
          if (body === "too-large") return void res.writeHead(413).end();
          const result = verifyDelivery(body, req.headers, secret);
          if (!result.ok) {
            await sleep(policy.forgeryDelayMs ?? 0);
            return void sendProblem(res, result.problem);
          }
          const { id, timestamp } = JSON.parse(body.toString("utf8")) as { id: string; timestamp: string };
          const fresh = policy.maxAgeSeconds === undefined || Date.now() - Date.parse(timestamp) <= policy.maxAgeSeconds * 1000;
          if (fresh) handled.push(id);
          res.writeHead(204).end();
        })();
    const report = await certifyHandler(receiver({ maxAgeSeconds: 300 }), { secret });
    expect(failures(report)).toEqual([]);
    expect(report.results.find((r) => r.id === "acknowledges-old-event")?.status).toBe("passed");
    expect(handled.length).toBeGreaterThan(0);
    // Just past the timeout (the suite waits twice it for a forgery's answer): some 70 forgeries each wait so long.
    const slowRefusals = await certifyHandler(receiver({ forgeryDelayMs: slowReceiver.timeoutMs + 100 }), { secret, timeoutMs: slowReceiver.timeoutMs });
    expect(failures(slowRefusals)).toEqual([]);
  }, 240_000);

  // D52: a receiver may close a connection after any answer, without announcing it; a delivery that finds
  // the connection closing is made again, as a server's next attempt would be.
  it("certifies a hand-written receiver that closes its connection after each refusal, unannounced", async () => {
    const receiver = handWrittenReceiver((body, headers) => verifyDelivery(body, headers, secret).ok, { closesAfterRefusal: true });
    expect(failures(await certifyBroken(receiver, { secret }))).toEqual([]);
  });

  // A receiver at another path than --url answers 404 to everything: a setup error, not 20 passed refusal checks.
  it("stops with the wrong --url when every authentic delivery gets one 404, 405 or redirect", async () => {
    for (const status of [404, 405, 308]) {
      const handler: RequestListener = (_req, res) => void res.writeHead(status, status === 308 ? { location: "/webhooks" } : {}).end();
      await expect(certifyHandler(handler, { secret })).rejects.toThrow(new RegExp(`every authentic delivery to .* was answered ${status}: is --url the path`));
    }
  });

  it("names the likeliest cause of a fault: a case-blind compare, a trimmed body, a body verified in part, the slow delivery's check", async () => {
    const messageOf = async (receiver: RequestListener | RawReceiver, id: string, only = [id], timeoutMs?: number) => {
      const report = await certifyBroken(receiver, { secret, ...(timeoutMs ? { timeoutMs } : {}) }, { only });
      const result = report.results.find((r) => r.id === id)!;
      expect(result.status).toBe("failed");
      return `${result.message} ${JSON.stringify(result.actual)}`;
    };
    expect(await messageOf(brokenReceivers["decodes-hex-signature"]!(secret, slowReceiver), "rejects-uppercase-signature")).toMatch(/compared without regard to case/);
    expect(await messageOf(brokenReceivers["verifies-raw-or-indented-by-2"]!(secret, slowReceiver), "rejects-reserialized-body-signature")).toMatch(/is the body trimmed before verifying\?/);
    // One read of 8 KiB, as a hand-rolled server might make: a larger body is verified in part, and refused as a forgery.
    const firstRead: RequestListener = (req, res) =>
      void readRawBody(req, 1024 * 1024).then((body) => {
        if (body === "too-large") return void res.writeHead(413).end();
        res.writeHead(verifyDelivery(body.subarray(0, 8192), req.headers, secret).ok ? 204 : 401).end();
      });
    expect(await messageOf(firstRead, "acknowledges-64-kib-event")).toMatch(/refused with 401, as a forgery: is the signature verified over the whole body/);
    const slow = brokenReceivers["answers-after-timeout"]!(secret, slowReceiver);
    expect(await messageOf(slow, "answers-within-attempt-timeout", ["acknowledges-every-event", "answers-within-attempt-timeout"], slowReceiver.timeoutMs)).toMatch(/a delivery of acknowledges-every-event/);
  });

  it("times a delivery of its own when the timeout check runs alone", async () => {
    const only = ["answers-within-attempt-timeout"];
    const slow = await certifyBroken(brokenReceivers["answers-after-timeout"]!(secret, slowReceiver), { secret, timeoutMs: slowReceiver.timeoutMs }, { only });
    const ran = (report: Awaited<ReturnType<typeof certifyReceiver>>) => report.results.filter((r) => r.status !== "skipped").map((r) => [r.id, r.status]);
    expect(ran(slow)).toEqual([["answers-within-attempt-timeout", "failed"]]);
    const server = createNodeReceiver(secret, () => undefined).listen(0, "127.0.0.1");
    try {
      const fast = await certifyReceiver({ url: await urlOf(server, "/"), secret }, { only });
      expect(ran(fast)).toEqual([["answers-within-attempt-timeout", "passed"]]);
    } finally {
      server.close();
    }
  });

  it("lists every broken receiver in the expected-failures file, and nothing else", () => {
    expect(Object.keys(expected.variants).sort()).toEqual(Object.keys(brokenReceivers).sort());
  });

  it("names only existing checks there, and a broken receiver that fails each check", () => {
    expect(misnamedChecks(suites.receiver)).toEqual({ unknown: [], both: [] });
    expect(unprovenChecks(suites.receiver), "checks that no broken receiver fails: add a variant that proves each can fail").toEqual([]);
  });

  it.each(Object.keys(brokenReceivers).map((id) => [id] as const))("catches the broken receiver %s with the checks that name its fault", async (id) => {
    const report = await certifyBroken(brokenReceivers[id]!(secret, slowReceiver), { secret, timeoutMs: slowReceiver.timeoutMs });
    const entry = expected.variants[id]!;
    expect(compareWithExpected(report, entry), failures(report).join("\n")).toEqual({ unexpected: [], stale: [] });
    expect(entry.fails.length).toBeGreaterThan(0);
  });
});
