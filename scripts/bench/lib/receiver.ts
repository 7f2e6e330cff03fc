// Benchmark receiver, in a process of its own: HTTPS with keep-alive, answers /ok/* with 200 and
// /fail/* with 500, counts per path, and (optionally) the real gaps between attempts of one event.
// It listens on one port, and on more on request (`origins`): each port is an origin (host:port) of its own.
import { once } from "node:events";
import type http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { createTestCa, issueServerCertificate } from "../../../conformance/harness/pki.js";
import { serveCalls } from "./procs.js";

const pki = await issueServerCertificate(await createTestCa(), "127.0.0.1");
const counts = new Map<string, number>();
/** Per endpoint and event id: arrival time (ms since the epoch) of its last attempt, and how many were made. */
const events = new Map<string, { last: number; attempts: number }>();
/** Per attempt number (2 = first retry): real gaps since the previous attempt of the same event. */
const gaps = new Map<number, number[]>();
let trackEvents = false;
/** When the last request ended (ms since the epoch): a drain's end, whatever the poll that saw it. */
let lastArrival = 0;

function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const url = req.url ?? "/";
    counts.set(url, (counts.get(url) ?? 0) + 1);
    lastArrival = performance.timeOrigin + performance.now();
    let seen: { last: number; attempts: number } | undefined;
    if (trackEvents && chunks.length) {
      const now = lastArrival;
      const id = `${url} ${(JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id?: string }).id}`;
      {
        seen = events.get(id);
        if (seen) {
          seen.attempts++;
          const list = gaps.get(seen.attempts) ?? [];
          list.push(now - seen.last);
          gaps.set(seen.attempts, list);
          seen.last = now;
        } else events.set(id, (seen = { last: now, attempts: 1 }));
      }
    }
    // /fail/*: every attempt fails; /fail-third/*: every third attempt at the endpoint fails (never 5 in
    // a row, so its webhook is not disabled) — unless it is a retry, which succeeds.
    const fail = url.startsWith("/fail/") || (url.startsWith("/fail-third/") && (seen?.attempts ?? 1) === 1 && counts.get(url)! % 3 === 1);
    res.writeHead(fail ? 500 : 200, { "content-type": "text/plain" }).end("ok");
  });
}

/** A new HTTPS port answering as above; resolves to its origin. */
async function listen(): Promise<string> {
  const server = https.createServer({ cert: pki.cert, key: pki.key, keepAliveTimeout: 60_000 }, answer);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
const origin = await listen();
const more: string[] = [];

serveCalls({
  info: () => ({ origin, ca: pki.caCert }),
  /** `count` origins besides the first (the same ones on each call, more listened on as needed). */
  async origins(count: number) {
    while (more.length < count) more.push(await listen());
    return more.slice(0, count);
  },
  count: (p: string) => counts.get(p) ?? 0,
  total: () => [...counts.values()].reduce((a, b) => a + b, 0),
  last: () => lastArrival,
  track: (on: boolean) => {
    trackEvents = on;
    events.clear();
    gaps.clear();
    return true;
  },
  /** Gaps between attempt n-1 and n, for each n seen, and then forgets them. */
  gaps: () => {
    const out = Object.fromEntries([...gaps].map(([n, list]) => [n, list]));
    gaps.clear();
    return out;
  },
});
