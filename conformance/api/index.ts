// Certification of a REST implementation of the API: `certifyApi(options)` from code (a test runner),
// `partner-platform certify api` from the CLI.
import { runChecks, type RunOptions, type SuiteReport } from "../framework/check.js";
import { preflightReach, preflightToken } from "../framework/preflight.js";
import { apiChecks } from "./checks.js";
import { loadContract } from "./contract.js";
import { createApiContext, type ApiSuiteOptions } from "./context.js";

export { apiChecks } from "./checks.js";
export { defaultRuns, defaultSeed, type ApiSuiteOptions } from "./context.js";

export async function certifyApi(options: ApiSuiteOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const contract = loadContract();
  // One line when the implementation is not there or does not know the client, instead of every check
  // failing alike; scopes are the checks' business.
  await preflightReach(options.baseUrl, "the API", "--base-url");
  await preflightToken(options);
  return runChecks("api", options.baseUrl, apiChecks(contract), createApiContext(options, contract), run);
}
