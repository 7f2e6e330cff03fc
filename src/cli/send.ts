// `partner-platform send`: posts a signed, schema-valid event to a receiver, as a conforming server does.
// Exit status: 0 when every delivery got a 2xx, 1 when one did not, 2 on a usage error.
import { readFile } from "node:fs/promises";
import { Command, InvalidArgumentError, Option } from "commander";
import { buildEnvelope, deliver, tlsDispatcher } from "../sender.js";
import { eventNames, type EventName } from "@partner-platform/sdk";
import { nonEmpty, webhookSecretEnv } from "./verify.js";

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const positive = (what: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${what} must be a whole number of at least 1`);
  return n;
};

const httpUrl = (value: string): string => {
  const protocol = URL.canParse(value) ? new URL(value).protocol : "";
  if (protocol !== "http:" && protocol !== "https:") throw new InvalidArgumentError("must be an http:// or https:// URL");
  return value;
};

interface SendFlags {
  url: string;
  secret: string;
  businessId?: string;
  data?: string;
  repeat: number;
  timeoutMs?: number;
  insecure?: boolean;
  ca?: string;
}

export function sendCommand(): Command {
  return new Command("send")
    .description("Send a signed event (from the spec's example) to a webhook receiver, exactly as the service delivers it.")
    .argument("<event>", `one of: ${eventNames.join(", ")}`)
    .requiredOption("--url <url>", "the receiver's URL", httpUrl)
    .addOption(new Option("--secret <secret>", "the webhook's secret").env(webhookSecretEnv).argParser(nonEmpty).makeOptionMandatory())
    .option("--business-id <id>", "set data.businessID")
    .option("--data <file>", "JSON file whose content replaces data (validated before sending)")
    .option("--repeat <n>", "send the same event (same id) n times, as retries do", positive("--repeat"), 1)
    .option("--timeout-ms <ms>", "attempt timeout (default: the spec's)", positive("--timeout-ms"))
    .addOption(new Option("--insecure", "accept any TLS certificate").conflicts("ca"))
    .option("--ca <file>", "also trust this CA certificate (PEM) for HTTPS")
    .action(async (event: string, options: SendFlags, command: Command) => {
      const usage: (message: string) => never = (message) => command.error(message, { exitCode: 2 });
      if (!eventNames.includes(event as EventName)) usage(`unknown event "${event}"; use one of: ${eventNames.join(", ")}`);
      let data: unknown;
      if (options.data) {
        try {
          // Bytes that are not UTF-8 are refused, never repaired into U+FFFD (D29).
          data = JSON.parse(strictUtf8.decode(await readFile(options.data)));
        } catch (error) {
          usage(`--data ${options.data}: ${error instanceof TypeError ? "not valid UTF-8" : (error as Error).message}`);
        }
      }
      let ca: string | undefined;
      if (options.ca) ca = await readFile(options.ca, "utf8").catch((error: Error) => usage(`--ca ${options.ca}: ${error.message}`));
      let envelope;
      try {
        envelope = buildEnvelope(event as EventName, { businessId: options.businessId, data });
      } catch (error) {
        usage((error as Error).message); // one line per schema violation
      }
      // These exact bytes are signed and sent, on every repetition.
      const body = Buffer.from(JSON.stringify(envelope));
      const dispatcher = tlsDispatcher({ insecure: options.insecure, ca });
      process.stdout.write(`${envelope.event} ${envelope.id} -> ${options.url}\n`);
      let failed = false;
      try {
        for (let i = 1; i <= options.repeat; i++) {
          const outcome = await deliver(options.url, body, { secret: options.secret, timeoutMs: options.timeoutMs, dispatcher });
          const what = outcome.status !== undefined ? String(outcome.status) : `no answer (${outcome.error})`;
          process.stdout.write(`#${i} ${what} ${outcome.latencyMs.toFixed(1)} ms\n`);
          failed ||= !outcome.ok;
        }
      } finally {
        await dispatcher?.close();
      }
      if (failed) process.exitCode = 1;
    });
}
