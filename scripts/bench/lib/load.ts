// The load generator, in a process of its own: registers webhooks through the partner API, triggers
// events through the Conformance Control API (keep-alive, a fixed number in flight) and advances a
// virtual clock.
import { Agent, request } from "undici";
import { loadConfig } from "../../../src/server/index.js";
import { serveCalls, timedInParallel } from "./procs.js";

const client = loadConfig().clients[0]!;
const agent = new Agent({ connections: 64 });
let base = "";

async function call(method: "POST" | "GET", path: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const r = await request(`${base}${path}`, {
    method,
    dispatcher: agent,
    headers: { ...(body !== undefined && typeof body !== "string" ? { "content-type": "application/json" } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  const text = await r.body.text();
  if (r.statusCode >= 300) throw new Error(`${method} ${path}: ${r.statusCode} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function token(): Promise<string> {
  const form = new URLSearchParams({ grant_type: "client_credentials", client_id: client.clientId, client_secret: client.clientSecret, scope: "webhooks::write" });
  const r = await call("POST", "/oauth2/token", form.toString(), { "content-type": "application/x-www-form-urlencoded" });
  return r.access_token as string;
}

serveCalls({
  /** Registers `urls.length` webhooks for business `businessID`, each for review.created, and `idle` more for payment.received, which is never triggered. */
  async setup({ server, urls, businessID, idle = 0 }: { server: string; urls: string[]; businessID: string; idle?: number }) {
    base = server;
    let bearer = `Bearer ${await token()}`;
    const ids = [];
    const all = [...urls.map((url) => ({ url, events: ["review.created"] })), ...Array.from({ length: idle }, (_, i) => ({ url: `${urls[0]}-idle-${i}`, events: ["payment.received"] }))];
    for (const { url, events } of all) {
      const register = () => call("POST", "/api/v2/webhooks", { url, events, businessID, secret: "whsec-bench-0123456789" }, { authorization: bearer });
      // On a scaled clock a token lives seconds: get another when it expired.
      const r = await register().catch(async (e: Error) => {
        if (!/: 401 /.test(e.message)) throw e;
        bearer = `Bearer ${await token()}`;
        return register();
      });
      ids.push(r.webhookID as string);
    }
    return ids;
  },
  /** Sends the triggers to `server` (one that needs no webhook registered: the relay). */
  use({ server }: { server: string }) {
    base = server;
    return true;
  },
  /** Triggers `n` review.created events with `concurrency` in flight; returns the real ms it took. */
  trigger({ n, concurrency, businessID }: { n: number; concurrency: number; businessID: string }) {
    return timedInParallel(n, concurrency, () => call("POST", "/conformance/events", { event: "review.created", businessID }));
  },
  /** Advances the virtual clock; returns the real ms it took (every attempt due made and recorded). */
  async advance(seconds: number) {
    const start = performance.now();
    await call("POST", "/conformance/clock/advance", { seconds });
    return performance.now() - start;
  },
});
