// `partner-platform verify`: checks a signature against a body read byte for byte from a file or stdin.
import { readFile } from "node:fs/promises";
import { Command } from "commander";
import { verifySignature } from "../signing.js";

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function verifyCommand(): Command {
  return new Command("verify")
    .description("Check an X-Service-Signature against the exact bytes of a delivery body.")
    .argument("[file]", "the body, byte for byte; - or nothing for stdin")
    .requiredOption("--secret <secret>", "the webhook's secret")
    .requiredOption("--signature <hex>", "the X-Service-Signature header value")
    .action(async (file: string | undefined, options: { secret: string; signature: string }) => {
      const body = !file || file === "-" ? await readStdin() : await readFile(file);
      const result = verifySignature(body, options.signature, options.secret);
      if (result.valid) {
        process.stdout.write("valid\n");
      } else {
        process.stdout.write(`invalid: ${result.message}\n`);
        process.exitCode = 1;
      }
    });
}
