// What the reference server's tests share: its API through the typed client, and the control API.
import { postgresBinDir } from "../../scripts/postgres.js";
import { createPartnerClient, loadDeliveryRules, type EventName } from "@partner-platform/sdk";
import { Agent } from "undici";
import { afterEach } from "vitest";
import { createClock } from "../../src/server/clock.js";
import { HeldClaims } from "../../src/server/delivery/held.js";
import type { PartsContext } from "../../src/server/delivery/parts.js";
import { loadConfig, startServer, type RunningServer, type ServerOptions } from "../../src/server/index.js";
import { addressPolicy } from "../../src/server/ssrf.js";
import type { Db } from "../../src/server/store.js";

export const client = loadConfig().clients[0]!;

export function api(server: RunningServer) {
  return createPartnerClient({
    baseUrl: server.url,
    authUrl: server.url,
    clientId: client.clientId,
    clientSecret: client.clientSecret,
    scopes: client.scopes as ("demand::search" | "demand::request" | "webhooks::write")[],
  });
}

/** Registers a webhook and returns its id; fails the test on anything but 201. */
export async function register(server: RunningServer, url: string, events: EventName[], businessID = "4711", secret = "whsec-test-0123456789"): Promise<string> {
  const { data, response, error } = await api(server).POST("/api/v2/webhooks", { body: { url, events, businessID, secret } });
  if (!data) throw new Error(`registration failed with ${response.status}: ${JSON.stringify(error)}`);
  return data.webhookID;
}

async function post(server: RunningServer, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  return { status: response.status, body: await response.json() };
}

/** The Conformance Control API, as a suite drives it. */
export function control(server: RunningServer) {
  return {
    trigger: (event: EventName, businessID: string, data?: unknown) => post(server, "/conformance/events", { event, businessID, data }),
    async advance(seconds: number): Promise<void> {
      const r = await post(server, "/conformance/clock/advance", { seconds });
      if (r.status !== 200) throw new Error(`advance failed with ${r.status}: ${JSON.stringify(r.body)}`);
    },
    post: (path: string, body: unknown) => post(server, `/conformance${path}`, body),
  };
}

/**
 * What the delivery parts (parts.ts defaultParts) are made with, for a test of one of them: a virtual
 * clock, the contract's rules, loopback receivers allowed, e-mail dropped; `db` and `dispatcher` only
 * where the part uses them.
 */
export function partsContext(given: Partial<PartsContext> = {}): PartsContext {
  return {
    db: {} as Db,
    clock: createClock("virtual"),
    rules: loadDeliveryRules(),
    owner: "test",
    leaseMs: 10_000,
    held: new HeldClaims(),
    dispatcher: given.dispatcher ?? new Agent(),
    attemptTimeoutRealMs: 1000,
    addressPolicy: addressPolicy({ allowLoopback: true }),
    transport: async () => undefined,
    ...given,
  };
}

/** The envelope of a delivery's body. */
export const envelope = (body: Buffer) => JSON.parse(body.toString("utf8")) as { id: string; event: EventName; timestamp: string; data: Record<string, any> };

/**
 * The storage back-ends every storage test runs on: the embedded database always, PostgreSQL when
 * installed (a throwaway server, scripts/postgres.ts). Under CI a missing PostgreSQL fails the run.
 */
export function storageBackends(): { name: string; postgres: boolean }[] {
  const hasPostgres = postgresBinDir() !== undefined;
  if (!hasPostgres && process.env.CI) throw new Error("CI needs PostgreSQL: scripts/install-system-deps.sh installs it");
  if (!hasPostgres) console.warn("PostgreSQL storage tests skipped: PostgreSQL is not installed (scripts/install-system-deps.sh)");
  return [{ name: "embedded (PGlite)", postgres: false }, ...(hasPostgres ? [{ name: "PostgreSQL", postgres: true }] : [])];
}

/**
 * Starts reference servers on a virtual clock with the control API on, closed after each test. The
 * defaults are read at each start (a receiver's CA exists only once the suite's beforeAll has run).
 */
export function virtualServers(defaults: () => ServerOptions) {
  const running: RunningServer[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.close()));
  });
  const start = async (options: ServerOptions = {}): Promise<RunningServer> => {
    const server = await startServer({
      clock: { mode: "virtual" },
      conformance: true,
      allowPrivateWebhooks: true,
      log: () => undefined,
      ...defaults(),
      ...options,
    });
    running.push(server);
    return server;
  };
  /** Closes a server within the test (not again after it). */
  const close = async (server: RunningServer): Promise<void> => {
    running.splice(running.indexOf(server), 1);
    await server.close();
  };
  return Object.assign(start, { close });
}

/** A small seeded generator in [0, 1), so that a failing round can be replayed. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Reads until `done` holds for what it gives, at most 50 times 100 ms apart; the last value read. */
export async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  let value = await read();
  for (let i = 1; i < 50 && !done(value); i++) {
    await new Promise((r) => setTimeout(r, 100));
    value = await read();
  }
  return value;
}
