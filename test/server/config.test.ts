// The config file of `partner-platform serve`: validated by its schema, one clear line when wrong,
// and what it configures (clients, scopes, token lifetime) is what the server does.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/paths.js";
import { specTokenLifetimeSeconds } from "../../src/server/contract.js";
import { loadConfig, startServer } from "../../src/server/index.js";
import { control } from "./helpers.js";

interface Cases {
  valid: { name: string; config: unknown; tokenLifetimeSeconds: number | null }[];
  invalid: { name: string; config?: unknown; text?: string; error: string }[];
}
const cases = JSON.parse(readFileSync(path.join(import.meta.dirname, "data/config-cases.json"), "utf8")) as Cases;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "serve-config-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

async function file(name: string, text: string): Promise<string> {
  const target = path.join(dir, `${name.replace(/\W+/g, "-")}.json`);
  await writeFile(target, text);
  return target;
}

describe("config file", () => {
  it.each(cases.valid.map((c) => [c.name, c] as const))("accepts %s", async (_name, c) => {
    const config = loadConfig(await file(c.name, JSON.stringify(c.config)));
    expect(config.clients).toEqual((c.config as { clients: unknown }).clients);
    expect(config.tokenLifetimeSeconds).toBe(c.tokenLifetimeSeconds ?? specTokenLifetimeSeconds);
  });

  it.each(cases.invalid.map((c) => [c.name, c] as const))("refuses %s", async (_name, c) => {
    const source = await file(c.name, c.text ?? JSON.stringify(c.config));
    expect(() => loadConfig(source)).toThrow(c.error);
    expect(() => loadConfig(source)).toThrow(`config ${source}: `);
  });

  it("takes a client's secret from the environment variable clientSecretEnv names", async () => {
    const source = await file("secret-env", JSON.stringify({ clients: [{ clientId: "a", clientSecretEnv: "A_SECRET", scopes: [], contactEmail: "ops@a.example", businessIDs: [] }] }));
    expect(loadConfig(source, { A_SECRET: "secret-from-env" }).clients[0]).toMatchObject({ clientId: "a", clientSecret: "secret-from-env" });
    expect(() => loadConfig(source, {})).toThrow("/clients/0/clientSecretEnv: the environment variable A_SECRET is not set or empty");
  });

  it("makes serve exit non-zero with one line on stderr", async () => {
    const bad = await file("cli", JSON.stringify({ clients: [] }));
    const run = promisify(execFile)(process.execPath, ["--import", "tsx", path.join(packageRoot, "src/cli/main.ts"), "serve", "--config", bad, "--port", "0"]);
    const failure = (await run.then(() => undefined, (e: unknown) => e)) as { code: number; stderr: string } | undefined;
    expect(failure?.code).toBe(1);
    expect(failure?.stderr.trim().split("\n")).toEqual([`partner-platform: config ${bad}: /clients: must NOT have fewer than 1 items`]);
  });

  it("issues tokens with the configured lifetime and only the client's scopes", async () => {
    const clients = [{ clientId: "short", clientSecret: "short-secret", scopes: ["demand::search"], contactEmail: "ops@short.example", businessIDs: [] }];
    const server = await startServer({ clock: { mode: "virtual" }, conformance: true, config: { clients, tokenLifetimeSeconds: 60 }, log: () => undefined });
    try {
      const token = async (scope?: string) => {
        const form = new URLSearchParams({ grant_type: "client_credentials", client_id: "short", client_secret: "short-secret", ...(scope ? { scope } : {}) });
        const r = await fetch(`${server.url}/oauth2/token`, { method: "POST", body: form });
        return { status: r.status, body: (await r.json()) as { access_token: string; expires_in: number; scope: string; error: string } };
      };
      const granted = await token();
      expect([granted.status, granted.body.expires_in, granted.body.scope]).toEqual([200, 60, "demand::search"]);
      expect([(await token("webhooks::write")).status, (await token("webhooks::write")).body.error]).toEqual([400, "invalid_scope"]);
      const search = () =>
        fetch(`${server.url}/api/v2/businesses/search?category_id=1000123&zip=10001`, { headers: { authorization: `Bearer ${granted.body.access_token}` } }).then((r) => r.status);
      await control(server).advance(59);
      expect(await search()).toBe(200);
      await control(server).advance(1);
      expect(await search()).toBe(401);
    } finally {
      await server.close();
    }
  });
});
