// Delivery throughput of the reference server against a bare loop, every arm in a process of its own:
// one receiver process; `partner-platform serve` as a user runs it; a load generator; the bare loop
// (keep-alive POSTs on the engine's pool size, with as many in flight as the engine makes to the same
// receiver: 16 to a lone webhook, its share of D40, whose default `serve` keeps). Rounds alternate bare, engine,
// bare, engine, … in one run; each figure is the median with its range over rounds, with the CPU time
// per delivery (from /proc) and the peak RSS of the process that did the work, after warm-up rounds
// that are not counted (WARMUP).
//   sustained:   N events queued under a virtual clock, then one advance makes every attempt (claim,
//                sign, POST, record) — deliveries/s of the advance, against N bare undici POSTs, 16 in flight;
//   spread:      the sustained arm with each event to 20 webhooks, each at an origin of its own (N / 20
//                events): 240 in flight, 12 to each (D44: floor(256 / 21)), against N bare undici POSTs
//                spread over the same 20 origins with 240 in flight;
//   end to end:  N Control API triggers (32 in flight) on a real clock until the receiver has all N,
//                against N bare node:https POSTs, 16 in flight.
// Beside each arm: the whole machine's CPU per delivery (every process: receiver, load generator,
// PostgreSQL, anything else running) and how busy its cores were, which says whether the arm was
// limited by the machine's CPU or by something else.
//   relay:       the end-to-end arm's ceiling on this machine: the same triggers to a relay process that
//                only answers each and makes one HTTPS POST (lib/relay.ts: no store, signature or log;
//                16 at once, as `serve`), against the same bare loop.
// BENCH_N (3000), BENCH_ROUNDS (4), BENCH_WARMUP (3), BENCH_STORES (embedded,postgres), BENCH_ARMS (sustained,spread,e2e,relay) change the run;
// BENCH_IDLE_WEBHOOKS (0) registers that many more webhooks of the same business for an event never
// triggered, as a server with many partners' webhooks has, of which few are busy at once.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DELIVERY_DEFAULTS } from "../../src/server/delivery/index.js";
import { postgresBinDir, startTestPostgres, type TestPostgres } from "../postgres.js";
import type { Bench, BenchResult } from "../bench.js";
import { cpuMicros, machineCpuMicros, range, startServe, startWorker, watchRss, type Worker } from "./lib/procs.js";

const N = Number(process.env.BENCH_N ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
/**
 * Rounds that warm both arms up (TLS handshakes, JIT) and are not counted. `serve` takes three: V8
 * compiles the embedded database's WebAssembly with its baseline compiler first and its optimizing
 * one only as functions get hot, so its first 6,000-9,000 deliveries cost it 20-30% more CPU each
 * than those after (docs/benchmarks.md, "Warm-up").
 */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
/** The engine's pool per origin (both arms' pool size), and the attempts it makes at once to one webhook. */
const CONNECTIONS = DELIVERY_DEFAULTS.connectionsPerOrigin;
const IN_FLIGHT = DELIVERY_DEFAULTS.maxInFlightPerWebhook;
const IDLE_WEBHOOKS = Number(process.env.BENCH_IDLE_WEBHOOKS ?? 0);
const stores = (process.env.BENCH_STORES ?? "embedded,postgres").split(",");
const arms = (process.env.BENCH_ARMS ?? "sustained,spread,e2e,relay").split(",");
/** The spread arm's webhooks, each at an origin of its own, and the attempts the engine then has in flight (D44). */
const SPREAD_WEBHOOKS = 20;
const SPREAD_IN_FLIGHT = SPREAD_WEBHOOKS * Math.floor(DELIVERY_DEFAULTS.maxInFlight / (SPREAD_WEBHOOKS + 1));

interface Round {
  rate: number;
  cpuUs: number;
  peakMb: number;
  /** The whole machine's CPU per delivery, and the share of its cores that was busy. */
  machineCpuUs: number;
  machineBusy: number;
}

/** Runs `work` (which makes `n` deliveries) while measuring the CPU and peak RSS of process `pid`. */
async function measured(pid: number, n: number, work: () => Promise<number>): Promise<Round> {
  const rss = watchRss(pid);
  const cpu = cpuMicros(pid);
  const machine = machineCpuMicros();
  const ms = await work();
  const after = machineCpuMicros();
  const busy = after.busy - machine.busy;
  return { rate: n / (ms / 1000), cpuUs: (cpuMicros(pid) - cpu) / n, peakMb: rss.stop(), machineCpuUs: busy / n, machineBusy: busy / (after.total - machine.total) };
}

/** Rounds alternating the bare loop and the engine's arm (bare first), without the WARMUP rounds. */
async function alternated(bareRound: () => Promise<Round>, engineRound: () => Promise<Round>): Promise<{ bare: Round[]; engine: Round[] }> {
  const bare: Round[] = [];
  const engine: Round[] = [];
  for (let round = 0; round < WARMUP + ROUNDS; round++) {
    const b = await bareRound();
    const e = await engineRound();
    if (round >= WARMUP) {
      bare.push(b);
      engine.push(e);
    }
  }
  return { bare, engine };
}

function report(name: string, engine: Round[], bare: Round[], bareName: string, engineName = "serve", target: string | null = "≥ 0.5x"): BenchResult {
  const ratios = engine.map((e, i) => e.rate / bare[i]!.rate);
  const f = (rounds: Round[]) =>
    `${range(rounds.map((r) => r.rate))}/s, ${range(rounds.map((r) => r.cpuUs))} µs CPU/delivery, peak RSS ${Math.round(Math.max(...rounds.map((r) => r.peakMb)))} MB, ` +
    `machine ${range(rounds.map((r) => r.machineCpuUs))} µs CPU/delivery with its cores ${range(rounds.map((r) => 100 * r.machineBusy))}% busy`;
  return {
    name,
    value: `${range(ratios, 2)}x ${bareName} over ${ratios.length} rounds after ${WARMUP} not counted — ${engineName}: ${f(engine)}; bare: ${f(bare)}`,
    ...(target ? { target } : {}),
  };
}

async function waitForCount(receiver: Worker, p: string, count: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await receiver.call<number>("count", p)) < count) {
    if (performance.now() > deadline) throw new Error(`receiver: ${p} did not reach ${count}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const bench: Bench = async () => {
  const results: BenchResult[] = [];
  const receiver = startWorker("receiver.ts");
  const bare = startWorker("bare.ts");
  const dir = mkdtempSync(path.join(tmpdir(), "bench-delivery-"));
  let pg: TestPostgres | undefined;
  try {
    const { origin, ca } = await receiver.call<{ origin: string; ca: string }>("info");
    const caFile = path.join(dir, "ca.pem");
    writeFileSync(caFile, ca);
    /** The bare node:https loop of end to end, and N Control API triggers to `load`'s server until the receiver has them all at `p`. */
    const bareHttps = () => measured(bare.pid, N, () => bare.call("run", { url: `${origin}/ok/bare-https`, n: N, concurrency: IN_FLIGHT, client: "https" }));
    const triggered = async (pid: number, load: Worker, p: string) => {
      const before = await receiver.call<number>("count", p);
      return measured(pid, N, async () => {
        const start = performance.now();
        await load.call("trigger", { n: N, concurrency: CONNECTIONS, businessID: "4711" });
        await waitForCount(receiver, p, before + N, 120_000);
        return performance.now() - start;
      });
    };
    await bare.call("setup", { ca, connections: CONNECTIONS });
    const common = ["--port", "0", "--conformance", "--allow-private-webhooks", "--webhook-ca", caFile];
    // The ceiling of end to end: what a process that stores nothing makes of the same triggers.
    if (arms.includes("relay")) {
      const relay = startWorker("relay.ts");
      const load = startWorker("load.ts");
      try {
        await load.call("use", { server: await relay.call<string>("start", { ca, target: `${origin}/ok/relay`, connections: IN_FLIGHT }) });
        const rounds = await alternated(bareHttps, () => triggered(relay.pid, load, "/ok/relay"));
        results.push(report(`end to end's ceiling: ${N} Control API triggers (${CONNECTIONS} in flight) → a relay that stores nothing → receiver, ${IN_FLIGHT} in flight`, rounds.engine, rounds.bare, "bare node:https POST loop", "relay", null));
      } finally {
        load.kill();
        relay.kill();
      }
    }
    for (const store of stores) {
      if (store === "postgres" && !postgresBinDir()) {
        results.push({ name: "PostgreSQL", value: "skipped: PostgreSQL is not installed (scripts/install-system-deps.sh)" });
        continue;
      }
      pg ??= store === "postgres" ? await startTestPostgres() : undefined;
      const storeArgs = async (name: string) => (store === "postgres" ? ["--database-url", await pg!.createDatabase(name)] : []);
      const label = store === "postgres" ? "PostgreSQL" : "embedded store";

      /**
       * Sustained (virtual clock: the queued attempts wait for the advance): `events` triggers, each to
       * every one of the webhooks at `urls` (N attempts in all), against N bare POSTs over `bareUrls`.
       */
      const sustained = async (arm: string, name: string, urls: string[], bareUrls: string[], concurrency: number) => {
        const serve = await startServe([...common, "--clock", "virtual", ...(await storeArgs(arm))]);
        const load = startWorker("load.ts");
        try {
          await load.call("setup", { server: serve.url, urls, businessID: "4711", idle: IDLE_WEBHOOKS });
          const delivered = async () => (await Promise.all(urls.map((u) => receiver.call<number>("count", new URL(u).pathname)))).reduce((a, b) => a + b, 0);
          const rounds = await alternated(
            () => measured(bare.pid, N, () => bare.call("run", { urls: bareUrls, n: N, concurrency, client: "undici" })),
            async () => {
              await load.call("trigger", { n: N / urls.length, concurrency: CONNECTIONS, businessID: "4711" });
              const before = await delivered();
              const e = await measured(serve.child.pid!, N, () => load.call("advance", 0));
              const made = (await delivered()) - before;
              if (made !== N) throw new Error(`${arm} round: ${made} of ${N} delivered`);
              return e;
            },
          );
          results.push(report(name, rounds.engine, rounds.bare, bareUrls.length > 1 ? "bare undici POST loop over the same origins" : "bare undici POST loop"));
        } finally {
          load.kill();
          await serve.stop();
        }
      };
      if (arms.includes("sustained")) {
        const name = `sustained delivery, ${label}, ${N} queued attempts to one webhook, ${IN_FLIGHT} in flight`;
        await sustained("sustained", name, [`${origin}/ok/engine-${store}`], [`${origin}/ok/bare`], IN_FLIGHT);
      }
      // Spread: each event fanned out to webhooks at many origins.
      if (arms.includes("spread")) {
        const origins = await receiver.call<string[]>("origins", SPREAD_WEBHOOKS);
        const name = `sustained delivery, ${label}, ${N} queued attempts to ${SPREAD_WEBHOOKS} webhooks at ${SPREAD_WEBHOOKS} origins (${N / SPREAD_WEBHOOKS} events), ${SPREAD_IN_FLIGHT} in flight`;
        const urls = origins.map((o, i) => `${o}/ok/spread-${store}-${i}`);
        await sustained("spread", name, urls, origins.map((o) => `${o}/ok/bare-spread`), SPREAD_IN_FLIGHT);
      }

      // End to end: triggers on a real clock until the receiver has every event.
      if (arms.includes("e2e")) {
        const serve = await startServe([...common, "--clock", "real", ...(await storeArgs("e2e"))]);
        const load = startWorker("load.ts");
        try {
          const p = `/ok/e2e-${store}`;
          await load.call("setup", { server: serve.url, urls: [`${origin}${p}`], businessID: "4711", idle: IDLE_WEBHOOKS });
          const rounds = await alternated(bareHttps, () => triggered(serve.child.pid!, load, p));
          results.push(report(`end to end, ${label}, ${N} Control API triggers (${CONNECTIONS} in flight) → receiver, ${IN_FLIGHT} in flight`, rounds.engine, rounds.bare, "bare node:https POST loop"));
        } finally {
          load.kill();
          await serve.stop();
        }
      }
    }
  } finally {
    receiver.kill();
    bare.kill();
    pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
};
export default bench;
