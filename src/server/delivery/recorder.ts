// Recording outcomes (spec/DECISIONS.md D7): in the order the attempts ended, many per statement. A
// statement costs far more than a row, so a batch waits a little for the outcomes of attempts ending
// about then; an outcome that could not be recorded hands its attempt back to be made again (D4).
import type { Db } from "../store.js";
import { createBatcher } from "./batches.js";
import type { Outcome, Recorded } from "./parts.js";

/**
 * Outcomes recorded per statement before the next batch is taken without waiting (D7: in the order
 * the attempts ended), and real ms a batch waits for more to end before it is recorded. Measured on
 * PostgreSQL (3,000 outcomes, store alone): 32 a statement cost the server 23-27 µs and the database
 * 33-43 µs of CPU per outcome, 128 a statement 10 and 27; at ~3,000 deliveries/s a 10 ms wait
 * gathered ~30, so it is 30 ms (an outcome is recorded later, its attempt's place is freed as before).
 */
const RECORD_BATCH = 128;
const RECORD_LINGER_MS = 30;

export interface Recorder {
  /** Records an outcome with others that ended about then; resolves with what recording it did. */
  record(outcome: Outcome): Promise<Recorded>;
  /** The batches under way until none is left (undefined when there is none). */
  readonly draining: Promise<void> | undefined;
}

export function createRecorder(options: {
  db: Db;
  /** Records a batch (DeliveryParts.record). */
  record: (outcomes: Outcome[]) => Promise<Recorded[]>;
  /** This process's name on its claims; claims held in memory are not written, so there is nothing to hand back (D41). */
  owner: string;
  claimsInMemory: boolean;
  /** Attempts under way, whose outcomes may be waited for. */
  underWay: () => number;
  /** Real ms a batch waits for more attempts to end (default 30). */
  lingerMs?: number;
  log: (message: string) => void;
}): Recorder {
  const { db } = options;
  const lingerMs = options.lingerMs ?? RECORD_LINGER_MS;
  /** Ends a batch's wait for more outcomes early: enough are waiting, or no attempt is left to end. */
  let gathered: (() => void) | undefined;
  const outcomes = createBatcher<Outcome, Recorded>({ max: 500, run: (batch) => recordOrHandBack(batch), beforeBatch: gather });

  /**
   * An attempt whose outcome could not be recorded is handed back, or, where that fails too, left to
   * run out its lease and be claimed again (at-least-once, D4). Held in memory, it is claimed again
   * once the engine lets it go.
   */
  async function recordOrHandBack(batch: Outcome[]): Promise<Recorded[]> {
    try {
      return await options.record(batch);
    } catch (error) {
      if (options.claimsInMemory) throw error;
      await db
        .query("UPDATE attempts SET state = 'pending', claimed_by = NULL WHERE id = ANY($1::bigint[]) AND claimed_by = $2 AND state = 'in_flight'", [
          batch.map((o) => o.attemptId),
          options.owner,
        ])
        .catch((e: unknown) => options.log(`${batch.length} attempts whose outcomes were not recorded are claimed again once their leases run out: ${(e as Error).message}`));
      throw error;
    }
  }
  const enoughGathered = () => outcomes.waiting >= RECORD_BATCH || options.underWay() === 0;

  /**
   * Waits up to lingerMs for the outcomes of attempts ending about now, so that they share one
   * statement (measured on the embedded store: a batch of one outcome per statement was 60% of the
   * server's time per delivery).
   */
  function gather(): Promise<void> {
    if (enoughGathered()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, lingerMs);
      gathered = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => (gathered = undefined));
  }

  return {
    record(outcome) {
      const recorded = outcomes.add(outcome);
      if (enoughGathered()) gathered?.();
      return recorded;
    },
    get draining() {
      return outcomes.draining;
    },
  };
}
