// The reference server's HTTP side: the four operations of the spec, the Conformance Control API when
// enabled, and problem+json for every client error (spec/DECISIONS.md D11–D18).
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import contentType from "content-type";
import rateLimit from "@fastify/rate-limit";
import { STATUS_CODES } from "node:http";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { packageRoot } from "../paths.js";
import { eventSchemaName, type EventName } from "@partner-platform/sdk";
import { sharedEventExample } from "../spec.js";
import type { Clock } from "./clock.js";
import type { ClientConfig } from "./config.js";
import {
  bodyLimitBytes,
  controlProblem,
  controlValidator,
  failedAuthBudget,
  fieldErrors,
  maxLiveTokensPerClient,
  maxSearchResults,
  problemTypeBySlug,
  problemTypes,
  queryErrors,
  schemaErrors,
  scopeOf,
  escapeToken,
  type FieldError,
} from "./contract.js";
import type { DeliveryEngine } from "./delivery/index.js";
import { urlFormProblem, type AddressPolicy } from "./ssrf.js";
import type { Db } from "./store.js";
import { nextId, storedSecret, storeUnavailable } from "./store.js";
import { clientAddress } from "./proxies.js";

type Logger = FastifyBaseLogger;

export interface AppOptions {
  db: Db;
  clock: Clock;
  engine: DeliveryEngine;
  clients: ClientConfig[];
  tokenLifetimeSeconds: number;
  leadExpirySeconds: number;
  addressPolicy: AddressPolicy;
  conformance: boolean;
  registration?: RegistrationOverride;
  /** Fastify's logger (pino, JSON lines, secrets redacted): the server's log. */
  logger: Logger;
  /** Connection bounds of the API port (D33); the defaults are `defaultTimeouts`. */
  timeouts?: Partial<Timeouts>;
  /** Proxies (addresses, CIDR ranges, or loopback/linklocal/uniquelocal) whose X-Forwarded-For names the client (D30). */
  trustProxy?: string[];
}

/** When a client told the database is unavailable (503) may try again (D33). */
const STORE_RETRY_AFTER_SECONDS = 5;
/** At most one `error` line per this long for the requests the database fails (D33). */
export const OUTAGE_LOG_PERIOD_MS = 10_000;

/**
 * The error lines of requests the database failed: the first of an outage with its stack, then, at the
 * end of each period in which more failed, one that counts them; a period with none ends the outage.
 * Under load an outage failed every request, and a line with its stack for each buried the log (each
 * request's own line, at `info`, still shows its 503).
 */
function outageLog(periodMs: number) {
  let timer: NodeJS.Timeout | undefined;
  let unlogged = 0;
  let last: { log: Logger; error: Error } | undefined;
  /** Writes the count of the 503s not yet logged; whether there were any. */
  const writeCount = () => {
    if (unlogged === 0 || !last) return false;
    last.log.error({ err: last.error, answered503: unlogged }, `the database is still unavailable: ${unlogged} more requests answered 503 in the last ${periodMs / 1000} s`);
    unlogged = 0;
    return true;
  };
  const endPeriod = () => {
    timer = writeCount() ? setTimeout(endPeriod, periodMs).unref() : undefined;
  };
  return {
    failed(log: Logger, error: Error) {
      last = { log, error };
      if (timer) {
        unlogged++;
        return;
      }
      log.error({ err: error }, "the database is unavailable");
      timer = setTimeout(endPeriod, periodMs).unref();
    },
    /** Writes what is counted and not yet logged (the server is closing). */
    flush() {
      clearTimeout(timer);
      timer = undefined;
      writeCount();
    },
  };
}

/** How long a client may take (D33): slow or idle connections are closed, so they cannot pile up. */
export interface Timeouts {
  /** To send the whole request head (slowloris); then 408 and the connection closed. */
  headersMs: number;
  /** To send the whole request, body included. */
  requestMs: number;
  /** A connection with nothing happening on it. */
  idleMs: number;
  /** A keep-alive connection between requests. */
  keepAliveMs: number;
  /** How often Node checks the first two (its default, 30 s, would let a slow head live that long). */
  checkIntervalMs: number;
}

export const defaultTimeouts: Timeouts = { headersMs: 10_000, requestMs: 30_000, idleMs: 60_000, keepAliveMs: 5_000, checkIntervalMs: 1_000 };

/** Failed client authentication, counted per client id and per source address (D30). */
export interface TokenThrottle {
  /** When either budget is spent, how long until it is renewed; undefined while both last. */
  spent(req: FastifyRequest, clientId: string): Promise<{ retryAfterSeconds: number } | undefined>;
  /** Counts one failed authentication against both budgets. */
  failed(req: FastifyRequest, clientId: string): Promise<void>;
}

/** The checks of a webhook registration (D16): the seam through which conformance/broken drops one. */
export interface RegistrationChecks {
  /** Schema violations of the body, each with its pointer. */
  errors(body: unknown): FieldError[];
  /** Whether the business exists (404 otherwise). */
  businessExists(businessID: string): boolean;
  /** Whether the client acts for the business (D27; 403 otherwise). */
  owns(clientId: string, businessID: string): boolean;
  /** Why the URL may not be called (D22, D28; 422 at /url), or undefined. */
  refuseUrl(url: string): Promise<string | undefined>;
}

export type RegistrationOverride = (base: RegistrationChecks) => Partial<RegistrationChecks>;

interface Seed {
  categories: { categoryID: string; name: string }[];
  /** The town of every zip code a business serves: the job location of lead.created. */
  zipCodes: Record<string, { city: string; state: string }>;
  businesses: {
    businessID: string;
    name: string;
    categoryIDs: string[];
    location: { city: string; state: string; zip: string };
    rating?: number;
    reviewCount: number;
    serviceZipCodes: string[];
  }[];
}

export const seed = JSON.parse(readFileSync(path.join(packageRoot, "src/server/seed/businesses.json"), "utf8")) as Seed;

class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly errors?: FieldError[],
    readonly headers: Record<string, string> = {},
    /** The problem type's slug, where the status has more than one (403). */
    readonly slug?: string,
  ) {
    super(detail);
  }
}

function problemBody(status: number, detail: string, instance: string, errors?: FieldError[], typeSlug?: string) {
  const type = (typeSlug ? problemTypeBySlug(typeSlug) : problemTypes.get(status)) ?? "about:blank";
  const slug = type.split(":").pop()!;
  // about:blank's title is the status's own phrase (RFC 9457 §4.2.1).
  const title = type === "about:blank" ? STATUS_CODES[status]! : slug.charAt(0).toUpperCase() + slug.slice(1).replace(/-/g, " ");
  return { type, title, status, detail, instance, ...(errors?.length ? { errors } : {}) };
}

/** A form body as parsed, or why it cannot be read (the token endpoint answers invalid_request). */
class FormInput {
  constructor(
    readonly params?: URLSearchParams,
    readonly problem?: string,
  ) {}
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A body's text, or the problem with it (D29): a charset other than UTF-8 is 415, and bytes that are not
 * UTF-8 are 400 pointing at the body, never repaired into U+FFFD and stored.
 */
function utf8Body(req: FastifyRequest, body: Buffer): string | ProblemError {
  let charset: string | undefined;
  try {
    charset = contentType.parse(req.headers["content-type"] ?? "").parameters.charset;
  } catch {
    return new ProblemError(415, `Content-Type ${req.headers["content-type"]} cannot be parsed.`);
  }
  if (charset !== undefined && charset.toLowerCase() !== "utf-8") {
    return new ProblemError(415, `charset=${charset} is not supported; send UTF-8 (charset=utf-8 or none).`);
  }
  try {
    return strictUtf8.decode(body);
  } catch {
    return new ProblemError(400, "The body is not valid UTF-8.", [{ pointer: "", detail: "invalid UTF-8 byte sequence" }]);
  }
}

/**
 * Where a parsed JSON body holds a lone surrogate (an escape such as "\ud800" without its pair, RFC 8259
 * §8.2): the pointer of the string, or of the object whose member name holds one. Such text has no
 * UTF-8 form; storing it would replace it with U+FFFD, so it is refused like bytes that are not UTF-8 (D29).
 */
function loneSurrogateAt(value: unknown, pointer = ""): string | undefined {
  if (typeof value === "string") return /\p{Cs}/u.test(value) ? pointer : undefined;
  if (typeof value !== "object" || value === null) return undefined;
  for (const [key, member] of Object.entries(value)) {
    if (/\p{Cs}/u.test(key)) return pointer;
    const found = loneSurrogateAt(member, `${pointer}/${escapeToken(key)}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

// Opaque random tokens (D23), stored as their SHA-256 only: a copy of the database holds no usable token.
const tokenHash = (token: string) => createHash("sha256").update(token).digest("hex");

/** Client credentials from `Authorization: Basic` (RFC 6749 §2.3.1: each form-urlencoded), "malformed", or none. */
export function basicCredentials(header: string | undefined): { clientId: string; clientSecret: string } | "malformed" | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic\s+([A-Za-z0-9+/]+={0,2})$/i.exec(header.trim());
  if (!match) return "malformed";
  const decoded = strictUtf8Or(Buffer.from(match[1]!, "base64"));
  const colon = decoded?.indexOf(":") ?? -1;
  if (decoded === undefined || colon < 1) return "malformed";
  try {
    const unescape = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
    return { clientId: unescape(decoded.slice(0, colon)), clientSecret: unescape(decoded.slice(colon + 1)) };
  } catch {
    return "malformed";
  }
}

const strictUtf8Or = (bytes: Buffer): string | undefined => {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
};

const oauthError = (reply: FastifyReply, status: 400 | 401, error: string, description: string) =>
  reply.code(status).header("cache-control", "no-store").send({ error, error_description: description });

/**
 * The token endpoint's throttle (D30) on @fastify/rate-limit: two counters in real time (an attack's
 * pace is real, whatever the server's clock), read before authenticating and incremented only when
 * authentication fails, so successful requests never count.
 */
function failedAuthThrottle(app: FastifyInstance): TokenThrottle {
  void app.register(rateLimit, { global: false });
  const clientOf = new WeakMap<FastifyRequest, string>();
  const { perClientId, perAddress, windowSeconds } = failedAuthBudget;
  let limiters: ReturnType<FastifyInstance["createRateLimit"]>[] | undefined;
  // Made on first use: the plugin's decorator exists once the app is ready.
  const counters = () =>
    (limiters ??= [
      app.createRateLimit({ max: perClientId, timeWindow: windowSeconds * 1000, keyGenerator: (req) => `client:${clientOf.get(req)}` }),
      app.createRateLimit({ max: perAddress, timeWindow: windowSeconds * 1000, keyGenerator: (req) => `address:${clientAddress(req.ip, req.socket.remoteAddress)}` }),
    ]);
  return {
    async spent(req, clientId) {
      clientOf.set(req, clientId);
      const states = await Promise.all(counters().map((limit) => limit(req, { increment: false })));
      const spent = states.filter((s) => !s.isAllowed && s.remaining === 0);
      if (!spent.length) return undefined;
      return { retryAfterSeconds: Math.max(1, ...spent.map((s) => (s.isAllowed ? 0 : s.ttlInSeconds))) };
    },
    async failed(req, clientId) {
      clientOf.set(req, clientId);
      await Promise.all(counters().map((limit) => limit(req)));
    },
  };
}

/**
 * Fastify's two lines of every request ("incoming request", "request completed") written without pino's
 * redaction pass (D43): their fields are those of fastify's serializers (method, URL, host, remote
 * address and port; status code, response time) and none can hold a secret. The pass cost `serve` about
 * 5% of its CPU per Control API trigger end to end. A request's other lines (a 5xx, a refusal) are redacted.
 */
class RequestLines extends Fastify.LogController {
  /** The app's logger (fastify's serializers) without redaction; until it is set, fastify's own lines. */
  plain: FastifyBaseLogger | undefined;

  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    if (!this.plain || this.isLogDisabled(request)) return super.incomingRequest(request, reply);
    this.plain.info({ [this.requestIdLogLabel]: request.id, req: request }, "incoming request");
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error || !this.plain || this.isLogDisabled(request)) return super.requestCompleted(error, request, reply);
    this.plain.info({ [this.requestIdLogLabel]: request.id, res: reply, responseTime: reply.elapsedTime }, "request completed");
  }
}

export function createApp(options: AppOptions): FastifyInstance {
  const { db, clock, engine } = options;
  const timeouts = { ...defaultTimeouts, ...options.timeouts };
  const requestLines = new RequestLines();
  const outages = outageLog(OUTAGE_LOG_PERIOD_MS);
  const app = Fastify({
    bodyLimit: bodyLimitBytes,
    loggerInstance: options.logger,
    logController: requestLines,
    http: { headersTimeout: timeouts.headersMs, requestTimeout: timeouts.requestMs, connectionsCheckingInterval: timeouts.checkIntervalMs },
    requestTimeout: timeouts.requestMs,
    connectionTimeout: timeouts.idleMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    // Without it the address is the connection's peer: behind a proxy, everyone's (D30).
    trustProxy: options.trustProxy?.length ? options.trustProxy : false,
    // What Node's HTTP parser refuses (a malformed request line, a head over its limit, a slow head) is
    // answered as problem+json too (D13), and logged.
    clientErrorHandler: (error, socket) => {
      const code = (error as { code?: string }).code;
      const status = code === "HPE_HEADER_OVERFLOW" ? 431 : code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
      options.logger.warn({ refusal: "client-error", code, status, remoteAddress: socket.remoteAddress }, "request refused by the HTTP parser");
      if (!socket.writable) return socket.destroy();
      const detail =
        status === 431 ? "The request head is too large." : status === 408 ? "The request was not received in time." : "The request cannot be parsed as HTTP/1.1.";
      const body = JSON.stringify(problemBody(status, detail, "/"));
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    },
    // Fastify's own refusals (a URL it cannot decode, ...) go to the error handler: problem+json.
    frameworkErrors: (error, req, reply) => {
      const status = (error as { statusCode?: number }).statusCode ?? 400;
      void (reply as FastifyReply).code(status).type("application/problem+json").send(problemBody(status, error.message, req.url.split("?")[0]!));
    },
  });
  requestLines.plain = app.log.child({}, { redact: [] });
  const categories = new Map(seed.categories.map((c) => [c.categoryID, c.name]));
  const baseChecks: RegistrationChecks = {
    // A URL the `uri` format refuses gets the reason the URL rules give (D28), e.g. its ASCII form.
    errors: (body) =>
      schemaErrors("WebhookRegistration", body).map((e) => {
        const url = (body as { url?: unknown }).url;
        const why = e.pointer === "/url" && /format/.test(e.detail) && typeof url === "string" ? urlFormProblem(url) : undefined;
        return why ? { ...e, detail: why } : e;
      }),
    businessExists: (id) => seed.businesses.some((b) => b.businessID === id),
    owns: (clientId, id) => options.clients.some((c) => c.clientId === clientId && c.businessIDs.includes(id)),
    refuseUrl: (url) => options.addressPolicy.refuseUrl(url),
  };
  const registration = { ...baseChecks, ...options.registration?.(baseChecks) };
  const throttle = failedAuthThrottle(app);

  // JSON answers go out as the contract declares them, `application/json` and `application/problem+json`
  // with no charset (RFC 8259 section 11, RFC 9457 define none), where Fastify would add `; charset=utf-8`:
  // contract testers such as Dredd compare the declared type literally (D36).
  app.addHook("onSend", async (_req, reply, payload) => {
    const type = reply.getHeader("content-type");
    if (typeof type === "string" && /^application\/(problem\+)?json; charset=utf-8$/i.test(type)) reply.header("content-type", type.split(";")[0]!);
    return payload;
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (req, body, done) => {
    const text = utf8Body(req, body as Buffer);
    if (text instanceof ProblemError) return done(text, undefined);
    let parsed: unknown;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch (error) {
      return done(new ProblemError(400, `The body is not valid JSON: ${(error as Error).message}`), undefined);
    }
    const surrogate = loneSurrogateAt(parsed);
    if (surrogate !== undefined) {
      const detail = "a \\u escape of a lone surrogate (U+D800 to U+DFFF without its pair) is not a Unicode character";
      return done(new ProblemError(400, "The body holds text that is not Unicode.", [{ pointer: surrogate, detail }]), undefined);
    }
    done(null, parsed);
  });
  // The token endpoint answers in RFC 6749 terms, so what the form parser finds wrong is handed to it.
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "buffer" }, (req, body, done) => {
    const text = utf8Body(req, body as Buffer);
    done(null, text instanceof ProblemError ? new FormInput(undefined, text.detail) : new FormInput(new URLSearchParams(text)));
  });
  // The 503s counted since the last outage line are written before the log closes.
  app.addHook("onClose", async () => outages.flush());
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (storeUnavailable(error)) {
      // Not the request's fault and not for good: the client is told when to try again (D33).
      outages.failed(req.log, error);
      return reply
        .code(503)
        .headers({ "retry-after": String(STORE_RETRY_AFTER_SECONDS) })
        .type("application/problem+json")
        .send(problemBody(503, `The server's database cannot serve requests now; try again in ${STORE_RETRY_AFTER_SECONDS} seconds.`, req.url.split("?")[0]!));
    }
    const status =
      error instanceof ProblemError
        ? error.status
        : error.code === "FST_ERR_CTP_BODY_TOO_LARGE"
          ? 413
          : error.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE"
            ? 415
            : error.statusCode && error.statusCode >= 400 && error.statusCode < 500
              ? 400
              : 500;
    if (status >= 500) req.log.error({ err: error }, "internal error");
    else req.log.info({ refusal: error instanceof ProblemError ? (error.slug ?? status) : (error.code ?? status), status }, error instanceof ProblemError ? error.detail : error.message);
    const detail =
      status === 413 ? `The body exceeds ${bodyLimitBytes} bytes.` : status === 500 ? "Internal error." : error.message;
    const errors = error instanceof ProblemError ? error.errors : undefined;
    const headers = error instanceof ProblemError ? error.headers : {};
    return reply
      .code(status)
      .headers(headers)
      .type("application/problem+json")
      .send(problemBody(status, detail, req.url.split("?")[0]!, errors, error instanceof ProblemError ? error.slug : undefined));
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).type("application/problem+json").send(problemBody(404, `No operation at ${req.method} ${req.url.split("?")[0]}.`, req.url.split("?")[0]!)),
  );

  async function authenticate(req: FastifyRequest, scope: string): Promise<string> {
    const header = req.headers.authorization ?? "";
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match) throw new ProblemError(401, "The Authorization header is missing or not a Bearer token.", undefined, { "www-authenticate": "Bearer" });
    const { rows } = await db.query<{ client_id: string; scopes: string; expires_at: string }>(
      "SELECT client_id, scopes, expires_at FROM tokens WHERE token_hash = $1",
      [tokenHash(match[1]!)],
    );
    const token = rows[0];
    if (!token || Number(token.expires_at) <= clock.now()) {
      const why = token ? "The access token expired." : "The access token is not valid.";
      throw new ProblemError(401, why, undefined, { "www-authenticate": `Bearer error="invalid_token", error_description="${why.slice(0, -1)}"` });
    }
    if (!token.scopes.split(" ").includes(scope)) {
      throw new ProblemError(
        403,
        `This operation requires the scope ${scope}.`,
        undefined,
        { "www-authenticate": `Bearer error="insufficient_scope", scope="${scope}"` },
        "insufficient-scope",
      );
    }
    return token.client_id;
  }

  function requireJson(req: FastifyRequest): void {
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/json") {
      throw new ProblemError(415, `Content-Type ${type || "(none)"} is not supported; send application/json.`);
    }
  }

  function validateBody(body: unknown, errorsOf: (body: unknown) => FieldError[]): void {
    if (body === undefined) throw new ProblemError(400, "The body is empty; send a JSON object.");
    const errors = errorsOf(body);
    if (errors.length) throw new ProblemError(422, `The body violates the schema in ${errors.length} place(s).`, errors);
  }

  app.post("/oauth2/token", async (req, reply) => {
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/x-www-form-urlencoded" || !(req.body instanceof FormInput)) {
      return oauthError(reply, 400, "invalid_request", "Send the parameters form-encoded (application/x-www-form-urlencoded).");
    }
    if (req.body.problem) return oauthError(reply, 400, "invalid_request", req.body.problem);
    const params = req.body.params!;
    // RFC 6749 §3.2: parameters must not be included more than once.
    const repeated = [...new Set(params.keys())].filter((k) => params.getAll(k).length > 1);
    if (repeated.length) return oauthError(reply, 400, "invalid_request", `Each parameter may be sent once; repeated: ${repeated.join(", ")}.`);
    // RFC 6749 §3.1: a parameter sent without a value is treated as if omitted (`scope=`, `client_secret=` beside HTTP Basic).
    const body = Object.fromEntries([...params].filter(([, value]) => value !== "")) as Record<string, string>;
    const basic = basicCredentials(req.headers.authorization);
    if (basic === "malformed") return oauthError(reply, 400, "invalid_request", "The Authorization header is not HTTP Basic client authentication (RFC 6749 §2.3.1).");
    // One authentication method per request (RFC 6749 §2.3, D31).
    if (basic && (body.client_secret !== undefined || (body.client_id !== undefined && body.client_id !== basic.clientId))) {
      return oauthError(reply, 400, "invalid_request", "Authenticate with HTTP Basic or with client_id and client_secret in the body, not both.");
    }
    if (body.grant_type !== undefined && body.grant_type !== "client_credentials") {
      return oauthError(reply, 400, "unsupported_grant_type", "Only grant_type=client_credentials is supported.");
    }
    const errors = schemaErrors("TokenRequest", body);
    if (errors.length) return oauthError(reply, 400, "invalid_request", errors.map((e) => `${e.pointer}: ${e.detail}`).join("; "));
    const credentials = basic ?? { clientId: body.client_id, clientSecret: body.client_secret };
    if (credentials.clientId === undefined || credentials.clientSecret === undefined) {
      return oauthError(reply, 400, "invalid_request", "Send client_id and client_secret, or authenticate with HTTP Basic.");
    }
    const throttled = await throttle.spent(req, credentials.clientId);
    if (throttled) {
      req.log.warn({ clientId: credentials.clientId, retryAfter: throttled.retryAfterSeconds, refusal: "token-throttled" }, "token request throttled");
      throw new ProblemError(429, `Too many failed client authentications; retry after ${throttled.retryAfterSeconds} seconds.`, undefined, {
        "retry-after": String(throttled.retryAfterSeconds),
        "cache-control": "no-store",
      });
    }
    const client = options.clients.find((c) => c.clientId === credentials.clientId);
    const secretOk =
      client !== undefined &&
      Buffer.byteLength(client.clientSecret) === Buffer.byteLength(credentials.clientSecret) &&
      timingSafeEqual(Buffer.from(client.clientSecret), Buffer.from(credentials.clientSecret));
    if (!client || !secretOk) {
      await throttle.failed(req, credentials.clientId);
      req.log.warn({ clientId: credentials.clientId, refusal: "invalid-client" }, "client authentication failed");
      if (basic) reply.header("www-authenticate", 'Basic realm="partner-platform"');
      return oauthError(reply, 401, "invalid_client", "Client authentication failed.");
    }
    const requested = body.scope ? body.scope.split(" ").filter(Boolean) : client.scopes;
    const refused = requested.filter((s) => !client.scopes.includes(s));
    if (refused.length) return oauthError(reply, 400, "invalid_scope", `Scope not allowed for this client: ${refused.join(" ")}`);
    const token = randomBytes(32).toString("base64url");
    const now = clock.now();
    await db.transaction(async (tx) => {
      await tx.query("DELETE FROM tokens WHERE client_id = $1 AND expires_at <= $2", [client.clientId, now]);
      // At most maxLiveTokensPerClient live tokens (D32): the one issued now replaces the oldest.
      await tx.query(
        "DELETE FROM tokens WHERE token_hash IN (SELECT token_hash FROM tokens WHERE client_id = $1 ORDER BY issued DESC OFFSET $2)",
        [client.clientId, maxLiveTokensPerClient - 1],
      );
      await tx.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ($1, $2, $3, $4)", [
        tokenHash(token),
        client.clientId,
        requested.join(" "),
        now + options.tokenLifetimeSeconds * 1000,
      ]);
    });
    return reply
      .code(200)
      .header("cache-control", "no-store")
      .send({ access_token: token, token_type: "Bearer", expires_in: options.tokenLifetimeSeconds, scope: requested.join(" ") });
  });

  app.get("/api/v2/businesses/search", async (req) => {
    await authenticate(req, scopeOf("/api/v2/businesses/search", "get"));
    const query = req.query as Record<string, unknown>;
    const errors = queryErrors("/api/v2/businesses/search", "get", query);
    if (errors.length) throw new ProblemError(400, "Invalid query parameters.", errors);
    const businesses = seed.businesses
      .filter((b) => b.categoryIDs.includes(query.category_id as string) && b.serviceZipCodes.includes(query.zip as string))
      .sort((a, b) => (b.rating ?? 0) - (a.rating ?? 0))
      .slice(0, maxSearchResults)
      .map((b) => ({
        businessID: b.businessID,
        name: b.name,
        categories: b.categoryIDs.map((id) => ({ categoryID: id, name: categories.get(id)! })),
        location: b.location,
        ...(b.rating !== undefined ? { rating: b.rating } : {}),
        reviewCount: b.reviewCount,
      }));
    return { businesses };
  });

  app.post("/api/v4/requests", async (req, reply) => {
    const clientId = await authenticate(req, scopeOf("/api/v4/requests", "post"));
    requireJson(req);
    validateBody(req.body, (body) => schemaErrors("ServiceRequestInput", body));
    const input = req.body as { categoryID: string; zipCode: string; customer: { name: string; email: string; phone: string } };
    const category = categories.get(input.categoryID);
    if (!category) throw new ProblemError(404, `No category has the identifier ${input.categoryID}.`, [{ pointer: "/categoryID", detail: "unknown category" }]);
    const matched = seed.businesses.filter((b) => b.categoryIDs.includes(input.categoryID) && b.serviceZipCodes.includes(input.zipCode));
    const now = clock.now();
    // The request, its leads and their lead.created events are stored together, or not at all.
    const { requestID, leads } = await engine.transaction(async (tx, emit) => {
      const requestID = await nextId(tx);
      await tx.query("INSERT INTO requests (id, client_id, body, created_at) VALUES ($1, $2, $3, $4)", [requestID, clientId, JSON.stringify(input), now]);
      const leads: { leadID: string; businessID: string }[] = [];
      for (const b of matched) {
        const leadID = await nextId(tx);
        await tx.query("INSERT INTO leads (id, request_id, business_id, status, created_at, expires_at) VALUES ($1, $2, $3, 'new', $4, $5)", [
          leadID,
          requestID,
          b.businessID,
          now,
          now + options.leadExpirySeconds * 1000,
        ]);
        await emit("lead.created", b.businessID, {
          leadID,
          businessID: b.businessID,
          // Matched businesses serve the zip code, so the seed knows its town.
          request: { category, location: { ...seed.zipCodes[input.zipCode]!, zip: input.zipCode } },
          customer: { name: input.customer.name, phone: input.customer.phone },
        }, now);
        leads.push({ leadID, businessID: b.businessID });
      }
      return { requestID, leads };
    });
    return reply
      .code(201)
      .header("location", `/api/v4/requests/${requestID}`)
      .send({
        requestID,
        status: leads.length ? "matched" : "unmatched",
        categoryID: input.categoryID,
        zipCode: input.zipCode,
        customer: input.customer,
        leads,
        createdAt: new Date(now).toISOString(),
      });
  });

  app.post("/api/v2/webhooks", async (req, reply) => {
    const clientId = await authenticate(req, scopeOf("/api/v2/webhooks", "post"));
    requireJson(req);
    validateBody(req.body, registration.errors);
    const input = req.body as { url: string; events: EventName[]; businessID: string; secret: string };
    if (!registration.businessExists(input.businessID)) {
      throw new ProblemError(404, `No business has the identifier ${input.businessID}.`, [{ pointer: "/businessID", detail: "unknown business" }]);
    }
    // Another partner's business: its events carry that partner's customers (D27).
    if (!registration.owns(clientId, input.businessID)) {
      throw new ProblemError(403, `Business ${input.businessID} is not one this client acts for.`, [{ pointer: "/businessID", detail: "another partner's business" }], {}, "business-forbidden");
    }
    const refused = await registration.refuseUrl(input.url);
    if (refused) throw new ProblemError(422, `The webhook URL cannot be called: ${refused}.`, [{ pointer: "/url", detail: refused }]);
    const now = clock.now();
    const webhookID = await nextId(db);
    await db.query(
      "INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      [webhookID, clientId, input.url, JSON.stringify(input.events), input.businessID, storedSecret(input.secret), now],
    );
    return reply
      .code(201)
      .header("location", `/api/v2/webhooks/${webhookID}`)
      .send({ webhookID, url: input.url, events: input.events, businessID: input.businessID, status: "enabled", createdAt: new Date(now).toISOString() });
  });

  if (options.conformance) registerControl(app, options);
  return app;
}

function clockBody(clock: Clock) {
  return { now: new Date(clock.now()).toISOString(), mode: clock.mode, scale: clock.scale };
}

/** A control API body, validated against its schema in generated/control/openapi.yaml. */
function controlBody<T>(schemaName: string, body: unknown): T {
  const errors = fieldErrors(controlValidator(schemaName), body ?? {});
  if (errors.length) throw new ProblemError(422, `The body violates the ${schemaName} schema.`, errors);
  return body as T;
}

/** The Conformance Control API (spec/control/main.tsp): only with --conformance. */
function registerControl(app: FastifyInstance, { clock, engine }: AppOptions): void {
  app.get("/conformance/clock", async () => clockBody(clock));
  app.post("/conformance/clock/advance", async (req, reply) => {
    const { seconds } = controlBody<{ seconds: number }>("AdvanceClockRequest", req.body);
    if (clock.mode !== "virtual") {
      const { type, status } = controlProblem("ClockNotVirtualProblem");
      const detail = `The clock runs in ${clock.mode} mode; only a virtual clock can be advanced.`;
      return reply.code(status).type("application/problem+json").send({ type, title: "Clock is not virtual", status, detail });
    }
    await engine.advance(seconds);
    return clockBody(clock);
  });
  app.post("/conformance/events", async (req, reply) => {
    const body = controlBody<{ event: EventName; businessID: string; data?: Record<string, unknown> }>("TriggerEventRequest", req.body);
    const { event, businessID } = body;
    // The example is only read: its data is copied one level, and the envelope is serialized.
    const example = sharedEventExample(event);
    const data: Record<string, unknown> = { ...(body.data ?? (example.data as Record<string, unknown>)), businessID };
    const errors = schemaErrors(eventSchemaName(event), { ...example, data });
    if (errors.length) throw new ProblemError(422, `data does not validate against the ${event} schema.`, errors);
    // A lead.updated "as if it had occurred" changes a stored lead: a hired lead no longer expires (D19).
    const { id, queuedFor } =
      event === "lead.updated"
        ? await engine.updateLead(businessID, data as Record<string, unknown> & { leadID: string; status: string })
        : await engine.emit(event, businessID, data);
    return reply.code(201).send({ id, event, queuedFor });
  });
}
