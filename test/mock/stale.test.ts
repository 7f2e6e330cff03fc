// The decision `mock` takes before starting Prism: rebuild generated/ or serve it as it is. Unit tests
// of the decision; nothing here runs the generator.
import { appendFile, cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generatedIsStale, isCheckout, needsRegeneration } from "../../src/cli/mock.js";
import { packageRoot } from "../../src/paths.js";
import { generatedSpecHash, specHash } from "../../src/spec-hash.js";

describe("regenerating what is stale before the mock starts", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mock-stale-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("regenerates only in a checkout whose spec/ differs from the hash generated/ was built from", () => {
    const built = "a".repeat(64);
    expect(needsRegeneration({ checkout: true, specHash: built, generatedHash: built })).toBe(false);
    expect(needsRegeneration({ checkout: true, specHash: "b".repeat(64), generatedHash: built })).toBe(true);
    expect(needsRegeneration({ checkout: true, specHash: built, generatedHash: undefined })).toBe(true); // no manifest
    // An installed package serves its generated/ as it is, whatever it finds.
    expect(needsRegeneration({ checkout: false, specHash: "b".repeat(64), generatedHash: built })).toBe(false);
    expect(needsRegeneration({ checkout: false, specHash: built, generatedHash: undefined })).toBe(false);
  });

  it("counts as a checkout a folder with the generator, but not an installed copy under node_modules", async () => {
    const withGenerator = async (root: string) => {
      await mkdir(path.join(root, "scripts"), { recursive: true });
      await writeFile(path.join(root, "scripts", "generate.ts"), "");
      return root;
    };
    expect(isCheckout(packageRoot)).toBe(true);
    expect(isCheckout(await withGenerator(path.join(dir, "clone")))).toBe(true);
    // The published package ships scripts/generate.ts, but not the TypeSpec compiler it needs.
    expect(isCheckout(await withGenerator(path.join(dir, "node_modules", "partner-platform")))).toBe(false);
    await mkdir(path.join(dir, "without-generator"));
    expect(isCheckout(path.join(dir, "without-generator"))).toBe(false);
  });

  it("finds generated/ up to date with the committed spec/", () => {
    expect(generatedSpecHash()).toBe(specHash());
    expect(generatedIsStale()).toBe(false);
  });

  it("notices any change to a generation input under spec/", async () => {
    const copy = path.join(dir, "spec");
    await cp(path.join(packageRoot, "spec"), copy, { recursive: true });
    expect(specHash(copy)).toBe(specHash());
    await appendFile(path.join(copy, "models", "common.tsp"), "\n");
    expect(specHash(copy)).not.toBe(specHash());
  });
});
