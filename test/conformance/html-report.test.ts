// The HTML certification report (--html) as a platform team opens it: the timing checks carry a timeline
// of every retry (when it was due, the accepted band, when it came), a passing server's retries all in
// their band and a server that waits 20% short shown early; the page opens offline in headless Chromium
// and draws a row per attempt, green inside the band and red outside.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { brokenServers } from "../../conformance/broken/servers.js";
import type { SuiteReport, Timeline } from "../../conformance/framework/check.js";
import { toHtml } from "../../conformance/framework/html-report.js";
import { writeReports } from "../../conformance/framework/report.js";
import { certifyReference } from "../../conformance/server/reference.js";
import { chromiumPath, hasChromium, launchChromium, refuseNetwork } from "../../scripts/chromium.js";
import { openEmbedded, type Db } from "../../src/server/store.js";

const ci = !["", "0", "false"].includes(process.env.CI ?? "");
if (!hasChromium() && ci) throw new Error(`CI needs Chromium at ${chromiumPath}: scripts/install-system-deps.sh installs it`);

const timed = ["retry-waits-follow-schedule", "timeout-counts-as-failure"];
const timelinesOf = (report: SuiteReport, id: string): Timeline[] => report.results.find((r) => r.id === id)?.timelines ?? [];
const inBand = (t: Timeline) => t.attempts.map((a) => a.cameMs !== undefined && a.cameMs >= a.earliestMs && a.cameMs <= a.latestMs);

describe("the HTML certification report", () => {
  let db: Db;
  let dir: string;
  let passing: SuiteReport;
  let failing: SuiteReport;
  beforeAll(async () => {
    db = await openEmbedded();
    dir = await mkdtemp(path.join(tmpdir(), "html-report-"));
    passing = await certifyReference({ kind: "virtual" }, { db }, { only: timed });
    const variant = brokenServers.find((b) => b.id === "waits-20-percent-short")!;
    failing = await certifyReference({ kind: "scaled", factor: 1e-4 }, { variant, db }, { only: ["retry-waits-follow-schedule"] });
  }, 180_000);
  afterAll(async () => {
    await db?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("records a timeline of every timed retry: a correct server's all in their band", () => {
    expect(passing.passed).toBe(true);
    const schedule = timelinesOf(passing, "retry-waits-follow-schedule");
    expect(schedule).toHaveLength(1);
    // The first attempt fails, then 4 retries until the 5th failure disables the webhook (D7).
    expect(schedule[0]!.attempts).toHaveLength(4);
    expect(inBand(schedule[0]!)).toEqual([true, true, true, true]);
    expect(timelinesOf(passing, "timeout-counts-as-failure")[0]!.attempts).toHaveLength(1);
  });

  it("shows the retries of a server that waits 20% short before their band", () => {
    expect(failing.results.find((r) => r.id === "retry-waits-follow-schedule")?.status).toBe("failed");
    const [timeline] = timelinesOf(failing, "retry-waits-follow-schedule");
    expect(timeline!.attempts.some((a) => a.cameMs !== undefined && a.cameMs < a.earliestMs)).toBe(true);
  });

  it.runIf(hasChromium())("opens offline and draws each attempt, green in its band and red outside", async () => {
    const files = { pass: path.join(dir, "pass.html"), fail: path.join(dir, "fail.html") };
    await writeReports(passing, { html: files.pass });
    await writeReports(failing, { html: files.fail });
    expect(await readFile(files.pass, "utf8")).toBe(toHtml(passing));
    const context = await launchChromium();
    try {
      const attempts = await refuseNetwork(context);
      const page = await context.newPage();
      await page.goto(pathToFileURL(files.pass).href);
      expect(await page.locator("h1").innerText()).toBe("CERTIFIED");
      const schedule = page.locator("#check-retry-waits-follow-schedule");
      expect(await schedule.locator("td.status").innerText()).toBe("PASSED");
      expect(await schedule.locator("svg.timeline g.row").count()).toBe(4);
      expect(await schedule.locator("svg.timeline circle.ok").count()).toBe(4);
      expect(await schedule.locator("table.times tbody tr").count()).toBe(4);

      await page.goto(pathToFileURL(files.fail).href);
      expect(await page.locator("h1").innerText()).toBe("NOT CERTIFIED");
      const failed = page.locator("#check-retry-waits-follow-schedule");
      expect(await failed.locator("td.status").innerText()).toBe("FAILED");
      expect(await failed.locator("svg.timeline circle.late").count()).toBeGreaterThan(0);
      expect(await failed.innerText()).toContain("expected");
      expect(await attempts(page)).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
