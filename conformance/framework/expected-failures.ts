// The expected-failures file of the broken variants: each variant lists exactly the checks that must
// fail against it. A listed check that passes (a stale entry) or an unlisted one that fails both
// fail the proof, so the list cannot drift from what the suite really catches.
import { readFileSync } from "node:fs";
import type { SuiteReport } from "./check.js";

export interface ExpectedVariant {
  description: string;
  fails: string[];
  /**
   * Checks the variant's fault also reaches where timing alone decides (why, for each): their failing is
   * neither unexpected nor required, and proves none of them can fail.
   */
  mayAlsoFail?: Record<string, string>;
}

export interface ExpectedFailures {
  $comment?: string;
  variants: Record<string, ExpectedVariant>;
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

export function compareWithExpected(report: SuiteReport, { fails, mayAlsoFail = {} }: Pick<ExpectedVariant, "fails" | "mayAlsoFail">): Comparison {
  const failed = new Set(report.results.filter((r) => r.status === "failed").map((r) => r.id));
  const listed = new Set(fails);
  return {
    unexpected: [...failed].filter((id) => !listed.has(id) && !Object.hasOwn(mayAlsoFail, id)),
    stale: [...listed].filter((id) => !failed.has(id)),
  };
}
