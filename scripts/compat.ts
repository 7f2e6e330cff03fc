// `npm run compat -- --base <git revision | directory>`: the same as `partner-platform compat`, without
// loading the CLI's other commands (their servers and databases take seconds to import).
import { CommanderError } from "commander";
import { compatCommand } from "../src/cli/compat.js";
import { oneLineUsageErrors } from "../src/cli/program.js";

const command = oneLineUsageErrors(compatCommand());
try {
  await command.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exitCode = error.exitCode === 0 ? 0 : 2;
  else {
    process.stderr.write(`partner-platform: compat: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
