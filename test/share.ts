// Which variants a proof file's run takes: vitest.config.ts runs the proof files as several projects side
// by side, each given its share, and once more one at a time for what is judged in real time.
import { inject } from "vitest";

/** The index-th share of `of` (from 1) of the variants not judged in real time, or those judged in real time. */
export type Share = { index: number; of: number } | { realTime: true };

declare module "vitest" {
  export interface ProvidedContext {
    share: Share;
  }
}

/** This run's items: all of them in a run given no share (another config, say). */
export function shareOf<T>(items: readonly T[], inRealTime: (item: T) => boolean = () => false): T[] {
  const share = inject("share") as Share | undefined;
  if (!share) return [...items];
  if ("realTime" in share) return items.filter(inRealTime);
  return items.filter((item) => !inRealTime(item)).filter((_, i) => i % share.of === share.index - 1);
}

/** Whether this run takes a proof file's tests of no variant: once among the shares. */
export function takesTheRest(): boolean {
  const share = inject("share") as Share | undefined;
  return !share || ("index" in share && share.index === 1);
}
