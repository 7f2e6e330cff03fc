// The expected-failures file of the broken variants: each variant lists exactly the checks that must
// fail against it. A listed check that passes (a stale entry) or an unlisted one that fails both
// fail the proof, so the list cannot drift from what the suite really catches.
import { readFileSync } from "node:fs";
import type { SuiteReport } from "./check.js";

export interface ExpectedFailures {
  $comment?: string;
  variants: Record<string, { description: string; fails: string[] }>;
}

export function loadExpectedFailures(file: string): ExpectedFailures {
  return JSON.parse(readFileSync(file, "utf8")) as ExpectedFailures;
}

export interface Comparison {
  /** Checks that failed but are not listed for the variant. */
  unexpected: string[];
  /** Listed checks that did not fail: the entry is stale. */
  stale: string[];
}

export function compareWithExpected(report: SuiteReport, expectedFails: readonly string[]): Comparison {
  const failed = new Set(report.results.filter((r) => r.status === "failed").map((r) => r.id));
  const expected = new Set(expectedFails);
  return {
    unexpected: [...failed].filter((id) => !expected.has(id)),
    stale: [...expected].filter((id) => !failed.has(id)),
  };
}
