// What an attacker meets at the reference server (issue 11): the token endpoint's throttle (D30), HTTP
// Basic client authentication (D31), the bound on live tokens (D32), bytes that are not UTF-8 (D29),
// business ownership (D27) and webhook URLs the parser cannot take (D28).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createPartnerClient } from "@partner-platform/sdk";
import { failedAuthBudget, maxLiveTokensPerClient } from "../../src/server/contract.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";

const [acme, globex] = loadConfig().clients as [ReturnType<typeof loadConfig>["clients"][number], ReturnType<typeof loadConfig>["clients"][number]];
const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

// One server for what does not spend a throttle budget (a start takes seconds here); the throttle tests
// start their own.
let shared: RunningServer;
beforeAll(async () => {
  shared = await startServer({ clock: { mode: "virtual" }, conformance: true, log: () => undefined });
});
afterAll(async () => shared.close());

async function start(options: { trustProxy?: string[] } = {}): Promise<RunningServer> {
  const server = await startServer({ clock: { mode: "virtual" }, conformance: true, log: () => undefined, ...options });
  servers.push(server);
  return server;
}

const formType = { "content-type": "application/x-www-form-urlencoded" };

async function post(server: RunningServer, path: string, body: string | Buffer, headers: Record<string, string>) {
  const response = await fetch(`${server.url}${path}`, { method: "POST", body, headers });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, type: response.headers.get("content-type")?.split(";")[0], body: json };
}

const tokenForm = (id: string, secret: string) => new URLSearchParams({ grant_type: "client_credentials", client_id: id, client_secret: secret }).toString();
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`;

async function bearer(server: RunningServer, client = acme): Promise<string> {
  const r = await post(server, "/oauth2/token", tokenForm(client.clientId, client.clientSecret), formType);
  expect(r.status).toBe(200);
  return r.body.access_token as string;
}

describe("token endpoint throttle (D30)", () => {
  it("answers 429 problem+json with Retry-After once a client id's failed-authentication budget is spent; other clients and successes are unaffected", async () => {
    const server = await start();
    // Successes never count: more than the budget of them first.
    for (let i = 0; i <= failedAuthBudget.perClientId; i++) await bearer(server);
    const answers = [];
    for (let i = 0; i <= failedAuthBudget.perClientId; i++) answers.push(await post(server, "/oauth2/token", tokenForm(acme.clientId, "wrong"), formType));
    expect(answers.slice(0, -1).map((a) => a.status)).toEqual(Array(failedAuthBudget.perClientId).fill(401));
    const throttled = answers.at(-1)!;
    expect([throttled.status, throttled.type, throttled.body.type]).toEqual([429, "application/problem+json", "urn:partner-platform:problem:rate-limited"]);
    const retryAfter = Number(throttled.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(failedAuthBudget.windowSeconds);
    // The right secret too is answered 429 until the window ends: the budget is the client id's.
    expect((await post(server, "/oauth2/token", tokenForm(acme.clientId, acme.clientSecret), formType)).status).toBe(429);
    // Another client from the same address still gets its token.
    await bearer(server, globex);
  });

  it("throttles a source address that spends its budget over many client ids", async () => {
    const server = await start();
    for (let i = 0; i < failedAuthBudget.perAddress; i++) {
      const r = await post(server, "/oauth2/token", tokenForm(`guess-${i % 50}-${Math.floor(i / 50)}`, "wrong"), formType);
      expect(r.status).toBe(401);
    }
    const r = await post(server, "/oauth2/token", tokenForm(globex.clientId, globex.clientSecret), formType);
    expect([r.status, r.body.type]).toEqual([429, "urn:partner-platform:problem:rate-limited"]);
  });

  /** Spends the per-address budget from `spender` (as X-Forwarded-For), then asks for a token from `spender` and from `other`. */
  async function afterSpending(server: RunningServer) {
    const from = (address: string) => ({ ...formType, "x-forwarded-for": address });
    for (let i = 0; i < failedAuthBudget.perAddress; i++) {
      const r = await post(server, "/oauth2/token", tokenForm(`guess-${i % 50}-${Math.floor(i / 50)}`, "wrong"), from("203.0.113.7"));
      expect(r.status).toBe(401);
    }
    const token = async (address: string) => (await post(server, "/oauth2/token", tokenForm(globex.clientId, globex.clientSecret), from(address))).status;
    return { spender: await token("203.0.113.7"), other: await token("198.51.100.9") };
  }

  it("behind a trusted proxy, counts each client address the proxy forwards, not the proxy's own", async () => {
    expect(await afterSpending(await start({ trustProxy: ["127.0.0.1"] }))).toEqual({ spender: 429, other: 200 });
  });

  it("believes no X-Forwarded-For unless its sender is a trusted proxy", async () => {
    expect(await afterSpending(await start())).toEqual({ spender: 429, other: 429 });
    expect(await afterSpending(await start({ trustProxy: ["10.0.0.0/8"] }))).toEqual({ spender: 429, other: 429 });
  });
});

describe("token requests as OAuth clients send them (D31)", () => {
  it("accepts HTTP Basic client authentication, percent-encoded as RFC 6749 §2.3.1 says", async () => {
    const server = shared;
    const r = await post(server, "/oauth2/token", "grant_type=client_credentials&scope=demand::search", { ...formType, authorization: basic(acme.clientId, acme.clientSecret) });
    expect([r.status, r.body.scope]).toEqual([200, "demand::search"]);
  });

  it.each(["basic", "body"] as const)("serves the typed client authenticating with %s", async (clientAuthentication) => {
    const api = createPartnerClient({ baseUrl: shared.url, authUrl: shared.url, clientId: acme.clientId, clientSecret: acme.clientSecret, scopes: ["demand::search"], clientAuthentication });
    const { data, response } = await api.GET("/api/v2/businesses/search", { params: { query: { category_id: "1000123", zip: "10001" } } });
    expect([response.status, data?.businesses.length]).toEqual([200, 2]);
  });

  it("answers a wrong Basic secret 401 invalid_client with a Basic challenge", async () => {
    const server = shared;
    const r = await post(server, "/oauth2/token", "grant_type=client_credentials", { ...formType, authorization: basic(acme.clientId, "wrong") });
    expect([r.status, r.body.error, r.headers.get("www-authenticate")]).toEqual([401, "invalid_client", 'Basic realm="partner-platform"']);
  });

  it.each([
    ["Basic and a client_secret in the body", tokenForm(acme.clientId, acme.clientSecret), basic(acme.clientId, acme.clientSecret)],
    ["Basic and another client_id in the body", "grant_type=client_credentials&client_id=partner-globex", basic(acme.clientId, acme.clientSecret)],
    ["a malformed Basic header", "grant_type=client_credentials", "Basic !!!"],
    ["a Basic header without a colon", "grant_type=client_credentials", `Basic ${Buffer.from("partner-acme").toString("base64")}`],
    ["no credentials at all", "grant_type=client_credentials", undefined],
    ["a repeated parameter", `${tokenForm(acme.clientId, acme.clientSecret)}&scope=demand::search&scope=webhooks::write`, undefined],
    ["a repeated client_id", `${tokenForm(acme.clientId, acme.clientSecret)}&client_id=partner-globex`, undefined],
  ])("answers %s with 400 invalid_request", async (_what, body, authorization) => {
    const server = shared;
    const r = await post(server, "/oauth2/token", body, { ...formType, ...(authorization ? { authorization } : {}) });
    expect([r.status, r.body.error]).toEqual([400, "invalid_request"]);
  });
});

describe("live tokens per client (D32)", () => {
  it(`keeps at most ${maxLiveTokensPerClient}: the next one replaces the oldest`, async () => {
    const server = shared;
    const first = await bearer(server);
    for (let i = 1; i < maxLiveTokensPerClient; i++) await bearer(server);
    const count = async () => (await server.db.query<{ n: number }>("SELECT count(*)::int AS n FROM tokens WHERE client_id = $1", [acme.clientId])).rows[0]!.n;
    expect(await count()).toBe(maxLiveTokensPerClient);
    const search = (token: string) => fetch(`${server.url}/api/v2/businesses/search?category_id=1000123&zip=10001`, { headers: { authorization: `Bearer ${token}` } });
    expect((await search(first)).status).toBe(200);
    const latest = await bearer(server);
    expect(await count()).toBe(maxLiveTokensPerClient);
    expect((await search(latest)).status).toBe(200);
    expect((await search(first)).status).toBe(401);
  });
});

describe("bytes that are not what they claim (D29)", () => {
  const invalid = Buffer.concat([Buffer.from('{"categoryID":"1000123","zipCode":"10001","customer":{"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","email":"j@example.com","phone":"+12125550143"}}')]);

  it("refuses invalid UTF-8 in a JSON body with 400 problem+json pointing at the body, and stores nothing", async () => {
    const server = shared;
    const token = await bearer(server);
    const r = await post(server, "/api/v4/requests", invalid, { "content-type": "application/json", authorization: `Bearer ${token}` });
    expect([r.status, r.type, r.body.type, r.body.errors]).toEqual([400, "application/problem+json", "urn:partner-platform:problem:malformed-request", [{ pointer: "", detail: "invalid UTF-8 byte sequence" }]]);
    expect((await server.db.query("SELECT 1 FROM requests")).rows).toEqual([]);
  });

  it("refuses invalid UTF-8 in a control API body and in a token form", async () => {
    const server = shared;
    const control = await post(server, "/conformance/events", Buffer.concat([Buffer.from('{"event":"lead.created","businessID":"47'), Buffer.from([0xc3]), Buffer.from('"}')]), { "content-type": "application/json" });
    expect([control.status, control.type]).toEqual([400, "application/problem+json"]);
    const form = await post(server, "/oauth2/token", Buffer.concat([Buffer.from("grant_type=client_credentials&client_id=partner-acme&client_secret="), Buffer.from([0xff])]), formType);
    expect([form.status, form.body.error]).toEqual([400, "invalid_request"]);
  });

  it("answers a charset other than UTF-8 with 415", async () => {
    const server = shared;
    const token = await bearer(server);
    for (const charset of ["utf-16", "iso-8859-1"]) {
      const r = await post(server, "/api/v4/requests", "{}", { "content-type": `application/json; charset=${charset}`, authorization: `Bearer ${token}` });
      expect([r.status, r.type]).toEqual([415, "application/problem+json"]);
    }
    const ok = await post(server, "/api/v4/requests", "{}", { "content-type": "application/json; charset=UTF-8", authorization: `Bearer ${token}` });
    expect(ok.status).toBe(422);
  });
});

describe("webhook registration (D27, D28)", () => {
  const hook = (businessID: string, url = "https://hooks.example.com/h") => JSON.stringify({ url, events: ["lead.created"], businessID, secret: "whsec-test-0123456789" });

  it("answers a business of another partner 403 business-forbidden at /businessID", async () => {
    const server = shared;
    const r = await post(server, "/api/v2/webhooks", hook("4713"), { "content-type": "application/json", authorization: `Bearer ${await bearer(server)}` });
    expect([r.status, r.type, r.body.type, r.body.errors?.[0]?.pointer]).toEqual([403, "application/problem+json", "urn:partner-platform:problem:business-forbidden", "/businessID"]);
    const own = await post(server, "/api/v2/webhooks", hook("4713"), { "content-type": "application/json", authorization: `Bearer ${await bearer(server, globex)}` });
    expect(own.status).toBe(201);
  });

  it("queues a business's events only for its owner's webhooks, even one registered before ownership was checked", async () => {
    const server = shared;
    // As if registered before D27, or before the business changed owner: stored directly.
    await server.db.query(
      "INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ('900000001', $1, 'https://does-not-resolve.invalid/intruder', $2, '4711', 'whsec-test-0123456789', 0)",
      [globex.clientId, JSON.stringify(["review.created"])],
    );
    const own = await post(server, "/api/v2/webhooks", JSON.stringify({ url: "https://does-not-resolve.invalid/owner", events: ["review.created"], businessID: "4711", secret: "whsec-test-0123456789" }), {
      "content-type": "application/json",
      authorization: `Bearer ${await bearer(server)}`,
    });
    expect(own.status).toBe(201);
    await server.engine.emit("review.created", "4711", { reviewID: "1", businessID: "4711", rating: 5, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });
    const { rows } = await server.db.query<{ webhook_id: string }>("SELECT DISTINCT webhook_id FROM attempts WHERE webhook_id IN ('900000001', $1)", [own.body.webhookID]);
    expect(rows.map((r) => r.webhook_id)).toEqual([own.body.webhookID]);
  });

  it.each(["https://example.com:99999/", "https://256.1.1.1/", "https://1.2.3.4.5/", "https://exa%20mple.com/", "https://user:pass@hooks.example.com/"])(
    "answers %s 422 at /url, never 500, and never echoes a password",
    async (url) => {
      const server = shared;
      const r = await post(server, "/api/v2/webhooks", hook("4711", url), { "content-type": "application/json", authorization: `Bearer ${await bearer(server)}` });
      expect([r.status, r.body.errors?.[0]?.pointer]).toEqual([422, "/url"]);
      expect(JSON.stringify(r.body)).not.toContain("pass@");
    },
  );
});
