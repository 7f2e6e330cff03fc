// Scale-out on PostgreSQL: the sustained delivery rate of 1 against 2 `partner-platform serve`
// processes sharing one database (D41's leases and liveness locks keep each attempt made once). N
// events to one webhook are queued under virtual clocks, then every server advances at once; rounds
// alternate 1 and 2 servers. BENCH_N (3000), BENCH_ROUNDS (3).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { postgresBinDir, startTestPostgres } from "../postgres.js";
import type { Bench, BenchResult } from "../bench.js";
import { cpuMicros, range, startServe, startWorker } from "./lib/procs.js";

const N = Number(process.env.BENCH_N ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const bench: Bench = async () => {
  if (!postgresBinDir()) return [{ name: "scale-out on PostgreSQL", value: "skipped: PostgreSQL is not installed" }];
  const results: BenchResult[] = [];
  const receiver = startWorker("receiver.ts");
  const dir = mkdtempSync(path.join(tmpdir(), "bench-scale-"));
  const pg = await startTestPostgres();
  const servers: Awaited<ReturnType<typeof startServe>>[] = [];
  const loads: ReturnType<typeof startWorker>[] = [];
  try {
    const { origin, ca } = await receiver.call<{ origin: string; ca: string }>("info");
    writeFileSync(path.join(dir, "ca.pem"), ca);
    const args = ["--port", "0", "--conformance", "--clock", "virtual", "--webhook-ca", path.join(dir, "ca.pem"), "--database-url", await pg.createDatabase("scale")];
    for (let i = 0; i < 2; i++) {
      servers.push(await startServe(args));
      const load = startWorker("load.ts");
      await load.call("setup", { server: servers[i]!.url, urls: i === 0 ? [`${origin}/ok/scale`] : [], businessID: "4711" });
      loads.push(load);
    }
    const rates: Record<1 | 2, number[]> = { 1: [], 2: [] };
    const cpu: Record<1 | 2, number[]> = { 1: [], 2: [] };
    for (let round = 0; round <= ROUNDS; round++) {
      for (const count of [1, 2] as const) {
        await loads[0]!.call("trigger", { n: N, concurrency: 32, businessID: "4711" });
        const before = await receiver.call<number>("count", "/ok/scale");
        const cpuBefore = servers.map((s) => cpuMicros(s.child.pid!));
        const start = performance.now();
        await Promise.all(loads.slice(0, count).map((l) => l.call("advance", 0)));
        const seconds = (performance.now() - start) / 1000;
        const delivered = (await receiver.call<number>("count", "/ok/scale")) - before;
        if (delivered !== N) throw new Error(`${count} servers: ${delivered} of ${N} delivered`);
        if (round === 0) continue;
        rates[count].push(N / seconds);
        cpu[count].push(servers.reduce((sum, s, i) => sum + cpuMicros(s.child.pid!) - cpuBefore[i]!, 0) / N);
      }
    }
    const ratio = rates[2].map((r, i) => r / rates[1][i]!);
    results.push({
      name: `scale-out, PostgreSQL, ${N} queued attempts to one webhook: 2 serve processes against 1`,
      value: `${range(ratio, 2)}x — 1 server ${range(rates[1])}/s (${range(cpu[1])} µs CPU/delivery), 2 servers ${range(rates[2])}/s (${range(cpu[2])} µs CPU/delivery, both processes)`,
    });
  } finally {
    loads.forEach((l) => l.kill());
    await Promise.all(servers.map((s) => s.stop()));
    receiver.kill();
    pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
};
export default bench;
