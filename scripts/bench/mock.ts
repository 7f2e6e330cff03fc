// Mock start-up: spawn of `npm start`'s command to its first successful HTTP answer, beside Prism's own
// binary started on the same document (what the wrapper costs: tsx, the staleness hash, the port probe).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createRequire } from "node:module";
import type { Bench } from "../bench.js";
import { freePort } from "../free-port.js";
import { startCommand } from "../start-command.js";
import { specPaths } from "../../src/paths.js";

const prismCli = createRequire(import.meta.url).resolve("@stoplight/prism-cli/dist/index.js");

/** Seconds from spawn to the first 200 from the token endpoint, polling every 10 ms. */
async function startOnce(command: (port: number) => { file: string; args: string[]; cwd: string }): Promise<number> {
  const port = await freePort();
  const { file, args, cwd } = command(port);
  const start = performance.now();
  const child = spawn(file, args, { cwd, stdio: "ignore" });
  const exited = once(child, "exit");
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${file} ${args.join(" ")} exited with ${child.exitCode} before answering`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/oauth2/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "grant_type=client_credentials&client_id=a&client_secret=b",
        });
        await res.body?.cancel();
        if (res.ok) return (performance.now() - start) / 1000;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    child.kill("SIGINT");
    await exited;
  }
}

async function best(runs: number, command: Parameters<typeof startOnce>[0]): Promise<{ best: number; all: number[] }> {
  const all: number[] = [];
  for (let i = 0; i < runs; i++) all.push(await startOnce(command));
  return { best: Math.min(...all), all };
}

const bench: Bench = async () => {
  const mock = await best(3, (port) => startCommand("--port", String(port)));
  const prism = await best(3, (port) => ({
    file: process.execPath,
    args: [prismCli, "mock", specPaths.openapi, "--port", String(port)],
    cwd: process.cwd(),
  }));
  const runs = (r: { all: number[] }) => r.all.map((t) => t.toFixed(2)).join(", ");
  return [
    { name: "npm start (mock) to first answer, best of 3", value: `${mock.best.toFixed(2)} s (runs: ${runs(mock)})` },
    { name: "Prism binary alone to first answer, best of 3", value: `${prism.best.toFixed(2)} s (runs: ${runs(prism)})` },
    { name: "mock / Prism alone", value: `${(mock.best / prism.best).toFixed(2)}x` },
  ];
};
export default bench;
