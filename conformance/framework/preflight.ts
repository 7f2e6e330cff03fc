// What the suites check before any check: the implementation answers at the addresses given and knows
// the client. Otherwise every check would fail with the same cause ("fetch failed" N times); instead the
// run stops with one SetupError that says what to change.
import type { paths } from "../../generated/types/api.js";
import { SetupError } from "./check.js";

const tokenPath = "/oauth2/token" satisfies keyof paths;
const preflightTimeoutMs = 10_000;

/** Why a request got no answer, in a word: ECONNREFUSED, ENOTFOUND, DEPTH_ZERO_SELF_SIGNED_CERT, ... */
export function transportReason(error: unknown): string {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string; errors?: { code?: string }[] } };
  if (e?.name === "TimeoutError") return `no answer within ${preflightTimeoutMs / 1000} s`;
  // fetch() throws "fetch failed" with the socket's error as the cause (an AggregateError when several addresses were tried).
  const cause = e?.cause;
  // undici's "bad response" (an answer it cannot read) and "other side closed" share one code.
  if (cause?.code === "UND_ERR_SOCKET" && cause.message) return `${cause.code}: ${cause.message}`;
  return cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message ?? e?.message ?? String(error);
}

/** `fetch`, bounded in time; no answer at all throws SetupError(`unreachable(reason)`). */
async function fetchOrStop(url: string, init: RequestInit, unreachable: (reason: string) => string): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(preflightTimeoutMs) });
  } catch (error) {
    throw new SetupError(unreachable(transportReason(error)));
  }
}

/** Errors of an answer that came but could not be read (undici's, which the suites use, D52): not an address to fix. */
const UNREADABLE = new Set(["UND_ERR_SOCKET: bad response", "UND_ERR_RES_CONTENT_LENGTH_MISMATCH"]);

const notReached = (what: string, url: string, flag: string) => (reason: string) =>
  UNREADABLE.has(reason)
    ? `${what} at ${url} answered, but the suite's HTTP client (undici) could not read the answer (${reason}): send no 100 Continue that was not asked for, nothing after a Content-Length value, and a body as long as its Content-Length (D52)`
    : `cannot reach ${what} at ${url} (${reason}): is the implementation running, and is ${flag} its address?`;

/** Something answers HTTP at `url` (any status). */
export async function preflightReach(url: string, what: string, flag: string): Promise<void> {
  const response = await fetchOrStop(url, {}, notReached(what, url, flag));
  await response.body?.cancel();
}

/** GETs `url` and returns its status and body, or stops the run when nothing answers. */
export async function preflightGet(url: string, what: string, flag: string): Promise<{ status: number; text: string }> {
  const response = await fetchOrStop(url, {}, notReached(what, url, flag));
  return { status: response.status, text: await response.text() };
}

export interface Credentials {
  authUrl: string;
  clientId: string;
  clientSecret: string;
}

/**
 * The token endpoint answers and accepts the client's credentials. With `scopes`, a token for them must
 * be granted (a suite that cannot run without them); without, the client's default scopes are asked
 * for, and any refusal but of the credentials is left to the checks.
 */
export async function preflightToken(target: Credentials, scopes?: readonly string[], flags = "--client-id/--client-secret"): Promise<void> {
  const url = `${target.authUrl.replace(/\/+$/, "")}${tokenPath}`;
  const form = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: target.clientId,
    client_secret: target.clientSecret,
    ...(scopes ? { scope: scopes.join(" ") } : {}),
  });
  const response = await fetchOrStop(url, { method: "POST", body: form }, notReached("the token endpoint", url, "--auth-url"));
  const text = await response.text();
  if (response.ok) return;
  let error: unknown;
  try {
    error = (JSON.parse(text) as { error?: unknown }).error;
  } catch {
    // not an RFC 6749 error body
  }
  const answer = `HTTP ${response.status}${typeof error === "string" ? ` ${error}` : ""}`;
  if (response.status === 404) {
    throw new SetupError(`the token endpoint ${url} answered HTTP 404: --auth-url must be the authorization server's {auth_url}, where ${tokenPath} is served`);
  }
  if (error === "invalid_client" || response.status === 401) {
    throw new SetupError(`the token endpoint (${url}) refused ${flags} (${answer}): pass the credentials of a client the implementation knows`);
  }
  if (!scopes) return;
  throw new SetupError(
    error === "invalid_scope"
      ? `the token endpoint (${url}) refused a token for ${scopes.join(" ")} (${answer}): the client must be allowed every scope of the API`
      : `the token endpoint (${url}) did not issue a token (${answer}): every check needs one`,
  );
}
