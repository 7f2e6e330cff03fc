// `partner-platform certify <suite>`: the shared plumbing of every certification suite's CLI. Options
// come from flags or, for secrets, the environment, and are all checked before anything starts; --list
// shows the checks without running anything; a run prints a row per check and writes the reports.
// Exit status: 0 certified, 1 not certified, 2 usage error or the certification could not run.
import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { Command, Option } from "commander";
import type { RunOptions, SuiteReport } from "../../conformance/framework/check.js";
import {
  formatCheckList,
  formatResult,
  idColumn,
  formatSummary,
  reportPathProblem,
  toListJson,
  writeReportFile,
  writeReports,
  type ListedCheck,
} from "../../conformance/framework/report.js";
import { defaultTargets } from "../../conformance/server/context.js";
import { apiCommand } from "./certify-api.js";
import { webhookSecretEnv } from "./verify.js";

/** An option that cannot work: printed as `partner-platform: <flag>: <problem>`, exit status 2, before anything runs. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(flag: string, problem: string) {
    super(`${flag}: ${problem}`);
  }
}

/** The environment variables that stand in for secret flags, so that secrets stay out of `ps` and shell history. */
export const secretEnv = {
  clientId: "PARTNER_PLATFORM_CLIENT_ID",
  clientSecret: "PARTNER_PLATFORM_CLIENT_SECRET",
  secondClientId: "PARTNER_PLATFORM_SECOND_CLIENT_ID",
  secondClientSecret: "PARTNER_PLATFORM_SECOND_CLIENT_SECRET",
  limitedClientId: "PARTNER_PLATFORM_LIMITED_CLIENT_ID",
  limitedClientSecret: "PARTNER_PLATFORM_LIMITED_CLIENT_SECRET",
  webhookSecret: webhookSecretEnv,
} as const;

/** Reads a command's option values, each checked as it is read; a bad one throws UsageError naming its flag. */
export class Flags {
  constructor(private readonly command: Command) {}

  private option(key: string): Option {
    const option = this.command.options.find((o) => o.attributeName() === key);
    if (!option) throw new Error(`no option ${key} on ${this.command.name()}`);
    return option;
  }

  flag(key: string): string {
    return this.option(key).long ?? key;
  }

  is(key: string): boolean {
    return this.command.getOptionValue(key) === true;
  }

  /** The value given (flag, environment variable or default); never empty. */
  optional(key: string): string | undefined {
    const value = this.command.getOptionValue(key) as string | undefined;
    if (value !== "") return value;
    const env = this.option(key).envVar;
    throw new UsageError(this.flag(key), this.command.getOptionValueSource(key) === "env" ? `must not be empty (${env} is set but empty)` : "must not be empty");
  }

  /** The value, parsed with `parse` (which says what is wrong by throwing); undefined when not given. */
  parsed<T>(key: string, parse: (value: string) => T): T | undefined {
    const value = this.optional(key);
    if (value === undefined) return undefined;
    try {
      return parse(value);
    } catch (error) {
      throw new UsageError(this.flag(key), (error as Error).message);
    }
  }

  /** Like `parsed`, and the option must be given (except with --list, which reads no other option). */
  required(key: string): string;
  required<T>(key: string, parse: (value: string) => T): T;
  required<T>(key: string, parse?: (value: string) => T): T | string {
    const value = parse ? this.parsed(key, parse) : this.optional(key);
    const env = this.option(key).envVar;
    if (value === undefined) throw new UsageError(this.flag(key), env ? `required (give it, or set ${env})` : "required");
    return value;
  }
}

// Parsers for Flags.parsed: each returns the value or throws with what is wrong.
export const parse = {
  httpUrl(value: string): string {
    const protocol = URL.canParse(value) ? new URL(value).protocol : "";
    if (protocol !== "http:" && protocol !== "https:") throw new Error(`must be an absolute http:// or https:// URL, got "${value}"`);
    return value;
  },
  port(value: string): number {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < 1 || n > 65535) throw new Error(`must be a port number from 1 to 65535, got "${value}"`);
    return n;
  },
  host(value: string): string {
    const name = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;
    if (!isIP(value) && !name.test(value)) throw new Error(`must be an IP address or a host name, got "${value}"`);
    return value;
  },
  email(value: string): string {
    if (!/^[^\s@]+@[^\s@.]+(\.[^\s@.]+)*$/.test(value)) throw new Error(`must be an e-mail address, got "${value}"`);
    return value;
  },
  wholeNumber: (min: number) => (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) throw new Error(`must be a whole number of at least ${min}, got "${value}"`);
    return n;
  },
};

/** A PEM certificate file, read and parsed now so that a wrong --ca is a usage error, not N failed deliveries. */
async function readCertificate(flags: Flags, key: string): Promise<string | undefined> {
  const file = flags.optional(key);
  if (file === undefined) return undefined;
  let pem: string;
  try {
    pem = await readFile(file, "utf8");
  } catch (error) {
    throw new UsageError(flags.flag(key), `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new UsageError(flags.flag(key), `${file} is not a PEM certificate`);
  }
  return pem;
}

const idList = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
];

/** What a suite's command is made of; the rest (selection, --list, rows, reports, exit status) is shared. */
export interface SuiteCli {
  suite: string;
  description: string;
  /** Adds the suite's own options. */
  options(command: Command): Command;
  /** The suite's checks, known without running anything (for --list, --only and --skip). */
  checks(): Promise<readonly ListedCheck[]>;
  /** Checks the suite's own options (throwing UsageError) and returns what runs the suite. */
  prepare(flags: Flags): Promise<(run: RunOptions) => Promise<SuiteReport>>;
}

/** Ids in --only/--skip must name checks of the suite: a typo must not silently run nothing. */
function selection(flags: Flags, command: Command, checks: readonly ListedCheck[]): RunOptions {
  const known = new Set(checks.map((c) => c.id));
  const ids = (key: string): string[] | undefined => {
    const given = command.getOptionValue(key) as string[] | undefined;
    const unknown = (given ?? []).filter((id) => !known.has(id));
    if (unknown.length > 0) throw new UsageError(flags.flag(key), `unknown check id(s): ${unknown.join(", ")} (--list shows the ids)`);
    return given;
  };
  return { only: ids("only"), skip: ids("skip") };
}

const selected = (checks: readonly ListedCheck[], { only, skip }: RunOptions) =>
  checks.filter((c) => (!only?.length || only.includes(c.id)) && !skip?.includes(c.id));

async function listChecks(flags: Flags, suite: string, checks: readonly ListedCheck[], out: (text: string) => void): Promise<void> {
  const json = flags.optional("json");
  if (json === undefined) return out(formatCheckList(suite, checks));
  if (json === "-") return out(toListJson(suite, checks));
  const problem = await reportPathProblem(json);
  if (problem) throw new UsageError("--json", problem);
  await writeReportFile(json, toListJson(suite, checks));
}

/** Builds `certify <suite>`: the suite's options, then --only, --skip, --list, --junit, --json and --html. */
export function suiteCommand(cli: SuiteCli): Command {
  const command = cli
    .options(new Command(cli.suite).description(cli.description))
    .addOption(new Option("--only <ids>", "run only these check ids (comma-separated)").argParser(idList))
    .addOption(new Option("--skip <ids>", "skip these check ids (comma-separated)").argParser(idList))
    .option("--list", "print each check's id, section, title and scenario, and run nothing (no other option needed)")
    .option("--junit <file>", "write a JUnit XML report")
    .option("--json <file>", "write a JSON report (with --list: the list, - for stdout)")
    .option("--html <file>", "write an HTML report: one offline page, with a timeline of every timed attempt")
    .addHelpText("after", "\nExit status: 0 certified, 1 not certified, 2 usage error or the certification could not run.");
  return command.action(async (_options: unknown, self: Command) => {
    const out = (text: string) => self.configureOutput().writeOut!(text);
    let failure: string | undefined;
    try {
      const flags = new Flags(self);
      const checks = await cli.checks();
      const run = selection(flags, self, checks);
      if (flags.is("list")) return await listChecks(flags, cli.suite, selected(checks, run), out);
      const start = await cli.prepare(flags);
      const files = { junit: flags.optional("junit"), json: flags.optional("json"), html: flags.optional("html") };
      for (const key of ["junit", "json", "html"] as const) {
        const file = files[key];
        if (file === "-") throw new UsageError(`--${key}`, "- (stdout) is for --list --json only: give a file");
        const problem = file === undefined ? undefined : await reportPathProblem(file);
        if (problem) throw new UsageError(`--${key}`, problem);
      }
      const width = idColumn(selected(checks, run));
      const report = await start({ ...run, onResult: (result) => out(`${formatResult(result, width)}\n`) });
      out(`${formatSummary(report)}\n`);
      await writeReports(report, files);
      if (!report.passed) process.exitCode = 1;
    } catch (error) {
      // A SetupError, or anything else that stopped the run: no verdict can be given.
      failure = error instanceof UsageError ? error.message : `certify ${cli.suite}: ${(error as Error)?.message ?? String(error)}`;
    }
    if (failure !== undefined) self.error(failure, { exitCode: 2, code: "partner-platform.certify" });
  });
}

const serverCli: SuiteCli = {
  suite: "server",
  description: "Certify a server's webhook delivery: signing, envelope, filtering, retry timing, disabling and e-mail.",
  options: (command) =>
    command
      .option("--base-url <url>", "the API's {base_url} (required)")
      .option("--auth-url <url>", "the authorization server's {auth_url} (required)")
      .option("--control-url <url>", "the implementation's Conformance Control API (required)")
      .addOption(new Option("--client-id <id>", "client allowed every scope (required)").env(secretEnv.clientId))
      .addOption(new Option("--client-secret <secret>", "its secret (required)").env(secretEnv.clientSecret))
      .addOption(new Option("--second-client-id <id>", "a client of another partner, allowed webhooks::write (required: business ownership, D27)").env(secretEnv.secondClientId))
      .addOption(new Option("--second-client-secret <secret>", "its secret (required)").env(secretEnv.secondClientSecret))
      .option("--second-client-business-id <id>", "a business of the second client, not of --client-id", defaultTargets.secondClientBusinessId)
      .option("--partner-email <address>", "the client's contact address, where the disable e-mail must go (required)")
      .option("--second-partner-email <address>", "the second client's contact address: the suite then disables a webhook of that client too and checks each partner's notice goes to that partner alone")
      .option("--clock <mode>", "virtual, or scaled:FACTOR (e.g. scaled:0.0001)", "virtual")
      .option("--business-id <id>", "a business that serves --category-id at --zip", defaultTargets.businessId)
      .option("--other-business-id <id>", "another existing business", defaultTargets.otherBusinessId)
      .option("--category-id <id>", "category for the service request", defaultTargets.categoryId)
      .option("--zip <zip>", "postal code for the service request", defaultTargets.zip)
      .option("--start <command>", "start the implementation with this shell command (given WEBHOOK_CA_FILE, SMTP_URL, CONFORMANCE_CLOCK) and stop it afterwards")
      .option("--start-timeout <seconds>", "how long --start may take until the Control API answers (a build first, a JVM)", "60")
      .option("--pki-dir <dir>", "keep the receiver's CA in DIR (ca.pem, ca-key.pem; made on first use), for an implementation started beforehand to trust DIR/ca.pem")
      .option("--receiver-host <host>", "address of the suite's HTTPS receiver: the host of the webhook URLs it registers and of its certificate", "127.0.0.1")
      .option("--receiver-port <port>", "port of the receiver (default: any free port)")
      .option("--smtp-host <host>", "address of the suite's SMTP sink", "127.0.0.1")
      .option("--smtp-port <port>", "port of the SMTP sink, for the implementation's SMTP_URL (default: any free port)"),
  checks: async () => (await import("../../conformance/server/checks.js")).serverChecks,
  async prepare(flags) {
    const { parseClockSetting } = await import("../../conformance/server/clock.js");
    const options = {
      baseUrl: flags.required("baseUrl", parse.httpUrl),
      authUrl: flags.required("authUrl", parse.httpUrl),
      controlUrl: flags.required("controlUrl", parse.httpUrl),
      clientId: flags.required("clientId"),
      clientSecret: flags.required("clientSecret"),
      secondClientId: flags.required("secondClientId"),
      secondClientSecret: flags.required("secondClientSecret"),
      secondClientBusinessId: flags.required("secondClientBusinessId"),
      partnerEmail: flags.required("partnerEmail", parse.email),
      secondPartnerEmail: flags.parsed("secondPartnerEmail", parse.email),
      clock: flags.required("clock", parseClockSetting),
      businessId: flags.required("businessId"),
      otherBusinessId: flags.required("otherBusinessId"),
      categoryId: flags.required("categoryId"),
      zip: flags.required("zip"),
      start: flags.optional("start"),
      startTimeoutSeconds: flags.required("startTimeout", parse.wholeNumber(1)),
      pkiDir: flags.optional("pkiDir"),
      receiverHost: flags.parsed("receiverHost", parse.host),
      receiverPort: flags.parsed("receiverPort", parse.port),
      smtpHost: flags.parsed("smtpHost", parse.host),
      smtpPort: flags.parsed("smtpPort", parse.port),
    };
    if (options.secondPartnerEmail?.toLowerCase() === options.partnerEmail.toLowerCase()) {
      throw new UsageError(flags.flag("secondPartnerEmail"), "must be another partner's address than --partner-email");
    }
    const { certifyServer } = await import("../../conformance/server/index.js");
    return (run) => certifyServer(options, run);
  },
};

const receiverCli: SuiteCli = {
  suite: "receiver",
  description: "Certify a partner's webhook receiver: it must acknowledge signed events and refuse every forgery.",
  options: (command) =>
    command
      .option("--url <url>", "the receiver's URL, https:// or http:// (required)")
      .addOption(new Option("--secret <secret>", "the webhook secret it verifies with (required)").env(secretEnv.webhookSecret))
      .addOption(new Option("--insecure", "accept any TLS certificate").conflicts("ca"))
      .option("--ca <file>", "also trust this CA certificate (PEM) for HTTPS"),
  checks: async () => (await import("../../conformance/receiver/index.js")).receiverChecks,
  async prepare(flags) {
    const options = {
      url: flags.required("url", parse.httpUrl),
      secret: flags.required("secret"),
      tls: { ca: await readCertificate(flags, "ca"), insecure: flags.is("insecure") },
    };
    const { certifyReceiver } = await import("../../conformance/receiver/index.js");
    return (run) => certifyReceiver(options, run);
  },
};

/** The `certify` command; each suite adds its subcommand here, one line each. */
export function certifyCommand(): Command {
  const certify = new Command("certify").description(
    "Certify an implementation against Partner Platform v4: a webhook-sending server, a partner's webhook receiver, or a REST API.",
  );
  certify.addCommand(suiteCommand(serverCli));
  certify.addCommand(apiCommand());
  certify.addCommand(suiteCommand(receiverCli));
  return certify;
}
