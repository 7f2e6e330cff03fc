// Reports of a suite run: a console row per check while it runs, then JSON and JUnit XML.
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { inspect } from "node:util";
import junitModule, { type Builder } from "junit-report-builder";
import type { CheckResult, SuiteReport } from "./check.js";

// The package is CommonJS whose `module.exports` is the builder; its types describe an ES default export.
const junit = junitModule as unknown as Builder;

const STATUS = { passed: "PASS", failed: "FAIL", skipped: "SKIP" } as const;

function show(value: unknown): string {
  return inspect(value, { depth: 4, breakLength: Infinity, maxStringLength: 300 });
}

/** One console row: status, id, duration, and on failure what was expected and seen. */
export function formatResult(result: CheckResult): string {
  const row = `${STATUS[result.status]}  ${result.id.padEnd(44)} ${`${Math.round(result.durationMs)} ms`.padStart(8)}  ${result.section}${result.note ? `  (${result.note})` : ""}`;
  if (result.status !== "failed") return row;
  const lines = [row, `      ${result.message ?? ""}`];
  if ("expected" in result || "actual" in result) {
    lines.push(`      expected: ${show(result.expected)}`, `      actual:   ${show(result.actual)}`);
  }
  return lines.join("\n");
}

export function formatSummary(report: SuiteReport): string {
  const count = (s: CheckResult["status"]) => report.results.filter((r) => r.status === s).length;
  const verdict = report.passed ? "CERTIFIED" : "NOT CERTIFIED";
  return `${verdict}: ${report.suite} suite against ${report.target}: ${count("passed")} passed, ${count("failed")} failed, ${count("skipped")} skipped in ${(report.durationMs / 1000).toFixed(2)} s`;
}

export function toJUnitXml(report: SuiteReport): string {
  const builder = junit.newBuilder();
  const suite = builder
    .testSuite()
    .name(`partner-platform ${report.suite} conformance`)
    .timestamp(report.startedAt)
    .time(report.durationMs / 1000);
  for (const result of report.results) {
    const testCase = suite
      .testCase()
      .className(`conformance.${report.suite}`)
      .name(`${result.id} (${result.section})`)
      .time(result.durationMs / 1000);
    if (result.status === "skipped") testCase.skipped();
    if (result.note) testCase.standardOutput(result.note);
    if (result.status === "failed") {
      testCase.failure(result.message ?? "failed", "CheckFailed");
      testCase.standardOutput(`${result.title}\nexpected: ${show(result.expected)}\nactual: ${show(result.actual)}`);
    }
  }
  return builder.build();
}

export function toJson(report: SuiteReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}

export async function writeReports(report: SuiteReport, files: { junit?: string; json?: string }): Promise<void> {
  for (const [file, text] of [
    [files.junit, () => toJUnitXml(report)],
    [files.json, () => toJson(report)],
  ] as const) {
    if (!file) continue;
    await mkdir(path.dirname(path.resolve(file)), { recursive: true });
    await writeFile(file, text());
  }
}
