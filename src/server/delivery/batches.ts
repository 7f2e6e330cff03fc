// Items handed in one at a time and handled many per call (group commit): the first batch goes at
// once, and what comes while a call is under way goes together in the next. A statement costs far more
// than its rows, on the embedded store above all. The engine batches outcomes (D7) and emitted events.

export interface Batcher<T, R> {
  /** Resolves with the item's own result once its batch is handled. */
  add(item: T): Promise<R>;
  /** Items waiting for a batch. */
  readonly waiting: number;
  /** The batches under way until none is left (undefined when there is none). */
  readonly draining: Promise<void> | undefined;
}

export function createBatcher<T, R>(options: {
  /** At most this many items a call. */
  max: number;
  /** Handles a batch: one result per item, in order. */
  run(items: T[]): Promise<R[]>;
  /** Before each batch is taken: may wait a little for more to come. */
  beforeBatch?(): Promise<void>;
  /** A batch whose call failed: each item's result or error (by default the error, for each). */
  failed?(items: T[], error: Error): Promise<(R | Error)[]>;
}): Batcher<T, R> {
  const waiting: { item: T; done: (r: R | Error) => void }[] = [];
  let draining: Promise<void> | undefined;

  async function drain(): Promise<void> {
    try {
      while (waiting.length > 0) {
        // Without a wait asked for, the first batch goes in this tick: an idle server adds no delay.
        if (options.beforeBatch) await options.beforeBatch();
        const batch = waiting.splice(0, options.max);
        const items = batch.map((b) => b.item);
        const results = await options.run(items).catch(async (error: Error) => (options.failed ? options.failed(items, error) : items.map(() => error)));
        batch.forEach((b, i) => b.done(results[i]!));
      }
    } finally {
      // Cleared in the same tick as the last emptiness check: an item added a tick later (as a
      // .finally() would clear it) would find a drain that has ended, and wait forever.
      draining = undefined;
    }
  }

  return {
    add(item) {
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, done: (r) => (r instanceof Error ? reject(r) : resolve(r)) });
        draining ??= drain();
      });
    },
    get waiting() {
      return waiting.length;
    },
    get draining() {
      return draining;
    },
  };
}
