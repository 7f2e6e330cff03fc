// The check model of the certification suites: each check is small, named by what it asserts
// (kebab-case id), cites the section of the source document it enforces, and fails with
// {expected, actual}.
import { isDeepStrictEqual } from "node:util";

export interface Check<Ctx> {
  /** Kebab-case, says what is asserted: `retry-waits-follow-schedule`. */
  id: string;
  /** Section of the source document (and decision) enforced, e.g. "§5.3, D2". */
  section: string;
  /** One sentence: what a passing implementation does. */
  title: string;
  /** What the suite does to observe it, e.g. "one webhook whose endpoint always fails" (for `--list`). */
  scenario: string;
  /**
   * Throws CheckFailed when the assertion does not hold; may resolve with a note for the report (e.g.
   * inputs tried). What it hands `record` (a timeline of the attempts it timed) is in the report
   * whether it passes or fails.
   */
  run(ctx: Ctx, record: CheckRecorder): Promise<void | string>;
}

/** One attempt of a timing check, in ms from the scenario's first attempt, on the server's clock. */
export interface TimelineAttempt {
  label: string;
  dueMs: number;
  /** The band the suite accepts (D25): from earliestMs to latestMs. */
  earliestMs: number;
  latestMs: number;
  /** When it came; absent when it never did. */
  cameMs?: number;
}

/** When each attempt of a scenario was due, the accepted band, and when it came. */
export interface Timeline {
  title: string;
  /** Whose time: "virtual" or "scaled" (the server's clock, in its own seconds). */
  clock: string;
  attempts: TimelineAttempt[];
}

export interface CheckRecorder {
  timeline(timeline: Timeline): void;
}

const KEBAB = /^[a-z0-9]+(-[a-z0-9]+)*$/;

export function defineCheck<Ctx>(check: Check<Ctx>): Check<Ctx> {
  if (!KEBAB.test(check.id)) throw new Error(`check id must be kebab-case: ${check.id}`);
  return check;
}

/** A check's assertion did not hold. */
export class CheckFailed extends Error {
  override readonly name = "CheckFailed";
  constructor(
    message: string,
    readonly expected: unknown,
    readonly actual: unknown,
  ) {
    super(message);
  }
}

/**
 * The check cannot run against this target (the message says why and what would let it run): no
 * verdict, as for a check not selected, and the row says so.
 */
export class CheckSkipped extends Error {
  override readonly name = "CheckSkipped";
}

/**
 * The implementation is not set up for certification (unreachable, refuses the suite's receiver URL,
 * does not trust its CA, ...): no verdict can be given, so the run stops with this one message, which
 * says what to change.
 */
export class SetupError extends Error {
  override readonly name = "SetupError";
}

export function expectThat(condition: boolean, message: string, expected: unknown, actual: unknown): asserts condition {
  if (!condition) throw new CheckFailed(message, expected, actual);
}

export function expectEqual(actual: unknown, expected: unknown, message: string): void {
  if (!isDeepStrictEqual(actual, expected)) throw new CheckFailed(message, expected, actual);
}

/** The message of a check that --only or --skip left out. */
export const NOT_SELECTED = "not selected";

export type CheckStatus = "passed" | "failed" | "skipped";

export interface CheckResult {
  id: string;
  section: string;
  title: string;
  status: CheckStatus;
  durationMs: number;
  /** Why it failed (or was skipped). */
  message?: string;
  /** What a passing check reports about its run, e.g. "100 generated inputs (seed 42)", or why it could not run. */
  note?: string;
  expected?: unknown;
  actual?: unknown;
  /** The attempts a timing check timed (the HTML report draws them). */
  timelines?: Timeline[];
}

export interface SuiteReport {
  suite: string;
  /** What was certified, e.g. a base URL. */
  target: string;
  startedAt: string;
  durationMs: number;
  results: CheckResult[];
  /** Every check that ran passed (skipped ones were not selected, or could not run against the target and say why). */
  passed: boolean;
  /** A condition the verdict holds only under, which the real service would not grant (e.g. a certificate not verified). */
  caveat?: string;
}

export interface RunOptions {
  /** Run only these check ids. */
  only?: readonly string[];
  /** Skip these check ids. */
  skip?: readonly string[];
  /** Called after each check, e.g. to print a row. */
  onResult?: (result: CheckResult) => void;
}

/** Ids in `only`/`skip` must name checks of the suite: a typo must not silently run nothing. */
function assertKnownIds(checks: readonly Check<unknown>[], ids: readonly string[] | undefined, flag: string): void {
  const known = new Set(checks.map((c) => c.id));
  const unknown = (ids ?? []).filter((id) => !known.has(id));
  if (unknown.length > 0) throw new Error(`${flag} names unknown check(s): ${unknown.join(", ")}`);
}

/**
 * Runs checks in order. An unexpected exception fails that check (with its message), not the run; a
 * SetupError stops the run and is thrown to the caller.
 */
export async function runChecks<Ctx>(
  suite: string,
  target: string,
  checks: readonly Check<Ctx>[],
  ctx: Ctx,
  options: RunOptions = {},
): Promise<SuiteReport> {
  assertKnownIds(checks as readonly Check<unknown>[], options.only, "--only");
  assertKnownIds(checks as readonly Check<unknown>[], options.skip, "--skip");
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const results: CheckResult[] = [];
  for (const check of checks) {
    const base = { id: check.id, section: check.section, title: check.title };
    const selected = (!options.only?.length || options.only.includes(check.id)) && !options.skip?.includes(check.id);
    let result: CheckResult;
    if (!selected) {
      result = { ...base, status: "skipped", durationMs: 0, message: NOT_SELECTED };
    } else {
      const t0 = performance.now();
      const timelines: Timeline[] = [];
      const recorded = () => (timelines.length ? { timelines } : {});
      try {
        const note = await check.run(ctx, { timeline: (t) => void timelines.push(t) });
        result = { ...base, status: "passed", durationMs: performance.now() - t0, ...(note ? { note } : {}), ...recorded() };
      } catch (error) {
        if (error instanceof SetupError) throw error;
        const durationMs = performance.now() - t0;
        result =
          error instanceof CheckSkipped
            ? { ...base, status: "skipped", durationMs, message: error.message, note: error.message, ...recorded() }
            : error instanceof CheckFailed
            ? { ...base, status: "failed", durationMs, message: error.message, expected: error.expected, actual: error.actual, ...recorded() }
            : { ...base, status: "failed", durationMs, message: `unexpected error: ${(error as Error)?.message ?? String(error)}`, ...recorded() };
      }
    }
    results.push(result);
    options.onResult?.(result);
  }
  return {
    suite,
    target,
    startedAt,
    durationMs: performance.now() - started,
    results,
    passed: results.every((r) => r.status !== "failed"),
  };
}
