// `partner-platform certify api`: certifies a REST implementation of the API against the contract.
import { Command, Option } from "commander";
import { defaultRuns, defaultSeed } from "../../conformance/api/context.js";
import { parse, secretEnv, suiteCommand } from "./certify.js";

export function apiCommand(): Command {
  return suiteCommand({
    suite: "api",
    description:
      "Certify a REST implementation of the API: tokens, every operation's example, authentication, scopes, problem+json errors, and inputs generated from the schemas.",
    options: (command) =>
      command
        .option("--base-url <url>", "the API's {base_url} (required)")
        .option("--auth-url <url>", "the authorization server's {auth_url} (required)")
        .addOption(new Option("--client-id <id>", "client allowed every scope of the API (required)").env(secretEnv.clientId))
        .addOption(new Option("--client-secret <secret>", "its secret (required)").env(secretEnv.clientSecret))
        .addOption(
          new Option("--second-client-id <id>", "another client, which the run locks out for up to a minute to check that its wrong secrets are throttled (D30); without it that check is skipped").env(
            secretEnv.secondClientId,
          ),
        )
        .addOption(new Option("--second-client-secret <secret>", "its secret").env(secretEnv.secondClientSecret))
        .addOption(
          new Option("--limited-client-id <id>", "a client allowed some scopes of the API but not every one, to check that a client is granted its own scopes alone (D11, D12); without it that check is skipped").env(
            secretEnv.limitedClientId,
          ),
        )
        .addOption(new Option("--limited-client-secret <secret>", "its secret").env(secretEnv.limitedClientSecret))
        .option("--seed <n>", `seed of the generated inputs (default ${defaultSeed})`)
        .option("--runs <n>", `generated inputs per property check (default ${defaultRuns})`),
    // Built from the OpenAPI document: known offline.
    async checks() {
      const [{ apiChecks }, { loadContract }] = await Promise.all([import("../../conformance/api/checks.js"), import("../../conformance/api/contract.js")]);
      return apiChecks(loadContract());
    },
    async prepare(flags) {
      const seed = flags.parsed("seed", parse.wholeNumber(0));
      const runs = flags.parsed("runs", parse.wholeNumber(1));
      const options = {
        baseUrl: flags.required("baseUrl", parse.httpUrl),
        authUrl: flags.required("authUrl", parse.httpUrl),
        clientId: flags.required("clientId"),
        clientSecret: flags.required("clientSecret"),
        ...(flags.optional("secondClientId") !== undefined ? { secondClientId: flags.optional("secondClientId"), secondClientSecret: flags.required("secondClientSecret") } : {}),
        ...(flags.optional("limitedClientId") !== undefined ? { limitedClientId: flags.optional("limitedClientId"), limitedClientSecret: flags.required("limitedClientSecret") } : {}),
        ...(seed !== undefined ? { seed } : {}),
        ...(runs !== undefined ? { runs } : {}),
      };
      const { certifyApi } = await import("../../conformance/api/index.js");
      return (run) => certifyApi(options, run);
    },
  });
}
