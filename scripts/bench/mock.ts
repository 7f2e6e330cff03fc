import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import type { Bench } from "../bench.js";
import { freePort } from "../free-port.js";

const root = path.resolve(import.meta.dirname, "../..");


/** Spawn of `partner-platform mock` to its first successful answer. */
async function startOnce(): Promise<number> {
  const port = await freePort();
  const start = performance.now();
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "mock", "--port", String(port)], { cwd: root, stdio: "ignore" });
  try {
    for (;;) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/oauth2/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "grant_type=client_credentials&client_id=a&client_secret=b",
        });
        await res.body?.cancel();
        if (res.ok) return (performance.now() - start) / 1000;
      } catch {
        // not up yet
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  } finally {
    child.kill("SIGINT");
    await once(child, "exit");
  }
}

const bench: Bench = async () => {
  const times: number[] = [];
  for (let i = 0; i < 3; i++) times.push(await startOnce());
  return [{ name: "mock start-up to first answer (best of 3)", value: `${Math.min(...times).toFixed(2)} s (runs: ${times.map((t) => t.toFixed(2)).join(", ")})` }];
};
export default bench;
