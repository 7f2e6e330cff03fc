// The reference server: `startServer(options)` from code, `partner-platform serve` from the CLI.
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import path from "node:path";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import nodemailer from "nodemailer";
import { Agent } from "undici";
import { packageRoot } from "../paths.js";
import { loadDeliveryRules, type DeliveryRules } from "../spec.js";
import { createApp, type ClientConfig } from "./app.js";
import { createClock, type Clock, type ClockMode } from "./clock.js";
import { createDeliveryEngine, type DeliveryEngine, type ServerFault } from "./delivery.js";
import { migrate, openEmbedded, openPostgres, type Db } from "./store.js";

export interface ServerConfig {
  clients: ClientConfig[];
  tokenLifetimeSeconds: number;
}

export interface ServerOptions {
  host?: string;
  port?: number;
  config?: ServerConfig;
  /** PostgreSQL connection string; without it the embedded database is used. */
  databaseUrl?: string;
  /** Folder of the embedded database; without it, memory only. */
  dataDir?: string;
  clock?: { mode: ClockMode; scale?: number; start?: number };
  conformance?: boolean;
  allowPrivateWebhooks?: boolean;
  smtpUrl?: string;
  /** PEM of extra CAs trusted for deliveries (a conformance receiver's). */
  webhookCa?: string;
  /** Real ms an attempt may take under a virtual clock, where the spec's seconds are not real. */
  virtualAttemptTimeoutMs?: number;
  log?: (message: string) => void;
  /** Broken variants only (conformance/broken): deliberate faults, and changed delivery numbers. */
  faults?: ReadonlySet<ServerFault>;
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

export function loadConfig(file?: string): ServerConfig {
  const text = readFileSync(file ?? path.join(packageRoot, "src/server/default-config.json"), "utf8");
  let config: ServerConfig;
  try {
    config = JSON.parse(text) as ServerConfig;
  } catch (error) {
    throw new Error(`config ${file}: not JSON: ${(error as Error).message}`);
  }
  const clients = config.clients;
  if (!Array.isArray(clients) || clients.length === 0) throw new Error(`config ${file}: "clients" must list at least one client`);
  for (const [i, c] of clients.entries()) {
    for (const key of ["clientId", "clientSecret", "contactEmail"] as const) {
      if (typeof c[key] !== "string" || c[key] === "") throw new Error(`config ${file}: clients[${i}].${key} must be a non-empty string`);
    }
    if (!Array.isArray(c.scopes)) throw new Error(`config ${file}: clients[${i}].scopes must be a list of scopes`);
  }
  return { clients, tokenLifetimeSeconds: config.tokenLifetimeSeconds ?? 3600 };
}

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const rules = options.rules ? options.rules(loadDeliveryRules()) : loadDeliveryRules();
  const config = options.config ?? loadConfig();
  const log = options.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const db = options.databaseUrl ? await openPostgres(options.databaseUrl) : await openEmbedded(options.dataDir);
  await migrate(db);
  const clockSetting = options.clock ?? { mode: "real" as const };
  const clock = createClock(clockSetting.mode, clockSetting);
  const transport = options.smtpUrl ? nodemailer.createTransport(options.smtpUrl) : undefined;
  // A bounded pool per receiver: a burst of events reuses connections instead of opening one each.
  // Extra CAs are added to the public ones, which stay trusted.
  const dispatcher = new Agent({ connections: 32, ...(options.webhookCa ? { connect: { ca: [...rootCertificates, options.webhookCa] } } : {}) });
  const timeoutMs =
    clock.mode === "virtual"
      ? (options.virtualAttemptTimeoutMs ?? 1000)
      : Math.max(1000, rules.attemptTimeoutSeconds * 1000 * clock.scale);
  const engine = createDeliveryEngine({
    db,
    clock,
    rules,
    dispatcher,
    allowPrivateWebhooks: options.allowPrivateWebhooks ?? false,
    attemptTimeoutRealMs: timeoutMs,
    faults: options.faults,
    contactEmailFor: (clientId) => config.clients.find((c) => c.clientId === clientId)?.contactEmail,
    sendMail: async (to, subject, text) => {
      if (!transport) throw new Error("no SMTP_URL configured");
      await transport.sendMail({ from: "Partner Platform <no-reply@partner-platform.example>", to, subject, text });
    },
    log,
  });
  const app = createApp({
    db,
    clock,
    engine,
    clients: config.clients,
    tokenLifetimeSeconds: config.tokenLifetimeSeconds,
    leadExpirySeconds: rules.leadExpirySeconds,
    allowPrivateWebhooks: options.allowPrivateWebhooks ?? false,
    conformance: options.conformance ?? false,
    faults: options.faults,
  });
  await engine.start();
  await app.listen({ host: options.host ?? "127.0.0.1", port: options.port ?? 0 });
  const { port } = app.server.address() as AddressInfo;
  const host = options.host ?? "127.0.0.1";
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    app,
    db,
    clock,
    engine,
    async close() {
      await app.close();
      await engine.stop();
      await dispatcher.close();
      transport?.close();
      await db.close();
    },
  };
}
