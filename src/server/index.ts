// The reference server: `startServer(options)` from code, `partner-platform serve` from the CLI.
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import nodemailer from "nodemailer";
import { Agent } from "undici";
import { loadDeliveryRules, type DeliveryRules } from "@partner-platform/sdk";
import { loadConformanceRules } from "../spec.js";
import { tlsTrust } from "../sender.js";
import { randomUUID } from "node:crypto";
import pino from "pino";
import { createApp, type RegistrationOverride, type Timeouts } from "./app.js";
import { trustedProxiesProblem } from "./proxies.js";
import { withDeadline } from "./deadline.js";
import { createClock, type Clock, type ClockMode } from "./clock.js";
import { buildParts, createDeliveryEngine, DELIVERY_DEFAULTS, HeldClaims, type DeliveryEngine, type PartsOverride } from "./delivery/index.js";
import { addressPolicy } from "./ssrf.js";
import { migrate, openEmbedded, openPostgres, recordOwners, type Db, type OwnerChange } from "./store.js";
import { loadConfig, type ServerConfig } from "./config.js";

export { loadConfig, type ServerConfig } from "./config.js";

/**
 * The store (`given`, or opened), migrated, with the configuration's business owners recorded (D27) and
 * what that changed. Failing, a store this opened is closed again (a pool or a thread left open would
 * keep the process alive), and the error names the database it could not use, a URL without its password.
 */
async function openStore(options: {
  given?: Db;
  databaseUrl?: string;
  dataDir?: string;
  clients: ServerConfig["clients"];
  lost: (error: Error) => void;
  log: (message: string) => void;
}): Promise<{ db: Db; owners: OwnerChange[] }> {
  const { databaseUrl, dataDir } = options;
  const which = options.given
    ? "the database given"
    : databaseUrl
      ? `the PostgreSQL database of --database-url (${withoutPassword(databaseUrl)})`
      : dataDir
        ? `the embedded database in --data-dir ${dataDir}`
        : "the embedded database";
  let db = options.given;
  try {
    db ??= databaseUrl ? await openPostgres(databaseUrl, options.lost) : await openEmbedded(dataDir, { log: options.log });
    await migrate(db);
    return { db, owners: await recordOwners(db, options.clients) };
  } catch (error) {
    if (!options.given) await db?.close().catch(() => undefined);
    throw new Error(`cannot use ${which}: ${(error as Error).message}`, { cause: error });
  }
}

/** A connection string to show: its password masked, in the user part or as a parameter. */
function withoutPassword(url: string): string {
  if (!URL.canParse(url)) return "a connection string that is not a URL";
  const parsed = new URL(url);
  if (parsed.password) parsed.password = "***";
  for (const name of ["password", "sslpassword"]) if (parsed.searchParams.has(name)) parsed.searchParams.set(name, "***");
  return parsed.href;
}

/** Log paths whose values are replaced by "[redacted]" (D33). */
const redactedPaths = [
  "req.headers.authorization",
  "req.headers.cookie",
  "*.authorization",
  "*.client_secret",
  "*.clientSecret",
  "*.secret",
  "*.password",
  "*.access_token",
  "*.token",
  "*.smtpUrl",
];

/** The log's lines are written once this many bytes wait (D43)... */
const LOG_BUFFER_BYTES = 4096;
/** ...or this many ms passed. */
const LOG_FLUSH_MS = 200;

export interface ServerOptions {
  host?: string;
  port?: number;
  config?: ServerConfig;
  /** PostgreSQL connection string; without it the embedded database is used. */
  databaseUrl?: string;
  /** An open database to use instead, left open by close() (tests that run many servers one after another). */
  db?: Db;
  /** Folder of the embedded database; without it, a temporary folder removed on close (nothing is kept). */
  dataDir?: string;
  clock?: { mode: ClockMode; scale?: number; start?: number };
  conformance?: boolean;
  allowPrivateWebhooks?: boolean;
  smtpUrl?: string;
  /** PEM of extra CAs trusted for deliveries (a conformance receiver's). */
  webhookCa?: string;
  /** Real ms an unanswered attempt is given under a virtual clock (D24; default 1000). */
  virtualAttemptTimeoutMs?: number;
  /** At most this many delivery attempts claimed and under way at once (default 256). */
  maxInFlight?: number;
  /** At most this many attempts to one webhook at once: its share while alone at its origin (default 16, below the 32 connections per origin; with n webhooks there, floor(32 / (n + 1)) each: D40). */
  maxInFlightPerWebhook?: number;
  /** Real ms at most between a waiting delivery run's looks for work nobody told it of (D44; default 1000). */
  lookAroundMs?: number;
  /** Real ms a batch of attempt outcomes waits for more attempts to end before it is recorded (default 30; D7 keeps their order). */
  recordLingerMs?: number;
  /** Messages of the delivery loop; default: the server's log (JSON lines). */
  log?: (message: string) => void;
  /** Level of the server's log (pino: fatal, error, warn, info, debug, trace, silent); default "silent" from code, `serve --log-level` info. */
  logLevel?: string;
  /** Where the log's JSON lines go; default stderr. */
  logStream?: NodeJS.WritableStream;
  /** Connection bounds of the API port (D33). */
  timeouts?: Partial<Timeouts>;
  /** Proxies whose X-Forwarded-For gives the client's address, for the per-address throttle and the log (D30). */
  trustProxy?: string[];
  /**
   * Variants (conformance/broken, conformance/server/timings.ts): replaced delivery parts or
   * registration checks, changed delivery numbers. The reference server has none.
   */
  parts?: PartsOverride;
  registration?: RegistrationOverride;
  rules?: (rules: DeliveryRules) => DeliveryRules;
}

export interface RunningServer {
  url: string;
  app: FastifyInstance;
  db: Db;
  clock: Clock;
  engine: DeliveryEngine;
  close(): Promise<void>;
}

/** How long a stop waits for the engine or the database before it gives up on them (a database that hangs). */
const STOP_DEADLINE_MS = 30_000;

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const proxies = options.trustProxy && trustedProxiesProblem(options.trustProxy);
  if (proxies) throw new TypeError(`trustProxy: ${proxies}`);
  const rules = options.rules ? options.rules(loadDeliveryRules()) : loadDeliveryRules();
  const config = options.config ?? loadConfig();
  const level = options.logLevel ?? "silent";
  // Lines go to stderr in the background, several KB per write, and at least every LOG_FLUSH_MS: a
  // synchronous write per line (stderr is often a pipe) cost ~6% of a delivery's time. Written out on
  // close() and at exit; what a kill -9 (or a signal nobody handles) catches unwritten is lost (D43).
  const destination =
    options.logStream || level === "silent" ? undefined : pino.destination({ dest: 2, sync: false, minLength: LOG_BUFFER_BYTES, periodicFlush: LOG_FLUSH_MS });
  const logger = pino(
    {
      level,
      // Never a secret, token or password in the log (D33), whatever a future log call passes.
      redact: { paths: redactedPaths, censor: "[redacted]" },
    },
    options.logStream ?? destination ?? process.stderr,
  );
  // A delivery line's fields are fixed and none can hold a secret (the error is a message, which paths
  // cannot redact anyway): no redaction pass over each (D43).
  const deliveryLogger = logger.child({}, { redact: [] });
  const log = options.log ?? ((m: string) => logger.warn({ component: "delivery" }, m));
  const lost = (error: Error) => logger.warn({ component: "store", err: error }, "a database connection was lost; the next query opens another");
  const storeLog = (m: string) => logger.warn({ component: "store" }, m);
  const { db, owners } = await openStore({ given: options.db, databaseUrl: options.databaseUrl, dataDir: options.dataDir, clients: config.clients, lost, log: storeLog });
  // A business that an earlier start (this server's or another's on one database) gave another owner.
  const moved = owners.filter((c) => c.from !== undefined);
  if (moved.length > 0) {
    logger.warn(
      { component: "store", ownerChanges: moved },
      "business owners differ from those an earlier start recorded (D27): their events now reach only the new owners' webhooks; servers sharing a database must share one configuration",
    );
  }
  const clockSetting = options.clock ?? { mode: "real" as const };
  const clock = createClock(clockSetting.mode, clockSetting);
  const smtpUrl = options.smtpUrl ?? config.smtpUrl;
  const allowPrivateWebhooks = options.allowPrivateWebhooks ?? config.allowPrivateWebhooks ?? false;
  // Bounded waits: an SMTP server that stalls must not hold the delivery loop for minutes.
  const transport = smtpUrl
    ? nodemailer.createTransport({ url: smtpUrl, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 })
    : undefined;
  const conformanceRules = loadConformanceRules();
  const timeoutMs =
    clock.mode === "virtual"
      ? (options.virtualAttemptTimeoutMs ?? 1000)
      : Math.max(conformanceRules.scaledClock.attemptTimeoutFloorRealSeconds * 1000, rules.attemptTimeoutSeconds * 1000 * clock.scale);
  // Loopback while the control API is on: the certification suite's receiver listens on 127.0.0.1 (D22).
  const addresses = addressPolicy({ allowLoopback: options.conformance ?? false, allowPrivate: allowPrivateWebhooks });
  // A bounded pool per receiver: a burst of events reuses connections instead of opening one each.
  // Extra CAs are added to the public ones, which stay trusted. Connecting (DNS, TCP, TLS) has the
  // attempt timeout too, and every name the connection resolves is checked against the policy (D22).
  const { connectionsPerOrigin } = DELIVERY_DEFAULTS;
  const maxInFlightPerWebhook = options.maxInFlightPerWebhook ?? DELIVERY_DEFAULTS.maxInFlightPerWebhook;
  if (!(Number.isInteger(maxInFlightPerWebhook) && maxInFlightPerWebhook >= 1 && maxInFlightPerWebhook < connectionsPerOrigin)) {
    throw new Error(`attempts in flight per webhook must be a whole number from 1 to ${connectionsPerOrigin - 1}, got ${maxInFlightPerWebhook}`);
  }
  const dispatcher = new Agent({
    connections: connectionsPerOrigin,
    connect: {
      timeout: timeoutMs,
      lookup: addresses.lookup,
      ...tlsTrust({ ca: options.webhookCa }),
    },
  });
  const owner = await db.claimOwner();
  // A claim older than any attempt can last (DNS, connect, answer, body) belongs to a process that
  // died, and is taken over. Real time: it is about processes.
  const leaseMs = 3 * timeoutMs + 10_000;
  const held = new HeldClaims();
  const parts = buildParts(
    {
      db,
      held,
      clock,
      rules,
      owner,
      leaseMs,
      dispatcher,
      webhookCa: options.webhookCa,
      attemptTimeoutRealMs: timeoutMs,
      addressPolicy: addresses,
      transport: async (mail) => {
        if (!transport) throw new Error("no SMTP_URL configured");
        await transport.sendMail({ from: "Partner Platform <no-reply@partner-platform.example>", ...mail });
      },
    },
    options.parts,
  );
  const engine = createDeliveryEngine({
    db,
    clock,
    rules,
    parts,
    owner,
    leaseMs,
    held,
    attemptTimeoutRealMs: timeoutMs,
    maxInFlight: options.maxInFlight,
    connectionsPerOrigin,
    maxInFlightPerWebhook,
    lookAroundMs: options.lookAroundMs,
    recordLingerMs: options.recordLingerMs,
    contactEmailFor: (clientId) => config.clients.find((c) => c.clientId === clientId)?.contactEmail,
    log,
    outcomeLog: (o) => (o.ok ? deliveryLogger.info({ delivery: o }, "delivery attempt succeeded") : deliveryLogger.warn({ delivery: o }, `delivery attempt ${o.recorded}`)),
  });
  const app = createApp({
    db,
    clock,
    engine,
    clients: config.clients,
    tokenLifetimeSeconds: config.tokenLifetimeSeconds,
    leadExpirySeconds: rules.leadExpirySeconds,
    addressPolicy: addresses,
    conformance: options.conformance ?? false,
    registration: options.registration,
    logger,
    timeouts: options.timeouts,
    trustProxy: options.trustProxy,
  });
  const host = options.host ?? "127.0.0.1";
  // The engine first: attempts in flight are handed back rather than waited for, whatever the API is doing.
  // Every step runs whatever the one before it did (a database gone during the stop must not leave the
  // port listening); the first failure is thrown once all have run.
  const close = async () => {
    const failures: unknown[] = [];
    const step = async (what: () => unknown) => {
      try {
        await what();
      } catch (error) {
        failures.push(error);
        logger.error({ err: error }, "stopping: a step failed; the others go on");
      }
    };
    await step(() => withDeadline(engine.stop(), STOP_DEADLINE_MS, "the delivery engine did not stop"));
    await step(() => app.close());
    await step(() => dispatcher.close());
    await step(() => transport?.close());
    if (!options.db) await step(() => withDeadline(db.close(), STOP_DEADLINE_MS, "the database did not close"));
    // The last lines, the engine's stop among them, are written before close() resolves.
    if (destination) await new Promise<void>((resolve) => destination.flush(() => resolve()));
    if (failures.length > 0) throw failures[0];
  };
  try {
    await app.listen({ host, port: options.port ?? 0 });
  } catch (error) {
    await close();
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(
      code === "EADDRINUSE"
        ? `port ${options.port} on ${host} is already in use; choose another with --port`
        : `cannot listen on ${host}:${options.port}: ${(error as Error).message}`,
    );
  }
  await engine.start();
  if (!transport) log("no SMTP_URL: webhook-disabled e-mails are kept and sent once one is configured");
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`, app, db, clock, engine, close };
}
