// The attempts this process has claimed and not yet recorded (D41): the engine adds what a claim took and
// lets go of what it recorded; on a store only this process uses they are its claims themselves, which a
// claim leaves out and a disabling spares. The parts (and the broken servers' recorder) note their claims
// and issue their records through it, so that a record knows every attempt it must spare.

export class HeldClaims implements Iterable<string> {
  readonly #ids = new Set<string>();
  /** The claim under way, and what the last claim took: those are held once the engine has the claim's answer. */
  #claimUnderWay: Promise<unknown> | undefined;
  #lastTaken: readonly string[] = [];
  /** Records waiting for the claim under way to settle. */
  readonly #recordsWaiting: (() => void)[] = [];

  get size(): number {
    return this.#ids.size;
  }
  add(id: string): void {
    this.#ids.add(id);
  }
  delete(id: string): void {
    this.#ids.delete(id);
  }
  [Symbol.iterator](): Iterator<string> {
    return this.#ids[Symbol.iterator]();
  }

  /** Notes a claim under way, whose answer is the ids it took first (records wait for it: `recording`). */
  claiming<T extends { id: string }>(claim: Promise<T[]>): Promise<T[]> {
    const over = (taken?: T[]) => {
      if (taken) this.#lastTaken = taken.map((a) => a.id);
      if (this.#claimUnderWay !== underWay) return;
      this.#claimUnderWay = undefined;
      // In the claim's own settlement, before whoever awaits the claim can issue the next one.
      const waiting = this.#recordsWaiting.splice(0);
      for (const issue of waiting) issue();
    };
    const underWay: Promise<void> = claim.then(over, () => over());
    this.#claimUnderWay = underWay;
    return claim;
  }

  /**
   * Issues a record (`issue`) with the attempts a disabling in it must spare: those held, and those the
   * last claim took. With a claim under way it is issued in that claim's settlement, before anything
   * that awaits the claim runs: the store runs statements in the order they were issued, so no claim
   * comes between. Issued before the claim's answer with the ids held then, a disabling cancelled the
   * attempts that claim had just taken, which were made anyway and then found cancelled (recorded as
   * stale); awaited after it, the record was issued a turn later, behind the engine's next claim, again
   * and again in a backlog (a 100k backlog drained at a fifth of its rate).
   */
  recording<T>(issue: (spared: string[]) => Promise<T>): Promise<T> {
    const now = () => issue([...this.#ids, ...this.#lastTaken]);
    if (!this.#claimUnderWay) return now();
    return new Promise<T>((resolve, reject) =>
      this.#recordsWaiting.push(() => {
        try {
          now().then(resolve, reject);
        } catch (error) {
          reject(error as Error);
        }
      }),
    );
  }
}
