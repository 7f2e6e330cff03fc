// The `partner-platform` command. Each subcommand lives in its own module under src/cli/.
import { Command, CommanderError } from "commander";
import { readFileSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "../paths.js";
import { certifyCommand } from "./certify.js";
import { compatCommand } from "./compat.js";
import { mockCommand } from "./mock.js";
import { sendCommand } from "./send.js";
import { serveCommand } from "./serve.js";
import { verifyCommand } from "./verify.js";

const { version } = JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8")) as { version: string };

export function createProgram(): Command {
  const program = new Command("partner-platform")
    .description("Partner Platform v4: mock, webhook tools, reference server and conformance suite.")
    .version(version)
    .showHelpAfterError("(run with --help for usage)");
  // Subcommands are registered here, one line each.
  program.addCommand(mockCommand());
  program.addCommand(sendCommand());
  program.addCommand(serveCommand());
  program.addCommand(verifyCommand());
  program.addCommand(certifyCommand());
  program.addCommand(compatCommand());
  return program;
}

/** Runs the CLI; a usage error or a thrown error prints one line and exits non-zero. */
export async function runCli(argv: string[]): Promise<void> {
  const program = createProgram();
  // addCommand() does not pass exitOverride down: set it on every command so that usage errors reach the catch below.
  const override = (command: Command): void => {
    command.exitOverride();
    command.commands.forEach(override);
  };
  override(program);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end normally; any other usage error is exit status 2, apart from a command's own failures (1).
      process.exitCode = error.exitCode === 0 ? 0 : 2;
      return;
    }
    process.stderr.write(`partner-platform: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}

