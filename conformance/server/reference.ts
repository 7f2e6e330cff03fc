// Certifies the package's reference server in this process, optionally as one of the broken variants:
// what the proof tests and the benchmark run.
import type { ClientConfig } from "../../src/server/config.js";
import { loadConfig, startServer } from "../../src/server/index.js";
import type { Db } from "../../src/server/store.js";
import type { BrokenServer } from "../broken/servers.js";
import type { RunOptions, SuiteReport } from "../framework/check.js";
import type { ClockSetting } from "./clock.js";
import type { ReferenceTiming } from "./timings.js";
import { certifyServer } from "./index.js";

export interface ReferenceOptions {
  /** A broken variant (conformance/broken/servers.ts). */
  variant?: BrokenServer;
  /** Another legal timing (conformance/server/timings.ts). */
  timing?: ReferenceTiming;
  databaseUrl?: string;
  /** An open database, emptied first (runs one after another need not start a database each). */
  db?: Db;
  /** Attempts to one webhook at once (D40 allows any number up to its cap; the reference's default otherwise). */
  maxInFlightPerWebhook?: number;
}

/** The database with no rows left from an earlier run (the schema stays; migrations are idempotent). */
async function emptied(db: Db): Promise<Db> {
  const { rows } = await db.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = 'public'");
  if (rows.length) await db.query(`TRUNCATE ${rows.map((r) => r.tablename).join(", ")}`);
  return db;
}

/**
 * A virtual clock's start with a fraction of a second: a reading without one stands for its whole second
 * (D14), which would hide a broken server's timestamps late within it one run in a thousand.
 */
const withFraction = (ms: number) => (ms % 1000 === 0 ? ms + 437 : ms);

export async function certifyReference(clock: ClockSetting, options: ReferenceOptions = {}, run: RunOptions = {}): Promise<SuiteReport> {
  const [client, second] = loadConfig().clients as [ClientConfig, ClientConfig];
  const virtualAttemptTimeoutMs = options.variant?.virtualAttemptTimeoutMs ?? options.timing?.virtualAttemptTimeoutMs;
  return certifyServer(
    {
      baseUrl: "",
      authUrl: "",
      controlUrl: "",
      clientId: client.clientId,
      clientSecret: client.clientSecret,
      secondClientId: second.clientId,
      secondClientSecret: second.clientSecret,
      partnerEmail: client.contactEmail,
      secondPartnerEmail: second.contactEmail,
      clock,
      async launch(env) {
        const server = await startServer({
          conformance: true,
          databaseUrl: options.databaseUrl,
          ...(options.db ? { db: await emptied(options.db) } : {}),
          clock: clock.kind === "virtual" ? { mode: "virtual", start: withFraction(Date.now()) } : { mode: "scaled", scale: clock.factor },
          smtpUrl: env.smtpUrl,
          webhookCa: env.caCert,
          parts: (base, ctx) => ({
            ...options.variant?.parts?.(base, ctx),
            ...(options.timing ? { ...options.timing.parts?.(base, ctx), timing: options.timing.timing() } : {}),
          }),
          registration: options.variant?.registration,
          rules: options.variant?.rules,
          ...(virtualAttemptTimeoutMs ? { virtualAttemptTimeoutMs } : {}),
          recordLingerMs: options.variant?.recordLingerMs,
          maxInFlightPerWebhook: options.maxInFlightPerWebhook,
          log: () => undefined,
        });
        return { url: server.url, stop: () => server.close() };
      },
    },
    run,
  );
}
