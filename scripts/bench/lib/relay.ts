// The end-to-end arm's ceiling, in a process of its own: the least a server could do per triggered
// event — answer the Control API's trigger (node:http, the JSON body parsed, 201 with an id) and make one
// keep-alive HTTPS POST of a delivery-sized body to the receiver (undici, at most 16 at once as `serve` to one webhook) — with
// no store, no signature, no log and no retry. Driven by the same load generator as `serve`, it shows
// what end to end can reach on this machine at all.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { Agent, request } from "undici";
import { serveCalls } from "./procs.js";

const body = Buffer.alloc(420, 120);

serveCalls({
  /** Starts the relay forwarding to `target`; returns its base URL. */
  async start({ ca, target, connections }: { ca: string; target: string; connections: number }) {
    const agent = new Agent({ connections, connect: { ca } });
    const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const { event } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { event: string };
        res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: randomUUID(), event, queuedFor: 1 }));
        void request(target, { method: "POST", body, headers: { "content-type": "application/json", "x-signature": "t=1,v1=00" }, dispatcher: agent }).then(
          (r) => r.body.dump(),
          (e: Error) => console.error(`relay: ${e.message}`),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  },
});
