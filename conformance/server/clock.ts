// Drives the implementation's clock: virtual (moved through the Control API, exact) or scaled real
// time (waited for, with tolerance bands derived from the scale).
import { loadConformanceRules } from "../../src/spec.js";
import type { Control } from "./control.js";

export type ClockSetting = { kind: "virtual" } | { kind: "scaled"; factor: number };

export function parseClockSetting(text: string): ClockSetting {
  if (text === "virtual") return { kind: "virtual" };
  const match = /^scaled:([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)$/i.exec(text);
  const factor = match ? Number(match[1]) : NaN;
  if (!(factor > 0 && factor <= 1)) {
    throw new Error(`--clock must be "virtual" or "scaled:FACTOR" with 0 < FACTOR <= 1, got "${text}"`);
  }
  return { kind: "scaled", factor };
}

export interface ClockDriver {
  setting: ClockSetting;
  /** Let `seconds` of the implementation's time pass; with a virtual clock, also wait for due attempts. */
  elapse(seconds: number): Promise<void>;
  /** Real milliseconds that `seconds` of the implementation's time take (0 for virtual). */
  realMs(seconds: number): number;
}

export function createClockDriver(setting: ClockSetting, control: Control): ClockDriver {
  if (setting.kind === "virtual") {
    return {
      setting,
      elapse: async (seconds) => {
        await control.advance(seconds);
      },
      realMs: () => 0,
    };
  }
  return {
    setting,
    elapse: (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * setting.factor * 1000)),
    realMs: (seconds) => seconds * setting.factor * 1000,
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
