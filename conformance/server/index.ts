// Certification of a webhook-sending server: `certifyServer(options)` from code, `certify server` from the CLI.
import type { Scope } from "@partner-platform/sdk";
import type { RunOptions, SuiteReport } from "../framework/check.js";
import { SetupError, runChecks } from "../framework/check.js";
import { preflightGet, preflightReach, preflightToken } from "../framework/preflight.js";
import { loadOrCreateCa } from "../harness/pki.js";
import { startReceiver, type Receiver } from "../harness/receiver.js";
import { startSmtpSink, type SmtpSink } from "../harness/smtp-sink.js";
import { serverChecks } from "./checks.js";
import { clockSettingProblem, type ClockSetting } from "./clock.js";
import type { Clock } from "./control.js";
import { createServerContext, type ServerSuiteOptions } from "./context.js";
import { startImplementation, type StartedImplementation } from "./start.js";

export { serverChecks } from "./checks.js";
export type { ServerSuiteOptions } from "./context.js";

/** What an implementation started by the suite must be given: the receiver's CA and the SMTP sink. */
export interface SuiteEnvironment {
  caCert: string;
  smtpUrl: string;
}

export interface CertifyServerOptions extends ServerSuiteOptions {
  /** A shell command that starts the implementation; it is given WEBHOOK_CA_FILE, SMTP_URL, CONFORMANCE_CLOCK. */
  start?: string;
  /** How long `start` may take until the Control API answers, in seconds (default 60). */
  startTimeoutSeconds?: number;
  /** Keep the receiver's CA in this folder (made on first use) for an implementation started beforehand. */
  pkiDir?: string;
  /** Address of the suite's HTTPS receiver, the host of the webhook URLs it registers (default 127.0.0.1). */
  receiverHost?: string;
  /** Port of the receiver (default: any free port). */
  receiverPort?: number;
  /** Address of the SMTP sink (default 127.0.0.1). */
  smtpHost?: string;
  /** Port of the SMTP sink (default: any free port), for an implementation started beforehand. */
  smtpPort?: number;
  /** Or a function that starts it in this process (tests, benchmarks); the URL it returns serves API, auth and control. */
  launch?: (env: SuiteEnvironment) => Promise<{ url: string; stop(): Promise<void> }>;
  /** Where a notice about the kept CA goes (a new CA had to be made); default stderr. */
  notice?: (line: string) => void;
}

/** The checks register webhooks, search and request services: the client needs every scope. */
const scopes: readonly Scope[] = ["demand::search", "demand::request", "webhooks::write"];

const clockName = (c: { mode: string; scale: number } | ClockSetting) =>
  "kind" in c ? (c.kind === "virtual" ? "virtual" : `scaled:${c.factor}`) : c.mode === "scaled" ? `scaled:${c.scale}` : c.mode;

/** A port taken or an address not on this machine: the flag to change. */
function listenError(error: unknown, what: string, address: string, flags: string): unknown {
  const code = (error as { code?: string }).code;
  if (code === "EADDRINUSE" || code === "EADDRNOTAVAIL" || code === "EACCES" || code === "ENOTFOUND") {
    return new SetupError(`cannot listen on ${address} for the suite's ${what} (${code}): choose another ${flags}`);
  }
  return error;
}

/** The Control API answers with a clock of the mode (and scale) the suite drives it with. */
async function preflightControl(controlUrl: string, clock: ClockSetting): Promise<void> {
  const url = `${controlUrl.replace(/\/+$/, "")}/conformance/clock`;
  const { status, text } = await preflightGet(url, "the Conformance Control API", "--control-url");
  if (status === 404) {
    throw new SetupError(
      `the Conformance Control API is not enabled at ${controlUrl}: start the implementation with its conformance switch (the reference server: --conformance)`,
    );
  }
  let reported: Clock | undefined;
  try {
    reported = status === 200 ? (JSON.parse(text) as Clock) : undefined;
  } catch {
    // reported below
  }
  if (typeof reported?.mode !== "string" || typeof reported.scale !== "number") {
    throw new SetupError(`GET ${url} answered HTTP ${status} without a clock (${text.slice(0, 200)}): it must answer as generated/control/openapi.yaml says`);
  }
  const same =
    clock.kind === "virtual" ? reported.mode === "virtual" : reported.mode === "scaled" && Math.abs(reported.scale - clock.factor) <= clock.factor * 1e-9;
  if (!same) {
    throw new SetupError(
      `the implementation's clock is ${clockName(reported)} but --clock is ${clockName(clock)}: ` +
        (reported.mode === "real"
          ? `start it with a virtual or scaled clock (CONFORMANCE_CLOCK=${clockName(clock)})`
          : `pass --clock ${clockName(reported)}, or start it with CONFORMANCE_CLOCK=${clockName(clock)}`),
    );
  }
}

/** The last line an implementation printed, for a notice: `; its last line: "…"`, or nothing. */
function lastLine(output: string): string {
  const line = output.trim().split("\n").at(-1)?.trim();
  return line ? `; its last line: ${JSON.stringify(line.length > 300 ? `${line.slice(0, 300)}…` : line)}` : ", and it wrote nothing";
}

export async function certifyServer(options: CertifyServerOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const clockProblem = clockSettingProblem(options.clock);
  if (clockProblem) throw new SetupError(`clock: ${clockProblem}`);
  const receiverHost = options.receiverHost ?? "127.0.0.1";
  const smtpHost = options.smtpHost ?? "127.0.0.1";
  const notice = options.notice ?? ((line: string) => process.stderr.write(`${line}\n`));
  const ca = options.pkiDir ? await loadOrCreateCa(options.pkiDir, notice) : undefined;
  let receiver: Receiver | undefined;
  let smtp: SmtpSink | undefined;
  let started: { stop(): Promise<void> } | undefined;
  let command: StartedImplementation | undefined;
  try {
    receiver = await startReceiver({ host: receiverHost, port: options.receiverPort, ca }).catch((error: unknown) => {
      throw listenError(error, "HTTPS receiver", `${receiverHost}:${options.receiverPort ?? 0}`, "--receiver-host/--receiver-port");
    });
    smtp = await startSmtpSink(smtpHost, options.smtpPort ?? 0).catch((error: unknown) => {
      throw listenError(error, "SMTP sink", `${smtpHost}:${options.smtpPort ?? 0}`, "--smtp-host/--smtp-port");
    });
    let launched = {};
    if (options.launch) {
      const server = await options.launch({ caCert: receiver.pki.caCert, smtpUrl: smtp.url });
      started = server;
      launched = { baseUrl: server.url, authUrl: server.url, controlUrl: server.url };
    } else if (options.start) {
      started = command = await startImplementation(options.start, `${options.controlUrl.replace(/\/+$/, "")}/conformance/clock`, {
        caCert: receiver.pki.caCert,
        smtpUrl: smtp.url,
        clock: options.clock,
      }, (options.startTimeoutSeconds ?? 60) * 1000).catch((error: unknown) => {
        throw new SetupError(`--start: ${(error as Error).message}`);
      });
    }
    const target = { ...options, ...launched };
    // After --start, so that what it launched is what is checked.
    await preflightControl(target.controlUrl, target.clock);
    await preflightReach(target.baseUrl, "the API", "--base-url");
    await preflightToken(target, scopes);
    await preflightToken({ authUrl: target.authUrl, clientId: target.secondClientId, clientSecret: target.secondClientSecret }, ["webhooks::write"], "--second-client-id/--second-client-secret");
    const ctx = createServerContext(target, receiver, smtp);
    const report = await runChecks("server", target.baseUrl, serverChecks, ctx, run);
    // Checks that failed because the implementation was gone say only that it did not answer.
    const ended = command?.ended();
    if (ended) notice(`certify server: --start: the implementation ${ended} during the run${lastLine(command!.output())}`);
    for (const error of receiver.responderErrors) notice(`certify server: the suite's own code failed while answering a delivery (a fault of the suite; please report it): ${error}`);
    return report;
  } finally {
    await started?.stop();
    await receiver?.close();
    await smtp?.close();
  }
}
