// Making claimed attempts (spec/DECISIONS.md D1, D2, D6, D7): signed as their claim returns, each made
// once its webhook's share of its origin admits it (places.ts), within its deadline (deadlines.ts), and
// ended as an outcome to record: succeeded, failed with its retry's time, or cancelled.
import type { DeliveryRules } from "@partner-platform/sdk";
import type { Clock } from "../clock.js";
import { createDeadlines } from "./deadlines.js";
import { endOf, type ClaimedAttempt, type DeliveryParts, type Outcome } from "./parts.js";
import type { Places } from "./places.js";

/** An attempt's bytes and their signature (DeliveryParts.sign). */
export type Signed = ReturnType<DeliveryParts["sign"]>;

export interface Attempts {
  /** Signs a claim's attempts (undefined for those not deliverable, which are not made). */
  sign(claimed: ClaimedAttempt[]): (Signed | undefined)[];
  /** Makes an attempt; undefined when the engine stopped before it ended (nothing to record). */
  make(a: ClaimedAttempt, signed: Signed | undefined): Promise<Outcome | undefined>;
  /** Abandons every attempt under way (a stop): they end unrecorded. */
  abortAll(reason: Error): void;
}

export function createAttempts(options: {
  parts: DeliveryParts;
  clock: Clock;
  rules: DeliveryRules;
  places: Places;
  /** Real ms an attempt may take before it has failed (D6, D24). */
  timeoutRealMs: number;
  stopped: () => boolean;
}): Attempts {
  const { parts, clock, rules, places, stopped } = options;
  const deadlines = createDeadlines(options.timeoutRealMs);

  async function attemptNow(a: ClaimedAttempt, signed: Signed): Promise<Outcome | undefined> {
    if (stopped()) return undefined;
    // Not awaited when there is none: a microtask's turn less per attempt.
    if (parts.timing.beforeAttempt) await parts.timing.beforeAttempt();
    const startedAt = clock.now();
    const { body, signature } = await signed;
    if (stopped()) return undefined;
    const signal = deadlines.start();
    try {
      const result = await parts.send(a.url!, body, signature, signal);
      const ok = result.error === undefined && result.status !== undefined && result.status >= 200 && result.status < 300;
      const endedAt = endOf(clock, rules, startedAt, result.timedOut);
      const retryAt = ok ? undefined : parts.retryAt({ attempt: a.attempt, startedAt, endedAt, timedOut: result.timedOut });
      return { attemptId: a.id, webhookId: a.webhookId, ok, cancelled: false, status: result.status, error: result.error, endedAt, retryAt };
    } catch (error) {
      // Stopping: left claimed, handed back to the queue by the engine's stop, made again after the restart.
      if (signal.aborted && !signal.timedOut) return undefined;
      throw error;
    } finally {
      deadlines.end(signal);
    }
  }

  return {
    /**
     * A claim's attempts are signed as it returns, one after another, not each as it starts: made
     * between attempts, a signature found the signing code and data evicted from the caches (by the
     * database's thread and the connections' TLS) and cost 15-25 µs of CPU instead of 5 (measured with
     * 8 MB read between signatures; in `serve`, sustained embedded, 8 runs alternated: 340-380 against
     * 360-413 µs of CPU per delivery).
     */
    sign(claimed) {
      return claimed.map((a) => {
        if (!parts.deliverable(a)) return undefined;
        // A signer that throws fails its attempt, as a rejection would.
        let signed: Signed;
        try {
          signed = Promise.resolve(parts.sign(a as ClaimedAttempt & { body: string; secret: string }));
        } catch (error) {
          signed = Promise.reject(error as Error);
        }
        // Awaited by the attempt; one that never starts (a stop) must not leave a failure unhandled.
        signed.catch(() => undefined);
        return signed;
      });
    },

    make(a, signed) {
      // Not signed: not deliverable (its webhook or event gone, or the webhook disabled).
      if (!signed) return Promise.resolve({ attemptId: a.id, webhookId: a.webhookId, ok: false, cancelled: true, endedAt: clock.now() });
      // The attempt starts, and its timeout with it, once its webhook's share of the origin admits it,
      // which is only with a connection free for it (D40): a burst waits here, before its deadline.
      return places.admit(a.webhookId, a.url!, () => attemptNow(a, signed));
    },

    abortAll: (reason) => deadlines.abortAll(reason),
  };
}
