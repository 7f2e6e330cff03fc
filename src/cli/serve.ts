// `partner-platform serve`: the reference server (API, durable webhook delivery, optional control port).
import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { parseClockMode } from "../server/clock.js";
import { loadConfig, startServer } from "../server/index.js";

interface ServeFlags {
  host: string;
  port: number;
  config?: string;
  databaseUrl?: string;
  dataDir?: string;
  clock?: ReturnType<typeof parseClockMode>;
  conformance?: boolean;
  allowPrivateWebhooks?: boolean;
  smtpUrl?: string;
  webhookCa?: string;
  maxInFlight?: number;
  maxInFlightPerWebhook?: number;
}

const wholeNumber = (min: number, max: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`a whole number from ${min} to ${max}`);
  return n;
};

export function serveCommand(): Command {
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
    .addOption(new Option("--database-url <url>", "PostgreSQL; default: the embedded database").env("DATABASE_URL"))
    .option("--data-dir <dir>", "folder of the embedded database (default: memory only)")
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
    .addOption(new Option("--smtp-url <url>", "SMTP server for the webhook-disabled e-mail").env("SMTP_URL"))
    .addOption(new Option("--webhook-ca <file>", "extra CA certificate (PEM) trusted for deliveries").env("WEBHOOK_CA_FILE"))
    .option("--max-in-flight <n>", "delivery attempts claimed and under way at once (memory and database load)", wholeNumber(1, 100_000), 256)
    .option("--max-in-flight-per-webhook <n>", "attempts to one webhook at once, below its origin's 32 connections", wholeNumber(1, 31), 16)
    .action(async (flags: ServeFlags) => {
      const server = await startServer({
        host: flags.host,
        port: flags.port,
        config: loadConfig(flags.config),
        databaseUrl: flags.databaseUrl,
        dataDir: flags.dataDir,
        clock: flags.clock ?? { mode: "real" },
        conformance: flags.conformance ?? false,
        // Unset flags leave the config file's choice.
        allowPrivateWebhooks: flags.allowPrivateWebhooks,
        smtpUrl: flags.smtpUrl,
        webhookCa: flags.webhookCa ? readFileSync(flags.webhookCa, "utf8") : undefined,
        maxInFlight: flags.maxInFlight,
        maxInFlightPerWebhook: flags.maxInFlightPerWebhook,
      });
      process.stdout.write(
        `Partner Platform v4 reference server on ${server.url} (clock: ${server.clock.mode}${flags.conformance ? ", conformance control API on" : ""})\n`,
      );
      await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      await server.close();
    });
}
