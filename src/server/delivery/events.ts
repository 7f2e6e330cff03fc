// Storing events and queuing their first attempts (spec/DECISIONS.md D8, D19): inside a caller's
// transaction, or, for an event emitted alone, many per statement with others emitted meanwhile
// (group commit: on the embedded store a statement cost about a millisecond of its thread's CPU).
import type { EventName } from "@partner-platform/sdk";
import type { Clock } from "../clock.js";
import type { Db, Queryable } from "../store.js";
import { createBatcher } from "./batches.js";
import type { DeliveryParts, NewEvent } from "./parts.js";

/** Records an event and queues its first attempts, inside the caller's transaction. */
export type Emit = (name: EventName, businessID: string, data: Record<string, unknown>, at?: number) => Promise<{ id: string; queuedFor: number }>;

/** Events emitted alone stored per statement at most. */
const EMIT_BATCH = 256;

export interface EventStore {
  /** Stores an event emitted alone (with others emitted meanwhile, atomically each) and queues its first attempts. */
  emit: Emit;
  /** Runs `fn` in one transaction and says how many first attempts the events it emitted queued. */
  transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<{ result: T; queued: number }>;
  /** Expires the leads due by `now` (D19), each with its lead.expired, in one transaction. */
  expireLeads(now: number): Promise<void>;
}

export function createEventStore({ db, clock, parts }: { db: Db; clock: Clock; parts: DeliveryParts }): EventStore {
  function newEvent(name: EventName, businessID: string, data: Record<string, unknown>, at = clock.now()): NewEvent {
    // Fields named, not spread: on Node 20 each property written after a spread costs about a microsecond.
    const { id, body } = parts.envelope(name, data, at);
    return { id, body, name, businessId: businessID, at };
  }

  /**
   * A batch whose statement failed stored none: each of its events is stored on its own, so that one
   * that cannot be (a duplicate id, ...) fails only its own emit.
   */
  const emitted = createBatcher<NewEvent, number>({
    max: EMIT_BATCH,
    run: (events) => parts.queue(db, events),
    async failed(events, error) {
      if (events.length === 1) return [error];
      const results: (number | Error)[] = [];
      for (const event of events) results.push(await parts.queue(db, [event]).then(([n]) => n!, (e: unknown) => e as Error));
      return results;
    },
  });

  async function transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<{ result: T; queued: number }> {
    let queued = 0;
    const result = await db.transaction((tx) =>
      fn(tx, async (...args) => {
        const event = newEvent(...args);
        const [queuedFor] = await parts.queue(tx, [event]);
        queued += queuedFor!;
        return { id: event.id, queuedFor: queuedFor! };
      }),
    );
    return { result, queued };
  }

  return {
    async emit(...args) {
      const event = newEvent(...args);
      return { id: event.id, queuedFor: await emitted.add(event) };
    },
    transaction,
    async expireLeads(now) {
      await transaction(async (tx, emit) => {
        for (const lead of await parts.expireLeads(tx, now)) {
          const data = {
            leadID: lead.id,
            businessID: lead.businessId,
            previousStatus: lead.previousStatus,
            createdAt: new Date(lead.createdAt).toISOString(),
            expiredAt: new Date(lead.expiresAt).toISOString(),
          };
          await emit("lead.expired", lead.businessId, data, lead.expiresAt);
        }
      });
    },
  };
}
