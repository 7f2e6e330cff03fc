// The `partner-platform` command. Each subcommand lives in its own module under src/cli/.
import { Command, CommanderError } from "commander";
import { readFileSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "../paths.js";

const { version } = JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8")) as { version: string };

// Subcommands are registered here, one line each, in the order --help lists them. Their modules load
// when needed: a run that names a subcommand loads only its module (serve's and certify's take 1–1.5 s
// to import, which compat, verify or send would otherwise pay on every run).
const subcommands: Record<string, () => Promise<Command>> = {
  mock: async () => (await import("./mock.js")).mockCommand(),
  send: async () => (await import("./send.js")).sendCommand(),
  serve: async () => (await import("./serve.js")).serveCommand(),
  verify: async () => (await import("./verify.js")).verifyCommand(),
  certify: async () => (await import("./certify.js")).certifyCommand(),
  compat: async () => (await import("./compat.js")).compatCommand(),
};

/** The program with the subcommand `argv` names, or with all of them (for --help, --version, a mistyped name). */
export async function createProgram(argv: string[] = []): Promise<Command> {
  const program = new Command("partner-platform")
    .description("Partner Platform v4: mock, webhook tools, reference server and conformance suite.")
    .version(version);
  const named = argv[2];
  const wanted = named !== undefined && Object.hasOwn(subcommands, named) ? [named] : Object.keys(subcommands);
  for (const command of await Promise.all(wanted.map((name) => subcommands[name]!()))) program.addCommand(command);
  return program;
}

/**
 * Makes every command of `root` throw its usage errors (a CommanderError: exit status 2 in the catch
 * that runs it) and print each as one line, `partner-platform: <what is wrong>`, like every other error of
 * the CLI: commander's own begin "error: " and put a suggestion on a line of its own ("(Did you mean
 * --base-url?)"). The root's own (an unknown command, a missing option) also say where the usage is.
 * addCommand() passes neither setting down, so each command gets both.
 */
export function oneLineUsageErrors(root: Command): Command {
  const usageLine = (text: string, ofRoot: boolean) =>
    `partner-platform: ${text.trim().replace(/^error: /, "").replace(/\s*\n\s*/g, " ")}${ofRoot ? " (run with --help for usage)" : ""}\n`;
  const override = (command: Command): void => {
    command.exitOverride();
    command.configureOutput({ outputError: (text, write) => write(usageLine(text, command === root)) });
    command.commands.forEach(override);
  };
  override(root);
  return root;
}

/** Runs the CLI; a usage error or a thrown error prints one line and exits non-zero. */
export async function runCli(argv: string[]): Promise<void> {
  const program = oneLineUsageErrors(await createProgram(argv));
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

