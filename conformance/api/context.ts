// What every API check works with: the contract, raw HTTP to the implementation (the checks need to
// send what a typed client cannot: no token, broken JSON, wrong types), and cached tokens per scope set.
import { Readable } from "node:stream";
import { request, type Dispatcher } from "undici";
import { CheckFailed } from "../framework/check.js";
import type { Contract, Operation, ResponseSeen } from "./contract.js";

export interface ApiSuiteOptions {
  /** The API's `{base_url}`. */
  baseUrl: string;
  /** The authorization server's `{auth_url}`. */
  authUrl: string;
  /** A client allowed every scope of the API. */
  clientId: string;
  clientSecret: string;
  /** Another client, which the run may lock out for up to a minute (D30: its wrong secrets throttled, the right one included). */
  secondClientId?: string;
  secondClientSecret?: string;
  /** A client allowed some scopes of the API but not every one (D11, D12: it is granted its own scopes alone). */
  limitedClientId?: string;
  limitedClientSecret?: string;
  /** Seed of the generated inputs (same seed, same inputs). */
  seed?: number;
  /** Generated inputs per property check. */
  runs?: number;
}

export const defaultSeed = 20261122;
export const defaultRuns = 50;

export interface CallInput {
  /** Query parameters, or a query string sent as it is (already percent-encoded, without its "?"). */
  query?: Record<string, string> | string;
  /** The raw body (bytes when they are not meant to be UTF-8); sent with `contentType`. */
  body?: string | Buffer;
  /** The body's Content-Type: `application/json` when not given, none when null. */
  contentType?: string | null;
  /** A bearer token, or none. */
  token?: string;
  /** More headers (e.g. HTTP Basic at the token endpoint). */
  headers?: Record<string, string>;
  /** A 429 with a Retry-After of at most a minute is waited out and the request made again (D18); default true. */
  waitOnRateLimit?: boolean;
  /** The body sent with `Transfer-Encoding: chunked`, no Content-Length. */
  chunked?: boolean;
  /** Sent through this dispatcher instead of the default one (e.g. from another source address, D30). */
  dispatcher?: Dispatcher;
}

/** Rate limits are the deployment's (D18): a 429 is waited out this many times per request, each for at most this long. */
export const rateLimitWaits = { times: 3, maxSeconds: 60 };

/**
 * The seconds to wait before sending a request again that got `status` after `waits` waits; undefined: take
 * the answer. A 429 whose Retry-After is not whole seconds of at least 1 fails the check it came in: every
 * 429 of the contract has one (D13, D18), and a client could not tell when to come back.
 */
function rateLimitWait(status: number, retryAfter: string | string[] | undefined, waits: number): number | undefined {
  if (status !== 429) return undefined;
  const text = Array.isArray(retryAfter) ? retryAfter.join(", ") : retryAfter;
  if (text === undefined || !/^\d+$/.test(text) || Number(text) < 1) {
    throw new CheckFailed(
      "a 429 (a rate limit of the deployment, D18) came without Retry-After in whole seconds: every 429 of the contract has Retry-After, an integer of at least 1 (D13), which a client waits before it tries again",
      "Retry-After: an integer of at least 1",
      text ?? "(none)",
    );
  }
  const seconds = Number(text);
  return seconds > rateLimitWaits.maxSeconds || waits === rateLimitWaits.times ? undefined : seconds;
}

export interface ApiContext {
  options: ApiSuiteOptions & Required<Pick<ApiSuiteOptions, "seed" | "runs">>;
  contract: Contract;
  /** Sends one request to an operation and reads the whole answer. */
  call(op: Operation, input: CallInput): Promise<ResponseSeen>;
  /** Posts a form to the token endpoint, as given (a parameter may repeat), with extra headers. */
  requestToken(form: Record<string, string> | [string, string][], headers?: Record<string, string>, how?: Pick<CallInput, "waitOnRateLimit" | "dispatcher" | "query">): Promise<ResponseSeen>;
  /** A token with exactly these scopes, obtained once per set. */
  token(scopes: readonly string[]): Promise<string>;
  /** Drops the tokens `token` obtained (a check that revoked them), so that later checks get new ones. */
  forgetTokens(): void;
  /** Token requests of this run answered 401 (failed client authentication): they count toward the implementation's budgets (D30). */
  readonly failedAuthentications: number;
  /** Token requests of this run answered 200, whichever client's: each may count toward a client's live tokens (D32). */
  readonly tokensIssued: number;
}

/** The answer in a form that reads well in a report. */
export function seen(response: ResponseSeen): { status: number; contentType: string | undefined; body: string } {
  const type = response.headers["content-type"];
  return { status: response.status, contentType: Array.isArray(type) ? type.join(", ") : type, body: response.text.slice(0, 400) };
}

const withBom = new TextDecoder("utf-8", { ignoreBOM: true });

/** Header values without the whitespace around them, which is not part of a field's value (RFC 9110 §5.5). */
const withoutOws = (headers: ResponseSeen["headers"]): ResponseSeen["headers"] => {
  const trimmed = (value: string) => value.replace(/^[ \t]+|[ \t]+$/g, "");
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, Array.isArray(value) ? value.map(trimmed) : value === undefined ? value : trimmed(value)]));
};

/** What undici says when a connection closed before any answer came. */
const CLOSED = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);

/**
 * The answer to a request. A connection the implementation closed before answering, as when a kept-alive
 * connection's idle timeout ends just as a request is sent on it (RFC 9112 §9.6), is tried once more for a
 * GET or HEAD, which a client may repeat (RFC 9110 §9.2.2); otherwise it is said so, with the request.
 */
async function answered<T>(send: () => Promise<T>, method: string, url: string): Promise<T> {
  try {
    return await send();
  } catch (error) {
    const code = (error as { code?: string }).code ?? "";
    if (!CLOSED.has(code)) throw error;
    if (method === "GET" || method === "HEAD") {
      try {
        return await send();
      } catch {
        // Said below, as the first time.
      }
    }
    throw new Error(
      `${method} ${url}: the implementation closed the connection without answering (${(error as Error).message}): a kept-alive connection closed by an idle timeout just as the request was sent on it, or a crash while handling it`,
    );
  }
}

export function createApiContext(options: ApiSuiteOptions, contract: Contract): ApiContext {
  const resolved = { ...options, seed: options.seed ?? defaultSeed, runs: options.runs ?? defaultRuns };
  const origin = (op: Operation) => (op.onAuthServer ? options.authUrl : options.baseUrl).replace(/\/+$/, "");
  const tokens = new Map<string, Promise<string>>();

  async function send(
    method: string,
    url: string,
    headers: Record<string, string>,
    body: string | Buffer | undefined,
    how: { waitOnRateLimit: boolean; chunked: boolean; dispatcher?: Dispatcher },
  ): Promise<ResponseSeen> {
    const { waitOnRateLimit, chunked, dispatcher } = how;
    for (let waits = 0; ; waits++) {
      // A stream has no length: undici sends it chunked.
      const sent = chunked && body !== undefined ? Readable.from([Buffer.from(body)]) : body;
      const response = await answered(() => request(url, { method: method as "GET", headers, body: sent, dispatcher }), method, url);
      // A byte order mark is kept (body.text() drops one), for the checks to see it.
      const seen = { status: response.statusCode, headers: withoutOws(response.headers), text: withBom.decode(await response.body.arrayBuffer()) };
      const seconds = waitOnRateLimit ? rateLimitWait(seen.status, seen.headers["retry-after"], waits) : undefined;
      if (seconds === undefined) return seen;
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    }
  }

  async function call(op: Operation, input: CallInput): Promise<ResponseSeen> {
    const search = typeof input.query === "string" ? input.query : new URLSearchParams(input.query).toString();
    const query = search !== "" ? `?${search}` : "";
    const headers: Record<string, string> = { ...input.headers };
    if (input.token !== undefined) headers.authorization = `Bearer ${input.token}`;
    if (input.body !== undefined && input.contentType !== null) headers["content-type"] = input.contentType ?? "application/json";
    return send(op.method, `${origin(op)}${op.path}${query}`, headers, input.body, { waitOnRateLimit: input.waitOnRateLimit ?? true, chunked: input.chunked ?? false, dispatcher: input.dispatcher });
  }

  let failedAuthentications = 0;
  let tokensIssued = 0;
  const requestToken: ApiContext["requestToken"] = async (form, headers, how) => {
    const response = await call(contract.tokenOperation, { body: new URLSearchParams(form).toString(), contentType: contract.tokenOperation.body?.mediaType, headers, ...how });
    if (response.status === 401) failedAuthentications++;
    if (response.status === 200) tokensIssued++;
    return response;
  };

  async function obtain(scopes: readonly string[]): Promise<string> {
    const response = await requestToken({
      grant_type: "client_credentials",
      client_id: options.clientId,
      client_secret: options.clientSecret,
      scope: scopes.join(" "),
    });
    const token = response.status === 200 ? (JSON.parse(response.text) as { access_token?: unknown }).access_token : undefined;
    if (typeof token !== "string") {
      throw new Error(`could not obtain a token for "${scopes.join(" ")}": HTTP ${response.status} ${response.text.slice(0, 200)}`);
    }
    return token;
  }

  return {
    options: resolved,
    contract,
    call,
    requestToken,
    token(scopes) {
      const key = [...scopes].sort().join(" ");
      if (!tokens.has(key)) {
        const pending = obtain(scopes);
        // A refused token is retried by the next check rather than failing every later one with the same cause.
        pending.catch(() => tokens.delete(key));
        tokens.set(key, pending);
      }
      return tokens.get(key)!;
    },
    forgetTokens: () => tokens.clear(),
    get failedAuthentications() {
      return failedAuthentications;
    },
    get tokensIssued() {
      return tokensIssued;
    },
  };
}

/** A value form-urlencoded as RFC 6749 Appendix B says: a space as +, each octet but `*-._` and ASCII letters and digits as %HH. */
export const formEncoded = (value: string): string => new URLSearchParams([["", value]]).toString().slice(1);

/** `Authorization: Basic` of RFC 6749 §2.3.1: each part form-urlencoded (by `encode`), then base64. */
export const basicOf = (id: string, secret: string, encode = formEncoded) => `Basic ${Buffer.from(`${encode(id)}:${encode(secret)}`).toString("base64")}`;

/**
 * A fetch that waits out a 429 with a Retry-After of at most a minute and sends the request again, as
 * `certify api` does (D18: rate limits are the deployment's, kept while it is certified).
 */
export function waitingOutRateLimits(fetchImpl: (request: Request) => Promise<Response> = (request) => globalThis.fetch(request)): (request: Request) => Promise<Response> {
  return async (request) => {
    for (let waits = 0; ; waits++) {
      const response = await fetchImpl(request.clone());
      const seconds = rateLimitWait(response.status, response.headers.get("retry-after") ?? undefined, waits);
      if (seconds === undefined) return response;
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    }
  };
}

/** Retry-After as seconds from now: delay-seconds or an HTTP-date (RFC 9110 §10.2.3); undefined if absent or unreadable. */
export function retryAfterSeconds(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim());
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
