// One clock for all of the reference server's timing: real, scaled (a wait of S seconds takes
// S * scale real seconds) or virtual (moves only when advanced).
export type ClockMode = "real" | "scaled" | "virtual";

export interface Clock {
  mode: ClockMode;
  /** Virtual seconds per real second: 1 real, the factor when scaled, 0 virtual. */
  scale: number;
  /** Milliseconds since the epoch, in the clock's time. */
  now(): number;
  /** Real milliseconds until clock time `at` (0 if past); Infinity for a virtual clock. */
  realDelayUntil(at: number): number;
  /** Virtual only: set the time. */
  set(at: number): void;
}

export function createClock(mode: ClockMode, options: { scale?: number; start?: number } = {}): Clock {
  const realStart = Date.now();
  const start = options.start ?? realStart;
  if (mode === "virtual") {
    let current = start;
    return {
      mode,
      scale: 0,
      now: () => current,
      realDelayUntil: () => Infinity,
      set(at) {
        current = Math.max(current, at);
      },
    };
  }
  const scale = mode === "real" ? 1 : (options.scale ?? 1);
  return {
    mode,
    scale,
    // Whole milliseconds: times are stored as integers, and 1 / scale need not be one.
    now: () => Math.floor(start + (Date.now() - realStart) / scale),
    realDelayUntil(at) {
      return Math.max(0, (at - this.now()) * scale);
    },
    set() {
      throw new Error("only a virtual clock can be set");
    },
  };
}

/** Parses --time-scale / CONFORMANCE_CLOCK style settings: "real", "virtual", "scaled:0.001". */
export function parseClockMode(text: string): { mode: ClockMode; scale?: number } {
  if (text === "real" || text === "virtual") return { mode: text };
  const match = /^scaled:(.+)$/.exec(text);
  const scale = match ? Number(match[1]) : NaN;
  if (!(scale > 0 && scale <= 1)) throw new Error(`clock must be real, virtual or scaled:FACTOR with 0 < FACTOR <= 1, got "${text}"`);
  return { mode: "scaled", scale };
}
