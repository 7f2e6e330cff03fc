// The README's "Watch a delivery" runs as written: its first block (a certificate, and the node:http
// example receiver on HTTPS with it), the `serve` command of its second step, and its third block (a
// token, a webhook, a service request), each with bash in a folder of its own that sees the checkout's
// `examples/` and `node_modules/`; only `npx partner-platform` is replaced by this checkout's bin, as in
// readme-recipes.test.ts. The receiver must then print the lead.created of business 4711.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/paths.js";
import { expectFree } from "../ports.js";

const hasOpenssl = (() => {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
if (!hasOpenssl && process.env.CI) throw new Error("openssl is missing: scripts/install-system-deps.sh installs it");

async function section(): Promise<{ receiver: string; serve: string; requests: string }> {
  const readme = await readFile(path.join(packageRoot, "README.md"), "utf8");
  const start = readme.indexOf("\n### Watch a delivery\n");
  expect(start, 'README section "Watch a delivery"').toBeGreaterThan(0);
  const text = readme.slice(start, readme.indexOf("\n### ", start + 1));
  const blocks = [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  const serve = /`(npx partner-platform serve [^`]*)`/.exec(text)?.[1];
  expect([blocks.length, serve]).toEqual([2, expect.any(String)]);
  return { receiver: blocks[0]!, serve: serve!, requests: blocks[1]! };
}

const program = `node ${path.join(packageRoot, "bin/partner-platform.js")}`;
const running: ChildProcess[] = [];
afterAll(() => {
  for (const child of running) if (child.exitCode === null) process.kill(-child.pid!, "SIGTERM");
});

/** Runs a block with bash in its own process group; `output` holds stdout and stderr together. */
function bash(script: string, cwd: string) {
  // The folder has no tsconfig.json: tsx takes the checkout's, whose paths map @partner-platform/sdk to its sources.
  const env = { ...process.env, TSX_TSCONFIG_PATH: path.join(packageRoot, "tsconfig.json") };
  const child = spawn("bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", script.replaceAll("npx partner-platform ", `${program} `)], { cwd, env, detached: true });
  running.push(child);
  const run = { child, output: "" };
  child.stdout!.setEncoding("utf8").on("data", (s: string) => (run.output += s));
  child.stderr!.setEncoding("utf8").on("data", (s: string) => (run.output += s));
  return run;
}

async function until(what: string, done: () => boolean, run: { child: ChildProcess; output: string }): Promise<void> {
  for (let waited = 0; !done(); waited += 100) {
    if (run.child.exitCode !== null || waited > 60_000) throw new Error(`${what}: not seen; its output:\n${run.output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("README: Watch a delivery", () => {
  it.skipIf(!hasOpenssl)("delivers business 4711's lead.created to the example receiver, as written", { timeout: 120_000 }, async () => {
    const blocks = await section();
    for (const port of [4020, 8443]) await expectFree(port);
    const cwd = await mkdtemp(path.join(tmpdir(), "watch-delivery-"));
    try {
      for (const name of ["examples", "node_modules"]) await symlink(path.join(packageRoot, name), path.join(cwd, name));
      const receiver = bash(blocks.receiver, cwd);
      await until("the receiver listening", () => receiver.output.includes("listening on https://127.0.0.1:8443/"), receiver);
      const serve = bash(blocks.serve, cwd);
      await until("serve listening", () => serve.output.includes("reference server on http://127.0.0.1:4020"), serve);
      const requests = bash(blocks.requests, cwd);
      const [code] = await new Promise<[number | null]>((resolve) => requests.child.once("exit", (c) => resolve([c])));
      expect(code, requests.output).toBe(0);
      expect(requests.output).toContain('"businessID":"4711","status":"enabled"');
      await until("received lead.created", () => /^received lead\.created evt_\w+$/m.test(receiver.output), receiver);
    } finally {
      for (const child of running.splice(0)) if (child.exitCode === null) process.kill(-child.pid!, "SIGTERM");
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
