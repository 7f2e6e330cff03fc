// A wait that gives up: the work goes on, but whoever waits for it is told it took too long.

/** `work`, or a rejection "`what` within N s" once `ms` have passed (the timer keeps no process alive). */
export function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
