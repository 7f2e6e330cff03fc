// The API checks, built from the contract: four for the token endpoint, and for each API operation
// its success example, authentication, scope, bad bodies or queries, and generated inputs. Every
// answer is validated against the OpenAPI document (status declared, headers, content type, body).
import { createHash, randomBytes, randomInt } from "node:crypto";
import { isIPv4 } from "node:net";
import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { Agent } from "undici";
import { CheckFailed, CheckSkipped, defineCheck, expectEqual, expectThat, type Check } from "../framework/check.js";
import { challengeOf } from "./challenges.js";
import { namesPointer, UNKNOWN_ID, UNSERVED_ZIP, type Contract, type Operation, type QueryParameter, type ResponseSeen } from "./contract.js";
import { basicOf, formEncoded, retryAfterSeconds, seen, type ApiContext } from "./context.js";
import { arbitraryOf, atMaxLength, withFreeText, flatten, invalidUtf8Of, loneSurrogateVariant, mutationsOf, type Mutation } from "./schema-arbitrary.js";

type ApiCheck = Check<ApiContext>;
type Json = Record<string, any>;

/** One request's input: query parameters and, for operations with a body, the body value. */
interface Input {
  query: Record<string, string>;
  body?: unknown;
}

/** A one-fault input and where the fault is: `/query/<name>` (D13) or a pointer into the body. */
interface InvalidInput extends Input {
  pointer: string;
  kind: string;
  /** The body's bytes as sent, when the fault is in the bytes rather than the value (invalid UTF-8, D29). */
  raw?: Buffer;
}

/** The answer has one of `statuses` and validates against the OpenAPI document. */
function expectAnswer(ctx: ApiContext, op: Operation, response: ResponseSeen, statuses: readonly number[], what: string): void {
  expectThat(statuses.includes(response.status), `${what}: expected HTTP ${statuses.join(" or ")}, got ${response.status}`, statuses, seen(response));
  const violations = ctx.contract.violations(op, response);
  expectThat(
    violations.length === 0,
    `${what}: the ${response.status} answer does not validate against the OpenAPI document`,
    "an answer valid against the document",
    { ...seen(response), violations },
  );
  const location = response.headers.location;
  if (response.status === 201 && typeof location === "string") {
    // D35: the created resource's URI, the operation's path and the id its body gives, on the API's own
    // origin: absolute or relative, resolved against the request's URI (RFC 9110 §10.2.2).
    const id = createdIdOf(op, jsonOf(response));
    const expected = id === undefined ? undefined : `${targetUri(ctx, op)}/${encodeURIComponent(id)}`;
    const resolved = resolvedLocation(ctx, op, location);
    expectThat(
      expected !== undefined && resolved === normalizedUri(expected),
      `${what}: Location is not the created resource's URI, the operation's path and its id on the API's origin, nothing added (D35)`,
      expected ?? `${targetUri(ctx, op)}/<id>`,
      resolved === location ? location : `${location} (${resolved ?? "not a URI reference"})`,
    );
  }
}

/** A token endpoint's RFC 6749 error: the status D11 gives `code`, a valid answer, and `code` as its error. */
function expectOAuthError(ctx: ApiContext, op: Operation, response: ResponseSeen, code: string, what: string): void {
  expectAnswer(ctx, op, response, [ctx.contract.oauthErrorStatus(code)], what);
  const error = jsonOf(response).error;
  expectThat(error === code, `${what}: the RFC 6749 error code is ${JSON.stringify(error)}`, code, seen(response));
}

/** The URI a request to the operation targets (its query aside). */
const targetUri = (ctx: ApiContext, op: Operation) => `${(op.onAuthServer ? ctx.options.authUrl : ctx.options.baseUrl).replace(/\/+$/, "")}${op.path}`;

/** A URI with the percent-encodings of unreserved characters decoded: the same URI (RFC 3986 §6.2.2.2). */
const normalizedUri = (uri: string) => new URL(uri).href.replace(/%([0-9A-Fa-f]{2})/g, (escape, hex: string) => {
  const c = String.fromCharCode(parseInt(hex, 16));
  return /[A-Za-z0-9\-._~]/.test(c) ? c : escape.toUpperCase();
});

/** A 201's Location resolved against the request's URI and normalized, or undefined if it is no URI reference. */
function resolvedLocation(ctx: ApiContext, op: Operation, location: string): string | undefined {
  try {
    return normalizedUri(new URL(location, targetUri(ctx, op)).href);
  } catch {
    return undefined;
  }
}

/** A created resource's id: the `…ID` member that the spec's example answer has and its request has not. */
function createdIdOf(op: Operation, answer: Json): string | undefined {
  const example = successExample(op);
  const member = Object.keys((example.response ?? {}) as Json).find((name) => name.endsWith("ID") && !(name in ((example.body ?? {}) as Json)));
  const id = member === undefined ? undefined : answer[member];
  return typeof id === "string" ? id : undefined;
}

const jsonOf = (response: ResponseSeen): Json => {
  try {
    return JSON.parse(response.text) as Json;
  } catch {
    return {};
  }
};

function successExample(op: Operation) {
  const example = op.successExamples[0];
  if (!example) throw new Error(`the spec has no success example for ${op.operationId}`);
  return example;
}

/** `op`'s first success example sent with `token`. */
const sendExample = (ctx: ApiContext, op: Operation, token: string) => {
  const example = successExample(op);
  return send(ctx, op, { query: example.query, body: example.body }, token);
};

/** A token request of another client (--second-client-id, --limited-client-id), for `scope` if given (every scope it may have if not), sent as `how` says. */
const clientTokenRequest = (ctx: ApiContext, id: string, secret: string, { scope, how }: { scope?: string; how?: Parameters<ApiContext["requestToken"]>[2] } = {}) =>
  ctx.requestToken({ grant_type: "client_credentials", client_id: id, client_secret: secret, ...(scope ? { scope } : {}) }, {}, how);

const bodyText = (op: Operation, body: unknown) => (op.body && body !== undefined ? JSON.stringify(body) : undefined);

async function send(ctx: ApiContext, op: Operation, input: Input & { raw?: Buffer }, token?: string): Promise<ResponseSeen> {
  const call = (raw: Buffer | undefined, body: unknown) => {
    const text = raw ?? bodyText(op, body);
    return ctx.call(op, { query: input.query, ...(text !== undefined ? { body: text, contentType: op.body!.mediaType } : {}), ...(token !== undefined ? { token } : {}) });
  };
  const response = await call(input.raw, input.body);
  for (const name of NEVER_RETURNED) {
    let quoted = secretPartsHeld(input, name, response);
    // Parts the answer also holds when another value of the same shape was sent are the implementation's
    // own words ("properties" of a message, where a generated secret holds "propertyIsEnumerable"), not
    // quoted: asked once more, only where something was found. A raw body is judged as it is.
    if (quoted.length > 0 && input.raw === undefined) {
      const control = { ...(input.body as Json), [name]: otherOfSameShape((input.body as Json)[name] as string) };
      const own = secretPartsHeld({ ...input, body: { ...control, [name]: (input.body as Json)[name] } }, name, await call(undefined, control));
      quoted = quoted.filter((part) => !own.includes(part));
    }
    expectThat(
      quoted.length === 0,
      `the ${response.status} answer holds the ${name} that was sent, part of it or a digest of it: it is never returned (D16), not in a created resource, not in a problem`,
      `no ${name} in the answer`,
      { ...seen(response), quoted: quoted[0] },
    );
  }
  return response;
}

/** The request members whose value no answer holds (D16: the secret is never returned). */
const NEVER_RETURNED = ["secret"];

/** The member of the operation's success example that no answer holds, if it has one. */
const secretOf = (op: Operation) => NEVER_RETURNED.find((name) => op.successExamples[0]?.body !== undefined && name in (op.successExamples[0].body as Json));

/**
 * `value` with every character replaced by another of its kind: a letter by a letter, a digit by a digit,
 * anything else by its neighbour code point (as long in code points, UTF-16 units and UTF-8 bytes).
 */
function otherOfSameShape(value: string): string {
  return [...value]
    .map((c) => {
      const cp = c.codePointAt(0)!;
      if (/[a-z]/i.test(c)) return String.fromCodePoint(((cp & 31) + 12) % 26 + (cp & ~31) + 1);
      if (/[0-9]/.test(c)) return String((Number(c) + 5) % 10);
      return String.fromCodePoint(cp ^ 1);
    })
    .join("");
}

/** The digests of a secret no answer holds either (D16), in hex or base64 like the secret's bytes. */
const SECRET_DIGESTS = ["md5", "sha1", "sha256", "sha512"];

/**
 * The parts of member `name`'s value an answer, a created resource or a problem, holds (one that another
 * member also sent aside): as sent, reversed, as JSON writes it, and in the encodings that carry bytes in
 * text (base64, hex), and its digests in those encodings; a part of any as well (a "hint" of its first characters is the secret's start), in any
 * letter case, in the body (its JSON strings decoded too: "\u0077hsec" is "whsec") or a header. Base64 is
 * compared as it is.
 */
function secretPartsHeld(input: Input, name: string, response: ResponseSeen): string[] {
  const body = input.body;
  if (!body || typeof body !== "object") return [];
  const value = (body as Json)[name] as unknown;
  if (typeof value !== "string") return [];
  const others = Object.entries(body as Json)
    .filter(([member]) => !NEVER_RETURNED.includes(member))
    .map(([, v]) => JSON.stringify(v).toLowerCase());
  const bytes = Buffer.from(value, "utf8");
  // As its UTF-8 bytes decode too: a lone surrogate is stored and echoed as U+FFFD. Each form once: most
  // secrets decode and JSON-escape to themselves.
  const forms = new Set([value, bytes.toString("utf8"), [...value].reverse().join(""), JSON.stringify(value).slice(1, -1), ...acrossByteCuts(bytes, 6)]);
  const text = [...forms].flatMap((t) => telltales(t));
  // Encoded, 6 characters are 3 bytes or fewer, which a random id in an answer (a trace id in hex) holds
  // now and then: 6 bytes' worth.
  // A digest of the secret too: for a secret longer than 64 bytes its SHA-256 is the HMAC key itself
  // (RFC 2104 §2), and any digest lets guesses be tested offline (D16).
  const digests = SECRET_DIGESTS.map((algorithm) => createHash(algorithm).update(bytes).digest());
  const hex = [bytes, ...digests].flatMap((b) => telltales(b.toString("hex"), 12));
  const encoded = [bytes, ...digests].flatMap((b) => [b.toString("base64"), b.toString("base64url")]).flatMap((t) => telltales(t, 8));
  const answer = [response.text, ...jsonStringsOf(response.text), ...Object.values(response.headers).flat()].join("\n");
  const folded = answer.toLowerCase();
  const heldAlone = (part: string, held: boolean) => held && !others.some((other) => other.includes(part.toLowerCase()));
  return [
    ...[...text, ...hex].filter((part) => heldAlone(part, folded.includes(part.toLowerCase()))),
    ...encoded.filter((part) => heldAlone(part, answer.includes(part))),
  ];
}

/**
 * The value cut by bytes inside a character, as a hint sliced from the UTF-8 bytes is (Go's s[:4]): the
 * character cut in two decodes as U+FFFD. Only the runs across a cut are new (the others are the value's
 * own), so each half is kept to the `span` characters beside the cut: quadratic in a long secret otherwise.
 */
function acrossByteCuts(bytes: Buffer, span: number): string[] {
  const starts: number[] = [];
  for (let i = 0; i < bytes.length; i++) if ((bytes[i]! & 0xc0) !== 0x80) starts.push(i);
  starts.push(bytes.length);
  const halves: string[] = [];
  for (let c = 0; c + 1 < starts.length; c++) {
    const from = starts[Math.max(0, c - span)]!;
    const to = starts[Math.min(starts.length - 1, c + 1 + span)]!;
    for (let cut = starts[c]! + 1; cut < starts[c + 1]!; cut++) halves.push(bytes.subarray(from, cut).toString("utf8"), bytes.subarray(cut, to).toString("utf8"));
  }
  return halves;
}

/**
 * The parts of a value an answer holds only by quoting it: each run of `length` characters with at least 4
 * different ones, in any letter case (shorter or plainer runs, "000000", can occur anywhere by chance),
 * each run of 4 different ones with 2 outside ASCII, and of 3 or 2 different ones all outside it (which
 * an implementation's own words and ids do not hold: a mask that shows 2 characters of NON_ASCII_SECRET
 * at each end shows).
 */
function telltales(value: string, length = 6): string[] {
  const parts = new Set<string>();
  const chars = [...value];
  const outside = chars.map((c) => (c > "\x7f" ? 1 : 0));
  const lowered = chars.map((c) => [...c.toLowerCase()]);
  // A capital sigma's lower case depends on what follows it (Final_Sigma): a value with one has each run lowered whole.
  const sigma = value.includes("\u03a3");
  // Each run of n characters slid along the value, its different characters in any letter case and those
  // outside ASCII counted as it moves: this runs on every answer to a registration, over every encoding
  // of the secret and of its digests.
  const runs = (n: number, telling: (distinct: number, outsideAscii: number) => boolean) => {
    const counts = new Map<string, number>();
    let outsideAscii = 0;
    const move = (k: number, by: 1 | -1) => {
      for (const c of lowered[k]!) {
        const left = (counts.get(c) ?? 0) + by;
        if (left === 0) counts.delete(c);
        else counts.set(c, left);
      }
      outsideAscii += by * outside[k]!;
    };
    for (let end = 0; end < chars.length; end++) {
      move(end, 1);
      if (end >= n) move(end - n, -1);
      if (end + 1 < n) continue;
      const start = end + 1 - n;
      const distinct = sigma ? new Set(chars.slice(start, end + 1).join("").toLowerCase()).size : counts.size;
      if (telling(distinct, outsideAscii)) parts.add(chars.slice(start, end + 1).join(""));
    }
  };
  runs(length, (distinct) => distinct >= 4);
  if (outside.includes(1)) {
    runs(4, (distinct, outsideAscii) => distinct === 4 && outsideAscii >= 2);
    runs(3, (distinct, outsideAscii) => distinct === 3 && outsideAscii === 3);
    runs(2, (distinct, outsideAscii) => distinct === 2 && outsideAscii === 2);
  }
  return [...parts];
}

/** A free text of 18 characters with control characters in it, U+0000 among them (16 or more: a webhook secret's minLength). */
const CONTROL_TEXT = "ctrl \u0000 \u0001 \u001f \u007f chars";

/** A secret of 16 different characters, none ASCII (D16: its length counts code points). */
const NON_ASCII_SECRET = "ß∂ƒ©Ω≈ç√∫µ≤≥÷¿¡€";

/** Every string of a JSON text, member names included, decoded; none if it is not JSON. */
function jsonStringsOf(text: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return [];
  }
  const strings: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === "string") strings.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === "object") for (const [k, inner] of Object.entries(v)) strings.push(k), walk(inner);
  };
  walk(value);
  return strings;
}

/** What D17 says of an operation's successful answer beyond its schema: a failure's message, expected and actual. */
/** The values listed more than once, each once. */
const repeated = (values: unknown[]) => [...new Set(values.filter((v, i) => values.indexOf(v) !== i))];

const answerRules: Record<string, (answer: Json, input: Input) => [string, unknown, unknown] | undefined> = {
  searchBusinesses(answer, input) {
    const businesses = (answer.businesses ?? []) as Json[];
    // D17: a list of businesses, not of their matches (a join that yields a row per service area lists one twice).
    const twice = repeated(businesses.map((b) => b.businessID as unknown));
    if (twice.length > 0) return ["businesses are listed more than once (D17: the businesses that serve the category at the zip code)", [], twice];
    // D17: the businesses that serve the category asked for; each lists the categories it serves.
    const asked = input.query.category_id;
    const others = businesses.filter((b) => asked !== undefined && !((b.categories ?? []) as Json[]).some((c) => c?.categoryID === asked)).map((b) => b.businessID as unknown);
    if (others.length > 0) return [`businesses that do not list category ${asked} among their categories were found for it (D17)`, [], others];
    const ratings = businesses.map((b) => b.rating as unknown).filter((r): r is number => typeof r === "number");
    const sorted = [...ratings].sort((a, b) => b - a);
    return isDeepStrictEqual(ratings, sorted) ? undefined : ["businesses are not best rated first (D17)", sorted, ratings];
  },
  registerWebhook(answer) {
    return answer.status === "enabled" ? undefined : ["a new webhook is not enabled (D17)", "enabled", answer.status];
  },
  createServiceRequest(answer) {
    // D17: one lead per matched business.
    const twice = repeated((Array.isArray(answer.leads) ? (answer.leads as Json[]) : []).map((l) => l?.businessID as unknown));
    if (twice.length > 0) return ["a business has more than one lead of the service request (D17: one per matched business)", [], twice];
    const leads = Array.isArray(answer.leads) ? answer.leads.length : 0;
    const status = leads > 0 ? "matched" : "unmatched";
    return answer.status === status ? undefined : [`a service request with ${leads} leads is not ${status} (D17)`, status, answer.status];
  },
};

/**
 * Whether an answer's value holds what was sent: the same scalar, every member sent (an answer may have
 * more, D16), and the items of an array in any order (a set such as `events` may come back in another).
 */
function holds(got: unknown, sent: unknown): boolean {
  if (Array.isArray(sent)) return Array.isArray(got) && got.length === sent.length && sent.every((item) => got.some((g) => holds(g, item)));
  if (sent !== null && typeof sent === "object") {
    return got !== null && typeof got === "object" && !Array.isArray(got) && Object.entries(sent).every(([name, value]) => holds((got as Json)[name], value));
  }
  return isDeepStrictEqual(got, sent);
}

/** The resources each run created, as "operationId id": no two of an operation with the same id. */
const createdIds = new WeakMap<ApiContext, Set<string>>();

/** How far the implementation's clock may be from the suite's (D14: a created resource's createdAt). */
const CLOCK_SKEW_MS = 5 * 60_000;

/**
 * A successful answer says what was asked for (D17): the rules above; and a created resource holds every
 * member sent that it has, as sent, its createdAt is about now, and its new id is one no other resource of
 * its kind in the run has.
 */
function expectAnswersWhatWasSent(ctx: ApiContext, op: Operation, input: Input, response: ResponseSeen, what: string): void {
  if (response.status < 200 || response.status > 299) return;
  const answer = jsonOf(response);
  const broken = answerRules[op.operationId]?.(answer, input);
  if (broken) throw new CheckFailed(`${what}: ${broken[0]}`, broken[1], broken[2]);
  if (response.status !== 201 || !input.body || typeof input.body !== "object") return;
  // As the implementation read it (generated values may be objects without a prototype).
  const sent = JSON.parse(JSON.stringify(input.body)) as Json;
  const differing = Object.keys(sent).filter((name) => name in answer && !holds(answer[name], sent[name]));
  expectEqual(
    Object.fromEntries(differing.map((name) => [name, answer[name]])),
    Object.fromEntries(differing.map((name) => [name, sent[name]])),
    `${what}: the created resource does not hold what was sent (D17)`,
  );
  // When it was created, on the implementation's clock: within CLOCK_SKEW_MS of the suite's (D14).
  if (typeof answer.createdAt === "string") {
    const off = Date.parse(answer.createdAt) - Date.now();
    expectThat(
      Math.abs(off) <= CLOCK_SKEW_MS,
      `${what}: the created resource's createdAt is not when it was created (D14: the server's clock, within ${CLOCK_SKEW_MS / 60_000} minutes of the suite's)`,
      `about ${new Date().toISOString()}`,
      answer.createdAt,
    );
  }
  // Its Location is expectAnswer's to check (D35).
  const id = createdIdOf(op, answer);
  if (id === undefined) return;
  const created = createdIds.get(ctx) ?? new Set<string>();
  createdIds.set(ctx, created);
  const key = `${op.operationId} ${id}`;
  expectThat(!created.has(key), `${what}: the created resource has the id of one created before in this run (each resource its own, D14)`, "a new id", id);
  created.add(key);
  // A service request's leads are resources too: each lead its own id, in the request and across the run.
  const leadIds = (Array.isArray(answer.leads) ? (answer.leads as Json[]) : []).map((l) => `lead ${String(l?.leadID)}`);
  const reused = leadIds.filter((k, i) => created.has(k) || leadIds.indexOf(k) !== i);
  expectThat(reused.length === 0, `${what}: a lead has the id of another lead of this run (each lead its own, D14)`, "new lead ids", reused);
  for (const k of leadIds) created.add(k);
}

const fullToken = (ctx: ApiContext) => ctx.token(ctx.contract.scopes);

/** The headers that name a client's address behind a proxy, as the suite writes them itself: never the address D30 counts. */
const FORWARDED_HEADERS = "X-Forwarded-For, X-Real-IP and Forwarded";
/** Failure k's forged headers, each naming an address of its own from the documentation ranges (TEST-NET-2, then -3). */
function forwardedFor(k: number): Record<string, string> {
  const n = k % 508;
  const address = n < 254 ? `198.51.100.${1 + n}` : `203.0.113.${n - 253}`;
  return { "x-forwarded-for": address, "x-real-ip": address, forwarded: `for=${address}` };
}

/** A token request of `clientId` with `secret`, in the form or as HTTP Basic, that waits on no rate limit (the throttle checks judge the 429s). */
const credentialsRequest = (ctx: ApiContext, clientId: string, secret: string, how: { basic: boolean; dispatcher?: Agent; headers?: Record<string, string> }) =>
  how.basic
    ? ctx.requestToken({ grant_type: "client_credentials" }, { ...how.headers, authorization: basicOf(clientId, secret) }, { waitOnRateLimit: false, dispatcher: how.dispatcher })
    : ctx.requestToken({ grant_type: "client_credentials", client_id: clientId, client_secret: secret }, how.headers, { waitOnRateLimit: false, dispatcher: how.dispatcher });

/** `text` with the case of each of its letters swapped. */
const caseSwapped = (text: string) => [...text].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("");

/** `value` of an option with the case of each of its letters swapped; the check is skipped where that changes nothing. */
function caseSwappedOrSkip(value: string, option: string): string {
  const swapped = caseSwapped(value);
  if (swapped === value) throw new CheckSkipped(`${option} has no letter whose case could be swapped`);
  return swapped;
}

/** The real token with its end changed, and with its letters in the other case: well-formed, never issued (tokens are compared exactly). */
function forge(token: string): { what: string; token: string }[] {
  const tail = token.slice(-4) === "AAAA" ? "BBBB" : "AAAA";
  const swapped = caseSwapped(token);
  return [
    { what: "a forged token (a real one's last 4 characters changed)", token: `${token.slice(0, -4)}${tail}` },
    { what: "a real token with characters added (a prefix match takes it)", token: `${token}${tail}` },
    { what: "a real token without its last 4 characters (a match by its start takes it)", token: token.slice(0, -4) },
    ...(swapped === token ? [] : [{ what: "a real token with its letters in the other case", token: swapped }]),
  ];
}

/**
 * Runs a property over generated inputs with the suite's seed and count; the first failing input is
 * reported as it was sent (no shrinking: every shrink step would be another request).
 */
async function property<T>(ctx: ApiContext, arbitrary: fc.Arbitrary<T>, assert: (input: T) => Promise<void>): Promise<string> {
  const { seed, runs } = ctx.options;
  const details = await fc.check(fc.asyncProperty(arbitrary, assert), { seed, numRuns: runs, endOnFailure: true });
  if (!details.failed) return `${details.numRuns} generated inputs, seed ${seed}`;
  const input = details.counterexample?.[0];
  const error = details.errorInstance;
  const where = `generated input ${details.numRuns} of ${runs}, seed ${seed}`;
  if (error instanceof CheckFailed) throw new CheckFailed(`${error.message} (${where})`, error.expected, { input, answer: error.actual });
  throw new Error(`${(error as Error | undefined)?.message ?? String(error)} (${where}, input ${JSON.stringify(input)})`);
}

// ---------------------------------------------------------------------------------------------
// Inputs: valid ones from the schemas, invalid ones by one mutation of a valid one.

function queryArbitrary(contract: Contract, params: readonly QueryParameter[]): fc.Arbitrary<Record<string, string>> {
  const model = Object.fromEntries(
    params.map((p) => [p.name, arbitraryOf(p.schema, contract.resolve, { examples: true }).map((v) => String(v))]),
  );
  return fc.record(model, { requiredKeys: params.filter((p) => p.required).map((p) => p.name) }) as fc.Arbitrary<Record<string, string>>;
}

function validInputs(contract: Contract, op: Operation): fc.Arbitrary<Input> {
  const query = queryArbitrary(contract, op.query);
  if (!op.body) return query.map((q) => ({ query: q }));
  return fc.record({ query, body: arbitraryOf(op.body.schema, contract.resolve, { examples: true }) });
}

/** Every one-fault variant of a valid input: a query parameter missing or invalid, or a body fault. */
function invalidVariants(contract: Contract, op: Operation, input: Input): InvalidInput[] {
  const out: InvalidInput[] = [];
  for (const p of op.query) {
    const pointer = `/query/${p.name}`;
    if (p.required) {
      const { [p.name]: _removed, ...rest } = input.query;
      out.push({ query: rest, body: input.body, pointer, kind: "missing-required" });
    }
    const value = input.query[p.name];
    if (value === undefined) continue;
    // Query values travel as text: keep the variants whose text the schema refuses.
    const refuses = (v: unknown) => !contract.validatorAt(p.schemaPointer)(String(v));
    const variants = mutationsOf(p.schema, value, contract.resolve).filter((m) => refuses(m.value));
    const seenText = new Set<string>();
    for (const m of variants) {
      const text = String(m.value);
      if (seenText.has(text)) continue;
      seenText.add(text);
      out.push({ query: { ...input.query, [p.name]: text }, body: input.body, pointer, kind: m.kind });
    }
  }
  if (op.body && input.body !== undefined) {
    const validate = contract.validatorAt(op.body.schemaPointer);
    const mutations: Mutation[] = mutationsOf(op.body.schema, input.body, contract.resolve, (v) => !validate(v));
    out.push(...mutations.map((m) => ({ query: input.query, body: m.value, pointer: m.pointer, kind: m.kind })));
  }
  return out;
}

/** The input's body with bytes that are not UTF-8 (D29): a fault no JSON value can carry. */
const utf8Variants = (op: Operation, input: Input): InvalidInput[] =>
  op.body && input.body !== undefined ? [{ ...input, raw: invalidUtf8Of(JSON.stringify(input.body)), pointer: "", kind: "invalid-utf8" }] : [];

const describeInput = (input: InvalidInput) => `${input.kind} at ${input.pointer || "the body"}`;

// ---------------------------------------------------------------------------------------------
// The token endpoint (§4.1, §5.1, D11).

function tokenChecks(contract: Contract): ApiCheck[] {
  const op = contract.tokenOperation;
  const section = `${op.section}, D11`;
  const form = (ctx: ApiContext, extra: Record<string, string> = {}) => ({
    ...(successExample(op).body as Record<string, string>),
    client_id: ctx.options.clientId,
    client_secret: ctx.options.clientSecret,
    ...extra,
  });

  const refusal = (
    id: string,
    title: string,
    scenario: string,
    what: string,
    code: string,
    make: (ctx: ApiContext) => Record<string, string>,
    { headers = () => ({}), decision = "D11" }: { headers?: (ctx: ApiContext) => Record<string, string>; decision?: string } = {},
  ) =>
    defineCheck<ApiContext>({
      id,
      section: `${op.section}, ${decision}`,
      title,
      scenario,
      async run(ctx) {
        const response = await ctx.requestToken(make(ctx), headers(ctx));
        expectOAuthError(ctx, op, response, code, what);
      },
    });

  const unknownScope = `${contract.scopes[0] ?? "api"}-conformance-unknown`;
  return [
    defineCheck<ApiContext>({
      id: "token-issued-for-valid-credentials",
      section,
      title: "Valid client credentials asking for every scope of the API get an RFC 6749 Bearer token with those scopes, not cached.",
      scenario: "requests a token with --client-id, --client-secret and every scope of the API",
      async run(ctx) {
        const { response } = await requestFirstToken(ctx, contract, form);
        const granted = String(jsonOf(response).scope ?? "").split(" ");
        const missing = contract.scopes.filter((s) => !granted.includes(s));
        expectThat(missing.length === 0, "the token lacks scopes that were asked for (the client must be allowed every scope)", contract.scopes, granted);
        const lifetime = (successExample(op).response as Json | undefined)?.expires_in as unknown;
        const expiresIn = jsonOf(response).expires_in as unknown;
        expectThat(expiresIn === lifetime, `expires_in is not the tokens' lifetime (D11: ${String(lifetime)} seconds)`, lifetime, expiresIn);
      },
    }),
    defineCheck<ApiContext>({
      id: "token-grants-exactly-the-scopes-asked",
      section,
      title: "A token asked for one scope has that scope alone (in `scope` and in what it may do); one asked for with no `scope`, or `scope=` with no value (RFC 6749 §3.1: as if omitted), has every scope the client may have.",
      scenario: `requests a token for ${contract.scopes[0]} alone, then one without a scope parameter, then one with scope=`,
      async run(ctx) {
        const cases: [string, Record<string, string>, string[]][] = [
          [`scope=${contract.scopes[0]}`, form(ctx, { scope: contract.scopes[0]! }), [contract.scopes[0]!]],
          ["no scope parameter", Object.fromEntries(Object.entries(form(ctx)).filter(([name]) => name !== "scope")), contract.scopes],
          ["scope= with no value", form(ctx, { scope: "" }), contract.scopes],
        ];
        for (const [what, asked, scopes] of cases) {
          const response = await ctx.requestToken(asked);
          expectAnswer(ctx, op, response, [successExample(op).status], what);
          const granted = String(jsonOf(response).scope ?? "").split(" ").filter(Boolean).sort();
          expectEqual(granted, [...scopes].sort(), `${what}: the scopes granted are not those asked for (D11)`);
        }
      },
    }),
    defineCheck<ApiContext>({
      id: "token-ignores-unknown-parameters",
      section: `${op.section}, D11, D16`,
      title: "A token request with a parameter the endpoint does not know gets its token: unknown parameters are ignored (RFC 6749 §3.2).",
      scenario: "requests a token with valid credentials and one more parameter, certify_unknown=1",
      async run(ctx) {
        const response = await ctx.requestToken(form(ctx, { certify_unknown: "1" }));
        expectAnswer(ctx, op, response, [successExample(op).status], "an unknown parameter");
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-unsupported-grant-type",
      section: `${op.section}, D11`,
      title: `A grant type other than client_credentials gets ${contract.oauthErrorStatus("unsupported_grant_type")} unsupported_grant_type, client_credentials in other letters or between spaces too (RFC 6749 §4.4.2: the value MUST be client_credentials).`,
      scenario: "requests a token with grant_type=password, then with grant_type=Client_Credentials, then with a space at each end of client_credentials",
      async run(ctx) {
        for (const grantType of ["password", "Client_Credentials", " client_credentials "]) {
          expectOAuthError(ctx, op, await ctx.requestToken(form(ctx, { grant_type: grantType })), "unsupported_grant_type", `grant_type=${grantType}`);
        }
      },
    }),
    // One more of the suite's own client's failed authentications (D30: it spends four a run).
    refusal(
      "token-rejects-secret-in-other-case",
      `A client secret with its letters in another case is a wrong secret: ${contract.oauthErrorStatus("invalid_client")} invalid_client (a secret is compared exactly, not by a case-insensitive collation).`,
      "requests a token with --client-secret, the case of each of its letters swapped",
      "the client secret in another letter case",
      "invalid_client",
      (ctx) => form(ctx, { client_secret: caseSwappedOrSkip(ctx.options.clientSecret, "--client-secret") }),
    ),
    // A failed authentication of a client id nobody has (D30): not the suite's own client's budget.
    refusal(
      "token-rejects-client-id-in-other-case",
      `A client id with its letters in another case is an unknown client, even with that client's secret: ${contract.oauthErrorStatus("invalid_client")} invalid_client (a client id is compared exactly: looked up without regard to case, each spelling would get its own budget of D30's throttle).`,
      "requests a token with --client-id, the case of each of its letters swapped, and --client-secret",
      "the client id in another letter case, with the client's secret",
      "invalid_client",
      (ctx) => form(ctx, { client_id: caseSwappedOrSkip(ctx.options.clientId, "--client-id") }),
      { decision: "D11, D30" },
    ),
    refusal("token-rejects-wrong-secret", `A wrong client secret gets ${contract.oauthErrorStatus("invalid_client")} invalid_client.`, "requests a token with --client-secret plus a suffix", "a wrong client secret", "invalid_client", (ctx) =>
      form(ctx, { client_secret: `${ctx.options.clientSecret}-wrong` }),
    ),
    refusal(
      "token-rejects-secret-with-spaces",
      `The client secret with a space at each end is a wrong secret: ${contract.oauthErrorStatus("invalid_client")} invalid_client (a secret is compared exactly, never trimmed).`,
      "requests a token with --client-secret between two spaces",
      "the client secret between two spaces",
      "invalid_client",
      (ctx) => form(ctx, { client_secret: ` ${ctx.options.clientSecret} ` }),
    ),
    refusal(
      "token-rejects-truncated-secret",
      `The client secret without its last character is a wrong secret: ${contract.oauthErrorStatus("invalid_client")} invalid_client (a secret is compared exactly, not by its start).`,
      "requests a token with --client-secret less its last character",
      "the client secret without its last character",
      "invalid_client",
      (ctx) => form(ctx, { client_secret: [...ctx.options.clientSecret].slice(0, -1).join("") }),
    ),
    refusal("token-rejects-unknown-scope", `A scope the API does not have gets ${contract.oauthErrorStatus("invalid_scope")} invalid_scope.`, `requests a token for ${unknownScope}`, "an unknown scope", "invalid_scope", (ctx) =>
      form(ctx, { scope: unknownScope }),
    ),
    refusal(
      "token-rejects-comma-separated-scopes",
      `Two scopes joined by a comma are one unknown scope: ${contract.oauthErrorStatus("invalid_scope")} invalid_scope (RFC 6749 §3.3: scopes are separated by spaces).`,
      `requests a token for ${contract.scopes.slice(0, 2).join(",")}`,
      "scopes joined by a comma",
      "invalid_scope",
      (ctx) => form(ctx, { scope: contract.scopes.slice(0, 2).join(",") }),
    ),
    refusal(
      "token-rejects-tab-separated-scopes",
      `Two scopes joined by a tab are not two scopes: ${contract.oauthErrorStatus("invalid_scope")} invalid_scope (RFC 6749 §3.3: scope tokens are separated by a space, and a tab is no scope character).`,
      `requests a token for ${contract.scopes.slice(0, 2).join(" and ")} joined by a tab`,
      "scopes joined by a tab",
      "invalid_scope",
      (ctx) => form(ctx, { scope: contract.scopes.slice(0, 2).join("\t") }),
    ),
    refusal(
      "token-rejects-scope-in-other-case",
      `A scope in other letters is not that scope: ${contract.oauthErrorStatus("invalid_scope")} invalid_scope (scopes are compared exactly, RFC 6749 §3.3).`,
      `requests a token for ${contract.scopes[0]!.toUpperCase()}`,
      "a scope in upper case",
      "invalid_scope",
      (ctx) => form(ctx, { scope: contract.scopes[0]!.toUpperCase() }),
    ),
    defineCheck<ApiContext>({
      id: "token-issued-for-basic-authentication",
      section: `${op.section}, D31`,
      title:
        "Valid client credentials sent as HTTP Basic (RFC 6749 §2.3.1) instead of form parameters get a token, also beside an empty client_secret= (RFC 6749 §3.1: as if omitted), with the scheme's name in lower case (RFC 9110 §11.1: case-insensitive), and with a character of each part written %HH (each part is form-decoded, which reads any %HH).",
      scenario:
        "requests a token with Authorization: Basic of --client-id and --client-secret, and no client_id or client_secret in the form; then with client_secret= and no value in the form; then with the scheme written basic; then with the first character of the client id and of the secret as %HH",
      async run(ctx) {
        const basic = { authorization: basicOf(ctx.options.clientId, ctx.options.clientSecret) };
        const response = await ctx.requestToken({ grant_type: "client_credentials", scope: contract.scopes.join(" ") }, basic);
        expectAnswer(ctx, op, response, [successExample(op).status], "HTTP Basic client authentication");
        const empty = await ctx.requestToken({ grant_type: "client_credentials", scope: contract.scopes.join(" "), client_secret: "" }, basic);
        expectAnswer(ctx, op, empty, [successExample(op).status], "HTTP Basic beside client_secret= with no value (not a second method)");
        const lower = await ctx.requestToken({ grant_type: "client_credentials", scope: contract.scopes.join(" ") }, { authorization: basic.authorization.replace(/^Basic/, "basic") });
        expectAnswer(ctx, op, lower, [successExample(op).status], "HTTP Basic with the scheme written basic (auth schemes are case-insensitive)");
        // A secret with a reserved character arrives as %HH: where the deployment's have none, one is made.
        const escapingFirst = (v: string) => {
          const [first = "", ...rest] = [...v];
          return [...Buffer.from(first)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("") + formEncoded(rest.join(""));
        };
        const escaped = await ctx.requestToken({ grant_type: "client_credentials", scope: contract.scopes.join(" ") }, { authorization: basicOf(ctx.options.clientId, ctx.options.clientSecret, escapingFirst) });
        expectAnswer(ctx, op, escaped, [successExample(op).status], "HTTP Basic with the first character of the client id and of the secret written %HH (each part is form-decoded)");
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-bytes-not-utf8",
      section: `${op.section}, D29`,
      title: "A token request whose body holds bytes that are not UTF-8, or whose Content-Type names another charset, gets 400 invalid_request and no token: refused, never repaired (D29).",
      scenario: "requests a token with valid credentials and a parameter the endpoint does not know whose value is the bytes 0xFF 0xFE, then with valid credentials labelled charset=iso-8859-1",
      async run(ctx) {
        const valid = new URLSearchParams(form(ctx)).toString();
        const notUtf8 = Buffer.concat([Buffer.from(`${valid}&note=`), Buffer.from([0xff, 0xfe])]);
        expectOAuthError(ctx, op, await ctx.call(op, { body: notUtf8, contentType: op.body!.mediaType }), "invalid_request", "a body with bytes that are not UTF-8");
        expectOAuthError(ctx, op, await ctx.call(op, { body: valid, contentType: `${op.body!.mediaType}; charset=iso-8859-1` }), "invalid_request", "a body labelled charset=iso-8859-1");
      },
    }),
    defineCheck<ApiContext>({
      id: "token-charset-in-any-case-accepted",
      section: `${op.section}, D29`,
      title: "A token request labelled charset=UTF-8 gets its token: UTF-8 is named in any letter case (RFC 9110 §8.3.2).",
      scenario: "requests a token with valid credentials and Content-Type application/x-www-form-urlencoded; charset=UTF-8",
      async run(ctx) {
        const response = await ctx.call(op, { body: new URLSearchParams(form(ctx)).toString(), contentType: `${op.body!.mediaType}; charset=UTF-8` });
        expectAnswer(ctx, op, response, [successExample(op).status], "a body labelled charset=UTF-8");
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-get",
      section: `${op.section}, D11`,
      title: "A token request made with GET, its parameters in the query, gets no token but a 4xx: the token endpoint takes POST alone (RFC 6749 §3.2), so that no secret is asked for in a URL.",
      scenario: "GET on the token endpoint with grant_type, client_id, client_secret of --client-id and scope in the query",
      async run(ctx) {
        const query = { grant_type: "client_credentials", client_id: ctx.options.clientId, client_secret: ctx.options.clientSecret, scope: contract.scopes.join(" ") };
        const response = await ctx.call({ ...op, method: "GET" }, { query });
        expectThat(response.status >= 400 && response.status < 500, "a GET on the token endpoint was not refused", "a 4xx (405, 404 or 400), no token", seen(response));
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-credentials-in-the-query",
      section: `${op.section}, D11, D31`,
      title: "A POST token request whose client credentials are in the URL's query, the form holding grant_type alone, gets no token but a 4xx: credentials are never taken from a request URI (RFC 6749 §2.3.1).",
      scenario: "POST on the token endpoint with client_id, client_secret of --client-id and scope in the query and grant_type=client_credentials in the form",
      async run(ctx) {
        const query = { client_id: ctx.options.clientId, client_secret: ctx.options.clientSecret, scope: contract.scopes.join(" ") };
        const response = await ctx.requestToken({ grant_type: "client_credentials" }, {}, { query });
        expectThat(response.status >= 400 && response.status < 500, "a token was issued for credentials in the URL's query: a URL is logged and cached, a secret never belongs in one (RFC 6749 §2.3.1)", "a 4xx (400 invalid_request or 401 invalid_client), no token", seen(response));
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-wrong-secret-basic",
      section: `${op.section}, D31`,
      title: `Client credentials sent as HTTP Basic that fail authentication get ${contract.oauthErrorStatus("invalid_client")} invalid_client with a \`WWW-Authenticate: Basic\` challenge and its realm (RFC 6749 §5.2, RFC 7617 §2).`,
      scenario: "requests a token with Authorization: Basic of a made-up client id and secret",
      async run(ctx) {
        // A made-up client: the suite's own client spends its failed-authentication budget (D30) once per run, in token-rejects-wrong-secret.
        const clientId = `certify-basic-${randomBytes(6).toString("hex")}`;
        const response = await ctx.requestToken({ grant_type: "client_credentials" }, { authorization: basicOf(clientId, "wrong") });
        expectOAuthError(ctx, op, response, "invalid_client", "a wrong secret in HTTP Basic");
        const field = response.headers["www-authenticate"];
        // Among the field's challenges, which may be several (RFC 9110 §11.6.1).
        // RFC 7617 §2: the realm is required (D31 names it).
        expectThat(challengeOf(field, "Basic")?.params.realm !== undefined, "the WWW-Authenticate header has no Basic challenge with a realm (RFC 7617 §2: realm is required)", 'Basic realm="…"', field ?? "(none)");
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-two-authentication-methods",
      section: `${op.section}, D31`,
      title: `HTTP Basic together with client_secret in the form gets ${contract.oauthErrorStatus("invalid_request")} invalid_request (one method per request, RFC 6749 §2.3).`,
      scenario: "requests a token with Authorization: Basic and client_id, client_secret in the form, all valid",
      async run(ctx) {
        const response = await ctx.requestToken(form(ctx), { authorization: basicOf(ctx.options.clientId, ctx.options.clientSecret) });
        expectOAuthError(ctx, op, response, "invalid_request", "two authentication methods");
      },
    }),
    defineCheck<ApiContext>({
      id: "token-basic-accepts-same-client-id",
      section: `${op.section}, D31`,
      title: "HTTP Basic together with a client_id parameter naming the same client gets a token (RFC 6749 §3.2.1).",
      scenario: "requests a token with Authorization: Basic of --client-id and --client-secret, and client_id in the form",
      async run(ctx) {
        const response = await ctx.requestToken({ grant_type: "client_credentials", client_id: ctx.options.clientId }, { authorization: basicOf(ctx.options.clientId, ctx.options.clientSecret) });
        expectAnswer(ctx, op, response, [successExample(op).status], "Basic with the same client_id");
      },
    }),
    refusal(
      "token-basic-rejects-other-client-id",
      `HTTP Basic together with a client_id parameter naming another client gets ${contract.oauthErrorStatus("invalid_request")} invalid_request (D31).`,
      "requests a token with Authorization: Basic of --client-id and --client-secret, and client_id of another client in the form",
      "Basic with another client_id",
      "invalid_request",
      (ctx) => ({ grant_type: "client_credentials", client_id: `${ctx.options.clientId}-other` }),
      { headers: (ctx) => ({ authorization: basicOf(ctx.options.clientId, ctx.options.clientSecret) }), decision: "D31" },
    ),
    defineCheck<ApiContext>({
      id: "token-rejects-malformed-basic",
      section: `${op.section}, D31`,
      title: `An Authorization header that is not well-formed Basic gets ${contract.oauthErrorStatus("invalid_request")} invalid_request, not a failed authentication nor a token (D31): characters that are not base64, also after the valid credentials' base64.`,
      scenario: "requests a token with Authorization: Basic followed by characters that are not base64, then by the base64 of --client-id and --client-secret with !! after it",
      async run(ctx) {
        const cases: [string, string][] = [
          ["Basic followed by characters that are not base64", "Basic !not-base64!"],
          ["the valid credentials' base64 with !! after it", `${basicOf(ctx.options.clientId, ctx.options.clientSecret)}!!`],
        ];
        for (const [what, authorization] of cases) {
          const response = await ctx.requestToken({ grant_type: "client_credentials" }, { authorization });
          expectOAuthError(ctx, op, response, "invalid_request", what);
        }
      },
    }),
    defineCheck<ApiContext>({
      id: "token-rejects-repeated-parameters",
      section: `${op.section}, D11`,
      title: `A form parameter sent twice gets ${contract.oauthErrorStatus("invalid_request")} invalid_request (RFC 6749 §3.2), never "last one wins".`,
      scenario: "requests a token with valid credentials and scope twice, then client_id twice",
      async run(ctx) {
        const base = Object.entries(form(ctx)).filter(([k]) => k !== "scope") as [string, string][];
        const cases: [string, [string, string][]][] = [
          ["scope twice", [...base, ["scope", contract.scopes[0]!], ["scope", contract.scopes.join(" ")]]],
          ["client_id twice", [...base, ["client_id", `${ctx.options.clientId}-other`]]],
        ];
        for (const [what, pairs] of cases) {
          const response = await ctx.requestToken(pairs);
          expectOAuthError(ctx, op, response, "invalid_request", what);
        }
      },
    }),
    ownTokenCheck(contract, form),
    limitedClientCheck(contract),
    ...(contract.failedAuthThrottle ? [throttleCheck(contract, contract.failedAuthThrottle), knownClientThrottleCheck(contract, contract.failedAuthThrottle)] : []),
    tokenLifetimeCheck(contract, contract.liveTokensPerClient ?? Number.POSITIVE_INFINITY, form),
    ...(contract.liveTokensPerClient ? [liveTokensCheck(contract, contract.liveTokensPerClient, form)] : []),
  ];
}

/**
 * D23, D32: a token is its client's. A live token handed back again (D32) is the same client's: never
 * another client's of the same scopes, which would act as that partner.
 */
function ownTokenCheck(contract: Contract, form: (ctx: ApiContext, extra?: Record<string, string>) => Record<string, string>): ApiCheck {
  const op = contract.tokenOperation;
  return defineCheck<ApiContext>({
    id: "token-is-its-own-clients",
    section: `${op.section}, D23, D32`,
    title: "Two clients asking for the same scopes get tokens of their own: a token handed out again (D32) is never another client's.",
    scenario: "with --second-client-id: a token for it (every scope it may have), then one for --client-id with the scopes it was granted, then one for it with those scopes again",
    async run(ctx) {
      const { secondClientId: id, secondClientSecret: secret } = ctx.options;
      if (id === undefined || secret === undefined) {
        throw new CheckSkipped("give --second-client-id and --second-client-secret to check that each client's tokens are its own (D23, D32)");
      }
      const second = (scope?: string) => clientTokenRequest(ctx, id, secret, { scope });
      const first = await second();
      expectAnswer(ctx, op, first, [successExample(op).status], "a token request of --second-client-id (are its id and secret right?)");
      const scope = String(jsonOf(first).scope ?? "");
      const mine = await ctx.requestToken(form(ctx, { scope }));
      expectAnswer(ctx, op, mine, [successExample(op).status], `a token request of --client-id for ${scope}`);
      const again = await second(scope);
      expectAnswer(ctx, op, again, [successExample(op).status], `a token request of --second-client-id for ${scope}`);
      const [a, b, c] = [first, mine, again].map((r) => String(jsonOf(r).access_token));
      expectThat(
        a !== b && b !== c,
        "--client-id was handed --second-client-id's token, or the other way round: a token acts as its client's partner (D23); a live token handed back (D32) must be the same client's",
        "a token of --client-id unlike either of --second-client-id's",
        { "--second-client-id": a, "--client-id": b, "--second-client-id again": c },
      );
    },
  });
}

/**
 * D11, D12: a client is granted the scopes it may have and no other. Asked for one it may not have, alone
 * or among its own, the endpoint answers invalid_scope (RFC 6749 §5.2: "exceeds the scope granted"), never
 * a token with fewer scopes than asked (D11: a token has exactly the scopes asked).
 */
function limitedClientCheck(contract: Contract): ApiCheck {
  const op = contract.tokenOperation;
  return defineCheck<ApiContext>({
    id: "token-refuses-scopes-the-client-may-not-have",
    section: `${op.section}, D11, D12`,
    title: `A scope the client may not have gets ${contract.oauthErrorStatus("invalid_scope")} invalid_scope, alone or among scopes it may have, never a token; without a scope parameter the client gets its own scopes alone, and that token is refused by an operation of another scope.`,
    scenario:
      "with --limited-client-id: a token for it without a scope parameter; for each scope of the API that token lacks, a token for that scope alone, then for every scope of the API; then the first token sent to an operation of a scope it lacks",
    async run(ctx) {
      const { limitedClientId: id, limitedClientSecret: secret } = ctx.options;
      if (id === undefined || secret === undefined) {
        throw new CheckSkipped("give --limited-client-id and --limited-client-secret (a client allowed some scopes of the API but not every one) to check that a client is granted its own scopes alone (D11, D12)");
      }
      const ask = (scope?: string) => clientTokenRequest(ctx, id, secret, { scope });
      const own = await ask();
      expectAnswer(ctx, op, own, [successExample(op).status], "a token request of --limited-client-id without a scope parameter (are its id and secret right?)");
      const granted = String(jsonOf(own).scope ?? "").split(" ").filter(Boolean);
      const lacking = contract.scopes.filter((s) => !granted.includes(s));
      expectThat(
        lacking.length > 0,
        "--limited-client-id was granted every scope of the API: a client's scopes are not enforced, or it may have them all (certify with a client that may not)",
        `fewer scopes than ${contract.scopes.join(" ")}`,
        granted.join(" "),
      );
      for (const scope of [...lacking, contract.scopes.join(" ")]) {
        expectOAuthError(ctx, op, await ask(scope), "invalid_scope", `--limited-client-id asking for ${scope}`);
      }
      // Where it can, an operation whose example acts for no business: the example's business is not this
      // client's, a second fault whose answer would do as well (D13: a request with several gets any one's).
      const businessForbidden = contract.problem("business-forbidden");
      const candidates = contract.apiOperations.filter((o) => o.successExamples.length > 0 && o.scopes.some((s) => lacking.includes(s)));
      const target = candidates.find((o) => !o.problemTypes.includes(businessForbidden.type)) ?? candidates[0];
      if (target) {
        const forbidden = contract.problem("insufficient-scope");
        const types = [forbidden.type, ...(target.problemTypes.includes(businessForbidden.type) ? [businessForbidden.type] : [])];
        const response = await sendExample(ctx, target, String(jsonOf(own).access_token));
        expectAnswer(ctx, target, response, [forbidden.status], `the token of --limited-client-id (${granted.join(" ")}) sent to ${target.operationId}`);
        const type = jsonOf(response).type as unknown;
        expectThat(types.includes(type as string), `the token of --limited-client-id sent to ${target.operationId}: the problem type is not insufficient-scope`, types.join(" or "), type);
      }
    },
  });
}

/** The token token-issued-for-valid-credentials got, when, and how many tokens the run had been issued by then. */
const firstTokens = new WeakMap<ApiContext, { token: string; at: number; issuedBefore: number }>();
/** Requests a token for every scope with the certifying client's credentials, and keeps it as the run's first. */
async function requestFirstToken(ctx: ApiContext, contract: Contract, form: (ctx: ApiContext, extra?: Record<string, string>) => Record<string, string>) {
  const op = contract.tokenOperation;
  const response = await ctx.requestToken(form(ctx, { scope: contract.scopes.join(" ") }));
  expectAnswer(ctx, op, response, [successExample(op).status], "token request");
  const first = { token: String(jsonOf(response).access_token), at: performance.now(), issuedBefore: ctx.tokensIssued };
  firstTokens.set(ctx, first);
  return { response, first };
}

/** An operation with a success example to call with a token; a GET where there is one, as it changes nothing. */
function probeOperation(contract: Contract): Operation {
  const withExample = contract.apiOperations.filter((o) => o.successExamples.length > 0);
  return withExample.find((o) => o.method === "GET") ?? withExample[0]!;
}

/**
 * D11: tokens live 3600 s. The run cannot wait that long; it can keep its first token a minute (the
 * throttle checks before this one wait about that long) and use it then. Before the cap check, which
 * revokes it.
 */
function tokenLifetimeCheck(contract: Contract, maxLive: number, form: (ctx: ApiContext, extra?: Record<string, string>) => Record<string, string>): ApiCheck {
  const op = contract.tokenOperation;
  const probe = probeOperation(contract);
  const lifetime = (successExample(op).response as Json | undefined)?.expires_in as unknown;
  const AGE_SECONDS = 60;
  return defineCheck<ApiContext>({
    id: "token-still-works-a-minute-later",
    section: `${op.section}, D11`,
    title: `A token still works ${AGE_SECONDS} s after it was issued (D11: tokens live ${String(lifetime)} s).`,
    scenario: `calls ${probe.method} ${probe.path} with the token token-issued-for-valid-credentials got, once it is at least ${AGE_SECONDS} s old (run alone: requests one, and waits)`,
    async run(ctx) {
      const first = firstTokens.get(ctx) ?? (await requestFirstToken(ctx, contract, form)).first;
      // D32 revokes a client's oldest token once it has more than its cap: counted over every client, to be safe.
      const since = ctx.tokensIssued - first.issuedBefore;
      if (since >= maxLive) throw new CheckSkipped(`the run was issued ${since} tokens since its first: D32 may have revoked that one (a client holds at most ${maxLive})`);
      const aged = first.at + AGE_SECONDS * 1000;
      // A timer may fire a millisecond early.
      while (performance.now() < aged) await new Promise((resolve) => setTimeout(resolve, aged - performance.now() + 1));
      const age = Math.floor((performance.now() - first.at) / 1000);
      const response = await sendExample(ctx, probe, first.token);
      expectAnswer(ctx, probe, response, [successExample(probe).status], `${probe.method} ${probe.path} with a token issued ${age} s before (D11: tokens live ${String(lifetime)} s)`);
      return `the token was ${age} s old`;
    },
  });
}

/** D32: one token more than a client may hold revokes its oldest; the newest ones keep working. */
function liveTokensCheck(contract: Contract, max: number, form: (ctx: ApiContext, extra?: Record<string, string>) => Record<string, string>): ApiCheck {
  const op = contract.tokenOperation;
  const probe = probeOperation(contract);
  const unauthenticated = contract.problem("unauthenticated").status;
  return defineCheck<ApiContext>({
    id: "token-cap-revokes-oldest",
    section: `${op.section}, D32`,
    title: `A client holds at most ${max} live tokens, whatever their scopes: issuing one more revokes its oldest (${unauthenticated} from then on, on every operation), and the newest keep working; another client's tokens are not its own to revoke.`,
    scenario: `with --second-client-id, first requests a token for it and calls ${probe.method} ${probe.path} with it; requests ${max + 1} tokens for --client-id, the first for ${probe.scopes.join(" ")} alone and the others for every scope, then calls ${probe.method} ${probe.path} with the first, the second and the last, every other operation's success example with the first, and ${probe.method} ${probe.path} with the second client's token again`,
    async run(ctx) {
      const example = successExample(probe);
      const statusWith = async (token: string) => (await sendExample(ctx, probe, token)).status;
      // The second client's token, and what it got before: the cap is each client's own (D32), so it gets the same after.
      const { secondClientId, secondClientSecret } = ctx.options;
      let other: { token: string; before: number } | undefined;
      if (secondClientId !== undefined && secondClientSecret !== undefined) {
        const response = await clientTokenRequest(ctx, secondClientId, secondClientSecret);
        if (response.status === 200) {
          const token = String(jsonOf(response).access_token);
          other = { token, before: await statusWith(token) };
        }
      }
      try {
        const issued: string[] = [];
        for (let i = 1; i <= max + 1; i++) {
          // The first of other scopes than the rest: the cap is the client's, not one per set of scopes (D32).
          const response = await ctx.requestToken(form(ctx, { scope: (i === 1 ? probe.scopes : contract.scopes).join(" ") }));
          expectAnswer(ctx, op, response, [successExample(op).status], `token ${i} of ${max + 1}`);
          issued.push(String(jsonOf(response).access_token));
        }
        // A live token handed back again (D32 allows it: nothing new issued) is as new as its last issue:
        // the tokens by when each was last issued, oldest first; the cap counts these alone.
        const byLastIssue = [...new Set([...issued].reverse())].reverse();
        const oldestRevoked = byLastIssue.length > max;
        expectEqual(
          { first: await statusWith(byLastIssue[0]!), second: await statusWith(byLastIssue[1] ?? issued[max]!), last: await statusWith(issued[max]!) },
          { first: oldestRevoked ? unauthenticated : example.status, second: example.status, last: example.status },
          oldestRevoked
            ? `after ${max + 1} tokens the first must be revoked and the newest still work (the second and the last tried)`
            : `the token endpoint handed back live tokens (${byLastIssue.length} distinct of ${max + 1}): each must keep working`,
        );
        if (oldestRevoked) {
          // Revoked for every operation, not only where one code path looks (D32).
          const elsewhere: Record<string, number> = {};
          for (const o of contract.apiOperations.filter((x) => x !== probe && x.successExamples.length > 0)) {
            elsewhere[`${o.method} ${o.path}`] = (await sendExample(ctx, o, byLastIssue[0]!)).status;
          }
          expectEqual(elsewhere, Object.fromEntries(Object.keys(elsewhere).map((k) => [k, unauthenticated])), `the revoked token was taken by another operation: D32 refuses it with ${unauthenticated} from then on, everywhere`);
        }
        if (other) {
          const after = await statusWith(other.token);
          expectThat(
            after === other.before,
            `--second-client-id's token answered otherwise after --client-id was issued ${max + 1} tokens: the cap is each client's own (D32), not one over every client`,
            other.before,
            after,
          );
        }
      } finally {
        // The suite's own tokens, older still, are revoked too.
        ctx.forgetTokens();
      }
    },
  });
}

/**
 * D30: a made-up client id's failed-authentication budget, spent; the next request is 429 with Retry-After.
 * The failures alternate the form and HTTP Basic (D30 counts every failed client authentication, D31 makes
 * Basic one). Two tries, each with a new client id: a window that ends during one (a window aligned to
 * the clock) cannot end during the next, seconds later. A 429 before the budget is spent is a rate limit
 * of the deployment (D18) when a successful token request of the suite's client from the same address
 * meets one too (D30 never throttles one client for another's failures): the check waits out its
 * Retry-After and sends that failure again (a request answered 429 was not authenticated, D30). Otherwise
 * the throttle came too early, and it fails.
 */
function throttleCheck(contract: Contract, budget: NonNullable<Contract["failedAuthThrottle"]>): ApiCheck {
  const op = contract.tokenOperation;
  const limited = contract.problem("rate-limited").status;
  const refused = contract.oauthErrorStatus("invalid_client");
  return defineCheck<ApiContext>({
    id: "token-throttles-failed-authentication",
    section: `${op.section}, D30, D31`,
    title: `After ${budget.perClientId} failed authentications of one client_id within ${budget.windowSeconds} s, in the form or with HTTP Basic, its next token request gets a ${limited} problem with Retry-After.`,
    scenario: `requests a token ${budget.perClientId + 1} times for a made-up client id with a wrong secret, in the form and with HTTP Basic in turn (only that client id is throttled); once more with a new client id if the window may have ended meanwhile`,
    async run(ctx) {
      const tries = [];
      const waited = { seconds: 0 };
      for (let tryNumber = 1; tryNumber <= 2; tryNumber++) {
        // A fresh client id per try: the suite's own client is never locked out.
        const clientId = `certify-throttle-${randomBytes(6).toString("hex")}`;
        // The HTTP Basic ones from another loopback address where the suite can send from one: the budget is
        // the client id's from every address together, not one per address and client id.
        let other = onLoopbackV4(ctx) ? otherLoopback() : undefined;
        const request = (n: number, dispatcher?: Agent) => credentialsRequest(ctx, clientId, "wrong", { basic: n % 2 === 0, dispatcher });
        const attempt = async (n: number) => {
          if (n % 2 === 1 || other === undefined) return request(n);
          try {
            return await request(n, other.dispatcher);
          } catch (error) {
            if (n > 2) throw error;
            // This machine cannot send from another loopback address (macOS by default): all from one.
            await other.dispatcher.close();
            other = undefined;
            return request(n);
          }
        };
        const how = (n: number) => (n % 2 === 1 ? "in the form" : `with HTTP Basic${other ? ` from ${other.address}` : ""}`);
        try {
          /** The answer to failure `n` once no rate limit of the deployment holds it up; throws where D30's throttle came early. */
          const answerTo = async (n: number) => {
            // The answer past the budget is judged whatever its Retry-After: a window aligned to the clock began before the check.
            const response = await pastDeploymentLimits(ctx, () => attempt(n), budget.windowSeconds, waited, n <= budget.perClientId ? windowFrom : undefined);
            if (response.status === limited && n <= budget.perClientId) {
              throw new CheckFailed(
                `failed authentication ${n} of ${budget.perClientId} (${how(n)}) got ${limited}, and a successful token request of --client-id from the same address then did not: client id ${clientId} was throttled before D30's budget of ${budget.perClientId}`,
                `${refused} for ${budget.perClientId} failed authentications`,
                seen(response),
              );
            }
            return response;
          };
          const windowFrom = performance.now();
          for (let n = 1; n <= budget.perClientId; n++) {
            expectAnswer(ctx, op, await answerTo(n), [refused], `failed authentication ${n} of ${budget.perClientId} (${how(n)})`);
          }
          const next = budget.perClientId + 1;
          const response = await answerTo(next);
          if (response.status === limited) {
            expectAnswer(ctx, op, response, [limited], `failed authentication ${next} (${how(next)})`);
            expectRetryAfterInWindow(response, budget.windowSeconds);
            const notes = [
              ...(tries.length > 0 ? [`the first client id was not throttled after ${budget.perClientId} failures (its window may have ended meanwhile), the second was`] : []),
              ...(waited.seconds > 0 ? [waitedNote(limited, waited.seconds)] : []),
            ];
            return notes.length > 0 ? notes.join("; ") : undefined;
          }
          tries.push({ clientId, next: seen(response), ...(other ? { basicFrom: other.address } : {}) });
        } finally {
          await other?.dispatcher.close();
        }
      }
      throw new CheckFailed(
        `after ${budget.perClientId} failed authentications of one client_id, its next token request was not throttled (tried twice, each with a new client id: a window cannot end during both; where basicFrom says so, the HTTP Basic ones came from another address, and the budget is the client id's from every address together)`,
        limited,
        tries,
      );
    },
  });
}

/** Said where the suite waited out a rate limit of the deployment. */
const waitedNote = (limited: number, seconds: number) => `a rate limit of the deployment (D18) answered ${limited} to every client's token requests meanwhile: waited ${seconds} s in all`;

/**
 * A token request's answer once no rate limit of the deployment (D18) holds it up. A 429 that a successful
 * token request of --client-id from the same address meets too is such a limit (D30 never throttles one
 * client for another's failures, nor counts a request answered 429): waited out as its Retry-After says,
 * and the request sent again, the seconds added to `waited`. A 429 the successful request does not meet
 * is returned, for the caller to judge as D30's throttle.
 */
async function pastDeploymentLimits(
  ctx: ApiContext,
  send: () => Promise<ResponseSeen>,
  windowSeconds: number,
  waited: { seconds: number },
  windowFrom?: number,
): Promise<ResponseSeen> {
  const limited = ctx.contract.problem("rate-limited").status;
  for (;;) {
    const response = await send();
    if (response.status !== limited) return response;
    const own = await suiteToken(ctx);
    ctx.forgetTokens();
    // D30's 429 gives the seconds left in its window, which began with the check's failures (windowFrom):
    // one that says "retry sooner" is a limit of the deployment, also where it let the suite's request
    // through (a limiter that refused one request in so many).
    const told = retryAfterSeconds(response.headers["retry-after"]);
    const sooner = windowFrom !== undefined && told !== undefined && told < windowSeconds - (performance.now() - windowFrom) / 1000 - 1;
    if (own.status !== limited && !sooner) return response;
    // The wait the suite's own request was told: the request's own 429 may be D30's throttle (its minute)
    // met while a shorter limit of the deployment held the suite's request up by chance.
    const seconds = own.status === limited ? (retryAfterSeconds(own.headers["retry-after"]) ?? told) : told;
    if (seconds === undefined || seconds > windowSeconds || waited.seconds + seconds > 2 * windowSeconds) {
      throw new CheckSkipped(
        `a rate limit of the deployment answered ${limited} to token requests of every client (Retry-After ${seconds ?? "none"}), too long to wait out here: D30's budgets cannot be seen under it (D18); certify with a limit above 12 token requests per address a minute`,
      );
    }
    waited.seconds += seconds;
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  }
}

/**
 * D30 for a client that exists: its wrong secrets count (not only unknown client ids'), a success among
 * them counts for nothing and resets nothing, and once the budget is spent the right secret is refused
 * too until the window ends. Only with a second client (--second-client-id): it is locked out for up to
 * a minute, and the check waits for that to end, so that the client works again when the suite ends.
 */
function knownClientThrottleCheck(contract: Contract, budget: NonNullable<Contract["failedAuthThrottle"]>): ApiCheck {
  const op = contract.tokenOperation;
  const limited = contract.problem("rate-limited").status;
  const refused = contract.oauthErrorStatus("invalid_client");
  const issued = successExample(op).status;
  const probe = probeOperation(contract);
  const half = Math.floor(budget.perClientId / 2);
  return defineCheck<ApiContext>({
    id: "token-throttles-a-real-clients-wrong-secrets",
    section: `${op.section}, D30, D31`,
    title: `${budget.perClientId} wrong secrets of a client that exists, within ${budget.windowSeconds} s and with a success among them, throttle that client: its next token request gets ${limited}, the right secret included, until its Retry-After, which counts down the window's ${budget.windowSeconds} s, has passed; the token it holds keeps working meanwhile.`,
    scenario: `with --second-client-id: its right secret (and ${probe.method} ${probe.path} with the token it gets, again while the client is throttled), a wrong one ${half} times (in the form and with HTTP Basic in turn), the right one, a wrong one ${budget.perClientId - half} times more, the right one in the form and with HTTP Basic, again halfway through its Retry-After, and once it has passed; where that throttle ended sooner than a window begun with the first wrong secret, the budget spent again at once`,
    async run(ctx) {
      const { secondClientId: id, secondClientSecret: secret } = ctx.options;
      if (id === undefined || secret === undefined) {
        throw new CheckSkipped("give --second-client-id and --second-client-secret (a client the run may lock out for up to a minute) to check that a real client's wrong secrets are throttled, the right one included (D30)");
      }
      const waited = { seconds: 0 };
      // D30's window began with the first wrong secret or later (a window aligned to the clock that ends
      // during the first try begins in it): a 429 before the budget is spent that asks for less than its
      // rest is a limit of the deployment. The one that judges the throttle is taken whatever it asks for.
      let windowFrom: number | undefined;
      const rightSecret = () => clientTokenRequest(ctx, id, secret, { how: { waitOnRateLimit: false } });
      const tokenOf = (from?: number) => pastDeploymentLimits(ctx, rightSecret, budget.windowSeconds, waited, from);
      const right = () => tokenOf(windowFrom);
      const wrong = (n: number) => {
        windowFrom ??= performance.now();
        return pastDeploymentLimits(ctx, () => credentialsRequest(ctx, id, `${secret}-wrong`, { basic: n % 2 === 0 }), budget.windowSeconds, waited, windowFrom);
      };
      /**
       * The lock-out whose 429, answered at `at`, said `told` seconds: its Retry-After counts down (a probe
       * halfway is told the rest, at most), and once it has passed the right secret gets a token. The seconds waited.
       */
      const lockOutEnds = async (told: number, at: number): Promise<number> => {
        const half = Math.floor(told / 2);
        if (half >= 2) {
          await new Promise((resolve) => setTimeout(resolve, at + half * 1000 - performance.now()));
          const probe = await rightSecret();
          expectAnswer(ctx, op, probe, [limited], `the right secret ${half} s into a throttle whose Retry-After said ${told} s (D30: until the window ends)`);
          const rest = retryAfterSeconds(probe.headers["retry-after"]);
          expectThat(rest !== undefined && rest <= told - half + 1, `the right secret ${half} s into a throttle whose Retry-After said ${told} s: its Retry-After is not the seconds left in the window (D30)`, `at most ${told - half + 1}`, probe.headers["retry-after"] ?? "(none)");
        }
        await new Promise((resolve) => setTimeout(resolve, at + (told + 1) * 1000 - performance.now()));
        const after = await rightSecret();
        // A 429 now may be a limit of the deployment that refuses one request in so many (D18): sent once
        // more after its Retry-After; a throttle that outlasts what it said meets both.
        const resent = after.status === limited ? await sentAfterRetryAfter(after, budget.windowSeconds, rightSecret) : undefined;
        expectAnswer(ctx, op, resent ?? after, [issued], `the right secret ${told + 1} s later, past the Retry-After that said when the throttle ends${resent ? `, and once more after that ${limited}'s Retry-After` : ""}`);
        return told + 1;
      };
      // Before any wrong secret a 429 is a limit of the deployment (one that refuses one request in so many may
      // meet it), or a lock-out left by an earlier run: sent once more after its Retry-After.
      const before = await right();
      const resentBefore = before.status === limited ? await sentAfterRetryAfter(before, budget.windowSeconds, rightSecret) : undefined;
      expectAnswer(
        ctx,
        op,
        resentBefore ?? before,
        [issued],
        `--second-client-id with --second-client-secret, before any wrong secret${resentBefore ? `, and once more after that ${limited}'s Retry-After` : ""} (are they a client's of this implementation, not locked out by an earlier run?)`,
      );
      // The token it holds: a lock-out refuses token requests, not the tokens a partner holds (D30).
      const held = String(jsonOf(resentBefore ?? before).access_token);
      const heldAnswers = async () => (await sendExample(ctx, probe, held)).status;
      const heldBefore = await heldAnswers();
      const notes: string[] = [];
      // Twice where the first try ends unthrottled: a window aligned to the clock may end during one try,
      // never during both. In the second, the first try's failures since that end count already.
      for (let tryNumber = 1; tryNumber <= 2; tryNumber++) {
        const again = tryNumber === 2;
        let lockedAlready = false;
        for (let n = 1; n <= budget.perClientId && !lockedAlready; n++) {
          if (n === half + 1) {
            const mid = await right();
            if (again && mid.status === limited) break;
            expectAnswer(ctx, op, mid, [issued], `the right secret after ${half} wrong ones (D30: a success counts for neither budget; an earlier run's failures within the window count too)`);
          }
          const failed = await wrong(n);
          lockedAlready = again && failed.status === limited;
          if (!lockedAlready) expectAnswer(ctx, op, failed, [refused], `wrong secret ${n} of ${budget.perClientId} of the second client (${n % 2 === 1 ? "in the form" : "with HTTP Basic"})`);
        }
        const locked = await tokenOf();
        if (!again && locked.status === issued) {
          notes.push(`the second client was not throttled after the first ${budget.perClientId} wrong secrets (its window may have ended meanwhile); it was after the second try's`);
          continue;
        }
        expectAnswer(ctx, op, locked, [limited], `the right secret after ${budget.perClientId} wrong ones, a success among them (D30: the right secret included; a client's wrong secrets count as an unknown client's, and a success resets nothing)`);
        expectRetryAfterInWindow(locked, budget.windowSeconds);
        const lockedAt = performance.now();
        const lockedBasic = await credentialsRequest(ctx, id, secret, { basic: true });
        expectAnswer(ctx, op, lockedBasic, [limited], "the right secret with HTTP Basic while the client is throttled (D30: every token request for that client_id, whichever way it authenticates)");
        const heldDuring = await heldAnswers();
        expectThat(
          heldDuring === heldBefore,
          `the token the second client held answered ${probe.method} ${probe.path} otherwise while the client was throttled: a lock-out refuses token requests, and the tokens a partner holds keep working (D30), or anyone who knows a client id could log its partner out`,
          heldBefore,
          heldDuring,
        );
        const told = retryAfterSeconds(locked.headers["retry-after"])!;
        let seconds = await lockOutEnds(told, lockedAt);
        // A throttle that ends sooner than a window begun with the first wrong secret: a window aligned to the
        // clock, which began before, or one shorter than D30's. Spent again at once, the aligned one has just begun.
        // So too where the first try was not throttled: a window that ended during it, or a budget larger
        // than D30's (20 a client), which the window begun as this lock-out ended tells apart.
        if (again || told < budget.windowSeconds - (lockedAt - windowFrom!) / 1000 - 1) {
          const endedBy = lockedAt + (told - 1) * 1000;
          windowFrom = performance.now();
          for (let n = 1; n <= budget.perClientId; n++) expectAnswer(ctx, op, await wrong(n), [refused], `wrong secret ${n} of ${budget.perClientId} of the second client, once its throttle ended ${told} s in`);
          const relocked = await tokenOf();
          expectAnswer(
            ctx,
            op,
            relocked,
            [limited],
            again
              ? `the right secret after ${budget.perClientId} wrong ones more in a window that had just begun (the first try's ${budget.perClientId} were not throttled either: D30's budget is ${budget.perClientId} a client id)`
              : `the right secret after ${budget.perClientId} wrong ones more, once the first throttle ended`,
          );
          const least = Math.floor(budget.windowSeconds - (performance.now() - endedBy) / 1000 - 1);
          expectThat(
            (retryAfterSeconds(relocked.headers["retry-after"]) ?? 0) >= least,
            `the second client's throttle ended ${told} s in, and again soon after a window that began at most ${Math.ceil((performance.now() - endedBy) / 1000)} s before: D30's windows are ${budget.windowSeconds} s`,
            `Retry-After at least ${least}`,
            relocked.headers["retry-after"] ?? "(none)",
          );
          notes.push(
            again
              ? "once that lock-out ended, spent its budget again, in a window that had just begun"
              : `its first throttle ended ${told} s in (a window aligned to the clock): spent its budget again, which began a whole window`,
          );
          seconds += await lockOutEnds(retryAfterSeconds(relocked.headers["retry-after"]) ?? budget.windowSeconds, performance.now());
        }
        return [...notes, `waited ${seconds} s in all for the second client's lock-outs to end`, ...(waited.seconds > 0 ? [waitedNote(limited, waited.seconds)] : [])].join("; ");
      }
      throw new Error("unreachable: the second try returns or throws");
    },
  });
}

/** `send` again once the Retry-After of `response` (at most the window) has passed. */
async function sentAfterRetryAfter(response: ResponseSeen, windowSeconds: number, send: () => Promise<ResponseSeen>): Promise<ResponseSeen> {
  const seconds = Math.min(retryAfterSeconds(response.headers["retry-after"]) ?? windowSeconds, windowSeconds);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return send();
}

/** The members of an operation's 200 JSON answer that its schema declares as lists. */
function listMembers(contract: Contract, op: Operation, status = 200): string[] {
  const at = (schema: Json | undefined): Json | undefined => (schema?.$ref ? contract.resolve(schema.$ref) : schema);
  const answer = at(contract.doc.paths[op.path][op.method.toLowerCase()].responses[String(status)]?.content?.["application/json"]?.schema);
  return Object.entries((answer?.properties ?? {}) as Record<string, Json>)
    .filter(([, member]) => at(member)?.type === "array")
    .map(([name]) => name);
}

/** The answer's lists are empty: those the schema declares, for a member a later version adds may hold anything (D16). */
function expectEmptyLists(response: ResponseSeen, lists: string[], what: string): void {
  const answer = jsonOf(response);
  expectThat(
    lists.every((list) => Array.isArray(answer[list]) && answer[list].length === 0),
    `${what}: ${lists.join(", ")} not empty`,
    Object.fromEntries(lists.map((list) => [list, []])),
    seen(response),
  );
}

/** D30: a throttled request's Retry-After is the whole seconds left in the window. */
function expectRetryAfterInWindow(response: ResponseSeen, windowSeconds: number): void {
  const retryAfter = Number(response.headers["retry-after"]);
  expectThat(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= windowSeconds,
    "Retry-After is not the whole seconds left in the window",
    `1 to ${windowSeconds}`,
    response.headers["retry-after"] ?? "(none)",
  );
}

/**
 * D30's budget per source address: failed authentications from one address, spread over made-up client
 * ids that each stay within their own budget, then one more from that address gets 429 with Retry-After.
 * Sent from a loopback address of the suite's own (127.x.y.z, new each try), so the address the suite
 * certifies from is not throttled: it runs only where the token endpoint is on 127.0.0.0/8 or
 * `localhost` and the machine can send from another loopback address (Linux can; macOS by default
 * cannot). Where the implementation sees both addresses as one (a proxy or NAT between them, e.g.
 * Docker's published ports), the suite's own failures count too, and its own address is throttled
 * after the check: the check waits that out, so that whatever runs next is not refused. It comes last
 * in the suite for that reason. Two tries, each from a new address: a window that ends during one
 * (a window aligned to the clock) cannot end during the next, seconds later.
 */
function addressThrottleCheck(contract: Contract, budget: NonNullable<Contract["failedAuthThrottle"]>): ApiCheck {
  const op = contract.tokenOperation;
  const limited = contract.problem("rate-limited").status;
  const refused = contract.oauthErrorStatus("invalid_client");
  const clientIds = Math.ceil(budget.perAddress / budget.perClientId);
  const WIDTH = 8;
  const SUCCESSES_FIRST = 10;
  /** Of the certifying client, well within its own budget (the run spends a few more in the token checks). */
  const REAL_CLIENT_FAILURES = 2;
  /** Sent for the first client id once its budget is spent: its throttle's 429s count for no budget (D30). */
  const THROTTLED_REQUESTS = 10;
  return defineCheck<ApiContext>({
    id: "token-throttles-failed-authentication-per-address",
    section: `${op.section}, D30`,
    title: `After ${budget.perAddress} failed authentications from one address within ${budget.windowSeconds} s, of client ids each within its own budget, the address's next token request gets a ${limited} problem with Retry-After, the right secret of a real client too.`,
    scenario: `from a loopback address of its own, requests a token with --client-id and its secret ${SUCCESSES_FIRST} times (successes count for no budget), then with a wrong secret ${budget.perClientId} times for each of ${clientIds} made-up client ids (the last ${REAL_CLIENT_FAILURES} of them --client-id's, a client that exists; after the first one's ${budget.perClientId}, ${THROTTLED_REQUESTS} more for it while it is throttled), then once for another, each of these failures with ${FORWARDED_HEADERS} naming another address, then with --client-id and its secret`,
    async run(ctx) {
      if (!onLoopbackV4(ctx)) {
        const host = tokenHost(ctx);
        if (host === "::1") throw new CheckSkipped("needs the token endpoint on 127.0.0.0/8 or localhost, to send from another loopback address; IPv6 has only ::1");
        throw new CheckSkipped(`needs the token endpoint on a loopback address, to send from another one; ${host} is not (certify a local instance for this check)`);
      }
      const seenTries = [];
      for (let tries = 1; tries <= 2; tries++) {
        // Under NAT the implementation counts the suite's other failed authentications of this run too.
        const before = ctx.failedAuthentications;
        const { address: from, dispatcher } = otherLoopback();
        try {
          const prefix = `certify-address-${randomBytes(4).toString("hex")}`;
          // In the form and with HTTP Basic in turn: the address's budget counts every failed client authentication (D30, D31).
          // Each names another address of its own as the client's: only the deployment's proxies may (D30).
          const attempt = (clientId: string, basic: boolean, k: number) => credentialsRequest(ctx, clientId, "wrong", { basic, dispatcher, headers: forwardedFor(k) });
          const early: { failure: number; answer: ReturnType<typeof seen>; retryAfter: number | undefined; underWay: number }[] = [];
          let failures = 0;
          let throttledSent = 0;
          const started = performance.now();
          // Failure k is client id k / perClientId's: each id stays within its own budget. The last few are the
          // certifying client's wrong secrets: a client that exists counts for the address as an unknown one
          // does (D30: unknown client or wrong secret), or guesses spread over real client ids go unthrottled.
          const fail = async (k: number, underWay: number) => {
            const clientId = k >= budget.perAddress - REAL_CLIENT_FAILURES ? ctx.options.clientId : `${prefix}-${Math.floor(k / budget.perClientId)}`;
            const response = await attempt(clientId, k % 2 === 1, k);
            failures++;
            if (response.status !== refused) early.push({ failure: failures, answer: seen(response), retryAfter: retryAfterSeconds(response.headers["retry-after"]), underWay });
          };
          try {
            // A few at a time, so that an implementation slow to refuse (a constant-time check of a secret)
            // still spends the budget well within the window; the last few one after another, so that a
            // throttle a few failures early is seen exactly.
            // The certifying client's right secret first, a few times from that address: successes count for
            // neither budget (D30), so the throttle still comes after exactly the budget's failures.
            for (let k = 0; k < SUCCESSES_FIRST; k++) await suiteToken(ctx, dispatcher);
            // The first client id's budget, then requests for it while it is throttled: answered 429, they
            // count for neither budget (D30). One answered otherwise (its window ended, or no throttle per
            // client id) is a failure like the others, and stands for one of them.
            for (let k = 0; k < budget.perClientId; k++) await fail(k, 0);
            let standIns = 0;
            for (let i = 0; i < THROTTLED_REQUESTS; i++) {
              const response = await attempt(`${prefix}-0`, i % 2 === 1, budget.perAddress + 1 + i);
              if (response.status === limited) throttledSent++;
              else if (response.status === refused) standIns++;
              else early.push({ failure: failures + 1, answer: seen(response), retryAfter: undefined, underWay: 0 });
            }
            failures += standIns;
            const together = budget.perAddress - WIDTH;
            await inParallel(WIDTH, together - budget.perClientId - standIns, (i) => fail(budget.perClientId + standIns + i, WIDTH - 1));
            for (let k = together; k < budget.perAddress; k++) await fail(k, 0);
          } catch (error) {
            if (failures === 0) throw new CheckSkipped(`cannot send from ${from}, another loopback address (${(error as Error).message}): this machine has only 127.0.0.1`);
            throw error;
          }
          const unexpected = early.filter((e) => e.answer.status !== limited);
          expectThat(unexpected.length === 0, `a failed authentication from ${from} within the budgets was not answered ${refused}`, refused, unexpected.slice(0, 3));
          // A 429 may come early only once the suite's earlier failures have spent the budget with these
          // (under NAT, where the suite's own address is throttled now too, the right secret included),
          // allowing for the requests under way beside each; or from a rate limit of the deployment (D18),
          // which answers successful requests alike, where D30 counts failures only.
          const early429 = (counted: number) => early.filter((e) => e.failure - 1 + counted + e.underWay < budget.perAddress);
          const behindNat = early429(before).length < early429(0).length && (await suiteToken(ctx)).status === limited;
          const tooEarly = early429(behindNat ? before : 0);
          if (tooEarly.length > 0) {
            const after = Math.min(...tooEarly.map((e) => e.failure));
            // D30's 429 gives the seconds left in its window, which began with these failures: one that
            // says "retry sooner" is a limit of the deployment whose window is shorter (D18), however fast
            // the successes below come (a window of a second may end before they do).
            const windowLeft = budget.windowSeconds - (performance.now() - started) / 1000 - 1;
            const shorterWindow = tooEarly.every((e) => e.answer.status === limited && e.retryAfter !== undefined && e.retryAfter < windowLeft);
            const why = shorterWindow
              ? `with Retry-After ${Math.max(...tooEarly.map((e) => e.retryAfter!))} s, less than is left of D30's ${budget.windowSeconds} s window`
              : (await successesLimited(ctx, limited, Math.min(2 * after, budget.perAddress), WIDTH))
                ? "successful ones alike"
                : undefined;
            if (why) {
              throw new CheckSkipped(
                `a rate limit of the deployment answered ${limited} after about ${after} token requests from one address, ${why}: D30's budget of ${budget.perAddress} failed authentications per address cannot be seen under it (D18); certify with a limit above ${budget.perAddress + 1} token requests per address and minute to check it`,
              );
            }
            throw new CheckFailed(
              `failed authentications from ${from} were throttled after about ${after - 1}, before D30's budget of ${budget.perAddress} per address (successful requests from another address were not; the ${SUCCESSES_FIRST} successful token requests sent from ${from} first count for neither budget, nor do the ${throttledSent} sent for a client id already throttled and answered ${limited})`,
              `${refused} for ${budget.perAddress} failed authentications`,
              tooEarly.slice(0, 3),
            );
          }
          const response = await attempt(`${prefix}-last`, false, budget.perAddress);
          if (response.status === limited || early.length > 0) {
            const throttledAt = performance.now();
            expectAnswer(ctx, op, response, [limited], `failed authentication ${budget.perAddress + 1} from ${from}`);
            expectRetryAfterInWindow(response, budget.windowSeconds);
            // The address is throttled, not its failures: the certifying client's right secret too (D30). Judged
            // only while the window is surely on: Retry-After is rounded up, so more than its value less 1 s was left.
            const right = await suiteToken(ctx, dispatcher);
            const windowOn = performance.now() - throttledAt < ((retryAfterSeconds(response.headers["retry-after"]) ?? 0) - 1) * 1000;
            expectThat(
              right.status === limited || !windowOn,
              `the certifying client's right secret from ${from}, whose budget of failed authentications was spent, was not refused: until the window ends every token request from that address gets ${limited}, the right secret included (D30)`,
              limited,
              seen(right),
            );
            return await throttleOfOwnAddressEnded(ctx, limited, budget.windowSeconds);
          }
          seenTries.push({ from, next: seen(response) });
        } finally {
          await dispatcher.close();
        }
      }
      throw new CheckFailed(
        `after ${budget.perAddress} failed authentications from one address, the last ${REAL_CLIENT_FAILURES} of them --client-id's wrong secrets, its next token request was not throttled (tried twice, each from a new address): is the budget per address larger than ${budget.perAddress}, kept per connection (by address and port), or are a real client's wrong secrets left out of it (D30 counts them for the address as an unknown client's)? Or is the address read from headers the client wrote: each failure named another (${FORWARDED_HEADERS}), which counts only from the deployment's proxies (D30; the suite's own address must not be among them)?`,
        limited,
        seenTries,
      );
    },
  });
}

const tokenHost = (ctx: ApiContext) => new URL(ctx.options.authUrl).hostname.replace(/^\[|\]$/g, "");

/** Whether the token endpoint is on 127.0.0.0/8 or localhost, where the suite may send from a loopback address of its own. */
function onLoopbackV4(ctx: ApiContext): boolean {
  const host = tokenHost(ctx);
  return host === "localhost" || (isIPv4(host) && host.startsWith("127."));
}

/** A dispatcher that sends from a random loopback address other than 127.0.0.1 (Linux routes all of 127.0.0.0/8 to itself). */
function otherLoopback(): { address: string; dispatcher: Agent } {
  const address = `127.${1 + randomInt(254)}.${randomInt(256)}.${1 + randomInt(254)}`;
  return { address, dispatcher: new Agent({ localAddress: address, connect: { family: 4 } }) };
}

/** A token request of the suite's own client, with its secret, that waits on no rate limit. */
const suiteToken = (ctx: ApiContext, dispatcher?: Agent) =>
  ctx.requestToken({ grant_type: "client_credentials", client_id: ctx.options.clientId, client_secret: ctx.options.clientSecret }, {}, { waitOnRateLimit: false, dispatcher });

/** Whether `count` successful token requests of the suite's client, from a new loopback address, meet a 429 (a rate limit of the deployment, D18). */
async function successesLimited(ctx: ApiContext, limited: number, count: number, width: number): Promise<boolean> {
  const { dispatcher } = otherLoopback();
  let met = false;
  try {
    await inParallel(width, count, async () => {
      if (met) return;
      const response = await suiteToken(ctx, dispatcher);
      if (response.status === limited) met = true;
    });
  } finally {
    await dispatcher.close();
  }
  return met;
}

/**
 * After the per-address check: where the implementation took the suite's other address for its own
 * (a proxy or NAT), the suite's address is throttled now; waits for the window to end, as Retry-After
 * says, and says so. A throttle that outlasts its Retry-After fails the check (D30).
 */
async function throttleOfOwnAddressEnded(ctx: ApiContext, limited: number, windowSeconds: number): Promise<string | undefined> {
  const first = await suiteToken(ctx);
  if (first.status !== limited) return undefined;
  const seconds = Math.min(retryAfterSeconds(first.headers["retry-after"]) || windowSeconds, windowSeconds) + 1;
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const again = await suiteToken(ctx);
  expectThat(again.status !== limited, `the suite's own address was throttled too, and still was ${seconds} s later, past its Retry-After`, "a token once the window ended", seen(again));
  return `the implementation saw the suite's two addresses as one (a proxy or NAT between them): waited ${seconds} s for its window to end`;
}

/** Runs `work(0)` … `work(count - 1)`, at most `width` at once. */
async function inParallel(width: number, count: number, work: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Each API operation.

/** Ids that name nothing: UNKNOWN_ID, and an existing one (the example's) with a 0 before it, which only a numeric comparison finds. */
const unknownIds = (exampleId: unknown): string[] => [UNKNOWN_ID, ...(typeof exampleId === "string" ? [`0${exampleId}`] : [])];

function operationChecks(contract: Contract, op: Operation): ApiCheck[] {
  const check = (suffix: string, decisions: string, title: string, scenario: string, run: (ctx: ApiContext) => Promise<void | string>) =>
    defineCheck<ApiContext>({ id: `${op.slug}-${suffix}`, section: `${op.section}, ${decisions}`, title, scenario, run });
  const request = `${op.method} ${op.path}`;
  const problemStatus = (slug: string) => contract.problem(slug).status;
  const declared = (status: number) => op.statuses.includes(String(status));
  const example = () => {
    const e = successExample(op);
    return { input: { query: e.query, body: e.body } as Input, status: e.status };
  };
  const checks: ApiCheck[] = [];

  checks.push(
    check(
      "success-example-gets-2xx",
      "D17",
      `The spec's success example of ${op.operationId} gets its 2xx status and an answer that validates${secretOf(op) ? ", also with a secret of characters outside ASCII, of which the answer holds no 4 in a row (D16)" : ""}.`,
      `sends each success example of the spec to ${request} with a token of every scope${secretOf(op) ? `, then the first with ${secretOf(op)} ${NON_ASCII_SECRET}` : ""}`,
      async (ctx) => {
        const token = await fullToken(ctx);
        const inputs = op.successExamples.map((e) => ({ input: { query: e.query, body: e.body }, status: e.status, what: `example ${e.name}` }));
        const secret = secretOf(op);
        if (secret) inputs.push({ ...inputs[0]!, input: { ...inputs[0]!.input, body: { ...(inputs[0]!.input.body as Json), [secret]: NON_ASCII_SECRET } }, what: `${inputs[0]!.what} with ${secret} ${NON_ASCII_SECRET}` });
        for (const { input, status, what } of inputs) {
          const response = await send(ctx, op, input, token);
          expectAnswer(ctx, op, response, [status], what);
          expectAnswersWhatWasSent(ctx, op, input, response, what);
        }
      },
    ),
  );
  if (op.successExamples.some((e) => e.status === 201)) {
    const notFound = contract.problem("not-found").status;
    checks.push(
      check(
        "created-resource-not-readable",
        "D9, D35",
        `This version has no operation that reads what ${op.operationId} creates: GET on its 201's Location gets a ${notFound} problem, and GET on ${op.path} no 2xx.`,
        `sends the success example to ${request}, then GET its Location and GET ${op.path}, each with a token of every scope`,
        async (ctx) => {
          const token = await fullToken(ctx);
          const created = await send(ctx, op, example().input, token);
          expectAnswer(ctx, op, created, [201], "the success example");
          // expectAnswer made sure that Location is the operation's path and the id (D35).
          const location = new URL(resolvedLocation(ctx, op, String(created.headers.location)) ?? targetUri(ctx, op)).pathname;
          const at = location.slice(location.lastIndexOf(`${op.path}/`));
          const read = (path: string) => ctx.call({ ...op, method: "GET", path, query: [] }, { token });
          const resource = await read(at);
          expectThat(resource.status === notFound, `GET ${at}: a created resource can be read, which no operation of this version does (D35)`, notFound, seen(resource));
          const type = String(resource.headers["content-type"] ?? "");
          expectThat(/^application\/problem\+json\s*(;|$)/i.test(type), `GET ${at}: its ${notFound} is not a problem (D13, D35: problem+json)`, "application/problem+json", type || "(no Content-Type)");
          const collection = await read(op.path);
          expectThat(collection.status >= 400 && collection.status < 500, `GET ${op.path}: the collection can be read, which no operation of this version does (D9)`, "404 or 405", seen(collection));
        },
      ),
    );
  }

  // D13, D17: what a request naming nothing that exists gets (UNKNOWN_ID).
  const notFound = contract.problem("not-found");
  const bodyIds = Object.entries((example().input.body ?? {}) as Json).filter(([name, value]) => /ID$/.test(name) && typeof value === "string").map(([name]) => name);
  // The zip code no business serves, where the body has one: an unknown id is not found there either (it is not "unmatched").
  const zipMember = Object.keys((example().input.body ?? {}) as Json).find((name) => /^zip/i.test(name));
  if (declared(notFound.status) && bodyIds.length > 0) {
    checks.push(
      check(
        "unknown-id-gets-404",
        "D13, D16",
        `The example body with ${bodyIds.map((n) => `\`${n}\``).join(" or ")} naming nothing that exists gets a ${notFound.status} not-found problem pointing at that member, also where it is the example's id with a 0 before it (ids are strings, not numbers)${zipMember ? `, and at zip code ${UNSERVED_ZIP}, which no business serves` : ""}.`,
        `sends the example body to ${request} with ${bodyIds.map((n) => `${n} ${UNKNOWN_ID}`).join(", then ")}, then each with a 0 before the example's${zipMember ? `, then each unknown at ${zipMember} ${UNSERVED_ZIP}` : ""}`,
        async (ctx) => {
          const zips = zipMember ? [{}, { [zipMember]: UNSERVED_ZIP }] : [{}];
          for (const name of bodyIds) {
            for (const [id, where] of [
              ...unknownIds((example().input.body as Json)[name]).map((id) => [id, {}] as const),
              ...zips.slice(1).map((where) => [UNKNOWN_ID, where] as const),
            ]) {
              const response = await send(ctx, op, { query: example().input.query, body: { ...(example().input.body as Json), ...where, [name]: id } }, await fullToken(ctx));
              const what = `${name} ${id}${Object.keys(where).length > 0 ? ` at ${zipMember} ${UNSERVED_ZIP}` : ""}`;
              expectAnswer(ctx, op, response, [notFound.status], what);
              const problem = jsonOf(response);
              expectThat(problem.type === notFound.type, `${what}: the problem type is not not-found`, notFound.type, problem.type);
              expectThat(namesPointer(problem, `/${name}`), `${what}: errors[].pointer does not name /${name}`, `/${name}`, problem.errors ?? "(no errors)");
            }
          }
        },
      ),
    );
  }
  const queryIds = op.query.filter((q) => /_id$/.test(q.name)).map((q) => q.name);
  const lists = listMembers(contract, op);
  if (!declared(notFound.status) && queryIds.length > 0 && lists.length > 0) {
    checks.push(
      check(
        "unknown-id-gets-empty-list",
        "D17",
        `The example query with ${queryIds.join(" or ")} naming nothing that exists gets 200 and empty lists, not an error, also where it is the example's id with a 0 before it (ids are strings, not numbers).`,
        `sends the example query to ${request} with ${queryIds.map((n) => `${n}=${UNKNOWN_ID}`).join(", then ")}, then each with a 0 before the example's`,
        async (ctx) => {
          for (const name of queryIds) {
            for (const id of unknownIds(example().input.query?.[name])) {
              const response = await send(ctx, op, { query: { ...example().input.query, [name]: id } }, await fullToken(ctx));
              expectAnswer(ctx, op, response, [200], `${name}=${id}`);
              expectEmptyLists(response, lists, `${name}=${id}`);
            }
          }
        },
      ),
    );
  }

  // D17: a search finds, and a service request matches, only businesses that serve the zip code.
  const queryZip = op.query.find((q) => /^zip/i.test(q.name))?.name;
  if (queryZip !== undefined && lists.length > 0 && example().status === 200) {
    checks.push(
      check(
        "unserved-zip-gets-empty-list",
        "D17",
        `The example query at zip code ${UNSERVED_ZIP}, which no business serves, gets 200 and empty lists: the zip code counts, not only the category.`,
        `sends the example query to ${request} with ${queryZip}=${UNSERVED_ZIP}`,
        async (ctx) => {
          const response = await send(ctx, op, { query: { ...example().input.query, [queryZip]: UNSERVED_ZIP } }, await fullToken(ctx));
          expectAnswer(ctx, op, response, [200], `${queryZip}=${UNSERVED_ZIP}`);
          expectEmptyLists(response, lists, `${queryZip}=${UNSERVED_ZIP}, a zip code no business serves`);
        },
      ),
    );
  }
  const bodyZip = Object.keys((example().input.body ?? {}) as Json).find((name) => /^zip/i.test(name));
  const createdLists = listMembers(contract, op, 201);
  if (bodyZip !== undefined && createdLists.length > 0 && example().status === 201) {
    checks.push(
      check(
        "unserved-zip-matches-nothing",
        "D17",
        `The example body at zip code ${UNSERVED_ZIP}, which no business serves, is created (201) with empty ${createdLists.join(", ")}: the zip code counts in the matching, not only the category.`,
        `sends the example body to ${request} with ${bodyZip} ${UNSERVED_ZIP}`,
        async (ctx) => {
          const input = { query: example().input.query, body: { ...(example().input.body as Json), [bodyZip]: UNSERVED_ZIP } };
          const response = await send(ctx, op, input, await fullToken(ctx));
          expectAnswer(ctx, op, response, [201], `${bodyZip} ${UNSERVED_ZIP}`);
          expectAnswersWhatWasSent(ctx, op, input, response, `${bodyZip} ${UNSERVED_ZIP}`);
          expectEmptyLists(response, createdLists, `${bodyZip} ${UNSERVED_ZIP}, a zip code no business serves`);
        },
      ),
    );
  }

  // D16: lengths count code points, not UTF-8 bytes or UTF-16 units, at the upper bound too.
  const atMax = op.body ? atMaxLength(op.body.schema, example().input.body, contract.resolve, "é") : undefined;
  if (op.body && atMax && example().status < 300) {
    const units = ["é", "😀"];
    checks.push(
      check(
        "lengths-in-code-points-accepted",
        "D16",
        `The example body with ${atMax.pointers.join(", ")} at its maxLength in code points gets its ${example().status}, written in é (2 bytes each in UTF-8) and in 😀 (2 UTF-16 units each), also as JSON escapes (\\ud83d\\ude00, a surrogate pair, RFC 8259 §7): lengths count code points.`,
        `sends the example body to ${request} with ${atMax.pointers.join(", ")} as long as its maxLength allows, in ${units.join(", then in ")}, then in 😀 written as escapes`,
        async (ctx) => {
          for (const unit of [...units, "escaped"]) {
            const input = { query: example().input.query, body: atMaxLength(op.body!.schema, example().input.body, contract.resolve, unit === "escaped" ? "😀" : unit)!.body };
            // Escaped, the same text: a pair of escapes (\ud83d\ude00) is one character, not two lone surrogates (D29).
            const raw = unit === "escaped" ? Buffer.from(JSON.stringify(input.body).replace(/[\u{10000}-\u{10ffff}]/gu, (c) => [0, 1].map((i) => `\\u${c.charCodeAt(i).toString(16)}`).join(""))) : undefined;
            const response = await send(ctx, op, { ...input, ...(raw ? { raw } : {}) }, await fullToken(ctx));
            const what = `${atMax.pointers.join(", ")} at its maxLength in ${unit === "escaped" ? "😀 written as \\ud83d\\ude00" : unit}`;
            expectAnswer(ctx, op, response, [example().status], what);
            expectAnswersWhatWasSent(ctx, op, input, response, what);
          }
        },
      ),
    );
  }

  // D13: client input never causes a 5xx; JSON carries control characters escaped, U+0000 included,
  // which PostgreSQL's text cannot hold (an implementation stores such a value some other way).
  const withControls = op.body ? withFreeText(op.body.schema, example().input.body, contract.resolve, (max) => CONTROL_TEXT.slice(0, max)) : undefined;
  if (op.body && withControls && example().status < 300) {
    checks.push(
      check(
        "control-characters-accepted",
        "D13, D16",
        `The example body with ${withControls.pointers.join(", ")} holding U+0000, U+0001, U+001F and U+007F (JSON escapes) gets its ${example().status}: the schema allows any character, and client input never causes a 5xx.`,
        `sends the example body to ${request} with ${withControls.pointers.join(", ")} set to ${JSON.stringify(CONTROL_TEXT)}`,
        async (ctx) => {
          const input = { query: example().input.query, body: withControls.body };
          const response = await send(ctx, op, input, await fullToken(ctx));
          const what = `${withControls.pointers.join(", ")} holding U+0000, U+0001, U+001F and U+007F`;
          expectAnswer(ctx, op, response, [example().status], what);
          expectAnswersWhatWasSent(ctx, op, input, response, what);
        },
      ),
    );
  }

  /** The success example with this Authorization field as it stands (send() writes `Bearer <token>`). */
  const sendAuthorized = (authorization: string) => (ctx: ApiContext) => {
    const body = bodyText(op, example().input.body);
    return ctx.call(op, { query: example().input.query, ...(body !== undefined ? { body, contentType: op.body!.mediaType } : {}), headers: { authorization } });
  };
  const unauthenticated = problemStatus("unauthenticated");
  checks.push(
    check(
      "rejects-missing-token",
      "D13",
      `${op.operationId} without a token gets a ${unauthenticated} problem, also with the client's credentials as HTTP Basic instead, or the Bearer scheme with no token after it (or a ${problemStatus("malformed-request")} for that one).`,
      `sends the success example to ${request} without an Authorization header, then with Authorization: Basic of --client-id and --client-secret, then with Authorization: Bearer alone`,
      async (ctx) => {
        expectAnswer(ctx, op, await send(ctx, op, example().input), [unauthenticated], "no Authorization header");
        // Credentials are for the token endpoint (§5.1); the API takes a bearer token only (D13).
        const basic = await sendAuthorized(basicOf(ctx.options.clientId, ctx.options.clientSecret))(ctx);
        expectAnswer(ctx, op, basic, [unauthenticated], "the client's credentials as HTTP Basic, no token");
        // No token (401, D13), or an Authorization field it cannot read (400, RFC 6750 §3.1): never a 5xx.
        const unreadable = problemStatus("malformed-request");
        expectAnswer(ctx, op, await sendAuthorized("Bearer")(ctx), [unauthenticated, ...(declared(unreadable) ? [unreadable] : [])], "Authorization: Bearer with no token");
      },
    ),
    check("rejects-forged-token", "D13", `${op.operationId} with a forged token gets a ${unauthenticated} problem.`, `sends the success example to ${request} with a real token whose last 4 characters are changed, with characters added, without its last 4 characters, and with its letters in the other case`, async (ctx) => {
      for (const forged of forge(await fullToken(ctx))) expectAnswer(ctx, op, await send(ctx, op, example().input, forged.token), [unauthenticated], forged.what);
    }),
    check(
      "401-has-bearer-challenge",
      "D13",
      `Each ${unauthenticated} of ${op.operationId} carries an RFC 6750 \`WWW-Authenticate: Bearer\` challenge, whose error, if given, is invalid_token for a forged token (invalid_request too without a token), never insufficient_scope, which is a 403's.`,
      `reads WWW-Authenticate of the ${unauthenticated} answers to ${request} without a token and with a forged one`,
      async (ctx) => {
        // RFC 6750 §3.1: a token that fails is invalid_token; a request with none should name no error (the
        // spec's own example of a 401 names invalid_token, so that passes too).
        const answers = [
          { what: "no token", allowed: ["invalid_request", "invalid_token"], response: await send(ctx, op, example().input) },
          { what: "a forged token", allowed: ["invalid_token"], response: await send(ctx, op, example().input, forge(await fullToken(ctx))[0]!.token) },
        ];
        for (const { what, allowed, response } of answers.filter((a) => a.response.status === unauthenticated)) {
          const field = response.headers["www-authenticate"];
          // Among the field's challenges, which may be several (RFC 9110 §11.6.1).
          const bearer = challengeOf(field, "Bearer");
          expectThat(bearer !== undefined, `${what}: the WWW-Authenticate header has no Bearer challenge`, "Bearer …", field ?? "(none)");
          const error = bearer!.params.error;
          expectThat(error === undefined || allowed.includes(error), `${what}: the Bearer challenge's error is not one of RFC 6750 §3.1 for this case`, `no error, or ${allowed.join(" or ")}`, field);
        }
      },
    ),
    check(
      "bearer-in-any-case-accepted",
      "D13",
      `${op.operationId} takes a bearer token whatever the letter case of the scheme's name (RFC 9110 §11.1: auth schemes are case-insensitive).`,
      `sends the success example to ${request} with Authorization: bearer <token>, then BEARER <token>`,
      async (ctx) => {
        const token = await fullToken(ctx);
        for (const scheme of ["bearer", "BEARER"]) {
          const response = await sendAuthorized(`${scheme} ${token}`)(ctx);
          expectAnswer(ctx, op, response, [example().status], `Authorization: ${scheme} <token>`);
        }
      },
    ),
  );

  const otherScopes = contract.scopes.filter((s) => !op.scopes.includes(s));
  if (otherScopes.length > 0) {
    const forbidden = problemStatus("insufficient-scope");
    // One other scope, then all of them: a token is refused for lacking the operation's scope, not for being narrow.
    const tokens = otherScopes.length > 1 ? [[otherScopes[0]!], otherScopes] : [otherScopes];
    checks.push(
      check(
        "requires-scope",
        "D12",
        `A valid token without ${op.scopes.join(" ")} gets a ${forbidden} insufficient-scope problem with an RFC 6750 Bearer challenge naming it (its error, if given, insufficient_scope), however many other scopes it has.`,
        `sends the success example to ${request} with a token of only ${otherScopes[0]}${otherScopes.length > 1 ? `, then with one of every scope but ${op.scopes.join(" ")}` : ""}`,
        async (ctx) => {
          for (const scopes of tokens) {
            const what = `a token with ${scopes.join(" ")}`;
            const response = await send(ctx, op, example().input, await ctx.token(scopes));
            expectAnswer(ctx, op, response, [forbidden], what);
            const type = jsonOf(response).type as unknown;
            expectThat(type === contract.problem("insufficient-scope").type, `${what}: the problem type is not insufficient-scope`, contract.problem("insufficient-scope").type, type);
            const field = response.headers["www-authenticate"];
            // RFC 6750 §3: a Bearer challenge, among any others (RFC 9110 §11.6.1); its error attribute SHOULD be
            // there, and if it is, it says insufficient_scope; its scope attribute names the scope.
            const bearer = challengeOf(field, "Bearer");
            const error = bearer?.params.error;
            expectThat(
              bearer !== undefined && (error === undefined || error === "insufficient_scope"),
              `${what}: the WWW-Authenticate challenge is not RFC 6750's Bearer challenge for a missing scope (D13)`,
              'Bearer error="insufficient_scope", scope="…"',
              field ?? "(none)",
            );
            const named = (bearer?.params.scope ?? "").split(" ");
            const unnamed = op.scopes.filter((s) => !named.includes(s));
            expectThat(unnamed.length === 0, `${what}: the Bearer challenge's scope attribute does not name the required scope`, op.scopes, field ?? "(none)");
          }
        },
      ),
    );
  }

  if (op.body) {
    const { mediaType } = op.body;
    const malformed = problemStatus("malformed-request");
    // The example body's text with its first string member's value written as `raw` (a number, NaN).
    const firstString = Object.entries((example().input.body ?? {}) as Json).find(([, value]) => typeof value === "string")?.[0];
    const withFirstString = (raw: string) => JSON.stringify({ ...(example().input.body as Json), [firstString!]: "\u0000" }).replace('"\\u0000"', raw);
    if (declared(malformed)) {
      checks.push(
        check(
          "malformed-json-gets-400",
          "D13",
          `A truncated or trailing-comma JSON body, one with characters after its value, a raw tab in a string or an escape JSON does not have, one of 10,000 unclosed arrays, or one with NaN or -Infinity for a value, gets a ${malformed} problem, never a 5xx.`,
          `sends the example body to ${request} cut by its last character, then with a trailing comma, then with " }" after it, then with a tab and then \\q at the start of its first string value, then 10,000 "[" (a parser that recurses overflows its stack), then with NaN and -Infinity for its first string value`,
          async (ctx) => {
            const text = JSON.stringify(example().input.body);
            for (const [what, body] of [
              ["a truncated body", text.slice(0, -1)],
              ["a trailing comma", text.replace(/}$/, ",}")],
              // What a decoder that reads one value and stops, or a lenient one, takes (RFC 8259 §2, §7).
              ["characters after the value", `${text} }`],
              ["a raw tab inside a string", text.replace(/":"/, '":"\t')],
              ["an escape JSON does not have (\\q)", text.replace(/":"/, '":"\\q')],
              ["10,000 unclosed arrays", "[".repeat(10_000)],
              // JavaScript's and Python's lenient readers take these; RFC 8259 §6 has no such number.
              ...(firstString !== undefined ? ([["NaN as a value", withFirstString("NaN")], ["Infinity as a value", withFirstString("-Infinity")]] as const) : []),
            ] as const) {
              const response = await ctx.call(op, { query: example().input.query, body, contentType: mediaType, token: await fullToken(ctx) });
              expectAnswer(ctx, op, response, [malformed], what);
            }
          },
        ),
      );
    }
    const invalid = problemStatus("validation-failed");
    if (declared(malformed) && declared(invalid) && mediaType === "application/json" && firstString !== undefined) {
      checks.push(
        check(
          "number-beyond-double-range-gets-4xx",
          "D13",
          `The example body with 1e400, -1e400 or an integer of 5,001 digits (beyond a double's range or a parser's, which RFC 8259 §6 lets it refuse) as the value of ${firstString} gets a ${malformed} problem, or a ${invalid} one naming /${firstString}, never a 5xx.`,
          `sends the example body to ${request} with ${firstString}: 1e400, then -1e400, then 1 and 5,000 zeros`,
          async (ctx) => {
            // And an integer of 5,001 digits: Python's int() refuses more than 4,300 (CVE-2020-10735's limit).
            for (const number of ["1e400", "-1e400", `1${"0".repeat(5000)}`]) {
              const body = withFirstString(number);
              const response = await ctx.call(op, { query: example().input.query, body, contentType: mediaType, token: await fullToken(ctx) });
              const what = `${firstString}: ${number.length > 12 ? `an integer of ${number.length} digits` : number}`;
              expectAnswer(ctx, op, response, [malformed, invalid], what);
              if (response.status === invalid) {
                const problem = jsonOf(response);
                expectThat(namesPointer(problem, `/${firstString}`), `${what}: errors[].pointer does not name /${firstString}`, `/${firstString}`, problem.errors ?? "(no errors)");
              }
            }
          },
        ),
      );
    }
    if (declared(malformed)) {
      checks.push(
        check("invalid-utf8-gets-400", "D13, D29", `The example body with bytes that are not UTF-8 in a string gets a ${malformed} problem whose errors[] points at the body, never a 2xx (nothing repaired into U+FFFD and stored).`, `sends the example body to ${request} with 0xFF 0xFE at the start of its first string value`, async (ctx) => {
          const response = await ctx.call(op, { query: example().input.query, body: invalidUtf8Of(JSON.stringify(example().input.body)), contentType: mediaType, token: await fullToken(ctx) });
          expectAnswer(ctx, op, response, [malformed], "a body that is not UTF-8");
          // D29: errors: [{pointer: "", …}], the whole body (or, D13, a member inside it).
          const errors = jsonOf(response).errors as { pointer?: unknown }[] | undefined;
          expectThat(Array.isArray(errors) && errors.some((e) => typeof e?.pointer === "string"), "a body that is not UTF-8: the problem has no errors[] entry with a pointer (D29: pointer \"\", the whole body)", [{ pointer: "" }], errors ?? "(no errors)");
        }),
      );
    }
    const surrogate = loneSurrogateVariant(example().input.body, contract.validatorAt(op.body.schemaPointer));
    if (declared(malformed) && surrogate) {
      checks.push(
        check(
          "lone-surrogate-gets-400",
          "D13, D29",
          `The example body with a lone surrogate escape (\\ud800) as its only fault gets a ${malformed} problem pointing at that member, never a 2xx (nothing repaired into U+FFFD and stored).`,
          `sends the example body to ${request} with \\ud800 at the start of ${surrogate.pointer}`,
          async (ctx) => {
            const response = await send(ctx, op, { query: example().input.query, body: surrogate.body }, await fullToken(ctx));
            expectAnswer(ctx, op, response, [malformed], `a lone surrogate at ${surrogate.pointer}`);
            const problem = jsonOf(response);
            expectThat(namesPointer(problem, surrogate.pointer), `a lone surrogate: errors[].pointer does not name ${surrogate.pointer}`, surrogate.pointer, problem.errors ?? "(no errors)");
          },
        ),
      );
    }
    const unsupported = problemStatus("unsupported-media-type");
    if (declared(unsupported)) {
      checks.push(
        check(
          "wrong-content-type-gets-415",
          "D13, D29",
          `The example body sent as text/plain, as text/json, application/x-json or text/x-json (older names some servers still read), as ${mediaType}-seq or ${mediaType}p (a media type that starts like it is another), as application/merge-patch+json (another JSON-based type), as ${mediaType} in a charset other than UTF-8 (utf8 is no name of it), or with no Content-Type gets a ${unsupported} problem.`,
          `sends the example body to ${request} with Content-Type text/plain, text/json, application/x-json, text/x-json, ${mediaType}-seq, ${mediaType}p, application/merge-patch+json, ${mediaType}; charset=iso-8859-1, ${mediaType}; charset=utf8, then none`,
          async (ctx) => {
            const body = JSON.stringify(example().input.body);
            const types = ["text/plain", "text/json", "application/x-json", "text/x-json", `${mediaType}-seq`, `${mediaType}p`, "application/merge-patch+json", `${mediaType}; charset=iso-8859-1`, `${mediaType}; charset=utf8`, null];
            for (const contentType of types) {
              const response = await ctx.call(op, { query: example().input.query, body, contentType, token: await fullToken(ctx) });
              expectAnswer(ctx, op, response, [unsupported], contentType === null ? "no Content-Type" : `Content-Type ${contentType}`);
            }
          },
        ),
      );
    }
    checks.push(
      check(
        "charset-in-any-case-accepted",
        "D29",
        `The example body sent as ${mediaType}; charset=UTF-8 gets its ${example().status}: UTF-8 is named in any letter case (RFC 9110 §8.3.2).`,
        `sends the example body to ${request} with Content-Type ${mediaType}; charset=UTF-8`,
        async (ctx) => {
          const response = await ctx.call(op, { query: example().input.query, body: JSON.stringify(example().input.body), contentType: `${mediaType}; charset=UTF-8`, token: await fullToken(ctx) });
          expectAnswer(ctx, op, response, [example().status], `Content-Type ${mediaType}; charset=UTF-8`);
        },
      ),
    );
    const tooLarge = problemStatus("payload-too-large");
    if (declared(tooLarge) && op.bodyLimitBytes) {
      const limit = op.bodyLimitBytes;
      // The valid example padded with JSON whitespace: only its size is wrong (an extra member would also
      // be refused by a closed body, D16).
      const padded = (size: number) => {
        const text = JSON.stringify(example().input.body);
        return `${text}${" ".repeat(size - Buffer.byteLength(text))}`;
      };
      checks.push(
        check("oversized-body-gets-413", "D18", `A well-formed body over ${limit} bytes gets a ${tooLarge} problem, with a Content-Length and sent chunked.`, `sends the example body to ${request} padded with spaces to ${limit + 1} bytes, with a Content-Length, then chunked (no length)`, async (ctx) => {
          const body = padded(limit + 1);
          for (const chunked of [false, true]) {
            const response = await ctx.call(op, { query: example().input.query, body, contentType: mediaType, token: await fullToken(ctx), chunked });
            expectAnswer(ctx, op, response, [tooLarge], `a ${body.length}-byte body${chunked ? " sent chunked" : ""}`);
          }
        }),
        check("body-at-limit-accepted", "D18", `A well-formed body of exactly ${limit} bytes is accepted: the limit is ${limit} bytes, not less.`, `sends the example body to ${request} padded with spaces to ${limit} bytes`, async (ctx) => {
          const response = await ctx.call(op, { query: example().input.query, body: padded(limit), contentType: mediaType, token: await fullToken(ctx) });
          expectAnswer(ctx, op, response, [example().status], `a ${limit}-byte body`);
          expectAnswersWhatWasSent(ctx, op, example().input, response, `a ${limit}-byte body`);
        }),
      );
    }
    if (declared(invalid)) {
      checks.push(
        check("schema-violations-get-422", "D13, D16", `Each one-fault variant of the example body, and each invalid body of the spec's ${invalid} examples, gets a ${invalid} problem whose errors[].pointer names the faulty member, and one with three members missing (two where it has two) names each.`, `sends every one-fault variant of the example body to ${request} (missing member, wrong type, pattern, length, format, enum, item count, duplicate), then the request body of each ${invalid} example of the spec, then the example body without three of its required members (two where it has two)`, async (ctx) => {
          const variants = invalidVariants(ctx.contract, op, example().input).filter((v) => !v.pointer.startsWith("/query/"));
          const token = await fullToken(ctx);
          // The spec's own invalid bodies (a plain-HTTP webhook URL): a pattern's mutations above may not reach them.
          for (const e of op.invalidExamples) {
            const what = `the request body of the spec's ${invalid} example ${e.name}`;
            const response = await send(ctx, op, { query: example().input.query, body: e.body }, token);
            expectAnswer(ctx, op, response, [invalid], what);
            const unnamed = e.pointers.filter((pointer) => !namesPointer(jsonOf(response), pointer));
            expectEqual(unnamed, [], `${what}: errors[] does not name what the example's problem names`);
          }
          for (const variant of variants) {
            const response = await send(ctx, op, variant, token);
            expectAnswer(ctx, op, response, [invalid], describeInput(variant));
            const problem = jsonOf(response);
            expectThat(namesPointer(problem, variant.pointer), `${describeInput(variant)}: errors[].pointer does not name ${variant.pointer}`, variant.pointer, problem.errors ?? "(no errors)");
          }
          // Several faults at once: errors names every failing member (D13), not the first found nor the first two.
          const body = example().input.body as Json;
          const missing = ((flatten(op.body!.schema, ctx.contract.resolve).required ?? []) as string[]).filter((name) => name in body).slice(0, 3);
          if (missing.length >= 2) {
            const faults = { query: example().input.query, body: Object.fromEntries(Object.entries(body).filter(([name]) => !missing.includes(name))) };
            const what = `the example body without ${missing.join(", ")}`;
            const response = await send(ctx, op, faults, token);
            expectAnswer(ctx, op, response, [invalid], what);
            const unnamed = missing.filter((name) => !namesPointer(jsonOf(response), `/${name}`));
            expectEqual(unnamed, [], `${what}: errors[] does not name every failing member (D13)`);
          }
          // D13: a parser's depth limit is 64 levels or more, so a body nested 64 deep is read, and refused
          // by its schema: the first member's value 63 arrays deep, in the root object.
          const [deepMember] = Object.keys(body);
          if (deepMember !== undefined) {
            const raw = Buffer.from(JSON.stringify({ ...body, [deepMember]: "@deep@" }).replace('"@deep@"', `${"[".repeat(63)}${"]".repeat(63)}`));
            const what = `the example body with ${deepMember} nested 63 arrays deep (64 levels in all)`;
            const response = await send(ctx, op, { query: example().input.query, body, raw }, token);
            expectAnswer(ctx, op, response, [invalid], `${what} (D13: a depth limit, if any, of 64 levels or more)`);
            expectThat(namesPointer(jsonOf(response), `/${deepMember}`), `${what}: errors[].pointer does not name /${deepMember}`, `/${deepMember}`, jsonOf(response).errors ?? "(no errors)");
          }
          return `${variants.length + op.invalidExamples.length + (missing.length >= 2 ? 1 : 0) + (deepMember !== undefined ? 1 : 0)} invalid bodies`;
        }),
      );
    }
  }

  if (op.query.length > 0) {
    const malformed = problemStatus("malformed-request");
    checks.push(
      check(
        "invalid-query-gets-400",
        "D13",
        `A missing or invalid query parameter gets a ${malformed} problem with the pointer /query/<name>, also where a required one comes only as <name>[] (a parameter of another name), or digits come written as a number (10001.0, 10001e0); a value percent-encoded twice (1000%2531) gets a ${malformed} problem, and a malformed percent-escape (%zz) a ${malformed} (from the HTTP layer, in a body of its own, if it refuses the request-target itself).`,
        `sends the example query to ${request} with each parameter missing or invalid in turn, then each required one named <name>[] instead, then each of digits with .0 and e0 after them, then each with its last character percent-encoded twice, then each with %zz before its value`,
        async (ctx) => {
          const input = example().input;
          const variants = invalidVariants(ctx.contract, op, input).filter((v) => v.pointer.startsWith("/query/"));
          // PHP's and Rails' array syntax: to this API another parameter, so the required one is missing. An
          // implementation that refuses unknown parameters may name that one instead.
          const asArrays = op.query
            .filter((p) => p.required && input.query[p.name] !== undefined)
            .map((p) => {
              const { [p.name]: value, ...rest } = input.query;
              return { query: { ...rest, [`${p.name}[]`]: value! }, body: input.body, pointer: `/query/${p.name}`, kind: "named-as-an-array" };
            });
          // Digits written as a number a loosely typed language reads alike (Perl's ==, PHP's ==): 10001.0, 10001e0.
          const asNumbers = op.query.flatMap((p) => {
            const digits = input.query[p.name];
            if (digits === undefined || !/^\d+$/.test(digits)) return [];
            const valid = contract.validatorAt(p.schemaPointer);
            return [".0", "e0"]
              .map((tail) => `${digits}${tail}`)
              .filter((value) => !valid(value))
              .map((value) => ({ query: { ...input.query, [p.name]: value }, body: input.body, pointer: `/query/${p.name}`, kind: "digits-as-a-number" }));
          });
          const token = await fullToken(ctx);
          for (const variant of [...variants, ...asArrays, ...asNumbers]) {
            const response = await send(ctx, op, variant, token);
            expectAnswer(ctx, op, response, [malformed], `${describeInput(variant)} (${new URLSearchParams(variant.query)})`);
            const problem = jsonOf(response);
            const named = namesPointer(problem, variant.pointer) || (variant.kind === "named-as-an-array" && namesPointer(problem, `${variant.pointer}[]`));
            expectThat(named, `${describeInput(variant)}: errors[].pointer does not name ${variant.pointer}`, variant.pointer, problem.errors ?? "(no errors)");
          }
          // A percent sign not followed by two hex digits (RFC 3986 §2.1): refused, or decoded as written and
          // then invalid, never a 5xx. Where it is refused before any parameter is read, no pointer is asked for.
          // And its last character percent-encoded twice (zip=1000%2531): decoded once, as it must be, it is not the value.
          const twice = (value: string) => `${encodeURIComponent(value.slice(0, -1))}%25${value.charCodeAt(value.length - 1).toString(16).padStart(2, "0")}`;
          const written = (how: (value: string) => string) =>
            op.query
              .filter((p) => input.query[p.name] !== undefined)
              .map((p) => Object.entries(input.query).map(([name, value]) => `${encodeURIComponent(name)}=${name === p.name ? how(value) : encodeURIComponent(value)}`).join("&"));
          const encodedTwice = written(twice);
          const malformedEscapes = written((value) => `%zz${encodeURIComponent(value)}`);
          for (const raw of encodedTwice) expectAnswer(ctx, op, await ctx.call(op, { query: raw, token }), [malformed], `a value percent-encoded twice (${raw})`);
          // Last: such a request-target is not valid HTTP (RFC 9112 §3), and an HTTP layer may refuse it with a
          // 400 of its own before the API sees it (the JDK's HttpServer does, in text/html). A 400 in another
          // body than a problem passes; a problem is held to the contract.
          for (const raw of malformedEscapes) {
            const response = await ctx.call(op, { query: raw, token });
            const type = String(response.headers["content-type"] ?? "");
            if (response.status === malformed && !/^application\/problem\+json\b/i.test(type)) continue;
            expectAnswer(ctx, op, response, [malformed], `a malformed percent-escape (${raw})`);
          }
          return `${variants.length + asArrays.length + asNumbers.length + encodedTwice.length + malformedEscapes.length} invalid queries`;
        },
      ),
    );
  }

  // Valid input can still name data the implementation does not hold (404), a business of another
  // partner (403 business-forbidden, D27: which businesses exist and whose they are is the
  // implementation's data), or meet a rate limit (429).
  const accepted = [
    ...op.statuses.filter((s) => /^2\d\d$/.test(s)).map(Number),
    ...["not-found", "rate-limited"].map(problemStatus).filter(declared),
  ];
  const foreign = op.problemTypes.includes(contract.problem("business-forbidden").type) ? contract.problem("business-forbidden") : undefined;
  const isForeign = (response: ResponseSeen) => foreign !== undefined && response.status === foreign.status && jsonOf(response).type === foreign.type;
  checks.push(
    check(
      "generated-valid-inputs-accepted",
      foreign ? "D13, D16, D17, D27" : "D13, D16, D17",
      `Inputs generated from the schemas get ${accepted.join("/")}${foreign ? ` (or ${foreign.status} business-forbidden)` : ""}, never another 4xx or a 5xx, and answers that validate.`,
      `sends inputs generated from the schemas to ${request} (--runs of them, from --seed)`,
      async (ctx) => {
        const token = await fullToken(ctx);
        return property(ctx, validInputs(ctx.contract, op), async (input) => {
          const response = await send(ctx, op, input, token);
          expectAnswer(ctx, op, response, isForeign(response) ? [foreign!.status] : accepted, "a valid input");
          expectAnswersWhatWasSent(ctx, op, input, response, "a valid input");
        });
      },
    ),
    check("generated-invalid-inputs-get-4xx", "D13", `One-fault variants of generated inputs get a 4xx problem (never a 2xx or a 5xx) that validates.`, `sends a one-fault variant of each generated input to ${request} (--runs of them, from --seed)`, async (ctx) => {
      const token = await fullToken(ctx);
      const arbitrary = validInputs(ctx.contract, op).chain((input) => fc.constantFrom(...invalidVariants(ctx.contract, op, input), ...utf8Variants(op, input)));
      // Any declared client error but the two about the (valid, full-scope) token.
      const auth = [problemStatus("unauthenticated"), problemStatus("insufficient-scope")];
      const clientErrors = op.statuses.filter((s) => /^4\d\d$/.test(s)).map(Number).filter((s) => !auth.includes(s));
      return property(ctx, arbitrary, async (input) => {
        expectAnswer(ctx, op, await send(ctx, op, input, token), clientErrors, describeInput(input));
      });
    }),
  );
  return checks;
}

/**
 * D17: a service request is matched to the businesses that serve its category at its zip code, which is
 * what the search finds: the example's leads are one for each business found, and none for another.
 */
function matchingCheck(contract: Contract): ApiCheck[] {
  const create = contract.apiOperations.find((o) => o.operationId === "createServiceRequest");
  const search = contract.apiOperations.find((o) => o.operationId === "searchBusinesses");
  if (!create || !search) return [];
  return [
    defineCheck<ApiContext>({
      id: "create-service-request-leads-match-the-search",
      section: `${create.section}, ${search.section}, D17`,
      title: "The example service request gets one lead for each business the search finds for its category at its zip code, and none for any other business: both are the businesses that serve the category there.",
      scenario: `sends the success example to ${create.method} ${create.path}, then ${search.method} ${search.path} for its categoryID at its zipCode, and compares the leads' businessIDs with the businesses found`,
      async run(ctx) {
        const token = await fullToken(ctx);
        const body = successExample(create).body as { categoryID: string; zipCode: string };
        const created = await send(ctx, create, { query: {}, body }, token);
        expectAnswer(ctx, create, created, [201], "the success example");
        const query = { ...successExample(search).query, category_id: body.categoryID, zip: body.zipCode };
        const found = await send(ctx, search, { query }, token);
        expectAnswer(ctx, search, found, [200], `category_id=${query.category_id}&zip=${query.zip}`);
        const leads = (jsonOf(created).leads as { businessID: string }[]).map((l) => l.businessID).sort();
        const businesses = (jsonOf(found).businesses as { businessID: string }[]).map((b) => b.businessID).sort();
        // A search answers 50 at most (D17): then each of those has its lead, and more may have one.
        if (businesses.length >= 50) {
          const missing = businesses.filter((b) => !leads.includes(b));
          expectEqual(missing, [], "a business the search found got no lead");
          return "the search found 50 businesses, its most: leads for others were not compared";
        }
        expectEqual(leads, businesses, "the leads are not one for each business the search finds for the request's category at its zip code");
      },
    }),
  ];
}

/** Every check of the API suite, in order: the token endpoint, then each operation of the spec. */
export function apiChecks(contract: Contract): ApiCheck[] {
  // Fail at once on a schema outside the converter's subset, not in the middle of a run.
  for (const op of contract.apiOperations) {
    if (op.body) flatten(op.body.schema, contract.resolve);
  }
  return [
    ...tokenChecks(contract),
    ...contract.apiOperations.flatMap((op) => operationChecks(contract, op)),
    ...matchingCheck(contract),
    // Last: where a proxy or NAT hides the suite's second address, its own address is throttled for a while after it.
    ...(contract.failedAuthThrottle ? [addressThrottleCheck(contract, contract.failedAuthThrottle)] : []),
  ];
}
