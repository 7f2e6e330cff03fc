// What wakes the delivery loop's run while it waits (spec/DECISIONS.md D44): a kick (room was made, a
// webhook can take more, new work, a stop), or the earliest clock time something was asked to fall due.

/** Wakes a run waiting to claim; a kick while nobody waits is kept for the next wait. */
export class Kicks {
  #waiting: (() => void) | undefined;
  #kickedMeanwhile = false;

  kick(): void {
    if (this.#waiting) this.#waiting();
    else this.#kickedMeanwhile = true;
  }

  /** Forgets a kick that came meanwhile (a claim is about to look at everything anyway). */
  forget(): void {
    this.#kickedMeanwhile = false;
  }

  /** Resolves on the next kick (or one that came meanwhile), or after `timeoutMs` real ms. */
  kicked(timeoutMs = Infinity): Promise<void> {
    if (this.#kickedMeanwhile) {
      this.#kickedMeanwhile = false;
      return Promise.resolve();
    }
    let timeout: NodeJS.Timeout | undefined;
    return new Promise<void>((resolve) => {
      this.#waiting = resolve;
      if (timeoutMs !== Infinity) timeout = setTimeout(resolve, timeoutMs);
    }).finally(() => {
      this.#waiting = undefined;
      clearTimeout(timeout);
    });
  }
}

/**
 * The clock times the loop was asked to run at (a new event's, a retry's). A waiting run keeps one
 * time to wake at (`at`): a later time asked for meanwhile is not kept but noted (Infinity: there may
 * be one), and once `at` is claimed the run looks up when work falls due next (`lookUp`).
 */
export class WantedTimes {
  /** The earliest time asked for (Infinity: none). */
  at = Infinity;
  #later = -Infinity;
  /** Whether to look up when work falls due next: a later time was asked for than the one claimed. */
  lookUp = false;

  /** Keeps the earlier of `at` and the time kept; the later one is noted. */
  want(at: number): void {
    const later = Math.max(at, this.at);
    if (later !== Infinity) this.#later = Math.max(this.#later, later);
    this.at = Math.min(this.at, at);
  }

  /** A claim for clock time `now` claims the time kept, if due; one noted after it is looked up next. */
  claimedFor(now: number): void {
    if (this.at > now) return;
    this.at = Infinity;
    if (this.#later > now) this.lookUp = true;
    this.#later = -Infinity;
  }

  /** When work falls due next, looked up: kept, and looked up again once claimed (there may be more after it). */
  lookedUp(next: number): void {
    this.want(next);
    this.#later = Infinity;
  }

  /** A new pass of the loop: it looks at everything. */
  reset(): void {
    this.at = Infinity;
    this.#later = -Infinity;
    this.lookUp = false;
  }
}
