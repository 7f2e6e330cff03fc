// Flake benchmark of `certify server`: the reference server certified many times in a row in each legal
// timing (conformance/server/timings.ts): made only in advance, eagerly before a trigger answers, in the
// background after it, with retries due at their instant cut to the whole second, with random delays
// inside the tolerance band of a scaled clock, with retries near the end of that band, at a poller's
// ticks, and eagerly on a scaled clock with slow answers and connections. A suite whose verdict depended
// on a legal timing would fail some of these runs. `BENCH_FLAKE_RUNS` sets the count;
// `BENCH_FLAKE_TIMINGS` (ids, comma-separated) runs only those timings.
import type { ClockSetting } from "../../conformance/server/clock.js";
import { certifyReference } from "../../conformance/server/reference.js";
import { referenceTimings } from "../../conformance/server/timings.js";
import type { Bench } from "../bench.js";

const runs = Number(process.env.BENCH_FLAKE_RUNS ?? 20);
const only = process.env.BENCH_FLAKE_TIMINGS?.split(",").filter(Boolean);
const unknown = only?.filter((id) => !referenceTimings.some((t) => t.id === id)) ?? [];
if (unknown.length) throw new Error(`BENCH_FLAKE_TIMINGS names no timing ${unknown.join(", ")} (there are ${referenceTimings.map((t) => t.id).join(", ")})`);
/** The scaled clock of the jitter timing: the 7-day lead lifetime takes 18 s. */
const scaledFactor = 3e-5;

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

const bench: Bench = async () => {
  const results = [];
  for (const timing of referenceTimings.filter((t) => !only?.length || only.includes(t.id))) {
    const clock: ClockSetting = timing.clock === "virtual" ? { kind: "virtual" } : { kind: "scaled", factor: scaledFactor };
    const seconds: number[] = [];
    const failures: string[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      const report = await certifyReference(clock, { timing });
      seconds.push((performance.now() - start) / 1000);
      for (const r of report.results.filter((x) => x.status === "failed")) failures.push(`run ${i + 1}: ${r.id}`);
    }
    const passed = runs - new Set(failures.map((f) => f.split(":")[0])).size;
    results.push({
      name: `certify server, ${timing.id} timing (${timing.clock === "virtual" ? "virtual clock" : `scaled ${scaledFactor}`}): ${timing.description}`,
      value:
        `${passed}/${runs} runs certified, ${(percentile(seconds, 50)).toFixed(1)} s per run (p50), ${Math.max(...seconds).toFixed(1)} s max` +
        (failures.length ? `; failed: ${failures.join(", ")}` : ""),
      target: `${runs}/${runs}`,
    });
  }
  return results;
};
export default bench;
