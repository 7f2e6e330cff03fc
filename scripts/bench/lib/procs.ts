// Processes of the delivery benchmarks: each arm runs in a process of its own (receiver, reference
// server, load generator, bare loop), driven over IPC, and measured from outside through /proc.
import { fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { once } from "node:events";

const root = path.resolve(import.meta.dirname, "../../..");
const TICKS_PER_SECOND = 100; // getconf CLK_TCK on Linux

/** CPU time (user + system) of a process so far, in microseconds. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After the name: state is field 3; utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 here.
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS_PER_SECOND;
}

/** CPU time used by the whole machine so far (every process, every core), and the time its cores were there for, in microseconds. */
export function machineCpuMicros(): { busy: number; total: number } {
  // The first line of /proc/stat: user nice system idle iowait irq softirq steal, in ticks summed over cores.
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number) as number[];
  const busy = user! + nice! + system! + irq! + softirq! + steal!;
  return { busy: (busy * 1e6) / TICKS_PER_SECOND, total: ((busy + idle! + iowait!) * 1e6) / TICKS_PER_SECOND };
}

/** Resident memory now, in MB. */
export function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) / 1024 : NaN;
}

/** Samples a process's RSS every `everyMs` until stopped; returns the peak seen. */
export function watchRss(pid: number, everyMs = 100): { stop(): number; peak(): number } {
  let peak = 0;
  const sample = () => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {
      // exited
    }
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return {
    peak: () => peak,
    stop() {
      clearInterval(timer);
      sample();
      return peak;
    },
  };
}

/** A child process of scripts/bench/lib answering `call(cmd, args)` over IPC. */
export interface Worker {
  pid: number;
  call<T>(cmd: string, args?: unknown): Promise<T>;
  kill(): void;
}

export function startWorker(file: string): Worker {
  const child = fork(path.join(import.meta.dirname, file), [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  let next = 0;
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  child.on("message", (m: { id: number; result?: unknown; error?: string }) => {
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error !== undefined) w?.reject(new Error(`${file}: ${m.error}`));
    else w?.resolve(m.result);
  });
  child.on("exit", (code) => {
    for (const w of waiting.values()) w.reject(new Error(`${file} exited with ${code}`));
    waiting.clear();
  });
  return {
    pid: child.pid!,
    call: (cmd, args) =>
      new Promise((resolve, reject) => {
        const id = next++;
        waiting.set(id, { resolve, reject });
        child.send({ id, cmd, args });
      }),
    kill: () => child.kill("SIGKILL"),
  };
}

/** In a worker: answers calls with `handlers`. */
export function serveCalls(handlers: Record<string, (args: any) => unknown>): void {
  process.on("message", async (m: { id: number; cmd: string; args: unknown }) => {
    try {
      const handler = handlers[m.cmd];
      if (!handler) throw new Error(`no command ${m.cmd}`);
      process.send!({ id: m.id, result: await handler(m.args) });
    } catch (error) {
      process.send!({ id: m.id, error: (error as Error).message });
    }
  });
  process.on("disconnect", () => process.exit(0));
}

/**
 * How `serve` is started: from the checkout's sources through tsx (the default: no build step), or with
 * BENCH_SERVE_FROM=dist from what `npm run build` wrote, the code an installed package runs.
 */
function serveCommand(): string[] {
  const from = process.env.BENCH_SERVE_FROM ?? "checkout";
  if (from === "checkout") return ["--import", "tsx", path.join(root, "src/cli/main.ts")];
  if (from !== "dist") throw new Error(`BENCH_SERVE_FROM is checkout or dist, not ${JSON.stringify(from)}`);
  const built = path.join(root, "dist/src/cli/main.js");
  if (!existsSync(built)) throw new Error(`BENCH_SERVE_FROM=dist runs ${path.relative(root, built)}: run \`npm run build\` first`);
  return [built];
}

/** `partner-platform serve` as a user runs it (the CLI, in a process of its own); resolves once it listens. */
export async function startServe(args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string; stderr(): string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [...(process.env.BENCH_SERVE_NODE_ARGS?.split(" ").filter(Boolean) ?? []), ...serveCommand(), "serve", ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const match = /on (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once("exit", (code) => reject(new Error(`serve exited with ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`)));
  });
  return {
    child,
    url,
    stderr: () => err,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

/** Runs `task` `n` times with `concurrency` calls in flight; returns the real ms it took. */
export async function timedInParallel(n: number, concurrency: number, task: () => Promise<unknown>): Promise<number> {
  let left = n;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left > 0) {
        left--;
        await task();
      }
    }),
  );
  return performance.now() - start;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** "median (min–max)" of a series. */
export function range(values: number[], digits = 0): string {
  const f = (v: number) => v.toFixed(digits);
  return `${f(median(values))} (${f(Math.min(...values))}–${f(Math.max(...values))})`;
}
