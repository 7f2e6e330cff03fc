// `--start "COMMAND"`: launches the implementation under test with what it needs from the suite, waits
// until its control port answers, and stops it (the whole process group) at the end.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { ClockSetting } from "./clock.js";

export interface StartedImplementation {
  /** Everything it printed, for the report when it fails to start. */
  output(): string;
  /** How the command ended ("exited with code 1"), if it has: before stop(), it ended on its own. */
  ended(): string | undefined;
  stop(): Promise<void>;
}

/** The environment an implementation started by the suite gets (documented in the README). */
export function suiteEnvironment(caFile: string, smtpUrl: string, clock: ClockSetting): Record<string, string> {
  return {
    WEBHOOK_CA_FILE: caFile,
    SMTP_URL: smtpUrl,
    CONFORMANCE_CLOCK: clock.kind === "virtual" ? "virtual" : `scaled:${clock.factor}`,
  };
}

/** How the command ended ("exited with code 2", "was killed by SIGKILL"), if it has. */
function ending(child: ChildProcess): string | undefined {
  if (child.exitCode !== null) return `exited with code ${child.exitCode}`;
  if (child.signalCode !== null) return `was killed by ${child.signalCode}`;
  return undefined;
}

/** Whether an HTTP answer, any answer, comes from `url` within `timeoutMs`. */
async function answers(url: string, timeoutMs: number): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

async function waitUntilAnswering(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ended = ending(child);
    if (ended) throw new Error(`the implementation ${ended} before answering`);
    // Any answer means it listens: the preflight then says what is wrong with a 404 or an error.
    if (await answers(url, 1000)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the implementation did not answer ${url} within ${timeoutMs / 1000} s (--start-timeout)`);
}


export async function startImplementation(
  command: string,
  readyUrl: string,
  env: { caCert: string; smtpUrl: string; clock: ClockSetting },
  timeoutMs = 60_000,
): Promise<StartedImplementation> {
  // Something answering already would take the run: the command's server could not listen there (it
  // would exit, "port in use") while the other answered the readiness probe.
  if (await answers(readyUrl, 2000)) {
    throw new Error(
      `something answers ${readyUrl} already, before the command has run (a server left running on that port?): stop it, or start the implementation on a free port and give the suite that address (--control-url, --base-url, --auth-url)`,
    );
  }
  const dir = await mkdtemp(path.join(tmpdir(), "partner-platform-certify-"));
  const caFile = path.join(dir, "receiver-ca.pem");
  await writeFile(caFile, env.caCert);
  const child = spawn(command, {
    shell: true,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...suiteEnvironment(caFile, env.smtpUrl, env.clock) },
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // However the suite's process ends (an uncaught error included), the implementation it started ends with it.
  const killOnExit = () => {
    try {
      if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  process.once("exit", killOnExit);
  const stop = async () => {
    process.off("exit", killOnExit);
    if (child.exitCode === null && child.pid !== undefined) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      const killer = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // already gone
        }
      }, 5000);
      await exited;
      clearTimeout(killer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilAnswering(readyUrl, child, timeoutMs);
    // An answer that came as the command ended was not its server's (one started meanwhile on that port).
    const ended = ending(child);
    if (ended) throw new Error(`the implementation ${ended} as ${readyUrl} answered`);
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}${output.trim() === "" ? ", and wrote nothing" : `; its output:\n${output.slice(-2000)}`}`);
  }
  return { output: () => output, ended: () => ending(child), stop };
}
