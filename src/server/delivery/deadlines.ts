// The attempts' deadlines (D6) on one timer. Every attempt of an engine has the same timeout, so the
// order in which attempts start is the order in which their deadlines pass: a Map in insertion order is
// the queue, and one timer, armed for its head, serves them all. An attempt costs an entry, not a timer,
// an AbortController and a listener linking it to the engine's stop.

/** What abandons an attempt's HTTP request: its deadline or the engine's stop. */
export class AttemptSignal {
  aborted = false;
  reason: Error | undefined;
  /** Aborted because the attempt timeout passed (not because the engine stopped). */
  timedOut = false;
  /** Called once when aborted (one listener: the attempt's request). */
  onabort: (() => void) | undefined;

  abort(reason: Error, timedOut: boolean): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.timedOut = timedOut;
    this.onabort?.();
  }
}

export interface Deadlines {
  /** A new attempt's signal: aborted (timedOut) once `timeoutMs` real ms have passed, unless it ends first. */
  start(): AttemptSignal;
  /** The attempt ended: its deadline is dropped. */
  end(signal: AttemptSignal): void;
  /** Aborts every attempt under way at once (a stop). */
  abortAll(reason: Error): void;
}

export function createDeadlines(timeoutMs: number): Deadlines {
  /** Signal → real ms (performance.now) of its deadline, in start order, which is deadline order. */
  const pending = new Map<AttemptSignal, number>();
  let timer: NodeJS.Timeout | undefined;

  function arm(): void {
    const first = pending.values().next();
    if (!first.done) timer = setTimeout(expire, Math.max(1, Math.ceil(first.value - performance.now())));
  }

  function expire(): void {
    timer = undefined;
    const now = performance.now();
    for (const [signal, at] of pending) {
      if (at > now) break;
      pending.delete(signal);
      signal.abort(new DOMException("no complete answer within the attempt timeout", "TimeoutError"), true);
    }
    arm();
  }

  return {
    start() {
      const signal = new AttemptSignal();
      pending.set(signal, performance.now() + timeoutMs);
      if (!timer) arm();
      return signal;
    },
    end(signal) {
      pending.delete(signal);
    },
    abortAll(reason) {
      clearTimeout(timer);
      timer = undefined;
      const all = [...pending.keys()];
      pending.clear();
      for (const signal of all) signal.abort(reason, false);
    },
  };
}
