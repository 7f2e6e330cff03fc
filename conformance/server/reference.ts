// Certifies the package's reference server in this process, optionally as one of the broken variants:
// what the proof tests and the benchmark run.
import { loadConfig, startServer } from "../../src/server/index.js";
import type { BrokenServer } from "../broken/servers.js";
import type { RunOptions, SuiteReport } from "../framework/check.js";
import type { ClockSetting } from "./clock.js";
import { certifyServer } from "./index.js";

export async function certifyReference(
  clock: ClockSetting,
  options: { variant?: BrokenServer; databaseUrl?: string } = {},
  run: RunOptions = {},
): Promise<SuiteReport> {
  const client = loadConfig().clients[0]!;
  return certifyServer(
    {
      baseUrl: "",
      authUrl: "",
      controlUrl: "",
      clientId: client.clientId,
      clientSecret: client.clientSecret,
      partnerEmail: client.contactEmail,
      clock,
      async launch(env) {
        const server = await startServer({
          conformance: true,
          allowPrivateWebhooks: true,
          databaseUrl: options.databaseUrl,
          clock: clock.kind === "virtual" ? { mode: "virtual" } : { mode: "scaled", scale: clock.factor },
          smtpUrl: env.smtpUrl,
          webhookCa: env.caCert,
          faults: new Set(options.variant?.faults ?? []),
          rules: options.variant?.rules,
          log: () => undefined,
        });
        return { url: server.url, stop: () => server.close() };
      },
    },
    run,
  );
}
