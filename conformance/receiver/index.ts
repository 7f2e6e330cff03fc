// Certification of a partner's webhook receiver: the suite plays the service, delivering exactly as a
// conforming server does (src/sender.ts), and checks what the receiver acknowledges and refuses.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect as connectTcp, isIP, type AddressInfo, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import type { Dispatcher } from "undici";
import { buildEnvelope, connectionTo, deliver, tlsTrust, type DeliveryOutcome } from "../../src/sender.js";
import { signPayload, eventNames, loadDeliveryRules } from "@partner-platform/sdk";
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
  /** Latency of every authentic delivery made, for the timeout check. */
  latencies: number[];
  /**
   * Delivers `body` on a connection of its own, so that what an earlier delivery left on a connection
   * cannot decide this one's verdict, or on `connection`, kept alive across deliveries as a server's are
   * (D52). A forgery is not timed: the service never sends one (D6 is its attempts' timeout).
   */
  send(body: Buffer, header: string | null, how?: { forgery?: boolean; connection?: Dispatcher; headerName?: string }): Promise<DeliveryOutcome>;
  /** A connection to the receiver that stays open across deliveries until closed. */
  connection(): Dispatcher;
}

const otherSecret = "whsec-certification-other-secret";

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
      return signPayload(body, otherSecret);
    case "reserialized-body-signature":
      return signPayload(Buffer.from(reserializations.compact!(JSON.parse(body.toString("utf8")))), secret);
    case "truncated-header":
      return good.slice(0, 63);
    case "extended-header":
      return `${good}0`;
    case "signature-list":
      return `${signPayload(body, otherSecret)},${good}`;
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
    throw new CheckFailed("deliveries got no HTTP answer (a connection, TLS or timeout failure)", "an HTTP answer to each delivery", unanswered);
  }
}

/**
 * A forgery, after the authentic delivery of the same event (its id; the tampered body's original): a
 * receiver verifies before anything else, deduplication included (D2), so that a forgery is refused
 * whether or not its id was seen, and a verdict does not depend on which checks ran before.
 */
async function forged(ctx: ReceiverContext, v: SigningVector, header?: (right: string, body: Buffer) => string): Promise<DeliveryOutcome> {
  const original = v.id === "tampered-byte" ? vector("compact-envelope") : v;
  const authentic = stamped(original.body);
  await ctx.send(authentic, signPayload(authentic, ctx.options.secret));
  const forgery = signedBodyFor(v, ctx.options.secret, vectors);
  return ctx.send(forgery.body, header ? header(forgery.header!, forgery.body) : forgery.header, { forgery: true });
}

/**
 * JSON written again from the parsed body, as common libraries write it (strings and key order kept,
 * ASCII bodies only): compact (JSON.stringify, PHP's json_encode, Ruby's JSON.generate), with its keys
 * sorted (Go's encoding/json for a map), and spaced (Python's json.dumps).
 */
export const reserializations: Record<string, (value: unknown) => string> = {
  compact: (value) => JSON.stringify(value),
  "sorted keys": function sorted(value): string {
    if (Array.isArray(value)) return `[${value.map(sorted).join(",")}]`;
    if (value === null || typeof value !== "object") return JSON.stringify(value);
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${sorted(v)}`).join(",")}}`;
  },
  "spaced (Python's json.dumps)": function spaced(value): string {
    if (Array.isArray(value)) return `[${value.map(spaced).join(", ")}]`;
    if (value === null || typeof value !== "object") return JSON.stringify(value);
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${spaced(v)}`)
      .join(", ")}}`;
  },
};

const acknowledgedForgery = (v: SigningVector) =>
  `the receiver acknowledged a delivery it must refuse (${v.id}: ${v.description}); it came right after the same event correctly signed, so deduplicating by id before verifying also acknowledges it (D2: verify first)`;

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

/** Forgeries that were acknowledged, each by name: none may be. */
function expectRefused(outcomes: Record<string, DeliveryOutcome>, message: string): void {
  expectAnswers(outcomes);
  const acknowledged = Object.entries(outcomes).filter(([, o]) => ok(o));
  expectEqual(Object.fromEntries(acknowledged.map(([k, o]) => [k, shown(o)])), {}, message);
}

/**
 * Refused authentic deliveries, with the likeliest cause: every one refused alike points at the secret or
 * the header's lookup; a 400 or 422 at validating the body; otherwise, at what differs between them.
 */
function expectAcknowledged(outcomes: Record<string, DeliveryOutcome>, someRefused: string): void {
  expectAnswers(outcomes);
  const refused = Object.entries(outcomes).filter(([, o]) => !ok(o));
  const all = refused.length === Object.keys(outcomes).length && refused.length > 1;
  const invalid = refused.length > 0 && refused.every(([, o]) => o.status === 400 || o.status === 422);
  expectEqual(
    Object.fromEntries(refused.map(([k, o]) => [k, shown(o)])),
    {},
    invalid
      ? "correctly signed deliveries were refused with 400 or 422: is the body validated more strictly than its event's JSON Schema? Receivers ignore members they do not know (a later version adds some, D16, D60) and take 5.0 as 5; a receiver acknowledges every authentic event (D3)"
      : all
        ? "every authentic delivery was refused: is the secret the one given to the suite (--secret; its UTF-8 bytes, not base64-decoded), and is the header looked up by a case-insensitive name (the suite sends x-service-signature)?"
        : someRefused,
  );
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

export const receiverChecks: Check<ReceiverContext>[] = [
  defineCheck({
    id: "acknowledges-every-event",
    section: "§6, §5.3",
    title: "Each of the eight events, correctly signed, is acknowledged with a 2xx.",
    scenario: "delivers each of the eight events, built from the spec's examples and signed with the secret",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const event of eventNames) {
        const body = Buffer.from(JSON.stringify(buildEnvelope(event)));
        outcomes[event] = await ctx.send(body, signPayload(body, ctx.options.secret));
      }
      expectAcknowledged(outcomes, "some correctly signed events were not acknowledged: a receiver acknowledges every authentic delivery, also of an event it does not handle (D3)");
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
        "valid deliveries were refused: each was signed over its exact bytes and stamped now, and a receiver acknowledges every authentic delivery, whatever its event or business (D3, D8): is the signature checked on re-serialized JSON?",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-old-event",
    section: "§6, D3",
    title: "An authentic event stamped as long ago as a last retry comes (over 26 hours) is acknowledged: an old event may be dropped, never refused.",
    scenario: "delivers a correctly signed event whose envelope timestamp is the retry schedule's total plus an hour old",
    async run(ctx) {
      const ageSeconds = oldestRetrySeconds() + 3600;
      // An event of its own: a receiver may acknowledge an id it has seen without looking further.
      const body = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed", { now: Date.now() - ageSeconds * 1000 })));
      const outcome = await ctx.send(body, signPayload(body, ctx.options.secret));
      expectAnswers({ old: outcome });
      expectThat(
        ok(outcome),
        `an authentic event ${Math.round(ageSeconds / 3600)} hours old was refused: a refusal is a failed attempt, retried with the same timestamp, and five in a row disable the webhook; acknowledge (2xx) an event older than you care for, and drop it (D3)`,
        "a 2xx status",
        shown(outcome),
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
        const body = Buffer.from(JSON.stringify(buildEnvelope("review.created")));
        outcomes[spelling] = await ctx.send(body, signPayload(body, ctx.options.secret), { headerName: spelling });
      }
      expectAcknowledged(outcomes, "a correctly signed delivery was refused for the case of its header's name: look the header up case-insensitively (RFC 9110 §5.1), as every HTTP framework's header API does");
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
      expectThat(ok(outcome), "a correctly signed delivery of 64 KiB was refused: accept bodies up to 64 KiB (D18)", "a 2xx status", shown(outcome));
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
    title: "A comma-separated list of signatures, the right one among them, is refused (the header holds one signature), whichever comes first.",
    scenario:
      "delivers a valid event with another secret's signature, a comma and the right signature in its header, then with the right one first, each after the same event correctly signed",
    async run(ctx) {
      const outcomes = {
        "other first": await forged(ctx, vector("signature-list")),
        "right first": await forged(ctx, vector("compact-envelope"), (right, body) => `${right},${signPayload(body, otherSecret)}`),
      };
      expectRefused(outcomes, `${acknowledgedForgery(vector("signature-list"))}; is the header split at commas, and one of its parts compared?`);
    },
  }),
  refusal("rejects-prefixed-signature", "sha256-prefixed", "§5.3, D2", "The right signature behind a sha256= prefix is refused.", "delivers a valid event with sha256= before its signature"),
  defineCheck({
    id: "rejects-forgery-of-any-event",
    section: "§5.3, D2, D3",
    title: "A forgery is refused whatever its event and however old its timestamp: verification comes before deciding that an event is not wanted.",
    scenario:
      "delivers each of the eight events, and one stamped as long ago as a last retry comes, signed with another secret, each after the same event correctly signed",
    async run(ctx) {
      const ageSeconds = oldestRetrySeconds() + 3600;
      const bodies: Record<string, Buffer> = Object.fromEntries(eventNames.map((event) => [event, Buffer.from(JSON.stringify(buildEnvelope(event)))]));
      bodies[`booking.confirmed, ${Math.round(ageSeconds / 3600)} hours old`] = Buffer.from(
        JSON.stringify(buildEnvelope("booking.confirmed", { now: Date.now() - ageSeconds * 1000 })),
      );
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [name, body] of Object.entries(bodies)) {
        await ctx.send(body, signPayload(body, ctx.options.secret));
        outcomes[name] = await ctx.send(body, signPayload(body, otherSecret), { forgery: true });
      }
      expectRefused(
        outcomes,
        "forgeries signed with another secret were acknowledged: does the receiver acknowledge an event it does not handle, or one older than it cares for, before verifying it? Verify first, then acknowledge and drop what you do not want (D2, D3)",
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
      "delivers a pretty-printed body with the signature of its compact form (JSON.stringify, PHP, Ruby), of its keys sorted (Go), and of Python's json.dumps form, each after the same event correctly signed",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [form, write] of Object.entries(reserializations)) {
        outcomes[form] = await forged(ctx, vector("reserialized-body-signature"), (_right, body) =>
          signPayload(Buffer.from(write(JSON.parse(body.toString("utf8")))), ctx.options.secret),
        );
      }
      expectRefused(
        outcomes,
        "the receiver acknowledged the signature of a re-serialization of the body, not of its bytes: verify the raw bytes only, with no fallback to re-serialized JSON (D2)",
      );
    },
  }),
  defineCheck({
    id: "acknowledges-duplicate-delivery",
    section: "§6, D4",
    title: "A second delivery of the same event id is acknowledged (receivers are idempotent).",
    scenario: "delivers the same signed booking.confirmed (same bytes, same id) twice",
    async run(ctx) {
      const body = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed")));
      const header = signPayload(body, ctx.options.secret);
      const outcomes = [await ctx.send(body, header), await ctx.send(body, header)];
      expectAnswers({ first: outcomes[0]!, second: outcomes[1]! });
      expectThat(outcomes.every(ok), "a duplicate delivery was not acknowledged", "2xx, 2xx", outcomes.map(shown));
    },
  }),
  defineCheck({
    id: "acknowledges-after-refusal-on-same-connection",
    section: "§6, D52",
    title: "An authentic delivery that follows a refused one on the same kept-alive connection is acknowledged (a refusal leaves the connection usable).",
    scenario: "on a connection kept alive, delivers a valid event without the signature header, then a new event correctly signed; again with an empty header",
    async run(ctx) {
      const outcomes: Record<string, DeliveryOutcome> = {};
      for (const [forgery, forged] of [["after a missing header", null], ["after an empty header", ""]] as const) {
        // New events: a receiver may refuse an id it has seen refused; deduplication is not what is checked here.
        const refused = Buffer.from(JSON.stringify(buildEnvelope("review.created")));
        const body = Buffer.from(JSON.stringify(buildEnvelope("review.created")));
        const header = signPayload(body, ctx.options.secret);
        const connection = ctx.connection();
        try {
          await ctx.send(refused, forged, { forgery: true, connection });
          outcomes[forgery] = await ctx.send(body, header, { connection });
        } finally {
          await connection.destroy();
        }
        // A receiver may close a connection after any answer, and a delivery can find it closing: that
        // delivery is made again on a connection of its own. An HTTP answer is the receiver's verdict.
        if (outcomes[forgery].status === undefined) outcomes[forgery] = await ctx.send(body, header);
      }
      expectAnswers(outcomes);
      const failed = Object.entries(outcomes).filter(([, o]) => !ok(o));
      expectEqual(
        Object.fromEntries(failed.map(([k, o]) => [k, shown(o)])),
        {},
        "after a refused delivery on the same connection, an authentic one was not acknowledged: does the receiver answer before reading the body, which is then read as the next request? Read (or discard) the whole body before answering, or close the connection",
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
      const slowest = Math.max(0, ...ctx.latencies);
      expectThat(slowest <= ctx.timeoutMs, "an answer came after the attempt timeout", `<= ${ctx.timeoutMs} ms`, `${Math.round(slowest)} ms`);
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
  const latencies: number[] = [];
  const ctx: ReceiverContext = {
    options,
    timeoutMs,
    latencies,
    connection: () => connectionTo(options.url, trust),
    async send(body, header, { forgery = false, connection, headerName } = {}) {
      const dispatcher = connection ?? ctx.connection();
      try {
        // Wait twice the timeout, so that a slow answer fails only the timeout check.
        const outcome = await deliver(options.url, body, { secret: options.secret, timeoutMs: timeoutMs * 2, dispatcher, header, ...(headerName ? { headerName } : {}) });
        if (!forgery) latencies.push(outcome.latencyMs);
        return outcome;
      } finally {
        if (!connection) await dispatcher.destroy();
      }
    },
  };
  const report = await runChecks("receiver", options.url, receiverChecks, ctx, run);
  if (options.tls?.insecure && new URL(options.url).protocol === "https:") {
    report.caveat =
      "the receiver's certificate was not verified (--insecure); the service verifies it (D6), so with a certificate it does not trust every real delivery fails";
  }
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
