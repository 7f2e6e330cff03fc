// A runtime a test needs that the machine may lack (another language, another Node.js release):
// scripts/install-system-deps.sh installs every one, and CI runs it.
import { it } from "vitest";

const ci = !["", "0", "false"].includes(process.env.CI ?? "");

/**
 * Inside a describe: with the runtime missing (`missing` says why), warns and skips, or under CI adds a
 * test that fails with that reason. Returns whether the runtime is there.
 */
export function requireRuntime(missing: string | undefined): boolean {
  if (missing && !ci) console.warn(`skipped: ${missing}`);
  it.runIf(missing !== undefined && ci)("has its runtime (CI installs every one)", () => {
    throw new Error(missing);
  });
  return missing === undefined;
}
