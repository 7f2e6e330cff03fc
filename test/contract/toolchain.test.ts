import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { diffGenerated, readGenerated } from "../../scripts/generate.js";
import { packageRoot } from "../../src/paths.js";

const run = promisify(execFile);
const bin = (name: string) => path.join(packageRoot, "node_modules", ".bin", name);

describe("contract toolchain", () => {
  it.each(["generated/openapi/openapi.yaml", "generated/openapi/openapi-3.0.yaml", "generated/control/openapi.yaml"])("%s passes redocly lint with no errors or warnings", async (file) => {
    const { stdout, stderr } = await run(bin("redocly"), ["lint", file, "--format=stylish"], {
      cwd: packageRoot,
    });
    // redocly exits non-zero on errors (execFile rejects); warnings are printed as "N warning(s)".
    const output = `${stdout}${stderr}`;
    expect(output).toContain("Your API description is valid");
    expect(output).not.toMatch(/\d+ warnings?/);
  });

  it("the TypeSpec sources are tsp-format clean", async () => {
    await expect(run(bin("tsp"), ["format", "--check", "spec/**/*.tsp"], { cwd: packageRoot })).resolves.toBeDefined();
  });

  it("the drift check shows the diff of a changed generated file", async () => {
    const rel = "json-schema/ZipCode.json";
    const expected = await readGenerated();
    expected.set(rel, expected.get(rel)!.replace("^[0-9]{5}$", "^[0-9]{6}$"));
    const diff = await diffGenerated(expected);
    expect(diff).toContain(`-  "pattern": "^[0-9]{5}$"`);
    expect(diff).toContain(`+  "pattern": "^[0-9]{6}$"`);
  });

  it("the drift check finds nothing when generated/ is unchanged", async () => {
    expect(await diffGenerated(await readGenerated())).toBe("");
  });
});
