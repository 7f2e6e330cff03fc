// Proof that the server certification certifies: the reference server passes every check in each legal
// timing (conformance/server/timings.ts), on both storage back-ends; a wait 20% short is told apart from
// the tolerance band. The broken servers are in server-variants.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { brokenServers, sendWithNodeHttps, type BrokenServer } from "../../conformance/broken/servers.js";
import { formatResult } from "../../conformance/framework/report.js";
import type { SuiteReport } from "../../conformance/framework/check.js";
import type { ClockSetting } from "../../conformance/server/clock.js";
import { certifyReference } from "../../conformance/server/reference.js";
import { referenceTimings } from "../../conformance/server/timings.js";
import { postgresBinDir, startTestPostgres } from "../../scripts/postgres.js";
import { openEmbedded, type Db } from "../../src/server/store.js";

const notPassed = (report: SuiteReport) => report.results.filter((r) => r.status !== "passed").map(formatResult);

// 3e-5: the 24 h wait takes 2.6 s and the 7-day lead lifetime 18 s of real time; 1e-4 where a 20% short
// wait must be told apart from the tolerance band (the 24 h wait is 8.6 s there).
const scaled = (factor: number): ClockSetting => ({ kind: "scaled", factor });

describe("server certification", () => {
  // One embedded database for the runs below, emptied before each (the first run starts its own).
  let db: Db;
  beforeAll(async () => {
    db = await openEmbedded();
  });
  afterAll(async () => db.close());

  it("certifies the reference server in virtual time, starting its own database", async () => {
    expect(notPassed(await certifyReference({ kind: "virtual" }))).toEqual([]);
  });

  it.runIf(postgresBinDir() !== undefined)("certifies the reference server on PostgreSQL storage", async () => {
    const pg = await startTestPostgres();
    try {
      expect(notPassed(await certifyReference({ kind: "virtual" }, { databaseUrl: await pg.createDatabase("certify") }))).toEqual([]);
    } finally {
      pg.stop();
    }
  });

  // Every legal timing passes, twice in a row here; `npm run bench -- flake` certifies each 20 times.
  // A scaled clock's bands are real time: with every test file running beside it on 2 cores, the
  // reference can be later than D25 allows on its own (a jitter run in one fresh-clone CI run of
  // 2026-11-27: a lead.expired past the band), so a scaled run that fails is made once more; a wrong
  // verdict fails both.
  describe.each(referenceTimings.filter((t) => t.id !== "lazy"))("in the $id timing ($clock clock)", (timing) => {
    it.each([1, 2])("certifies the reference server, run %i", { timeout: 120_000, retry: timing.clock === "scaled" ? 1 : 0 }, async () => {
      const clock = timing.clock === "virtual" ? ({ kind: "virtual" } as const) : scaled(3e-5);
      expect(notPassed(await certifyReference(clock, { timing, db }))).toEqual([]);
    });
  });

  // D26 allows both; a server written from the docs alone (Go, 2026-11-29) sent them so, each in the
  // background and again a second after a refusal, and the suite took another disabling's notice, come late,
  // for the one it waited for.
  it("certifies a server that sends a Bcc copy first, in a transaction of its own, then the notice, and repeats it", async () => {
    const variant: BrokenServer = {
      id: "copies-first-and-repeats-notices",
      parts: (base) => ({
        async sendMail(mail) {
          const untilTaken = async (copy: typeof mail): Promise<void> => {
            for (;;) {
              try {
                return await base.sendMail(copy);
              } catch {
                await new Promise((resolve) => setTimeout(resolve, 1000));
              }
            }
          };
          void (async () => {
            await untilTaken(Object.assign({}, mail, { envelope: { from: "no-reply@partner-platform.example", to: ["ops@partner-platform.example"] } }));
            await untilTaken(mail);
            await new Promise((resolve) => setTimeout(resolve, 500));
            await untilTaken(mail);
          })();
        },
      }),
    };
    expect(notPassed(await certifyReference({ kind: "virtual" }, { variant, db }))).toEqual([]);
  }, 120_000);

  // Another HTTP client must not change a verdict: node:https and its keep-alive global agent (its own
  // header order, Host and Connection headers, a connection per request in flight), or a pool of 2
  // connections per origin whose attempts are timed from when they get one (D6: the wait for a connection
  // comes before the attempt; timed from the request, it is the broken counts-the-wait-for-a-connection).
  // The pool on a virtual clock only: on a scaled one it failed one run of 9 (which checks was not kept;
  // likely an attempt queued behind two that hang, later than D24 allows, as a pool of 1 was).
  const otherClients = [
    { what: "makes its attempts with node:https", how: {}, clocks: [{ kind: "virtual" } as const, scaled(3e-5)] },
    { what: "waits for one of 2 connections per origin before an attempt's timeout starts", how: { connectionsPerOrigin: 2, timeoutFromConnection: true }, clocks: [{ kind: "virtual" } as const] },
  ];
  for (const { what, how, clocks } of otherClients) {
    for (const clock of clocks) {
      it(`certifies a server that ${what} (${clock.kind} clock)`, { timeout: 120_000, retry: clock.kind === "scaled" ? 1 : 0 }, async () => {
        const variant: BrokenServer = { id: "another-http-client", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, how) }) };
        expect(notPassed(await certifyReference(clock, { variant, db }))).toEqual([]);
      });
    }
  }

  // D40 caps the attempts to one webhook at once; fewer are legal. The overlap checks hold attempts and
  // answer them out of the order they came: one at a time, or two, they must still pass.
  it.each([1, 2])("certifies the reference making at most %i attempt(s) to a webhook at once", { timeout: 120_000 }, async (maxInFlightPerWebhook) => {
    expect(notPassed(await certifyReference({ kind: "virtual" }, { db, maxInFlightPerWebhook }))).toEqual([]);
  });

  it("catches a server that waits 20% short in scaled time, within the tolerance bands", async () => {
    const variant = brokenServers.find((b) => b.id === "waits-20-percent-short")!;
    const report = await certifyReference(scaled(1e-4), { variant, db }, { only: ["retry-waits-follow-schedule"] });
    expect(report.results.find((r) => r.id === "retry-waits-follow-schedule")?.status).toBe("failed");
  }, 120_000);

  // D24: under a scaled clock a first attempt comes within 150 ms; one 800 ms late (inside its 1 s
  // timeout) lets the other event's 2 h retry (720 ms at 1e-4) come before the success that resets.
  it("fails a first attempt slower than a scaled clock allows, and says so", async () => {
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const variant: BrokenServer = {
      id: "slow-first-review",
      parts: (base) => ({
        async send(url, body, signature, signal) {
          if ((JSON.parse(body.toString("utf8")) as { event: string }).event === "review.created") await sleep(800);
          return base.send(url, body, signature, signal);
        },
      }),
    };
    const report = await certifyReference(scaled(1e-4), { variant, db }, { only: ["success-resets-failure-count"] });
    const result = report.results.find((r) => r.id === "success-resets-failure-count");
    expect(result?.status).toBe("failed");
    expect(result?.message).toMatch(/came \d+ ms after its trigger answered: under a scaled clock a first attempt comes within 150 ms \(D24\)/);
  }, 120_000);

});
