import { describe, expect, it } from "vitest";
import { createPartnerClient, TokenRequestError, type PartnerClientOptions } from "@partner-platform/sdk";

const BASE = "https://api.test";
const AUTH = "https://auth.test";

/** A fake Partner Platform behind an injected fetch: issues numbered tokens and records calls. */
function fakePlatform(opts: { expiresIn?: number; rejectTokens?: Set<string>; tokenStatus?: number } = {}) {
  const tokenRequests: URLSearchParams[] = [];
  const tokenAuthorizations: (string | null)[] = [];
  const apiCalls: { url: string; auth: string | null; body: string }[] = [];
  let issued = 0;
  let gate: Promise<void> | undefined;
  const fetch = async (request: Request): Promise<Response> => {
    if (request.url === `${AUTH}/oauth2/token`) {
      expect(request.method).toBe("POST");
      expect(request.headers.get("content-type")).toBe("application/x-www-form-urlencoded");
      tokenRequests.push(new URLSearchParams(await request.text()));
      tokenAuthorizations.push(request.headers.get("authorization"));
      if (opts.tokenStatus) {
        return Response.json(
          { error: "invalid_client", error_description: "Client authentication failed." },
          { status: opts.tokenStatus },
        );
      }
      if (gate) await gate;
      issued++;
      return Response.json({ access_token: `tok-${issued}`, token_type: "Bearer", expires_in: opts.expiresIn ?? 3600, scope: "demand::search" });
    }
    const auth = request.headers.get("authorization");
    apiCalls.push({ url: request.url, auth, body: await request.text() });
    if (opts.rejectTokens?.has(auth ?? "")) {
      return new Response(
        JSON.stringify({ type: "urn:partner-platform:problem:unauthenticated", title: "Unauthenticated", status: 401, detail: "The access token expired." }),
        { status: 401, headers: { "content-type": "application/problem+json", "www-authenticate": 'Bearer error="invalid_token"' } },
      );
    }
    if (request.url.startsWith(`${BASE}/api/v4/requests`)) {
      return new Response(
        JSON.stringify({ type: "urn:partner-platform:problem:validation-failed", title: "Validation failed", status: 422, detail: "1 error", errors: [{ pointer: "/zipCode", detail: "must match pattern" }] }),
        { status: 422, headers: { "content-type": "application/problem+json" } },
      );
    }
    return Response.json({ businesses: [] });
  };
  return {
    fetch,
    tokenRequests,
    tokenAuthorizations,
    apiCalls,
    /** Holds token answers until `open()`, so that concurrent callers overlap. */
    hold() {
      let open!: () => void;
      gate = new Promise<void>((resolve) => (open = resolve));
      return { open };
    },
  };
}

function client(platform: ReturnType<typeof fakePlatform>, extra: Partial<PartnerClientOptions> = {}) {
  return createPartnerClient({
    baseUrl: BASE,
    authUrl: AUTH,
    clientId: "partner-acme",
    clientSecret: "s3cr3t",
    scopes: ["demand::search", "demand::request"],
    fetch: platform.fetch,
    ...extra,
  });
}

const search = { params: { query: { category_id: "1000123", zip: "10001" } } } as const;

describe("createPartnerClient", () => {
  it("gets a client-credentials token, form-encoded, and sends it as a Bearer token", async () => {
    const platform = fakePlatform();
    const { data, error } = await client(platform).GET("/api/v2/businesses/search", search);
    expect(error).toBeUndefined();
    expect(data).toEqual({ businesses: [] });
    expect(Object.fromEntries(platform.tokenRequests[0]!)).toEqual({
      grant_type: "client_credentials",
      client_id: "partner-acme",
      client_secret: "s3cr3t",
      scope: "demand::search demand::request",
    });
    expect(platform.apiCalls[0]).toMatchObject({
      url: `${BASE}/api/v2/businesses/search?category_id=1000123&zip=10001`,
      auth: "Bearer tok-1",
    });
  });

  it("with clientAuthentication basic, sends each part form-urlencoded as RFC 6749 Appendix B says, and no credentials in the form", async () => {
    const platform = fakePlatform();
    await client(platform, { clientAuthentication: "basic", clientSecret: "s3 cr3t!'()~*-._:é" }).GET("/api/v2/businesses/search", search);
    const expected = "partner-acme:s3+cr3t%21%27%28%29%7E*-._%3A%C3%A9";
    expect(platform.tokenAuthorizations).toEqual([`Basic ${Buffer.from(expected).toString("base64")}`]);
    expect(Object.fromEntries(platform.tokenRequests[0]!)).toEqual({ grant_type: "client_credentials", scope: "demand::search demand::request" });
  });

  it("caches the token until shortly before expires_in, then renews it", async () => {
    const platform = fakePlatform({ expiresIn: 3600 });
    let now = 1_000_000;
    const c = client(platform, { now: () => now, refreshMarginSeconds: 60 });
    await c.GET("/api/v2/businesses/search", search);
    now += (3600 - 61) * 1000;
    await c.GET("/api/v2/businesses/search", search);
    expect(platform.tokenRequests).toHaveLength(1);
    now += 2 * 1000; // inside the 60 s margin
    await c.GET("/api/v2/businesses/search", search);
    expect(platform.tokenRequests).toHaveLength(2);
    expect(platform.apiCalls.map((c) => c.auth)).toEqual(["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]);
  });

  it("shares one token request among concurrent calls", async () => {
    const platform = fakePlatform();
    const gate = platform.hold();
    const c = client(platform);
    const calls = Array.from({ length: 10 }, () => c.GET("/api/v2/businesses/search", search));
    gate.open();
    await Promise.all(calls);
    expect(platform.tokenRequests).toHaveLength(1);
    expect(new Set(platform.apiCalls.map((c) => c.auth))).toEqual(new Set(["Bearer tok-1"]));
  });

  it("on a 401, renews the token once and replays the call with its body", async () => {
    const platform = fakePlatform({ rejectTokens: new Set(["Bearer tok-1"]) });
    const c = client(platform);
    const body = { categoryID: "1000123", zipCode: "1000", customer: { name: "Jane Doe", email: "jane@example.com", phone: "+12125550143" } };
    const { error, response } = await c.POST("/api/v4/requests", { body });
    expect(platform.tokenRequests).toHaveLength(2);
    expect(platform.apiCalls.map((c) => c.auth)).toEqual(["Bearer tok-1", "Bearer tok-2"]);
    expect(JSON.parse(platform.apiCalls[1]!.body)).toEqual(body);
    expect(response.status).toBe(422);
    expect(error?.type).toBe("urn:partner-platform:problem:validation-failed");
  });

  it("retries a 401 only once and then returns the problem as a typed error", async () => {
    const platform = fakePlatform({ rejectTokens: new Set(["Bearer tok-1", "Bearer tok-2"]) });
    const { data, error, response } = await client(platform).GET("/api/v2/businesses/search", search);
    expect(data).toBeUndefined();
    expect(response.status).toBe(401);
    expect(error).toMatchObject({ type: "urn:partner-platform:problem:unauthenticated", status: 401 });
    expect(platform.apiCalls).toHaveLength(2);
  });

  it("renews as many times as tokenRenewals says, each time with a new token", async () => {
    const platform = fakePlatform({ rejectTokens: new Set(["Bearer tok-1", "Bearer tok-2", "Bearer tok-3"]) });
    const { data, response } = await client(platform, { tokenRenewals: 3 }).GET("/api/v2/businesses/search", search);
    expect(response.status).toBe(200);
    expect(data).toEqual({ businesses: [] });
    expect(platform.apiCalls.map((c) => c.auth)).toEqual(["Bearer tok-1", "Bearer tok-2", "Bearer tok-3", "Bearer tok-4"]);
  });

  it("rejects with TokenRequestError carrying the RFC 6749 error when the token is refused", async () => {
    const platform = fakePlatform({ tokenStatus: 401 });
    const call = client(platform).GET("/api/v2/businesses/search", search);
    await expect(call).rejects.toBeInstanceOf(TokenRequestError);
    await expect(call).rejects.toMatchObject({ status: 401, body: { error: "invalid_client" } });
    expect(platform.apiCalls).toHaveLength(0);
  });

  it("does not cache a refused token request: the next call asks again", async () => {
    const platform = fakePlatform({ tokenStatus: 400 });
    const c = client(platform);
    await expect(c.getAccessToken()).rejects.toThrow(/HTTP 400: invalid_client/);
    await expect(c.getAccessToken()).rejects.toThrow(TokenRequestError);
    expect(platform.tokenRequests).toHaveLength(2);
  });
});
