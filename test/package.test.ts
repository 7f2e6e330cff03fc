// The packages as a user installs them: packed as `npm publish` packs them (each one's `prepack` builds
// it), installed from the tarballs into empty projects with --engine-strict, and used from there.
import { execFile, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { copyFile, lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import semver from "semver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../scripts/free-port.js";
import { packageRoot } from "../src/paths.js";
import { eventExample } from "../src/spec.js";

const run = promisify(execFile);
const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
const pkg = readJson(path.join(packageRoot, "package.json")) as { version: string; engines: { node: string } };
const sdkPkg = readJson(path.join(packageRoot, "packages/sdk/package.json")) as { name: string; engines: { node: string } };

/** A new project in `dir` with the tarballs installed, as a partner installs them (`npm install --engine-strict`). */
async function installInto(dir: string, tarballs: string[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: path.basename(dir), version: "1.0.0", private: true, type: "commonjs" }));
  await run("npm", ["install", "--engine-strict", "--no-audit", "--no-fund", ...tarballs], { cwd: dir });
}

/** Bytes of every file under `dir` (symbolic links not followed). */
async function sizeOf(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    total += entry.isDirectory() ? await sizeOf(full) : (await lstat(full)).size;
  }
  return total;
}

describe("packed and installed from the tarballs", () => {
  let scratch: string;
  /** A project with only the library; one with the library and the tools. */
  let light: string;
  let tools: string;

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(tmpdir(), "partner-platform-packed-"));
    const { stdout } = await run(
      "npm",
      ["pack", "--json", "--pack-destination", scratch, "--workspace", sdkPkg.name, "--include-workspace-root"],
      { cwd: packageRoot, maxBuffer: 64 * 1024 * 1024 },
    );
    const packed = JSON.parse(stdout.slice(stdout.indexOf("["))) as { name: string; filename: string }[];
    const tarball = (name: string) => path.join(scratch, packed.find((p) => p.name === name)!.filename);
    light = path.join(scratch, "light");
    tools = path.join(scratch, "tools");
    await installInto(light, [tarball(sdkPkg.name)]);
    await installInto(tools, [tarball(sdkPkg.name), tarball("partner-platform")]);
  }, 600_000);

  afterAll(async () => {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("installs the library alone as at most 15 packages and 5 MB", async () => {
    const lock = readJson(path.join(light, "node_modules/.package-lock.json")) as { packages: Record<string, unknown> };
    const packages = Object.keys(lock.packages).filter((where) => where.startsWith("node_modules/"));
    const bytes = await sizeOf(path.join(light, "node_modules"));
    const measured = `${packages.length} packages, ${(bytes / 1024 / 1024).toFixed(2)} MB: ${packages.map((p) => p.slice("node_modules/".length)).join(", ")}`;
    console.info(`light install: ${measured}`);
    expect(packages.length, measured).toBeLessThanOrEqual(15);
    expect(bytes, measured).toBeLessThanOrEqual(5 * 1024 * 1024);
  });

  it("publishes no script that runs at install time", () => {
    for (const where of [`node_modules/${sdkPkg.name}`, "node_modules/partner-platform"]) {
      const scripts = Object.keys((readJson(path.join(tools, where, "package.json")).scripts ?? {}) as object);
      expect(scripts.filter((s) => /^(pre|post)?(install|prepare)$/.test(s)), where).toEqual([]);
    }
  });

  // The same partner code compiled by tsc as CommonJS (module node16: TS1479 if the library were ESM
  // only) and as ESM (NodeNext), then run against the installed library.
  it.each([
    ["CommonJS", "commonjs", "node16", /require\("@partner-platform\/sdk"\)/],
    ["ESM", "module", "nodenext", /from "@partner-platform\/sdk"/],
  ])("serves a TypeScript %s consumer", async (_name, type, module, compiledImport) => {
    const project = path.join(light, `consumer-${type}`);
    await mkdir(project, { recursive: true });
    await writeFile(path.join(project, "package.json"), JSON.stringify({ name: `consumer-${type}`, private: true, type }));
    await copyFile(path.join(packageRoot, "test/package/consumer.ts"), path.join(project, "index.ts"));
    const compilerOptions = {
      module,
      moduleResolution: module,
      target: "ES2022",
      strict: true,
      outDir: "out",
      types: ["node"],
      typeRoots: [path.join(packageRoot, "node_modules/@types")],
    };
    await writeFile(path.join(project, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["index.ts"] }));
    const tsc = path.join(packageRoot, "node_modules/typescript/bin/tsc");
    const compiled = await run(process.execPath, [tsc, "-p", "."], { cwd: project }).catch((error: { stdout: string }) => error);
    expect((compiled as { stdout: string }).stdout).toBe("");
    expect(await readFile(path.join(project, "out/index.js"), "utf8")).toMatch(compiledImport);
    const body = JSON.stringify(eventExample("lead.created"));
    const { stdout } = await run(process.execPath, ["out/index.js", body], { cwd: project });
    expect(JSON.parse(stdout)).toEqual({ verified: true, leadId: eventExample("lead.created").data.leadID, get: "function" });
  }, 120_000);

  it("runs `npx partner-platform` from the installed tools", async () => {
    const { stdout } = await run("npx", ["partner-platform", "--version"], { cwd: tools });
    expect(stdout.trim()).toBe(pkg.version);
    const unknown = await run("npx", ["partner-platform", "frobnicate"], { cwd: tools }).catch((error: { code: number; stderr: string }) => error);
    expect(unknown).toMatchObject({ code: 2 });
    expect((unknown as { stderr: string }).stderr.split("\n").find((l) => !l.startsWith("npm warn"))).toMatch(/unknown command 'frobnicate'/);
  });

  // From the project that installed the package, as a partner's CI runs it: npx takes the bin from its
  // node_modules/.bin. (In a checkout, npx installs the checkout into its own cache once per path and
  // keeps that copy's bin link even after package.json's bin moves: a stale link CI once tripped on.)
  it("npx partner-platform serve, started in the background, stops when npx is killed", async () => {
    await stopsWhenNpmIsKilled("npx partner-platform serve --port PORT", tools);
  }, 120_000);

  // Every import the README, the guides and the examples show, resolved as a user's code resolves it:
  // by package name and `exports`, from a project that installed the tarballs.
  it("resolves every import the README, docs and examples show, with every name they import", async () => {
    const files = ["README.md", "docs/implementing-a-server.md", ...["spec/guides", "examples/receivers"].flatMap((dir) =>
      readdirSync(path.join(packageRoot, dir)).filter((f) => /\.(md|ts)$/.test(f)).map((f) => `${dir}/${f}`),
    )];
    const shown = files.flatMap((file) =>
      [...readFileSync(path.join(packageRoot, file), "utf8").matchAll(/import\s+(\{[^}]*\}|\w+)\s+from\s+"((?:@partner-platform\/sdk|partner-platform)(?:\/[^"]*)?)"(\s+with\s+\{\s*type:\s*"json"\s*\})?/g)].map(
        (m) => ({ file, clause: m[1]!, specifier: m[2]!, json: Boolean(m[3]) }),
      ),
    );
    expect(shown.map((s) => s.specifier)).toEqual(
      expect.arrayContaining([sdkPkg.name, "partner-platform", "partner-platform/conformance/vectors/signing.json"]),
    );
    const wanted = shown.map(({ file, clause, specifier, json }) => ({
      what: `${file}: from "${specifier}"`,
      specifier,
      json,
      names: clause.startsWith("{")
        ? clause.slice(1, -1).split(",").map((n) => n.trim()).filter((n) => n && !n.startsWith("type ")).map((n) => n.split(/\s+as\s+/)[0]!)
        : ["default"],
    }));
    // The library's whole API is also importable from the tools package, as before the split.
    wanted.push({ what: "partner-platform re-exports the library", specifier: "partner-platform", json: false, names: ["createPartnerClient", "parseEvent", "signPayload", "verifySignature", "verifyDelivery", "loadDeliveryRules", "buildEnvelope", "deliver"] });
    const script = `
      const missing = [];
      for (const w of ${JSON.stringify(wanted)}) {
        try {
          const m = await (w.json ? import(w.specifier, { with: { type: "json" } }) : import(w.specifier));
          for (const name of w.names) if (m[name] === undefined) missing.push(w.what + ": no " + name);
        } catch (e) { missing.push(w.what + ": " + e.code); }
      }
      console.log(JSON.stringify(missing));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: tools });
    expect(JSON.parse(stdout)).toEqual([]);
  });
});

/** Whether something accepts connections on 127.0.0.1:port. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

async function until(what: string, condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The README's way of running the mock and the server in the background in CI: `command &`, then
 * `kill $!`, which signals npm (or npx), not the command. The command must stop all the same.
 */
async function stopsWhenNpmIsKilled(line: string, cwd: string): Promise<void> {
  const port = await freePort();
  // `$!` is the npm process: killing it is what `kill $!` does.
  const script = `${line.replace("PORT", String(port))} > /dev/null 2>&1 &\necho $!\nwait`;
  // A process group of its own, so that whatever a failing run leaves behind can be ended.
  const shell = spawn("bash", ["-c", script], { cwd, stdio: ["ignore", "pipe", "inherit"], detached: true });
  const npmPid = Number(await new Promise<string>((resolve) => shell.stdout.once("data", (d: Buffer) => resolve(d.toString()))));
  try {
    await until(`port ${port} listens`, () => listening(port), 60_000);
    process.kill(npmPid, "SIGTERM");
    await until(`port ${port} is free again`, async () => !(await listening(port)), 30_000);
  } finally {
    try {
      process.kill(-shell.pid!, "SIGKILL");
    } catch {
      // Already gone: the command stopped as it should.
    }
  }
}

describe("started in the background by npm, as CI does", () => {
  const readme = readFileSync(path.join(packageRoot, "README.md"), "utf8");
  const documented = /^(npm start -- --port) \d+ &$/m.exec(readme)?.[1];

  it("npm start (the mock) stops when npm is killed", async () => {
    expect(documented, "the README's background line").toBeDefined();
    await stopsWhenNpmIsKilled(`${documented} PORT`, packageRoot);
  }, 120_000);
});

// `npm install --engine-strict` on every Node the package supports: no package it runs with may
// declare an engine that excludes one (fastify's light-my-request 6.8 pulls cookie 2, Node >= 22 only,
// so light-my-request is pinned to 6.6, which takes cookie 1 and which fastify's ^6 accepts).
describe("engines", () => {
  const lock = JSON.parse(readFileSync(path.join(packageRoot, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string; dev?: boolean; engines?: { node?: string } | string[] }>;
  };
  const supported = ["20.19.0", "22.13.0", "24.0.0"];

  it("declares Node 20.19 or later, for the tools and for the library", () => {
    expect(pkg.engines.node).toBe(">=20.19");
    expect(sdkPkg.engines.node).toBe(">=20.19");
  });

  it("installs nothing at run time that refuses a supported Node", () => {
    const refusing = Object.entries(lock.packages).flatMap(([where, p]) => {
      const range = !p.dev && p.engines && !Array.isArray(p.engines) ? p.engines.node : undefined;
      const refused = range ? supported.filter((v) => !semver.satisfies(v, range)) : [];
      return refused.length ? [`${where}@${p.version} (node ${range}) refuses ${refused.join(", ")}`] : [];
    });
    expect(refusing).toEqual([]);
  });
});

