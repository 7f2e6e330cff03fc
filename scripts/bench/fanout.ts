// Fan-out: the cost of queueing one event's first attempts for 1, 10, 100 and 1,000 subscribed webhooks
// (one INSERT … SELECT per statement, store_events, D8; one event a statement here, as triggers come one
// at a time), through the Control API of `partner-platform serve` on a virtual clock (nothing is delivered). Per attempt row it should be flat. A trigger costs the same with or
// without webhooks too (its request, validation, event row): measured after a warm-up, on business 4712
// that has none, and taken off each level's cost, so what is left is the cost of the rows, not the
// trigger's spread over them. BENCH_FANOUT_EVENTS (50) per level at least, and enough events for 1,000
// rows (/proc counts CPU in 10 ms ticks: 50 one-row events could not tell 200 µs per row from none);
// BENCH_STORES (embedded,postgres).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { postgresBinDir, startTestPostgres, type TestPostgres } from "../postgres.js";
import type { Bench, BenchResult } from "../bench.js";
import { cpuMicros, startServe, startWorker } from "./lib/procs.js";

const EVENTS = Number(process.env.BENCH_FANOUT_EVENTS ?? 50);
const LEVELS = [1, 10, 100, 1000];
const eventsAt = (webhooks: number) => Math.max(EVENTS, Math.ceil(1000 / Math.max(1, webhooks)));
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
        // Warm-up (JIT, the validators compiled on first use), then the trigger alone: business 4712 has no webhook.
        await load.call("setup", { server: serve.url, urls: [], businessID: "4712" });
        await load.call("trigger", { n: eventsAt(0), concurrency: 1, businessID: "4712" });
        let cpu = cpuMicros(serve.child.pid!);
        const bareMs = await load.call<number>("trigger", { n: eventsAt(0), concurrency: 1, businessID: "4712" });
        const bare = { wallUs: (bareMs * 1000) / eventsAt(0), cpuUs: (cpuMicros(serve.child.pid!) - cpu) / eventsAt(0) };
        const cells = [`0 (the trigger alone): ${Math.round(bare.wallUs)} µs wall, ${Math.round(bare.cpuUs)} µs CPU per event`];
        let registered = 0;
        for (const level of LEVELS) {
          const urls = Array.from({ length: level - registered }, (_, i) => `https://127.0.0.1:9/hook-${registered + i}`);
          await load.call("setup", { server: serve.url, urls, businessID: "4711" });
          registered = level;
          cpu = cpuMicros(serve.child.pid!);
          const events = eventsAt(level);
          const ms = await load.call<number>("trigger", { n: events, concurrency: 1, businessID: "4711" });
          const perEvent = { wallUs: (ms * 1000) / events, cpuUs: (cpuMicros(serve.child.pid!) - cpu) / events };
          const perRow = (us: number, bareUs: number) => Math.round((us - bareUs) / level);
          cells.push(`${level}: ${perRow(perEvent.wallUs, bare.wallUs)} µs wall, ${perRow(perEvent.cpuUs, bare.cpuUs)} µs CPU per row beyond the trigger (${Math.round(events / (ms / 1000))} events/s)`);
        }
        results.push({ name: `fan-out, ${store === "postgres" ? "PostgreSQL" : "embedded store"}, queueing cost per attempt row by webhooks per event`, value: cells.join("; "), target: "flat per row" });
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
