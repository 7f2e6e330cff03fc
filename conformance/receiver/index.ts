// Certification of a partner's webhook receiver: the suite plays the service, delivering exactly as a
// conforming server does (src/sender.ts), and checks what the receiver acknowledges and refuses.
import { createHash, createHmac, randomBytes, randomInt } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect as connectTcp, isIP, type AddressInfo, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import type { Dispatcher } from "undici";
import { buildEnvelope, connectionTo, deliver, tlsTrust, type DeliveryOutcome } from "../../src/sender.js";
import { signPayload, eventNames, eventSchemaName, loadDeliveryRules, type EventName } from "@partner-platform/sdk";
import { schemaRegistry } from "../../src/spec.js";
import {
  CheckFailed,
  SetupError,
  defineCheck,
  expectEqual,
  expectThat,
  runChecks,
  type Check,
  type RunOptions,
  type SuiteReport,
} from "../framework/check.js";
import { loadSigningVectors, type SigningVector } from "../vectors/index.js";

export interface ReceiverSuiteOptions {
  url: string;
  /** The secret the receiver verifies with. */
  secret: string;
  /** HTTPS trust: a CA (PEM) trusted in addition to the public ones, or any certificate at all. */
  tls?: { ca?: string; insecure?: boolean };
  /** The attempt timeout the receiver must answer within; default the spec's. */
  timeoutMs?: number;
}

interface ReceiverContext {
  options: ReceiverSuiteOptions;
  timeoutMs: number;
  /** Latency of every authentic delivery made, and the check that made it, for the timeout check. */
  latencies: { ms: number; check: string }[];
  /**
   * Delivers `body` on a connection of its own, so that what an earlier delivery left on a connection
   * cannot decide this one's verdict, or on `connection`, kept alive across deliveries as a server's are
   * (D52). A receiver may close a connection after any answer, so a delivery that finds `connection`
   * closing (no HTTP answer) is made again on a connection of its own: an HTTP answer is the receiver's
   * verdict. A forgery is not timed: the service never sends one (D6 is its attempts' timeout).
   */
  send(
    body: Buffer,
    header: string | string[] | null,
    how?: { forgery?: boolean; connection?: Dispatcher; headerName?: string; method?: string; contentType?: string | null },
  ): Promise<DeliveryOutcome>;
  /** A connection to the receiver that stays open across deliveries until closed. */
  connection(): Dispatcher;
}

/** A secret no receiver has: drawn anew each run, so that neither the receiver's secret nor an old one kept for rotation can be it. */
const otherSecret = `whsec-certification-other-${randomBytes(12).toString("base64url")}`;
/** The signature of `body` made with that other secret. */
const signedByOther = (body: Buffer) => signPayload(body, otherSecret);

/**
 * The body with its envelope's timestamp made `now`, in the same form, every other byte as the vector
 * has it: a receiver may ignore events older than it cares to accept (D3), and the vectors' dates are fixed.
 */
function stamped(body: Buffer, now = new Date()): Buffer {
  const text = body.toString("utf8");
  const at = now.toISOString().replace(/\.\d{3}Z$/, "Z");
  const pattern = /("timestamp"\s*:\s*")\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z(")/;
  if (!pattern.test(text)) throw new Error(`a signing vector without a "timestamp" to stamp: ${text.slice(0, 80)}`);
  return Buffer.from(text.replace(pattern, `$1${at}$2`), "utf8");
}

/** The header a vector's kind calls for, for `body` (the vector's, stamped) and this receiver's secret. */
function headerFor(id: string, body: Buffer, secret: string): string | null {
  const good = signPayload(body, secret);
  switch (id) {
    case "wrong-secret":
      return signedByOther(body);
    case "reserialized-body-signature":
      return signPayload(Buffer.from(reserializations.compact!(JSON.parse(body.toString("utf8")))), secret);
    case "truncated-header":
      return good.slice(0, 63);
    case "extended-header":
      return `${good}0`;
    case "signature-list":
      return `${signedByOther(body)},${good}`;
    case "uppercase-hex":
      return good.toUpperCase();
    case "sha256-prefixed":
      return `sha256=${good}`;
    case "non-hex":
      return "z".repeat(64);
    case "empty-header":
      return "";
    case "missing-header":
      return null;
    default:
      return good; // valid vectors, and tampered-byte (whose body was changed after signing)
  }
}

/** A vector's body, stamped now, with its header; for tampered-byte the original is signed, not the body. */
function signedBodyFor(v: SigningVector, secret: string, vectors: SigningVector[]): { body: Buffer; header: string | null } {
  const now = new Date();
  const body = stamped(v.body, now);
  if (v.id === "tampered-byte") {
    const original = vectors.find((x) => x.id === "compact-envelope")!;
    return { body, header: signPayload(stamped(original.body, now), secret) };
  }
  return { body, header: headerFor(v.id, body, secret) };
}

const vectors = loadSigningVectors();
const vector = (id: string) => vectors.find((v) => v.id === id)!;
const ok = (o: DeliveryOutcome) => o.status !== undefined && o.status >= 200 && o.status < 300;
const shown = (o: DeliveryOutcome) => (o.status !== undefined ? o.status : `no answer (${o.error})`);

/**
 * Deliveries that got no HTTP answer (connection refused or reset, TLS, timeout) fail the check as
 * such: nothing can then be said about what the receiver verifies.
 */
function expectAnswers(outcomes: Record<string, DeliveryOutcome>): void {
  const unanswered = Object.fromEntries(Object.entries(outcomes).filter(([, o]) => o.status === undefined).map(([k, o]) => [k, shown(o)]));
  if (Object.keys(unanswered).length > 0) {
    throw new CheckFailed(
      "deliveries got no complete HTTP answer (a connection, TLS or timeout failure, an answer that is not valid HTTP/1.1, or a 2xx whose body did not end)",
      "an HTTP answer to each delivery",
      unanswered,
    );
  }
}

/**
 * A forgery, after the authentic delivery of the same event (its id; the tampered body's original): a
 * receiver verifies before anything else, deduplication included (D2), so that a forgery is refused
 * whether or not its id was seen, and a verdict does not depend on which checks ran before.
 */
async function forged(ctx: ReceiverContext, v: SigningVector, header?: (right: string, body: Buffer) => string | string[]): Promise<DeliveryOutcome> {
  const original = v.id === "tampered-byte" ? vector("compact-envelope") : v;
  const authentic = stamped(original.body);
  await ctx.send(authentic, signPayload(authentic, ctx.options.secret));
  const forgery = signedBodyFor(v, ctx.options.secret, vectors);
  return ctx.send(forgery.body, header ? header(forgery.header!, forgery.body) : forgery.header, { forgery: true });
}

/**
 * JSON written again from the parsed body, as common libraries write it (strings and key order kept,
 * ASCII bodies only): compact (JSON.stringify, PHP's json_encode, Ruby's JSON.generate), with its keys
 * sorted (Go's encoding/json for a map), spaced (Python's json.dumps), spaced with its keys sorted
 * (json.dumps with sort_keys), indented by 2 (json.dumps with indent=2, JSON.stringify(v, null, 2)),
 * sorted too, by 4 (Python's indent=4, also with the newline PHP's JSON_PRETTY_PRINT is often written
 * with), and by a tab. The body sent is indented by 2 and ends in a newline, so none of them is its bytes.
 */
export const reserializations: Record<string, (value: unknown) => string> = {
  compact: (value) => JSON.stringify(value),
  "sorted keys": function sorted(value): string {
    if (Array.isArray(value)) return `[${value.map(sorted).join(",")}]`;
    if (value === null || typeof value !== "object") return JSON.stringify(value);
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${sorted(v)}`).join(",")}}`;
  },
  "spaced (Python's json.dumps)": (value) => spaced(value, false),
  "spaced, keys sorted (json.dumps with sort_keys)": (value) => spaced(value, true),
  "indented by 2 (json.dumps with indent=2)": (value) => JSON.stringify(value, null, 2),
  "indented by 2, keys sorted (json.dumps with sort_keys and indent=2)": (value) => JSON.stringify(JSON.parse(reserializations["sorted keys"]!(value)), null, 2),
  "indented by 4 (json.dumps with indent=4)": (value) => JSON.stringify(value, null, 4),
  "indented by 4 and ending in a newline (PHP's JSON_PRETTY_PRINT and a newline)": (value) => `${JSON.stringify(value, null, 4)}\n`,
  "indented by a tab (json.dumps with indent='\\t')": (value) => JSON.stringify(value, null, "\t"),
};

function spaced(value: unknown, sortKeys: boolean): string {
  if (Array.isArray(value)) return `[${value.map((v) => spaced(v, sortKeys)).join(", ")}]`;
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  const entries = Object.entries(value);
  if (sortKeys) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${spaced(v, sortKeys)}`).join(", ")}}`;
}

/** What the forgery of each vector points at, where it is one fault's. */
const forgeryHints: Record<string, string> = {
  "uppercase-hex": "is the signature compared without regard to case (a case-insensitive compare, the header lowercased, or hex-decoded)? The header is lowercase hex (D2)",
};

const acknowledgedForgery = (v: SigningVector) =>
  `the receiver acknowledged a delivery it must refuse (${v.id}: ${v.description}); ${
    forgeryHints[v.id] ? `${forgeryHints[v.id]}. ` : ""
  }It came right after the same event correctly signed: where the other refusal checks fail too, the receiver deduplicates by id before verifying (D2: verify first)`;

function refusal(id: string, vectorId: string, section: string, title: string, scenario: string): Check<ReceiverContext> {
  return defineCheck({
    id,
    section,
    title,
    scenario: `${scenario}, after the same event correctly signed`,
    async run(ctx) {
      const outcome = await forged(ctx, vector(vectorId));
      expectAnswers({ [vectorId]: outcome });
      expectThat(!ok(outcome), acknowledgedForgery(vector(vectorId)), "a non-2xx status", shown(outcome));
    },
  });
}

/** Deliveries of one event, each of which must be acknowledged. */
function expectEachAcknowledged(outcomes: Record<string, DeliveryOutcome>, message: string): void {
  expectAnswers(outcomes);
  expectThat(Object.values(outcomes).every(ok), message, Object.keys(outcomes).map(() => "2xx"), Object.values(outcomes).map(shown));
}

/** Forgeries that were acknowledged, each by name: none may be. */
function expectRefused(outcomes: Record<string, DeliveryOutcome>, message: string): void {
  expectAnswers(outcomes);
  const acknowledged = Object.entries(outcomes).filter(([, o]) => ok(o));
  expectEqual(Object.fromEntries(acknowledged.map(([k, o]) => [k, shown(o)])), {}, message);
}

/**
 * Refused authentic deliveries, with the likeliest cause. With `hints` (deliveries that differ only in
 * what every receiver must take): every one refused alike points at the secret or the header's lookup,
 * a 400 or 422 at validating the body; otherwise, and for checks of one cause, their own message.
 */
function expectAcknowledged(outcomes: Record<string, DeliveryOutcome>, someRefused: string, { hints = false } = {}): void {
  expectAnswers(outcomes);
  const refused = Object.entries(outcomes).filter(([, o]) => !ok(o));
  const all = hints && refused.length === Object.keys(outcomes).length && refused.length > 1;
  const invalid = hints && refused.length > 0 && refused.every(([, o]) => o.status === 400 || o.status === 422);
  expectEqual(
    Object.fromEntries(refused.map(([k, o]) => [k, shown(o)])),
    {},
    invalid
      ? "correctly signed deliveries were refused with 400 or 422: is the body validated more strictly than its event's JSON Schema? Receivers ignore members they do not know (a later version adds some, D16, D60) and take 5.0 as 5; a receiver acknowledges every authentic event (D3)"
      : all
        ? "every authentic delivery was refused: is the secret the one given to the suite (--secret), keyed as its UTF-8 bytes, every code point of it (not trimmed, lowercased, base64-decoded or encoded again as Latin-1), and is the header looked up by a case-insensitive name (the suite sends x-service-signature)?"
        : `${someRefused}${refusedAsForgeries(refused.map(([, o]) => o))}`,
  );
}

/** Where every refusal was a 401, what that points at: the signature did not match the bytes verified. */
function refusedAsForgeries(refused: DeliveryOutcome[]): string {
  return refused.length > 0 && refused.every((o) => o.status === 401)
    ? "; each was refused with 401, as a forgery: is the signature verified over the whole body as received (not re-serialized, trimmed, or only its first part read)?"
    : "";
}

/** The age of the oldest delivery a server makes: the sum of the retry waits and of the attempts' timeouts. */
function oldestRetrySeconds(): number {
  const rules = loadDeliveryRules();
  return rules.retryWaitsSeconds.reduce((a, b) => a + b, 0) + rules.retryWaitsSeconds.length * rules.attemptTimeoutSeconds;
}

/** An authentic booking.cancelled whose body is exactly `bytes` long (its reason, which has no maximum, padded). */
function eventOfSize(bytes: number): Buffer {
  const envelope = buildEnvelope("booking.cancelled");
  const data = envelope.data as Record<string, unknown>;
  data.reason = "";
  const rest = bytes - Buffer.byteLength(JSON.stringify(envelope));
  // Three-byte characters, one UTF-16 unit each, then ASCII for the remainder.
  data.reason = "€".repeat(Math.floor(rest / 3)) + "x".repeat(rest % 3);
  return Buffer.from(JSON.stringify(envelope));
}

/** `value` written as JSON and correctly signed, delivered: an authentic delivery. */
function sendSigned(ctx: ReceiverContext, value: unknown, how?: { headerName?: string }): Promise<DeliveryOutcome> {
  const body = Buffer.from(JSON.stringify(value));
  return ctx.send(body, signPayload(body, ctx.options.secret), how);
}

/** The members of an event's `data`, as its JSON Schema has them. */
export function dataSchemaOf(event: EventName): { properties: Record<string, { maxLength?: number }>; required: string[] } {
  const registry = schemaRegistry();
  const envelope = registry.getSchema(`${eventSchemaName(event)}.json`)!.schema as { properties: { data: { $ref: string } } };
  const data = registry.getSchema(envelope.properties.data.$ref)!.schema as { properties: Record<string, { maxLength?: number }>; required?: string[] };
  return { properties: data.properties, required: data.required ?? [] };
}

/** A lead id no delivery of the run has named (the examples' are short). */
const unseenLeadId = () => String(randomInt(10 ** 12, 10 ** 13));

/** Hashes by their names in node:crypto and in prose. */
const hashNames: Record<string, string> = { sha256: "SHA-256", sha1: "SHA-1", md5: "MD5", sha512: "SHA-512", sha384: "SHA-384" };
/** Plain digests anyone can compute, and the hashes whose HMACs with the secret are not HMAC-SHA256's (D2). */
const UNKEYED_HASHES = ["sha256", "sha1", "md5", "sha512"];
const OTHER_HMAC_HASHES = ["sha1", "md5", "sha512", "sha384"];

/** The signatures anyone can make of a body without the secret. */
const keyless: Record<string, (body: Buffer) => string> = {
  "the HMAC keyed with no bytes": (body) => createHmac("sha256", "").update(body).digest("hex"),
  ...Object.fromEntries(UNKEYED_HASHES.map((hash) => [`the ${hashNames[hash]} of the body, unkeyed`, (body: Buffer) => createHash(hash).update(body).digest("hex")])),
};

/** HMACs keyed with the secret, of another hash than SHA-256 (the header is HMAC-SHA256's, D2). */
const otherHmacs: Record<string, (body: Buffer, secret: string) => string> = Object.fromEntries(
  OTHER_HMAC_HASHES.map((hash) => [`HMAC-${hashNames[hash]!.replace("-", "")}`, (body: Buffer, secret: string) => createHmac(hash, secret).update(body).digest("hex")]),
);

/** The envelope with its timestamp given a fraction of a second (D14: up to 9 digits). */
const withFraction = (envelope: ReturnType<typeof buildEnvelope>, fraction: string) => ({ ...envelope, timestamp: envelope.timestamp.replace(/Z$/, `${fraction}Z`) });

/** An event id of evt_ and `length` letters and digits (D4: 8 to 64). */
const eventIdOfLength = (length: number) => `evt_${randomBytes(48).toString("base64").replace(/[^0-9A-Za-z]/g, "").padEnd(length, "0").slice(0, length)}`;

/** A member no schema has, added to the envelope and to every object inside it, nested ones included (D16). */
function withUnknownMembers(value: unknown, top = true): unknown {
  if (Array.isArray(value)) return value.map((v) => withUnknownMembers(v, false));
  if (value === null || typeof value !== "object") return value;
  const inside = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withUnknownMembers(v, false)]));
  return { ...inside, ...(top ? { apiVersion: "4.1" } : {}), addedInALaterVersion: { note: "ignore me" } };
}

/** The event's data without its optional members (D20), and their names; undefined when it has none. */
function withoutOptionalMembers(event: EventName): { envelope: ReturnType<typeof buildEnvelope>; left: string[] } | undefined {
  const { properties, required } = dataSchemaOf(event);
  const optional = Object.keys(properties).filter((name) => !required.includes(name));
  if (optional.length === 0) return undefined;
  const data = { ...buildEnvelope(event).data } as Record<string, unknown>;
  for (const name of optional) delete data[name];
  return { envelope: buildEnvelope(event, { data }), left: optional };
}

/** The event with each bounded text at its maximum length, in € (D18), and what was made long; undefined when it has none. */
function withLongestTexts(event: EventName): { envelope: ReturnType<typeof buildEnvelope>; texts: string } | undefined {
  const bounded = Object.entries(dataSchemaOf(event).properties).filter(([, schema]) => schema.maxLength !== undefined);
  if (bounded.length === 0) return undefined;
  const data = { ...buildEnvelope(event).data } as Record<string, unknown>;
  for (const [name, schema] of bounded) data[name] = "€".repeat(schema.maxLength!);
  return { envelope: buildEnvelope(event, { data }), texts: bounded.map(([name, schema]) => `${name} of ${schema.maxLength}`).join(", ") };
}

/** The event about a lead no delivery of the run has named; undefined for an event that names none. */
function aboutAnUnseenLead(event: EventName): ReturnType<typeof buildEnvelope> | undefined {
  const data = { ...buildEnvelope(event).data } as Record<string, unknown>;
  if (!("leadID" in data)) return undefined;
  data.leadID = unseenLeadId();
  return buildEnvelope(event, { data });
}

/**
 * Each form of authentic delivery a receiver must acknowledge, which a receiver might take as a reason
 * to skip verifying: a forgery in each must be refused all the same (D2: verification comes first).
 */
function shapesToAcknowledge(): Record<string, { body: Buffer; contentType?: string; headerName?: string }> {
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  const name = loadDeliveryRules().signatureHeader;
  const longest = eventNames.map(withLongestTexts).find((x) => x !== undefined)!;
  const optional = eventNames.map(withoutOptionalMembers).find((x) => x !== undefined)!;
  return {
    "labelled application/json; charset=utf-8": { body: json(buildEnvelope("booking.confirmed")), contentType: "application/json; charset=utf-8" },
    "of 64 KiB": { body: eventOfSize(64 * 1024) },
    "stamped with a fraction of a second": { body: json(withFraction(buildEnvelope("message.received"), ".123")) },
    "with an id of 64 characters": { body: json(buildEnvelope("review.created", { id: eventIdOfLength(64) })) },
    "with an id of 8 characters": { body: json(buildEnvelope("review.created", { id: eventIdOfLength(8) })) },
    "with members its schema does not have": { body: json(withUnknownMembers(buildEnvelope("lead.created"))) },
    [`without ${optional.left.join(", ")}`]: { body: json(optional.envelope) },
    [`with ${longest.texts}`]: { body: json(longest.envelope) },
    "about a lead not created yet": { body: json(aboutAnUnseenLead("lead.updated")) },
    [`its header named ${name}`]: { body: json(buildEnvelope("booking.cancelled")), headerName: name },
    [`its header named ${name.toUpperCase()}`]: { body: json(buildEnvelope("booking.cancelled")), headerName: name.toUpperCase() },
  };
}

/**
 * Bodies the service never sends, each of which a receiver might take as junk not worth verifying (D2:
 * verified all the same). Each made when sent: the check's scenario names them when the module loads.
 */
function shapesNeverSent(): Record<string, () => Buffer> {
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  const envelope = () => buildEnvelope("lead.created") as unknown as Record<string, unknown>;
  const notUtf8 = () => {
    const [before, after] = JSON.stringify({ ...envelope(), note: "@" }).split("@") as [string, string];
    return Buffer.concat([Buffer.from(before), Buffer.from([0xc3, 0x28]), Buffer.from(after)]);
  };
  return {
    "a body that is not JSON": () => Buffer.from("ping"),
    "an envelope without data": () => json({ ...envelope(), data: undefined }),
    "an envelope without an id": () => json({ ...envelope(), id: undefined }),
    "an envelope without an event name": () => json({ ...envelope(), event: undefined }),
    "an event name that is not a string": () => json({ ...envelope(), event: 42 }),
    "an id that is not an event id": () => json({ ...envelope(), id: "1" }),
    "a JSON array": () => json([envelope()]),
    "JSON null": () => Buffer.from("null"),
    "stamped 1970-01-01T00:00:00Z": () => json({ ...envelope(), timestamp: "1970-01-01T00:00:00Z" }),
    "stamped 9999-12-31T23:59:59Z": () => json({ ...envelope(), timestamp: "9999-12-31T23:59:59Z" }),
    "a timestamp that is not a date": () => json({ ...envelope(), timestamp: "yesterday" }),
    "a body of 96 KiB (over D18's 64 KiB)": () => eventOfSize(96 * 1024),
    "bytes that are not UTF-8": notUtf8,
    "a byte order mark before the JSON": () => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json(envelope())]),
  };
}

export const receiverChecks: Check<ReceiverContext>[] = [
  defineCheck({
    id: "acknowledges-every-event",
    section: "§6, §5.3",
    title: "Each of the eight events, correctly signed, is acknowledged with a 2xx.",
    scenario: "delivers each of the eight events, built from the spec's examples and signed with the secret",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const event of eventNames) outcomes[event] = await sendSigned(ctx, buildEnvelope(event));
      expectAcknowledged(outcomes, "some correctly signed events were not acknowledged: a receiver acknowledges every authentic delivery, also of an event it does not handle (D3)", { hints: true });
    },
  }),
  defineCheck({
    id: "verifies-raw-bytes-not-reserialized-json",
    section: "§5.3, D2",
    title: "Valid deliveries whose bytes change when re-serialized (whitespace, key order, \\u escapes, non-ASCII, large numbers) are acknowledged.",
    scenario: "delivers the valid signing vectors of conformance/vectors/signing.json, each signed with the secret",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const v of vectors.filter((x) => x.valid && x.id !== "non-ascii-secret")) {
        const { body, header } = signedBodyFor(v, ctx.options.secret, vectors);
        outcomes[v.id] = await ctx.send(body, header);
      }
      // The hint fits only a receiver that answered and refused: a transport failure is reported as such.
      expectAcknowledged(
        outcomes,
        "valid deliveries were refused: each was signed over its exact bytes and stamped now, and a receiver acknowledges every authentic delivery, whatever its event or business (D3, D8): is the signature checked on re-serialized JSON, or on the body trimmed?",
        { hints: true },
      );
    },
  }),
  defineCheck({
    id: "acknowledges-old-event",
    section: "§6, D3",
    title:
      "An authentic event stamped as long ago as a last retry comes (over 26 hours) is acknowledged, and ones 400 days and ten years old (a server catching up after an outage, a server's clock gone wrong): an old event may be dropped, never refused.",
    scenario: "delivers a correctly signed event whose envelope timestamp is the retry schedule's total plus an hour old, then one 400 days old, then one ten years old",
    async run(ctx) {
      const retryAge = oldestRetrySeconds() + 3600;
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [age, seconds] of [
        [`${Math.round(retryAge / 3600)} hours old`, retryAge],
        ["400 days old", 400 * 86_400],
        ["ten years old", 3652 * 86_400],
      ] as const) {
        // An event of its own: a receiver may acknowledge an id it has seen without looking further.
        outcomes[age] = await sendSigned(ctx, buildEnvelope("booking.confirmed", { now: Date.now() - seconds * 1000 }));
      }
      expectAcknowledged(
        outcomes,
        "an old authentic event was refused: a refusal is a failed attempt, retried with the same timestamp, and five in a row disable the webhook; acknowledge (2xx) an event older than you care for, and drop it (D3)",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-event-stamped-ahead",
    section: "§6, D3, D14",
    title: "Authentic events stamped 5 minutes and a day ahead of now are acknowledged: the server's clock is not the receiver's, and a refusal is a failed attempt (D3).",
    scenario: "delivers a correctly signed event whose envelope timestamp is 5 minutes in the future, then one a day in the future",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [ahead, ms] of [["5 minutes ahead", 5 * 60_000], ["a day ahead", 86_400_000]] as const) {
        outcomes[ahead] = await sendSigned(ctx, buildEnvelope("review.created", { now: Date.now() + ms }));
      }
      expectAcknowledged(
        outcomes,
        "an authentic event stamped ahead of now was refused: clocks differ, and a refused delivery is retried with the same timestamp until the webhook is disabled; acknowledge every authentic delivery (D3)",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-timestamps-with-fractions",
    section: "§2, D14",
    title: "An authentic event whose timestamp has a fraction of a second (1, 3 or 9 digits, as D14's pattern allows) is acknowledged.",
    scenario: "delivers three correctly signed events stamped now with .5, .123 and .123456789 seconds",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const fraction of [".5", ".123", ".123456789"]) outcomes[`${fraction} s`] = await sendSigned(ctx, withFraction(buildEnvelope("message.received"), fraction));
      expectAcknowledged(outcomes, "authentic events stamped with a fraction of a second were refused: a timestamp may have one (D14: up to 9 digits); read it with a parser of RFC 3339, not a fixed format");
    },
  }),
  defineCheck({
    id: "acknowledges-event-ids-of-any-legal-length",
    section: "§2, D4",
    title: "Authentic events whose ids are the shortest and the longest D4 allows (evt_ and 8, and 64, letters and digits) are acknowledged.",
    scenario: "delivers two correctly signed events, one with an id of evt_ and 8 characters, one with evt_ and 64",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const length of [8, 64]) {
        const id = eventIdOfLength(length);
        outcomes[`${id.length} characters`] = await sendSigned(ctx, buildEnvelope("review.created", { id }));
      }
      expectAcknowledged(outcomes, "authentic events with ids of a legal length were refused: an id is evt_ and 8 to 64 letters and digits (D4); keep it whole, in a column that long");
    },
  }),
  defineCheck({
    id: "acknowledges-json-with-charset",
    section: "§6, D1",
    title: "An authentic event sent as application/json; charset=utf-8 is acknowledged (D1: a charset parameter, if sent, is utf-8).",
    scenario: "delivers a correctly signed event with Content-Type: application/json; charset=utf-8, then with application/json; charset=UTF-8",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const contentType of ["application/json; charset=utf-8", "application/json; charset=UTF-8"]) {
        const body = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed")));
        outcomes[contentType] = await ctx.send(body, signPayload(body, ctx.options.secret), { contentType });
      }
      expectAcknowledged(outcomes, "authentic events labelled with a charset were refused: a server may add charset=utf-8 to application/json (D1; charset names are case-insensitive); read the media type, not the whole field");
    },
  }),
  defineCheck({
    id: "acknowledges-unknown-members",
    section: "§2, D16, D60",
    title:
      "Each event with members its schema does not have, in the envelope, in its data and in every object inside that (a customer, an amount), is acknowledged: receivers ignore members they do not know (a later version adds some).",
    scenario: "delivers each of the eight events with one more member in the envelope and in every object inside it, correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const event of eventNames) outcomes[event] = await sendSigned(ctx, withUnknownMembers(buildEnvelope(event)));
      expectAcknowledged(
        outcomes,
        "events with members their schema does not have were refused: receivers ignore members they do not know, which a later version adds (D16, D60); do not validate an event as a closed object",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-events-without-optional-members",
    section: "§2, D20",
    title: "Each event whose data has optional members is acknowledged without them (a booking.cancelled without reason, a review without text or lead).",
    scenario: "delivers each event that has optional data members with all of them left out, correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const event of eventNames) {
        const without = withoutOptionalMembers(event);
        if (without) outcomes[`${event} without ${without.left.join(", ")}`] = await sendSigned(ctx, without.envelope);
      }
      expectAcknowledged(outcomes, "events without their optional members were refused: a member the schema does not require may be absent (D20); acknowledge every authentic delivery (D3)");
    },
  }),
  defineCheck({
    id: "acknowledges-longest-texts",
    section: "§2, D18",
    title: "Each event with a bounded text is acknowledged with that text at its maximum length, in characters outside ASCII (a message or review of 10,000 characters).",
    scenario: "delivers each event that has a text with a maximum length, that text as long as it may be (€ repeated), correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const event of eventNames) {
        const longest = withLongestTexts(event);
        if (longest) outcomes[`${event}: ${longest.texts}`] = await sendSigned(ctx, longest.envelope);
      }
      expectAcknowledged(outcomes, "events with a text at its maximum length were refused: texts may be as long as their schema's maxLength, in characters (D18); acknowledge every authentic delivery (D3)");
    },
  }),
  defineCheck({
    id: "acknowledges-events-out-of-order",
    section: "§6, D5",
    title: "Events about a lead whose lead.created has not come (it may come later, or have come before the receiver started) are acknowledged.",
    scenario: "delivers every event that names a lead, each about a lead no delivery of the run has named, correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const event of eventNames.filter((name) => name !== "lead.created")) {
        const envelope = aboutAnUnseenLead(event);
        if (envelope) outcomes[event] = await sendSigned(ctx, envelope);
      }
      expectAcknowledged(
        outcomes,
        "events about a lead not created yet were refused: events come in no set order (a retried lead.created can come after its lead.updated, D5); acknowledge them, and order by timestamp when you care",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-signature-header-in-any-case",
    section: "§5.3, D2",
    title: "The signature header is found whatever the case of its name (HTTP header names are case-insensitive): X-Service-Signature, x-service-signature and X-SERVICE-SIGNATURE.",
    scenario: "delivers three correctly signed events, the header's name spelled as the source writes it, in uppercase, and in lowercase",
    async run(ctx) {
      const name = loadDeliveryRules().signatureHeader;
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const spelling of [name, name.toUpperCase(), name.toLowerCase()]) {
        outcomes[spelling] = await sendSigned(ctx, buildEnvelope("review.created"), { headerName: spelling });
      }
      expectAcknowledged(
        outcomes,
        "a correctly signed delivery was refused for the case of its header's name: look the header up case-insensitively (RFC 9110 §5.1), as every HTTP framework's header API does",
        { hints: true },
      );
    },
  }),
  defineCheck({
    id: "acknowledges-64-kib-event",
    section: "§6, D18",
    title: "An authentic delivery of 64 KiB, the most a delivery can be (D18), is acknowledged.",
    scenario: "delivers a correctly signed booking.cancelled whose reason makes its body 65,536 bytes",
    async run(ctx) {
      const body = eventOfSize(64 * 1024);
      const outcome = await ctx.send(body, signPayload(body, ctx.options.secret));
      expectAnswers({ "64 KiB": outcome });
      expectThat(ok(outcome), `a correctly signed delivery of 64 KiB was refused: accept bodies up to 64 KiB (D18)${refusedAsForgeries([outcome])}`, "a 2xx status", shown(outcome));
    },
  }),
  refusal("rejects-missing-signature", "missing-header", "§5.3", "A delivery without X-Service-Signature is refused.", "delivers a valid event without the signature header"),
  refusal("rejects-empty-signature", "empty-header", "§5.3", "A delivery with an empty X-Service-Signature is refused.", "delivers a valid event with an empty signature header"),
  refusal("rejects-wrong-signature", "non-hex", "§5.3", "A signature that is not the HMAC is refused.", "delivers a valid event with 64 non-hex characters as its signature"),
  refusal("rejects-other-secret", "wrong-secret", "§5.2, §5.3", "A signature made with another secret is refused.", "delivers a valid event signed with another secret"),
  refusal("rejects-tampered-body", "tampered-byte", "§5.3", "A body changed after signing is refused.", "delivers a body with one byte changed after it was signed"),
  refusal("rejects-truncated-signature", "truncated-header", "§5.3, D2", "A signature cut short (a prefix of the right one) is refused.", "delivers a valid event with its signature cut to 63 characters"),
  refusal(
    "rejects-uppercase-signature",
    "uppercase-hex",
    "§5.3, D2",
    "The right signature in uppercase hex is refused (the header is lowercase hex).",
    "delivers a valid event with its signature in uppercase",
  ),
  refusal(
    "rejects-extended-signature",
    "extended-header",
    "§5.3, D2",
    "The right signature followed by one more hex digit is refused (all of the header is compared, not its first 64 characters).",
    "delivers a valid event with a digit added after its signature",
  ),
  defineCheck({
    id: "rejects-signature-list",
    section: "§5.3, D2",
    title: "A list of signatures, the right one among them, is refused (the header holds one signature), whichever comes first, separated by a comma or by a space.",
    scenario:
      "delivers a valid event with another secret's signature, a comma and the right signature in its header, then with the right one first, then both ways separated by a space, each after the same event correctly signed",
    async run(ctx) {
      const outcomes = {
        "other first": await forged(ctx, vector("signature-list")),
        "right first": await forged(ctx, vector("compact-envelope"), (right, body) => `${right},${signedByOther(body)}`),
        "other first, by a space": await forged(ctx, vector("compact-envelope"), (right, body) => `${signedByOther(body)} ${right}`),
        "right first, by a space": await forged(ctx, vector("compact-envelope"), (right, body) => `${right} ${signedByOther(body)}`),
      };
      expectRefused(outcomes, `${acknowledgedForgery(vector("signature-list"))}; is the header split at commas or spaces, and one of its parts compared?`);
    },
  }),
  defineCheck({
    id: "rejects-repeated-signature-header",
    section: "§5.3, D2",
    title:
      "Two signature header lines, the right signature in one of them, are refused whichever comes first: repeated lines are one list (RFC 9110 §5.3), and the header holds one signature.",
    scenario: "delivers a valid event with two signature header lines, another secret's signature and the right one, then the right one first, each after the same event correctly signed",
    async run(ctx) {
      const outcomes = {
        "other first": await forged(ctx, vector("compact-envelope"), (right, body) => [signedByOther(body), right]),
        "right first": await forged(ctx, vector("compact-envelope"), (right, body) => [right, signedByOther(body)]),
      };
      expectRefused(
        outcomes,
        "the receiver acknowledged a delivery with two signature header lines: does it read only the first (or last) of them? Two lines of one header are one list (RFC 9110 §5.3); a delivery has exactly one signature (D2)",
      );
    },
  }),
  defineCheck({
    id: "rejects-prefixed-signature",
    section: "§5.3, D2",
    title: "The right signature behind a prefix or in quotes is refused: sha256=, v1=, t= and \"…\" (the header is the bare hex).",
    scenario: "delivers a valid event with sha256= before its signature, then with v1=, with t=, and in double quotes, each after the same event correctly signed",
    async run(ctx) {
      const outcomes = {
        "sha256=": await forged(ctx, vector("sha256-prefixed")),
        "v1=": await forged(ctx, vector("compact-envelope"), (right) => `v1=${right}`),
        "t=": await forged(ctx, vector("compact-envelope"), (right) => `t=${right}`),
        quoted: await forged(ctx, vector("compact-envelope"), (right) => `"${right}"`),
      };
      expectRefused(outcomes, `${acknowledgedForgery(vector("sha256-prefixed"))}; is a prefix taken off before comparing? The header is the bare lowercase hex (D2)`);
    },
  }),
  defineCheck({
    id: "rejects-forgery-of-any-event",
    section: "§5.3, D2, D3",
    title:
      "A forgery is refused whatever its event and whenever it is stamped: verification comes before deciding that an event is not wanted (one of a name a later version may add, one too old or too far ahead to care for).",
    scenario:
      "delivers each of the eight events, one stamped as long ago as a last retry comes, one 400 days old, one a day ahead, and one of an event name the spec does not have, signed with another secret, each after the same event correctly signed",
    async run(ctx) {
      const ageSeconds = oldestRetrySeconds() + 3600;
      const bodies: Record<string, Buffer> = Object.fromEntries(eventNames.map((event) => [event, Buffer.from(JSON.stringify(buildEnvelope(event)))]));
      for (const [stamp, offsetMs] of [
        [`${Math.round(ageSeconds / 3600)} hours old`, -ageSeconds * 1000],
        ["400 days old", -400 * 86_400_000],
        ["a day ahead", 86_400_000],
      ] as const) {
        bodies[`booking.confirmed, ${stamp}`] = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed", { now: Date.now() + offsetMs })));
      }
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [name, body] of Object.entries(bodies)) {
        await ctx.send(body, signPayload(body, ctx.options.secret));
        outcomes[name] = await ctx.send(body, signedByOther(body), { forgery: true });
      }
      // Without the same event correctly signed first: the service never sends a name the spec does not
      // have, and a receiver may refuse it (the SDK: 400).
      const unknownName = Buffer.from(JSON.stringify({ ...buildEnvelope("lead.updated"), event: "lead.archived" }));
      outcomes["lead.archived, a name the spec does not have"] = await ctx.send(unknownName, signedByOther(unknownName), { forgery: true });
      expectRefused(
        outcomes,
        "forgeries signed with another secret were acknowledged: does the receiver acknowledge an event it does not handle, or one older than it cares for, before verifying it? Verify first, then acknowledge and drop what you do not want (D2, D3)",
      );
    },
  }),
  defineCheck({
    id: "rejects-forgery-of-any-shape",
    section: "§5.3, D1, D2, D4, D14, D16, D18, D20",
    title:
      "A forgery is refused in every form of authentic delivery a receiver must acknowledge (a charset, 64 KiB, a fraction of a second, the shortest and longest ids, unknown members, optional ones left out, the longest texts, a lead not seen, the header's name in any case), and signed bodies that are not events, or not as the service sends them, are not acknowledged unverified.",
    scenario: `delivers a forgery signed with another secret in each form the acknowledges-… checks deliver authentic, each after the same event correctly signed; then, signed with another secret, ${Object.keys(shapesNeverSent()).join(", ")}`,
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [shape, { body, contentType, headerName }] of Object.entries(shapesToAcknowledge())) {
        const how = { ...(contentType ? { contentType } : {}), ...(headerName ? { headerName } : {}) };
        await ctx.send(body, signPayload(body, ctx.options.secret), how);
        outcomes[shape] = await ctx.send(body, signedByOther(body), { forgery: true, ...how });
      }
      // What the service never sends: refused, whether as a forgery or as not an event (D50: 400 after verifying).
      for (const [what, make] of Object.entries(shapesNeverSent())) {
        const body = make();
        outcomes[what] = await ctx.send(body, signedByOther(body), { forgery: true });
      }
      expectRefused(
        outcomes,
        "forgeries signed with another secret were acknowledged: does the receiver skip verifying some deliveries (by their size, content type, timestamp, id, members, or the header name's case), or acknowledge what it cannot read before verifying? Verify every delivery first, whatever its form (D2)",
      );
    },
  }),
  defineCheck({
    id: "rejects-forgery-after-authentic-on-same-connection",
    section: "§5.3, D2, D52",
    title: "A forgery that follows authentic deliveries on the same kept-alive connection is refused: every request is verified, not the connection.",
    scenario:
      "on a connection kept alive, delivers an event correctly signed, then a new event signed with another secret, then one without the signature header, then the first event's bytes again signed with another secret",
    async run(ctx) {
      const authentic = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed")));
      const other = Buffer.from(JSON.stringify(buildEnvelope("message.received")));
      const connection = ctx.connection();
      const outcomes: Record<string, DeliveryOutcome> = {};
      const onIt = (body: Buffer, header: string | null, forgery = true) => ctx.send(body, header, { forgery, connection });
      try {
        expectAnswers({ authentic: await onIt(authentic, signPayload(authentic, ctx.options.secret), false) });
        outcomes["a new event signed with another secret"] = await onIt(other, signedByOther(other));
        outcomes["a new event without the header"] = await onIt(other, null);
        outcomes["the first event again, signed with another secret"] = await onIt(authentic, signedByOther(authentic));
      } finally {
        await connection.destroy();
      }
      expectRefused(
        outcomes,
        "forgeries that came on a connection after an authentic delivery were acknowledged: does the receiver trust a connection once a delivery on it was verified? Deliveries share kept-alive connections (D52); verify each request (D2)",
      );
    },
  }),
  defineCheck({
    id: "rejects-altered-signature",
    section: "§5.3, D2",
    title: "A signature that differs from the right one only in its last digit is refused (all of it is compared).",
    scenario: "delivers a valid event with the last hex digit of its signature changed, after the same event correctly signed",
    async run(ctx) {
      const outcome = await forged(ctx, vector("compact-envelope"), (right) => `${right.slice(0, -1)}${right.endsWith("0") ? "1" : "0"}`);
      expectAnswers({ altered: outcome });
      expectThat(!ok(outcome), "the receiver acknowledged a signature whose last digit is wrong: is only part of it compared?", "a non-2xx status", shown(outcome));
    },
  }),
  defineCheck({
    id: "rejects-reserialized-body-signature",
    section: "§5.3, D2",
    title: "The signature of the re-serialized body, not of the bytes sent, is refused, in each common form of re-serialized JSON.",
    scenario:
      "delivers a body indented by 2 and ending in a newline with the signature of its compact form (JSON.stringify, PHP, Ruby), of its keys sorted (Go), of Python's json.dumps form, sorted or not, indented by 2 without the newline, sorted or not, by 4 with and without a newline, and by a tab, each after the same event correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [form, write] of Object.entries(reserializations)) {
        outcomes[form] = await forged(ctx, vector("reserialized-body-signature"), (_right, body) =>
          signPayload(Buffer.from(write(JSON.parse(body.toString("utf8")))), ctx.options.secret),
        );
      }
      // The body sent is that form with a newline after it: a receiver that trims the body takes its signature.
      const trimmed = ok(outcomes["indented by 2 (json.dumps with indent=2)"]!)
        ? "; the form indented by 2 is the body sent without its final newline: is the body trimmed before verifying?"
        : "";
      expectRefused(
        outcomes,
        `the receiver acknowledged the signature of a re-serialization of the body, not of its bytes: verify the raw bytes only, with no fallback to re-serialized JSON (D2)${trimmed}`,
      );
    },
  }),
  defineCheck({
    id: "rejects-signature-anyone-can-compute",
    section: "§5.3, D2",
    title: "A signature made without the secret is refused: the HMAC keyed with no bytes (an unset second secret) and the body's plain SHA-256, SHA-1, MD5 and SHA-512.",
    scenario: "delivers a valid event with the HMAC-SHA256 of its body keyed with an empty secret, then with the SHA-256, SHA-1, MD5 and SHA-512 of its body, each after the same event correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [name, sign] of Object.entries(keyless)) outcomes[name] = await forged(ctx, vector("compact-envelope"), (_right, body) => sign(body));
      expectRefused(
        outcomes,
        "the receiver acknowledged a signature anyone can compute without the secret: is an empty secret among those it tries (an old one for rotation left unset), or a plain digest accepted? Only the HMAC keyed with the secret's UTF-8 bytes is valid, and an empty secret refuses every delivery (D2, D50)",
      );
    },
  }),
  defineCheck({
    id: "rejects-hmac-of-another-hash",
    section: "§5.3, D2",
    title: "The HMAC of the body keyed with the secret but of another hash than SHA-256 is refused: HMAC-SHA1, HMAC-SHA512, HMAC-SHA384 and HMAC-MD5.",
    scenario: "delivers a valid event with the HMAC-SHA1, HMAC-SHA512, HMAC-SHA384 and HMAC-MD5 of its body keyed with the secret, each after the same event correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [name, sign] of Object.entries(otherHmacs)) outcomes[name] = await forged(ctx, vector("compact-envelope"), (_right, body) => sign(body, ctx.options.secret));
      expectRefused(
        outcomes,
        "the receiver acknowledged an HMAC of another hash than SHA-256: does it try several algorithms, or pick one by the header's length? The header is the HMAC-SHA256 of the body, in 64 lowercase hex digits, and nothing else (D2)",
      );
    },
  }),
  defineCheck({
    id: "rejects-unsigned-request-of-any-form",
    section: "§5.3, D1, D2",
    title:
      "A request without a signature is refused whatever its form: an event sent as text/plain, as a form, with no content type, or by PUT, PATCH or DELETE, an empty body, a body that is not JSON (verification comes before anything else).",
    scenario:
      "sends a valid event without the signature header as text/plain, application/x-www-form-urlencoded and multipart/form-data, with no Content-Type, and by PUT, PATCH and DELETE, each after the same event correctly signed; then an empty body and a body that is not JSON, unsigned",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [form, how] of [
        ["text/plain", { contentType: "text/plain" }],
        ["application/x-www-form-urlencoded", { contentType: "application/x-www-form-urlencoded" }],
        ["multipart/form-data", { contentType: "multipart/form-data; boundary=certify" }],
        ["no Content-Type", { contentType: null }],
        ["PUT", { method: "PUT" }],
        ["PATCH", { method: "PATCH" }],
        ["DELETE", { method: "DELETE" }],
      ] as const) {
        const body = Buffer.from(JSON.stringify(buildEnvelope("lead.created")));
        await ctx.send(body, signPayload(body, ctx.options.secret));
        outcomes[form] = await ctx.send(body, null, { forgery: true, ...how });
      }
      outcomes["an empty body"] = await ctx.send(Buffer.alloc(0), null, { forgery: true });
      outcomes["a body that is not JSON"] = await ctx.send(Buffer.from("ping"), null, { forgery: true });
      expectRefused(
        outcomes,
        "the receiver acknowledged a request without a signature: does it verify only JSON deliveries by POST, or parse the body before verifying? Verify every request before anything else, whatever its method, content type or body (D2)",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-event-after-its-forgery",
    section: "§5.3, D2, D4",
    title: "An authentic event whose id a refused forgery used first is acknowledged: only a verified delivery's id counts as seen.",
    scenario: "delivers a new event signed with another secret, then the same event correctly signed",
    async run(ctx) {
      const body = Buffer.from(JSON.stringify(buildEnvelope("message.received")));
      const forgery = await ctx.send(body, signedByOther(body), { forgery: true });
      const outcome = await ctx.send(body, signPayload(body, ctx.options.secret));
      expectAnswers({ forgery, authentic: outcome });
      expectThat(
        ok(outcome),
        "an authentic event was refused after a forgery with its id: does the receiver remember the ids of deliveries it refused, or record an id before verifying? Only a verified delivery's id counts as seen (D2, D4); otherwise anyone who learns an id can block its event",
        "a 2xx status",
        shown(outcome),
      );
    },
  }),
  defineCheck({
    id: "acknowledges-duplicate-delivery",
    section: "§6, D4",
    title:
      "Every repeat delivery of the same event id is acknowledged, as many as two webhooks registered at one URL make of one event (each its first attempt and every retry): receivers are idempotent.",
    scenario: "delivers the same signed booking.confirmed (same bytes, same id) twice for each attempt a server makes of an event",
    async run(ctx) {
      const body = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed")));
      const header = signPayload(body, ctx.options.secret);
      // Two webhooks may share a URL (D9), and the id is one at every webhook the event goes to (D4).
      const attempts = 2 * (loadDeliveryRules().retryWaitsSeconds.length + 1);
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (let n = 1; n <= attempts; n++) outcomes[`delivery ${n}`] = await ctx.send(body, header);
      expectEachAcknowledged(
        outcomes,
        "a repeat delivery was not acknowledged: a server may deliver one event once for each of its attempts, to each webhook registered at the URL (D4, D7, D9); acknowledge every delivery of an id seen before, however many",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-duplicates-at-once",
    section: "§6, D4, D9",
    title: "Deliveries of one event id that come at once, each on a connection of its own, are each acknowledged: two webhooks registered at one URL are sent each event at the same moment.",
    scenario: "delivers the same signed lead.updated (same bytes, same id) three times at once, on three connections",
    async run(ctx) {
      const body = Buffer.from(JSON.stringify(buildEnvelope("lead.updated")));
      const header = signPayload(body, ctx.options.secret);
      const sent = await Promise.all([1, 2, 3].map(async (n) => [`delivery ${n}`, await ctx.send(body, header)] as const));
      expectEachAcknowledged(
        Object.fromEntries(sent),
        "a delivery of an id that came while another delivery of it was being handled was not acknowledged: answer 2xx to each (D4), at once or once the first is handled; two webhooks at one URL (D9) send the same event at the same moment",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-after-refusal-on-same-connection",
    section: "§6, D52",
    title: "An authentic delivery that follows a refused one on the same kept-alive connection is acknowledged (a refusal leaves the connection usable).",
    scenario:
      "on a connection kept alive, delivers a valid event without the signature header, then a new event correctly signed; again with an empty header, with a malformed one, and with no header and a body of 64 KiB",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [forgery, forged, size] of [
        ["after a missing header", null, 0],
        ["after an empty header", "", 0],
        ["after a malformed header", "z".repeat(64), 0],
        ["after a missing header and 64 KiB", null, 64 * 1024],
      ] as const) {
        // New events each: deduplication is not what is checked here.
        const refused = size ? eventOfSize(size) : Buffer.from(JSON.stringify(buildEnvelope("review.created")));
        const body = Buffer.from(JSON.stringify(buildEnvelope("review.created")));
        const header = signPayload(body, ctx.options.secret);
        const connection = ctx.connection();
        try {
          await ctx.send(refused, forged, { forgery: true, connection });
          outcomes[forgery] = await ctx.send(body, header, { connection });
        } finally {
          await connection.destroy();
        }
      }
      expectAnswers(outcomes);
      const failed = Object.entries(outcomes).filter(([, o]) => !ok(o));
      expectEqual(
        Object.fromEntries(failed.map(([k, o]) => [k, shown(o)])),
        {},
        "after a refused delivery on the same connection, an authentic one was not acknowledged: does the receiver answer before reading the body (all of it), which is then read as the next request? Read (or discard) the whole body before answering, or close the connection",
      );
    },
  }),
  defineCheck({
    id: "answers-within-attempt-timeout",
    section: "§6, D6",
    title: "Every authentic delivery is answered within the attempt timeout.",
    scenario: "times every authentic delivery of the checks run before it, not the forgeries (run alone: one valid delivery of its own)",
    async run(ctx) {
      // With --only this check has nothing to time: a check that cannot fail would certify nothing.
      if (ctx.latencies.length === 0) {
        const { body, header } = signedBodyFor(vector("compact-envelope"), ctx.options.secret, vectors);
        expectAnswers({ delivery: await ctx.send(body, header) });
      }
      const slowest = ctx.latencies.reduce((a, b) => (b.ms > a.ms ? b : a));
      expectThat(slowest.ms <= ctx.timeoutMs, "an answer came after the attempt timeout", `<= ${ctx.timeoutMs} ms`, `${Math.round(slowest.ms)} ms (a delivery of ${slowest.check})`);
    },
  }),
];

/** Why a connection to the receiver failed (before or during the TLS handshake), with what to change. */
function connectionProblem(url: string, error: Error & { code?: string; reason?: string }, handshaking: boolean): string {
  const code = error.code ?? "";
  if (!handshaking) return `cannot connect to ${url} (${code || error.message}): is the receiver running, and is --url its address?`;
  const reason = `${error.reason ?? error.message}${code && !error.message.includes(code) ? ` (${code})` : ""}`;
  if (code === "ERR_SSL_WRONG_VERSION_NUMBER" || code === "ERR_SSL_PACKET_LENGTH_TOO_LONG") {
    return `TLS handshake with ${url} failed: ${reason}: if the receiver serves plain HTTP, use an http:// URL`;
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return `TLS handshake with ${url} failed: ${reason}: use a host name its certificate is for in --url, or --insecure`;
  }
  return `TLS handshake with ${url} failed: ${reason}: pass --ca FILE with the CA that signed the receiver's certificate, or --insecure`;
}

/** A TCP connection, and for https: a TLS handshake with the trust of the run, to the receiver's URL. */
async function preflightConnection(url: string, trust: ReturnType<typeof tlsTrust>, timeoutMs: number): Promise<void> {
  const target = new URL(url);
  const host = target.hostname.replace(/^\[|\]$/g, "");
  const secure = target.protocol === "https:";
  const port = Number(target.port || (secure ? 443 : 80));
  await new Promise<void>((resolve, reject) => {
    let handshaking = false;
    const socket: Socket = secure
      ? connectTls({ host, port, ...(isIP(host) ? {} : { servername: host }), ...trust }, () => done())
      : connectTcp({ host, port }, () => done());
    socket.once("connect", () => (handshaking = secure));
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      reject(new SetupError(`no ${handshaking ? "TLS handshake" : "connection"} with ${url} within ${timeoutMs / 1000} s: is the receiver running, and is --url its address?`));
    });
    socket.once("error", (error) => reject(new SetupError(connectionProblem(url, error, handshaking))));
    function done() {
      socket.destroy();
      resolve();
    }
  });
}

export async function certifyReceiver(options: ReceiverSuiteOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const timeoutMs = options.timeoutMs ?? loadDeliveryRules().attemptTimeoutSeconds * 1000;
  const trust = tlsTrust(options.tls ?? {});
  // One line when the receiver cannot be reached or its certificate is not trusted, before any check.
  await preflightConnection(options.url, trust, timeoutMs);
  const latencies: ReceiverContext["latencies"] = [];
  /** The check under way, that the timeout check names the slowest delivery's. */
  let current = "";
  /** The statuses of the authentic deliveries, to tell a wrong --url from a receiver's verdicts. */
  const authenticStatuses: (number | undefined)[] = [];
  const ctx: ReceiverContext = {
    options,
    timeoutMs,
    latencies,
    connection: () => connectionTo(options.url, trust),
    async send(body, header, { forgery = false, connection, headerName, method, contentType } = {}) {
      // Wait twice the timeout, so that a slow answer fails only the timeout check.
      const on = (dispatcher: Dispatcher) =>
        deliver(options.url, body, {
          secret: options.secret,
          timeoutMs: timeoutMs * 2,
          dispatcher,
          header,
          ...(headerName ? { headerName } : {}),
          ...(method ? { method } : {}),
          ...(contentType !== undefined ? { contentType } : {}),
        });
      let outcome = connection ? await on(connection) : undefined;
      if (outcome?.status === undefined) {
        const own = ctx.connection();
        try {
          outcome = await on(own);
        } finally {
          await own.destroy();
        }
      }
      if (!forgery) {
        latencies.push({ ms: outcome.latencyMs, check: current });
        authenticStatuses.push(outcome.status);
      }
      return outcome;
    },
  };
  const followed = receiverChecks.map((check): Check<ReceiverContext> => ({
    ...check,
    run(c, extra) {
      current = check.id;
      return check.run(c, extra);
    },
  }));
  const report = await runChecks("receiver", options.url, followed, ctx, run);
  // Every authentic delivery answered one 404, 405 or redirect: not the receiver's verdicts but a wrong
  // path, and every refusal check passed for the wrong reason (a 404 is no 2xx). No report, one line.
  const [first] = authenticStatuses;
  if (first !== undefined && (first === 404 || first === 405 || (first >= 300 && first < 400)) && authenticStatuses.every((s) => s === first)) {
    throw new SetupError(`every authentic delivery to ${options.url} was answered ${first}: is --url the path the receiver takes webhooks on (its scheme, host, port and path)?`);
  }
  const caveats: string[] = [];
  if (options.tls?.insecure && new URL(options.url).protocol === "https:") {
    caveats.push("the receiver's certificate was not verified (--insecure); the service verifies it (D6), so with a certificate it does not trust every real delivery fails");
  }
  // Every encoding of an ASCII secret is its UTF-8 bytes: keying the HMAC with its Latin-1 bytes passes.
  if (/^[\x00-\x7f]*$/.test(options.secret)) {
    caveats.push("the secret is ASCII, so the key's encoding was not checked (D2: the UTF-8 bytes of the secret); certify once with a secret that holds a character outside ASCII, such as é");
  }
  // A receiver that trims its secret passes with one that has nothing to trim.
  if (!/^\s|\s$/.test(options.secret)) {
    caveats.push("the secret has no space at either end, so a secret trimmed by the receiver was not caught (D2: every code point of it); certify once with a secret with a space at each end");
  }
  if (caveats.length > 0) report.caveat = caveats.join("; ");
  return report;
}

/** Certifies a node:http-style handler in process, for a partner's own test runner. */
export async function certifyHandler(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  options: Omit<ReceiverSuiteOptions, "url">,
  run: RunOptions = {},
): Promise<SuiteReport> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    return await certifyReceiver({ ...options, url: `http://127.0.0.1:${port}/` }, run);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
