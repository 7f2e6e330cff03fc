// `partner-platform serve` at start (D34): bad flags are refused naming the flag, before anything opens;
// a good start prints where it listens and, on the default config, the demo clients (D34).
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../src/paths.js";
import { loadConfig } from "../../src/server/index.js";

const cli = path.join(packageRoot, "src/cli/main.ts");
const cases = JSON.parse(readFileSync(path.join(import.meta.dirname, "data/serve-flag-cases.json"), "utf8")) as {
  refused: { args: string[]; flag: string; says: string }[];
};
// The variables serve reads, set in the surrounding shell, must not decide a case.
const { DATABASE_URL: _db, CONFORMANCE_CLOCK: _clock, TRUST_PROXY: _proxy, ...env } = process.env;

describe("serve refuses bad configuration at start", () => {
  it.each(cases.refused.map((c) => [c.args.join(" "), c] as const))("%s", async (_name, c) => {
    const args = c.args.map((a) => a.replace("{notPem}", path.join(packageRoot, "package.json")).replace("{notDb}", path.join(packageRoot, "spec")));
    const run = promisify(execFile)(process.execPath, ["--import", "tsx", cli, "serve", "--port", "0", ...args], { env });
    const failure = (await run.then(() => undefined, (e: unknown) => e)) as { code: number; stderr: string } | undefined;
    expect(failure?.code).toBe(2);
    const first = failure!.stderr.split("\n")[0]!;
    expect(first).toContain(c.flag);
    expect(first).toContain(c.says);
  });
});

/** Starts `serve` with `args`; `ready` resolves once it has printed where it listens (its base URL). */
function startServe(args: string[], extraEnv: Record<string, string> = {}) {
  const child = spawn(process.execPath, ["--import", "tsx", cli, "serve", "--port", "0", ...args], { cwd: packageRoot, env: { ...env, ...extraEnv } });
  const output = { out: "", log: "" };
  child.stdout.setEncoding("utf8").on("data", (s: string) => (output.out += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (output.log += s));
  const ready = new Promise<string>((resolve, reject) => {
    child.stdout.on("data", () => {
      const url = /reference server on (http:\/\/\S+)/.exec(output.out)?.[1];
      if (url && output.out.includes("auth_url")) resolve(url);
    });
    child.once("exit", (code) => reject(new Error(`serve exited with ${code}: ${output.out}${output.log}`)));
  });
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGINT");
    if (child.exitCode === null) await once(child, "exit");
  };
  return { child, output, ready, stop };
}

describe("serve at start", () => {
  it("names the demo clients in --help", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", cli, "serve", "--help"], { env });
    for (const c of loadConfig().clients) expect(stdout).toContain(`${c.clientId} / ${c.clientSecret}`);
    expect(stdout).toContain("--log-level <level>");
  });

  it("prints its base URL and, on the default config, the demo clients", async () => {
    const serve = startServe(["--log-level", "silent"]);
    try {
      // The start lines are one write: the demo clients come with the base URL.
      await serve.ready;
      const out = serve.output.out;
      expect(out).toMatch(/API \(base_url\) and token endpoint \(auth_url\): http:\/\/127\.0\.0\.1:\d+/);
      for (const c of loadConfig().clients) expect(out).toContain(`${c.clientId} / ${c.clientSecret}`);
    } finally {
      await serve.stop();
    }
  });

  it.each([
    ["--trust-proxy 127.0.0.1", ["--trust-proxy", "127.0.0.1"], {}],
    ["TRUST_PROXY=127.0.0.1", [], { TRUST_PROXY: "127.0.0.1" }],
  ])("with %s, takes the client's address from X-Forwarded-For (the log's remoteAddress, D30)", async (_name, args, extra) => {
    const serve = startServe(["--log-level", "info", ...args], extra);
    try {
      const url = await serve.ready;
      await fetch(`${url}/api/v2/businesses/search?category_id=1000123&zip=10001`, { headers: { "x-forwarded-for": "203.0.113.9" } });
      await serve.stop();
      const log = serve.output.log;
      const lines = log.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { req?: { remoteAddress?: string } });
      expect(lines.find((l) => l.req)?.req?.remoteAddress, log).toBe("203.0.113.9");
    } finally {
      await serve.stop();
    }
  });

  it("refuses a --data-dir another running serve uses, and frees it when that one stops", { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "serve-lock-"));
    const first = startServe(["--log-level", "silent", "--data-dir", path.join(dir, "data")]);
    try {
      await first.ready;
      const second = await promisify(execFile)(process.execPath, ["--import", "tsx", cli, "serve", "--port", "0", "--data-dir", path.join(dir, "data")], { env }).then(
        () => undefined,
        (e: unknown) => e as { code: number; stderr: string },
      );
      expect(second?.code).toBe(2);
      expect(second!.stderr.split("\n")[0]).toMatch(/--data-dir.*is in use by another serve \(pid \d+ on this host/);
      await first.stop();
      expect(existsSync(path.join(dir, "data", "partner-platform-serve.lock"))).toBe(false);
    } finally {
      await first.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
