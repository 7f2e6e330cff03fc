// Drives the implementation's clock: virtual (moved through the Control API, exact) or scaled real
// time (waited for, with tolerance bands derived from the scale).
import { loadConformanceRules } from "../../src/spec.js";
import type { Control } from "./control.js";

export type ClockSetting = { kind: "virtual" } | { kind: "scaled"; factor: number };

/**
 * Why the suite cannot certify with this clock, if it cannot: a factor beyond (0, 1], or one so small
 * that a 2 h retry takes less real time than a first attempt may (D24: `scaledClock.minFactor`), where
 * the reset scenario could not tell a correct server from a wrong one.
 */
export function clockSettingProblem(setting: ClockSetting): string | undefined {
  if (setting.kind === "virtual") return undefined;
  const { minFactor } = loadConformanceRules().scaledClock;
  if (!(setting.factor > 0 && setting.factor <= 1)) return `must be "virtual" or "scaled:FACTOR" with 0 < FACTOR <= 1, got "scaled:${setting.factor}"`;
  if (setting.factor < minFactor) {
    return `scaled:${setting.factor} is faster than the suite can certify: use a FACTOR of at least ${minFactor} (x-conformance.scaledClock.minFactor, D24), or the virtual clock`;
  }
  return undefined;
}

/** `virtual` or `scaled:FACTOR`, as `--clock` takes it; throws with the reason it cannot be used. */
export function parseClockSetting(text: string): ClockSetting {
  if (text === "virtual") return { kind: "virtual" };
  const match = /^scaled:([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)$/i.exec(text);
  if (!match) throw new Error(`must be "virtual" or "scaled:FACTOR" with 0 < FACTOR <= 1, got "${text}"`);
  const setting: ClockSetting = { kind: "scaled", factor: Number(match[1]) };
  const problem = clockSettingProblem(setting);
  if (problem) throw new Error(problem);
  return setting;
}

export interface ClockDriver {
  setting: ClockSetting;
  /** Let `seconds` of the implementation's time pass; with a virtual clock, also wait for due attempts. */
  elapse(seconds: number): Promise<void>;
  /** Real milliseconds that `seconds` of the implementation's time take (0 for virtual). */
  realMs(seconds: number): number;
  /** With a virtual clock, each advance so far: when it was asked for and when it answered (performance.now()). */
  advances: { startedAt: number; answeredAt: number }[];
}

export function createClockDriver(setting: ClockSetting, control: Control): ClockDriver {
  const advances: ClockDriver["advances"] = [];
  if (setting.kind === "virtual") {
    return {
      setting,
      elapse: async (seconds) => {
        const startedAt = performance.now();
        await control.advance(seconds);
        advances.push({ startedAt, answeredAt: performance.now() });
      },
      realMs: () => 0,
      advances,
    };
  }
  return {
    setting,
    elapse: (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * setting.factor * 1000)),
    realMs: (seconds) => seconds * setting.factor * 1000,
    advances,
  };
}

/**
 * How far from the expected wait a scaled-time retry may arrive, in real ms (D25, `x-conformance` of
 * the control API): never early beyond timer granularity; late by a fraction of the wait plus a fixed
 * allowance for the network and the event loop.
 */
export function scaledTolerance(expectedMs: number): { earlyMs: number; lateMs: number } {
  const { earlyRealMs, lateFractionOfWait, lateRealMs } = loadConformanceRules().scaledClock.tolerance;
  return { earlyMs: earlyRealMs, lateMs: expectedMs * lateFractionOfWait + lateRealMs };
}
