// `partner-platform certify <suite>`: the shared plumbing of every certification suite's CLI.
import { Command, Option } from "commander";
import type { RunOptions, SuiteReport } from "../../conformance/framework/check.js";
import { formatResult, formatSummary, writeReports } from "../../conformance/framework/report.js";

export interface ReportFlags {
  only?: string[];
  skip?: string[];
  junit?: string;
  json?: string;
}

const idList = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
];

/** Adds --only, --skip, --junit and --json to a suite's command. */
export function withReportFlags(command: Command): Command {
  return command
    .addOption(new Option("--only <ids>", "run only these check ids (comma-separated)").argParser(idList))
    .addOption(new Option("--skip <ids>", "skip these check ids (comma-separated)").argParser(idList))
    .option("--junit <file>", "write a JUnit XML report")
    .option("--json <file>", "write a JSON report");
}

/**
 * Runs a suite with a console row per check, then the summary and the report files. The exit code
 * is 0 only when every selected check passed.
 */
export async function runSuiteFromCli(
  flags: ReportFlags,
  run: (options: RunOptions) => Promise<SuiteReport>,
  out: NodeJS.WritableStream = process.stdout,
): Promise<SuiteReport> {
  const report = await run({
    only: flags.only,
    skip: flags.skip,
    onResult: (result) => out.write(`${formatResult(result)}\n`),
  });
  out.write(`${formatSummary(report)}\n`);
  await writeReports(report, { junit: flags.junit, json: flags.json });
  if (!report.passed) process.exitCode = 1;
  return report;
}

/** The `certify` command; each suite adds its subcommand here, one line each. */
export function certifyCommand(): Command {
  const certify = new Command("certify").description(
    "Certify an implementation against Partner Platform v4: a webhook-sending server, a partner's webhook receiver, or a REST API.",
  );
  return certify;
}
