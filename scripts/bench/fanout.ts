// Fan-out: the cost of queueing one event's first attempts for 1, 10, 100 and 1,000 subscribed webhooks
// (one INSERT … SELECT per event, D8), through the Control API of `partner-platform serve` on a virtual
// clock (nothing is delivered). Per attempt row it should be flat. BENCH_FANOUT_EVENTS (50) per level;
// BENCH_STORES (embedded,postgres).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { postgresBinDir, startTestPostgres, type TestPostgres } from "../postgres.js";
import type { Bench, BenchResult } from "../bench.js";
import { cpuMicros, startServe, startWorker } from "./lib/procs.js";

const EVENTS = Number(process.env.BENCH_FANOUT_EVENTS ?? 50);
const LEVELS = [1, 10, 100, 1000];
const stores = (process.env.BENCH_STORES ?? "embedded,postgres").split(",");

const bench: Bench = async () => {
  const results: BenchResult[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), "bench-fanout-"));
  let pg: TestPostgres | undefined;
  try {
    for (const store of stores) {
      if (store === "postgres" && !postgresBinDir()) continue;
      pg ??= store === "postgres" ? await startTestPostgres() : undefined;
      const storeArgs = store === "postgres" ? ["--database-url", await pg!.createDatabase("fanout")] : [];
      const serve = await startServe(["--port", "0", "--conformance", "--clock", "virtual", ...storeArgs]);
      const load = startWorker("load.ts");
      try {
        const cells: string[] = [];
        let registered = 0;
        for (const level of LEVELS) {
          const urls = Array.from({ length: level - registered }, (_, i) => `https://127.0.0.1:9/hook-${registered + i}`);
          await load.call("setup", { server: serve.url, urls, businessID: "4711" });
          registered = level;
          const cpu = cpuMicros(serve.child.pid!);
          const ms = await load.call<number>("trigger", { n: EVENTS, concurrency: 1, businessID: "4711" });
          const rows = EVENTS * level;
          cells.push(`${level}: ${Math.round((ms * 1000) / rows)} µs wall, ${Math.round((cpuMicros(serve.child.pid!) - cpu) / rows)} µs CPU per row (${Math.round(EVENTS / (ms / 1000))} events/s)`);
        }
        results.push({ name: `fan-out, ${store === "postgres" ? "PostgreSQL" : "embedded store"}, queueing cost per attempt row by webhooks per event (trigger included)`, value: cells.join("; "), target: "flat per row" });
      } finally {
        load.kill();
        await serve.stop();
      }
    }
  } finally {
    pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
};
export default bench;
