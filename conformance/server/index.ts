// Certification of a webhook-sending server: `certifyServer(options)` from code, `certify server` from the CLI.
import type { RunOptions, SuiteReport } from "../framework/check.js";
import { runChecks } from "../framework/check.js";
import { startReceiver } from "../harness/receiver.js";
import { startSmtpSink } from "../harness/smtp-sink.js";
import { serverChecks } from "./checks.js";
import { createServerContext, type ServerSuiteOptions } from "./context.js";
import { startImplementation } from "./start.js";

export { serverChecks } from "./checks.js";
export type { ServerSuiteOptions } from "./context.js";

export interface CertifyServerOptions extends ServerSuiteOptions {
  /** A shell command that starts the implementation; it is given WEBHOOK_CA_FILE, SMTP_URL, CONFORMANCE_CLOCK. */
  start?: string;
}

export async function certifyServer(options: CertifyServerOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const receiver = await startReceiver();
  const smtp = await startSmtpSink();
  const started = options.start
    ? await startImplementation(options.start, `${options.controlUrl}/conformance/clock`, {
        caCert: receiver.pki.caCert,
        smtpUrl: smtp.url,
        clock: options.clock,
      })
    : undefined;
  try {
    const ctx = createServerContext(options, receiver, smtp);
    return await runChecks("server", options.baseUrl, serverChecks, ctx, run);
  } finally {
    await started?.stop();
    await receiver.close();
    await smtp.close();
  }
}
