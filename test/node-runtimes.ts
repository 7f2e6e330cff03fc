// The Node.js releases the tests run the CLI under: the machine's own, then each other release of
// scripts/other-nodes.json (installed by scripts/install-system-deps.sh).
import path from "node:path";
import { describe } from "vitest";
import { otherNodes } from "../scripts/other-nodes.mjs";
import { requireRuntime } from "./runtimes.js";

export interface NodeRuntime {
  version: string;
  /** Its folder of executables, for PATH. */
  binDir: string;
  /** Its `node`. */
  exe: string;
}

const runtimes = [{ version: process.versions.node, binDir: path.dirname(process.execPath), missing: undefined }, ...otherNodes()];

/** `describe(name)` once per release, `body` given it; a release not installed skips with a warning, and fails under CI. */
export function describeOnEachNode(name: string, body: (node: NodeRuntime) => void): void {
  describe.each(runtimes.map((r) => [r.version, r] as const))(`${name}, on Node.js %s`, (version, runtime) => {
    const installed = requireRuntime(runtime.missing);
    // A skipped describe's body still runs to collect its tests: it gets a folder that is not there.
    const binDir = runtime.binDir ?? path.join("/nonexistent", `node-v${version}`);
    describe.runIf(installed)("installed", () => body({ version, binDir, exe: path.join(binDir, "node") }));
  });
}

/** The environment with `node`'s folder first on PATH, so that a shell's `node` is that release. */
export function envWithNode(node: NodeRuntime): NodeJS.ProcessEnv {
  return { ...process.env, PATH: `${node.binDir}${path.delimiter}${process.env.PATH}` };
}
