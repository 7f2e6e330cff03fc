import { existsSync } from "node:fs";
import path from "node:path";

function findPackageRoot(from: string): string {
  let dir = from;
  while (!existsSync(path.join(dir, "package.json"))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`partner-platform: no package.json above ${from}`);
    dir = parent;
  }
  return dir;
}

/** The package's root folder, whether this runs from src/ (tsx) or dist/src/ (built). */
export const packageRoot = findPackageRoot(import.meta.dirname);

/** Where the contract files live inside the package. */
export const specPaths = {
  asyncapi: path.join(packageRoot, "spec", "asyncapi.yaml"),
  openapi: path.join(packageRoot, "generated", "openapi", "openapi.yaml"),
  openapi30: path.join(packageRoot, "generated", "openapi", "openapi-3.0.yaml"),
  controlOpenapi: path.join(packageRoot, "generated", "control", "openapi.yaml"),
  jsonSchemaDir: path.join(packageRoot, "generated", "json-schema"),
} as const;
