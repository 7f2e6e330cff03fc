// Reports of a suite run: a console row per check while it runs, then JSON, JUnit XML and HTML; and the list
// of a suite's checks (--list), as text or JSON.
import { mkdir, open, stat, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { inspect } from "node:util";
import junitModule, { type Builder } from "junit-report-builder";
import { NOT_SELECTED, type Check, type CheckResult, type SuiteReport } from "./check.js";
import { toHtml } from "./html-report.js";

// The package is CommonJS whose `module.exports` is the builder; its types describe an ES default export.
const junit = junitModule as unknown as Builder;

const STATUS = { passed: "PASS", failed: "FAIL", skipped: "SKIP" } as const;

function show(value: unknown): string {
  return inspect(value, { depth: 4, breakLength: Infinity, maxStringLength: 300 });
}

/** The id column's width where no id is longer. */
const ID_COLUMN = 44;

/** The width of the id column: the longest id given, so that rows align (ID_COLUMN where none is longer). */
export const idColumn = (checks: readonly { id: string }[]): number => Math.max(ID_COLUMN, ...checks.map((c) => c.id.length));

/** One console row: status, id (padded to `width`), duration, and on failure what was expected and seen. */
export function formatResult(result: CheckResult, width = ID_COLUMN): string {
  const row = `${STATUS[result.status]}  ${result.id.padEnd(width)} ${`${Math.round(result.durationMs)} ms`.padStart(8)}  ${result.section}${result.note ? `  (${result.note})` : ""}`;
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
  const summary = `${verdict}: ${report.suite} suite against ${report.target}: ${count("passed")} passed, ${count("failed")} failed, ${count("skipped")} skipped in ${(report.durationMs / 1000).toFixed(2)} s`;
  // A check skipped by --only or --skip was asked to be left out; one that could not run was not.
  const couldNotRun = report.results.filter((r) => r.status === "skipped" && r.message !== NOT_SELECTED).map((r) => r.id);
  const uncovered = couldNotRun.length
    ? `NOTE: ${couldNotRun.length === 1 ? "1 check" : `${couldNotRun.length} checks`} could not run against this target (${couldNotRun.join(", ")}; each SKIP row says why): the verdict does not cover ${couldNotRun.length === 1 ? "it" : "them"}`
    : undefined;
  return [summary, ...(report.caveat ? [`NOTE: ${report.caveat}`] : []), ...(uncovered ? [uncovered] : [])].join("\n");
}

export function toJUnitXml(report: SuiteReport): string {
  const builder = junit.newBuilder();
  const suite = builder
    .testSuite()
    .name(`partner-platform ${report.suite} conformance`)
    .timestamp(report.startedAt)
    .time(report.durationMs / 1000);
  if (report.caveat) suite.property("caveat", report.caveat);
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

/** Writes a report, making its folder first. */
export async function writeReportFile(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(path.resolve(file)), { recursive: true });
  await writeFile(file, text);
}

export async function writeReports(report: SuiteReport, files: { junit?: string; json?: string; html?: string }): Promise<void> {
  if (files.junit) await writeReportFile(files.junit, toJUnitXml(report));
  if (files.json) await writeReportFile(files.json, toJson(report));
  if (files.html) await writeReportFile(files.html, toHtml(report));
}

/** What `--list` shows of a check. */
export type ListedCheck = Pick<Check<unknown>, "id" | "section" | "title" | "scenario">;

/** A block per check: id and section, then what passes and how the suite observes it. */
export function formatCheckList(suite: string, checks: readonly ListedCheck[]): string {
  const width = idColumn(checks);
  const blocks = checks.map((c) => `${c.id.padEnd(width)} ${c.section}\n    ${c.title}\n    scenario: ${c.scenario}\n`);
  return `${blocks.join("\n")}\n${checks.length} checks in the ${suite} suite\n`;
}

export function toListJson(suite: string, checks: readonly ListedCheck[]): string {
  const listed = checks.map(({ id, section, title, scenario }) => ({ id, section, title, scenario }));
  return `${JSON.stringify({ suite, checks: listed }, null, 2)}\n`;
}

/**
 * Why a report cannot be written to `file` (its folder cannot be made, or the file cannot be opened
 * for writing), or undefined: asked before a run, so that a bad path does not cost a whole run.
 */
export async function reportPathProblem(file: string): Promise<string | undefined> {
  const dir = path.dirname(path.resolve(file));
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "EEXIST" || code === "ENOTDIR" ? `cannot make the folder ${dir}: part of its path is a file` : `cannot make the folder ${dir} (${code})`;
  }
  try {
    const existed = await stat(file).then(
      () => true,
      () => false,
    );
    // "a" creates the file without truncating one that exists; a file made only to try is removed.
    await (await open(file, "a")).close();
    if (!existed) await unlink(file);
    return undefined;
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    return `cannot write ${file} (${e.code ?? e.message})`;
  }
}
