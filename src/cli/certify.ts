// `partner-platform certify <suite>`: the shared plumbing of every certification suite's CLI.
import { Command, Option } from "commander";
import type { RunOptions, SuiteReport } from "../../conformance/framework/check.js";
import { formatResult, formatSummary, writeReports } from "../../conformance/framework/report.js";
import { defaultTargets } from "../../conformance/server/context.js";
import { apiCommand } from "./certify-api.js";

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

function serverCommand(): Command {
  return withReportFlags(
    new Command("server")
      .description("Certify a server's webhook delivery: signing, envelope, filtering, retry timing, disabling and e-mail.")
      .requiredOption("--base-url <url>", "the API's {base_url}")
      .requiredOption("--auth-url <url>", "the authorization server's {auth_url}")
      .requiredOption("--client-id <id>", "client allowed every scope")
      .requiredOption("--client-secret <secret>", "its secret")
      .requiredOption("--control-url <url>", "the implementation's Conformance Control API")
      .option("--clock <mode>", 'virtual, or scaled:FACTOR (e.g. scaled:0.0001)', "virtual")
      .option("--partner-email <address>", "the contact address the e-mail must go to")
      .option("--business-id <id>", "a business that serves --category-id at --zip", defaultTargets.businessId)
      .option("--other-business-id <id>", "another existing business", defaultTargets.otherBusinessId)
      .option("--category-id <id>", "category for the service request", defaultTargets.categoryId)
      .option("--zip <zip>", "postal code for the service request", defaultTargets.zip)
      .option("--start <command>", "start the implementation with this shell command (given WEBHOOK_CA_FILE, SMTP_URL, CONFORMANCE_CLOCK) and stop it afterwards")
      .option("--pki-dir <dir>", "without --start: keep the receiver's CA in DIR/ca.pem (made on first use) for the implementation to trust")
      .option("--smtp-port <port>", "without --start: the port of the suite's SMTP sink, for the implementation's SMTP_URL"),
  ).action(async (opts: ReportFlags & Record<string, string>) => {
    const { certifyServer } = await import("../../conformance/server/index.js");
    const { parseClockSetting } = await import("../../conformance/server/clock.js");
    await runSuiteFromCli(opts, (run) =>
      certifyServer(
        {
          baseUrl: opts.baseUrl!,
          authUrl: opts.authUrl!,
          clientId: opts.clientId!,
          clientSecret: opts.clientSecret!,
          controlUrl: opts.controlUrl!,
          clock: parseClockSetting(opts.clock!),
          partnerEmail: opts.partnerEmail,
          businessId: opts.businessId!,
          otherBusinessId: opts.otherBusinessId!,
          categoryId: opts.categoryId!,
          zip: opts.zip!,
          start: opts.start,
          pkiDir: opts.pkiDir,
          smtpPort: opts.smtpPort === undefined ? undefined : Number(opts.smtpPort),
        },
        run,
      ),
    );
  });
}

function receiverCommand(): Command {
  return withReportFlags(
    new Command("receiver")
      .description("Certify a partner's webhook receiver: it must acknowledge signed events and refuse every forgery.")
      .requiredOption("--url <url>", "the receiver's URL")
      .requiredOption("--secret <secret>", "the webhook secret it verifies with")
      .addOption(new Option("--insecure", "accept any TLS certificate").conflicts("ca"))
      .option("--ca <file>", "trust this CA certificate (PEM) for HTTPS"),
  ).action(async (opts: ReportFlags & { url: string; secret: string; insecure?: boolean; ca?: string }) => {
    const { certifyReceiver } = await import("../../conformance/receiver/index.js");
    const { tlsDispatcher } = await import("../sender.js");
    const { readFile } = await import("node:fs/promises");
    const dispatcher = tlsDispatcher({ insecure: opts.insecure, ca: opts.ca ? await readFile(opts.ca, "utf8") : undefined });
    try {
      await runSuiteFromCli(opts, (run) => certifyReceiver({ url: opts.url, secret: opts.secret, dispatcher }, run));
    } finally {
      await dispatcher?.close();
    }
  });
}

/** The `certify` command; each suite adds its subcommand here, one line each. */
export function certifyCommand(): Command {
  const certify = new Command("certify").description(
    "Certify an implementation against Partner Platform v4: a webhook-sending server, a partner's webhook receiver, or a REST API.",
  );
  certify.addCommand(serverCommand());
  certify.addCommand(apiCommand());
  certify.addCommand(receiverCommand());
  return certify;
}
