// The example receivers in other languages (examples/receivers/receivers.json): finding their runtime,
// building, checking their verify function against the signing vectors, and starting them on a free
// port. Shared by test/receivers/languages.test.ts and `npm run bench -- receivers`.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";

const root = path.resolve(import.meta.dirname, "..");
export const receiversDir = path.join(root, "examples/receivers");

export interface ExampleReceiver {
  id: string;
  language: string;
  framework: string;
  highlight: string;
  /** Relative to examples/receivers/; commands run in its directory. */
  source: string;
  candidates: string[];
  probe: string[];
  files?: string[];
  packages: string[];
  env?: Record<string, string>;
  build?: string[];
  start: string[];
  vectors: string[];
}

export const exampleReceivers = (
  JSON.parse(readFileSync(path.join(receiversDir, "receivers.json"), "utf8")) as { receivers: ExampleReceiver[] }
).receivers;

/** The first candidate executable whose probe succeeds, or undefined (with what is missing). */
export function findRuntime(r: ExampleReceiver): { exe?: string; missing: string } {
  const missingFiles = (r.files ?? []).filter((f) => !existsSync(f));
  const cwd = path.dirname(path.join(receiversDir, r.source));
  const exe = missingFiles.length > 0 ? undefined : r.candidates.find((c) => spawnSync(c, r.probe, { cwd, stdio: "ignore" }).status === 0);
  return { exe, missing: `${r.id}: no ${r.candidates.join(" or ")} passing \`${r.probe.join(" ")}\`${missingFiles.length ? ` (missing ${missingFiles.join(", ")})` : ""}: run scripts/install-system-deps.sh (Debian packages ${r.packages.join(", ")})` };
}

export interface Prepared {
  receiver: ExampleReceiver;
  cwd: string;
  out: string;
  fill(args: string[], port?: number): string[];
  env(port?: number): NodeJS.ProcessEnv;
  dispose(): void;
}

/** Builds the receiver (when it has a build step) into a fresh directory. Throws with the compiler's output. */
export function prepare(r: ExampleReceiver, exe: string): Prepared {
  const out = mkdtempSync(path.join(tmpdir(), `receiver-${r.id}-`));
  const cwd = path.dirname(path.join(receiversDir, r.source));
  const fill = (args: string[], port?: number) =>
    args.map((a) => a.replaceAll("{exe}", exe).replaceAll("{out}", out).replaceAll("{port}", String(port ?? "")));
  const env = (port?: number): NodeJS.ProcessEnv => ({
    ...process.env,
    ...Object.fromEntries(Object.entries(r.env ?? {}).map(([k, v]) => [k, fill([v], port)[0]!])),
  });
  const prepared: Prepared = { receiver: r, cwd, out, fill, env, dispose: () => rmSync(out, { recursive: true, force: true }) };
  if (r.build) {
    const [cmd, ...args] = fill(r.build);
    const result = spawnSync(cmd!, args, { cwd, env: env(), encoding: "utf8" });
    if (result.status !== 0) throw new Error(`${r.id}: build failed: ${result.stderr}${result.stdout}${result.error?.message ?? ""}`);
  }
  return prepared;
}

export interface VectorLine {
  id: string;
  secret: string;
  bodyBase64: string;
  header: string | null;
}

/** Feeds the vectors to the receiver's `vectors` mode and returns its verdict per vector id. */
export function runVectors(p: Prepared, vectors: VectorLine[]): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
  const input = vectors.map((v) => [v.id, b64(v.secret), v.bodyBase64, v.header === null ? "-" : b64(v.header)].join("\t")).join("\n") + "\n";
  const [cmd, ...args] = p.fill(p.receiver.vectors);
  const result = spawnSync(cmd!, args, { cwd: p.cwd, env: p.env(), input, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${p.receiver.id}: vectors mode exited ${result.status}: ${result.stderr}`);
  return Object.fromEntries(
    result.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => line.split("\t") as [string, string]),
  );
}

export interface Running {
  url: string;
  stop(): Promise<void>;
  /** What the process wrote, for a failure message. */
  output(): string;
}

/** Starts the receiver on a free port with the secret, and resolves once it accepts connections. */
export async function startReceiver(p: Prepared, secret: string, timeoutMs = 60_000): Promise<Running> {
  const port = await freePort();
  const [cmd, ...args] = p.fill(p.receiver.start, port);
  const child: ChildProcess = spawn(cmd!, args, {
    cwd: p.cwd,
    env: { ...p.env(port), WEBHOOK_SECRET: secret, PORT: String(port), HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = once(child, "exit");
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
  };
  const deadline = Date.now() + timeoutMs;
  // Poll until the port accepts a connection; the process exiting first is a failure.
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${p.receiver.id} exited with ${child.exitCode} before listening: ${output}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: "127.0.0.1", port }, () => (socket.destroy(), resolve(true)));
      socket.once("error", () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${p.receiver.id} did not listen on port ${port} within ${timeoutMs / 1000} s: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url: `http://127.0.0.1:${port}/webhooks/partner-platform`, stop, output: () => output };
}
