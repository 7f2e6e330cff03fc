// `partner-platform verify`: checks a signature against a body read byte for byte from a file or stdin.
// Exit status: 0 valid, 1 invalid, 2 usage error (commander's, or an unreadable body).
import { readFile } from "node:fs/promises";
import { Command, InvalidArgumentError, Option } from "commander";
import { verifySignature, loadDeliveryRules } from "@partner-platform/sdk";

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The environment variable that stands in for --secret, so that the secret stays out of `ps` and shell history. */
export const webhookSecretEnv = "PARTNER_PLATFORM_WEBHOOK_SECRET";

/** Option parser refusing an empty value (an empty secret verifies nothing). */
export function nonEmpty(value: string): string {
  if (value === "") throw new InvalidArgumentError("must not be empty");
  return value;
}

export function verifyCommand(): Command {
  return new Command("verify")
    .description(`Check an ${loadDeliveryRules().signatureHeader} value against the exact bytes of a delivery body.`)
    .argument("[file]", "the body, byte for byte; - or nothing for stdin")
    .addOption(new Option("--secret <secret>", "the webhook's secret").env(webhookSecretEnv).argParser(nonEmpty).makeOptionMandatory())
    .requiredOption("--signature <hex>", `the ${loadDeliveryRules().signatureHeader} header value`)
    .action(async (file: string | undefined, options: { secret: string; signature: string }, command: Command) => {
      const fromStdin = !file || file === "-";
      if (fromStdin && process.stdin.isTTY) command.error("no body: give a FILE, or pipe the body to stdin", { exitCode: 2 });
      let body: Buffer;
      try {
        body = fromStdin ? await readStdin() : await readFile(file);
      } catch (error) {
        command.error(`cannot read the body from ${fromStdin ? "stdin" : file}: ${(error as Error).message}`, { exitCode: 2 });
      }
      const result = verifySignature(body, options.signature, options.secret);
      if (result.valid) {
        process.stdout.write("valid\n");
      } else {
        process.stdout.write(`invalid: ${result.message}\n`);
        process.exitCode = 1;
      }
    });
}
