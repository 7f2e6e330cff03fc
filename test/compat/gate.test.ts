// The gate as CI and users run it: the package's own contract against its last release (or merge base,
// or parent commit: D60), and the command's exit codes and outputs.
import { execFile } from "node:child_process";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { prependEntry } from "../../src/cli/compat.js";
import { ciBase, formatText, runCompat, scratchDir } from "../../src/compat/index.js";
import { packageRoot } from "../../src/paths.js";

const run = promisify(execFile);
const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** Runs `npm run compat` (scripts/compat.ts) and returns its exit code and output. */
async function compat(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "scripts/compat.ts", ...args], { cwd: packageRoot });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A fork of spec/ with a change that breaks receivers (a shorter attempt timeout) and one that breaks no one. */
function fork(): string {
  const dir = scratchDir();
  scratch.push(dir);
  cpSync(path.join(packageRoot, "spec"), path.join(dir, "spec"), { recursive: true });
  const file = path.join(dir, "spec", "asyncapi.yaml");
  writeFileSync(file, readFileSync(file, "utf8").replace("attemptTimeoutSeconds: 10", "attemptTimeoutSeconds: 5"));
  const tsp = path.join(dir, "spec", "models", "businesses.tsp");
  writeFileSync(tsp, readFileSync(tsp, "utf8").replace("  @minValue(0)\n  reviewCount: int32;", "  @minValue(0)\n  reviewCount: int32;\n\n  website?: string;"));
  return dir;
}

describe("the package's own gate", () => {
  const found = ciBase(packageRoot);
  if (!found.base) console.warn(`compat gate skipped: ${found.why}`);
  it.runIf(found.base !== undefined)(`spec/ passes against the base CI picks (${found.why})`, async () => {
    const report = await runCompat({ base: found.base!, head: packageRoot });
    expect(report.passed, formatText(report)).toBe(true);
  }, 120_000);
});

describe("npm run compat / partner-platform compat", () => {
  it("exits 1 on a change the policy refuses, naming it, its class and its place in spec/", async () => {
    const { code, stdout } = await compat(["--base", "spec", "--head", fork()]);
    expect(code).toBe(1);
    expect(stdout).toContain("NOT ALLOWED (1) [breaking for receivers, servers] x-delivery.attemptTimeoutSeconds 10 → 5  (spec/asyncapi.yaml:");
    expect(stdout).toContain("(1) delivery and signature rules change only in a new major version (info.version 4.0.0 → 5.0.0");
    expect(stdout).toMatch(/\[compatible\] GET \/api\/v2\/businesses\/search 200 response `businesses\[\]\.website`: optional member added {2}\(spec\/models\/businesses\.tsp:\d+\)/);
    expect(stdout).toContain("FAILED: 1 change(s)");
  }, 120_000);

  it("writes the report as JSON and exits 0 when nothing changed", async () => {
    const { code, stdout } = await compat(["--base", "HEAD", "--json", "-"]);
    expect(code, stdout).toBe(0);
    const report = JSON.parse(stdout) as { passed: boolean; verdicts: unknown[]; base: string };
    expect(report).toMatchObject({ passed: true, base: "HEAD" });
  }, 120_000);

  it("puts a Markdown entry first in a changelog", async () => {
    const dir = fork();
    const changelog = path.join(dir, "CHANGELOG.md");
    writeFileSync(changelog, "# Changelog\n\nintro\n\n## 4.0.0\n\n- First version.\n");
    const { code } = await compat(["--base", "spec", "--head", dir, "--changelog", changelog]);
    expect(code).toBe(1);
    const text = readFileSync(changelog, "utf8");
    expect(text.indexOf("## 5.0.0")).toBeLessThan(text.indexOf("## 4.0.0"));
    expect(text).toContain("### Breaking for event receivers\n\n- x-delivery.attemptTimeoutSeconds 10 → 5");
    expect(text).toContain("- First version.");
  }, 120_000);

  it("exits 2 with TypeSpec's diagnostic, file and line, when a contract does not compile", async () => {
    const dir = fork();
    const tsp = path.join(dir, "spec", "models", "businesses.tsp");
    writeFileSync(tsp, readFileSync(tsp, "utf8").replace("reviewCount: int32;", "reviewCount: NoSuchType;"));
    const { code, stdout, stderr } = await compat(["--base", "spec", "--head", dir, "--no-cache"]);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    // One line: the first diagnostics, each with its place in spec/.
    expect(stderr).toMatch(/^partner-platform: compat: \S*spec\/main\.tsp does not compile: spec\/models\/businesses\.tsp:\d+:\d+ - error invalid-ref: Unknown identifier NoSuchType(; [^\n]*)?\n$/);
  }, 120_000);

  it("is the compat command of the partner-platform CLI too", async () => {
    const result = await run(process.execPath, ["--import", "tsx", "src/cli/main.ts", "compat", "--base", "no-such-revision"], { cwd: packageRoot }).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect("code" in result ? result.code : 0).toBe(2);
    expect(result.stderr).toMatch(/^partner-platform: compat: --base no-such-revision: neither a directory nor a git revision of .*\n$/);
  }, 60_000);

  it("replaces an entry with the same heading instead of adding a second", () => {
    const once = prependEntry("", "## 4.1.0\n\n- a\n");
    const twice = prependEntry(once, "## 4.1.0\n\n- b\n");
    expect(twice.match(/## 4\.1\.0/g)).toHaveLength(1);
    expect(twice).toContain("- b");
  });

  it("replaces an unreleased entry that named another version, and keeps released ones", () => {
    const released = prependEntry("", "## 4.0.0\n\n- first\n");
    const unreleased = prependEntry(released, "## 4.0.1\n\nNot released yet: info.version is 4.0.0; these changes need 4.0.1.\n\n- a\n");
    const next = prependEntry(unreleased, "## 4.1.0\n\nNot released yet: info.version is 4.0.0; these changes need 4.1.0.\n\n- a\n- b\n");
    expect(next.match(/^## .*$/gm)).toEqual(["## 4.1.0", "## 4.0.0"]);
  });

  it.each([
    [["--base", "no-such-revision"], /^partner-platform: compat: --base no-such-revision: neither a directory nor a git revision of .*\n$/],
    [["--base", "HEAD", "--head", "/"], /^partner-platform: compat: \/: no main.tsp there or in its spec\/ folder\n$/],
    [["--base", "HEAD", "--today", "tomorrow"], /^partner-platform: option '--today <date>' argument 'tomorrow' is invalid\. must be a date YYYY-MM-DD \(run with --help for usage\)\n$/],
    [[], /^partner-platform: required option '--base <revision\|dir\|auto>' not specified \(run with --help for usage\)\n$/],
  ])("refuses %j with one line and exit 2", async (args, message) => {
    const { code, stderr } = await compat(args);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
  }, 60_000);
});
