// The suite's webhook receiver: HTTPS with a certificate for its host from a per-run (or kept) CA,
// scriptable per attempt, recording the raw bytes, headers and arrival time of every attempt, and the
// connections the sender refused (a failed handshake, or one closed before any request). It can present
// another certificate for a while, to see that the sender refuses it.
import { EventEmitter } from "node:events";
import { waitUntil } from "./wait.js";
import https from "node:https";
import type { IncomingHttpHeaders } from "node:http";
import { lookup } from "node:dns/promises";
import { createServer as createTcpServer, isIP, type AddressInfo, type Server, type Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { createTestCa, issueServerCertificate, type TestCa, type TestPki } from "./pki.js";

/** How the receiver answers one attempt. */
export type Answer =
  /** With `interim`, a 103 Early Hints first (RFC 9110 §15.2: an interim answer, never the final one). */
  | { kind: "status"; status: number; headers?: Record<string, string>; interim?: boolean }
  /** Never answer: the sender must give up at its attempt timeout. */
  | { kind: "hang" }
  /** A status and the start of a body that never ends (its Content-Length is never reached): no complete answer either (D6). */
  | { kind: "unfinished"; status: number }
  /** Destroy the connection without an answer. */
  | { kind: "close" };

export const answers = {
  ok: { kind: "status", status: 200 } as Answer,
  status: (status: number, headers?: Record<string, string>): Answer => ({ kind: "status", status, headers }),
  redirect: (location: string): Answer => ({ kind: "status", status: 307, headers: { location } }),
  // The connection closed after it: a client that took the 103 for the answer must not read this one as the next's.
  afterInterim: (status: number): Answer => ({ kind: "status", status, headers: { connection: "close" }, interim: true }),
  hang: { kind: "hang" } as Answer,
  unfinished: (status: number): Answer => ({ kind: "unfinished", status }),
  close: { kind: "close" } as Answer,
};

export interface Delivery {
  /** Order of arrival across the whole receiver, from 0. */
  seq: number;
  /** The endpoint (path) it arrived at. */
  endpoint: string;
  /** The request-target as sent (path and query). */
  target: string;
  method: string;
  headers: IncomingHttpHeaders;
  /** The exact body bytes received. */
  body: Buffer;
  /** `performance.now()` when the request head arrived. */
  arrivedAt: number;
  /** How it was answered; undefined while a responder has not decided yet. */
  answer?: Answer;
  /**
   * `performance.now()` right before the answer was written (a status) or the connection destroyed
   * (close): the sender cannot have had it sooner, so a wait counted from here is never too short.
   */
  answeringAt?: number;
  /** `performance.now()` once the answer was handed to the OS (a status) or the connection destroyed (close). */
  answeredAt?: number;
  /** `performance.now()` when the sender closed the connection of an attempt left unanswered (hang) or unfinished: it gave up. */
  abandonedAt?: number;
  /** `performance.now()` when the connection it came on was made (its TLS handshake done). */
  connectedAt: number;
  /** The sender's TCP port on that connection: with `connectedAt`, tells which process sent it. */
  remotePort: number;
  /** `performance.now()` when the connection it came on closed, by either side. */
  connectionClosedAt?: number;
  /** The certificate its connection was made with: "own", or the label of one `present` put in place. */
  presented: string;
}

/** A certificate the receiver can present instead of its own (`present`), named by `label`. */
export interface PresentedCertificate {
  label: string;
  cert: string;
  key: string;
}

/** A connection the sender gave up on before sending a request: a failed handshake, or one closed after it. */
export interface Refusal {
  at: number;
  /** The certificate presented on it ("own" or a label). */
  presented: string;
  how: string;
}

/** Decides the answer to one attempt (it may take its time: the attempt waits for it). */
export type Responder = (delivery: Delivery) => Answer | Promise<Answer>;

export interface Receiver {
  /** HTTPS URL of an endpoint, e.g. `url("hook-a")` → `https://127.0.0.1:PORT/hook-a`. */
  url(endpoint: string): string;
  pki: TestPki;
  /** Every attempt so far, in arrival order. */
  readonly deliveries: readonly Delivery[];
  /** TLS handshakes that failed (e.g. a sender that does not trust the CA), with `performance.now()` and the reason. */
  readonly tlsErrors: readonly { at: number; message: string }[];
  /** Connections refused by the sender (handshakes that failed, connections closed before any request). */
  readonly refusals: readonly Refusal[];
  /** Responders that threw (a fault of the suite, not of the sender): their attempts were answered 500. */
  readonly responderErrors: readonly string[];
  /**
   * Attempts that reached the receiver but never came whole: connections closed before any request came
   * over them, and requests whose body never came whole. A sender may have given each up (D6: connecting
   * and TLS are within the attempt timeout, which a loaded machine can spend) and counted a failure that
   * `deliveries` does not show.
   */
  readonly unfinished: readonly Unfinished[];
  /** A certificate for a host, issued by the receiver's CA (which the sender trusts); with `validDays` below 0, expired. */
  issue(host: string, validDays?: number): Promise<TestPki>;
  /**
   * Presents `certificate` on new connections (undefined: the receiver's own again) and closes the open
   * ones, so that the sender's next attempt makes a handshake with it.
   */
  present(certificate: PresentedCertificate | undefined): void;
  /** Attempts at one endpoint. */
  at(endpoint: string): Delivery[];
  /** Queue answers for the next attempts at an endpoint; when the queue is empty it answers `fallback`. */
  script(endpoint: string, queue: Answer[], fallback?: Answer): void;
  /** Answers every attempt at an endpoint with what `responder` decides for it. */
  respond(endpoint: string, responder: Responder): void;
  /** Resolves when `predicate` holds, re-checked on every arrival and answer; rejects after `timeoutMs` (real time). */
  waitFor(predicate: (deliveries: readonly Delivery[]) => boolean, timeoutMs: number, what: string): Promise<void>;
  close(): Promise<void>;
}

/** An attempt that reached the receiver without a whole request: when it did and when it ended, and where (a request's endpoint; a connection has none). */
export interface Unfinished {
  at: number;
  endedAt: number;
  how: "a connection closed before any request" | "a request whose body never came whole";
  endpoint?: string;
}

export interface ReceiverOptions {
  /** Address to listen on, and the host of its URLs and of its certificate (default 127.0.0.1). */
  host?: string;
  /** Default: any free port. */
  port?: number;
  /** The CA that issues its certificate (default: a new one for this receiver). */
  ca?: TestCa;
  /** Where a host name is listened on (default: every address it resolves to). */
  addresses?: string[];
}

/**
 * The endpoint a request-target names: its path, without the leading "/" or the query. An absolute-form
 * target (`https://host:port/path`) names it by its path too: a server must accept that form (RFC 9112
 * §3.2.2) though a client sends it to proxies only, so the scenarios go on and
 * delivery-goes-to-the-registered-url says what was sent.
 */
function endpointOf(target: string): string {
  const path = target.startsWith("/") || !URL.canParse(target) ? target : new URL(target).pathname;
  const name = path.replace(/^\//, "").split("?")[0] ?? "";
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

export async function startReceiver(options: ReceiverOptions = {}): Promise<Receiver> {
  const host = options.host ?? "127.0.0.1";
  const ca = options.ca ?? (await createTestCa());
  const pki = await issueServerCertificate(ca, host);
  const deliveries: Delivery[] = [];
  const tlsErrors: { at: number; message: string }[] = [];
  const refusals: Refusal[] = [];
  const responderErrors: string[] = [];
  const unfinished: Unfinished[] = [];
  /** Request heads so far on each TCP connection, by its peer's address and port (the TLS socket has the same). */
  const heads = new Map<string, { count: number }>();
  const peerOf = (socket: Socket) => `${socket.remoteAddress}|${socket.remotePort}`;
  /** The certificate presented on new connections, and on each connection made so far with how many requests came over it. */
  let presenting = "own";
  const connections = new Map<TLSSocket, { presented: string; connectedAt: number; requests: number; closedByReceiver: boolean; deliveries: Delivery[] }>();
  const responders = new Map<string, Responder>();
  const changes = new EventEmitter();
  const sockets = new Set<Socket>();

  const server = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const arrivedAt = performance.now();
    const endpoint = endpointOf(req.url ?? "/");
    const onConnection = heads.get(peerOf(req.socket));
    if (onConnection) onConnection.count++;
    req.once("close", () => {
      if (req.complete) return;
      unfinished.push({ at: arrivedAt, endedAt: performance.now(), how: "a request whose body never came whole", endpoint });
      changes.emit("change");
    });
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      const connection = connections.get(req.socket as TLSSocket);
      if (connection) connection.requests++;
      const presented = connection?.presented ?? presenting;
      const delivery: Delivery = {
        seq: deliveries.length,
        endpoint,
        target: req.url ?? "",
        method: req.method ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks),
        arrivedAt,
        presented,
        connectedAt: connection?.connectedAt ?? arrivedAt,
        remotePort: req.socket.remotePort ?? 0,
      };
      deliveries.push(delivery);
      connection?.deliveries.push(delivery);
      changes.emit("change");
      // Called at once, before the waits that the change resolved go on (scenarios count on its state); one
      // that throws (a fault of the suite) answers 500 and is reported, never ends the process.
      let answer: Answer;
      try {
        answer = await (responders.get(endpoint) ?? (() => answers.ok))(delivery);
      } catch (error) {
        responderErrors.push(`${endpoint}: ${(error as Error).message}`);
        answer = answers.status(500);
      }
      delivery.answer = answer;
      const answered = () => {
        delivery.answeredAt = performance.now();
        changes.emit("change");
      };
      if (answer.kind !== "hang" && answer.kind !== "unfinished") delivery.answeringAt = performance.now();
      if (answer.kind === "status") {
        if (answer.interim) res.writeEarlyHints({ link: "</receipt.css>; rel=preload; as=style" });
        res.writeHead(answer.status, { "content-type": "text/plain", ...answer.headers }).end("ok", answered);
      } else if (answer.kind === "close") {
        req.socket.destroy();
        answered();
      } else {
        // "hang": leave the request open; the sender's timeout (or close()) ends it. "unfinished" the same,
        // once it has written a status and 8 of the 64 bytes its Content-Length promises.
        if (answer.kind === "unfinished") res.writeHead(answer.status, { "content-type": "text/plain", "content-length": "64" }).write("received");
        const abandoned = () => {
          delivery.abandonedAt ??= performance.now();
          changes.emit("change");
        };
        if (req.socket.destroyed) abandoned();
        else req.socket.once("close", abandoned);
        changes.emit("change");
      }
    });
  });
  // A connection kept alive is never closed for idling (Node's default: after 5 s): a server that sends
  // over a pooled connection as the receiver closes it would see a failure that no check scripted (D52).
  server.keepAliveTimeout = 0;
  server.on("tlsClientError", (error: Error & { reason?: string }) => {
    // OpenSSL's `reason` ("tlsv1 alert unknown ca") says it; its message adds library internals.
    const message = error.reason ?? error.message;
    tlsErrors.push({ at: performance.now(), message });
    refusals.push({ at: performance.now(), presented: presenting, how: `the handshake failed (${message})` });
    changes.emit("change");
  });
  // A client checks the host name once the handshake is done (Node.js does): it then closes the connection unused.
  server.on("secureConnection", (socket: TLSSocket) => {
    const connection = { presented: presenting, connectedAt: performance.now(), requests: 0, closedByReceiver: false, deliveries: [] as Delivery[] };
    connections.set(socket, connection);
    socket.once("close", () => {
      connections.delete(socket);
      const closedAt = performance.now();
      for (const delivery of connection.deliveries) delivery.connectionClosedAt = closedAt;
      if (connection.requests > 0 || connection.closedByReceiver) return;
      refusals.push({ at: performance.now(), presented: connection.presented, how: "closed after the handshake, before any request" });
      changes.emit("change");
    });
  });
  server.on("connection", (socket: Socket) => {
    const acceptedAt = performance.now();
    const peer = peerOf(socket);
    const onConnection = { count: 0 };
    heads.set(peer, onConnection);
    sockets.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
      heads.delete(peer);
      if (onConnection.count > 0) return;
      unfinished.push({ at: acceptedAt, endedAt: performance.now(), how: "a connection closed before any request" });
      changes.emit("change");
    });
  });
  // A name is listened on at every address it resolves to (localhost: 127.0.0.1 and ::1): an implementation
  // may connect to any of them. The others hand their connections to the HTTPS server.
  const addresses = isIP(host) !== 0 ? [host] : (options.addresses ?? [...new Set((await lookup(host, { all: true })).map((a) => a.address))]);
  const listening = (listener: Server, port: number, address: string) =>
    new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(port, address, () => resolve());
    });
  await listening(server, options.port ?? 0, addresses[0]!);
  const { port } = server.address() as AddressInfo;
  const forwarders = addresses.slice(1).map(() => createTcpServer((socket) => server.emit("connection", socket)));
  await Promise.all(forwarders.map((forwarder, i) => listening(forwarder, port, addresses[i + 1]!)));
  const origin = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;

  return {
    url: (endpoint) => `${origin}/${encodeURIComponent(endpoint)}`,
    pki,
    deliveries,
    tlsErrors,
    refusals,
    responderErrors,
    unfinished,
    issue: (otherHost, validDays) => issueServerCertificate(ca, otherHost, validDays),
    present(certificate) {
      presenting = certificate?.label ?? "own";
      server.setSecureContext({ cert: certificate?.cert ?? pki.cert, key: certificate?.key ?? pki.key });
      for (const connection of connections.values()) connection.closedByReceiver = true;
      for (const socket of sockets) socket.destroy();
    },
    at: (endpoint) => deliveries.filter((d) => d.endpoint === endpoint),
    script(endpoint, queue, fallback = answers.ok) {
      const rest = [...queue];
      responders.set(endpoint, () => rest.shift() ?? fallback);
    },
    respond(endpoint, responder) {
      responders.set(endpoint, responder);
    },
    waitFor: (predicate, timeoutMs, what) => waitUntil(changes, "change", () => predicate(deliveries), timeoutMs, what),
    async close() {
      for (const connection of connections.values()) connection.closedByReceiver = true;
      for (const socket of sockets) socket.destroy();
      await Promise.all([server, ...forwarders].map((listener) => new Promise<void>((resolve) => listener.close(() => resolve()))));
    },
  };
}
