// `partner-platform certify api`: certifies a REST implementation of the API against the contract.
import { Command, InvalidArgumentError } from "commander";
import { defaultRuns, defaultSeed } from "../../conformance/api/context.js";
import { runSuiteFromCli, withReportFlags, type ReportFlags } from "./certify.js";

const wholeNumber = (min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`a whole number of at least ${min}`);
  return n;
};

interface ApiFlags extends ReportFlags {
  baseUrl: string;
  authUrl: string;
  clientId: string;
  clientSecret: string;
  seed?: number;
  runs?: number;
}

export function apiCommand(): Command {
  return withReportFlags(
    new Command("api")
      .description(
        "Certify a REST implementation of the API: tokens, every operation's example, authentication, scopes, problem+json errors, and inputs generated from the schemas.",
      )
      .requiredOption("--base-url <url>", "the API's {base_url}")
      .requiredOption("--auth-url <url>", "the authorization server's {auth_url}")
      .requiredOption("--client-id <id>", "client allowed every scope of the API")
      .requiredOption("--client-secret <secret>", "its secret")
      .option("--seed <n>", `seed of the generated inputs (default ${defaultSeed})`, wholeNumber(0))
      .option("--runs <n>", `generated inputs per property check (default ${defaultRuns})`, wholeNumber(1)),
  ).action(async (flags: ApiFlags) => {
    const { certifyApi } = await import("../../conformance/api/index.js");
    await runSuiteFromCli(flags, (run) =>
      certifyApi(
        {
          baseUrl: flags.baseUrl,
          authUrl: flags.authUrl,
          clientId: flags.clientId,
          clientSecret: flags.clientSecret,
          ...(flags.seed !== undefined ? { seed: flags.seed } : {}),
          ...(flags.runs !== undefined ? { runs: flags.runs } : {}),
        },
        run,
      ),
    );
  });
}
