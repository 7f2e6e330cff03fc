// The suite's webhook receiver: HTTPS with a per-run CA, scriptable per attempt, recording the raw
// bytes, headers and arrival time of every attempt.
import { EventEmitter } from "node:events";
import { waitUntil } from "./wait.js";
import https from "node:https";
import type { IncomingHttpHeaders } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { createTestPki, type TestPki } from "./pki.js";

/** How the receiver answers one attempt. */
export type Answer =
  | { kind: "status"; status: number; headers?: Record<string, string> }
  /** Never answer: the sender must give up at its attempt timeout. */
  | { kind: "hang" }
  /** Destroy the connection without an answer. */
  | { kind: "close" };

export const answers = {
  ok: { kind: "status", status: 200 } as Answer,
  status: (status: number, headers?: Record<string, string>): Answer => ({ kind: "status", status, headers }),
  redirect: (location: string): Answer => ({ kind: "status", status: 307, headers: { location } }),
  hang: { kind: "hang" } as Answer,
  close: { kind: "close" } as Answer,
};

export interface Delivery {
  /** Order of arrival across the whole receiver, from 0. */
  seq: number;
  /** The endpoint (path) it arrived at. */
  endpoint: string;
  method: string;
  headers: IncomingHttpHeaders;
  /** The exact body bytes received. */
  body: Buffer;
  /** `performance.now()` when the request head arrived. */
  arrivedAt: number;
  answer: Answer;
}

export interface Receiver {
  /** HTTPS URL of an endpoint, e.g. `url("hook-a")` → `https://127.0.0.1:PORT/hook-a`. */
  url(endpoint: string): string;
  pki: TestPki;
  /** Every attempt so far, in arrival order. */
  readonly deliveries: readonly Delivery[];
  /** Attempts at one endpoint. */
  at(endpoint: string): Delivery[];
  /** Queue answers for the next attempts at an endpoint; when the queue is empty it answers `fallback`. */
  script(endpoint: string, queue: Answer[], fallback?: Answer): void;
  /** Resolves when `predicate` holds, re-checked on every arrival; rejects after `timeoutMs` (real time). */
  waitFor(predicate: (deliveries: readonly Delivery[]) => boolean, timeoutMs: number, what: string): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(options: { host?: string; pki?: TestPki } = {}): Promise<Receiver> {
  const host = options.host ?? "127.0.0.1";
  const pki = options.pki ?? (await createTestPki());
  const deliveries: Delivery[] = [];
  const scripts = new Map<string, { queue: Answer[]; fallback: Answer }>();
  const arrivals = new EventEmitter();
  const sockets = new Set<Socket>();

  const server = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const arrivedAt = performance.now();
    const endpoint = decodeURIComponent((req.url ?? "/").slice(1).split("?")[0] ?? "");
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const script = scripts.get(endpoint);
      const answer = script?.queue.shift() ?? script?.fallback ?? answers.ok;
      deliveries.push({
        seq: deliveries.length,
        endpoint,
        method: req.method ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks),
        arrivedAt,
        answer,
      });
      arrivals.emit("arrival");
      if (answer.kind === "status") {
        res.writeHead(answer.status, { "content-type": "text/plain", ...answer.headers }).end("ok");
      } else if (answer.kind === "close") {
        req.socket.destroy();
      }
      // "hang": leave the request open; the sender's timeout (or close()) ends it.
    });
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const origin = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;

  return {
    url: (endpoint) => `${origin}/${encodeURIComponent(endpoint)}`,
    pki,
    deliveries,
    at: (endpoint) => deliveries.filter((d) => d.endpoint === endpoint),
    script(endpoint, queue, fallback = answers.ok) {
      scripts.set(endpoint, { queue: [...queue], fallback });
    },
    waitFor: (predicate, timeoutMs, what) => waitUntil(arrivals, "arrival", () => predicate(deliveries), timeoutMs, what),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
