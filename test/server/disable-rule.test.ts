// The disable rule under concurrency (DECISIONS D7): "in a row" is the order in which outcomes are
// recorded, and each outcome changes the counter atomically in that order. Many overlapping attempts
// with random failures, recorded by one server (embedded) or two servers sharing one PostgreSQL
// database, must leave the webhook exactly as replaying the recorded order says: the same counter,
// disabled exactly when 5 failures were recorded in a row, one e-mail, no retry left pending.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { faultyRecorder } from "../../conformance/broken/recorder.js";
import { startReceiver, answers, type Receiver } from "../../conformance/harness/receiver.js";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { startServer, type RunningServer, type ServerOptions } from "../../src/server/index.js";
import { loadDeliveryRules } from "@partner-platform/sdk";
import { register, seededRandom, storageBackends } from "./helpers.js";

const threshold = loadDeliveryRules().disableAfterConsecutiveFailures;
const EVENTS = 150;
const ROUNDS = 6;

interface Replayed {
  status: string;
  counter: number;
  /** Failures recorded while enabled that did not disable: each queued a retry. */
  retries: number;
}

/** What D7 says the webhook is after these outcomes, in this order. */
function replay(outcomes: ("succeeded" | "failed")[]): Replayed {
  let counter = 0;
  let retries = 0;
  for (const outcome of outcomes) {
    if (outcome === "succeeded") counter = 0;
    else if (++counter >= threshold) return { status: "disabled", counter, retries: 0 };
    else retries++;
  }
  return { status: "enabled", counter, retries };
}

describe.each(storageBackends())("the disable rule under overlapping attempts, $name storage", ({ postgres }) => {
  let receiver: Receiver;
  let pg: TestPostgres | undefined;
  let databases = 0;
  const logs: string[] = [];
  beforeAll(async () => {
    receiver = await startReceiver();
    pg = postgres ? await startTestPostgres() : undefined;
  });
  afterAll(async () => {
    await receiver.close();
    pg?.stop();
  });

  /** One server on the embedded store; two sharing one database on PostgreSQL. */
  async function servers(options: Partial<ServerOptions> = {}, partsOf?: (i: number) => ServerOptions["parts"]): Promise<RunningServer[]> {
    const base: ServerOptions = {
      clock: { mode: "virtual", start: Date.UTC(2026, 10, 23) },
      conformance: true,
      webhookCa: receiver.pki.caCert,
      // Failures come only from the receiver's answers: an answer slowed by a loaded machine must not
      // count as a timeout (the real bound of an unanswered attempt under a virtual clock, D24).
      virtualAttemptTimeoutMs: 60_000,
      // What the engine logs (an attempt that failed to run, say) is shown when a round fails.
      log: (line) => logs.push(line),
      // As many overlapping attempts to the one webhook as D40 allows.
      maxInFlightPerWebhook: 31,
      ...options,
    };
    if (!pg) return [await startServer(base)];
    const databaseUrl = await pg.createDatabase(`rule${++databases}`);
    return Promise.all([0, 1].map((i) => startServer({ ...base, databaseUrl, ...(partsOf ? { parts: partsOf(i) } : {}) })));
  }

  /** A burst of events to one webhook whose endpoint fails at random; every server makes attempts at once. */
  async function burst(all: RunningServer[], round: number, failureRate: number) {
    const [first] = all as [RunningServer];
    const endpoint = `rule-${postgres ? "pg" : "embedded"}-${round}-${failureRate}`;
    const next = seededRandom(round * 7919 + Math.round(failureRate * 100));
    receiver.respond(endpoint, () => (next() < failureRate ? answers.status(500) : answers.ok));
    const webhookId = await register(first, receiver.url(endpoint), ["review.created"]);
    await first.engine.transaction(async (_tx, emit) => {
      for (let i = 0; i < EVENTS; i++) {
        await emit("review.created", "4711", { reviewID: String(i + 1), businessID: "4711", rating: 5, reviewer: { name: "R" }, createdAt: "2026-11-22T14:00:00Z" });
      }
    });
    await Promise.all(all.flatMap((s) => [s.engine.runDue(), s.engine.runDue()]));
    const db = first.db;
    const recorded = await db.query<{ state: "succeeded" | "failed" }>(
      "SELECT state FROM attempts WHERE webhook_id = $1 AND recorded_seq IS NOT NULL ORDER BY recorded_seq",
      [webhookId],
    );
    const webhook = (await db.query<{ status: string; consecutive_failures: number }>("SELECT status, consecutive_failures FROM webhooks WHERE id = $1", [webhookId])).rows[0]!;
    const pending = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts WHERE webhook_id = $1 AND state = 'pending'", [webhookId])).rows[0]!.n;
    const mails = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM notifications WHERE webhook_id = $1", [webhookId])).rows[0]!.n;
    const expected = replay(recorded.rows.map((r) => r.state));
    // First attempts without an outcome in the order, with their state, for a failing round's message.
    const unordered = (
      await db.query<{ id: string; state: string; claimed_by: string | null }>(
        "SELECT id::text, state, claimed_by FROM attempts WHERE webhook_id = $1 AND attempt = 1 AND recorded_seq IS NULL",
        [webhookId],
      )
    ).rows;
    return {
      attempts: recorded.rows.length,
      unordered,
      actual: { status: webhook.status, counter: webhook.consecutive_failures, retries: pending, mails },
      expected: { ...expected, mails: expected.status === "disabled" ? 1 : 0 },
    };
  }

  it(`keeps the counter, the disabling, the e-mail and the retries exactly as the recorded order says, ${ROUNDS} rounds of ${EVENTS} events, up to 31 attempts at once per server`, async () => {
    // How many outcomes each server recorded: on PostgreSQL both must have taken part.
    const recordedBy: number[] = [];
    const counting = (i: number): ServerOptions["parts"] => (base) => ({
      async record(outcomes) {
        recordedBy[i] = (recordedBy[i] ?? 0) + outcomes.length;
        return base.record(outcomes);
      },
    });
    const all = pg ? await servers({}, counting) : await servers({ parts: counting(0) });
    try {
      const outcomes = { disabled: 0, enabled: 0 };
      for (let round = 1; round <= ROUNDS; round++) {
        // From rare failures (the webhook stays enabled) to frequent ones (it is disabled mid-burst).
        const { attempts, unordered, actual, expected } = await burst(all, round, [0.15, 0.3, 0.5][round % 3]!);
        const why = `round ${round}: ${JSON.stringify(unordered)}; the engine logged: ${logs.join(" | ")}`;
        // Every event's attempt is made, unless the disabling cancelled those not claimed yet.
        if (expected.status === "enabled") expect(attempts, why).toBe(EVENTS);
        else expect(attempts, why).toBeGreaterThanOrEqual(threshold);
        expect(actual, `round ${round}`).toEqual(expected);
        outcomes[expected.status as "disabled" | "enabled"]++;
      }
      // Both ways were exercised: rounds that must disable and rounds that must not.
      expect(outcomes.disabled).toBeGreaterThan(0);
      expect(outcomes.enabled).toBeGreaterThan(0);
      expect(recordedBy.filter((n) => n > 0)).toHaveLength(all.length);
    } finally {
      await Promise.all(all.map((s) => s.close()));
    }
  }, 180_000);

  it.runIf(!postgres)("catches a recorder that loses updates (the proof that this test can fail)", async () => {
    const all = await servers({
      parts: (base, ctx) => {
        // The stale-failure-count broken server's fault: the counter as read when the attempt was claimed, plus one.
        const atClaim = new Map<string, number>();
        return {
          async claim(now, limit, spread) {
            const claimed = await base.claim(now, limit, spread);
            for (const a of claimed) atClaim.set(a.id, 0);
            return claimed;
          },
          record: faultyRecorder(ctx, { counterOf: (id) => atClaim.get(id) }),
        };
      },
    });
    try {
      const { actual, expected } = await burst(all, 99, 0.5);
      expect(actual).not.toEqual(expected);
    } finally {
      await Promise.all(all.map((s) => s.close()));
    }
  }, 60_000);
});
