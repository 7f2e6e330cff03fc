// Certification of a webhook-sending server: `certifyServer(options)` from code, `certify server` from the CLI.
import type { RunOptions, SuiteReport } from "../framework/check.js";
import { runChecks } from "../framework/check.js";
import { loadOrCreatePki } from "../harness/pki.js";
import { startReceiver } from "../harness/receiver.js";
import { startSmtpSink } from "../harness/smtp-sink.js";
import { serverChecks } from "./checks.js";
import { createServerContext, type ServerSuiteOptions } from "./context.js";
import { startImplementation } from "./start.js";

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
  /** Keep the receiver's CA in this folder (made on first use) for an implementation started beforehand. */
  pkiDir?: string;
  /** Port of the SMTP sink (default: any free port), for an implementation started beforehand. */
  smtpPort?: number;
  /** Or a function that starts it in this process (tests, benchmarks); the URL it returns serves API, auth and control. */
  launch?: (env: SuiteEnvironment) => Promise<{ url: string; stop(): Promise<void> }>;
}

export async function certifyServer(options: CertifyServerOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const receiver = await startReceiver(options.pkiDir ? { pki: await loadOrCreatePki(options.pkiDir) } : {});
  const smtp = await startSmtpSink("127.0.0.1", options.smtpPort ?? 0);
  const started = options.launch
    ? await options.launch({ caCert: receiver.pki.caCert, smtpUrl: smtp.url })
    : options.start
      ? await startImplementation(options.start, `${options.controlUrl}/conformance/clock`, {
          caCert: receiver.pki.caCert,
          smtpUrl: smtp.url,
          clock: options.clock,
        })
      : undefined;
  try {
    const launched = started && "url" in started ? { baseUrl: started.url, authUrl: started.url, controlUrl: started.url } : {};
    const target = { ...options, ...launched };
    const ctx = createServerContext(target, receiver, smtp);
    return await runChecks("server", target.baseUrl, serverChecks, ctx, run);
  } finally {
    await started?.stop();
    await receiver.close();
    await smtp.close();
  }
}
