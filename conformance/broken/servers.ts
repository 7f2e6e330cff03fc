// The catalogue of broken servers: the reference server with exactly one fault each, put in through
// its seams (a replaced delivery part, registration check, or delivery number; never a branch in the
// product). The certification suite must catch every one with exactly the checks listed for it in
// conformance/broken/server-expected-failures.json.
import { createHmac } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { BlockList, isIP } from "node:net";
import https from "node:https";
import MailComposer from "nodemailer/lib/mail-composer/index.js";
import { checkServerIdentity, connect as tlsConnect, rootCertificates } from "node:tls";
import { Agent, interceptors, type buildConnector } from "undici";
import { eventNames, newEventId, signPayload, type DeliveryRules, type EventName } from "@partner-platform/sdk";
import { seed, type RegistrationOverride } from "../../src/server/app.js";
import type { Db } from "../../src/server/store.js";
import { defaultParts, type DeliveryParts, type DisableMail, type Outcome, type PartsContext, type PartsOverride, type Recorded, type SendResult } from "../../src/server/delivery/index.js";
import { composeDisableMail } from "../../src/server/delivery/mail.js";
import type { FieldError } from "../../src/server/contract.js";
import { hostOf, urlFormProblem } from "../../src/server/ssrf.js";
import type { ClockSetting } from "../server/clock.js";
import { sharedEventExample } from "../../src/spec.js";
import { dataSchemaOf } from "../receiver/index.js";
import { faultyRecorder } from "./recorder.js";
import { loadConfig } from "../../src/server/index.js";

export interface BrokenServer {
  id: string;
  parts?: PartsOverride;
  registration?: RegistrationOverride;
  rules?: (rules: DeliveryRules) => DeliveryRules;
  /** Real ms it gives an unanswered attempt under a virtual clock (the reference server's delivery number; default 1000). */
  virtualAttemptTimeoutMs?: number;
  /** Real ms a batch of outcomes waits for more attempts to end (the reference server's delivery number; default 30). */
  recordLingerMs?: number;
  /** The clock it is certified with, where its fault shows only in real time (default: virtual). */
  clock?: ClockSetting;
}

type Envelope = { id: string; event: string; timestamp: string; data: Record<string, unknown> };

/** Replaces the envelope's body (the stored id stays unique: events are keyed by it); legal timings use it too. */
export const envelopeBody =
  (change: (envelope: Envelope) => Envelope): PartsOverride =>
  (base) => ({
    envelope(name, data, at) {
      const made = base.envelope(name, data, at);
      return { id: made.id, body: JSON.stringify(change(JSON.parse(made.body) as Envelope)) };
    },
  });

/** Text as an HTML template engine writes it by default. */
const htmlEscaped = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Replaces the customer of every lead.created. */
const leadCustomer = (change: (customer: { name: string; phone: string }) => object): PartsOverride =>
  envelopeBody((e) => (e.event === "lead.created" ? { ...e, data: { ...e.data, customer: change(e.data.customer as { name: string; phone: string }) } } : e));

/** Replaces the job location of every lead.created. */
const leadLocation = (change: (location: { city: string; state: string; zip: string }, businessID: string) => object): PartsOverride =>
  envelopeBody((e) => {
    if (e.event !== "lead.created") return e;
    const request = e.data.request as { location: { city: string; state: string; zip: string } };
    return { ...e, data: { ...e.data, request: { ...request, location: change(request.location, String(e.data.businessID)) } } };
  });

/**
 * An attempt made with node:https instead of undici: as it is (a legal server, test/conformance/server.test.ts),
 * or with Expect: 100-continue, taking an interim (1xx) answer for the final one, reading only the status
 * line, with a chunked body, with the whole URL as its request-target (as to a proxy), or through a pool
 * of a few connections per origin that a request waits for inside its attempt's deadline (or, legal, with
 * its own timeout started when it gets its connection: D6, the wait comes before the attempt).
 */
export function sendWithNodeHttps(
  ctx: PartsContext,
  how: {
    expectContinue?: boolean;
    interimIsFinal?: boolean;
    absoluteForm?: boolean;
    statusIsEnough?: boolean;
    chunked?: boolean;
    connectionsPerOrigin?: number;
    timeoutFromConnection?: boolean;
  },
): DeliveryParts["send"] {
  const ca = [...rootCertificates, ...(ctx.webhookCa ? [ctx.webhookCa] : [])];
  const agent = how.connectionsPerOrigin ? new https.Agent({ keepAlive: true, maxSockets: how.connectionsPerOrigin, ca }) : undefined;
  return (url, body, signature, signal) =>
    new Promise<SendResult>((resolve, reject) => {
      const request = https.request(url, {
        method: ctx.rules.method,
        ...(how.absoluteForm ? { path: url } : {}),
        ...(agent ? { agent } : { ca }),
        headers: {
          "content-type": ctx.rules.contentType,
          [ctx.rules.signatureHeader.toLowerCase()]: signature,
          ...(how.chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(body.length) }),
          ...(how.expectContinue ? { expect: "100-continue" } : {}),
        },
      });
      // The engine's deadline starts before the pool's queue; timed from the connection, only a stop is taken from it.
      let timedOut = false;
      if (how.timeoutFromConnection) {
        signal.onabort = () => (signal.timedOut ? undefined : request.destroy(signal.reason));
        request.once("socket", () => {
          const timer = setTimeout(() => ((timedOut = true), request.destroy(new Error("attempt timeout"))), ctx.attemptTimeoutRealMs);
          request.once("close", () => clearTimeout(timer));
        });
      } else signal.onabort = () => request.destroy(signal.reason);
      if (how.expectContinue) request.on("continue", () => request.end(body));
      else request.end(body);
      // The outcome read off the status line, as a client that hands back the head before the body gives it; the body is never waited for.
      if (how.statusIsEnough) request.on("response", (response) => (resolve({ status: response.statusCode ?? 0, timedOut: false }), response.destroy()));
      // Below 300, so a success to the check it feeds; the connection, with the real answer unread, is dropped.
      if (how.interimIsFinal) request.on("information", () => (resolve({ status: 200, timedOut: false }), request.destroy()));
      request.on("response", (response) => response.resume().on("end", () => resolve({ status: response.statusCode ?? 0, timedOut: false })));
      request.on("error", (error) => {
        if (signal.aborted && !signal.timedOut) reject(error);
        else if (how.timeoutFromConnection ? timedOut : signal.timedOut) resolve({ error: "no complete answer within the attempt timeout", timedOut: true });
        else resolve({ error: error.message, timedOut: false });
      });
    });
}

/** Drops the registration errors a predicate picks: the rule they enforce is not checked. */
const ignoresErrors =
  (ignored: (e: FieldError) => boolean): RegistrationOverride =>
  (base) => ({ errors: (body) => base.errors(body).filter((e) => !ignored(e)) });

/** Checks a registration with one member rewritten first: the rule the rewritten value breaks is not checked. */
const checksRewritten =
  (member: string, rewrite: (value: unknown) => unknown): RegistrationOverride =>
  (base) => ({
    errors: (body) =>
      base.errors(typeof body === "object" && body !== null && member in body ? { ...body, [member]: rewrite((body as Record<string, unknown>)[member]) } : body),
  });

/** Sends every disable notice changed: the rule the change breaks is D26's. */
const rewritesNotice =
  (change: (mail: DisableMail) => DisableMail): PartsOverride =>
  (base) => ({ sendMail: (mail) => base.sendMail(change(mail)) });

/** A missing member (required errors point at the member itself). */
const isRequired = (e: FieldError) => /required property/.test(e.detail);

/**
 * Stores events and queues their first attempts with another selection of webhooks `w` for each event
 * `e` (D8), in one statement.
 */
const queuesFor =
  (where: string): PartsOverride =>
  () => ({
    async queue(tx, events) {
      const { rows } = await tx.query<{ n: number }>(
        `WITH e AS (
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) WITH ORDINALITY AS e(id, name, business_id, body, at, i)),
         stored AS (
           INSERT INTO events (id, name, business_id, body, created_at) SELECT id, name, business_id, body, at FROM e),
         queued AS (
           INSERT INTO attempts (event_id, webhook_id, attempt, due_at)
           SELECT e.id, w.id, 1, e.at FROM e JOIN webhooks w ON ${where} RETURNING event_id)
         SELECT (SELECT count(*)::int FROM queued q WHERE q.event_id = e.id) AS n FROM e ORDER BY e.i`,
        [events.map((e) => e.id), events.map((e) => e.name), events.map((e) => e.businessId), events.map((e) => e.body), events.map((e) => e.at)],
      );
      return rows.map((r) => r.n);
    },
  });

/** The contact address of the reference configuration's first or second client. */
const contactOf = (i: 0 | 1) => loadConfig().clients[i]!.contactEmail;

/** Takes a failed answer's Retry-After (delta-seconds, on its clock) for the wait before its retry, instead of the schedule's. */
const honoursRetryAfter: PartsOverride = (base, ctx) => {
  // The bytes an attempt sends are its own Buffer from signing to sending: they name the attempt.
  const attemptOf = new WeakMap<object, string>();
  const retryAfter = new Map<string, number>();
  const dispatcher = ctx.dispatcher.compose((dispatch) => (opts, handler) => {
    const id = typeof opts.body === "object" && opts.body !== null ? attemptOf.get(opts.body) : undefined;
    return dispatch(opts, {
      onRequestStart: (c, context) => handler.onRequestStart?.(c, context),
      onResponseStart(c, status, headers, message) {
        const seconds = Number(headers["retry-after"] ?? NaN);
        if (id !== undefined && Number.isInteger(seconds)) retryAfter.set(id, seconds);
        handler.onResponseStart?.(c, status, headers, message);
      },
      onResponseData: (c, chunk) => handler.onResponseData?.(c, chunk),
      onResponseEnd: (c, trailers) => handler.onResponseEnd?.(c, trailers),
      onResponseError: (c, error) => handler.onResponseError?.(c, error),
    });
  });
  return {
    async sign(a) {
      const signed = await base.sign(a);
      attemptOf.set(signed.body, a.id);
      return signed;
    },
    send: defaultParts({ ...ctx, dispatcher }).send,
    record(batch) {
      const waits = batch.map((o) => retryAfter.get(o.attemptId));
      batch.forEach((o) => retryAfter.delete(o.attemptId));
      return base.record(batch.map((o, i) => (waits[i] === undefined || o.retryAt === undefined ? o : { ...o, retryAt: o.endedAt + waits[i]! * 1000 })));
    },
  };
};

/** The address check D22 had before it became an allowlist: seven IPv4 and four IPv6 ranges (loopback allowed, as while certifying). */
function oldDenylist(url: string): string | undefined {
  const denied = new BlockList();
  for (const [net, bits] of [["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["169.254.0.0", 16], ["172.16.0.0", 12], ["192.168.0.0", 16]] as const) {
    denied.addSubnet(net, bits, "ipv4");
  }
  for (const [net, bits] of [["::", 128], ["fc00::", 7], ["fe80::", 10]] as const) denied.addSubnet(net, bits, "ipv6");
  const host = hostOf(url);
  const plain = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(host)?.[1] ?? host;
  const family = isIP(plain);
  return family && denied.check(plain, family === 6 ? "ipv6" : "ipv4") ? `the host ${host} is private` : undefined;
}

/** An outcome of an attempt that got no complete answer (the reference's `send` says so in its error). */
/**
 * The notice queued one failure early, when the count reaches threshold - 1: sent for a webhook that a
 * success then keeps enabled, and before the failure that disables the others (the disabling's own
 * insert then finds it queued).
 */
const queuesNoticeAFailureEarly: PartsOverride = (base, ctx) => ({
  async record(outcomes) {
    const recorded = await base.record(outcomes);
    const failed = outcomes.filter((o) => !o.ok && !o.cancelled).map((o) => o.webhookId);
    await ctx.db.query(
      `INSERT INTO notifications (webhook_id, client_id, created_at)
       SELECT id, client_id, $2 FROM webhooks WHERE id = ANY($1::text[]) AND status = 'enabled' AND consecutive_failures = $3
       ON CONFLICT DO NOTHING`,
      [failed, ctx.clock.now(), ctx.rules.disableAfterConsecutiveFailures - 1],
    );
    return recorded;
  },
});

/** Each disable notice, then another with a new Message-ID (`tag` in it) `delayMs` later, or at once. */
const sendsASecondNotice =
  (tag: string, delayMs: number): PartsOverride =>
  (base) => ({
    async sendMail(mail) {
      await base.sendMail(mail);
      const again = { ...mail, headers: { ...mail.headers, "Message-ID": (mail.headers?.["Message-ID"] ?? "<disabled@partner-platform.example>").replace("@", `-${tag}@`) } };
      if (delayMs === 0) return base.sendMail(again);
      setTimeout(() => void base.sendMail(again).catch(() => undefined), delayMs).unref();
    },
  });

const timedOut = (o: Outcome) => /within the attempt timeout/.test(o.error ?? "");

let fixedId: string | undefined;

/** A row of a broken expiry pass: the expired lead, and its status before. */
interface ExpiredLeadRow {
  id: string;
  business_id: string;
  previous_status: string;
  created_at: string;
  expires_at: string;
}

/** An expired lead as expireLeads returns it. lead.expired's schema takes new or responded: a lead expired from another status says responded. */
const expiredLeadOf = (r: ExpiredLeadRow) => ({ id: r.id, businessId: r.business_id, previousStatus: r.previous_status === "new" ? "new" : "responded", createdAt: Number(r.created_at), expiresAt: Number(r.expires_at) });

/** Lead expiry (D19) over leads of these statuses: the reference's lets only new and responded expire. */
function expiringStatuses(statuses: string[]): PartsOverride {
  return () => ({
    async expireLeads(tx, now) {
      const { rows } = await tx.query<ExpiredLeadRow>(
        `UPDATE leads SET status = 'expired' FROM (
           SELECT id, status FROM leads WHERE expires_at <= $1 AND status = ANY($2::text[]) FOR UPDATE) AS previous
         WHERE leads.id = previous.id
         RETURNING leads.id, leads.business_id, previous.status AS previous_status, leads.created_at, leads.expires_at`,
        [now, statuses],
      );
      return rows.map(expiredLeadOf);
    },
  });
}

/** Records a batch of outcomes in the order `compare` sorts them in (by their places, where it takes them), and answers in the order given. */
async function recordedInAnotherOrder(base: DeliveryParts, batch: Outcome[], compare: (a: Outcome, b: Outcome, placeOfA: number, placeOfB: number) => number): Promise<Recorded[]> {
  const order = batch.map((_, i) => i).sort((a, b) => compare(batch[a]!, batch[b]!, a, b));
  const recorded = await base.record(order.map((i) => batch[i]!));
  const results = new Array<Recorded>(batch.length);
  order.forEach((i, k) => (results[i] = recorded[k]!));
  return results;
}

export const brokenServers: BrokenServer[] = [
  // -- Signing and envelope --------------------------------------------------------------------
  {
    id: "signs-reserialized-body",
    parts: () => ({
      async sign(a) {
        const pretty = JSON.stringify(JSON.parse(a.body), null, 2);
        return { body: Buffer.from(pretty), signature: createHmac("sha256", a.secret).update(JSON.stringify(JSON.parse(pretty))).digest("hex") };
      },
    }),
  },
  {
    id: "uppercase-hex-signature",
    parts: (base) => ({
      async sign(a) {
        const signed = await base.sign(a);
        return { ...signed, signature: signed.signature.toUpperCase() };
      },
    }),
  },
  {
    // Sends the stored bytes but signs them as Go's encoding/json writes them (<, > and & escaped): the
    // same bytes as long as no text has those characters.
    id: "signs-html-escaped-json",
    parts: (base) => ({
      async sign(a) {
        const escaped = a.body.replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
        const signed = await base.sign({ ...a, body: escaped });
        return { body: Buffer.from(a.body), signature: signed.signature };
      },
    }),
  },
  // Keys the HMAC with the secret's first 32 characters (a fixed-size column, a key-length habit).
  // The body's bytes in Latin-1 (windows-1252 writes é alike; a character it lacks becomes "?"), signed
  // over those bytes: D1 makes it UTF-8, and a receiver reading UTF-8 would find U+FFFD where é was.
  {
    id: "sends-latin-1-bodies",
    parts: (base) => ({
      async sign(a) {
        const { body } = await base.sign(a);
        const latin1 = Buffer.from(body.toString("utf8").replace(/[^\u0000-\u00ff]/gu, "?"), "latin1");
        return { body: latin1, signature: signPayload(latin1, a.secret) };
      },
    }),
  },
  // A byte order mark before the JSON, signed with it: RFC 8259 §8.1 forbids a sender to write one, and
  // many receivers' parsers (Python's json.loads of the bytes, Go's encoding/json) fail on it.
  {
    id: "writes-a-byte-order-mark",
    parts: (base) => ({
      async sign(a) {
        const { body } = await base.sign(a);
        const marked = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
        return { body: marked, signature: signPayload(marked, a.secret) };
      },
    }),
  },
  // Keyed with the secret's Latin-1 bytes (é is one byte there, ✓ loses its high byte), not its UTF-8 bytes (D2).
  {
    id: "keys-signatures-with-latin-1-secret",
    parts: (base) => ({
      async sign(a) {
        const { body } = await base.sign(a);
        return { body, signature: createHmac("sha256", Buffer.from(a.secret, "latin1")).update(body).digest("hex") };
      },
    }),
  },
  // The secret taken as text to tidy: trimmed (a form's or a model's whitespace stripping), or NFC-normalized.
  { id: "keys-signatures-with-trimmed-secret", parts: (base) => ({ sign: (a) => base.sign({ ...a, secret: a.secret.trim() }) }) },
  { id: "keys-signatures-with-nfc-secret", parts: (base) => ({ sign: (a) => base.sign({ ...a, secret: a.secret.normalize("NFC") }) }) },
  { id: "signs-with-first-32-characters-of-secret", parts: (base) => ({ sign: (a) => base.sign({ ...a, secret: a.secret.slice(0, 32) }) }) },
  {
    id: "signs-with-another-webhooks-secret",
    parts: (base, ctx) => ({
      async sign(a) {
        const { rows } = await ctx.db.query<{ secret: string }>("SELECT secret FROM webhooks WHERE id <> $1 ORDER BY id LIMIT 1", [a.webhookId]);
        return base.sign({ ...a, secret: rows[0]?.secret ?? `${a.secret}-other` });
      },
    }),
  },
  {
    id: "new-event-id-per-retry",
    parts: (base) => ({
      sign: (a) => base.sign(a.attempt > 1 ? { ...a, body: JSON.stringify({ ...(JSON.parse(a.body) as object), id: newEventId() }) } : a),
    }),
  },
  // lead.* envelopes made for each webhook (a loop over the webhooks around the envelope), each with an
  // id of its own, kept across retries.
  {
    id: "lead-event-id-per-webhook",
    parts: (base) => {
      const ids = new Map<string, string>();
      return {
        sign(a) {
          const envelope = JSON.parse(a.body) as Envelope;
          if (!envelope.event.startsWith("lead.")) return base.sign(a);
          const key = `${envelope.id} ${a.webhookId}`;
          if (!ids.has(key)) ids.set(key, newEventId());
          return base.sign({ ...a, body: JSON.stringify({ ...envelope, id: ids.get(key) }) });
        },
      };
    },
  },
  { id: "event-id-without-prefix", parts: envelopeBody((e) => ({ ...e, id: e.id.replace(/^evt_/, "") })) },
  { id: "one-id-for-every-event", parts: envelopeBody((e) => ({ ...e, id: (fixedId ??= e.id) })) },
  // Ids from a counter of each event name (a sequence per table): unique among one name's events only.
  (() => {
    const counters = new Map<string, number>();
    const variant: BrokenServer = {
      id: "counts-ids-per-event-name",
      parts: envelopeBody((e) => {
        const n = (counters.get(e.event) ?? 0) + 1;
        counters.set(e.event, n);
        return { ...e, id: `evt_${String(n).padStart(10, "0")}` };
      }),
    };
    return variant;
  })(),
  { id: "timestamp-with-offset", parts: envelopeBody((e) => ({ ...e, timestamp: e.timestamp.replace(/Z$/, "+00:00") })) },
  {
    id: "omits-a-required-data-member",
    parts: envelopeBody((e) => {
      if (e.event !== "lead.created") return e;
      const { phone: _phone, ...customer } = e.data.customer as Record<string, unknown>;
      return { ...e, data: { ...e.data, customer } };
    }),
  },
  {
    id: "lead-expired-names-another-lead",
    parts: envelopeBody((e) => (e.event === "lead.expired" ? { ...e, data: { ...e.data, leadID: `${e.data.leadID as string}9` } } : e)),
  },
  {
    // A day before the lead was: the check's leniency for other leads of the business (made before the run) must not cover the suite's own.
    id: "lead-expired-created-a-day-early",
    parts: envelopeBody((e) => (e.event === "lead.expired" ? { ...e, data: { ...e.data, createdAt: new Date(Date.parse(e.data.createdAt as string) - 86_400_000).toISOString() } } : e)),
  },
  { id: "lead-expired-created-at-expiry", parts: envelopeBody((e) => (e.event === "lead.expired" ? { ...e, data: { ...e.data, createdAt: e.data.expiredAt } } : e)) },
  { id: "wrong-content-type", rules: (r) => ({ ...r, contentType: "text/plain" }) },

  // -- Filtering ---------------------------------------------------------------------------------
  { id: "ignores-events-filter", parts: queuesFor("w.status = 'enabled' AND w.business_id = e.business_id") },
  { id: "ignores-business-filter", parts: queuesFor("w.status = 'enabled' AND w.events::jsonb ? e.name") },
  // One delivery per URL, however many webhooks registered it: one of them (the least id) gets it.
  {
    id: "one-delivery-per-url",
    parts: queuesFor(
      `w.status = 'enabled' AND w.business_id = e.business_id AND w.events::jsonb ? e.name AND NOT EXISTS (
         SELECT 1 FROM webhooks o WHERE o.url = w.url AND o.id < w.id AND o.status = 'enabled' AND o.business_id = e.business_id AND o.events::jsonb ? e.name)`,
    ),
  },
  // lead.expired to every webhook of the lead's business, as if it were a notice every partner must get.
  { id: "sends-lead-expired-to-every-webhook", parts: queuesFor("w.status = 'enabled' AND w.business_id = e.business_id AND (w.events::jsonb ? e.name OR e.name = 'lead.expired')") },
  {
    id: "delivers-after-disable",
    parts: (_base, ctx) => ({
      ...queuesFor("w.business_id = e.business_id AND w.events::jsonb ? e.name")(_base, ctx),
      deliverable: (a) => a.url !== null && a.secret !== null && a.body !== null,
      record: faultyRecorder(ctx, { keepsDeliveringAfterDisable: true }),
    }),
  },

  // Local time (UTC-5) written with Z: every timestamp five hours off.
  {
    id: "stamps-local-time-as-utc",
    parts: envelopeBody((e) => ({ ...e, timestamp: new Date(Date.parse(e.timestamp) - 5 * 3600_000).toISOString().replace(/\.\d{3}Z$/, "Z") })),
  },
  // Stamped after the event occurred, within its second (a clock read at the end of the work, say).
  {
    id: "stamps-events-half-a-second-late",
    parts: envelopeBody((e) => ({ ...e, timestamp: new Date(Date.parse(e.timestamp) + 500).toISOString() })),
  },
  // A Host header of the host name alone, its port dropped (a client that builds the header by hand).
  {
    id: "host-header-without-port",
    parts: (_base, ctx) => ({
      send: defaultParts({
        ...ctx,
        dispatcher: ctx.dispatcher.compose((dispatch) => (opts, handler) => dispatch({ ...opts, headers: { ...(opts.headers as Record<string, string>), host: new URL(String(opts.origin)).hostname } }, handler)),
      }).send,
    }),
  },
  // A query of its own added to the registered URL (an attempt counter).
  {
    id: "delivers-to-url-with-query",
    parts: (base) => ({ send: (url, body, signature, signal) => base.send(`${url}?attempt=1`, body, signature, signal) }),
  },
  // An advance that jumps to its target: what is due by then made once, at the target (D24: each due
  // instant on the way in turn, so a retry falling due within the advance is made in it).
  { id: "advance-jumps-to-its-target", parts: (base) => ({ timing: { ...base.timing, advanceSteps: async () => undefined } }) },
  // Event text HTML-escaped when the event is built (a template engine's default): not the data as triggered.
  {
    id: "html-escapes-event-text",
    parts: (base) => ({
      envelope: (name, data, at) => base.envelope(name, typeof data.text === "string" ? { ...data, text: htmlEscaped(data.text) } : data, at),
    }),
  },
  // Event text normalized to Unicode NFC when the event is built: not the data as triggered (D24).
  {
    id: "nfc-event-text",
    parts: (base) => ({
      envelope: (name, data, at) => base.envelope(name, typeof data.text === "string" ? { ...data, text: data.text.normalize("NFC") } : data, at),
    }),
  },
  // The registered URL lower-cased (a case-insensitive URL type), or its query dropped.
  { id: "lower-cases-urls", parts: (base) => ({ send: (url, body, signature, signal) => base.send(url.toLowerCase(), body, signature, signal) }) },
  { id: "drops-url-queries", parts: (base) => ({ send: (url, body, signature, signal) => base.send(url.split("?")[0]!, body, signature, signal) }) },
  // Declares Latin-1 for bytes that are UTF-8.
  {
    id: "names-latin-1-charset",
    parts: (_base, ctx) => ({
      send: defaultParts({
        ...ctx,
        dispatcher: ctx.dispatcher.compose(
          (dispatch) => (opts, handler) =>
            dispatch({ ...opts, headers: { ...(opts.headers as Record<string, string>), "content-type": "application/json; charset=iso-8859-1" } }, handler),
        ),
      }).send,
    }),
  },
  // Sends with node:https and Expect: 100-continue, the body after the receiver's 100 (undici refuses the header).
  { id: "asks-for-100-continue", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, { expectContinue: true }) }) },
  // Reads an interim answer (103 Early Hints) as the final one, and any status below 300 as a success (as
  // Python's http.client returns a 103, to a check written `status < 300`): the failure after it is lost.
  { id: "takes-an-interim-answer-for-a-success", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, { interimIsFinal: true }) }) },
  // A 2xx taken for a success on its status line, its body never waited for (D6: a complete answer).
  { id: "takes-a-status-line-for-an-answer", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, { statusIsEnough: true }) }) },
  // The body sent in chunks, with no Content-Length (D1).
  { id: "sends-chunked-bodies", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, { chunked: true }) }) },
  // `POST https://host:port/path HTTP/1.1`: the form a client sends to a proxy, not to the origin server.
  { id: "sends-absolute-form-request-targets", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, { absoluteForm: true }) }) },
  // A pool of 2 connections per origin, each request's deadline running while it waits for one (D6: the
  // wait comes before the attempt): attempts behind held ones fail unsent and are counted.
  { id: "counts-the-wait-for-a-connection", parts: (_base, ctx) => ({ send: sendWithNodeHttps(ctx, { connectionsPerOrigin: 2 }) }) },

  // -- Retry schedule and the failure counter ------------------------------------------------------
  {
    // A slow path for one event (a poll, a lookup before sending): each booking.confirmed waits 300 ms
    // before its first attempt to a URL. D24 gives a first attempt 150 ms under a scaled clock; a
    // virtual clock's advance would wait for it, so this one is certified on a scaled clock.
    id: "slow-first-booking-attempts",
    clock: { kind: "scaled", factor: 3e-5 },
    parts: (base) => {
      const sent = new Set<string>();
      return {
        async send(url, body, signature, signal) {
          const envelope = JSON.parse(body.toString("utf8")) as Envelope;
          const key = `${url} ${envelope.id}`;
          if (envelope.event === "booking.confirmed" && !sent.has(key)) {
            sent.add(key);
            await new Promise((resolve) => setTimeout(resolve, 300));
          }
          return base.send(url, body, signature, signal);
        },
      };
    },
  },
  // §6.3's "after 5 failed attempts" read as five attempts in all: four retries, the 24 h one never made (D7: five retries).
  { id: "retries-four-times", rules: (r) => ({ ...r, retryWaitsSeconds: r.retryWaitsSeconds.slice(0, 4) }) },
  { id: "retries-one-step-early", rules: (r) => ({ ...r, retryWaitsSeconds: r.retryWaitsSeconds.map((w) => w - 1) }) },
  { id: "waits-20-percent-short", rules: (r) => ({ ...r, retryWaitsSeconds: r.retryWaitsSeconds.map((w) => w * 0.8) }) },
  // Every retry's wait counted from when the failed attempt began (before it connected and was answered).
  {
    id: "retry-counted-from-attempt-start",
    parts: (base) => ({ retryAt: (f) => base.retryAt({ ...f, endedAt: f.startedAt }) }),
    clock: { kind: "scaled", factor: 3e-5 },
  },
  {
    id: "timeout-retry-counted-from-start",
    parts: (base) => ({ retryAt: (f) => base.retryAt(f.timedOut ? { ...f, endedAt: f.startedAt } : f) }),
  },
  // Outside D24's 0.5 to 5 real seconds for an attempt that gets no answer under a virtual clock.
  { id: "holds-unanswered-attempt-8-s", virtualAttemptTimeoutMs: 8000 },
  { id: "gives-up-unanswered-attempt-at-200-ms", virtualAttemptTimeoutMs: 200 },
  {
    id: "retries-forever",
    parts: (base, ctx) => ({ retryAt: (f) => base.retryAt(f) ?? f.endedAt + ctx.rules.retryWaitsSeconds.at(-1)! * 1000 }),
  },
  { id: "disables-after-6", rules: (r) => ({ ...r, disableAfterConsecutiveFailures: r.disableAfterConsecutiveFailures + 1 }) },
  // The largest threshold the counter's column holds: never reached.
  { id: "never-disables", rules: (r) => ({ ...r, disableAfterConsecutiveFailures: 2 ** 31 - 1 }) },
  { id: "no-reset-on-success", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { noReset: true }) }) },
  { id: "no-reset-on-retry-success", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { noResetOnRetry: true }) }) },
  // A failure that is "the receiver's fault" (4xx) or "the network's" (no answer, a closed connection) is taken for a reset.
  { id: "resets-count-on-4xx", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { resetsOn: (o) => o.status !== undefined && o.status >= 400 && o.status < 500 }) }) },
  { id: "resets-count-on-timeout", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { resetsOn: timedOut }) }) },
  { id: "resets-count-on-closed-connection", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { resetsOn: (o) => !o.ok && o.status === undefined && !timedOut(o) }) }) },
  // A certificate the server refuses taken for "not attempted": retried, never counted toward disabling.
  { id: "tls-errors-not-counted", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { leavesCountOn: (o) => /certificate|altnames/i.test(o.error ?? "") }) }) },
  // An attempt under way when its webhook was disabled, answered 2xx after, enables it again.
  { id: "success-re-enables-disabled-webhook", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { reenablesOnSuccess: true }) }) },
  // A non-2xx taken for more than a failure: 410 Gone for "unsubscribed", another 4xx (but 408 and 429)
  // for the receiver's final word, a Retry-After for the next retry's wait.
  { id: "disables-on-410", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { disablesOn: (o) => o.status === 410 }) }) },
  {
    id: "drops-event-on-4xx",
    parts: (base) => ({
      record: (batch) => base.record(batch.map((o) => (o.status !== undefined && o.status >= 400 && o.status < 500 && o.status !== 408 && o.status !== 429 ? { ...o, retryAt: undefined } : o))),
    }),
  },
  { id: "honours-retry-after", parts: (base, ctx) => honoursRetryAfter(base, ctx) },
  {
    // The count starts again when an event is queued for the webhook, not when an attempt succeeds.
    id: "reset-on-new-event",
    parts: (base, ctx) => ({
      async queue(tx, events) {
        const queued = await base.queue(tx, events);
        await tx.query(
          `UPDATE webhooks w SET consecutive_failures = 0 FROM unnest($1::text[], $2::text[]) AS e(name, business_id)
           WHERE w.status = 'enabled' AND w.business_id = e.business_id AND w.events::jsonb ? e.name`,
          [events.map((e) => e.name), events.map((e) => e.businessId)],
        );
        return queued;
      },
      record: faultyRecorder(ctx, { noReset: true }),
    }),
  },
  {
    // Outcomes recorded many per statement, as the reference does, but a batch's failures before its
    // successes (e.g. the increments applied before the resets); batches gather for 300 ms.
    id: "records-a-batchs-failures-before-its-successes",
    // Long enough to gather the whole split wave (its outcomes span twice the suite's 250 ms gap).
    recordLingerMs: 1000,
    parts: (base) => ({
      record: (batch) => recordedInAnotherOrder(base, batch, (a, b) => Number(a.ok) - Number(b.ok)),
    }),
  },
  {
    // Outcomes gathered for a second, then recorded last first.
    id: "records-a-batch-in-reverse",
    recordLingerMs: 1000,
    parts: (base) => ({ record: (batch) => recordedInAnotherOrder(base, batch, (_a, _b, placeOfA, placeOfB) => placeOfB - placeOfA) }),
  },
  {
    // Outcomes gathered for a second, then recorded in the order the attempts were sent (signed, which
    // the engine does in the order it claims and sends them), not the order they ended: as a server that
    // awaits every attempt of a batch and then records their outcomes in turn.
    id: "records-outcomes-in-the-order-sent",
    recordLingerMs: 1000,
    parts: (base) => {
      const sentAs = new Map<string, number>();
      let sent = 0;
      return {
        async sign(a) {
          sentAs.set(a.id, sent++);
          return base.sign(a);
        },
        record: (batch) => recordedInAnotherOrder(base, batch, (a, b) => (sentAs.get(a.attemptId) ?? 0) - (sentAs.get(b.attemptId) ?? 0)),
      };
    },
  },
  { id: "failure-count-per-business", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { resetsBusinessOnSuccess: true }) }) },
  { id: "failure-count-per-url", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { perUrl: true }) }) },
  { id: "per-event-failure-count", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { perEvent: true }) }) },
  { id: "failure-count-per-event-name", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { perEventName: true }) }) },
  { id: "forgets-failure-count-when-idle", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { forgetsCountWhenIdle: true }) }) },
  {
    // Its other events' pending retries are still made (to a disabled webhook: nothing else is).
    id: "disable-cancels-only-failing-event",
    parts: (base, ctx) => ({
      deliverable: (a) => a.url !== null && a.secret !== null && a.body !== null,
      record: faultyRecorder(ctx, { cancelsOnlyFailingEvent: true }),
    }),
  },
  {
    // The lost update: a failure writes back the counter as it was when its attempt was claimed, plus one.
    id: "stale-failure-count",
    parts: (base, ctx) => {
      const atClaim = new Map<string, number>();
      return {
        async claim(now, limit, spread) {
          const claimed = await base.claim(now, limit, spread);
          const { rows } = await ctx.db.query<{ id: string; consecutive_failures: number }>(
            "SELECT id, consecutive_failures FROM webhooks WHERE id = ANY($1)",
            [claimed.map((a) => a.webhookId)],
          );
          const counters = new Map(rows.map((r) => [r.id, r.consecutive_failures]));
          for (const a of claimed) atClaim.set(a.id, counters.get(a.webhookId) ?? 0);
          return claimed;
        },
        record: faultyRecorder(ctx, { counterOf: (id) => atClaim.get(id) }),
      };
    },
  },

  // -- What counts as a failure ------------------------------------------------------------------
  {
    id: "follows-redirects",
    parts: (_base, ctx) => ({ send: defaultParts({ ...ctx, dispatcher: ctx.dispatcher.compose(interceptors.redirect({ maxRedirections: 3 })) }).send }),
  },
  {
    // Success tested as `status === 200`: the 204 the example receivers answer is a failure.
    id: "only-200-counts-as-success",
    parts: (base) => ({
      async send(...args) {
        const result = await base.send(...args);
        const other2xx = result.status !== undefined && result.status > 200 && result.status < 300;
        return other2xx && result.error === undefined ? { ...result, error: `HTTP ${result.status} is not 200` } : result;
      },
    }),
  },
  {
    id: "closed-connection-counts-as-success",
    parts: (base) => ({
      async send(...args) {
        const result = await base.send(...args);
        return result.status === undefined && !result.timedOut ? { status: 200, timedOut: false } : result;
      },
    }),
  },

  // -- TLS: the receiver's certificate not verified ----------------------------------------------
  {
    // As `InsecureSkipVerify` or `rejectUnauthorized: false` do: any certificate is taken.
    id: "skips-certificate-verification",
    parts: (_base, ctx) => ({ send: defaultParts({ ...ctx, dispatcher: new Agent({ connect: { rejectUnauthorized: false } }) }).send }),
  },
  {
    // The chain is verified but not the host name, as a custom verification callback that forgets it does.
    id: "skips-host-name-verification",
    parts: (_base, ctx) => ({
      send: defaultParts({
        ...ctx,
        dispatcher: new Agent({ connect: { ca: [...rootCertificates, ...(ctx.webhookCa ? [ctx.webhookCa] : [])], checkServerIdentity: () => undefined } }),
      }).send,
    }),
  },

  {
    // Retries through another client that takes any certificate (a "fallback" client for retries).
    id: "skips-certificate-verification-on-retries",
    parts: (base, ctx) => {
      const insecure = defaultParts({ ...ctx, dispatcher: new Agent({ connect: { rejectUnauthorized: false } }) }).send;
      const retries = new Set<string>();
      return {
        async sign(a) {
          const signed = await base.sign(a);
          if (a.attempt > 1) retries.add(signed.signature);
          return signed;
        },
        send: (url, body, signature, signal) => (retries.has(signature) ? insecure : base.send)(url, body, signature, signal),
      };
    },
  },
  {
    // The chain and the host name are verified, the dates not: an expired certificate is taken.
    id: "takes-expired-certificates",
    parts: (_base, ctx) => {
      const ca = [...rootCertificates, ...(ctx.webhookCa ? [ctx.webhookCa] : [])];
      const connect: buildConnector.connector = (options, done) => {
        const host = options.hostname.replace(/^\[|\]$/g, "");
        const socket = tlsConnect({ host, port: Number(options.port || 443), ca, rejectUnauthorized: false, ...(isIP(host) ? {} : { servername: host }) });
        socket.once("error", (error) => done(error, null));
        socket.once("secureConnect", () => {
          // Node gives the chain's verdict as OpenSSL's code, a string despite its type.
          const chain = socket.authorizationError as unknown as string | null;
          const wrong = chain && chain !== "CERT_HAS_EXPIRED" ? new Error(chain) : checkServerIdentity(host, socket.getPeerCertificate());
          if (wrong) {
            socket.destroy();
            return done(wrong, null);
          }
          done(null, socket);
        });
      };
      return { send: defaultParts({ ...ctx, dispatcher: new Agent({ connect }) }).send };
    },
  },

  // -- The disable e-mail --------------------------------------------------------------------------
  { id: "no-disable-email", parts: () => ({ sendMail: async () => undefined }) },
  { id: "no-notice-when-a-first-attempt-disables", parts: (_base, ctx) => ({ record: faultyRecorder(ctx, { noNoticeOnFirstAttempt: true }) }) },
  { id: "sends-notice-a-failure-early", parts: queuesNoticeAFailureEarly },
  // The same, each e-mail sent 300 ms after it falls due (a mailer's queue): under a virtual clock the
  // failures that legally disable the reset scenario's webhook come within those 300 ms.
  {
    id: "sends-notice-a-failure-early-300-ms-later",
    parts: (base, ctx) => ({
      ...queuesNoticeAFailureEarly(base, ctx),
      sendMail: (mail) => delay(300).then(() => base.sendMail(mail)),
    }),
  },
  // A notice of its own (another Message-ID) each time the count reaches threshold - 1, sent 1.5 s later
  // as a queue of its own would, besides the disabling's: under a virtual clock it comes after the attempts
  // that follow, and the reset scenario's webhook, which reaches threshold - 1 twice, gets three notices.
  {
    id: "sends-late-notices-a-failure-early",
    parts: (base, ctx) => ({
      async record(outcomes) {
        const recorded = await base.record(outcomes);
        const failed = outcomes.filter((o) => !o.ok && !o.cancelled).map((o) => o.webhookId);
        const { rows } = await ctx.db.query<{ id: string; client_id: string; url: string; business_id: string }>(
          "SELECT id, client_id, url, business_id FROM webhooks WHERE id = ANY($1::text[]) AND status = 'enabled' AND consecutive_failures = $2",
          [failed, ctx.rules.disableAfterConsecutiveFailures - 1],
        );
        for (const w of rows) {
          const mail = composeDisableMail({
            to: loadConfig().clients.find((c) => c.clientId === w.client_id)?.contactEmail ?? contactOf(0),
            webhookId: w.id,
            url: w.url,
            businessId: w.business_id,
            disabledAt: ctx.clock.now(),
            failures: ctx.rules.disableAfterConsecutiveFailures - 1,
            attemptTimeoutSeconds: ctx.rules.attemptTimeoutSeconds,
            webhookIdHeader: ctx.rules.disableEmail.webhookIdHeader,
            lastFailure: { status: null, error: null },
          });
          const early = { ...mail, headers: { ...mail.headers, "Message-ID": `<webhook-${w.id}-early-${ctx.clock.now()}@partner-platform.example>` } };
          setTimeout(() => void base.sendMail(early).catch(() => undefined), 1500).unref();
        }
        return recorded;
      },
    }),
  },
  {
    id: "sends-second-email-with-new-message-id",
    // A repeat that a mail system cannot tell from a new notice.
    parts: sendsASecondNotice("again", 0),
  },
  // The notice, then 2 s later another with a new Message-ID (a send tried again after its outcome was
  // lost, named anew): within the 5 s a notice may take, so a check must wait them out to see it.
  { id: "sends-second-notice-2-s-later", parts: sendsASecondNotice("later", 2000) },
  // Later than the 5 s after a disabling in which each-disabling-sends-one-notice-in-time counts notices.
  { id: "sends-second-notice-6-s-later", parts: sendsASecondNotice("later", 6000) },
  // A copy for the platform's own mailbox, in a transaction of its own, as a message of its own (D26: with the notice's Message-ID).
  {
    id: "archives-a-copy-with-its-own-message-id",
    parts: (base) => ({
      async sendMail(mail) {
        await base.sendMail(mail);
        const id = mail.headers["Message-ID"] ?? "<disabled@partner-platform.example>";
        await base.sendMail(Object.assign({}, mail, { headers: { ...mail.headers, "Message-ID": id.replace("@", ".archive@") }, envelope: { from: "no-reply@partner-platform.example", to: ["ops@partner-platform.example"] } }));
      },
    }),
  },
  // Each retry rebuilt with the time it is made: same id, other bytes (D3: a retry repeats the event).
  {
    id: "restamps-retries",
    parts: (base) => ({
      sign: (a) => base.sign(a.attempt > 1 ? { ...a, body: a.body.replace(/"timestamp":"[^"]*"/, `"timestamp":"${new Date(Date.parse(JSON.parse(a.body).timestamp) + a.attempt * 60_000).toISOString()}"`) } : a),
    }),
  },
  { id: "emails-another-address", parts: rewritesNotice((mail) => ({ ...mail, to: "ops@partner-platform.example" })) },
  // A copy to the platform's mailbox whose Bcc header is sent along: every recipient sees it.
  {
    id: "shows-its-bcc",
    parts: (base) => ({
      async sendMail(mail) {
        // Composed here: nodemailer's SMTP transport always drops the Bcc header.
        const composed = new MailComposer({ from: "no-reply@partner-platform.example", ...mail, bcc: "ops@partner-platform.example" }).compile();
        composed.keepBcc = true;
        const raw = await composed.build();
        await base.sendMail(Object.assign({}, mail, { raw, envelope: { from: "no-reply@partner-platform.example", to: [mail.to, "ops@partner-platform.example"] } }));
      },
    }),
  },
  // A Bcc header with no address in it, as a mailer writes an empty list (D26: no Bcc header).
  {
    id: "sends-empty-bcc-header",
    parts: (base) => ({
      async sendMail(mail) {
        const raw = Buffer.concat([Buffer.from("Bcc: \r\n"), await new MailComposer({ from: "no-reply@partner-platform.example", ...mail }).compile().build()]);
        await base.sendMail(Object.assign({}, mail, { raw }));
      },
    }),
  },
  // Every notice to the first client's contact, whichever partner's webhook it is of.
  { id: "emails-first-clients-contact", parts: rewritesNotice((mail) => ({ ...mail, to: contactOf(0) })) },
  // Every notice copied by Bcc, unseen, to the other client's contact.
  {
    id: "copies-the-other-partner-by-bcc",
    parts: (base) => ({ sendMail: (mail) => base.sendMail(Object.assign({}, mail, { bcc: mail.to === contactOf(0) ? contactOf(1) : contactOf(0) })) }),
  },
  // One Message-ID for every notice: a mail system takes the second disabling's for a repeat of the first.
  {
    id: "one-message-id-for-every-disabling",
    parts: rewritesNotice((mail) => ({ ...mail, headers: { ...mail.headers, "Message-ID": "<webhook-disabled@partner-platform.example>" } })),
  },
  // Where a Bcc would do: the partner's notice shows another address (nodemailer takes `cc` with the rest).
  { id: "copies-another-address-visibly", parts: (base) => ({ sendMail: (mail) => base.sendMail(Object.assign({}, mail, { cc: "ops@partner-platform.example" })) }) },
  { id: "email-without-details", parts: rewritesNotice((mail) => ({ to: mail.to, subject: "Webhook disabled", text: "One of your webhooks was disabled.\n", headers: {} })) },
  // The notice without its last paragraph: nothing on the cancelled deliveries, nor on what to do (D26).
  { id: "email-without-advice", parts: rewritesNotice((mail) => ({ ...mail, text: mail.text.replace(/\nIts pending deliveries[^]*$/, "\n") })) },

  // Fire and forget: a notice the SMTP server refused is taken as sent, never tried again (D26).
  { id: "drops-refused-emails", parts: (base) => ({ sendMail: (mail) => base.sendMail(mail).catch(() => undefined) }) },
  // A notice sent again after a refusal gets a Message-ID of its own: to mail systems, a second notice (D26).
  {
    id: "new-message-id-when-sent-again",
    parts: (base) => {
      const tried = new Set<string>();
      return {
        sendMail(mail) {
          const id = mail.headers["Message-ID"] ?? "";
          const again = tried.has(id);
          tried.add(id);
          return base.sendMail(again ? { ...mail, headers: { ...mail.headers, "Message-ID": id.replace("@", ".again@") } } : mail);
        },
      };
    },
  },
  // Drops refused notices as drops-refused-emails does, and sends a Bcc copy of each notice to the platform's own mailbox in a transaction of its own (D26 allows it), which the SMTP server takes.
  {
    id: "drops-refused-emails-but-a-copy",
    parts: (base) => ({
      async sendMail(mail) {
        await base.sendMail(mail).catch(() => undefined);
        await base.sendMail(Object.assign({}, mail, { envelope: { from: "no-reply@partner-platform.example", to: ["ops@partner-platform.example"] } }));
      },
    }),
  },
  // The subject names the webhook's id with a digit after it: another webhook's id.
  { id: "subject-names-another-webhook", parts: rewritesNotice((mail) => ({ ...mail, subject: mail.subject.replace(/webhook (\S+)/, "webhook $19") })) },
  // The reason with a fixed status for the last failure, whatever it was (D26: "with the last failure").
  { id: "email-with-fixed-last-failure", parts: rewritesNotice((mail) => ({ ...mail, text: mail.text.replace(/(The last one failed with: )[^\n]*/, "$1HTTP 503.") })) },
  // The reason without the last failure (D26: "with the last failure").
  { id: "email-without-last-failure", parts: rewritesNotice((mail) => ({ ...mail, text: mail.text.replace(/ The last one failed with: [^\n]*/, "") })) },

  // -- Leads -------------------------------------------------------------------------------------
  { id: "expires-leads-a-day-early", rules: (r) => ({ ...r, leadExpirySeconds: r.leadExpirySeconds - 24 * 3600 }) },
  // An expired lead is taken up again by every later expiry pass: lead.expired again and again.
  { id: "expires-leads-again", parts: expiringStatuses(["new", "responded", "expired"]) },
  // An expired lead taken up once more by a pass a day after its expiry (a sweep with a grace period).
  {
    id: "expires-leads-again-a-day-later",
    parts: () => ({
      async expireLeads(tx, now) {
        // expires_at moved past any clock once a lead expired twice: the second expiry comes once.
        const { rows } = await tx.query<ExpiredLeadRow>(
          `UPDATE leads SET status = 'expired', expires_at = CASE WHEN previous.status = 'expired' THEN $3 ELSE leads.expires_at END FROM (
             SELECT id, status, expires_at FROM leads
             WHERE (expires_at <= $1 AND status IN ('new', 'responded')) OR (status = 'expired' AND expires_at <= $2) FOR UPDATE) AS previous
           WHERE leads.id = previous.id
           RETURNING leads.id, leads.business_id, previous.status AS previous_status, leads.created_at, previous.expires_at`,
          [now, now - 24 * 3600 * 1000, Number.MAX_SAFE_INTEGER],
        );
        return rows.map(expiredLeadOf);
      },
    }),
  },
  // expiredAt written from the lead's creation, not its expiry.
  {
    id: "expired-at-creation",
    parts: (base) => ({ expireLeads: async (tx, now) => (await base.expireLeads(tx, now)).map((lead) => ({ ...lead, expiresAt: lead.createdAt })) }),
  },
  // lead.expired's previousStatus always responded, whatever the lead's status was.
  { id: "lead-expired-always-from-responded", parts: (base) => ({ expireLeads: async (tx, now) => (await base.expireLeads(tx, now)).map((lead) => ({ ...lead, previousStatus: "responded" })) }) },
  // lead.created with the example's phone number, not the customer's.
  {
    id: "lead-created-with-example-phone",
    parts: leadCustomer((c) => ({ ...c, phone: (sharedEventExample("lead.created").data as { customer: { phone: string } }).customer.phone })),
  },
  // The customer's name in lead.created as a form's handler often stores it: trimmed, or normalized to NFC (D17: as sent).
  { id: "trims-lead-customer-names", parts: leadCustomer((c) => ({ ...c, name: c.name.trim() })) },
  { id: "nfc-lead-customer-names", parts: leadCustomer((c) => ({ ...c, name: c.name.normalize("NFC") })) },
  { id: "html-escapes-lead-customer-names", parts: leadCustomer((c) => ({ ...c, name: htmlEscaped(c.name) })) },
  // lead.expired stamped with the lead's creation, 7 days before it occurred (D14).
  { id: "lead-expired-stamped-at-lead-creation", parts: envelopeBody((e) => (e.event === "lead.expired" ? { ...e, timestamp: e.data.createdAt as string } : e)) },
  // expiredAt 50 minutes after the expiry, in a lead.expired made on time.
  {
    id: "lead-expired-at-written-late",
    parts: envelopeBody((e) => (e.event === "lead.expired" ? { ...e, data: { ...e.data, expiredAt: new Date(Date.parse(e.data.expiredAt as string) + 3_000_000).toISOString() } } : e)),
  },
  // lead.created naming the request's category by its id (the seed's), not its name (§2.4).
  {
    id: "lead-created-names-category-id",
    parts: envelopeBody((e) => (e.event === "lead.created" ? { ...e, data: { ...e.data, request: { ...(e.data.request as object), category: "1000123" } } } : e)),
  },
  // A triggered event's data cut down to the members its schema defines (a typed model's serializer).
  {
    id: "drops-data-members-it-does-not-define",
    parts: envelopeBody((e) => {
      const { properties } = dataSchemaOf(e.event as EventName);
      return { ...e, data: Object.fromEntries(Object.entries(e.data).filter(([name]) => name in properties)) };
    }),
  },
  // lead.created with another zip code than the request's (the business's, say).
  { id: "lead-created-with-another-zip", parts: leadLocation((l) => ({ ...l, zip: "07102" })) },
  // lead.created with the request's zip code in another town: the city and state of a business's own address (D20: the zip's).
  { id: "lead-created-with-another-city", parts: leadLocation((l) => ({ ...l, city: "Hoboken", state: "NJ" })) },
  // lead.created in the town of its business's own address (the reference's catalogue), the zip code's
  // for the suite's business (4711 is in New York), another for 4712 (Hoboken; D20: the zip code's).
  {
    id: "lead-created-in-its-business-town",
    parts: leadLocation((l, businessID) => {
      const own = seed.businesses.find((b) => b.businessID === businessID)?.location;
      return own ? { ...l, city: own.city, state: own.state } : l;
    }),
  },
  // A lead.updated moves a lead that is no longer open (a hired one back to responded: it then expires).
  {
    id: "reopens-final-leads",
    parts: () => ({
      updateLead: async (tx, lead) =>
        void (await tx.query("UPDATE leads SET status = $1 WHERE id = $2 AND business_id = $3 AND status <> 'expired'", [lead.status, lead.id, lead.businessId])),
    }),
  },
  // Only a hired lead kept as it is: a declined, cancelled or expired one moved back to responded (then expires, again).
  {
    id: "reopens-leads-but-hired",
    parts: () => ({
      updateLead: async (tx, lead) =>
        void (await tx.query("UPDATE leads SET status = $1 WHERE id = $2 AND business_id = $3 AND status <> 'hired'", [lead.status, lead.id, lead.businessId])),
    }),
  },
  // A lead.updated moves the lead it names whatever business the event is of.
  {
    id: "moves-another-business-lead",
    parts: () => ({
      updateLead: async (tx, lead) => void (await tx.query("UPDATE leads SET status = $1 WHERE id = $2 AND status IN ('new', 'responded')", [lead.status, lead.id])),
    }),
  },
  { id: "expires-hired-leads", parts: expiringStatuses(["new", "responded", "hired"]) },
  { id: "expires-declined-leads", parts: expiringStatuses(["new", "responded", "declined"]) },
  { id: "expires-cancelled-leads", parts: expiringStatuses(["new", "responded", "cancelled"]) },
  // A late lead.updated reopens an expired lead, with a new lifetime from the update: it expires again 7 days on.
  {
    id: "reopens-expired-leads-for-a-new-lifetime",
    parts: (base, ctx) => ({
      async queue(tx, events) {
        const queued = await base.queue(tx, events);
        for (const e of events.filter((e) => e.name === "lead.updated")) {
          const { leadID, status } = (JSON.parse(e.body) as Envelope).data as { leadID: string; status: string };
          await tx.query("UPDATE leads SET status = $1, expires_at = $2 WHERE id = $3 AND status = 'expired'", [status, e.at + ctx.rules.leadExpirySeconds * 1000, leadID]);
        }
        return queued;
      },
    }),
  },
  {
    // An idle timeout instead of a lifetime: each lead.updated moves the lead's expiry to 7 days after it.
    id: "lead-expiry-from-last-update",
    parts: (base, ctx) => ({
      async queue(tx, events) {
        const queued = await base.queue(tx, events);
        for (const e of events.filter((e) => e.name === "lead.updated")) {
          const { leadID } = (JSON.parse(e.body) as Envelope).data;
          await tx.query("UPDATE leads SET expires_at = $1 WHERE id = $2", [e.at + ctx.rules.leadExpirySeconds * 1000, leadID]);
        }
        return queued;
      },
    }),
  },

  // -- Registration --------------------------------------------------------------------------------
  { id: "accepts-plain-http-url", registration: checksRewritten("url", (url) => (typeof url === "string" ? url.replace(/^http:/, "https:") : url)) },
  // The URL checked with the spaces around it trimmed (and stored as sent).
  {
    id: "trims-webhook-urls-before-checking",
    registration: (base) => ({
      ...checksRewritten("url", (url) => (typeof url === "string" ? url.trim() : url))(base),
      refuseUrl: (url) => base.refuseUrl(url.trim()),
    }),
  },
  // "*" taken for every event name.
  { id: "accepts-event-wildcard", registration: checksRewritten("events", (events) => (Array.isArray(events) && events.includes("*") ? [...eventNames] : events)) },
  // The rarer reserved ranges a hand-made list misses (D22 refuses them): TEST-NET-2 and -3, AS112, the
  // 6to4 relay anycast, and IPv6's 3fff::/20, 2620:4f:8000::/48 and 100::/64.
  {
    id: "accepts-rarer-reserved-ranges",
    registration: (base) => ({
      refuseUrl: async (url: string) =>
        urlFormProblem(url) ?? (/^\[?(192\.31\.196|192\.52\.193|192\.88\.99|192\.175\.48|198\.51\.100|203\.0\.113)\.|^\[?(3fff:|2620:4f:8000:|100::)/i.test(hostOf(url)) ? undefined : base.refuseUrl(url)),
    }),
  },
  // The denylist of seven IPv4 and four IPv6 ranges that D22 replaced with an allowlist.
  {
    id: "denylists-private-ranges-only",
    registration: () => ({ refuseUrl: async (url: string) => urlFormProblem(url) ?? oldDenylist(url) }),
  },
  // An allowlist too narrow: only the loopback addresses the suite's receiver uses pass.
  {
    id: "accepts-loopback-only",
    registration: (base) => ({
      async refuseUrl(url: string) {
        const refused = await base.refuseUrl(url);
        if (refused) return refused;
        const host = hostOf(url);
        return host === "127.0.0.1" || host === "::1" ? undefined : `the host ${host} is not loopback`;
      },
    }),
  },
  // URLs checked by the schema and the address only: userinfo, port 0, trailing dots and no host accepted.
  {
    id: "checks-url-schema-only",
    registration: (base) => ({ refuseUrl: async (url: string) => (urlFormProblem(url) ? undefined : base.refuseUrl(url)) }),
  },
  // A registration at a disabled webhook's URL enables that webhook again (the partner "fixed" its endpoint).
  (() => {
    let db: Db | undefined;
    const variant: BrokenServer = {
      id: "re-enables-webhooks-at-a-registered-url",
      parts: (_base, ctx) => ((db = ctx.db), {}),
      registration: (base) => ({
        async refuseUrl(url) {
          await db?.query("UPDATE webhooks SET status = 'enabled', consecutive_failures = 0 WHERE url = $1 AND status = 'disabled'", [url]);
          return base.refuseUrl(url);
        },
      }),
    };
    return variant;
  })(),
  // Any partner may subscribe to any business (the gap D27 closes); delivery still checks the owner.
  { id: "accepts-another-partners-business", registration: () => ({ owns: () => true }) },
  // ... and delivery does not either: another partner's webhook gets the business's events.
  {
    id: "delivers-to-any-partner",
    registration: () => ({ owns: () => true }),
    parts: queuesFor("w.status = 'enabled' AND w.business_id = e.business_id AND w.events::jsonb ? e.name"),
  },
  // Registration checks ownership, delivery not: an event reaches, besides its own business's webhooks,
  // every other partner's webhook that takes the event, whatever business it was registered for.
  {
    id: "delivers-to-other-partners-webhooks",
    parts: queuesFor(
      "w.status = 'enabled' AND w.events::jsonb ? e.name AND (w.business_id = e.business_id OR w.client_id <> (SELECT o.client_id FROM business_owners o WHERE o.business_id = e.business_id))",
    ),
  },
  { id: "accepts-over-long-url", registration: ignoresErrors((e) => e.pointer === "/url" && /more than/.test(e.detail)) },
  { id: "accepts-unknown-event-names", registration: ignoresErrors((e) => /^\/events\/\d+$/.test(e.pointer)) },
  { id: "accepts-empty-or-repeated-events", registration: ignoresErrors((e) => e.pointer === "/events" && !isRequired(e)) },
  { id: "accepts-missing-fields", registration: ignoresErrors(isRequired) },
  { id: "accepts-unknown-fields", registration: ignoresErrors((e) => /no such member/.test(e.detail)) },
  { id: "accepts-out-of-range-secret", registration: ignoresErrors((e) => e.pointer === "/secret" && !isRequired(e)) },
  { id: "accepts-unknown-business", registration: () => ({ businessExists: () => true }) },
];
