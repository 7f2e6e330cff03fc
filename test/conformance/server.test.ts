// Proof that the server certification certifies: the reference server passes every check, and each
// broken variant fails exactly the checks listed for it in the expected-failures file.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { brokenServers, type BrokenServer } from "../../conformance/broken/servers.js";
import { compareWithExpected, loadExpectedFailures } from "../../conformance/framework/expected-failures.js";
import { formatResult } from "../../conformance/framework/report.js";
import { certifyReference } from "../../conformance/server/reference.js";
import type { ClockSetting } from "../../conformance/server/clock.js";
import { packageRoot } from "../../src/paths.js";
import { postgresBinDir, startTestPostgres } from "../../scripts/postgres.js";

const expected = loadExpectedFailures(path.join(packageRoot, "conformance/broken/server-expected-failures.json"));

const certify = (variant: BrokenServer | undefined, clock: ClockSetting, only?: string[], databaseUrl?: string) =>
  certifyReference(clock, { variant, databaseUrl }, { only });

// 1e-4: the 24 h wait takes 8.6 s and the 7-day lead expiry 60 s of real time.
const scaled: ClockSetting = { kind: "scaled", factor: 0.0001 };

describe("server certification", () => {
  it("certifies the reference server in virtual time", async () => {
    const report = await certify(undefined, { kind: "virtual" });
    expect(report.results.filter((r) => r.status !== "passed").map(formatResult)).toEqual([]);
  });

  it.runIf(postgresBinDir() !== undefined)("certifies the reference server on PostgreSQL storage", async () => {
    const pg = await startTestPostgres();
    try {
      const report = await certify(undefined, { kind: "virtual" }, undefined, await pg.createDatabase("certify"));
      expect(report.results.filter((r) => r.status !== "passed").map(formatResult)).toEqual([]);
    } finally {
      pg.stop();
    }
  });

  it("certifies the reference server in scaled time", async () => {
    const report = await certify(undefined, scaled);
    expect(report.results.filter((r) => r.status !== "passed").map(formatResult)).toEqual([]);
  }, 180_000);

  it("catches a server that waits 20% short in scaled time, within the tolerance bands", async () => {
    const variant = brokenServers.find((b) => b.id === "waits-20-percent-short")!;
    const report = await certify(variant, scaled, ["retry-waits-follow-schedule"]);
    expect(report.results.find((r) => r.id === "retry-waits-follow-schedule")?.status).toBe("failed");
  }, 120_000);

  it("lists every broken server in the expected-failures file, and nothing else", () => {
    expect(Object.keys(expected.variants).sort()).toEqual(brokenServers.map((b) => b.id).sort());
  });

  it.each(brokenServers.map((b) => [b.id, b] as const))("catches the broken server %s with the checks that name its fault", async (id, variant) => {
    const report = await certify(variant, { kind: "virtual" });
    const comparison = compareWithExpected(report, expected.variants[id]!.fails);
    expect(comparison, report.results.filter((r) => r.status === "failed").map(formatResult).join("\n")).toEqual({ unexpected: [], stale: [] });
    expect(expected.variants[id]!.fails.length).toBeGreaterThan(0);
  });
});
