// The attempts this process has claimed and not yet recorded (D41): the engine adds what a claim took and
// lets go of what it recorded; on a store only this process uses they are its claims themselves, which a
// claim leaves out and a disabling spares. The parts (and the broken servers' recorder) note their claims
// and issue their records through it, so that a record knows every attempt it must spare.

export class HeldClaims implements Iterable<string> {
  readonly #ids = new Set<string>();
  /** The claim under way, and what the last claim took: those are held once the engine has the claim's answer. */
  #claimUnderWay: Promise<unknown> | undefined;
  #lastTaken: readonly string[] = [];

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
    const over = () => {
      if (this.#claimUnderWay === underWay) this.#claimUnderWay = undefined;
    };
    const underWay: Promise<void> = claim.then((taken) => {
      this.#lastTaken = taken.map((a) => a.id);
      over();
    }, over);
    this.#claimUnderWay = underWay;
    return claim;
  }

  /**
   * Issues a record (`issue`) with the attempts a disabling in it must spare: those held, and those the
   * last claim took. It waits for a claim under way, then issues at once, in the same turn: the store runs
   * statements in the order they were issued, so no claim comes between. Issued meanwhile with the ids
   * held before, a disabling cancelled the attempts that claim had just taken, which were made anyway and
   * then found cancelled (recorded as stale).
   */
  async recording<T>(issue: (spared: string[]) => Promise<T>): Promise<T> {
    while (this.#claimUnderWay) await this.#claimUnderWay;
    return issue([...this.#ids, ...this.#lastTaken]);
  }
}
