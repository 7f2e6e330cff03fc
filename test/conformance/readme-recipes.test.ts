// The CI recipes of the README's certify sections pass as written: each section's ```yaml step is run
// with bash as CI runs it, with only the program name replaced (`npx partner-platform` → this checkout's
// CLI) and the environment variables it names set, against what the recipe says must be running; on
// the machine's Node.js and on each other release of scripts/other-nodes.json (first on PATH, so that
// the recipe's `node`, and the server `--start` launches, are that release).
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { packageRoot } from "../../src/paths.js";
import type { ClientConfig } from "../../src/server/config.js";
import { loadConfig, startServer } from "../../src/server/index.js";
import { describeOnEachNode, envWithNode, type NodeRuntime } from "../node-runtimes.js";
import { expectFree } from "../ports.js";

const [client, second, limited] = loadConfig().clients as [ClientConfig, ClientConfig, ClientConfig];
const webhookSecret = "whsec-readme-recipe-0123456789";
/** The value of each environment variable a recipe may name. */
const secrets: Record<string, string> = {
  PARTNER_PLATFORM_CLIENT_ID: client.clientId,
  PARTNER_PLATFORM_CLIENT_SECRET: client.clientSecret,
  PARTNER_PLATFORM_SECOND_CLIENT_ID: second.clientId,
  PARTNER_PLATFORM_SECOND_CLIENT_SECRET: second.clientSecret,
  PARTNER_PLATFORM_LIMITED_CLIENT_ID: limited.clientId,
  PARTNER_PLATFORM_LIMITED_CLIENT_SECRET: limited.clientSecret,
  PARTNER_PLATFORM_WEBHOOK_SECRET: webhookSecret,
};
// The package's own bin (which runs this checkout's sources): the recipes run in a folder of their own.
const program = `node ${path.join(packageRoot, "bin/partner-platform.js")}`;

interface Recipe {
  env: Record<string, string>;
  run: string;
}

/** The ```yaml steps of a README section (from its heading to the next one). */
async function recipesOf(heading: string): Promise<Recipe[]> {
  const readme = await readFile(path.join(packageRoot, "README.md"), "utf8");
  const start = readme.indexOf(`\n## ${heading}\n`);
  expect(start, `README section "${heading}"`).toBeGreaterThan(0);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  // The steps that run something; the others keep the reports (upload-artifact of reports/).
  const steps = [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].flatMap((m) => parse(m[1]!) as (Recipe & { uses?: string; with?: { path?: string } })[]);
  for (const step of steps.filter((s) => !s.run)) expect(step.with?.path, `a step of "${heading}" that runs nothing`).toBe("reports/");
  return steps.filter((s) => s.run);
}

/** Runs a recipe's `run` with bash -eo pipefail (what CI does), in `cwd`, with `node` first on PATH. */
async function runRecipe(recipe: Recipe, cwd: string, node: NodeRuntime): Promise<{ code: number; stdout: string; stderr: string }> {
  expect(recipe.run).toContain("npx partner-platform ");
  const env: Record<string, string> = {};
  for (const name of Object.keys(recipe.env ?? {})) {
    expect(secrets[name], `the recipe names ${name}: give this test its value`).toBeDefined();
    env[name] = secrets[name]!;
  }
  const script = recipe.run.replaceAll("npx partner-platform ", `${program} `);
  const child = spawn("bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", script], { cwd, env: { ...envWithNode(node), ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const [code] = (await once(child, "exit")) as [number];
  return { code, stdout, stderr };
}

/** The port of a URL flag in the recipe's command (its comments left out). */
function portOf(run: string, flag: string): number {
  const command = run.replace(/^\s*#.*$/gm, "");
  return Number(new URL(new RegExp(`${flag} (\\S+)`).exec(command)![1]!).port);
}

/** The recipe's verdict and its reports. */
async function expectCertified(result: { code: number; stdout: string; stderr: string }, cwd: string, suite: string): Promise<void> {
  expect(result.stderr).toBe("");
  expect(result.stdout).not.toMatch(/^FAIL /m);
  expect(result.stdout).toMatch(new RegExp(`^CERTIFIED: ${suite} suite against `, "m"));
  expect(result.code).toBe(0);
  for (const file of [`reports/certify-${suite}.xml`, `reports/certify-${suite}.json`, `reports/certify-${suite}.html`]) {
    expect((await stat(path.join(cwd, file))).size, file).toBeGreaterThan(0);
  }
}

describeOnEachNode("README certify recipes, as written", (node) => {
  let cwd: string;
  beforeAll(async () => {
    cwd = await mkdtemp(path.join(tmpdir(), "readme-recipes-"));
    // The recipes' `node` is this release.
    expect(execFileSync("node", ["--version"], { env: envWithNode(node), encoding: "utf8" }).trim()).toBe(`v${node.version}`);
  });
  afterAll(async () => rm(cwd, { recursive: true, force: true }));

  it("Certify your server in CI: --start launches the reference server", async () => {
    const [recipe, ...more] = await recipesOf("Certify your server in CI");
    expect(more).toEqual([]);
    await expectFree(portOf(recipe!.run, "--base-url"));
    await expectCertified(await runRecipe(recipe!, cwd, node), cwd, "server");
  }, 180_000);

  it("Certify your webhook receiver: against the node:http example receiver, started as the README says", async () => {
    const [recipe, ...more] = await recipesOf("Certify your webhook receiver");
    expect(more).toEqual([]);
    const port = portOf(recipe!.run, "--url");
    await expectFree(port);
    const receiver = startExampleReceiver(node, { WEBHOOK_SECRET: webhookSecret, PORT: String(port) });
    try {
      expect(await receiver.firstLine).toBe(`listening on http://127.0.0.1:${port}/`);
      await expectCertified(await runRecipe(recipe!, cwd, node), cwd, "receiver");
    } finally {
      receiver.child.kill();
    }
  }, 60_000);

  it("Certify your API implementation: against the reference server with its default configuration", async () => {
    const [recipe, ...more] = await recipesOf("Certify your API implementation");
    expect(more).toEqual([]);
    const port = portOf(recipe!.run, "--base-url");
    await expectFree(port);
    const server = await startServer({ port, log: () => undefined });
    try {
      const result = await runRecipe(recipe!, cwd, node);
      await expectCertified(result, cwd, "api");
      // Every client the recipe names is used: no check skipped for want of one.
      expect(result.stdout).not.toMatch(/^SKIP /m);
    } finally {
      await server.close();
    }
  }, 300_000);
});

/** The node:http example run as the README's Run line says (`npx tsx examples/receivers/node-http.ts`), on `node`. */
function startExampleReceiver(node: NodeRuntime, env: Record<string, string>) {
  const child = spawn("node", ["--import", "tsx", "examples/receivers/node-http.ts"], {
    cwd: packageRoot,
    env: { ...envWithNode(node), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const firstLine = new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      if (out.includes("\n")) resolve(out.split("\n")[0]!);
    });
    child.once("exit", (code) => reject(new Error(`the example receiver exited ${code}: ${stderr.trim()}`)));
  });
  return { child, firstLine };
}
