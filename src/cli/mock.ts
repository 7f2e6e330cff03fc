// `partner-platform mock` (and `npm start`): the spec-driven mock API, served by Prism from
// generated/openapi/openapi.yaml, token endpoint included.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createRequire } from "node:module";
import path from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { parse as parseYaml } from "yaml";
import { packageRoot, specPaths } from "../paths.js";
import { generatedSpecHash, specHash } from "../spec-hash.js";

const generator = path.join(packageRoot, "scripts", "generate.ts");

/** In a checkout (the generator is there) generated/ is stale when spec/ changed since it was built. */
export function generatedIsStale(): boolean {
  return existsSync(generator) && specHash() !== generatedSpecHash();
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new InvalidArgumentError("a port is a whole number from 1 to 65535");
  return port;
}

function assertPortFree(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new Error(
          error.code === "EADDRINUSE"
            ? `port ${port} on ${host} is already in use; choose another with --port`
            : `cannot listen on ${host}:${port}: ${error.message}`,
        ),
      ),
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
    `Prism checks that credentials are present and that requests match the schema; it does not check a token's validity or scopes.`,
    `Select responses with "Prefer: code=429" or "Prefer: example=<name>". Ctrl-C stops it.`,
  ].join("\n");
}

export async function runMock(options: { host: string; port: number }): Promise<void> {
  if (generatedIsStale()) {
    process.stdout.write("spec/ changed since generated/ was built: running npm run generate...\n");
    execFileSync(process.execPath, ["--import", "tsx", generator], { cwd: packageRoot, stdio: "inherit" });
  }
  await assertPortFree(options.host, options.port);
  const prismCli = createRequire(import.meta.url).resolve("@stoplight/prism-cli/dist/index.js");
  const prism = spawn(
    process.execPath,
    [prismCli, "mock", specPaths.openapi, "--host", options.host, "--port", String(options.port), "--errors", "false"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const origin = `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${options.port}`;
  let ready = false;
  let stopping = false;
  prism.stdout.setEncoding("utf8").on("data", (text: string) => {
    // Prism's request log is useful while developing against the mock; its start-up chatter is not.
    if (ready) return void process.stdout.write(text);
    const at = text.indexOf("\n", text.indexOf("Prism is listening"));
    if (text.includes("Prism is listening")) {
      ready = true;
      process.stdout.write(`${banner(origin)}\n\n${at >= 0 ? text.slice(at + 1) : ""}`);
    }
  });
  let errors = "";
  prism.stderr.setEncoding("utf8").on("data", (text: string) => (errors += text));
  const stop = () => {
    stopping = true;
    prism.kill("SIGTERM");
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  const code = await new Promise<number | null>((resolve) => prism.once("exit", (c) => resolve(c)));
  process.off("SIGINT", stop);
  process.off("SIGTERM", stop);
  if (!stopping) {
    const reason = errors.includes("EADDRINUSE")
      ? `port ${options.port} on ${options.host} is already in use; choose another with --port`
      : `Prism exited with code ${code}: ${errors.trim().split("\n").at(-1) ?? ""}`;
    throw new Error(reason);
  }
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
