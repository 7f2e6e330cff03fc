// A backlog of 100k due attempts on a scaled clock (0.001: a 1 min retry wait takes 60 ms), in the
// processes of the delivery bench: `partner-platform serve` (embedded store) delivering to W webhooks
// of one receiver process, every third attempt failing (retried 60 ms later; never 5 failures in a row,
// so no webhook is disabled). Prints the drain rate, the server's peak RSS, and how late retries came
// against backlog ÷ throughput, the lateness a fair queue must allow. The rate it is held to, the
// sustained rate of the same workload, is measured first in the same server: the same webhooks and
// failures at a tenth of the backlog (BENCH_BACKLOG_ROUNDS counted after BENCH_BACKLOG_WARMUP), so a
// cost that grows with the backlog shows as a ratio below 1.
// BENCH_BACKLOG_WEBHOOKS (1000) × BENCH_BACKLOG_EVENTS (100) first attempts; BENCH_BACKLOG_ORIGINS (1)
// spreads the webhooks over that many origins of the receiver (each a pool of connections of its own);
// BENCH_BACKLOG_FAILING=none makes every attempt succeed (what the failures and their retries cost);
// BENCH_SERVE_ARGS adds flags.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Bench, BenchResult } from "../bench.js";
import { cpuMicros, median, percentile, range, startServe, startWorker, watchRss } from "./lib/procs.js";

const WEBHOOKS = Number(process.env.BENCH_BACKLOG_WEBHOOKS ?? 1000);
const EVENTS = Number(process.env.BENCH_BACKLOG_EVENTS ?? 100);
const ORIGINS = Number(process.env.BENCH_BACKLOG_ORIGINS ?? 1);
const ROUNDS = Number(process.env.BENCH_BACKLOG_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_BACKLOG_WARMUP ?? 2);
/** How the webhooks are spread, for the results' names. */
const AT_ORIGINS = ORIGINS > 1 ? ` at ${ORIGINS} origins` : "";
const FAILING = process.env.BENCH_BACKLOG_FAILING === "none" ? "none" : "every third";
const SCALE = 0.001;
const FIRST_WAIT_MS = 60_000 * SCALE;
/** No attempt for this long once every first attempt has been made: a drain is over (retries come 60 ms after their failure). */
const QUIET_MS = 500;

const bench: Bench = async () => {
  const results: BenchResult[] = [];
  const receiver = startWorker("receiver.ts");
  const dir = mkdtempSync(path.join(tmpdir(), "bench-backlog-"));
  const load = startWorker("load.ts");
  let serve: Awaited<ReturnType<typeof startServe>> | undefined;
  try {
    const { origin, ca } = await receiver.call<{ origin: string; ca: string }>("info");
    writeFileSync(path.join(dir, "ca.pem"), ca);
    const extra = (process.env.BENCH_SERVE_ARGS ?? "").split(" ").filter(Boolean);
    // The receiver's CA trusted as a deployment trusts its receivers' (the default trust, given the CA by
    // NODE_EXTRA_CA_CERTS), not by --webhook-ca: the TLS path most servers take.
    serve = await startServe(["--port", "0", "--conformance", "--clock", `scaled:${SCALE}`, ...extra], { NODE_EXTRA_CA_CERTS: path.join(dir, "ca.pem") });
    const pid = serve.child.pid!;
    const idleMb = watchRss(pid).stop();
    const origins = [origin, ...(ORIGINS > 1 ? await receiver.call<string[]>("origins", ORIGINS - 1) : [])];
    const urls = Array.from({ length: WEBHOOKS }, (_, i) => `${origins[i % origins.length]}/${FAILING === "none" ? "ok" : "fail-third"}/${i}`);
    await load.call("setup", { server: serve.url, urls, businessID: "4711" });
    // Tracked from the first round: a retry succeeds only where the receiver knows it for one.
    await receiver.call("track", true);

    /** Triggers `events` events to every webhook and waits until their attempts and retries are made: attempts/s from the first trigger to the last attempt. */
    const drain = async (events: number, progress?: (made: number, seconds: number) => void) => {
      const before = await receiver.call<number>("total");
      const cpu = cpuMicros(pid);
      const start = performance.timeOrigin + performance.now();
      const triggerMs = await load.call<number>("trigger", { n: events, concurrency: 4, businessID: "4711" });
      const deadline = start + 600_000;
      let made = 0;
      let changed = performance.now();
      let reported = performance.now();
      for (;;) {
        const counted = (await receiver.call<number>("total")) - before;
        if (counted !== made) [made, changed] = [counted, performance.now()];
        else if (made >= events * WEBHOOKS && performance.now() - changed >= QUIET_MS) break;
        if (performance.timeOrigin + performance.now() > deadline) throw new Error(`backlog: ${made} attempts of ${events * WEBHOOKS} first attempts and their retries after 600 s`);
        if (progress && performance.now() - reported > 10_000) {
          reported = performance.now();
          progress(made, (performance.timeOrigin + reported - start) / 1000);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      const seconds = ((await receiver.call<number>("last")) - start) / 1000;
      return { made, seconds, rate: made / seconds, cpuUs: (cpuMicros(pid) - cpu) / made, triggerMs };
    };

    const tenth = Math.max(1, Math.round(EVENTS / 10));
    const rounds = [];
    for (let i = 0; i < WARMUP + ROUNDS; i++) {
      const round = await drain(tenth);
      if (i >= WARMUP) rounds.push(round);
    }
    results.push({
      name: `the same workload at a tenth of the backlog (${WEBHOOKS} webhooks${AT_ORIGINS} × ${tenth} events, ${FAILING} failing), ${ROUNDS} rounds after ${WARMUP}`,
      value: `${range(rounds.map((r) => r.rate))}/s, ${range(rounds.map((r) => r.cpuUs))} µs CPU/attempt`,
    });

    await receiver.call("track", true);
    const total = WEBHOOKS * EVENTS;
    const rss = watchRss(pid, 200);
    const backlog = await drain(EVENTS, (made, seconds) =>
      process.stderr.write(`backlog: ${made} attempts after ${seconds.toFixed(0)} s, serve RSS ${Math.round(rss.peak())} MB peak\n`),
    );
    const peak = rss.stop();
    const ratios = rounds.map((r) => backlog.rate / r.rate);
    results.push({
      name: `backlog of ${total} first attempts (${WEBHOOKS} webhooks${AT_ORIGINS} × ${EVENTS} events, queued in ${(backlog.triggerMs / 1000).toFixed(1)} s), ${FAILING} failing, scale ${SCALE}`,
      value:
        `${backlog.made} attempts in ${backlog.seconds.toFixed(1)} s = ${Math.round(backlog.rate)}/s, ${range(ratios, 2)}x the tenth's rounds, ` +
        `${Math.round(backlog.cpuUs)} µs CPU/attempt; serve RSS idle ${Math.round(idleMb)} MB, peak ${Math.round(peak)} MB`,
      target: `the sustained rate (the tenth's ${Math.round(median(rounds.map((r) => r.rate)))}/s), RSS ≤ 400 MB`,
    });
    const gaps = await receiver.call<Record<string, number[]>>("gaps");
    const lateness = (gaps["2"] ?? []).map((g) => g - FIRST_WAIT_MS);
    results.push({
      name: `retry lateness in that backlog (${lateness.length} retries due ${FIRST_WAIT_MS} ms after their failed attempt)`,
      value: lateness.length
        ? `p50 ${(percentile(lateness, 50) / 1000).toFixed(1)} s, p99 ${(percentile(lateness, 99) / 1000).toFixed(1)} s, max ${(Math.max(...lateness) / 1000).toFixed(1)} s real; backlog ÷ throughput = ${(total / backlog.rate).toFixed(1)} s`
        : "no retry arrived",
      target: "≤ backlog ÷ throughput",
    });
  } finally {
    await serve?.stop();
    load.kill();
    receiver.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
};
export default bench;
