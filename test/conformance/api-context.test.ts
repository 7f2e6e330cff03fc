// How certify api's requests meet a connection the implementation closed without answering.
import { once } from "node:events";
import { createServer, type AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { createApiContext } from "../../conformance/api/context.js";
import { loadContract, type Operation } from "../../conformance/api/contract.js";

/** An HTTP server by hand that closes the first connection unanswered, once it has read a request, and answers 200 on the others. */
async function closingOnce(): Promise<{ url: string; requests: () => number; close: () => void }> {
  let requests = 0;
  const server = createServer((socket) => {
    socket.on("data", () => {
      if (++requests === 1) return void socket.destroy();
      socket.end("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
    });
  }).listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests, close: () => server.close() };
}

describe("certify api's requests", () => {
  const contract = loadContract();
  const op = (method: string) => ({ ...contract.apiOperations[0]!, method, path: "/closing", onAuthServer: false }) as Operation;

  it("sends a GET once more on a new connection where the first was closed unanswered (RFC 9110 §9.2.2: GET may be repeated)", async () => {
    const server = await closingOnce();
    try {
      const ctx = createApiContext({ baseUrl: server.url, authUrl: server.url, clientId: "c", clientSecret: "s" }, contract);
      expect((await ctx.call(op("GET"), {})).status).toBe(200);
      expect(server.requests()).toBe(2);
    } finally {
      server.close();
    }
  });

  it("says that the implementation closed the connection unanswered, for a POST, which it does not repeat", async () => {
    const server = await closingOnce();
    try {
      const ctx = createApiContext({ baseUrl: server.url, authUrl: server.url, clientId: "c", clientSecret: "s" }, contract);
      await expect(ctx.call(op("POST"), { body: "{}" })).rejects.toThrow(/^POST http:\/\/127\.0\.0\.1:\d+\/closing: the implementation closed the connection without answering \(.+\): a kept-alive connection closed by an idle timeout/);
      expect(server.requests()).toBe(1);
    } finally {
      server.close();
    }
  });
});
