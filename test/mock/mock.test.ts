// The mock as a user runs it: `npm start`'s command as a real process, called through the package's
// typed client, and stopped the way a terminal's Ctrl-C does it; on each Node.js release tested.
import { execFile, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { busyPortMessage, prismFailureMessage } from "../../src/cli/mock.js";
import { createPartnerClient } from "@partner-platform/sdk";
import { freePort } from "../../scripts/free-port.js";
import { startCommand } from "../../scripts/start-command.js";
import { packageRoot } from "../../src/paths.js";
import { describeOnEachNode, type NodeRuntime } from "../node-runtimes.js";

const run = promisify(execFile);

/** `npm start -- --port N` without npm, on `node`, in a process group of its own (as a terminal runs it). */
function startMock(port: number, node: NodeRuntime): ChildProcessWithoutNullStreams {
  const { args, cwd } = startCommand("--port", String(port));
  return spawn(node.exe, args, { cwd, detached: true });
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

async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  const free = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => resolve(true));
  });
  if (free) await new Promise((resolve) => server.close(resolve));
  return free;
}

describeOnEachNode("partner-platform mock", (node) => {
  let mock: ChildProcessWithoutNullStreams;
  let port: number;
  let origin: string;
  let banner: string;
  let stderr = "";

  beforeAll(async () => {
    port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    mock = startMock(port, node);
    mock.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
    // The banner is printed once Prism reports that it listens: readiness as an event, not a poll.
    banner = await waitForOutput(mock, "Ctrl-C stops it.");
  });

  afterAll(async () => {
    if (mock.exitCode === null && mock.signalCode === null) {
      process.kill(-mock.pid!, "SIGINT");
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
    expect(search.response.status).toBe(200);
    expect(search.data?.businesses.map((b) => b.businessID)).toEqual(["4711", "4712"]);

    const request = await c.POST("/api/v4/requests", {
      body: { categoryID: "1000123", zipCode: "10001", customer: { name: "Jane Doe", email: "jane.doe@example.com", phone: "+12125550143" } },
    });
    expect(request.response.status).toBe(201);
    expect(request.data?.requestID).toBe("90000001");
    // Headers carry the spec's examples, consistent with the body (D35, D36), not Prism's filler "string".
    expect(request.response.headers.get("location")).toBe(`/api/v4/requests/${request.data?.requestID}`);

    const webhook = await c.POST("/api/v2/webhooks", {
      body: { url: "https://hooks.example.com/p", events: ["lead.created"], businessID: "4711", secret: "0123456789abcdef" },
    });
    expect(webhook.response.status).toBe(201);
    expect(webhook.data?.status).toBe("enabled");
    expect(webhook.data).not.toHaveProperty("secret");
    expect(webhook.response.headers.get("location")).toBe(`/api/v2/webhooks/${webhook.data?.webhookID}`);
  });

  // The Getting started guide (spec/guides/, in the reference docs) as a partner follows it: its shell
  // blocks in order, against this mock (its port instead of 4010).
  it("runs the Getting started guide's commands as written", async () => {
    const guide = readFileSync(path.join(packageRoot, "spec/guides/01-getting-started.md"), "utf8");
    const blocks = [...guide.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!.replaceAll("127.0.0.1:4010", `127.0.0.1:${port}`));
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    // Each curl's answer on a line of its own, and the token shown, so that each step can be checked.
    const script = [...blocks, 'echo "token:$TOKEN"'].join("\necho\n");
    const { stdout } = await run("bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", script], { cwd: packageRoot });
    const lines = stdout.split("\n").filter(Boolean);
    expect(lines.at(-1)).toMatch(/^token:\S+/);
    const [search, created] = lines.slice(0, -1).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(Object.keys(search!)).toContain("businesses");
    expect(created).toHaveProperty("requestID");
  });

  it("answers 401 problem+json to a call without credentials", async () => {
    // The client always sends its token: take it off on the way out (the client's retry after a 401 too).
    const withoutCredentials = (request: Request) => {
      if (!request.url.endsWith("/oauth2/token")) request.headers.delete("Authorization");
      return fetch(request);
    };
    const { response, error } = await client(withoutCredentials).GET("/api/v2/businesses/search", {
      params: { query: { category_id: "1000123", zip: "10001" } },
    });
    expect(response.status).toBe(401);
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(response.headers.get("www-authenticate")).toBeTruthy();
    expect(error?.type).toBe("urn:partner-platform:problem:unauthenticated");
  });

  it("answers 422 to a body that violates the schema, naming the violation in sl-violations", async () => {
    const { response, error } = await client().POST("/api/v2/webhooks", {
      body: { url: "http://hooks.example.com/p", events: ["lead.created"], businessID: "4711", secret: "0123456789abcdef" },
    });
    expect(response.status).toBe(422);
    expect(error?.type).toBe("urn:partner-platform:problem:validation-failed");
    expect(response.headers.get("sl-violations")).toContain('"url"');
  });

  it("answers 429 with a problem when asked with Prefer: code=429", async () => {
    const { response, error } = await client().GET("/api/v2/businesses/search", {
      params: { query: { category_id: "1000123", zip: "10001" } },
      headers: { Prefer: "code=429" },
    });
    expect(response.status).toBe(429);
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(error?.type).toBe("urn:partner-platform:problem:rate-limited");
    // The wait in the header is the one the body's detail names.
    expect(response.headers.get("retry-after")).toBe(/retry after (\d+) seconds/.exec(error?.detail ?? "")?.[1]);
  });

  it("refuses a busy port with one line naming the port and --port", async () => {
    const second = startMock(port, node);
    let err = "";
    second.stderr.setEncoding("utf8").on("data", (t: string) => (err += t));
    const [code] = (await once(second, "exit")) as [number];
    expect(code).not.toBe(0);
    expect(err).toBe(`partner-platform: ${busyPortMessage("127.0.0.1", port)}\n`);
    expect(err).toContain(`port ${port}`);
    expect(err).toContain("--port");
  });

  it("stops Prism and exits with status 0 on Ctrl-C (SIGINT to the whole process group)", async () => {
    process.kill(-mock.pid!, "SIGINT");
    const [code, signal] = (await once(mock, "exit")) as [number | null, string | null];
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(stderr).toBe("");
    expect(await portIsFree(port)).toBe(true);
  });
});

describe("Prism failing on its own", () => {
  it("reports a port taken between the check and Prism's bind as a busy port", () => {
    // The last lines Prism writes to stderr when its listen() fails.
    const stderr = "      --seed  Provide a seed ...  [string]\n\nlisten EADDRINUSE: address already in use 127.0.0.1:4010\n";
    expect(prismFailureMessage(stderr, 1, "127.0.0.1", 4010)).toBe(busyPortMessage("127.0.0.1", 4010));
  });

  it("reports any other failure with Prism's last line", () => {
    expect(prismFailureMessage("usage...\nUnable to parse spec\n", 1, "127.0.0.1", 4010)).toBe("Prism exited with code 1: Unable to parse spec");
  });
});
