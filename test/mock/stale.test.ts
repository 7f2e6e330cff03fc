import { cp, mkdtemp, rm, appendFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { generatedIsStale } from "../../src/cli/mock.js";
import { packageRoot } from "../../src/paths.js";
import { generatedSpecHash, specHash } from "../../src/spec-hash.js";

describe("regenerating what is stale before the mock starts", () => {
  it("finds generated/ up to date with the committed spec/", () => {
    expect(generatedSpecHash()).toBe(specHash());
    expect(generatedIsStale()).toBe(false);
  });

  it("notices any change to a file under spec/", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "spec-copy-"));
    try {
      await cp(path.join(packageRoot, "spec"), dir, { recursive: true });
      expect(specHash(dir)).toBe(specHash());
      await appendFile(path.join(dir, "models", "common.tsp"), "\n");
      expect(specHash(dir)).not.toBe(specHash());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
