// The reference server's API: every operation's success and error paths, on the embedded database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { createAjv, fieldErrors } from "../../src/server/contract.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import { api as apiOf, client, control } from "./helpers.js";

const config = loadConfig();
let server: RunningServer;

beforeAll(async () => {
  server = await startServer({
    clock: { mode: "virtual" },
    conformance: true,
    config: { ...config, clients: [...config.clients, { clientId: "search-only", clientSecret: "search-only-secret", scopes: ["demand::search"], contactEmail: "s@example.com", businessIDs: [] }] },
    log: () => undefined,
  });
});
afterAll(async () => server.close());

async function token(clientId = client.clientId, secret = client.clientSecret, scope?: string): Promise<Response> {
  const form = new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, client_secret: secret, ...(scope ? { scope } : {}) });
  return fetch(`${server.url}/oauth2/token`, { method: "POST", body: form, headers: { "content-type": "application/x-www-form-urlencoded" } });
}

async function bearer(clientId?: string, secret?: string): Promise<string> {
  return ((await (await token(clientId, secret)).json()) as { access_token: string }).access_token;
}

const api = () => apiOf(server);

async function raw(method: string, path: string, body: string | undefined, headers: Record<string, string>) {
  const response = await fetch(`${server.url}${path}`, { method, body, headers });
  // The whole header: JSON answers carry the declared media type exactly, with no charset (D36).
  return { status: response.status, type: response.headers.get("content-type"), headers: response.headers, body: (await response.json().catch(() => undefined)) as any };
}

const request = { categoryID: "1000123", zipCode: "10001", customer: { name: "Jane Doe", email: "jane@example.com", phone: "+12125550143" } };

describe("token endpoint (RFC 6749)", () => {
  it("issues a Bearer token with expiry and the granted scopes, not cached", async () => {
    const response = await token(undefined, undefined, "demand::search");
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(await response.json()).toMatchObject({ token_type: "Bearer", expires_in: config.tokenLifetimeSeconds, scope: "demand::search" });
  });

  it("answers invalid_client (401), invalid_scope and unsupported_grant_type (400)", async () => {
    const wrong = await token(client.clientId, "wrong-secret");
    expect([wrong.status, ((await wrong.json()) as { error: string }).error]).toEqual([401, "invalid_client"]);
    const scope = await token(undefined, undefined, "demand::everything");
    expect([scope.status, ((await scope.json()) as { error: string }).error]).toEqual([400, "invalid_scope"]);
    const grant = await raw("POST", "/oauth2/token", "grant_type=password&client_id=a&client_secret=b", { "content-type": "application/x-www-form-urlencoded" });
    expect([grant.status, grant.body.error]).toEqual([400, "unsupported_grant_type"]);
    const json = await raw("POST", "/oauth2/token", "{}", { "content-type": "application/json" });
    expect([json.status, json.body.error, json.type]).toEqual([400, "invalid_request", "application/json"]);
  });
});

describe("authentication and scopes", () => {
  it("answers 401 problem+json with WWW-Authenticate without a token or with a forged one", async () => {
    for (const headers of [{}, { authorization: "Bearer forged" }] as Record<string, string>[]) {
      const r = await raw("GET", "/api/v2/businesses/search?category_id=1000123&zip=10001", undefined, headers);
      expect(r.status).toBe(401);
      expect(r.type).toBe("application/problem+json");
      expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(r.body.type).toBe("urn:partner-platform:problem:unauthenticated");
    }
  });

  it("answers 401 once the token expired on the server's clock", async () => {
    const t = await bearer();
    await control(server).advance(config.tokenLifetimeSeconds);
    const r = await raw("GET", "/api/v2/businesses/search?category_id=1000123&zip=10001", undefined, { authorization: `Bearer ${t}` });
    expect([r.status, r.body.detail]).toEqual([401, "The access token expired."]);
  });

  it("answers 403 naming the scope when the token lacks it", async () => {
    const t = await bearer("search-only", "search-only-secret");
    const r = await raw("POST", "/api/v4/requests", JSON.stringify(request), { authorization: `Bearer ${t}`, "content-type": "application/json" });
    expect(r.status).toBe(403);
    expect(r.headers.get("www-authenticate")).toBe('Bearer error="insufficient_scope", scope="demand::request"');
  });
});

describe("operations", () => {
  it("searches businesses, best rated first, and refuses invalid query parameters with 400", async () => {
    const { data } = await api().GET("/api/v2/businesses/search", { params: { query: { category_id: "1000123", zip: "10001" } } });
    expect(data?.businesses.map((b) => b.businessID)).toEqual(["4711", "4712"]);
    const t = await bearer();
    const r = await raw("GET", "/api/v2/businesses/search?category_id=plumbing", undefined, { authorization: `Bearer ${t}` });
    expect(r.status).toBe(400);
    expect(r.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(["/query/category_id", "/query/zip"]);
  });

  it("creates a service request with one lead per matched business", async () => {
    const { data, response } = await api().POST("/api/v4/requests", { body: request });
    expect(response.status).toBe(201);
    expect(response.headers.get("location")).toBe(`/api/v4/requests/${data!.requestID}`);
    expect(data).toMatchObject({ status: "matched", categoryID: "1000123", customer: request.customer });
    expect(data!.leads.map((l) => l.businessID)).toEqual(["4711", "4712"]);
  });

  it("answers 404 for an unknown category, 422 naming the field, 415 and 413 and 400 for bad bodies", async () => {
    const t = await bearer();
    const json = { authorization: `Bearer ${t}`, "content-type": "application/json" };
    const unknown = await raw("POST", "/api/v4/requests", JSON.stringify({ ...request, categoryID: "9999999" }), json);
    expect([unknown.status, unknown.body.type]).toEqual([404, "urn:partner-platform:problem:not-found"]);
    const invalid = await raw("POST", "/api/v4/requests", JSON.stringify({ ...request, zipCode: "1000" }), json);
    expect([invalid.status, invalid.body.errors]).toEqual([422, [{ pointer: "/zipCode", detail: 'must match pattern "^[0-9]{5}$"' }]]);
    const text = await raw("POST", "/api/v4/requests", JSON.stringify(request), { ...json, "content-type": "text/plain" });
    expect(text.status).toBe(415);
    const big = await raw("POST", "/api/v4/requests", `${JSON.stringify(request)}${" ".repeat(70_000)}`, json);
    expect([big.status, big.type]).toEqual([413, "application/problem+json"]);
    const broken = await raw("POST", "/api/v4/requests", '{"categoryID": ', json);
    expect([broken.status, broken.body.type]).toEqual([400, "urn:partner-platform:problem:malformed-request"]);
  });

  it("refuses members the request bodies do not have with 422, one error at each unknown member (D16)", async () => {
    const t = await bearer();
    const json = { authorization: `Bearer ${t}`, "content-type": "application/json" };
    const webhook = { url: "https://hooks.example.com/p", events: ["lead.created"], businessID: "4711", secret: "0123456789abcdef" };
    const unknown = "must not be present: the schema has no such member";
    const typo = await raw("POST", "/api/v2/webhooks", JSON.stringify({ ...webhook, secert: "typo" }), json);
    expect([typo.status, typo.type, typo.body.type]).toEqual([422, "application/problem+json", "urn:partner-platform:problem:validation-failed"]);
    expect(typo.body.errors).toEqual([{ pointer: "/secert", detail: unknown }]);
    const nested = { ...request, source: "web", customer: { ...request.customer, nickname: "JD", "a/b~c": 1 } };
    const extra = await raw("POST", "/api/v4/requests", JSON.stringify(nested), json);
    expect(extra.status).toBe(422);
    expect(extra.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(["/customer/a~1b~0c", "/customer/nickname", "/source"]);
    // The token form stays open: RFC 6749 says unknown parameters are ignored.
    const form = new URLSearchParams({ grant_type: "client_credentials", client_id: client.clientId, client_secret: client.clientSecret, audience: "x" });
    const issued = await raw("POST", "/oauth2/token", form.toString(), { "content-type": "application/x-www-form-urlencoded" });
    expect(issued.status).toBe(200);
  });

  it("points at each unknown member of an object closed with `false` too, escaped as RFC 6901 says", () => {
    const ajv = createAjv({ allErrors: true });
    for (const keyword of ["unevaluatedProperties", "additionalProperties"]) {
      const validate = ajv.compile({ type: "object", properties: { a: { type: "object", properties: {}, [keyword]: false } }, [keyword]: false });
      expect(fieldErrors(validate, { a: { "x/y": 1 }, "b~c": 2 }, "/body").map((e) => e.pointer).sort(), keyword).toEqual(["/body/a/x~1y", "/body/b~0c"]);
    }
  });

  it("registers a webhook without echoing its secret; refuses unknown businesses and private addresses, but loopback ones while certifying", async () => {
    const body = { url: "https://hooks.example.com/p", events: ["lead.created" as const], businessID: "4711", secret: "0123456789abcdef" };
    const { data, response } = await api().POST("/api/v2/webhooks", { body });
    expect(response.status).toBe(201);
    expect(data).toMatchObject({ url: body.url, events: body.events, businessID: "4711", status: "enabled" });
    expect(JSON.stringify(data)).not.toContain(body.secret);
    const unknown = await api().POST("/api/v2/webhooks", { body: { ...body, businessID: "4799" } });
    expect(unknown.response.status).toBe(404);
    for (const url of ["https://10.1.2.3/hook", "https://192.168.1.1/hook", "https://[fd12:3456::1]/hook"]) {
      const refused = await api().POST("/api/v2/webhooks", { body: { ...body, url } });
      expect([url, refused.response.status, (refused.error as { errors?: { pointer: string }[] })?.errors?.[0]?.pointer]).toEqual([url, 422, "/url"]);
      expect((refused.error as { detail: string }).detail).toContain("--allow-private-webhooks");
    }
    // This server runs with the control API (D22): the certification suite's receiver is on loopback.
    for (const url of ["https://127.0.0.1/hook", "https://[::1]/hook", "https://localhost/hook"]) {
      expect([url, (await api().POST("/api/v2/webhooks", { body: { ...body, url } })).response.status]).toEqual([url, 201]);
    }
  });

  it("answers an unknown route with a 404 problem", async () => {
    const r = await raw("GET", "/api/v3/nothing", undefined, {});
    expect([r.status, r.type]).toEqual([404, "application/problem+json"]);
  });

  it("never answers client input with a 5xx, whatever the method, path, query, headers and body", async () => {
    const t = await bearer();
    const paths = ["/oauth2/token", "/api/v2/businesses/search", "/api/v4/requests", "/api/v2/webhooks", "/conformance/events", "/conformance/clock", "/conformance/clock/advance"];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"),
        fc.oneof(fc.constantFrom(...paths), fc.webPath()),
        fc.oneof(fc.constant(""), fc.webQueryParameters().map((q) => `?${q}`), fc.constant("?category_id=1000123&zip=10001&zip=10002")),
        fc.constantFrom(`Bearer ${t}`, "Bearer", "Basic Zm9vOmJhcg==", "Bearer a b c", undefined),
        fc.constantFrom("application/json", "application/json; charset=latin1", "application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x", "", undefined),
        fc.oneof(fc.json(), fc.string(), fc.jsonValue().map((v) => JSON.stringify({ ...request, customer: v }))),
        async (method, path, query, authorization, type, body) => {
          const headers: Record<string, string> = { ...(authorization ? { authorization } : {}), ...(type !== undefined ? { "content-type": type } : {}) };
          const hasBody = method !== "GET" && method !== "OPTIONS";
          const r = await fetch(`${server.url}${path}${query}`, { method, headers, ...(hasBody ? { body } : {}) });
          await r.body?.cancel();
          return r.status >= 400 && r.status < 500 ? true : r.status < 300;
        },
      ),
      { numRuns: 300, seed: 4711 },
    );
  });
});
