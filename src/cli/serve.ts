// `partner-platform serve`: the reference server (API, durable webhook delivery, optional control port).
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import v8 from "node:v8";
import { Command, InvalidArgumentError, Option } from "commander";
import { parseClockMode } from "../server/clock.js";
import { DELIVERY_DEFAULTS } from "../server/delivery/index.js";
import { loadConfig, startServer } from "../server/index.js";
import { trustedProxiesProblem } from "../server/proxies.js";
import { embeddedDirProblem } from "../server/store.js";
import { untilStopped } from "./lifetime.js";

interface ServeFlags {
  host: string;
  port: number;
  config?: string;
  databaseUrl?: string;
  dataDir?: string;
  clock?: ReturnType<typeof parseClockMode>;
  conformance?: boolean;
  trustProxy?: string[];
  allowPrivateWebhooks?: boolean;
  smtpUrl?: string;
  webhookCa?: string;
  logLevel: string;
  maxInFlight?: number;
  maxInFlightPerWebhook?: number;
}

const wholeNumber = (min: number, max: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`a whole number from ${min} to ${max}`);
  return n;
};

const { connectionsPerOrigin } = DELIVERY_DEFAULTS;
const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** A URL with one of `schemes` and a host, or an InvalidArgumentError saying so (D34: refused at start, naming the flag). */
const urlOf = (schemes: string[], what: string) => (value: string) => {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (!url || !schemes.includes(url.protocol) || !url.hostname) throw new InvalidArgumentError(`must be ${what}, got "${value}"`);
  return value;
};

/** A PEM certificate file, read and parsed now: a wrong --webhook-ca would otherwise fail every delivery. */
function pemFile(file: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, "utf8");
  } catch (error) {
    throw new InvalidArgumentError(`cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new InvalidArgumentError(`${file} is not a PEM certificate`);
  }
  return pem;
}

/** A folder for the embedded database (store.ts says which it can be), refused here as a flag. */
function dataDirectory(dir: string): string {
  const problem = embeddedDirProblem(dir);
  if (problem) throw new InvalidArgumentError(problem);
  return dir;
}

/** The proxies of --trust-proxy, comma-separated; an empty value trusts none. */
function proxyList(value: string): string[] {
  const entries = value.split(",").map((e) => e.trim()).filter(Boolean);
  const problem = trustedProxiesProblem(entries);
  if (problem) throw new InvalidArgumentError(problem);
  return entries;
}

/** The default config's clients, "id / secret (businesses ...)", with the scopes of one not allowed all: public demo credentials. */
const defaultClients = () => {
  const { clients } = loadConfig();
  const every = new Set(clients.flatMap((c) => c.scopes));
  const described = clients.map((c) => {
    const owns = c.businessIDs.length ? `businesses ${c.businessIDs.join(", ")}` : "no businesses";
    return `${c.clientId} / ${c.clientSecret} (${owns}${c.scopes.length < every.size ? `; scopes ${c.scopes.join(" ")} only` : ""})`;
  });
  return { count: clients.length, described: described.join("; ") };
};

/**
 * V8 lets a heap grow to up to 4x what survived its last full collection before collecting again: at
 * a backlog's allocation rate the server's heap held 170 MB for 35–60 MB alive. 1.5x keeps `serve`
 * within its memory target (D42); a --heap-growing-percent given to node is left alone.
 */
function limitHeapGrowth(): void {
  if (!process.execArgv.some((flag) => flag.startsWith("--heap-growing-percent"))) v8.setFlagsFromString("--heap-growing-percent=50");
}

export function serveCommand(): Command {
  const demo = defaultClients();
  return new Command("serve")
    .description("Run the reference server: tokens, search, service requests, webhooks, and signed durable delivery.")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option(
      "--port <port>",
      "port to listen on",
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError("a port is a whole number from 0 to 65535");
        return n;
      },
      4020,
    )
    .option("--config <file>", "JSON (src/server/config.schema.json): clients, tokenLifetimeSeconds, smtpUrl, allowPrivateWebhooks")
    .addOption(
      new Option("--database-url <url>", "PostgreSQL (postgres://...); default: the embedded database")
        .env("DATABASE_URL")
        .argParser(urlOf(["postgres:", "postgresql:"], "a postgres:// or postgresql:// URL with a host"))
        .conflicts("dataDir"),
    )
    .option("--data-dir <dir>", "folder of the embedded database (default: a temporary folder, removed on exit; not with --database-url)", dataDirectory)
    .addOption(
      new Option("--clock <mode>", "real, virtual, or scaled:FACTOR (scaled:0.001: a 1 min wait takes 60 ms)")
        .env("CONFORMANCE_CLOCK")
        .argParser((v) => {
          try {
            return parseClockMode(v);
          } catch (error) {
            throw new InvalidArgumentError((error as Error).message);
          }
        }),
    )
    .option("--conformance", "enable the Conformance Control API under /conformance (never in production)")
    .option("--allow-private-webhooks", "accept webhook URLs on loopback and private networks (local testing)")
    .addOption(
      new Option("--trust-proxy <proxies>", "comma-separated addresses or CIDR ranges of the proxies in front: the client's address is then the one they give in X-Forwarded-For (the per-address throttle, the log)")
        .env("TRUST_PROXY")
        .argParser(proxyList),
    )
    .addOption(
      new Option("--smtp-url <url>", "SMTP server for the webhook-disabled e-mail (smtp:// or smtps://, may hold a password: prefer SMTP_URL)")
        .env("SMTP_URL")
        .argParser(urlOf(["smtp:", "smtps:"], "an smtp:// or smtps:// URL with a host")),
    )
    .addOption(new Option("--webhook-ca <file>", "extra CA certificate (PEM) trusted for deliveries").env("WEBHOOK_CA_FILE").argParser(pemFile))
    .addOption(new Option("--log-level <level>", "the log's level (JSON lines on stderr)").choices(logLevels).default("info").env("LOG_LEVEL"))
    .addHelpText(
      "after",
      `\nWithout --config, ${demo.count} demo clients are configured (src/server/default-config.json): ${demo.described}.\n` +
        "A config file may take a client's secret from the environment (clientSecretEnv) and the SMTP URL from SMTP_URL.",
    )
    .option("--max-in-flight <n>", "delivery attempts claimed and under way at once (memory and database load)", wholeNumber(1, 100_000), DELIVERY_DEFAULTS.maxInFlight)
    .option(
      "--max-in-flight-per-webhook <n>",
      `most attempts to one webhook at once (its share alone at its host:port; with n webhooks there, each at most floor(${connectionsPerOrigin} / (n + 1)): D40)`,
      wholeNumber(1, connectionsPerOrigin - 1),
      DELIVERY_DEFAULTS.maxInFlightPerWebhook,
    )
    .action(async (flags: ServeFlags, command: Command) => {
      // Only the Control API advances a virtual clock: without it, retries and expiries would never come.
      if (flags.clock?.mode === "virtual" && !flags.conformance) {
        const from = command.getOptionValueSource("clock") === "env" ? " (from CONFORMANCE_CLOCK)" : "";
        command.error(`option '--clock <mode>' virtual${from} needs --conformance: only its Control API advances a virtual clock`, { exitCode: 2 });
      }
      limitHeapGrowth();
      const config = loadConfig(flags.config);
      const server = await startServer({
        host: flags.host,
        port: flags.port,
        config,
        databaseUrl: flags.databaseUrl,
        dataDir: flags.dataDir,
        clock: flags.clock ?? { mode: "real" },
        conformance: flags.conformance ?? false,
        // Unset flags leave the config file's choice.
        allowPrivateWebhooks: flags.allowPrivateWebhooks,
        smtpUrl: flags.smtpUrl,
        webhookCa: flags.webhookCa,
        logLevel: flags.logLevel,
        maxInFlight: flags.maxInFlight,
        maxInFlightPerWebhook: flags.maxInFlightPerWebhook,
        trustProxy: flags.trustProxy,
      });
      process.stdout.write(
        `Partner Platform v4 reference server on ${server.url} (clock: ${server.clock.mode}${flags.conformance ? ", conformance control API on" : ""})\n` +
          `  API (base_url) and token endpoint (auth_url): ${server.url}\n` +
          // The demo credentials are public (the spec's example); a real config's secrets are never printed.
          (flags.config === undefined ? `  demo clients (default config, not for production): ${demo.described}\n` : ""),
      );
      await untilStopped();
      // A second signal ends the process at once; and whatever a failed stop left open (a database that
      // hangs) does not keep it alive for more than a few seconds after the stop.
      process.once("SIGINT", () => process.exit(130));
      process.once("SIGTERM", () => process.exit(143));
      try {
        await server.close();
      } finally {
        setTimeout(() => process.exit(), 5_000).unref();
      }
    });
}
