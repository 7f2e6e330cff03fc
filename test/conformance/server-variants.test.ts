// Proof that every server check can fail: each broken variant of the reference server
// (conformance/broken/servers.ts) fails exactly the checks listed for it in the expected-failures file,
// and that file names a variant for every check. (Its own file, run in shares side by side: vitest.config.ts.)
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { brokenServers } from "../../conformance/broken/servers.js";
import { compareWithExpected, loadExpectedFailures } from "../../conformance/framework/expected-failures.js";
import { formatResult } from "../../conformance/framework/report.js";
import { certifyReference } from "../../conformance/server/reference.js";
import { misnamedChecks, suites, unprovenChecks } from "../../scripts/check-tables.js";
import { packageRoot } from "../../src/paths.js";
import { openEmbedded, type Db } from "../../src/server/store.js";
import { shareOf, takesTheRest } from "../share.js";

const expected = loadExpectedFailures(path.join(packageRoot, "conformance/broken/server-expected-failures.json"));

describe("broken servers", () => {
  // One embedded database for every run, emptied before each: starting one takes seconds.
  let db: Db;
  beforeAll(async () => {
    db = await openEmbedded();
  });
  afterAll(async () => db.close());

  it.runIf(takesTheRest())("lists every broken server in the expected-failures file, and nothing else", () => {
    expect(Object.keys(expected.variants).sort()).toEqual(brokenServers.map((b) => b.id).sort());
  });

  it.runIf(takesTheRest())("names only existing checks there, and a broken server that fails each check", () => {
    expect(misnamedChecks(suites.server)).toEqual({ unknown: [], both: [] });
    expect(unprovenChecks(suites.server), "checks that no broken server fails: add a variant that proves each can fail").toEqual([]);
  });

  // Those on a scaled clock are judged in real time: in the run one at a time (vitest.config.ts).
  const mine = shareOf(brokenServers, (b) => b.clock?.kind === "scaled");
  it.each(mine.map((b) => [b.id, b] as const))("catches the broken server %s with exactly the checks listed for it", async (id, variant) => {
    const report = await certifyReference(variant.clock ?? { kind: "virtual" }, { variant, db });
    const comparison = compareWithExpected(report, expected.variants[id]!);
    expect(comparison, report.results.filter((r) => r.status === "failed").map(formatResult).join("\n")).toEqual({ unexpected: [], stale: [] });
    expect(expected.variants[id]!.fails.length).toBeGreaterThan(0);
  });
});
