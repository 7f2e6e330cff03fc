// The mock as a user runs it: a real process, called through the package's typed client.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartnerClient } from "../../src/client/index.js";
import { packageRoot } from "../../src/paths.js";
import { freePort } from "../../scripts/free-port.js";

const cli = path.join(packageRoot, "src/cli/main.ts");


function startMock(port: number): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ["--import", "tsx", cli, "mock", "--port", String(port)], { cwd: packageRoot });
}

/** Resolves with everything printed once `text` appears on stdout. */
function waitForOutput(child: ChildProcessWithoutNullStreams, text: string): Promise<string> {
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      if (out.includes(text)) resolve(out);
    });
    child.once("exit", (code) => reject(new Error(`mock exited with ${code} before printing "${text}": ${out}`)));
  });
}

describe("partner-platform mock", () => {
  let mock: ChildProcessWithoutNullStreams;
  let origin: string;
  let banner: string;

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    mock = startMock(port);
    banner = await waitForOutput(mock, "Ctrl-C stops it.");
  });

  afterAll(async () => {
    if (mock.exitCode === null) {
      mock.kill("SIGINT");
      await once(mock, "exit");
    }
  });

  const client = (fetchImpl?: (r: Request) => Promise<Response>) =>
    createPartnerClient({
      baseUrl: origin,
      authUrl: origin,
      clientId: "partner-acme",
      clientSecret: "s3cr3t-acme-2026",
      scopes: ["demand::search", "demand::request", "webhooks::write"],
      ...(fetchImpl ? { fetch: fetchImpl } : {}),
    });

  it("prints the base URL, the auth URL and a curl sequence", () => {
    expect(banner).toContain(`API (base_url): ${origin}`);
    expect(banner).toContain(`Auth (auth_url): ${origin}`);
    expect(banner).toMatch(/TOKEN=\$\(curl -s -X POST .*\/oauth2\/token -d grant_type=client_credentials/);
    expect(banner).toContain(`/api/v2/businesses/search?category_id=1000123&zip=10001`);
  });

  it("serves the token example and each operation's success example", async () => {
    const c = client();
    const token = await c.getAccessToken();
    expect(token).toBe("eyJhbGciOiJIUzI1NiJ9.cGFydG5lci1hY21l.c2lnbmF0dXJl");

    const search = await c.GET("/api/v2/businesses/search", { params: { query: { category_id: "1000123", zip: "10001" } } });
    expect(search.data?.businesses.map((b) => b.businessID)).toEqual(["4711", "4712"]);

    const request = await c.POST("/api/v4/requests", {
      body: { categoryID: "1000123", zipCode: "10001", customer: { name: "Jane Doe", email: "jane.doe@example.com", phone: "+12125550143" } },
    });
    expect(request.response.status).toBe(201);
    expect(request.data?.requestID).toBe("90000001");

    const webhook = await c.POST("/api/v2/webhooks", {
      body: { url: "https://hooks.example.com/p", events: ["lead.created"], businessID: "4711", secret: "0123456789abcdef" },
    });
    expect(webhook.response.status).toBe(201);
    expect(webhook.data).not.toHaveProperty("secret");
  });

  it("answers 401 problem+json without credentials", async () => {
    const response = await fetch(`${origin}/api/v2/businesses/search?category_id=1000123&zip=10001`);
    expect(response.status).toBe(401);
    await response.body?.cancel();
  });

  it("answers 422 to a body that violates the schema", async () => {
    const { response, error } = await client().POST("/api/v2/webhooks", {
      body: { url: "http://hooks.example.com/p", events: ["lead.created"], businessID: "4711", secret: "0123456789abcdef" },
    });
    expect(response.status).toBe(422);
    expect(error).toBeDefined();
  });

  it("answers 429 with a problem when asked with Prefer: code=429", async () => {
    const c = client();
    const { response, error } = await c.GET("/api/v2/businesses/search", {
      params: { query: { category_id: "1000123", zip: "10001" } },
      headers: { Prefer: "code=429" },
    });
    expect(response.status).toBe(429);
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(error?.type).toBe("urn:partner-platform:problem:rate-limited");
  });

  it("refuses a busy port with one line naming the port and --port", async () => {
    const second = startMock(Number(new URL(origin).port));
    let stderr = "";
    second.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
    const [code] = (await once(second, "exit")) as [number];
    expect(code).not.toBe(0);
    expect(stderr.trim()).toBe(`partner-platform: port ${new URL(origin).port} on 127.0.0.1 is already in use; choose another with --port`);
  });

  it("stops cleanly on Ctrl-C", async () => {
    mock.kill("SIGINT");
    const [code] = (await once(mock, "exit")) as [number];
    expect(code).toBe(0);
  });
});
