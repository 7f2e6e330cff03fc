import { describe, expect, it, vi } from "vitest";
import { CheckFailed, CheckSkipped, defineCheck, expectEqual, runChecks, SetupError } from "../../conformance/framework/check.js";
import { compareWithExpected } from "../../conformance/framework/expected-failures.js";
import { formatResult, formatSummary, idColumn, toJUnitXml } from "../../conformance/framework/report.js";
import { waitingOutRateLimits } from "../../conformance/api/context.js";

const checks = [
  defineCheck<{ value: number }>({
    id: "value-is-one",
    section: "§0",
    scenario: "a context value",
    title: "The value is 1.",
    run: async (ctx) => expectEqual(ctx.value, 1, "value differs"),
  }),
  defineCheck<{ value: number }>({
    id: "value-is-two",
    section: "§0",
    scenario: "a context value",
    title: "The value is 2.",
    run: async (ctx) => expectEqual(ctx.value, 2, "value differs"),
  }),
  defineCheck<{ value: number }>({
    id: "never-throws",
    section: "§0",
    scenario: "a context value",
    title: "Nothing throws.",
    run: async () => {
      throw new TypeError("boom <&>");
    },
  }),
];

describe("conformance framework", () => {
  it("rejects a check id that is not kebab-case", () => {
    expect(() => defineCheck({ id: "Not_Kebab", section: "", title: "", scenario: "", run: async () => {} })).toThrow(/kebab-case/);
  });

  it("runs checks, records expected/actual, and turns unexpected errors into failures", async () => {
    const report = await runChecks("demo", "memory", checks, { value: 1 });
    expect(report.passed).toBe(false);
    expect(report.results.map((r) => [r.id, r.status])).toEqual([
      ["value-is-one", "passed"],
      ["value-is-two", "failed"],
      ["never-throws", "failed"],
    ]);
    expect(report.results[1]).toMatchObject({ expected: 2, actual: 1, message: "value differs" });
    expect(report.results[2]!.message).toBe("unexpected error: boom <&>");
    expect(formatResult(report.results[1]!)).toContain("expected: 2");
    expect(formatSummary(report)).toMatch(/^NOT CERTIFIED: demo suite against memory: 1 passed, 2 failed, 0 skipped/);
  });

  it("honours --only and --skip, and refuses ids it does not know", async () => {
    const report = await runChecks("demo", "memory", checks, { value: 1 }, { skip: ["value-is-two", "never-throws"] });
    expect(report.passed).toBe(true);
    expect(report.results.map((r) => r.status)).toEqual(["passed", "skipped", "skipped"]);
    await expect(runChecks("demo", "memory", checks, { value: 1 }, { only: ["value-is-3"] })).rejects.toThrow(
      "--only names unknown check(s): value-is-3",
    );
  });

  it("writes JUnit XML with one test case per check, failures escaped", async () => {
    const xml = toJUnitXml(await runChecks("demo", "memory", checks, { value: 1 }));
    expect(xml).toContain('tests="3"');
    expect(xml).toContain('failures="2"');
    expect(xml).toContain('name="value-is-two (§0)"');
    expect(xml).toContain(`message="unexpected error: boom &lt;&amp;>"`);
  });

  it("keeps the note a passing check resolves with, in the row, the JSON and the JUnit output", async () => {
    const noted = defineCheck<unknown>({ id: "tries-inputs", section: "§0", title: "Tries inputs.", scenario: "inputs", run: async () => "100 inputs" });
    const report = await runChecks("demo", "memory", [noted], {});
    expect(report.results[0]).toMatchObject({ status: "passed", note: "100 inputs" });
    expect(formatResult(report.results[0]!)).toMatch(/^PASS {2}tries-inputs .*§0 {2}\(100 inputs\)$/);
    // The CLI pads ids to the longest of the run's checks (idColumn), so that the rows line up.
    expect(formatResult(report.results[0]!, idColumn([{ id: "x".repeat(50) }]))).toMatch(/^PASS {2}tries-inputs {39} +\d+ ms {2}§0/);
    expect(toJUnitXml(report)).toContain("<system-out><![CDATA[100 inputs]]></system-out>");
  });

  it("skips a check that cannot run against the target, says why in the row, and still certifies", async () => {
    const cannot = defineCheck<unknown>({
      id: "needs-loopback",
      section: "§0",
      title: "Needs a loopback target.",
      scenario: "target",
      run: async () => {
        throw new CheckSkipped("needs the token endpoint on a loopback address");
      },
    });
    const report = await runChecks("demo", "memory", [cannot], {});
    expect(report.passed).toBe(true);
    expect(report.results[0]).toMatchObject({ status: "skipped", message: "needs the token endpoint on a loopback address" });
    expect(formatResult(report.results[0]!)).toMatch(/^SKIP {2}needs-loopback .*§0 {2}\(needs the token endpoint on a loopback address\)$/);
    expect(formatSummary(report)).toMatch(/^CERTIFIED: .*0 passed, 0 failed, 1 skipped in [\d.]+ s\nNOTE: 1 check could not run against this target \(needs-loopback; each SKIP row says why\): the verdict does not cover it$/);
    // Left out by --skip: asked for, nothing to note.
    expect(formatSummary(await runChecks("demo", "memory", [cannot], {}, { skip: ["needs-loopback"] }))).not.toMatch(/NOTE/);
  });

  it("stops the run at a SetupError and hands it to the caller", async () => {
    const ran: string[] = [];
    const stops = defineCheck<unknown>({
      id: "setup-is-wrong",
      section: "§0",
      title: "Stops.",
      scenario: "setup",
      run: async () => {
        throw new SetupError("the implementation is not reachable");
      },
    });
    const after = defineCheck<unknown>({ id: "never-runs", section: "§0", title: "Never runs.", scenario: "setup", run: async () => void ran.push("after") });
    await expect(runChecks("demo", "memory", [stops, after], {})).rejects.toThrow(SetupError);
    expect(ran).toEqual([]);
  });

  it("compares failures with an expected-failures entry both ways", async () => {
    const report = await runChecks("demo", "memory", checks, { value: 1 });
    expect(compareWithExpected(report, { fails: ["value-is-two", "never-throws"] })).toEqual({ unexpected: [], stale: [] });
    expect(compareWithExpected(report, { fails: ["value-is-one", "value-is-two"] })).toEqual({
      unexpected: ["never-throws"],
      stale: ["value-is-one"],
    });
    // A check that may also fail is neither unexpected when it fails nor stale when it passes.
    expect(compareWithExpected(report, { fails: ["value-is-two"], mayAlsoFail: { "never-throws": "timing", "value-is-one": "timing" } })).toEqual({ unexpected: [], stale: [] });
  });
});

describe("waitingOutRateLimits", () => {
  // Answers in turn; records each request's body, so that a request sent again is seen whole.
  const scripted = (answers: Response[]) => {
    const bodies: string[] = [];
    const fetchImpl = async (request: Request) => {
      bodies.push(await request.text());
      return answers.shift()!;
    };
    return { bodies, fetchImpl };
  };
  const tooMany = (retryAfter: string) => new Response("{}", { status: 429, headers: { "retry-after": retryAfter } });

  it("waits out a 429 with its Retry-After and sends the same request again", async () => {
    vi.useFakeTimers();
    try {
      const { bodies, fetchImpl } = scripted([tooMany("2"), new Response("{}", { status: 201 })]);
      const answer = waitingOutRateLimits(fetchImpl)(new Request("http://api.test/api/v2/webhooks", { method: "POST", body: '{"a":1}' }));
      await vi.advanceTimersByTimeAsync(1_999);
      expect(bodies).toEqual(['{"a":1}']);
      await vi.advanceTimersByTimeAsync(1);
      expect((await answer).status).toBe(201);
      expect(bodies).toEqual(['{"a":1}', '{"a":1}']);
    } finally {
      vi.useRealTimers();
    }
  });

  it("hands back a 429 whose Retry-After is longer than a minute", async () => {
    const { bodies, fetchImpl } = scripted([tooMany("61")]);
    expect((await waitingOutRateLimits(fetchImpl)(new Request("http://api.test/x"))).status).toBe(429);
    expect(bodies).toHaveLength(1);
  });

  it("fails on a 429 whose Retry-After is not whole seconds of at least 1 (D13), naming what came", async () => {
    const date = new Date(Date.now() + 5_000).toUTCString();
    for (const [answer, actual] of [
      [tooMany(date), date],
      [tooMany("0"), "0"],
      [tooMany("1.5"), "1.5"],
      [new Response("{}", { status: 429 }), "(none)"],
    ] as const) {
      const { bodies, fetchImpl } = scripted([answer]);
      const failure = await waitingOutRateLimits(fetchImpl)(new Request("http://api.test/x")).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(CheckFailed);
      expect(failure).toMatchObject({ message: expect.stringContaining("Retry-After in whole seconds"), expected: "Retry-After: an integer of at least 1", actual });
      expect(bodies).toHaveLength(1);
    }
  });
});
