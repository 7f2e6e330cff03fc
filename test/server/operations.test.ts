// What an operator gets from the reference server (D33): a JSON-lines log with 5xx, refusals and delivery
// outcomes and never a secret, parser-level refusals as problem+json, and slow connections closed.
import { once } from "node:events";
import { connect } from "node:net";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import { control } from "./helpers.js";

const [acme] = loadConfig().clients;
const lines: Record<string, any>[] = [];
const text: string[] = [];
let server: RunningServer;

beforeAll(async () => {
  const stream = new PassThrough();
  let buffered = "";
  stream.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk;
    const complete = buffered.split("\n");
    buffered = complete.pop()!;
    for (const line of complete) {
      text.push(line);
      lines.push(JSON.parse(line) as Record<string, any>);
    }
  });
  server = await startServer({
    clock: { mode: "virtual" },
    conformance: true,
    logLevel: "info",
    logStream: stream,
    timeouts: { headersMs: 300, requestMs: 2000, checkIntervalMs: 100 },
    // A fault on one URL, to see a 5xx logged: through the registration seam, as variants do.
    registration: (base) => ({
      refuseUrl: async (url) => {
        if (url.includes("explode")) throw new Error("refuseUrl exploded");
        return base.refuseUrl(url);
      },
    }),
  });
});
afterAll(async () => server.close());

/** Polls the collected log (never a fixed sleep) until a line matches. */
async function logged(match: (line: Record<string, any>) => boolean): Promise<Record<string, any>> {
  for (;;) {
    const found = lines.find(match);
    if (found) return found;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const basic = `Basic ${Buffer.from(`${acme!.clientId}:${acme!.clientSecret}`).toString("base64")}`;
const webhookSecret = "whsec-operations-test-0123456789";

async function token(): Promise<string> {
  const r = await fetch(`${server.url}/oauth2/token`, {
    method: "POST",
    body: "grant_type=client_credentials",
    headers: { "content-type": "application/x-www-form-urlencoded", authorization: basic },
  });
  return ((await r.json()) as { access_token: string }).access_token;
}

const register = async (bearer: string, url: string) =>
  fetch(`${server.url}/api/v2/webhooks`, {
    method: "POST",
    body: JSON.stringify({ url, events: ["lead.created"], businessID: "4711", secret: webhookSecret }),
    headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
  });

describe("the log (JSON lines)", () => {
  it("logs a 5xx with its request id and error, refusals and delivery outcomes, and never a secret, token or password", async () => {
    const bearer = await token();
    // A refused client authentication, with the secret in the body.
    await fetch(`${server.url}/oauth2/token`, { method: "POST", body: `grant_type=client_credentials&client_id=${acme!.clientId}&client_secret=guessed-secret-123`, headers: { "content-type": "application/x-www-form-urlencoded" } });
    // An SSRF refusal, and a URL with a password (refused).
    expect((await register(bearer, "https://10.0.0.1/hook")).status).toBe(422);
    expect((await register(bearer, "https://user:hunter2-password@hooks.example.com/hook")).status).toBe(422);
    // A 500.
    const failed = await register(bearer, "https://explode.example.com/hook");
    expect(failed.status).toBe(500);
    // A delivery that fails (the name does not resolve).
    expect((await register(bearer, "https://does-not-resolve.invalid/hook")).status).toBe(201);
    await control(server).trigger("lead.created", "4711");
    await control(server).advance(0);

    const error = await logged((l) => l.level === 50);
    expect(error.reqId).toBeDefined();
    expect(error.err.message).toBe("refuseUrl exploded");
    expect(await logged((l) => l.refusal === "invalid-client")).toMatchObject({ clientId: acme!.clientId, level: 40 });
    expect(await logged((l) => l.status === 422 && /not a public address/.test(l.msg))).toHaveProperty("reqId");
    expect(await logged((l) => l.delivery !== undefined)).toMatchObject({ delivery: { ok: false, recorded: "failed" } });
    // Each request's two lines (D33; written without the redaction pass, D43): its id, what was asked, the answer.
    const incoming = await logged((l) => l.msg === "incoming request" && l.req?.url === "/api/v2/webhooks");
    expect(incoming).toMatchObject({ level: 30, reqId: expect.any(String), req: { method: "POST", host: expect.any(String), remoteAddress: expect.any(String), remotePort: expect.any(Number) } });
    expect(await logged((l) => l.msg === "request completed" && l.reqId === incoming.reqId)).toMatchObject({ level: 30, res: { statusCode: 422 }, responseTime: expect.any(Number) });
    // Whatever a future log call passes: the redaction paths censor it.
    server.app.log.info({ probe: { client_secret: "probe-secret-1", authorization: "Bearer probe-token-2", password: "probe-password-3", smtpUrl: "smtp://u:probe-4@h" } }, "redaction probe");
    expect((await logged((l) => l.msg === "redaction probe")).probe).toEqual({ client_secret: "[redacted]", authorization: "[redacted]", password: "[redacted]", smtpUrl: "[redacted]" });
    const all = text.join("\n");
    for (const secret of [acme!.clientSecret, "guessed-secret-123", webhookSecret, bearer, basic.slice(6), "hunter2-password"]) {
      expect(all).not.toContain(secret);
    }
  });
});

/** Sends raw bytes and reads the whole answer until the server closes the connection. */
async function rawExchange(bytes: string): Promise<string> {
  const { port } = new URL(server.url);
  const socket = connect(Number(port), "127.0.0.1");
  let answer = "";
  socket.setEncoding("utf8").on("data", (chunk: string) => (answer += chunk));
  await once(socket, "connect");
  socket.write(bytes);
  await once(socket, "close");
  return answer;
}

describe("parser-level refusals and slow clients", () => {
  it("closes a connection whose request head never ends (slowloris) with 408 problem+json", async () => {
    const answer = await rawExchange("GET /api/v2/businesses/search HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain("Content-Type: application/problem+json");
  });

  it("answers a head over Node's limit with 431 and a request line it cannot parse with 400, both problem+json", async () => {
    const big = await rawExchange(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(60_000)}\r\n\r\n`);
    expect(big).toMatch(/^HTTP\/1\.1 431 /);
    const bad = await rawExchange("NOT A REQUEST\r\n\r\n");
    expect(bad).toMatch(/^HTTP\/1\.1 400 /);
    for (const answer of [big, bad]) {
      expect(answer).toContain("Content-Type: application/problem+json");
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toHaveProperty("status");
    }
  });

  it("still answers a request sent at once", async () => {
    const r = await fetch(`${server.url}/api/v2/businesses/search?category_id=1000123&zip=10001`, { headers: { authorization: `Bearer ${await token()}` } });
    expect(r.status).toBe(200);
  });
});
