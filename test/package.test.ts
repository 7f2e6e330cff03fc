// The package as a user installs it: the built CLI binary and the `exports` entry point.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../src/paths.js";

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8")) as {
  version: string;
  bin: Record<string, string>;
};

describe("built package", () => {
  beforeAll(async () => {
    await run(path.join(packageRoot, "node_modules/.bin/tsc"), ["-p", "tsconfig.build.json"], { cwd: packageRoot });
  });

  it("exposes the partner-platform binary", async () => {
    const { stdout } = await run(process.execPath, [path.join(packageRoot, pkg.bin["partner-platform"]!), "--version"]);
    expect(stdout.trim()).toBe(pkg.version);
  });

  it("exports the library entry point (the built file package.json names)", async () => {
    const entry = (pkg as unknown as { exports: { ".": { default: string } } }).exports["."].default;
    const lib = (await import(path.join(packageRoot, entry))) as Record<string, unknown>;
    for (const name of ["createPartnerClient", "parseEvent", "signPayload", "verifySignature", "loadDeliveryRules"]) {
      expect(typeof lib[name], name).toBe("function");
    }
  });

  it("answers an unknown command with one line and a non-zero exit", async () => {
    const result = await run(process.execPath, [path.join(packageRoot, pkg.bin["partner-platform"]!), "frobnicate"]).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(result).toMatchObject({ code: 2 });
    expect((result as { stderr: string }).stderr.split("\n")[0]).toMatch(/unknown command 'frobnicate'/);
  });
});
