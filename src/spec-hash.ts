import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "./paths.js";

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? listFiles(full) : [full];
  });
}

/** The files generation reads: TypeSpec sources and configuration, and the AsyncAPI document (not the prose). */
const INPUT = /\.(tsp|ya?ml)$/;

/** SHA-256 over the generation inputs in spec/ (paths and contents): generated/manifest.json records it. */
export function specHash(specDir = path.join(packageRoot, "spec")): string {
  const hash = createHash("sha256");
  for (const file of listFiles(specDir).filter((f) => INPUT.test(f)).sort()) {
    hash.update(path.relative(specDir, file).split(path.sep).join("/")).update("\0");
    hash.update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex");
}

/** The spec hash that generated/ was last built from, or undefined when there is no manifest. */
export function generatedSpecHash(): string | undefined {
  try {
    const manifest = JSON.parse(readFileSync(path.join(packageRoot, "generated", "manifest.json"), "utf8")) as {
      specSha256?: string;
    };
    return manifest.specSha256;
  } catch {
    return undefined;
  }
}
