// Deprecation end to end (issue 12, item 4; policy D60): `#deprecated` on an operation and on a response
// member in TypeSpec becomes `deprecated: true` in the generated OpenAPI, a `@deprecated` tag on the
// generated TypeScript type, a "Deprecated" mark in the reference docs, and a deprecation (with its
// removal date) in the compatibility gate's report.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { buildGenerated } from "../../scripts/generate.js";
import { hasChromium, launchChromium, refuseNetwork } from "../../scripts/chromium.js";
import { gate, loadContract, scratchDir } from "../../src/compat/index.js";
import { packageRoot } from "../../src/paths.js";

type Json = Record<string, any>;
const REMOVAL = "Removal not before 2099-01-01.";
let dir: string;
let files: Map<string, string>;
let openapi: Json;

beforeAll(async () => {
  dir = scratchDir();
  const spec = path.join(dir, "spec");
  cpSync(path.join(packageRoot, "spec"), spec, { recursive: true });
  const file = path.join(spec, "models/businesses.tsp");
  const text = readFileSync(file, "utf8")
    .replace("  @minValue(0)\n  reviewCount: int32;", `  #deprecated "Use the review summary. ${REMOVAL}"\n  @minValue(0)\n  reviewCount: int32;`)
    .replace('@summary("Search businesses")', `#deprecated "Use /api/v3/businesses/search. ${REMOVAL}"\n@summary("Search businesses")`);
  expect(text.match(/#deprecated/g)).toHaveLength(2);
  writeFileSync(file, text);
  // The real generator, warnings as errors, on the copy.
  files = await buildGenerated({ specDir: spec, tables: false });
  openapi = parseYaml(files.get("openapi/openapi.yaml")!) as Json;
}, 180_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a deprecated operation and member", () => {
  it("are deprecated: true in both OpenAPI documents", () => {
    const openapi30 = parseYaml(files.get("openapi/openapi-3.0.yaml")!) as Json;
    for (const doc of [openapi, openapi30]) {
      expect(doc.paths["/api/v2/businesses/search"].get.deprecated).toBe(true);
      expect(doc.components.schemas.Business.properties.reviewCount.deprecated).toBe(true);
      expect(doc.paths["/api/v4/requests"].post.deprecated).toBeUndefined();
    }
  });

  it("carry @deprecated on the generated TypeScript types", () => {
    const types = files.get("types/api.ts")!;
    // The JSDoc right above the member, and above the operation's entry.
    expect(types).toMatch(/\/\*\*[^/]*@deprecated[^/]*\*\/\s*reviewCount\?*: number;/);
    expect(types).toMatch(/\/\*\*(?:(?!\*\/)[\s\S])*@deprecated(?:(?!\*\/)[\s\S])*\*\/\s*get: operations\["searchBusinesses"\]/);
    expect(types.match(/@deprecated/g)).toHaveLength(2);
  });

  it("are reported by the gate as deprecations with their removal date, and allowed", async () => {
    const report = gate(await loadContract(path.join(packageRoot, "spec")), await loadContract(path.join(dir, "spec")), "spec", "2026-06-01");
    expect(report.verdicts.map((v) => [v.kind, v.deprecation, v.allowed, v.note]).sort()).toEqual([
      ["operation-deprecated", true, true, "removal not before 2099-01-01"],
      ["property-deprecated", true, true, "removal not before 2099-01-01"],
    ]);
    expect(report.passed).toBe(true);
  });

  it.runIf(hasChromium())("are marked Deprecated in the reference docs", async () => {
    const docs = path.join(dir, "docs");
    mkdirSync(docs, { recursive: true });
    writeFileSync(path.join(docs, "openapi.yaml"), files.get("openapi/openapi.yaml")!);
    execFileSync(path.join(packageRoot, "node_modules/.bin/redocly"), ["build-docs", "openapi.yaml", "--inlineBundle", "-o", "index.html"], {
      cwd: docs,
      stdio: "pipe",
      env: { ...process.env, REDOCLY_TELEMETRY: "off" },
    });
    const context = await launchChromium();
    try {
      await refuseNetwork(context);
      const page = await context.newPage();
      await page.clock.install();
      const op = openapi.paths["/api/v2/businesses/search"].get as Json;
      const id = `${(op.tags[0] as string).toLowerCase()}/${(op.operationId as string).toLowerCase()}`;
      await page.goto(`${pathToFileURL(path.join(docs, "index.html")).href}#/${id}`);
      const section = page.locator(`[id="${id}"]`);
      await section.getByRole("heading", { name: op.summary as string }).waitFor();
      const text = await section.innerText();
      // One mark for the operation, one for the member in its 200 response schema.
      expect(text.match(/deprecated/gi)?.length ?? 0, text.slice(0, 2000)).toBeGreaterThanOrEqual(2);
      const other = await page.locator("body").innerText();
      expect(other).toMatch(/deprecated/i);
    } finally {
      await context.close();
    }
  }, 120_000);
});
