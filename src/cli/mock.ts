// `partner-platform mock` (and `npm start`): the spec-driven mock API, served by Prism from
// generated/openapi/openapi.yaml, token endpoint included.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createRequire } from "node:module";
import path from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { parse as parseYaml } from "yaml";
import { packageRoot, specPaths } from "../paths.js";
import { generatedSpecHash, specHash } from "../spec-hash.js";
import { onStop } from "./lifetime.js";

/**
 * A checkout can rebuild generated/: it has the generator and is not an installed copy under
 * node_modules (the published package ships scripts/generate.ts, but not TypeSpec or tsx).
 */
export function isCheckout(root = packageRoot): boolean {
  return existsSync(path.join(root, "scripts", "generate.ts")) && !root.split(path.sep).includes("node_modules");
}

/** Regenerate only in a checkout whose spec/ no longer matches the hash generated/ was built from. */
export function needsRegeneration(state: { checkout: boolean; specHash: string; generatedHash: string | undefined }): boolean {
  return state.checkout && state.specHash !== state.generatedHash;
}

export function generatedIsStale(): boolean {
  return needsRegeneration({ checkout: isCheckout(), specHash: specHash(), generatedHash: generatedSpecHash() });
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new InvalidArgumentError("a port is a whole number from 1 to 65535");
  return port;
}

export function busyPortMessage(host: string, port: number): string {
  return `port ${port} on ${host} is already in use; choose another with --port`;
}

/** Why Prism ended when nobody asked it to, in one line (its stderr ends with the reason). */
export function prismFailureMessage(stderr: string, code: number | null, host: string, port: number): string {
  if (stderr.includes("EADDRINUSE")) return busyPortMessage(host, port);
  return `Prism exited with code ${code}: ${stderr.trim().split("\n").at(-1) ?? ""}`;
}

function assertPortFree(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) =>
      reject(new Error(error.code === "EADDRINUSE" ? busyPortMessage(host, port) : `cannot listen on ${host}:${port}: ${error.message}`)),
    );
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

/** The spec's own example values for the curl sequence: the token request and a search that finds businesses. */
function exampleValues(): { token: Record<string, string>; categoryId: string; zip: string } {
  type Json = Record<string, any>;
  const doc = parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json;
  const tokenExamples = doc.paths["/oauth2/token"].post.requestBody.content["application/x-www-form-urlencoded"].examples as Json;
  const searchOk = doc.paths["/api/v2/businesses/search"].get.responses["200"].content["application/json"].examples as Json;
  const business = (Object.values(searchOk)[0] as Json).value.businesses[0] as Json;
  return {
    token: (Object.values(tokenExamples).find((e) => (e as Json).summary === "token-issued") as Json).value,
    categoryId: business.categories[0].categoryID,
    zip: business.location.zip,
  };
}

export function banner(origin: string): string {
  const { token, categoryId, zip } = exampleValues();
  const form = Object.entries(token)
    .map(([k, v]) => `-d ${k}=${v}`)
    .join(" ");
  return [
    `Partner Platform v4 mock (Prism, from generated/openapi/openapi.yaml)`,
    `  API (base_url): ${origin}`,
    `  Auth (auth_url): ${origin}   (POST /oauth2/token)`,
    ``,
    `Try it:`,
    `  TOKEN=$(curl -s -X POST ${origin}/oauth2/token ${form} | node -pe 'JSON.parse(require("fs").readFileSync(0)).access_token')`,
    `  curl -s -H "Authorization: Bearer $TOKEN" "${origin}/api/v2/businesses/search?category_id=${categoryId}&zip=${zip}"`,
    ``,
    `Prism checks that credentials are present and that requests match the schema, except members a body must not have (D16); it does not check a token's validity or scopes.`,
    `Pick another documented answer with "Prefer: code=429" (or "Prefer: code=403, example=insufficient-scope"). Ctrl-C stops it.`,
  ].join("\n");
}

export async function runMock(options: { host: string; port: number }): Promise<void> {
  if (generatedIsStale()) {
    process.stdout.write("spec/ changed since generated/ was built: running npm run generate...\n");
    const generate = spawnSync(process.execPath, ["--import", "tsx", path.join(packageRoot, "scripts", "generate.ts")], {
      cwd: packageRoot,
      stdio: "inherit",
    });
    if (generate.status !== 0) throw new Error("npm run generate failed (see above); fix spec/ and try again");
  }
  await assertPortFree(options.host, options.port);
  const prismCli = createRequire(import.meta.url).resolve("@stoplight/prism-cli/dist/index.js");
  // The spec's examples, not generated data. `--errors` (violations as error answers) is for checking a real
  // server through `prism proxy`; the examples are validated by the contract tests.
  const args = ["mock", specPaths.openapi, "--host", options.host, "--port", String(options.port), "--dynamic", "false", "--errors", "false"];
  const prism = spawn(process.execPath, [prismCli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const origin = `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${options.port}`;
  let ready = false;
  let startup = "";
  prism.stdout.setEncoding("utf8").on("data", (text: string) => {
    // Prism's request log is useful while developing against the mock; its start-up chatter is not.
    if (ready) return void process.stdout.write(text);
    startup += text;
    const listening = startup.indexOf("Prism is listening");
    const lineEnd = startup.indexOf("\n", listening);
    if (listening < 0 || lineEnd < 0) return;
    ready = true;
    process.stdout.write(`${banner(origin)}\n\n${startup.slice(lineEnd + 1)}`);
  });
  let errors = "";
  prism.stderr.setEncoding("utf8").on("data", (text: string) => {
    if (ready) process.stderr.write(text);
    else errors += text;
  });
  let stopping = false;
  const stop = () => {
    stopping = true;
    prism.kill("SIGTERM");
  };
  // Left installed until the process ends: a second Ctrl-C (or one relayed by a wrapper such as the tsx
  // CLI) must not find the process without a listener, which would end it with status 130.
  onStop(stop);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    prism.once("exit", (c, s) => resolve([c, s])),
  );
  // A Ctrl-C in a terminal reaches Prism too, and it may end before this process has seen the signal.
  if (stopping || signal === "SIGINT" || signal === "SIGTERM") return;
  throw new Error(prismFailureMessage(errors, code, options.host, options.port));
}

export function mockCommand(): Command {
  return new Command("mock")
    .description("Serve the spec-driven mock API (Prism) with the spec's examples, token endpoint included.")
    .option("--port <port>", "port to listen on", parsePort, 4010)
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .action(async (options: { host: string; port: number }) => {
      await runMock(options);
    });
}
