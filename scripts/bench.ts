// `npm run bench`: runs the benchmarks in scripts/bench/ (the long ones, or any, when named on the command line) and
// prints its figures. Targets are printed beside the figures; nothing here fails on speed.
import { readdir } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";

export interface BenchResult {
  /** What was measured, e.g. "npm run generate (wall time)". */
  name: string;
  /** The figure with its unit, e.g. "4.61 s" or "0.97x bare HMAC loop". */
  value: string;
  /** The target, when the issue sets one, e.g. "< 10 s". */
  target?: string;
}

/** A benchmark module's default export. */
export type Bench = () => Promise<BenchResult[]>;

const dir = path.join(import.meta.dirname, "bench");
const only = process.argv.slice(2);
// Benchmarks that take many minutes here run only when named (20 certifications per timing, 1 vs 2 servers).
// The 100k backlog (about a minute) runs with the others: it shows a record that waits behind the next
// claim, which the delivery bench's one webhook rarely makes (docs/benchmarks.md, 2026-12-01).
const long = new Set(["flake", "scale-out"]);
const files = (await readdir(dir)).filter((f) => f.endsWith(".ts")).sort();
for (const file of files) {
  const name = path.basename(file, ".ts");
  if (only.length > 0 && !only.includes(name)) continue;
  if (only.length === 0 && long.has(name)) {
    process.stdout.write(`${name.padEnd(12)} (long: run it with npm run bench -- ${name})\n`);
    continue;
  }
  const bench = ((await import(pathToFileURL(path.join(dir, file)).href)) as { default: Bench }).default;
  try {
    for (const result of await bench()) {
      const target = result.target ? `   (target ${result.target})` : "";
      process.stdout.write(`${name.padEnd(12)} ${result.name}: ${result.value}${target}\n`);
    }
  } catch (error) {
    // One line for what stopped it (a BENCH_ variable it refuses, a process that did not start). No other
    // bench runs: processes the stopped one left would take their CPU; exiting ends them (procs.ts).
    process.stderr.write(`${name.padEnd(12)} stopped: ${(error as Error).message}\n`);
    process.exit(1);
  }
}
