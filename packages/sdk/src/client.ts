// Typed client for Partner Platform v4 on openapi-fetch, with the client-credentials token handled
// for the caller (spec/DECISIONS.md D11, D12).
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "../../../generated/types/api.js";

export type Scope = components["schemas"]["Scope"];
export type Problem = components["schemas"]["Problem"];
export type OAuthError = components["schemas"]["OAuthError"];
export type AccessToken = components["schemas"]["AccessToken"];

export interface PartnerClientOptions {
  /** `{base_url}`, e.g. `https://api.partner-platform.example`. */
  baseUrl: string;
  /** `{auth_url}`, e.g. `https://auth.partner-platform.example`. */
  authUrl: string;
  clientId: string;
  clientSecret: string;
  /**
   * How the client authenticates at the token endpoint (RFC 6749 §2.3.1, DECISIONS D31): `"body"`
   * (client_id and client_secret as form parameters, the default) or `"basic"` (HTTP Basic).
   */
  clientAuthentication?: "body" | "basic";
  /** Scopes to request; the token covers all of them. */
  scopes: readonly Scope[];
  /** Injected fetch (tests, proxies); defaults to the global one. */
  fetch?: (request: Request) => Promise<Response>;
  /**
   * How many times a call refused with 401 is made again, each time with a new token. Default 1; more
   * only where tokens can expire between being issued and used (a server on a fast test clock).
   */
  tokenRenewals?: number;
  /** Renew the token this many seconds before `expires_in` runs out. Default 60. */
  refreshMarginSeconds?: number;
  /** Milliseconds since the epoch; injectable for tests. Default `Date.now`. */
  now?: () => number;
}

/** The token endpoint refused the credentials or scopes; `body` is its RFC 6749 error. */
export class TokenRequestError extends Error {
  override readonly name = "TokenRequestError";
  constructor(
    readonly status: number,
    readonly body: OAuthError | undefined,
  ) {
    super(
      `Token request failed with HTTP ${status}` +
        (body ? `: ${body.error}${body.error_description ? ` (${body.error_description})` : ""}` : ""),
    );
  }
}

export type PartnerClient = Client<paths> & {
  /** A valid access token (cached, or obtained now). */
  getAccessToken(): Promise<string>;
  /** Forget the cached token, so the next call obtains a new one. */
  invalidateToken(): void;
};

interface CachedToken {
  value: string;
  /** When to stop using it, ms since the epoch. */
  renewAt: number;
}

/** Obtains, caches and single-flights client-credentials tokens. */
function createTokenSource(options: PartnerClientOptions, fetchImpl: (request: Request) => Promise<Response>) {
  const now = options.now ?? Date.now;
  const marginMs = (options.refreshMarginSeconds ?? 60) * 1000;
  const auth = createClient<paths>({ baseUrl: options.authUrl, fetch: fetchImpl });
  let cached: CachedToken | undefined;
  let inflight: Promise<CachedToken> | undefined;

  async function request(): Promise<CachedToken> {
    const requestedAt = now();
    const scope = options.scopes.join(" ");
    // RFC 6749 §2.3.1: each part form-urlencoded before base64 (Appendix B: what URLSearchParams writes).
    const form = (v: string) => new URLSearchParams([["", v]]).toString().slice(1);
    const { data, error, response } =
      options.clientAuthentication === "basic"
        ? await auth.POST("/oauth2/token", {
            headers: {
              "Content-Type": "application/x-www-form-urlencoded",
              Authorization: `Basic ${btoa(`${form(options.clientId)}:${form(options.clientSecret)}`)}`,
            },
            body: { grant_type: "client_credentials", scope },
          })
        : await auth.POST("/oauth2/token", {
            headers: { "Content-Type": "application/x-www-form-urlencoded" },
            body: { grant_type: "client_credentials", client_id: options.clientId, client_secret: options.clientSecret, scope },
          });
    if (!data) {
      const body = error && typeof error === "object" && "error" in error ? (error as OAuthError) : undefined;
      throw new TokenRequestError(response.status, body);
    }
    // Short-lived tokens are renewed at half their life rather than never being cached.
    const lifetimeMs = data.expires_in * 1000;
    const margin = Math.min(marginMs, lifetimeMs / 2);
    return { value: data.access_token, renewAt: requestedAt + lifetimeMs - margin };
  }

  return {
    async get(): Promise<string> {
      if (cached && now() < cached.renewAt) return cached.value;
      inflight ??= request().finally(() => {
        inflight = undefined;
      });
      const token = await inflight;
      cached = token;
      return token.value;
    },
    /** Drops the cached token unless a newer one than `stale` was obtained meanwhile. */
    invalidate(stale?: string): void {
      if (stale === undefined || cached?.value === stale) cached = undefined;
    },
  };
}

/**
 * Creates the typed API client. Every call carries `Authorization: Bearer <token>`; a `401` answer
 * makes it obtain a new token and retry that call once (`tokenRenewals` times). Errors come back as typed problem+json
 * values in `error`; a refused token request rejects with {@link TokenRequestError}.
 */
export function createPartnerClient(options: PartnerClientOptions): PartnerClient {
  const fetchImpl = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const tokens = createTokenSource(options, fetchImpl);
  // A copy of each request taken before it is sent: its body can be sent again after a 401.
  const replayable = new WeakMap<Request, Request>();

  const bearer: Middleware = {
    async onRequest({ request }) {
      const token = await tokens.get();
      request.headers.set("Authorization", `Bearer ${token}`);
      replayable.set(request, request.clone());
      return request;
    },
    async onResponse({ request, response }) {
      const copy = replayable.get(request);
      replayable.delete(request);
      let answer = response;
      let used = copy?.headers.get("Authorization")?.slice("Bearer ".length);
      for (let renewals = 0; answer.status === 401 && copy && renewals < (options.tokenRenewals ?? 1); renewals++) {
        // Only the refused token is dropped: another call may already have fetched a newer one.
        tokens.invalidate(used);
        used = await tokens.get();
        const again = copy.clone();
        again.headers.set("Authorization", `Bearer ${used}`);
        await answer.body?.cancel();
        answer = await fetchImpl(again);
      }
      return answer === response ? undefined : answer;
    },
  };

  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: fetchImpl });
  client.use(bearer);
  return Object.assign(client, {
    getAccessToken: () => tokens.get(),
    invalidateToken: () => tokens.invalidate(),
  });
}
