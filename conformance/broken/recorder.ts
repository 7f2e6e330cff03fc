// A plain, one-transaction-per-outcome recorder of attempt outcomes, with the faults the broken
// servers need as options. It replaces the reference server's `record` part (src/server/delivery);
// without options it follows D7 like the reference does.
import type { DeliveryParts, Outcome, PartsContext, Recorded } from "../../src/server/delivery/index.js";
import { claimCalls, type Queryable } from "../../src/server/store.js";

export interface RecorderFaults {
  /** A 2xx does not reset the counter. */
  noReset?: boolean;
  /** A retry's 2xx does not reset the counter, a first attempt's does. */
  noResetOnRetry?: boolean;
  /** The counter is the failing event's own attempt number, not the webhook's run of failures. */
  perEvent?: boolean;
  /** Disabling cancels nothing, and failures go on being retried. */
  keepsDeliveringAfterDisable?: boolean;
  /** The counter a failure adds 1 to, read elsewhere (e.g. when the attempt was claimed). */
  counterOf?: (attemptId: string) => number | undefined;
  /** Failures are counted per event name (a 2xx still resets them all). */
  perEventName?: boolean;
  /** Disabling cancels the failing event's pending retries only; the others are still made. */
  cancelsOnlyFailingEvent?: boolean;
  /** A disabling by an event's first attempt queues no e-mail. */
  noNoticeOnFirstAttempt?: boolean;
  /** A failure that leaves nothing of the webhook pending or in flight (an event dropped) sets the count back to 0. */
  forgetsCountWhenIdle?: boolean;
  /** Failures of this kind set the count back to 0, as a success would (they are still retried). */
  resetsOn?: (o: Outcome) => boolean;
  /** Failures of this kind are retried but not counted: the count stays as it was. */
  leavesCountOn?: (o: Outcome) => boolean;
  /** Failures of this kind disable the webhook at once (as if the count had reached the threshold). */
  disablesOn?: (o: Outcome) => boolean;
  /** One count per URL, shared by the webhooks registered with it: their failures add up, a success at any of them resets it. */
  perUrl?: boolean;
  /** A success resets the count of every webhook of its business, not only its own. */
  resetsBusinessOnSuccess?: boolean;
  /** A success recorded for a disabled webhook (an attempt under way when it was disabled) enables it again. */
  reenablesOnSuccess?: boolean;
}

export function faultyRecorder(ctx: PartsContext, faults: RecorderFaults): DeliveryParts["record"] {
  const { db, rules, owner, held } = ctx;
  const claims = claimCalls(db);
  // Still this process's claim (D41): the store's own test, with the owner as $6.
  const mine = { sql: claims.mine("$6"), params: claims.inMemory ? [] : [owner] };
  // A disabling cancels what is pending, not the attempts under way (held in memory: pending in the store too, and spared).
  const cancelPending = (tx: Queryable, spared: string[] | undefined, where: string, params: unknown[]) =>
    spared
      ? tx.query(`UPDATE attempts SET state = 'cancelled' WHERE ${where} AND state = 'pending' AND NOT (id = ANY($${params.length + 1}::bigint[]))`, [...params, spared])
      : tx.query(`UPDATE attempts SET state = 'cancelled' WHERE ${where} AND state = 'pending'`, params);
  /** perEventName: the counts, by webhook and event name. */
  const byName = new Map<string, Map<string, number>>();
  // Held in memory, each outcome's transaction is issued as the store's record is (HeldClaims.recording).
  const one = (o: Outcome) => (claims.inMemory ? held.recording((spared) => recordOne(o, spared)) : recordOne(o, undefined));
  const recordOne = (o: Outcome, spared: string[] | undefined) =>
    db.transaction<Recorded>(async (tx) => {
      const state = o.cancelled ? "cancelled" : o.ok ? "succeeded" : "failed";
      const { rows } = await tx.query<{ event_id: string; webhook_id: string; attempt: number }>(
        `UPDATE attempts SET state = $2, status = $3, error = $4, finished_at = $5, claimed_by = NULL, recorded_seq = nextval('outcome_order')
         WHERE id = $1 AND ${mine.sql} RETURNING event_id, webhook_id, attempt`,
        [o.attemptId, state, o.status ?? null, o.error ?? null, o.endedAt, ...mine.params],
      );
      const a = rows[0];
      if (!a) return "stale";
      if (o.cancelled) return "cancelled";
      const { rows: webhooks } = await tx.query<{ status: string; consecutive_failures: number; client_id: string; url: string }>(
        "SELECT status, consecutive_failures, client_id, url FROM webhooks WHERE id = $1 FOR UPDATE",
        [a.webhook_id],
      );
      const w = webhooks[0]!;
      const enabled = w.status === "enabled";
      if (!enabled && o.ok && faults.reenablesOnSuccess) {
        await tx.query("UPDATE webhooks SET status = 'enabled', consecutive_failures = 0 WHERE id = $1", [a.webhook_id]);
        return "succeeded";
      }
      if (!enabled && !faults.keepsDeliveringAfterDisable) return o.ok ? "succeeded" : "failed";
      if (o.ok) {
        if (faults.resetsBusinessOnSuccess) {
          await tx.query("UPDATE webhooks SET consecutive_failures = 0 WHERE business_id = (SELECT business_id FROM webhooks WHERE id = $1)", [a.webhook_id]);
        } else if (faults.perUrl) {
          await tx.query("UPDATE webhooks SET consecutive_failures = 0 WHERE url = $1", [w.url]);
        } else if (!faults.noReset && !(faults.noResetOnRetry && a.attempt > 1)) await tx.query("UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1", [a.webhook_id]);
        byName.delete(a.webhook_id);
        return "succeeded";
      }
      const nameCount = async () => {
        const { rows: events } = await tx.query<{ name: string }>("SELECT name FROM events WHERE id = $1", [a.event_id]);
        const counts = byName.get(a.webhook_id) ?? new Map<string, number>();
        byName.set(a.webhook_id, counts);
        const n = (counts.get(events[0]!.name) ?? 0) + 1;
        counts.set(events[0]!.name, n);
        return n;
      };
      const urlCount = async () => {
        const { rows: counts } = await tx.query<{ n: number }>("SELECT max(consecutive_failures) AS n FROM webhooks WHERE url = $1", [w.url]);
        return Number(counts[0]!.n) + 1;
      };
      const counter = faults.resetsOn?.(o)
        ? 0
        : faults.leavesCountOn?.(o)
        ? w.consecutive_failures
        : faults.perUrl
        ? await urlCount()
        : faults.perEvent
        ? a.attempt
        : faults.perEventName
          ? await nameCount()
          : (faults.counterOf?.(o.attemptId) ?? w.consecutive_failures) + 1;
      if (faults.perUrl) await tx.query("UPDATE webhooks SET consecutive_failures = $2 WHERE url = $1", [w.url, counter]);
      else await tx.query("UPDATE webhooks SET consecutive_failures = $2 WHERE id = $1", [a.webhook_id, counter]);
      const retry = () =>
        o.retryAt === undefined
          ? Promise.resolve()
          : tx.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) VALUES ($1, $2, $3, $4)", [
              a.event_id,
              a.webhook_id,
              a.attempt + 1,
              o.retryAt,
            ]);
      if (enabled && (counter >= rules.disableAfterConsecutiveFailures || faults.disablesOn?.(o))) {
        await tx.query("UPDATE webhooks SET status = 'disabled' WHERE id = $1", [a.webhook_id]);
        if (faults.keepsDeliveringAfterDisable) await retry();
        else if (faults.cancelsOnlyFailingEvent) {
          await cancelPending(tx, spared, "webhook_id = $1 AND event_id = $2", [a.webhook_id, a.event_id]);
        } else await cancelPending(tx, spared, "webhook_id = $1", [a.webhook_id]);
        if (!(faults.noNoticeOnFirstAttempt && a.attempt === 1)) await tx.query("INSERT INTO notifications (webhook_id, client_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [
          a.webhook_id,
          w.client_id,
          o.endedAt,
        ]);
        return "disabled";
      }
      await retry();
      if (faults.forgetsCountWhenIdle) {
        const { rows: busy } = await tx.query("SELECT 1 FROM attempts WHERE webhook_id = $1 AND state IN ('pending', 'in_flight') LIMIT 1", [a.webhook_id]);
        if (busy.length === 0) await tx.query("UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1", [a.webhook_id]);
      }
      return "failed";
    });
  return async (outcomes) => {
    const recorded: Recorded[] = [];
    for (const o of outcomes) recorded.push(await one(o));
    return recorded;
  };
}
