// Certification of a REST implementation of the API: `certifyApi(options)` from code (a test runner),
// `partner-platform certify api` from the CLI.
import { runChecks, type RunOptions, type SuiteReport } from "../framework/check.js";
import { apiChecks } from "./checks.js";
import { loadContract } from "./contract.js";
import { createApiContext, type ApiSuiteOptions } from "./context.js";

export { apiChecks } from "./checks.js";
export { defaultRuns, defaultSeed, type ApiSuiteOptions } from "./context.js";

export async function certifyApi(options: ApiSuiteOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const contract = loadContract();
  return runChecks("api", options.baseUrl, apiChecks(contract), createApiContext(options, contract), run);
}
