// Spectral's `spectral:oas` ruleset (the other linter platform teams run in CI, beside Redocly) finds
// nothing in either generated OpenAPI document: no error, warning, info or hint (issue 12, item 6).
import { readFileSync } from "node:fs";
import path from "node:path";
import spectralCore from "@stoplight/spectral-core";
import spectralParsers from "@stoplight/spectral-parsers";
import { oas } from "@stoplight/spectral-rulesets";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../src/paths.js";

// The packages are CommonJS: their named exports reach ESM through the default export.
const { Spectral, Document } = spectralCore;
const { Yaml } = spectralParsers;

describe("Spectral spectral:oas", () => {
  it.each(["generated/openapi/openapi.yaml", "generated/openapi/openapi-3.0.yaml"])("%s has no findings", async (file) => {
    const spectral = new Spectral();
    // What `extends: spectral:oas` in a .spectral.yaml gives: the ruleset's recommended rules.
    spectral.setRuleset({ extends: [[oas as never, "recommended"]] });
    const source = readFileSync(path.join(packageRoot, file), "utf8");
    const results = await spectral.run(new Document(source, Yaml, file));
    const findings = results.map((r) => `${["error", "warning", "info", "hint"][r.severity]} ${r.code} at ${r.path.join(".")}: ${r.message}`);
    expect(findings).toEqual([]);
  }, 60_000);

  it("reports an invalid media example (so the clean result above is not vacuous)", async () => {
    const spectral = new Spectral();
    spectral.setRuleset({ extends: [[oas as never, "recommended"]] });
    const doc = readFileSync(path.join(packageRoot, "generated/openapi/openapi.yaml"), "utf8").replace('zip: "10001"', 'zip: "1001"');
    const results = await spectral.run(new Document(doc, Yaml, "mutated.yaml"));
    expect(results.map((r) => r.code)).toContain("oas3-valid-media-example");
  }, 60_000);
});
