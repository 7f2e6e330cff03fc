// One HTTP attempt (parts.ts send, D1, D6): the status once the answer's body has ended, the body
// bounded (past 128 KiB the connection is closed and the status stands), a body that never ends failed
// at the attempt's deadline, a stop ending it at once without an outcome.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDeadlines } from "../../src/server/delivery/deadlines.js";
import { defaultParts } from "../../src/server/delivery/parts.js";
import { partsContext } from "./helpers.js";

const TIMEOUT_MS = 400;
let server: Server;
let base = "";
const dispatcher = new Agent({ connections: 4 });
const send = defaultParts(partsContext({ dispatcher, attemptTimeoutRealMs: TIMEOUT_MS })).send;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    const path = req.url ?? "";
    if (path === "/large") res.writeHead(200, { "content-length": String(1024 * 1024) }).end(Buffer.alloc(1024 * 1024));
    else if (path === "/large-chunked") {
      res.writeHead(202);
      // Chunks until the sender closes the connection.
      const more = () => res.write(Buffer.alloc(64 * 1024), () => !res.destroyed && setImmediate(more));
      more();
    } else if (path === "/trickle") res.writeHead(200, { "content-length": "10" }).write("x");
    else if (path === "/hang") return;
    else if (path === "/continue") {
      res.writeContinue();
      res.writeHead(204).end();
    } else if (path === "/early-hints") {
      res.writeEarlyHints({ link: "</style.css>; rel=preload; as=style" });
      res.writeHead(204).end();
    }
    else res.writeHead(204).end();
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await dispatcher.close().catch(() => undefined);
  server.closeAllConnections();
  server.close();
});

const body = Buffer.from('{"id":"evt"}');

describe("send", () => {
  it("answers the status once the body ended, and keeps it past 128 KiB of body, with or without a length", async () => {
    const deadlines = createDeadlines(TIMEOUT_MS);
    expect(await send(`${base}/ok`, body, "t=1,v1=00", deadlines.start())).toEqual({ status: 204, timedOut: false });
    expect(await send(`${base}/large`, body, "t=1,v1=00", deadlines.start())).toEqual({ status: 200, timedOut: false });
    expect(await send(`${base}/large-chunked`, body, "t=1,v1=00", deadlines.start())).toEqual({ status: 202, timedOut: false });
  });

  it("fails an answer whose body does not end, or that never comes, at the attempt's deadline", async () => {
    const deadlines = createDeadlines(TIMEOUT_MS);
    for (const path of ["/trickle", "/hang"]) {
      const started = performance.now();
      const result = await send(`${base}${path}`, body, "t=1,v1=00", deadlines.start());
      expect(result).toEqual({ error: "no complete answer within the attempt timeout", timedOut: true });
      expect(performance.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    }
  });

  it("fails an answer with a 100 Continue the delivery did not ask for, saying so (D52), and skips a 103 Early Hints", async () => {
    const deadlines = createDeadlines(60_000);
    const unasked = await send(`${base}/continue`, body, "t=1,v1=00", deadlines.start());
    expect(unasked).toEqual({ error: "bad response: not one HTTP/1.1 answer (an unasked 100 Continue is refused, D52)", timedOut: false });
    expect(await send(`${base}/early-hints`, body, "t=1,v1=00", deadlines.start())).toEqual({ status: 204, timedOut: false });
  });

  it("throws at once when the engine stops (no outcome), and reports a refused connection as an error", async () => {
    const deadlines = createDeadlines(60_000);
    const attempt = send(`${base}/hang`, body, "t=1,v1=00", deadlines.start());
    setTimeout(() => deadlines.abortAll(new Error("the server is stopping")), 50);
    await expect(attempt).rejects.toThrow();
    const closed = createServer();
    closed.listen(0, "127.0.0.1");
    await new Promise((resolve) => closed.once("listening", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await send(`http://127.0.0.1:${port}/x`, body, "t=1,v1=00", deadlines.start());
    expect(refused.timedOut).toBe(false);
    expect(refused.error).toMatch(/ECONNREFUSED/);
  });
});
