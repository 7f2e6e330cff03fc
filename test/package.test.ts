// The package as a user installs it: the built CLI binary and the `exports` entry point.
import { execFile, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import semver from "semver";
import { beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../scripts/free-port.js";
import { packageRoot } from "../src/paths.js";

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8")) as {
  version: string;
  bin: Record<string, string>;
};

describe("built package", () => {
  beforeAll(async () => {
    await run(path.join(packageRoot, "node_modules/.bin/tsc"), ["-p", "tsconfig.build.json"], { cwd: packageRoot });
  });

  it("exposes the partner-platform binary", async () => {
    const { stdout } = await run(process.execPath, [path.join(packageRoot, pkg.bin["partner-platform"]!), "--version"]);
    expect(stdout.trim()).toBe(pkg.version);
  });

  it("exports the library entry point (the built file package.json names)", async () => {
    const entry = (pkg as unknown as { exports: { ".": { default: string } } }).exports["."].default;
    const lib = (await import(path.join(packageRoot, entry))) as Record<string, unknown>;
    for (const name of ["createPartnerClient", "parseEvent", "signPayload", "verifySignature", "loadDeliveryRules"]) {
      expect(typeof lib[name], name).toBe("function");
    }
  });

  // Every import the README, the guides and the examples show, resolved as a user's code resolves it:
  // through the package's own name and its `exports` (Node's self-reference), to the built files.
  it("resolves every import the README, docs and examples show, with every name they import", async () => {
    const files = ["README.md", "docs/implementing-a-server.md", ...["spec/guides", "examples/receivers"].flatMap((dir) =>
      readdirSync(path.join(packageRoot, dir)).filter((f) => /\.(md|ts)$/.test(f)).map((f) => `${dir}/${f}`),
    )];
    const shown = files.flatMap((file) =>
      [...readFileSync(path.join(packageRoot, file), "utf8").matchAll(/import\s+(\{[^}]*\}|\w+)\s+from\s+"(partner-platform(?:\/[^"]*)?)"(\s+with\s+\{\s*type:\s*"json"\s*\})?/g)].map(
        (m) => ({ file, clause: m[1]!, specifier: m[2]!, json: Boolean(m[3]) }),
      ),
    );
    expect(shown.map((s) => s.specifier)).toEqual(expect.arrayContaining(["partner-platform", "partner-platform/conformance/vectors/signing.json"]));
    const wanted = shown.map(({ file, clause, specifier, json }) => ({
      what: `${file}: from "${specifier}"`,
      specifier,
      json,
      names: clause.startsWith("{")
        ? clause.slice(1, -1).split(",").map((n) => n.trim()).filter((n) => n && !n.startsWith("type ")).map((n) => n.split(/\s+as\s+/)[0]!)
        : ["default"],
    }));
    // In a Node process of its own (vitest resolves "partner-platform" to src/ by an alias).
    const script = `
      const missing = [];
      for (const w of ${JSON.stringify(wanted)}) {
        try {
          const m = await (w.json ? import(w.specifier, { with: { type: "json" } }) : import(w.specifier));
          for (const name of w.names) if (m[name] === undefined) missing.push(w.what + ": no " + name);
        } catch (e) { missing.push(w.what + ": " + e.code); }
      }
      console.log(JSON.stringify(missing));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: packageRoot });
    expect(JSON.parse(stdout)).toEqual([]);
  });

  it("answers an unknown command with one line and a non-zero exit", async () => {
    const result = await run(process.execPath, [path.join(packageRoot, pkg.bin["partner-platform"]!), "frobnicate"]).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(result).toMatchObject({ code: 2 });
    expect((result as { stderr: string }).stderr.split("\n")[0]).toMatch(/unknown command 'frobnicate'/);
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

// The README's way of running the mock and the server in the background in CI: `command &`, then
// `kill $!`, which signals npm (or npx), not the command. The command must stop all the same.
describe("started in the background by npm or npx, as CI does", () => {
  const readme = readFileSync(path.join(packageRoot, "README.md"), "utf8");
  const documented = /^(npm start -- --port) \d+ &$/m.exec(readme)?.[1];

  it.each([
    ["npm start (the mock)", () => `${documented} PORT`],
    ["npx partner-platform serve", () => "npx partner-platform serve --port PORT"],
  ])("%s stops when npm is killed", async (_name, line) => {
    expect(documented, "the README's background line").toBeDefined();
    const port = await freePort();
    // `$!` is the npm process: killing it is what `kill $!` does.
    const script = `${line().replace("PORT", String(port))} > /dev/null 2>&1 &\necho $!\nwait`;
    // A process group of its own, so that whatever a failing run leaves behind can be ended.
    const shell = spawn("bash", ["-c", script], { cwd: packageRoot, stdio: ["ignore", "pipe", "inherit"], detached: true });
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

  it("declares Node 20.19 or later", () => {
    expect((pkg as unknown as { engines: { node: string } }).engines.node).toBe(">=20.19");
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

