// The server checks. Scenarios drive the implementation once and record what the suite's receiver
// and SMTP sink saw; each check then asserts one thing about that record. Every scenario counts what
// an endpoint has seen before it acts and waits for exact counts, so that any timing the guide allows
// (docs/implementing-a-server.md) gives the same verdicts.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { setTimeout as delay } from "node:timers/promises";
import { packageRoot } from "../../src/paths.js";
import { eventExample } from "../../src/spec.js";
import { parseEvent, type EventName } from "@partner-platform/sdk";
import { hostOf } from "../../src/server/ssrf.js";
import { loadContract, namesPointer, UNKNOWN_ID } from "../api/contract.js";
import { CheckSkipped, defineCheck, expectEqual, expectThat, type Check, type CheckRecorder, type Timeline, type TimelineAttempt } from "../framework/check.js";
import { createTestCa, issueServerCertificate } from "../harness/pki.js";
import { answers, type Delivery, type PresentedCertificate, type Refusal } from "../harness/receiver.js";
import type { CapturedMail } from "../harness/smtp-sink.js";
import type { RegisteredWebhook, RetryObservation, ServerContext } from "./context.js";
import { addressedTo, decodeMail, mailbox, messageIdOf, messageIds, namesWebhook, notices, noticeAddressedTo, noticeShows, recipients, type DisableMailSeen } from "./mail.js";
import { scaledTolerance } from "./clock.js";

type ServerCheck = Check<ServerContext>;
type Envelope = { id: string; event: string; timestamp: string; data: Record<string, unknown> };

const hmacHex = (body: Buffer, secret: string) => createHmac("sha256", secret).update(body).digest("hex");
/** Whether a delivery's signature header is the HMAC of its own bytes keyed with this secret. */
const signedWith = (ctx: ServerContext, d: Delivery, secret: string) => d.headers[ctx.rules.signatureHeader.toLowerCase()] === hmacHex(d.body, secret);
/**
 * The envelope a delivery carries, read leniently (a byte order mark skipped, as RFC 8259 §8.1 lets a
 * parser do): a body that is no JSON object stands for an event of its own, named "(not JSON)", so that
 * the scenarios go on and envelope-matches-event-schema says what is wrong with it.
 */
const envelopeOf = (d: Delivery): Envelope => envelopeOrUndefined(d) ?? { id: `(not JSON, delivery ${d.seq})`, event: "(not JSON)", timestamp: "", data: {} };
/**
 * Where a delivery stands among those its endpoint saw up to it: which attempt of its event (1 for the
 * first) and which of the endpoint's events (0 for the first), by the order they came.
 */
function placeOf(ctx: ServerContext, d: Delivery): { attempt: number; event: number } {
  const seen = ctx.receiver.at(d.endpoint);
  const ids = seen.slice(0, seen.indexOf(d) + 1).map((x) => envelopeOf(x).id);
  const id = envelopeOf(d).id;
  return { attempt: ids.filter((i) => i === id).length, event: [...new Set(ids)].indexOf(id) };
}
/** Each caught e-mail decoded once, however often a wait or a check reads it. */
const decodedMails = new WeakMap<CapturedMail, Promise<DisableMailSeen>>();
function decodedOnce(mail: CapturedMail): Promise<DisableMailSeen> {
  const decoded = decodedMails.get(mail) ?? decodeMail(mail);
  decodedMails.set(mail, decoded);
  return decoded;
}
/** Every e-mail the sink caught so far, decoded, with when it came (performance.now()). */
const receivedMails = (ctx: ServerContext) => Promise.all(ctx.smtp.messages.map(async (m) => ({ receivedAt: m.receivedAt, mail: await decodedOnce(m) })));
/**
 * Resolves when `predicate` holds of the decoded e-mails, re-checked on every one that comes; rejects
 * after `timeoutMs`. On decoded mail, so that a wait looks for a notice as the checks judge it (isAbout),
 * not for a webhook id somewhere in the raw text (a one-digit id is in most e-mails). With `receivedAfter`
 * (performance.now()), `predicate` sees only the e-mails that came after it.
 */
async function waitForMails(
  ctx: ServerContext,
  predicate: (mails: readonly DisableMailSeen[]) => boolean,
  timeoutMs: number,
  what: string,
  receivedAfter = -Infinity,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const mails = await receivedMails(ctx);
    if (predicate(mails.filter(({ receivedAt }) => receivedAt > receivedAfter).map(({ mail }) => mail))) return;
    await ctx.smtp.waitFor((messages) => messages.length > mails.length, Math.max(0, deadline - performance.now()), what);
  }
}
/** Real ms a scaled clock gives an attempt: its timeout scaled, never below the floor (D24). */
const scaledAttemptTimeoutMs = (ctx: ServerContext, factor: number) =>
  Math.max(ctx.conformance.scaledClock.attemptTimeoutFloorRealSeconds * 1000, ctx.rules.attemptTimeoutSeconds * factor * 1000);
const summary = (ds: readonly Delivery[]) => ds.map((d) => `${d.endpoint}: ${envelopeOf(d).event}`);
const ofEvent = (ds: readonly Delivery[], event: EventName) => ds.filter((d) => envelopeOf(d).event === event);
/** The envelope, or undefined where the body is not a JSON object (another check's concern). */
function envelopeOrUndefined(d: Delivery): Envelope | undefined {
  try {
    const value = JSON.parse(d.body.toString("utf8").replace(/^\uFEFF/, "")) as unknown;
    return value !== null && typeof value === "object" && !Array.isArray(value) ? ({ data: {}, ...value } as Envelope) : undefined;
  } catch {
    return undefined;
  }
}
const eventNameOf = (d: Delivery) => envelopeOrUndefined(d)?.event;
const eventIdOf = (d: Delivery) => envelopeOrUndefined(d)?.id;
/** Orders records of leads by their leadID: events come in any order (D5). */
const byLeadID = (a: { leadID: unknown }, b: { leadID: unknown }) => String(a.leadID).localeCompare(String(b.leadID));
const isSuccess = (d: Delivery) => d.answer?.kind === "status" && d.answer.status >= 200 && d.answer.status < 300;

/** An ISO 8601 date-time in UTC, its fraction optional (D14). */
const UTC_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

/** What the implementation's clock says now, in ms. */
const clockNow = async (ctx: ServerContext) => Date.parse((await ctx.control.clock()).now);

/** The implementation's clock (ms) and the suite's real time (performance.now()) when it was read, give or take `halfWidthMs`. */
interface ClockSample {
  clockMs: number;
  /** The latest instant of the implementation's clock the reading may stand for (below). */
  latestMs: number;
  realMs: number;
  halfWidthMs: number;
}

/**
 * From the start of the second of `from` to the latest instant `to` may stand for: what happened between
 * two readings, where an implementation's timestamp may have dropped its fraction (D14).
 */
function wholeSecondsAround(from: ClockSample, to: ClockSample): [number, number] {
  return [Math.floor(from.clockMs / 1000) * 1000, to.latestMs];
}

/**
 * Reads the implementation's clock. Under a virtual clock, which stands still between two readings, a
 * reading is exact to its digits (a timestamp 0.9 s after one with a fraction is late: a window to the
 * end of its second certified one); without a fraction, or with one of zeros, it may have dropped it and
 * stands for its whole second. Under a scaled clock a real millisecond is many of the clock's, and a
 * timestamp read from another time source than the reading's may pass it within its second.
 */
async function clockSample(ctx: ServerContext): Promise<ClockSample> {
  const sent = performance.now();
  const { now } = await ctx.control.clock();
  const answered = performance.now();
  const clockMs = Date.parse(now);
  const endOfSecond = Math.floor(clockMs / 1000) * 1000 + 999;
  // Trailing zeros count for nothing: a clock that drops digits may still write them (".000").
  const digits = /\.(\d*[1-9])/.exec(now)?.[1]?.length ?? 0;
  const latestMs = ctx.options.clock.kind === "virtual" ? Math.min(endOfSecond, clockMs + 10 ** Math.max(0, 3 - digits) - 1) : endOfSecond;
  return { clockMs, latestMs, realMs: (sent + answered) / 2, halfWidthMs: (answered - sent) / 2 };
}

// ---------------------------------------------------------------------------------------------
// Scenario: correct deliveries to three webhooks (two secrets on one business, one other business),
// and five service requests for the business: the first's lead responded to an hour later, the
// second's left new, the third's hired (once responded to), the fourth's declined, the fifth's cancelled.

interface LeadRef {
  leadID: string;
  businessID: string;
}

interface BasicsRun {
  main: RegisteredWebhook;
  sameBusiness: RegisteredWebhook;
  otherBusiness: RegisteredWebhook;
  /** Deliveries of the two booking.confirmed events triggered for the main business. */
  bookings: Delivery[];
  /** When the triggers of those two events answered, in order (performance.now()). */
  bookingTriggers: { answeredAt: number }[];
  /** What reached the main business's webhooks for an event they are not subscribed to (review.created). */
  unsubscribed: Delivery[];
  /** What reached the main business's webhooks for the other business's event. */
  foreignBusiness: Delivery[];
  /** lead.created deliveries after the first two service requests (at the main webhook, at the second, and at the other business's), and those requests' leads. */
  leadCreated: Delivery[];
  leadCreatedAtSecond: Delivery[];
  leadCreatedOfOther: Delivery[];
  requestLeads: LeadRef[];
  /** The implementation's clock read right before and right after those requests: their leads were created between. */
  requested: [ClockSample, ClockSample];
  /** The business's leads of those requests that nobody hires: the first's, responded to an hour later, and the second's, left new. */
  expiringLeads: ExpiringLead[];
  /** The implementation's clock read right before the two booking.confirmed triggers and right after: they occurred between. */
  triggered: [ClockSample, ClockSample];
  /** The leads of the second, third and fourth requests, which the customer hired, the pro declined and the customer cancelled (lead.updated). */
  finalLeads: FinalLeads;
}

/** A lead that expires 7 days after its creation, and the status it expires from. */
interface ExpiringLead {
  leadID: string;
  previousStatus: "new" | "responded";
}

/** The final statuses a lead.updated can move a lead to (D19), and the lead moved to each. */
type FinalStatus = "hired" | "declined" | "cancelled";
type FinalLeads = Partial<Record<FinalStatus, string>>;

// A phone no example has: lead.created must carry this customer's, not an example's. A name with a space at
// each end and a decomposed é: carried as sent, neither trimmed nor normalized (D17).
const customer = { name: " Ame\u0301lie & <Conformance> ", email: "customer@example.com", phone: "+12125550199" };

async function createRequest(ctx: ServerContext): Promise<LeadRef[]> {
  const { categoryId, zip } = ctx.options;
  const { data, error, response } = await ctx.api.POST("/api/v4/requests", { body: { categoryID: categoryId, zipCode: zip, customer } });
  if (!data) throw new Error(`creating a service request failed with HTTP ${response.status}: ${JSON.stringify(error)}`);
  return data.leads;
}

function basics(ctx: ServerContext): Promise<BasicsRun> {
  return ctx.once("basics", async () => {
    const { businessId, otherBusinessId } = ctx.options;
    // The longest secret a registration takes, and one with a space at each end and a decomposed é:
    // every code point of it, as registered, keys the HMAC (D2), neither trimmed nor normalized.
    const main = await ctx.register("basics-main", ["booking.confirmed", "lead.created", "lead.expired"], businessId, ctx.newSecret(registrationSchema().properties.secret.maxLength));
    const sameBusiness = await ctx.register("basics-second-secret", ["booking.confirmed", "lead.created"], businessId, ` ${ctx.newSecret()}e\u0301 `);
    const otherBusiness = await ctx.register("basics-other-business", ["booking.confirmed", "review.created"], otherBusinessId);
    // The other business's leads, where a request matches it too: their town is the zip code's, not the business's own (D20).
    const otherLeads = await ctx.register("basics-other-business-leads", ["lead.created"], otherBusinessId);

    const [main0, same0] = [ctx.count(main.endpoint), ctx.count(sameBusiness.endpoint)];
    const bookingTriggers: BasicsRun["bookingTriggers"] = [];
    const beforeBookings = await clockSample(ctx);
    for (let i = 0; i < 2; i++) {
      await ctx.control.trigger("booking.confirmed", businessId);
      bookingTriggers.push({ answeredAt: performance.now() });
    }
    const afterBookings = await clockSample(ctx);
    const bookings = [
      ...(await ctx.arrivals(main.endpoint, main0, 2, "two booking.confirmed at the main webhook")),
      ...(await ctx.arrivals(sameBusiness.endpoint, same0, 2, "two booking.confirmed at the second webhook")),
    ];

    const [main1, same1, other1] = [ctx.count(main.endpoint), ctx.count(sameBusiness.endpoint), ctx.count(otherBusiness.endpoint)];
    await ctx.control.trigger("review.created", businessId);
    await ctx.control.trigger("booking.confirmed", otherBusinessId);
    await ctx.arrivals(otherBusiness.endpoint, other1, 1, "booking.confirmed of the other business");
    await ctx.quietFor(main.endpoint, 0);
    const since = [...ctx.receiver.at(main.endpoint).slice(main1), ...ctx.receiver.at(sameBusiness.endpoint).slice(same1)];
    const unsubscribed = ofEvent(since, "review.created");
    const foreignBusiness = since.filter((d) => envelopeOf(d).data.businessID === otherBusinessId);

    // Two requests one after the other: the first's lead is responded to later, the second's is left new.
    const [main2, same2, other2] = [ctx.count(main.endpoint), ctx.count(sameBusiness.endpoint), ctx.count(otherLeads.endpoint)];
    const beforeRequest = await clockSample(ctx);
    const respondedLeads = await createRequest(ctx);
    const untouchedLeads = await createRequest(ctx);
    const afterRequest = await clockSample(ctx);
    const requestLeads = [...respondedLeads, ...untouchedLeads];
    const mine = requestLeads.filter((l) => l.businessID === businessId).length;
    const leadCreated = ofEvent(await ctx.arrivals(main.endpoint, main2, mine, "lead.created"), "lead.created");
    const leadCreatedAtSecond = ofEvent(await ctx.arrivals(sameBusiness.endpoint, same2, mine, "lead.created at the second webhook"), "lead.created");
    const others = requestLeads.filter((l) => l.businessID === otherBusinessId).length;
    const leadCreatedOfOther = ofEvent(await ctx.arrivals(otherLeads.endpoint, other2, others, "lead.created of the other business"), "lead.created");
    const leadOf = (leads: LeadRef[]) => leads.find((l) => l.businessID === businessId)?.leadID;

    // Three more requests at the same time, whose leads the customer hires, the pro declines and the
    // customer cancels: each status is final (D19), so none of these leads may ever expire.
    const finalLead = async (status: FinalStatus) => {
      const before = ctx.count(main.endpoint);
      const leads = await createRequest(ctx);
      const leadID = leads.find((l) => l.businessID === businessId)?.leadID;
      await ctx.arrivals(main.endpoint, before, leads.filter((l) => l.businessID === businessId).length, `lead.created of the request whose lead is ${status}`);
      if (leadID) {
        // Only moves D19's graph allows: a lead is hired once the pro has responded.
        const steps = status === "hired" ? (["responded", "hired"] as const) : [status];
        let previousStatus = "new";
        for (const step of steps) {
          const updatedAt = (await ctx.control.clock()).now;
          await ctx.control.trigger("lead.updated", businessId, { leadID, businessID: businessId, status: step, previousStatus, updatedAt });
          previousStatus = step;
        }
      }
      return leadID;
    };
    const finalLeads: FinalLeads = {};
    for (const status of ["hired", "declined", "cancelled"] as const) {
      const leadID = await finalLead(status);
      if (leadID) finalLeads[status] = leadID;
    }
    // A lead.updated back to responded for each final lead, as a late or replayed one would come: a lead
    // no longer open changes no more (D19), so none of them ever expires.
    for (const [status, leadID] of Object.entries(finalLeads)) {
      const updatedAt = (await ctx.control.clock()).now;
      await ctx.control.trigger("lead.updated", businessId, { leadID, businessID: businessId, status: "responded", previousStatus: status === "hired" ? "responded" : "new", updatedAt });
    }

    // The pro responds to the first request's lead a while later: its 7 days still count from its
    // creation (D19), which a server counting from the last change would miss. The gap: an hour, and
    // under a scaled clock at least 400 real ms (more than a lead.expired may be late, D24).
    const respondedLead = leadOf(respondedLeads);
    if (respondedLead) {
      const scale = ctx.options.clock.kind === "scaled" ? ctx.options.clock.factor : undefined;
      await ctx.clock.elapse(scale === undefined ? 3600 : Math.max(3600, Math.ceil(0.4 / scale)));
      const updatedAt = (await ctx.control.clock()).now;
      await ctx.control.trigger("lead.updated", businessId, { leadID: respondedLead, businessID: businessId, status: "responded", previousStatus: "new", updatedAt });
      // The other business's lead.updated naming this lead hires nothing: a lead changes only by its own
      // business's events (D19), so it still expires.
      await ctx.control.trigger("lead.updated", otherBusinessId, { leadID: respondedLead, businessID: otherBusinessId, status: "hired", previousStatus: "responded", updatedAt });
    }
    return {
      main,
      sameBusiness,
      otherBusiness,
      bookings,
      bookingTriggers,
      triggered: [beforeBookings, afterBookings],
      unsubscribed,
      foreignBusiness,
      leadCreated,
      leadCreatedAtSecond,
      leadCreatedOfOther,
      requestLeads,
      requested: [beforeRequest, afterRequest],
      expiringLeads: [
        ...(respondedLead ? [{ leadID: respondedLead, previousStatus: "responded" as const }] : []),
        ...[leadOf(untouchedLeads)].filter((id) => id !== undefined).map((leadID) => ({ leadID, previousStatus: "new" as const })),
      ],
      finalLeads,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: the leads of the basics scenario at their 7-day expiry (run last: it moves the clock by days).

/**
 * How long after the expiry the scenario watches for lead.expired that must not come: a virtual clock
 * a whole lifetime and an hour (a lead given a new lifetime by the late lead.updated expires in it),
 * a scaled one a day (seconds of real time, not minutes).
 */
const watchAfterExpirySeconds = (ctx: ServerContext) => (ctx.options.clock.kind === "virtual" ? ctx.rules.leadExpirySeconds + 3600 : 24 * 3600);

interface LeadRun {
  /** The leads nobody hires. */
  expiring: ExpiringLead[];
  finalLeads: FinalLeads;
  /** lead.expired deliveries at the main webhook before 7 days, at 7 days, and in the watch after. */
  early: Delivery[];
  atExpiry: Delivery[];
  after: Delivery[];
}

function leadExpiry(ctx: ServerContext): Promise<LeadRun> {
  return ctx.once("leads", async () => {
    const { main, requested, expiringLeads: expiring, finalLeads } = await basics(ctx);
    if (expiring.length === 0) return { expiring, finalLeads, early: [], atExpiry: [], after: [] };
    const lifetimeMs = ctx.rules.leadExpirySeconds * 1000;
    const [before, after] = requested;
    const clock = ctx.options.clock;
    if (clock.kind === "virtual") {
      // Virtual time stands still during a request: the lead was created at the clock read before it.
      // Other scenarios moved the clock since: count from then.
      const remaining = Math.round((before.clockMs + lifetimeMs - (await clockNow(ctx))) / 1000);
      const early = ofEvent(await ctx.during(main.endpoint, Math.max(0, remaining - 1)), "lead.expired");
      const atExpiry = ofEvent(await ctx.quietFor(main.endpoint, 1), "lead.expired");
      await reopenExpired(ctx, expiring);
      const later = ofEvent(await ctx.quietFor(main.endpoint, watchAfterExpirySeconds(ctx)), "lead.expired");
      return { expiring, finalLeads, early, atExpiry, after: later };
    }
    // Scaled: the expiry fell due between the real instants the two readings map to; the scenario may
    // begin after it (a slower run), so every lead.expired of the run is judged by when it arrived.
    const realAt = (s: ClockSample, clockMs: number) => s.realMs + (clockMs - s.clockMs) * clock.factor;
    const { earlyRealMs, lateRealMs } = ctx.conformance.scaledClock.tolerance;
    const earliest = realAt(before, before.clockMs + lifetimeMs) - earlyRealMs - before.halfWidthMs;
    const latest = realAt(after, after.clockMs + lifetimeMs) + lateRealMs + after.halfWidthMs;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, latest - performance.now())));
    await reopenExpired(ctx, expiring);
    // A day more on the implementation's clock, from the reopening however late a slow run got to it: a
    // lead.expired now would be late, again, or a final lead's.
    const until = performance.now() + watchAfterExpirySeconds(ctx) * 1000 * clock.factor;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - performance.now())));
    const all = ofEvent(ctx.receiver.at(main.endpoint), "lead.expired");
    return {
      expiring,
      finalLeads,
      early: all.filter((d) => d.arrivedAt < earliest),
      atExpiry: all.filter((d) => d.arrivedAt >= earliest && d.arrivedAt <= latest),
      after: all.filter((d) => d.arrivedAt > latest),
    };
  });
}

/**
 * A late lead.updated back to responded for each expired lead: expired is final (D19), so it moves none
 * and none expires again. Sent once each should have expired; one that had not yet is still open, and
 * expires once all the same.
 */
async function reopenExpired(ctx: ServerContext, expiring: ExpiringLead[]): Promise<void> {
  const businessId = ctx.options.businessId;
  for (const { leadID, previousStatus } of expiring) {
    const updatedAt = (await ctx.control.clock()).now;
    await ctx.control.trigger("lead.updated", businessId, { leadID, businessID: businessId, status: "responded", previousStatus, updatedAt });
  }
}

// ---------------------------------------------------------------------------------------------
// Scenario: a webhook whose endpoint always fails, from the first attempt to disabling, a failure of
// each kind.

interface DisableRun {
  webhook: RegisteredWebhook;
  firstAttempts: Delivery[];
  retries: RetryObservation[];
  /** Attempts at the endpoint after the threshold was reached (old event or new ones). */
  afterDisable: Delivery[];
  /** Every e-mail the sink caught during the scenario, decoded, and those that name this webhook. */
  mails: DisableMailSeen[];
  mine: DisableMailSeen[];
  /** The data its message.received was triggered with. */
  triggered: Record<string, unknown>;
}

const DISABLE_SCENARIO =
  "one webhook whose endpoint always fails (503, 404, 307, a closed connection, no answer), another webhook of its business succeeding between its failures, until it is disabled";

function failingUntilDisabled(ctx: ServerContext): Promise<DisableRun> {
  return ctx.once("disable", async () => {
    const { retryWaitsSeconds, disableAfterConsecutiveFailures } = ctx.rules;
    const webhook = await ctx.register("always-failing", ["message.received"], ctx.options.businessId);
    // Every kind of failure counts toward the threshold alike (D6, D7): a 5xx, a 4xx, a 3xx, a closed
    // connection, and no answer, which disables. The redirect's target fails too: following it is
    // another check's fault.
    const kinds = [answers.status(503), answers.status(404), answers.redirect(ctx.receiver.url("always-failing-redirect")), answers.close, answers.hang];
    ctx.receiver.script(webhook.endpoint, kinds, answers.status(500));
    ctx.receiver.script("always-failing-redirect", [], answers.status(503));
    // Another webhook of the business, delivered to with success between the failures: its 2xx resets
    // its own count, not this webhook's (D7: one counter per webhook). lead.updated, which no other
    // webhook of the business subscribes to.
    const neighbour = await ctx.register("always-failing-neighbour", ["lead.updated"], ctx.options.businessId);
    const mailsBefore = ctx.smtp.messages.length;
    // Characters that encoders escape differently (HTML-safe <, > and &, a slash, non-ASCII): the
    // signature is of the bytes sent, whatever a re-serialization would write (D2).
    // Spaces at its ends too: the event carries the data as triggered, nothing escaped, trimmed or re-encoded.
    // A decomposed é beside a composed one: nothing normalized either way. A member the schema does not
    // define: events are open (D16), and the trigger's data is delivered as sent (D24).
    const data = {
      ...eventExample("message.received").data,
      text: "  Tuesday <9am> & after? R&D / café, cafe\u0301 — 5 > 4 ",
      conformanceNote: { kept: ["as sent", 1.5, true, null] },
    };
    await ctx.control.trigger("message.received", ctx.options.businessId, data);
    // The first alone: its retry, a first wait later (milliseconds under a scaled clock), may be there too.
    const firstAttempts = (await ctx.arrivals(webhook.endpoint, 0, 1, "the first attempt")).slice(0, 1);
    const retries: RetryObservation[] = [];
    // The threshold-th failed attempt disables: threshold - 1 retries happen.
    for (const wait of retryWaitsSeconds.slice(0, disableAfterConsecutiveFailures - 1)) {
      const observation = await ctx.nextAttempt(webhook.endpoint, wait);
      retries.push(observation);
      if (observation.verdict === "missing") break;
      if (retries.length === 1) {
        const since = ctx.count(neighbour.endpoint);
        // Naming a lead nobody holds: it moves none of the suite's open leads, whatever the implementation's example.
        await ctx.control.trigger("lead.updated", ctx.options.businessId, { ...eventExample("lead.updated").data, leadID: UNKNOWN_ID, businessID: ctx.options.businessId });
        await ctx.arrivals(neighbour.endpoint, since, 1, "the other webhook's success between the failures");
      }
    }
    const afterThreshold = ctx.count(webhook.endpoint);
    const nextWait = retryWaitsSeconds[disableAfterConsecutiveFailures - 1] ?? retryWaitsSeconds.at(-1)!;
    await ctx.quietFor(webhook.endpoint, Math.ceil(nextWait * 1.2));
    await ctx.control.trigger("message.received", ctx.options.businessId);
    await ctx.quietFor(webhook.endpoint, 0);
    const decodeSince = async () => Promise.all(ctx.smtp.messages.slice(mailsBefore).map(decodedOnce));
    // Until a copy naming this webhook reaches the contact: a copy to the platform's own mailbox may come
    // first, and another disabling's notice may come again now (D26: a repeat with its Message-ID).
    await waitForMails(
      ctx,
      (mails) => mails.some((mail) => isAbout(ctx, mail, webhook.webhookID) && addressedTo(mail, ctx.options.partnerEmail)),
      ctx.conformance.dueNowRealSeconds * 1000,
      "the disable e-mail",
    ).catch(() => undefined);
    // A little longer, on the clock: a second e-mail for the same disabling would come now.
    await ctx.quietFor(webhook.endpoint, 60);
    const mails = await decodeSince();
    return {
      webhook,
      firstAttempts,
      retries,
      afterDisable: ctx.receiver.at(webhook.endpoint).slice(afterThreshold),
      mails,
      mine: mails.filter((m) => isAbout(ctx, m, webhook.webhookID)),
      triggered: data,
    };
  });
}

/**
 * After the disabling: a new webhook registered at the disabled one's URL, as the disable e-mail tells the
 * partner to once the endpoint answers 2xx (D26), which it now does; then an event both subscribe to.
 */
function reRegisteredAtTheDisabledUrl(ctx: ServerContext): Promise<{ disabled: RegisteredWebhook; fresh: RegisteredWebhook; deliveries: Delivery[] }> {
  return ctx.once("re-registered", async () => {
    const { webhook: disabled } = await failingUntilDisabled(ctx);
    ctx.receiver.script(disabled.endpoint, [], answers.ok);
    const fresh = await ctx.register(disabled.endpoint, ["message.received"], ctx.options.businessId);
    const since = ctx.count(disabled.endpoint);
    await ctx.control.trigger("message.received", ctx.options.businessId);
    await ctx.arrivals(disabled.endpoint, since, 1, "the new webhook's attempt");
    await ctx.quietFor(disabled.endpoint, 0);
    return { disabled, fresh, deliveries: ctx.receiver.at(disabled.endpoint).slice(since) };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: failures, a success on another event (reset), further failures up to the last retry.

interface ResetRun {
  webhook: RegisteredWebhook;
  /** When the new event's first attempt came (performance.now()): until it, the webhook was never disabled. */
  newEventArrivedAt: number;
  waits: RetryObservation[];
  /** The reset-causing delivery arrived and was answered 2xx. */
  resetDelivered: boolean;
  /** When the reset-causing event's trigger answered, how long it took, and that event's first attempt, if it came (performance.now()). */
  resetTrigger: { answeredAt: number; tookMs: number; arrived?: Delivery };
  /** How long the suite held its answer to the attempt before the retry the success must come before, at most (0: not held). */
  holdMs: number;
  /** The retries after the reset: the 2 h and the 24 h wait. */
  afterReset: RetryObservation[];
  /** Attempts after the failed last retry (the event must be dropped). */
  afterLastRetry: Delivery[];
  /** A new event's attempts after its first, once the first event was dropped: at most 2 (disabled). */
  afterIdle: Delivery[];
}

/**
 * Event X's answers in the reset scenario, attempt by attempt. Every non-2xx is a failure retried on
 * the schedule (D6, D7), whatever it says: statuses servers take for "gone for good" (410), "do not
 * retry" (400, 401, 422) or "come back later" (429, 503), two of them with a Retry-After the schedule
 * ignores, one longer than the wait that follows it and one shorter.
 */
const RESET_X_ANSWERS = [
  answers.status(429, { "retry-after": "900" }),
  answers.afterInterim(410),
  answers.status(400),
  answers.status(503, { "retry-after": "3" }),
  answers.status(401, { "www-authenticate": 'Bearer realm="webhooks"' }),
  answers.status(422),
];

/** Real ms the reset scenario's receiver takes, under a scaled clock, to answer the failure before the 30 min wait (within any attempt timeout: at least 1 s). */
const SLOW_FAILURE_MS = 300;

/** Real ms the reset scenario waits, under a virtual clock, for a notice wrongly sent at the fourth failure. */
const EARLY_NOTICE_WATCH_MS = 1000;

const RESET_SCENARIO =
  "an event failing 4 times (429 with Retry-After: 900, 410, 400 answered 300 ms late under a scaled clock, 503 with Retry-After: 3; under a virtual clock a second for a notice that must not come), another event's success, the first event's last two retries failing (401, 422)";

function resetThenLongWaits(ctx: ServerContext): Promise<ResetRun> {
  return ctx.once("reset", async () => {
    const waits = ctx.rules.retryWaitsSeconds;
    const threshold = ctx.rules.disableAfterConsecutiveFailures;
    const webhook = await ctx.register("reset", ["payment.received", "review.created"], ctx.options.businessId);
    // Event X (payment.received) fails every attempt; event Y (review.created), triggered once X has
    // failed threshold - 2 times and its next attempt has come, succeeds. Under a scaled clock X's
    // (threshold - 1)-th attempt gets its answer only once Y's trigger has answered or Y has come (at
    // most holdMs, within any attempt timeout): X's next retry, 2 h later (216 ms at the slowest scale
    // certified), is then due after Y is, however long the trigger takes to store its event, and Y's
    // success lands after X's second failure and before its fifth either way.
    const scaled = ctx.options.clock.kind === "scaled";
    const holdMs = scaled ? Math.min(600, 0.6 * ctx.conformance.scaledClock.attemptTimeoutFloorRealSeconds * 1000) : 0;
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let xAttempts = 0;
    ctx.receiver.respond(webhook.endpoint, async (d) => {
      if (eventNameOf(d) === "review.created") {
        release();
        return answers.ok;
      }
      if (++xAttempts === threshold - 1 && holdMs > 0) await Promise.race([released, delay(holdMs, undefined, { ref: false })]);
      // Under a scaled clock the failure before the 30 min wait is answered late: a retry counted from the
      // attempt's start, not from its failure (D7), then comes the answer's lateness early.
      if (xAttempts === threshold - 2 && scaled) await delay(SLOW_FAILURE_MS, undefined, { ref: false });
      return RESET_X_ANSWERS[xAttempts - 1] ?? answers.status(500);
    });
    await ctx.control.trigger("payment.received", ctx.options.businessId);
    await ctx.arrivals(webhook.endpoint, 0, 1, "the first attempt");
    const observed: RetryObservation[] = [];
    for (const wait of waits.slice(0, threshold - 2)) observed.push(await ctx.nextAttempt(webhook.endpoint, wait));
    const lastOfX = ctx.receiver.at(webhook.endpoint).at(-1);
    // Under a virtual clock the rest of the scenario takes a few ms of real time: a notice sent at this
    // fourth failure (one early) would come only after the failures that legally disable the webhook.
    // A second is given for it to come first (no-notice-before-disabling), ended by any e-mail naming the webhook.
    if (ctx.options.clock.kind === "virtual") {
      await waitForMails(ctx, (mails) => mails.some((m) => isAbout(ctx, m, webhook.webhookID)), EARLY_NOTICE_WATCH_MS, "an early notice").catch(() => undefined);
    }
    const beforeY = ctx.count(webhook.endpoint);
    const sentY = performance.now();
    await ctx.control.trigger("review.created", ctx.options.businessId).finally(release);
    const triggeredY = performance.now();
    const reset = await ctx.arrivals(webhook.endpoint, beforeY, 1, "the resetting delivery");
    // X's next retry counts from that answer (D7: after the failure).
    if (lastOfX) await ctx.receiver.waitFor(() => lastOfX.answeredAt !== undefined, holdMs + 1000, "the held answer").catch(() => undefined);
    // Among what came since the trigger was sent: a trigger that answers late may do so after the
    // first event's next retry came too.
    const resetDelivered = reset.some((d) => envelopeOf(d).event === "review.created" && isSuccess(d));
    const afterReset: RetryObservation[] = [];
    const [wait5, ...later] = waits.slice(threshold - 2);
    afterReset.push(await ctx.nextAttempt(webhook.endpoint, wait5!, { since: lastOfX }));
    for (const wait of later) afterReset.push(await ctx.nextAttempt(webhook.endpoint, wait));
    const afterLastRetry = await ctx.quietFor(webhook.endpoint, Math.ceil(waits.at(-1)! * 1.2));
    const y = ctx.receiver.at(webhook.endpoint).slice(beforeY).find((d) => envelopeOf(d).event === "review.created");
    // X is dropped, nothing of the webhook is pending, and the failures since Y still count (D7: only a
    // 2xx resets): two, or three where Y's success was recorded just before X's fourth failure. A new
    // X-named event, failing too, disables the webhook by its second or third failure, where a count
    // forgotten while nothing was pending would take five. Here, before another scenario's
    // review.created can reach this webhook and reset its count.
    // The notice of the disabling to come is refused once (451): an e-mail the SMTP server does not take
    // is kept and tried again (D26: refused-notice-is-sent-again).
    ctx.smtp.refuseOnce(async (mail) => isAbout(ctx, await decodedOnce(mail), webhook.webhookID));
    const sinceZ = ctx.count(webhook.endpoint);
    await ctx.control.trigger("payment.received", ctx.options.businessId);
    const [z] = await ctx.arrivals(webhook.endpoint, sinceZ, 1, "the new event's first attempt");
    // Its 1 min and 5 min retries (the second may never come), then as long as its 30 min retry would take.
    for (const wait of waits.slice(0, 2)) await ctx.nextAttempt(webhook.endpoint, wait);
    await ctx.quietFor(webhook.endpoint, Math.ceil(waits[2]! * 1.2));
    return {
      webhook,
      newEventArrivedAt: z?.arrivedAt ?? Infinity,
      waits: observed,
      resetDelivered,
      resetTrigger: { answeredAt: triggeredY, tookMs: triggeredY - sentY, ...(y ? { arrived: y } : {}) },
      holdMs,
      afterReset,
      afterLastRetry,
      afterIdle: ctx.receiver.at(webhook.endpoint).slice(sinceZ + 1),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: an event failing 4 times, then a new event of another name whose first attempt fails too:
// only a 2xx resets the count, and one count spans the webhook's events, so that failure is the fifth
// in a row and disables the webhook, cancelling the first event's pending retry. Every attempt fails,
// so the order of the new event's first attempt and the old event's next retry decides nothing.

interface NewEventRun {
  webhook: RegisteredWebhook;
  /** Attempts after the first event's fourth, the second event's first attempt included. */
  afterFourth: Delivery[];
  /** The first event's id and the second's. */
  first?: string;
  second?: string;
}

/** The status of the failure that disables the new-event-after-failures scenario's webhook, its earlier ones 503. */
const LAST_FAILURE_STATUS = 507;

function newEventAfterFailures(ctx: ServerContext): Promise<NewEventRun> {
  return ctx.once("new-event-after-failures", async () => {
    const { retryWaitsSeconds, disableAfterConsecutiveFailures } = ctx.rules;
    const business = ctx.options.businessId;
    // No other scenario's webhook of this business subscribes to booking.cancelled; the reset
    // scenario's, subscribed to review.created, is disabled by the end of that scenario (it runs first).
    const webhook = await ctx.register("new-event-after-failures", ["booking.cancelled", "review.created"], business);
    // 503 to the first event's four attempts, 507 to what comes after: the failure that disables is a 507,
    // which its notice gives as the last failure (disable-email-states-last-failure).
    ctx.receiver.script(webhook.endpoint, Array.from({ length: disableAfterConsecutiveFailures - 1 }, () => answers.status(503)), answers.status(LAST_FAILURE_STATUS));
    await ctx.control.trigger("booking.cancelled", business);
    const [first] = await ctx.arrivals(webhook.endpoint, 0, 1, "the first event's first attempt");
    let seen = 1;
    for (const wait of retryWaitsSeconds.slice(0, disableAfterConsecutiveFailures - 2)) {
      if ((await ctx.nextAttempt(webhook.endpoint, wait)).verdict === "missing") break;
      seen++;
    }
    // Counted from the fourth attempt, not from the trigger: a trigger that answers late may come
    // after the first event's next retry.
    const since = ctx.count(webhook.endpoint);
    await ctx.control.trigger("review.created", business);
    await ctx.arrivals(webhook.endpoint, since, 1, "the second event's first attempt");
    // Long enough for the first event's next retry and the second's first retry, had either been kept.
    await ctx.quietFor(webhook.endpoint, Math.ceil(retryWaitsSeconds[disableAfterConsecutiveFailures - 2]! * 1.2));
    const afterFourth = ctx.receiver.at(webhook.endpoint).slice(seen);
    const firstId = first && envelopeOf(first).id;
    const second = afterFourth.map((d) => envelopeOf(d).id).find((id) => id !== firstId);
    return { webhook, afterFourth, ...(firstId ? { first: firstId } : {}), ...(second ? { second } : {}) };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: a retry's 2xx resets the count as a first attempt's does (D7: any 2xx). An event fails
// twice and its second retry succeeds; a second event then fails three times: five failures in all,
// three in a row, so its third retry is still made.

const RETRY_SUCCESS_SCENARIO =
  "an event failing twice, then answered 2xx on its second retry; then a second event failing three times, whose third retry must still come";

interface RetrySuccessRun {
  /** The second event's attempt after its third failure. */
  afterThirdFailure: RetryObservation;
  /** Whether the first event's second retry came and was answered 2xx. */
  retrySucceeded: boolean;
}

function retrySuccessThenFailures(ctx: ServerContext): Promise<RetrySuccessRun> {
  return ctx.once("retry-success", async () => {
    const waits = ctx.rules.retryWaitsSeconds;
    const business = ctx.options.otherBusinessId;
    // payment.received of the other business: the across-events scenario's webhook takes it too, and is
    // disabled by the end of that scenario. Its URL has capitals in its path and a query, with an escape
    // (delivery-goes-to-the-registered-url: delivered to as registered, nothing lower-cased or dropped).
    const webhook = await ctx.register("Retry-Success", ["payment.received"], business, undefined, "partner=Acme&name=R%C3%A9sum%C3%A9");
    // By event, in the order they come: the first fails twice, the second three times; any other is answered 2xx.
    const failuresOf = [2, 3];
    ctx.receiver.respond(webhook.endpoint, (d) => {
      const { attempt, event } = placeOf(ctx, d);
      return attempt <= (failuresOf[event] ?? 0) ? answers.status(500) : answers.ok;
    });
    await ctx.control.trigger("payment.received", business);
    await ctx.arrivals(webhook.endpoint, 0, 1, "the first event's first attempt");
    await ctx.nextAttempt(webhook.endpoint, waits[0]!);
    const retry = await ctx.nextAttempt(webhook.endpoint, waits[1]!);
    const succeeded = ctx.receiver.at(webhook.endpoint).at(-1);
    const retrySucceeded = retry.verdict !== "missing" && succeeded !== undefined && isSuccess(succeeded);
    // The second event only once that success was answered: its failures come after it (D7's order).
    if (succeeded) await ctx.receiver.waitFor(() => succeeded.answeredAt !== undefined, ctx.conformance.dueNowRealSeconds * 1000, "the retry's 2xx").catch(() => undefined);
    const since = ctx.count(webhook.endpoint);
    await ctx.control.trigger("payment.received", business);
    await ctx.arrivals(webhook.endpoint, since, 1, "the second event's first attempt");
    await ctx.nextAttempt(webhook.endpoint, waits[0]!);
    await ctx.nextAttempt(webhook.endpoint, waits[1]!);
    const afterThirdFailure = await ctx.nextAttempt(webhook.endpoint, waits[2]!);
    return { afterThirdFailure, retrySucceeded };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: answers that are failures without being 5xx: a redirect, a closed connection, no answer.

interface FailureKindsRun {
  redirect: RetryObservation;
  redirectFollowed: number;
  closed: RetryObservation;
  timeout: RetryObservation;
  /** The retry after an attempt answered 200 with a body that never ended. */
  unfinished: RetryObservation;
  /** The attempt that got no answer: when its trigger was sent, when it arrived, and when it was given up. */
  unanswered: { triggeredAt: number; arrivedAt: number; givenUp?: { at: number; by: "closing its connection" | "its retry" } };
}

function failureKinds(ctx: ServerContext): Promise<FailureKindsRun> {
  return ctx.once("failure-kinds", async () => {
    // On the other business, one kind at a time, with events no other webhook there subscribes to (the
    // basics scenario's lead.updated for it comes before these webhooks, or with --only after their
    // scripts ran out, answered 2xx).
    const business = ctx.options.otherBusinessId;
    const firstWait = ctx.rules.retryWaitsSeconds[0]!;
    const redirect = await ctx.register("redirecting", ["booking.cancelled"], business);
    ctx.receiver.script(redirect.endpoint, [answers.redirect(ctx.receiver.url("redirect-target"))]);
    await ctx.control.trigger("booking.cancelled", business);
    await ctx.arrivals(redirect.endpoint, 0, 1, "the first attempt at the redirecting endpoint");
    const redirected = await ctx.nextAttempt(redirect.endpoint, firstWait);

    const closed = await ctx.register("closing", ["lead.updated"], business);
    ctx.receiver.script(closed.endpoint, [answers.close]);
    await ctx.control.trigger("lead.updated", business);
    await ctx.arrivals(closed.endpoint, 0, 1, "the first attempt at the closing endpoint");
    const closedRetry = await ctx.nextAttempt(closed.endpoint, firstWait);

    // No answer: the attempt lasted the whole timeout, and its retry is due the first wait after that
    // (D6, D24): timeout + wait after it began, the timeout being real time under a scaled clock.
    const hanging = await ctx.register("hanging", ["lead.updated"], business);
    ctx.receiver.script(hanging.endpoint, [answers.hang]);
    const triggeredAt = performance.now();
    await ctx.control.trigger("lead.updated", business);
    await ctx.arrivals(hanging.endpoint, 0, 1, "the first attempt at the hanging endpoint");
    const timeoutSeconds = ctx.rules.attemptTimeoutSeconds;
    const scaled = ctx.options.clock.kind === "scaled" ? ctx.options.clock.factor : undefined;
    const timeout = await ctx.nextAttempt(hanging.endpoint, timeoutSeconds + firstWait, {
      // The attempt began no earlier than its trigger, and before it arrived (connecting, TLS): early
      // only if early counted from the trigger.
      ...(scaled ? { scaledRealMs: scaledAttemptTimeoutMs(ctx, scaled) + firstWait * scaled * 1000, startedAfter: triggeredAt } : {}),
    });
    // Given up by the time its connection closed or its retry came (a server may give up an attempt and
    // close its connection later; an advance waits for attempts under way, D24).
    const [first, retry] = ctx.receiver.at(hanging.endpoint);
    const givenUp =
      first?.abandonedAt !== undefined && (retry === undefined || first.abandonedAt <= retry.arrivedAt)
        ? { at: first.abandonedAt, by: "closing its connection" as const }
        : retry && { at: retry.arrivedAt, by: "its retry" as const };
    const unanswered = { triggeredAt, arrivedAt: first!.arrivedAt, ...(givenUp ? { givenUp } : {}) };

    // A 200 whose body never ends is no complete answer (D6): a failure when the timeout is up, as no
    // answer is. An HTTP client that hands back the status before the body, read as the outcome, takes it
    // for a success. lead.updated reaches the two webhooks above too, which answer 2xx by now.
    const unfinished = await ctx.register("unfinished", ["lead.updated"], business);
    ctx.receiver.script(unfinished.endpoint, [answers.unfinished(200)]);
    const unfinishedTriggeredAt = performance.now();
    await ctx.control.trigger("lead.updated", business);
    await ctx.arrivals(unfinished.endpoint, 0, 1, "the first attempt at the endpoint whose 200 never ends");
    const unfinishedRetry = await ctx.nextAttempt(unfinished.endpoint, timeoutSeconds + firstWait, {
      ...(scaled ? { scaledRealMs: scaledAttemptTimeoutMs(ctx, scaled) + firstWait * scaled * 1000, startedAfter: unfinishedTriggeredAt } : {}),
    });
    return { redirect: redirected, redirectFollowed: ctx.count("redirect-target"), closed: closedRetry, timeout, unfinished: unfinishedRetry, unanswered };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: the receiver presents, for an event each, a certificate of a CA the implementation was not
// told to trust, then one of the trusted CA for another host name: the attempts must be refused (D6: a
// TLS error fails an attempt) and the events delivered by a retry once its own certificate is back. Its
// checks come before every other delivery check: nothing else is under way to be refused meanwhile.

interface CertificateRun {
  /** Attempts that came over a connection with the certificate presented (none may). */
  accepted: Delivery[];
  /** Connections the implementation refused while it was presented. */
  refusals: Refusal[];
  /** Events triggered while it was presented, and how many events were delivered once the own certificate was back. */
  events: number;
  delivered: number;
}

/** Events triggered while a certificate is presented, until one of their attempts makes a handshake with it. */
const CERTIFICATE_EVENTS = 3;

function certificates(ctx: ServerContext): Promise<{ untrusted: CertificateRun; wrongHost: CertificateRun; expired: CertificateRun }> {
  return ctx.once("certificates", async () => {
    const business = ctx.options.otherBusinessId;
    const webhook = await ctx.register("certificates", ["lead.expired"], business);
    const untrusted = await untrustedCertificate(ctx, "untrusted");
    const wrongHost = { label: "wrong-host", ...(await ctx.receiver.issue("wrong-host.invalid")) };
    const expired = { label: "expired", ...(await ctx.receiver.issue(hostOf(ctx.receiver.url("")), -1)) };
    return {
      untrusted: await presentedFor(ctx, webhook, business, untrusted),
      wrongHost: await presentedFor(ctx, webhook, business, wrongHost),
      expired: await presentedFor(ctx, webhook, business, expired),
    };
  });
}

/** A certificate for the receiver's host from a CA the implementation was not told to trust, presented as `label`. */
async function untrustedCertificate(ctx: ServerContext, label: string): Promise<PresentedCertificate> {
  return { label, ...(await issueServerCertificate(await createTestCa(1), hostOf(ctx.receiver.url("")))) };
}

async function presentedFor(ctx: ServerContext, webhook: RegisteredWebhook, business: string, certificate: PresentedCertificate): Promise<CertificateRun> {
  const since = ctx.count(webhook.endpoint);
  const refusalsBefore = ctx.receiver.refusals.length;
  const refused = () => ctx.receiver.refusals.slice(refusalsBefore).filter((r) => r.presented === certificate.label);
  let events = 0;
  ctx.receiver.present(certificate);
  try {
    // Another event if the attempt never made a handshake (a pooled connection the receiver had just
    // closed, which fails without one): at most CERTIFICATE_EVENTS.
    while (events < CERTIFICATE_EVENTS && refused().length === 0 && ctx.count(webhook.endpoint) === since) {
      await ctx.control.trigger("lead.expired", business);
      events++;
      if (ctx.options.clock.kind === "virtual") await ctx.clock.elapse(0);
      await ctx.receiver
        .waitFor(() => refused().length > 0 || ctx.count(webhook.endpoint) > since, ctx.conformance.dueNowRealSeconds * 1000, "an attempt while another certificate is presented")
        .catch(() => undefined);
    }
    // Its first retry meets the certificate too: a retry is verified as a first attempt is (D6). One event's
    // alone: with more, their failures and retries' could add up to a disabling.
    if (events === 1) {
      const firstWait = ctx.rules.retryWaitsSeconds[0]!;
      if (ctx.options.clock.kind === "virtual") await ctx.quietFor(webhook.endpoint, firstWait);
      // Under a scaled clock the next retries are due a few ms later, and D25's band for the first is wider
      // than that: the certificate goes once the first retry met it, so that no more of them fail than must.
      else {
        const realMs = ctx.clock.realMs(firstWait);
        await ctx.receiver.waitFor(() => refused().length > 1 || ctx.count(webhook.endpoint) > since, realMs + scaledTolerance(realMs).lateMs, "the first retry").catch(() => undefined);
      }
    }
  } finally {
    ctx.receiver.present(undefined);
  }
  const accepted = ctx.receiver.at(webhook.endpoint).slice(since).filter((d) => d.presented === certificate.label);
  const refusals = refused();
  const delivered = () => new Set(ctx.receiver.at(webhook.endpoint).slice(since).filter((d) => d.presented === "own" && isSuccess(d)).map((d) => envelopeOf(d).id));
  // Their retries, or later ones where a retry came before the own certificate was back (a scaled clock's
  // short waits: the third retry, 2 h after, may be the first to meet it, and it may be late by D25's allowance).
  const retriesWithin = Math.ceil(ctx.rules.retryWaitsSeconds.slice(0, 3).reduce((a, b) => a + b, 0) * 1.2);
  const cameBack = () => delivered().size >= events;
  if (ctx.options.clock.kind === "virtual") await ctx.quietFor(webhook.endpoint, retriesWithin);
  // Real time: polled, not waited out (the retries usually come with the first of them).
  else {
    const realMs = ctx.clock.realMs(retriesWithin);
    await ctx.receiver.waitFor(cameBack, realMs + scaledTolerance(realMs).lateMs, "a retry once the receiver's own certificate was back").catch(() => undefined);
  }
  await ctx.retriesCame(cameBack, "a retry once the receiver's own certificate was back");
  // The first deliveries of a run: one that refuses the receiver's own certificate too stops here with what to change.
  if (ctx.receiver.refusals.some((r) => r.presented === "own")) await ctx.arrivals(webhook.endpoint, since, 1, "a retry once the receiver's own certificate was back");
  return { accepted, refusals, events, delivered: delivered().size };
}

/** The verdict on one certificate: refused, never sent over, and the events delivered later. */
function expectRefused(run: CertificateRun, what: string): void {
  expectThat(
    run.accepted.length === 0,
    `an attempt was sent over a connection to a receiver presenting ${what} (D6: a TLS error fails the attempt, a retry's as a first attempt's; verify the receiver's certificate, its host name and its dates, as any HTTPS client does)`,
    "no attempt over it",
    run.accepted.map((d) => `${envelopeOf(d).event} ${envelopeOf(d).id}`),
  );
  expectThat(run.refusals.length > 0, `no attempt came while the receiver presented ${what}`, "a refused connection", `none within ${run.events} events`);
  expectEqual(
    { eventsDelivered: run.delivered },
    { eventsDelivered: run.events },
    "an event whose attempt was refused was not delivered by a retry once the receiver's own certificate was back: a TLS error must fail the attempt (D6), to be retried (D7)",
  );
}

// ---------------------------------------------------------------------------------------------
// Scenario: the receiver presents a certificate of a CA the implementation was not told to trust while
// five events are triggered for a webhook of their own, one at a time: failed handshakes are failed
// attempts like any other (D6), so the fifth in a row disables the webhook (D7), with its notice (D26).
// Then its own certificate again, and one more event, which must not reach it; nor may the refused
// events' retries. Run right after the certificate checks, for the same reason: every attempt made
// meanwhile is refused.

interface TlsDisableRun {
  webhook: RegisteredWebhook;
  /** Events triggered while the certificate was presented, and the connections refused meanwhile. */
  events: number;
  refusals: number;
  /** Whether a notice about the webhook came before its own certificate was back. */
  noticed: boolean;
  /** What reached the webhook's endpoint once its own certificate was back (an event triggered then, retries). */
  afterwards: Delivery[];
}

function tlsFailuresUntilDisabled(ctx: ServerContext): Promise<TlsDisableRun> {
  return ctx.once("tls-disable", async () => {
    const business = ctx.options.businessId;
    const threshold = ctx.rules.disableAfterConsecutiveFailures;
    const dueNowMs = ctx.conformance.dueNowRealSeconds * 1000;
    // review.created of --business-id: no webhook the suite registered before takes it.
    const webhook = await ctx.register("tls-disabled", ["review.created"], business);
    const certificate = await untrustedCertificate(ctx, "untrusted-until-disabled");
    const refusalsBefore = ctx.receiver.refusals.length;
    const refused = () => ctx.receiver.refusals.slice(refusalsBefore).filter((r) => r.presented === certificate.label).length;
    const noticed = (mails: readonly DisableMailSeen[]) => mails.some((m) => isAbout(ctx, m, webhook.webhookID));
    let events = 0;
    ctx.receiver.present(certificate);
    try {
      // Five events, one at a time, each until one more handshake was refused: five attempts whatever
      // else is refused (a client that tries a handshake twice), and whatever fails without a handshake
      // (a pooled connection the receiver has just closed). Under a scaled clock the retries' refusals
      // may disable the webhook sooner; the later events then queue nothing.
      while (events < threshold) {
        await ctx.control.trigger("review.created", business);
        events++;
        if (ctx.options.clock.kind === "virtual") await ctx.clock.elapse(0);
        await ctx.receiver.waitFor(() => refused() >= events, dueNowMs, "a refused attempt while another certificate is presented").catch(() => undefined);
      }
      // The notice falls due with the fifth failure (D26: within 5 s; when is each-disabling-sends-one-notice-in-time's concern).
      await waitForMails(ctx, noticed, dueNowMs + 1000, "the notice of the webhook disabled by failed handshakes").catch(() => undefined);
    } finally {
      ctx.receiver.present(undefined);
    }
    const refusals = refused();
    const mails = (await receivedMails(ctx)).map(({ mail }) => mail);
    const since = ctx.count(webhook.endpoint);
    await ctx.control.trigger("review.created", business);
    // The new event's first attempt comes at once, the refused events' first retries a first wait later.
    await ctx.quietFor(webhook.endpoint, Math.ceil(ctx.rules.retryWaitsSeconds[0]! * 1.2));
    return { webhook, events, refusals, noticed: noticed(mails), afterwards: ctx.receiver.at(webhook.endpoint).slice(since) };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario (with --second-partner-email): a webhook of the second client, another partner, whose events'
// first attempts all fail: disabled by the fifth, its notice must go to that partner's contact. Run after
// the first client's disablings, so that every notice of the run is there to see who received it.

function secondPartnerDisabled(ctx: ServerContext): Promise<{ webhook: RegisteredWebhook; mails: DisableMailSeen[] }> {
  return ctx.once("second-partner", async () => {
    // With --only, the first client's disablings first: their notices are what must not reach this partner.
    await failingUntilDisabled(ctx);
    await failuresAcrossEvents(ctx);
    await newEventAfterFailures(ctx);
    const threshold = ctx.rules.disableAfterConsecutiveFailures;
    const webhook = await ctx.registerAsSecondClient("second-partner-failing", ["payment.received"]);
    ctx.receiver.script(webhook.endpoint, [], answers.status(503));
    // An event of each of the first client's businesses, which this webhook takes by name only: neither
    // may reach it (D27; every-delivery-matches-its-webhook judges what came there). The first client's
    // webhooks that take it were disabled by the scenarios before.
    for (const business of [ctx.options.businessId, ctx.options.otherBusinessId]) await ctx.control.trigger("payment.received", business);
    await Promise.all(Array.from({ length: threshold }, () => ctx.control.trigger("payment.received", webhook.businessID)));
    await ctx.arrivals(webhook.endpoint, 0, threshold, `the first attempts of the second client's ${threshold} events`);
    await waitForMails(
      ctx,
      (mails) => mails.some((mail) => isAbout(ctx, mail, webhook.webhookID) && addressedTo(mail, ctx.options.secondPartnerEmail ?? "")),
      ctx.conformance.dueNowRealSeconds * 1000,
      "the second partner's disable e-mail",
    ).catch(() => undefined);
    // A little longer, on the clock: a copy to anyone else would have come by now.
    await ctx.quietFor(webhook.endpoint, 60);
    return { webhook, mails: (await receivedMails(ctx)).map(({ mail }) => mail) };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: two webhooks of one business registered with the same URL, as a partner rotating its
// secret has them for a while: one event, which each must receive signed with its own secret (D9).
// A triggered lead.created of the other business (it stores no lead), which no other scenario's webhook
// subscribes to; the basics scenario's requests may have emitted some before.

interface SharedUrlRun {
  webhooks: RegisteredWebhook[];
  /** Why the second registration was refused, if it was. */
  refused?: string;
  /** The lead.created attempts at the URL after the registrations. */
  deliveries: Delivery[];
}

function webhooksSharingAUrl(ctx: ServerContext): Promise<SharedUrlRun> {
  return ctx.once("shared-url", async () => {
    const business = ctx.options.otherBusinessId;
    const endpoint = "shared-url";
    const first = await ctx.register(endpoint, ["lead.created"], business);
    let second: RegisteredWebhook;
    try {
      second = await ctx.register(endpoint, ["lead.created"], business);
    } catch (e) {
      return { webhooks: [first], refused: (e as Error).message, deliveries: [] };
    }
    const since = ctx.count(endpoint);
    await ctx.control.trigger("lead.created", business);
    await ctx.arrivals(endpoint, since, 2, "the event's attempts at the two webhooks of one URL");
    // A repeat at one webhook (at-least-once) may come before the other's attempt.
    const signedFor = (w: RegisteredWebhook) => ctx.receiver.at(endpoint).slice(since).some((d) => signedWith(ctx, d, w.secret));
    await ctx.receiver.waitFor(() => [first, second].every(signedFor), ctx.conformance.dueNowRealSeconds * 1000, "an attempt for each webhook of the URL").catch(() => undefined);
    return { webhooks: [first, second], deliveries: ctx.receiver.at(endpoint).slice(since).filter((d) => eventNameOf(d) === "lead.created") };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: one step of the clock over an event's first two retries (D24: an advance makes what falls
// due on the way, in order, a retry that falls due within it included). The retry after the first
// fails falls due inside the same step.

const ONE_STEP_SCENARIO =
  "an event whose first two attempts fail, then one step of the clock past its first two retries' due instants (a virtual clock's single advance)";

function oneStepOverTwoRetries(ctx: ServerContext): Promise<{ attempts: number; seconds: number }> {
  return ctx.once("one-step", async () => {
    const business = ctx.options.otherBusinessId;
    const [first, second] = ctx.rules.retryWaitsSeconds as [number, number];
    // payment.received of the other business, as the reset-after-retry scenario's (which answers a third event 2xx).
    const webhook = await ctx.register("one-step", ["payment.received"], business);
    ctx.receiver.respond(webhook.endpoint, (d) => (placeOf(ctx, d).attempt <= 2 ? answers.status(500) : answers.ok));
    await ctx.control.trigger("payment.received", business);
    await ctx.arrivals(webhook.endpoint, 0, 1, "the first attempt");
    // Past the second retry's due instant by half a first wait, short of a third retry's.
    const seconds = first + second + Math.ceil(first / 2);
    await ctx.quietFor(webhook.endpoint, seconds);
    // A scaled clock has no single step: the second retry is counted from the first's failure. It
    // succeeds: nothing comes after it.
    await ctx.retriesCame(() => ctx.count(webhook.endpoint) >= 3, "the second retry");
    return { attempts: ctx.count(webhook.endpoint), seconds };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: two more webhooks with one URL, each failing three times: six failures at the URL, three
// of each webhook. The count is the webhook's (D7), so neither is disabled and every retry comes.

/** Events whose first attempt at each webhook of the shared URL fails. */
const SHARED_URL_FAILURES = 3;
/** A cause that shows as more failures than the receiver saw (the two checks it fails name it). */
const UNSENT_COUNTED = "attempts that never reached the receiver were counted as failures (a timeout that runs while an attempt waits for a connection of the server's own pool, D6)";

interface SharedUrlFailuresRun {
  /** Why the second registration was refused, if it was. */
  refused?: string;
  /** Per webhook, how many of the events (each first attempt failed there, or never came whole) were then answered 2xx there. */
  deliveredAfterFailing: number[];
  /** Deliveries signed with neither webhook's secret: the suite tells the two webhooks apart by it. */
  unattributed: number;
}

function failuresAtASharedUrl(ctx: ServerContext): Promise<SharedUrlFailuresRun> {
  return ctx.once("shared-url-failures", async () => {
    const business = ctx.options.otherBusinessId;
    const endpoint = "shared-url-failing";
    const webhooks = [await ctx.register(endpoint, ["lead.created"], business)];
    try {
      webhooks.push(await ctx.register(endpoint, ["lead.created"], business));
    } catch (e) {
      return { refused: (e as Error).message, deliveredAfterFailing: [], unattributed: 0 };
    }
    const total = webhooks.length * SHARED_URL_FAILURES;
    const whose = (d: Delivery) => webhooks.findIndex((w) => signedWith(ctx, d, w.secret));
    /** The first attempts failed, as "event webhook"; and events first seen once the suite stopped waiting for those. */
    const failed = new Set<string>();
    const late = new Set<string>();
    let firstsOver = false;
    // Each event's first attempt at each webhook fails, once all of them are there: no retry, due a
    // first wait later (a few ms on a scaled clock), comes between them. Whatever comes once the suite
    // stopped waiting for them is a retry, answered 2xx: also that of a first attempt the server gave
    // up before it came whole (D6: connecting and TLS are within its timeout, which a loaded machine can spend).
    ctx.receiver.respond(endpoint, async (d) => {
      const key = `${eventIdOf(d)} ${whose(d)}`;
      if (firstsOver) {
        if (!failed.has(key)) late.add(key);
        return answers.ok;
      }
      if (failed.has(key) || failed.size >= total) return answers.ok;
      failed.add(key);
      await ctx.receiver.waitFor(() => failed.size === total, ctx.conformance.dueNowRealSeconds * 1000, "every first attempt at the shared URL").catch(() => undefined);
      return answers.status(500);
    });
    await Promise.all(Array.from({ length: SHARED_URL_FAILURES }, () => ctx.control.trigger("lead.created", business)));
    await ctx.arrivals(endpoint, 0, total, `the first attempts of ${SHARED_URL_FAILURES} events at each of two webhooks with one URL`);
    firstsOver = true;
    // Long enough for each failure's first retry (a disabled webhook's never come).
    await ctx.quietFor(endpoint, Math.ceil(ctx.rules.retryWaitsSeconds[0]! * 1.2));
    // Per webhook, its failed events answered 2xx since, and as many events first seen late as its first
    // attempts the receiver never saw whole (a retry with an id of its own is no delivery of the failed event).
    const delivered = () => {
      const succeeded = new Set(ctx.receiver.at(endpoint).filter(isSuccess).map((d) => `${eventIdOf(d)} ${whose(d)}`));
      return webhooks.map((_, i) => {
        const mine = (keys: Set<string>) => [...keys].filter((key) => key.endsWith(` ${i}`));
        const failedHere = mine(failed);
        const deliveredOf = (keys: string[]) => keys.filter((key) => succeeded.has(key)).length;
        return deliveredOf(failedHere) + Math.min(SHARED_URL_FAILURES - failedHere.length, deliveredOf(mine(late)));
      });
    };
    await ctx.retriesCame(() => delivered().every((n) => n === SHARED_URL_FAILURES), "the retries at the shared URL");
    return {
      deliveredAfterFailing: delivered(),
      unattributed: ctx.receiver.at(endpoint).filter((d) => whose(d) < 0).length,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: 2xx answers other than 200 (the example receivers answer 204): each succeeds, so its event
// is never attempted again. Events of the other business's lead.expired, which no other scenario
// triggers (a lead of that business expiring in the lead scenario arrives too, answered alike).

const OTHER_2XX = [201, 202, 204, 299] as const;

interface Other2xxRun {
  /** Each event's attempts, by id, with the status its first attempt got. */
  events: { id: string; firstAnswer: number; attempts: number }[];
}

function other2xxAnswers(ctx: ServerContext): Promise<Other2xxRun> {
  return ctx.once("other-2xx", async () => {
    const business = ctx.options.otherBusinessId;
    const webhook = await ctx.register("other-2xx", ["lead.expired"], business);
    const firstAnswer = new Map<string, number>();
    // Each event's first attempt the next of OTHER_2XX; an attempt again of an event answered 200.
    ctx.receiver.respond(webhook.endpoint, (d) => {
      const id = envelopeOf(d).id;
      if (firstAnswer.has(id)) return answers.ok;
      const status = OTHER_2XX[firstAnswer.size % OTHER_2XX.length]!;
      firstAnswer.set(id, status);
      return answers.status(status);
    });
    await Promise.all(OTHER_2XX.map(() => ctx.control.trigger("lead.expired", business)));
    await ctx.arrivals(webhook.endpoint, 0, OTHER_2XX.length, `${OTHER_2XX.length} first attempts answered ${OTHER_2XX.join(", ")}`);
    // Long enough for each event's first retry, had any answer been taken for a failure.
    await ctx.quietFor(webhook.endpoint, Math.ceil(ctx.rules.retryWaitsSeconds[0]! * 1.2));
    const ids = ctx.receiver.at(webhook.endpoint).map((d) => envelopeOf(d).id);
    return { events: [...firstAnswer].map(([id, status]) => ({ id, firstAnswer: status, attempts: ids.filter((i) => i === id).length })) };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: first attempts of several events fail together: the counter spans the webhook's events.
// One event more, whose first attempt is answered 2xx once those failures were and AFTER_FAILURES_GAP_MS more:
// where it is under way when the webhook is disabled, its success is recorded after the disabling, and
// leaves the webhook disabled (D9).

/** How long after the failures the extra event's success is answered: read before them, it would leave the webhook disabled all the same. */
const AFTER_FAILURES_GAP_MS = 50;

const ACROSS_EVENTS_SCENARIO = `five events whose first attempts fail together, a sixth whose first attempt is answered 2xx ${AFTER_FAILURES_GAP_MS} ms after those failures, then a seventh event`;

interface AcrossEventsRun {
  webhook: RegisteredWebhook;
  /** Attempts after the failures' retries would have come, but of the event triggered then. */
  afterDisabled: Delivery[];
  /** Whether the extra event's first attempt came and was answered 2xx after the disabling failures. */
  succeededAfterDisabling: boolean;
  /** The attempts of the event triggered after the disabling. */
  laterEvent: Delivery[];
}

function failuresAcrossEvents(ctx: ServerContext): Promise<AcrossEventsRun> {
  return ctx.once("across-events", async () => {
    const business = ctx.options.otherBusinessId;
    const threshold = ctx.rules.disableAfterConsecutiveFailures;
    const dueNowMs = ctx.conformance.dueNowRealSeconds * 1000;
    const webhook = await ctx.register("across-events", ["payment.received"], business);
    // Every attempt fails but the extra event's first; the first attempts only once all of them are
    // there, so that no retry (due a first wait later, which a scaled clock makes short) can come
    // between them.
    const firsts: Delivery[] = [];
    let extra: Delivery | undefined;
    ctx.receiver.respond(webhook.endpoint, async (d) => {
      if (firsts.length < threshold) {
        firsts.push(d);
        await ctx.receiver.waitFor(() => firsts.length === threshold, dueNowMs, "all first attempts").catch(() => undefined);
        return answers.status(503);
      }
      if (extra || firsts.some((f) => eventIdOf(f) === eventIdOf(d))) return answers.status(503);
      extra = d;
      await ctx.receiver.waitFor(() => firsts.every((f) => f.answeredAt !== undefined), dueNowMs, "the failures' answers").catch(() => undefined);
      const gap = Math.max(...firsts.map((f) => f.answeredAt ?? 0)) + AFTER_FAILURES_GAP_MS - performance.now();
      if (gap > 0) await delay(gap);
      return answers.ok;
    });
    await Promise.all(Array.from({ length: threshold + 1 }, () => ctx.control.trigger("payment.received", business)));
    await ctx.arrivals(webhook.endpoint, 0, threshold, `the first attempts of ${threshold} events`);
    // Disabled by the last of those failures: a retry or the extra event's attempt already under way may
    // still come now, but after that neither a retry nor a new event.
    const firstWait = ctx.rules.retryWaitsSeconds[0]!;
    await ctx.quietFor(webhook.endpoint, Math.ceil(firstWait * 1.2));
    const since = ctx.count(webhook.endpoint);
    const { id: later } = await ctx.control.trigger("payment.received", business);
    await ctx.quietFor(webhook.endpoint, Math.ceil(ctx.rules.retryWaitsSeconds[1]! * 1.2));
    const afterDisabled = ctx.receiver.at(webhook.endpoint).slice(since);
    const lastFailure = Math.max(...firsts.map((f) => f.answeredAt ?? Infinity));
    return {
      webhook,
      afterDisabled: afterDisabled.filter((d) => eventIdOf(d) !== later),
      succeededAfterDisabling: extra !== undefined && isSuccess(extra) && (extra.answeredAt ?? 0) > lastFailure,
      laterEvent: afterDisabled.filter((d) => eventIdOf(d) === later),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: waves of overlapping deliveries to one webhook, one failure in each wave, answered after
// the wave's successes. Failures never come closer than a whole wave of successes apart, so in any
// order of recording the overlapping outcomes there are never 5 in a row: the webhook must stay
// enabled, and every event must be delivered.

const WAVES = 7;
const WAVE_SIZE = 8;

interface OverlapRun {
  webhook: RegisteredWebhook;
  events: number;
  /** Event ids delivered with a 2xx answer at least once. */
  delivered: Set<string>;
  /** The event triggered after all waves, and whether it arrived. */
  lastArrived: boolean;
  mails: DisableMailSeen[];
}

function overlappingFailures(ctx: ServerContext): Promise<OverlapRun> {
  return ctx.once("overlap", async () => {
    const business = ctx.options.otherBusinessId;
    const webhook = await ctx.register("overlapping", ["message.received"], business);
    const mailsBefore = ctx.smtp.messages.length;
    const seen = new Set<string>();
    /** The first attempts of the wave under way; undefined once the waves are over. */
    let wave: Delivery[] | undefined = [];
    // The wave's last first attempt fails, once the others were answered: it ends after them.
    ctx.receiver.respond(webhook.endpoint, async (d) => {
      const id = envelopeOf(d).id;
      if (seen.has(id) || !wave) return answers.ok;
      seen.add(id);
      wave.push(d);
      if (wave.length !== WAVE_SIZE) return answers.ok;
      const others = wave.slice(0, -1);
      await ctx.receiver.waitFor(() => others.every((o) => o.answeredAt !== undefined), 30_000, "the wave's successes").catch(() => undefined);
      return answers.status(500);
    });
    for (let w = 0; w < WAVES; w++) {
      wave = [];
      const since = ctx.count(webhook.endpoint);
      // Triggered together: an implementation that attempts before answering a trigger still overlaps them.
      await Promise.all(Array.from({ length: WAVE_SIZE }, () => ctx.control.trigger("message.received", business)));
      const arrived = await ctx.arrivals(webhook.endpoint, since, WAVE_SIZE, `wave ${w + 1} of ${WAVE_SIZE} overlapping deliveries`);
      const current: Delivery[] = wave;
      const answered =
        arrived.length >= WAVE_SIZE &&
        (await ctx.receiver
          .waitFor(() => current.length === WAVE_SIZE && current.every((d) => d.answeredAt !== undefined), ctx.conformance.dueNowRealSeconds * 1000, "the wave's answers")
          .then(() => true)
          .catch(() => false));
      // A wave that did not come whole (a disabled webhook): the verdict is known, the rest would only wait.
      if (!answered) break;
      // Recorded before the next wave: an advance first waits for what is under way.
      await ctx.quietFor(webhook.endpoint, 0);
    }
    wave = undefined;
    return { webhook, events: WAVES * WAVE_SIZE + 1, ...(await afterTheFailures(ctx, webhook, business, mailsBefore, "an event after the waves")) };
  });
}

/**
 * The end of a scenario whose failures never came 5 in a row: their retries (a first wait later)
 * succeed, then one more event is triggered, which must arrive; and the disable e-mails, none expected.
 */
async function afterTheFailures(ctx: ServerContext, webhook: RegisteredWebhook, business: string, mailsBefore: number, what: string) {
  await ctx.quietFor(webhook.endpoint, Math.ceil(ctx.rules.retryWaitsSeconds[0]! * 1.2));
  const since = ctx.count(webhook.endpoint);
  await ctx.control.trigger("message.received", business);
  const lastArrived = (await ctx.arrivals(webhook.endpoint, since, 1, what)).length > 0;
  const delivered = new Set(ctx.receiver.at(webhook.endpoint).filter(isSuccess).map((d) => envelopeOf(d).id));
  const mails = await Promise.all(ctx.smtp.messages.slice(mailsBefore).map(decodedOnce));
  return { delivered, lastArrived, mails: mails.filter((m) => isAbout(ctx, m, webhook.webhookID)) };
}

// ---------------------------------------------------------------------------------------------
// Scenario: 2 failed first attempts recorded, then overlapping first attempts answered in three groups,
// each once the one before was answered and SPLIT_WAVE_GAP_MS more: 2 failures, a success, 3 failures.
// Recorded in the order they ended there are never more than 4 failures in a row; a server that records
// a batch's failures before its successes, its successes before its failures, or a batch in reverse,
// counts 5 and disables the webhook. So does one that records outcomes in the order it sent the attempts
// (all of them awaited, then recorded in turn): the success goes to the attempt that came last of those
// under way when it is answered, so that attempts sent before it fail after it. A server would have to
// read the success's answer before both failures' answered 250 ms before it, or after one of the three
// answered 250 ms after it, to count 5 while following D7: one that reads the answers waiting on its
// sockets in any order (they all "ended" by the time it looks) may, when its event loop stalls longer than
// the gap, which 50 ms was not enough for under load. The success is answered at most 250 ms after the
// second failure was (well inside the shortest time an unanswered attempt may be held, D24: 0.5 s), and
// the attempts it is chosen among came after that failure did; a failure given up on instead ends after
// the success all the same. A server that makes one attempt at a time gets the success at its third.
// Under a scaled clock the first failures' retries come during the wave, and succeed: the count they
// reset makes the check weaker there, never stricter.

const SPLIT_WAVE = ["fail", "fail", "ok", "fail", "fail", "fail"] as const;
const SPLIT_WAVE_GAP_MS = 250;
/**
 * Failures recorded before the wave: with them the wave's 2 leading failures make 4, one short of
 * disabling, so that a server that records any of the 3 trailing failures before the success (a batch
 * recorded in reverse, for one) reaches 5, where without them it reached only 3.
 */
const SPLIT_WAVE_FAILED_BEFORE = 2;

function failuresSplitByASuccess(ctx: ServerContext): Promise<OverlapRun> {
  return ctx.once("split", async () => {
    // message.received of the other business, as the overlap scenario's webhook: each also receives
    // the other's events, which it answers 2xx once its own scenario is over.
    const business = ctx.options.otherBusinessId;
    const webhook = await ctx.register("split-by-a-success", ["message.received"], business);
    const mailsBefore = ctx.smtp.messages.length;
    const dueNowMs = ctx.conformance.dueNowRealSeconds * 1000;
    const leading = SPLIT_WAVE.indexOf("ok");
    /** The wave's first attempts in order of arrival; undefined once the wave is over. */
    let firsts: Delivery[] | undefined = [];
    const seen = new Set<string>();
    /** The attempt answered 2xx, chosen once the leading failures were answered and the gap has passed. */
    let success: Promise<Delivery> | undefined;
    const answeredAfterGap = async (before: readonly Delivery[]) => {
      await ctx.receiver.waitFor(() => before.every((b) => b.answeredAt !== undefined), dueNowMs, "the wave's earlier answers").catch(() => undefined);
      const gap = Math.max(...before.map((b) => b.answeredAt ?? 0)) + SPLIT_WAVE_GAP_MS - performance.now();
      if (gap > 0) await delay(gap);
    };
    /** The first attempts failed before the wave, while it has not begun. */
    let failedBefore: Delivery[] | undefined = [];
    ctx.receiver.respond(webhook.endpoint, async (d) => {
      const id = envelopeOf(d).id;
      if (failedBefore && !seen.has(id)) {
        seen.add(id);
        failedBefore.push(d);
        return answers.status(500);
      }
      if (!firsts || seen.has(id) || firsts.length === SPLIT_WAVE.length) return answers.ok;
      seen.add(id);
      const wave = firsts;
      if (wave.push(d) <= leading) return answers.status(500);
      // The one that came last of those under way once the leading failures were answered and the gap passed.
      success ??= answeredAfterGap(wave.slice(0, leading)).then(() => wave.filter((w) => w.answeredAt === undefined).at(-1)!);
      const chosen = await success;
      if (chosen === d) return answers.ok;
      await answeredAfterGap([chosen]);
      return answers.status(500);
    });
    for (let k = 0; k < SPLIT_WAVE_FAILED_BEFORE; k++) await ctx.control.trigger("message.received", business);
    await ctx.arrivals(webhook.endpoint, 0, SPLIT_WAVE_FAILED_BEFORE, `${SPLIT_WAVE_FAILED_BEFORE} failures before the wave`);
    const answeredBefore = failedBefore;
    await ctx.receiver.waitFor(() => answeredBefore.every((d) => d.answeredAt !== undefined), dueNowMs, "the failures before the wave").catch(() => undefined);
    // Recorded before the wave: an advance first waits for what is under way (D24).
    await ctx.quietFor(webhook.endpoint, 0);
    failedBefore = undefined;
    const since = ctx.count(webhook.endpoint);
    await Promise.all(SPLIT_WAVE.map(() => ctx.control.trigger("message.received", business)));
    const arrived = await ctx.arrivals(webhook.endpoint, since, SPLIT_WAVE.length, `${SPLIT_WAVE.length} overlapping deliveries`);
    const wave = firsts;
    if (arrived.length >= SPLIT_WAVE.length) {
      await ctx.receiver.waitFor(() => wave.length === SPLIT_WAVE.length && wave.every((d) => d.answeredAt !== undefined), dueNowMs, "the wave's answers").catch(() => undefined);
    }
    firsts = undefined;
    return { webhook, events: SPLIT_WAVE_FAILED_BEFORE + SPLIT_WAVE.length + 1, ...(await afterTheFailures(ctx, webhook, business, mailsBefore, "an event after the split wave")) };
  });
}

// ---------------------------------------------------------------------------------------------

/**
 * The retries on one time line for the report: each due its wait after the previous attempt came (or
 * was due, when it never came), with the band the suite accepts.
 */
function retryTimeline(ctx: ServerContext, title: string, observations: RetryObservation[]): Timeline {
  const clock = ctx.options.clock.kind === "virtual" ? "virtual" : `real (scaled:${ctx.options.clock.factor})`;
  let previous = 0;
  const attempts = observations.map((o, i): TimelineAttempt => {
    const { dueMs, earliestMs, latestMs, cameMs } = o.window;
    const at = (ms: number) => previous + ms;
    const attempt = {
      label: `retry ${i + 1}: ${o.expectedSeconds} s`,
      dueMs: at(dueMs),
      earliestMs: at(earliestMs),
      latestMs: at(latestMs),
      ...(cameMs === undefined ? {} : { cameMs: at(cameMs) }),
    };
    previous = attempt.cameMs ?? attempt.dueMs;
    return attempt;
  });
  return { title, clock, attempts };
}

/** The webhook of an overlap scenario was not disabled: its last event came, and no notice. */
const stillEnabled = (lastArrived: boolean, mails: readonly DisableMailSeen[]) => lastArrived && mails.length === 0;
/** What is left when an overlap scenario's webhook stayed enabled but its events were not all delivered. */
const notDeliveredInTime = (ctx: ServerContext) =>
  `the webhook stayed enabled, but events whose first attempts failed were not delivered by their retries within 1.2 times the first wait (${ctx.rules.retryWaitsSeconds[0]} s): the retries came late (retry-waits-follow-schedule judges when retries come)`;

/** A retry's timing that may be the scheduler's, not the failure's: said where a check of a kind of failure meets it. */
const offSchedule = " (where every retry is off its schedule alike, the scheduler is at fault, not this kind of failure: see retry-waits-follow-schedule)";

function expectRetries(observations: RetryObservation[], message: string, report?: { ctx: ServerContext; record: CheckRecorder; title: string }): void {
  if (report) report.record.timeline(retryTimeline(report.ctx, report.title, observations));
  const seen = observations.map((o) => `${o.observed} (${o.verdict})`);
  const expected = observations.map((o) => `${o.expectedSeconds} s (on-time)`);
  expectThat(observations.every((o) => o.verdict === "on-time"), message, expected, seen);
}

/** Whether a caught e-mail is about the webhook (by the webhook-id header the rules name, D26). */
const isAbout = (ctx: ServerContext, mail: DisableMailSeen, webhookID: string) => namesWebhook(mail, webhookID, ctx.rules.disableEmail.webhookIdHeader);

/** The mail checks' common failure when nothing reached the sink. */
function expectSomeMail(ctx: ServerContext, run: DisableRun): void {
  expectThat(
    run.mails.length > 0,
    `no e-mail reached the suite's SMTP sink (${ctx.smtp.url}): the implementation must send it to SMTP_URL`,
    "one e-mail",
    "none",
  );
}

/** A registration rule (§2.2, D16): a body the rule refuses gets the documented status, problem type and pointer. */
function registrationRule(options: {
  id: string;
  section: string;
  title: string;
  /** Bodies that break the rule, each with the pointer its problem must name (or one inside it). */
  cases: (ctx: ServerContext, valid: Record<string, unknown>) => { body: unknown; pointer: string }[];
  problem?: "validation-failed" | "not-found";
}): ServerCheck {
  return defineCheck({
    id: options.id,
    section: options.section,
    title: options.title,
    scenario: "registrations that break one rule each, on the suite's receiver URL",
    async run(ctx) {
      const { status, type } = loadContract().problem(options.problem ?? "validation-failed");
      const valid = { url: ctx.receiver.url("never"), events: ["lead.expired"], businessID: ctx.options.otherBusinessId, secret: ctx.newSecret() };
      const expected = [];
      const actual = [];
      for (const { body, pointer } of options.cases(ctx, valid)) {
        const answer = await ctx.registerRaw(body);
        const problem = answer.body as { type?: string; errors?: { pointer?: string }[] } | undefined;
        expected.push({ status, type, pointer });
        actual.push({ status: answer.status, type: problem?.type, pointer: namesPointer(problem, pointer) ? pointer : (problem?.errors ?? []).map((e) => e.pointer) });
      }
      expectEqual(actual, expected, "a registration that breaks the rule was not refused as documented");
    },
  });
}

/** The shared webhook URL cases (conformance/vectors/webhook-urls.json) a certifying server must refuse. */
function webhookUrlCases(): { nonPublicAddresses: string[]; malformed: string[]; publicAddresses: string[] } {
  const cases = JSON.parse(readFileSync(path.join(packageRoot, "conformance/vectors/webhook-urls.json"), "utf8")) as {
    refused: string[];
    loopback: string[];
    malformed: string[];
    accepted: string[];
  };
  // IP literals only: names would depend on the resolver of the machine that runs the implementation.
  const isAddress = (url: string) => isIP(hostOf(url)) !== 0;
  return {
    nonPublicAddresses: cases.refused.filter((url) => !cases.loopback.includes(url) && isAddress(url)),
    malformed: cases.malformed,
    publicAddresses: cases.accepted.filter(isAddress),
  };
}

const registrationSchema = () => loadContract().resolve("#/components/schemas/WebhookRegistration") as {
  properties: { url: { maxLength: number }; secret: { minLength: number; maxLength: number } };
};

const EXPIRY_SCENARIO =
  "two service requests' leads, nobody hiring, until 7 days after their creation: the first's responded to (lead.updated) an hour later, the second's left new; once expired, each named by a lead.updated back to responded, and 7 days and an hour more (a scaled clock: a day)";

/** A lead moved by lead.updated to a final status (D19) never expires. */
function finalLeadNeverExpires(status: FinalStatus, request: string, section: string): ServerCheck {
  return defineCheck({
    id: `${status}-lead-never-expires`,
    section,
    title: `A lead moved to ${status} by lead.updated never produces lead.expired (${status} is final).`,
    scenario: `a ${request} service request's lead, ${status === "hired" ? "responded to and then hired" : status} through the control API's lead.updated, then named by a lead.updated back to responded, until 14 days and 1 hour later (a scaled clock: 8 days)`,
    async run(ctx) {
      const run = await leadExpiry(ctx);
      const leadID = run.finalLeads[status];
      expectThat(leadID !== undefined, `the ${request} service request matched no lead for the business`, "a lead", "none");
      const expired = [...run.early, ...run.atExpiry, ...run.after].filter((d) => envelopeOf(d).data.leadID === leadID);
      expectEqual(summary(expired), [], `a ${status} lead expired`);
    },
  });
}

export const serverChecks: ServerCheck[] = [
  registrationRule({
    id: "registration-rejects-plain-http-url",
    section: "§2.2, D16",
    title: "Registering a webhook with an http:// URL is refused: 422 validation-failed, pointer /url.",
    // If it is accepted after all, it must not disturb other checks: lead.expired of the other business
    // comes only at the very end of the run, and the name does not resolve.
    cases: (_ctx, valid) => [{ body: { ...valid, url: "http://hooks.example.com/plain" }, pointer: "/url" }],
  }),
  registrationRule({
    id: "registration-rejects-over-long-url",
    section: "§2.2, D16",
    title: "Registering a webhook whose URL is longer than the spec's maximum is refused: 422, pointer /url.",
    cases: (ctx, valid) => {
      const url = ctx.receiver.url("long-");
      return [{ body: { ...valid, url: url + "a".repeat(registrationSchema().properties.url.maxLength + 1 - url.length) }, pointer: "/url" }];
    },
  }),
  registrationRule({
    id: "registration-rejects-unknown-event-name",
    section: "§2.2, §6",
    title: "Registering a webhook for an event name that is not one of the eight, or for \"*\" (no wildcard stands for them), is refused: 422, pointer /events/0.",
    cases: (_ctx, valid) => [
      { body: { ...valid, events: ["lead.create"] }, pointer: "/events/0" },
      { body: { ...valid, events: ["*"] }, pointer: "/events/0" },
    ],
  }),
  registrationRule({
    id: "registration-rejects-empty-or-repeated-events",
    section: "§2.2, D16",
    title: "Registering a webhook with no events, or with an event twice, is refused: 422, pointer /events.",
    cases: (_ctx, valid) => [
      { body: { ...valid, events: [] }, pointer: "/events" },
      { body: { ...valid, events: ["lead.expired", "lead.expired"] }, pointer: "/events" },
    ],
  }),
  registrationRule({
    id: "registration-rejects-missing-fields",
    section: "§2.2, D16",
    title: "Registering a webhook without url, events, businessID or secret is refused: 422, pointer to the missing member.",
    cases: (_ctx, valid) =>
      Object.keys(valid).map((member) => ({ body: Object.fromEntries(Object.entries(valid).filter(([k]) => k !== member)), pointer: `/${member}` })),
  }),
  registrationRule({
    id: "registration-rejects-unknown-fields",
    section: "§2.2, D16",
    title: "Registering a webhook with a member the spec does not define is refused: 422, pointer to that member.",
    cases: (_ctx, valid) => [{ body: { ...valid, secert: "0123456789abcdef0123" }, pointer: "/secert" }],
  }),
  registrationRule({
    id: "registration-rejects-out-of-range-secret",
    section: "§2.2, §5.2, D16",
    title: "Registering a webhook whose secret is shorter or longer than the spec allows is refused: 422, pointer /secret.",
    cases: (_ctx, valid) => {
      const { minLength, maxLength } = registrationSchema().properties.secret;
      return [
        { body: { ...valid, secret: "s".repeat(minLength - 1) }, pointer: "/secret" },
        { body: { ...valid, secret: "s".repeat(maxLength + 1) }, pointer: "/secret" },
      ];
    },
  }),
  registrationRule({
    id: "registration-rejects-unknown-business",
    section: "§2.2, D16",
    title: "Registering a webhook for a business that does not exist is refused: 404 not-found, pointer /businessID.",
    problem: "not-found",
    cases: (_ctx, valid) => [{ body: { ...valid, businessID: UNKNOWN_ID }, pointer: "/businessID" }],
  }),
  registrationRule({
    id: "registration-rejects-non-public-addresses",
    section: "§2.2, D22",
    title: "Registering a webhook whose host is an address that is not globally routable unicast (private, link-local, multicast, reserved, NAT64, 6to4, ...) is refused: 422, pointer /url; loopback is accepted while certifying.",
    cases: (_ctx, valid) => webhookUrlCases().nonPublicAddresses.map((url) => ({ body: { ...valid, url }, pointer: "/url" })),
  }),
  defineCheck({
    id: "registration-accepts-public-addresses",
    section: "§2.2, D22",
    title: "Registering a webhook whose host is a globally routable unicast address (IPv4, IPv6, IPv4-mapped IPv6) is accepted: 201.",
    scenario:
      "the second client registers each public IP-literal URL of the shared cases for its business, for booking.cancelled, which the suite never triggers there and no service request causes (nothing is sent there)",
    async run(ctx) {
      const urls = webhookUrlCases().publicAddresses;
      const actual = [];
      for (const url of urls) {
        // Not a lead event: an implementation may match the suite's service requests to this business too,
        // and its leads' events would then go to real public hosts.
        const answer = await ctx.registerRawAsSecondClient({ url, events: ["booking.cancelled"], businessID: ctx.options.secondClientBusinessId, secret: ctx.newSecret() });
        actual.push({ url, status: answer.status });
      }
      expectEqual(actual, urls.map((url) => ({ url, status: 201 })), "a webhook for a public address was refused (D22: every globally routable unicast address is accepted)");
    },
  }),
  registrationRule({
    id: "registration-rejects-malformed-urls",
    section: "§2.2, D28",
    title:
      "Registering a webhook whose URL has no host, a user name or password, port 0, a trailing dot, an internationalized host, a space before it, or cannot be parsed is refused: 422, pointer /url (never a 5xx, nor a URL trimmed into one).",
    // A URL with a space before it is no https URL (D16's pattern): trimmed, the stored URL would not be the one sent (D28).
    // A public address, so that only its form can refuse it.
    cases: (_ctx, valid) => {
      const { malformed, publicAddresses } = webhookUrlCases();
      return [...malformed, ` ${publicAddresses[0]}`].map((url) => ({ body: { ...valid, url }, pointer: "/url" }));
    },
  }),
  defineCheck({
    id: "registration-rejects-another-partners-business",
    section: "§4.4, D27",
    title: "Registering a webhook for a business of another partner is refused: 403 business-forbidden, pointer /businessID (both ways).",
    scenario: "the client registers for --second-client-business-id, the second client for --business-id",
    async run(ctx) {
      const { status, type } = loadContract().problem("business-forbidden");
      const body = (businessID: string) => ({ url: ctx.receiver.url("foreign-registration"), events: ["lead.expired"], businessID, secret: ctx.newSecret() });
      const answers = [
        await ctx.registerRaw(body(ctx.options.secondClientBusinessId)),
        await ctx.registerRawAsSecondClient(body(ctx.options.businessId)),
      ];
      const actual = answers.map((a) => {
        const problem = a.body as { type?: string; errors?: { pointer?: string }[] } | undefined;
        const pointers = (problem?.errors ?? []).map((e) => e.pointer);
        return { status: a.status, type: problem?.type, pointer: pointers.includes("/businessID") ? "/businessID" : pointers };
      });
      expectEqual(actual, [0, 1].map(() => ({ status, type, pointer: "/businessID" })), "a registration for another partner's business was not refused as documented");
    },
  }),
  defineCheck({
    id: "untrusted-certificate-fails-the-attempt",
    section: "§6, D6, D22",
    title: "An attempt to a receiver whose certificate does not chain to a trusted CA fails at the handshake, its retry too while it is presented, and is retried once it is not.",
    scenario: "the receiver presents a certificate of another CA while an event is triggered and its first retry falls due, then its own again",
    async run(ctx) {
      expectRefused((await certificates(ctx)).untrusted, "a certificate of a CA the implementation does not trust");
    },
  }),
  defineCheck({
    id: "wrong-host-certificate-fails-the-attempt",
    section: "§6, D6, D22",
    title: "An attempt to a receiver whose certificate, of a trusted CA, is for another host name fails, its retry too while it is presented, and is retried once it is not.",
    scenario: "the receiver presents a certificate of the trusted CA for wrong-host.invalid while an event is triggered and its first retry falls due, then its own again",
    async run(ctx) {
      expectRefused((await certificates(ctx)).wrongHost, "a certificate of the trusted CA for another host (wrong-host.invalid)");
    },
  }),
  defineCheck({
    id: "expired-certificate-fails-the-attempt",
    section: "§6, D6, D22",
    title: "An attempt to a receiver whose certificate, of a trusted CA and for its host, has expired fails at the handshake, and is retried.",
    scenario: "the receiver presents a certificate of the trusted CA for its host that expired a day ago while an event is triggered and its first retry falls due, then its own again",
    async run(ctx) {
      expectRefused((await certificates(ctx)).expired, "a certificate of the trusted CA for its host that expired a day ago");
    },
  }),
  defineCheck({
    id: "tls-failures-count-toward-disabling",
    section: "§3, §6, D6, D7, D26",
    title:
      "A refused handshake is a failed attempt like any other: five in a row disable the webhook, which sends its notice and receives nothing after, neither a new event nor the refused events' retries.",
    scenario:
      "the receiver presents a certificate of another CA while five review.created are triggered for a webhook of its own, one at a time, each until an attempt was refused; then its own again, and one more event",
    async run(ctx) {
      const run = await tlsFailuresUntilDisabled(ctx);
      expectEqual(
        { noticeBeforeTheCertificateWasBack: run.noticed, deliveredAfter: summary(run.afterwards) },
        { noticeBeforeTheCertificateWasBack: true, deliveredAfter: [] },
        run.noticed || run.afterwards.length > 0
          ? `${run.events} events, ${run.refusals} connections refused at the handshake, did not disable webhook ${run.webhook.webhookID}: a TLS error is a failed attempt (D6), counted toward disabling as any other (D7)`
          : `${run.events} events, ${run.refusals} connections refused at the handshake: nothing was delivered after, but no notice of webhook ${run.webhook.webhookID}'s disabling came before the certificate was back: was it late (D25), or was the webhook not disabled? A TLS error is a failed attempt (D6), counted toward disabling as any other (D7)`,
      );
    },
  }),
  defineCheck({
    id: "events-never-reach-another-partner",
    section: "§2.2, §4.4, D27",
    title: "A business's events never reach a webhook of another partner, even one it tried to register for that business.",
    scenario: "the second client tries to register for --business-id; lead.created is triggered for it; its owner's webhook gets it, the second client's endpoint nothing",
    async run(ctx) {
      const owner = await ctx.register("ownership-owner", ["lead.created"], ctx.options.businessId);
      await ctx.registerRawAsSecondClient({ url: ctx.receiver.url("ownership-intruder"), events: ["lead.created"], businessID: ctx.options.businessId, secret: ctx.newSecret() });
      const since = ctx.count(owner.endpoint);
      const intruderSince = ctx.count("ownership-intruder");
      await ctx.control.trigger("lead.created", ctx.options.businessId);
      const arrived = await ctx.arrivals(owner.endpoint, since, 1, "lead.created at the owner's webhook");
      expectThat(arrived.length >= 1, "the business's own webhook did not get its lead.created", 1, arrived.length);
      // Both attempts fell due together: under a scaled clock give the other one the tolerance to come.
      await ctx.quietFor("ownership-intruder", 0);
      expectEqual(summary(ctx.receiver.at("ownership-intruder").slice(intruderSince)), [], "another partner's endpoint received the business's event");
    },
  }),
  defineCheck({
    id: "event-id-has-evt-prefix",
    section: "§2.3, D4",
    title: "Every envelope id is evt_ followed by an identifier.",
    scenario: "two booking.confirmed to two webhooks of one business",
    async run(ctx) {
      const ids = (await basics(ctx)).bookings.map((d) => envelopeOf(d).id);
      expectThat(ids.length > 0 && ids.every((id) => /^evt_[0-9A-Za-z]{8,64}$/.test(id)), "an id does not have the evt_ form", "evt_<identifier>", ids);
    },
  }),
  defineCheck({
    id: "event-id-unique-per-event",
    section: "§2.3, D4",
    title: "Two events get two different ids; the same event has one id at every webhook, triggered or emitted by a service request.",
    scenario: "two booking.confirmed, and the lead.created of two service requests, to two webhooks of one business",
    async run(ctx) {
      const { main, sameBusiness, bookings, leadCreated, leadCreatedAtSecond } = await basics(ctx);
      const at = (w: RegisteredWebhook) => bookings.filter((d) => d.endpoint === w.endpoint).map((d) => envelopeOf(d).id);
      const [a, b] = [at(main), at(sameBusiness)];
      expectThat(new Set(a).size === 2, "two booking.confirmed events share an id", "2 distinct ids", a);
      // Sets: a repeat (at-least-once, D4) carries its id again.
      expectEqual([...new Set(b)].sort(), [...new Set(a)].sort(), "the same events carry other ids at another webhook");
      // Each lead's lead.created by its id at each webhook.
      const ids = (ds: Delivery[]) => [...new Map(ds.map((d) => [envelopeOf(d).id, { leadID: envelopeOf(d).data.leadID, id: envelopeOf(d).id }])).values()].sort(byLeadID);
      expectEqual(ids(leadCreatedAtSecond), ids(leadCreated), "a service request's lead.created carries another id at another webhook");
    },
  }),
  defineCheck({
    id: "event-id-stable-across-retries",
    section: "D4, D3",
    title: "Every retry of an event carries the same envelope id, in the same bytes as its first attempt (its timestamp is when the event occurred).",
    scenario: DISABLE_SCENARIO,
    async run(ctx) {
      const { webhook } = await failingUntilDisabled(ctx);
      const firstEvent = ctx.receiver.at(webhook.endpoint).slice(0, ctx.rules.disableAfterConsecutiveFailures);
      const ids = firstEvent.map((d) => envelopeOf(d).id);
      expectThat(ids.length > 1 && new Set(ids).size === 1, "the retries of one event carry different ids", "one id", ids);
      const changed = firstEvent.filter((d) => !d.body.equals(firstEvent[0]!.body)).map((d) => d.body.toString("utf8"));
      expectEqual(changed, [], `retries of one event differ from its first attempt's bytes (${firstEvent[0]!.body.toString("utf8")}): an event is signed and sent as it was stored, never rebuilt`);
    },
  }),
  defineCheck({
    id: "timestamp-is-utc-iso8601",
    section: "§2.3, D14",
    title:
      "Every envelope timestamp is an ISO 8601 date-time in UTC (Z), the instant the event occurred on the implementation's clock: within the trigger or the service request that emitted it.",
    scenario: "two booking.confirmed to two webhooks of one business, and a service request's lead.created",
    async run(ctx) {
      const { bookings, triggered, leadCreated, requested } = await basics(ctx);
      const stamps = bookings.map((d) => envelopeOf(d).timestamp);
      const ok = (s: string) => UTC_TIMESTAMP.test(s) && !Number.isNaN(Date.parse(s));
      expectThat(stamps.length > 0 && stamps.every(ok), "a timestamp is not ISO 8601 UTC", "YYYY-MM-DDTHH:MM:SS[.fff]Z", stamps);
      const off = [...bookings.map((d) => [d, triggered] as const), ...leadCreated.map((d) => [d, requested] as const)].flatMap(([d, window]) => {
        const { event, timestamp } = envelopeOf(d);
        const [from, to] = wholeSecondsAround(...window);
        const at = Date.parse(timestamp);
        return at >= from && at <= to ? [] : [{ event, timestamp, within: [from, to].map((ms) => new Date(ms).toISOString()) }];
      });
      expectEqual(off, [], "an envelope timestamp is not when its event occurred: outside the request that emitted it, on the implementation's clock (read through the Control API)");
    },
  }),
  defineCheck({
    id: "signature-is-hmac-of-exact-bytes",
    section: "§5.3, D2",
    title: "X-Service-Signature is the lowercase hex HMAC-SHA256 of the exact bytes delivered, keyed with the webhook secret.",
    scenario: "two booking.confirmed to two webhooks of one business",
    async run(ctx) {
      const { main, bookings } = await basics(ctx);
      const header = ctx.rules.signatureHeader.toLowerCase();
      const mine = bookings.filter((d) => d.endpoint === main.endpoint);
      const expected = mine.map((d) => hmacHex(d.body, main.secret));
      const actual = mine.map((d) => d.headers[header]);
      expectEqual(actual, expected, "a signature is not the HMAC of the delivered bytes");
    },
  }),
  defineCheck({
    id: "signature-uses-webhook-own-secret",
    section: "§5.2, §5.3",
    title: "Each webhook's deliveries are signed with its own secret, not another webhook's, every code point of it as registered: neither trimmed nor normalized.",
    scenario: "two booking.confirmed to two webhooks of one business, the second's secret with a space at each end and a decomposed é",
    async run(ctx) {
      const { sameBusiness, bookings } = await basics(ctx);
      const header = ctx.rules.signatureHeader.toLowerCase();
      const theirs = bookings.filter((d) => d.endpoint === sameBusiness.endpoint);
      const expected = theirs.map((d) => hmacHex(d.body, sameBusiness.secret));
      expectEqual(theirs.map((d) => d.headers[header]), expected, "a delivery is not signed with its webhook's secret");
    },
  }),
  defineCheck({
    id: "first-attempt-comes-when-due",
    section: "§6, D24, D25",
    title:
      "A first attempt comes as soon as it is due: under a scaled clock within 150 ms after its trigger answered; under a virtual clock before the next advance answers.",
    scenario: "two booking.confirmed to two webhooks of one business, triggered one after the other; the reset scenario's review.created",
    async run(ctx) {
      const { main, sameBusiness, bookings, bookingTriggers } = await basics(ctx);
      const { resetTrigger } = await resetThenLongWaits(ctx);
      const lateMs = ctx.conformance.scaledClock.tolerance.lateRealMs;
      const scaled = ctx.options.clock.kind === "scaled";
      // The latest a first attempt may come: a scaled clock's allowance after the trigger answered (its
      // event was due by then), or the answer of the first advance asked for after it.
      const latest = (answeredAt: number) =>
        scaled ? answeredAt + lateMs : (ctx.clock.advances.find((a) => a.startedAt >= answeredAt)?.answeredAt ?? Infinity);
      // By arrival, not by id (D5: no order; an id is another check's): when every event is on time, the
      // k-th arrival comes by the latest of the k-th trigger, the triggers having answered one by one.
      const seen = [main, sameBusiness].flatMap((webhook) => {
        const arrived = bookings.filter((d) => d.endpoint === webhook.endpoint);
        return bookingTriggers.map(({ answeredAt }, k) => {
          const d = arrived[k];
          const onTime = d !== undefined && d.arrivedAt <= latest(answeredAt);
          return { webhook: webhook.endpoint, onTime, came: d ? `arrival ${k + 1}: ${Math.round(d.arrivedAt - answeredAt)} ms after trigger ${k + 1} answered` : `arrival ${k + 1}: never` };
        });
      });
      // And the reset scenario's review.created, of another event name, to a webhook of its own.
      const reset = resetTrigger.arrived;
      seen.push({
        webhook: "reset",
        onTime: reset !== undefined && reset.arrivedAt <= latest(resetTrigger.answeredAt),
        came: reset ? `review.created: ${Math.round(reset.arrivedAt - resetTrigger.answeredAt)} ms after its trigger answered` : "review.created: never",
      });
      const late = seen.filter((s) => !s.onTime);
      expectThat(
        late.length === 0,
        scaled
          ? `a first attempt came later than ${lateMs} ms after its trigger answered (D24: under a scaled clock a first attempt is held to D25 as a retry whose wait is zero)`
          : "a first attempt came after the advance that followed its trigger had answered (D24: it is made at the latest in the next advance)",
        scaled ? `each within ${lateMs} ms` : "each before the next advance answered",
        late.map(({ webhook, came }) => `${webhook}, ${came}`),
      );
    },
  }),
  defineCheck({
    id: "only-subscribed-events-arrive",
    section: "§6, D8",
    title: "A webhook receives only the events listed in its events field.",
    scenario: "a review.created for a business whose webhooks do not subscribe to it",
    async run(ctx) {
      const { unsubscribed } = await basics(ctx);
      expectEqual(summary(unsubscribed), [], "an event the webhook did not subscribe to arrived");
    },
  }),
  defineCheck({
    id: "only-registered-business-events-arrive",
    section: "§2.2, D8",
    title: "A webhook receives only the events of its businessID.",
    scenario: "a booking.confirmed for another business",
    async run(ctx) {
      const { foreignBusiness } = await basics(ctx);
      expectEqual(summary(foreignBusiness), [], "another business's event arrived");
    },
  }),
  defineCheck({
    id: "service-request-emits-lead-created",
    section: "§6, §2.4",
    title:
      "Creating a matching service request delivers lead.created for each matched business, with the request's lead, its category's name, its zip code with that zip code's city and state, not the business's own (the spec's example's: New York, NY for 10001, the city in any letter case) and its customer's name and phone as sent, the name neither trimmed nor normalized (§2.4: the request's data; D17, D20).",
    scenario:
      "two service requests for the business's category and zip code, with webhooks for lead.created of --business-id and of --other-business-id (which the spec's example matches too, from another town); the category's name as the business search gives it",
    async run(ctx) {
      const { leadCreated, leadCreatedOfOther, requestLeads } = await basics(ctx);
      const { categoryId, zip } = ctx.options;
      // The category's name (§2.4 carries the name, not the id), as the business search lists it.
      const { data: found, error, response } = await ctx.api.GET("/api/v2/businesses/search", { params: { query: { category_id: categoryId, zip } } });
      const category = found?.businesses.flatMap((b) => b.categories).find((c) => c.categoryID === categoryId)?.name;
      expectThat(
        category !== undefined,
        `GET /api/v2/businesses/search?category_id=${categoryId}&zip=${zip} named no category ${categoryId}: the suite reads there the name lead.created must carry (D20)`,
        `200 with a business whose categories include ${categoryId}`,
        { status: response.status, body: found ?? error },
      );
      // The zip code's city and state where the spec's example names them (D20); another zip code's are not known here.
      const { city, state, zip: exampleZip } = eventExample("lead.created").data.request.location;
      const town = zip === exampleZip ? { city, state } : {};
      // In any order (D5).
      const ours = [ctx.options.businessId, ctx.options.otherBusinessId];
      const expected = requestLeads
        .filter((l) => ours.includes(l.businessID))
        .map((l) => ({ leadID: l.leadID, businessID: l.businessID, request: { category, location: { zip, ...town } }, customer: { name: customer.name, phone: customer.phone } }));
      expectThat(expected.length > 0, "the service requests matched no lead for the business", ">= 1 lead", requestLeads);
      const actual = [...leadCreated, ...leadCreatedOfOther].map((d) => {
        const data = envelopeOf(d).data as {
          leadID: string;
          businessID: string;
          request?: { category?: string; location?: { city?: string; state?: string; zip?: string } };
          customer?: { name?: string; phone?: string };
        };
        const location = data.request?.location;
        // A city's name in any letter case (a postal database's NEW YORK is New York).
        const sameCity = town.city !== undefined && location?.city?.toLowerCase() === town.city.toLowerCase();
        return {
          leadID: data.leadID,
          businessID: data.businessID,
          request: { category: data.request?.category, location: { zip: location?.zip, ...(town.city !== undefined ? { city: sameCity ? town.city : location?.city, state: location?.state } : {}) } },
          customer: { name: data.customer?.name, phone: data.customer?.phone },
        };
      });
      expectEqual(actual.sort(byLeadID), expected.sort(byLeadID), "lead.created did not arrive as expected");
      if (town.city === undefined) return `city and state not compared: the spec's examples name none for zip code ${zip} (they do for ${exampleZip})`;
    },
  }),
  defineCheck({
    id: "retry-waits-follow-schedule",
    section: "§6, §8, D7",
    title: "Each retry waits 1 min, 5 min, 30 min, 2 h after the previous failure: never early, at most within tolerance late.",
    scenario: DISABLE_SCENARIO,
    async run(ctx, record) {
      const { retries } = await failingUntilDisabled(ctx);
      expectRetries(retries, "a retry did not come at its wait after the previous failure", { ctx, record, title: "Retries of an event whose endpoint always fails (from its first attempt)" });
    },
  }),
  defineCheck({
    id: "retry-waits-24h-after-reset",
    section: "§6, §8, D7",
    title:
      "After a success reset the count, the schedule goes on to the 2 h and 24 h waits; every non-2xx is a failure retried on the schedule, whatever its status (410, 400, 401, 422, 429, 503) and its Retry-After.",
    scenario: RESET_SCENARIO,
    async run(ctx, record) {
      const { waits, afterReset } = await resetThenLongWaits(ctx);
      expectRetries([...waits, ...afterReset], "the retry schedule around a reset is wrong", { ctx, record, title: "Retries of an event, with another event's success resetting the count after the fourth" });
    },
  }),
  defineCheck({
    id: "success-resets-failure-count",
    section: "§3, D7",
    title: "A 2xx resets the consecutive-failure count: failures before and after it do not add up to disabling.",
    scenario: RESET_SCENARIO,
    async run(ctx) {
      const { resetDelivered, resetTrigger, afterReset, holdMs } = await resetThenLongWaits(ctx);
      const resetAfterMs = resetTrigger.arrived && resetTrigger.arrived.arrivedAt - resetTrigger.answeredAt;
      // Under a scaled clock a first attempt comes within D25's fixed allowance after it is due (D24),
      // by the trigger's answer at the latest, and the trigger answers within the suite's hold of the
      // attempt before the retry the success must come before: say which, where the retry came first
      // and disabled the webhook.
      const lateMs = ctx.conformance.scaledClock.tolerance.lateRealMs;
      const slowTrigger = holdMs > 0 && resetTrigger.tookMs > holdMs;
      const slow = ctx.options.clock.kind === "scaled" && resetAfterMs !== undefined && resetAfterMs > lateMs;
      const last = afterReset.at(-1)!;
      const why = slowTrigger
        ? `the resetting event's trigger took ${Math.round(resetTrigger.tookMs)} ms to answer, longer than the ${holdMs} ms the suite holds the attempt before the retry the success must come before (D24)`
        : slow
          ? `the success that should reset the count came ${Math.round(resetAfterMs!)} ms after its trigger answered: under a scaled clock a first attempt comes within ${lateMs} ms (D24)`
          : undefined;
      const stopped = last.verdict === "missing";
      expectThat(
        resetDelivered && !(why && stopped),
        why ?? "the success that should reset the count did not arrive",
        "delivered",
        slowTrigger ? `trigger answered after ${Math.round(resetTrigger.tookMs)} ms` : slow ? `first attempt ${Math.round(resetAfterMs!)} ms after its trigger answered` : "missing",
      );
      expectThat(
        !stopped,
        afterReset.length > 1 && afterReset.slice(0, -1).every((o) => o.verdict !== "missing")
          ? `the last retry, ${last.expectedSeconds} s after the one before, did not come: the success did not reset the count (that retry's failure was the fifth in a row), or the event was given up one retry early (D7: five retries)`
          : "the webhook stopped delivering: the success did not reset the count",
        "a further retry",
        last.observed,
      );
    },
  }),
  defineCheck({
    id: "retry-success-resets-failure-count",
    section: "§3, D7",
    title: "A retry's 2xx resets the count as a first attempt's does: two failures, a retry answered 2xx, then three failures in a row leave the webhook enabled.",
    scenario: RETRY_SUCCESS_SCENARIO,
    async run(ctx) {
      const { afterThirdFailure, retrySucceeded } = await retrySuccessThenFailures(ctx);
      expectThat(retrySucceeded, "the first event's second retry, to be answered 2xx, did not come", "its second retry", "none");
      expectThat(
        afterThirdFailure.verdict !== "missing",
        "the webhook stopped delivering after three failures in a row: the retry's 2xx before them did not reset the count",
        "the second event's third retry",
        afterThirdFailure.observed,
      );
    },
  }),
  defineCheck({
    id: "new-event-does-not-reset-failure-count",
    section: "§3, D7",
    title:
      "Only a 2xx resets the count, one count spans the webhook's events: after 4 failed attempts, a new event of another name whose first attempt fails disables the webhook, and the first event's retry is cancelled.",
    scenario: "an event failing 4 times, then a new event of another name whose first attempt fails",
    async run(ctx) {
      const { afterFourth, first, second } = await newEventAfterFailures(ctx);
      const ids = afterFourth.map((d) => envelopeOf(d).id);
      const count = (id: string | undefined) => ids.filter((i) => i === id).length;
      const seen = { attempts: ids.length, secondEvent: count(second), firstEvent: count(first), otherEvents: ids.length - count(second) - count(first) };
      // Disabled by whichever of the two came first; the other may come only if it was already under
      // way: under a scaled clock, by D25's allowance after the disabling one was answered; under a
      // virtual clock the first event's retry, 2 h later, never is.
      const [earlier, later] = afterFourth;
      const scaled = ctx.options.clock.kind === "scaled";
      const laterUnderWay =
        later === undefined || (scaled && earlier?.answeredAt !== undefined && later.arrivedAt <= earlier.answeredAt + ctx.conformance.scaledClock.tolerance.lateRealMs);
      expectThat(
        seen.attempts >= 1 && seen.secondEvent <= 1 && seen.firstEvent <= 1 && seen.otherEvents === 0 && laterUnderWay && (scaled || seen.secondEvent === 1),
        seen.attempts === 0
          ? "no attempt came after the first event's fourth failure: neither the second event's first attempt nor the first event's next retry"
          : "the webhook was not disabled by the fifth failure in a row (the second event's first attempt, of another name, after the first event's four), or its pending retry was not cancelled",
        scaled
          ? { attempts: "1, or 2 if the other was under way", secondEvent: "0 or 1", firstEvent: "0 or 1", otherEvents: 0 }
          : { attempts: 1, secondEvent: 1, firstEvent: 0, otherEvents: 0 },
        seen,
      );
    },
  }),
  defineCheck({
    id: "event-dropped-after-last-retry",
    section: "§6, §8, D7",
    title: "An event whose fifth retry (after 24 h) fails is not attempted again.",
    scenario: RESET_SCENARIO,
    async run(ctx) {
      const { afterReset, afterLastRetry } = await resetThenLongWaits(ctx);
      const missing = afterReset.findIndex((o) => o.verdict === "missing");
      const retry = ctx.rules.retryWaitsSeconds.length - afterReset.length + missing + 1;
      expectThat(
        missing === -1,
        `retry ${retry} of ${ctx.rules.retryWaitsSeconds.length} (${afterReset[missing]?.expectedSeconds} s after the one before) did not come: D7 makes every retry of the schedule before an event is dropped (or the success before them did not reset the count: success-resets-failure-count)`,
        "all retries",
        afterReset.map((o) => o.observed),
      );
      expectEqual(summary(afterLastRetry), [], "the event was attempted again after its last retry failed");
    },
  }),
  defineCheck({
    id: "failure-count-kept-while-nothing-is-pending",
    section: "§3, D7",
    title:
      "Only a 2xx resets the count: failures counted before an event was dropped still count when nothing of the webhook is pending, so a new event's failures disable it sooner than five.",
    scenario: "the reset scenario's webhook once its first event was dropped (two or three failures since the success), then a new event failing every attempt",
    async run(ctx) {
      const { afterIdle: retries, afterReset } = await resetThenLongWaits(ctx);
      const virtual = ctx.options.clock.kind === "virtual";
      // A last retry that never came is a failure fewer: the reason to name first.
      const lastRetryMissing = afterReset.at(-1)?.verdict === "missing";
      // Under a virtual clock the success was recorded after the fourth failure: two since, so the
      // third attempt disables. Under a scaled clock it may have been recorded just before it.
      expectThat(
        virtual ? retries.length === 2 : retries.length <= 2,
        retries.length > 2
          ? lastRetryMissing
            ? "the new event was attempted more than 3 times: the first event's last retry (24 h) never came, a failure fewer to count (event-dropped-after-last-retry), or the failures counted before it was dropped were forgotten"
            : "the new event was attempted more than 3 times: the failures counted before the first event was dropped were forgotten, or the webhook was not disabled"
          : "the new event was attempted fewer than 3 times: the webhook was disabled before its fifth failure in a row, or before the new event",
        virtual ? "2 retries, the second disabling" : "at most 2 retries, the last disabling",
        summary(retries),
      );
    },
  }),
  defineCheck({
    id: "failures-of-different-events-count-together",
    section: "§3, D7",
    title: "Consecutive failed attempts of different events add up: 5 first attempts failing together disable the webhook.",
    scenario: ACROSS_EVENTS_SCENARIO,
    async run(ctx) {
      const { afterDisabled } = await failuresAcrossEvents(ctx);
      expectEqual(summary(afterDisabled), [], "the webhook was not disabled by failures of different events");
    },
  }),
  defineCheck({
    id: "success-after-disabling-leaves-webhook-disabled",
    section: "§3, D7, D9",
    title:
      "A webhook once disabled stays disabled: an attempt under way when it was disabled and answered 2xx after the disabling failure enables nothing, and a later event is not delivered to it.",
    scenario: ACROSS_EVENTS_SCENARIO,
    async run(ctx) {
      const { laterEvent, afterDisabled, succeededAfterDisabling } = await failuresAcrossEvents(ctx);
      // Retries of the five events after their first wait: the webhook was never disabled.
      const why =
        afterDisabled.length > 0
          ? "the webhook was never disabled by the five failures (failures-of-different-events-count-together), so an event triggered later was delivered"
          : succeededAfterDisabling
            ? "an event triggered after the webhook was disabled was delivered: the success recorded after the disabling failure enabled it again (D9: nothing does)"
            : "an event triggered after the webhook was disabled was delivered (D9: a disabled webhook stays disabled)";
      expectEqual(summary(laterEvent), [], why);
    },
  }),
  defineCheck({
    id: "overlapping-failures-between-successes-do-not-disable",
    section: "§3, D7",
    title: "Failures separated by successes never disable a webhook, however its deliveries overlap; every event is delivered.",
    scenario: `${WAVES} waves of ${WAVE_SIZE} overlapping deliveries to one webhook, one failing per wave`,
    async run(ctx) {
      const { events, delivered, lastArrived, mails } = await overlappingFailures(ctx);
      expectEqual(
        { delivered: delivered.size, lastArrived, disableMails: mails.length },
        { delivered: events, lastArrived: true, disableMails: 0 },
        stillEnabled(lastArrived, mails) ? notDeliveredInTime(ctx) : "the webhook was disabled, or events were not delivered, though no 5 failures came in a row",
      );
    },
  }),
  defineCheck({
    id: "failures-split-by-a-success-do-not-add-up",
    section: "§3, D7",
    title: "Failures on either side of a success do not add up, however close together their attempts end: outcomes are recorded in the order the attempts ended.",
    scenario: `${SPLIT_WAVE_FAILED_BEFORE} first attempts to one webhook answered 500 and recorded (an advance of 0 s), then ${SPLIT_WAVE.length} overlapping first attempts answered ${SPLIT_WAVE.map((k) => (k === "ok" ? "200" : "500")).join(", ")}, each kind ${SPLIT_WAVE_GAP_MS} ms after the one before; the 200 to the attempt that came last of those then under way`,
    async run(ctx) {
      const { events, delivered, lastArrived, mails } = await failuresSplitByASuccess(ctx);
      expectEqual(
        { delivered: delivered.size, lastArrived, disableMails: mails.length },
        { delivered: events, lastArrived: true, disableMails: 0 },
        stillEnabled(lastArrived, mails) ? notDeliveredInTime(ctx) : `the webhook was disabled, or events were not delivered, though a success ended ${SPLIT_WAVE_GAP_MS} ms after ${SPLIT_WAVE_FAILED_BEFORE + 2} failures and ${SPLIT_WAVE_GAP_MS} ms before 3: outcomes must be recorded in the order their attempts ended (D7), not a batch's failures before its successes, nor in reverse, nor in the order the attempts were sent`,
      );
    },
  }),
  defineCheck({
    id: "webhooks-sharing-a-url-each-get-the-event",
    section: "§2.2, §6, D9",
    title:
      "Two webhooks registered with the same URL are two webhooks: an event both subscribed to is delivered to each, signed with each one's own secret.",
    scenario: "two webhooks of one business registered with one URL (as while rotating a secret), and one event they both subscribed to",
    async run(ctx) {
      const { webhooks, refused, deliveries } = await webhooksSharingAUrl(ctx);
      expectThat(refused === undefined, "a second webhook with a registered URL was refused (D9: registrations are independent; a partner rotating a secret registers a new webhook beside the old one)", "201", refused);
      const which = (i: number) => (i === 0 ? "the first" : "the second");
      const signedFor = webhooks.map((w, i) => ({ webhook: which(i), deliveredSignedWithItsSecret: deliveries.some((d) => signedWith(ctx, d, w.secret)) }));
      expectEqual(signedFor, webhooks.map((_, i) => ({ webhook: which(i), deliveredSignedWithItsSecret: true })), "the event was not delivered to each webhook of the URL, signed with its own secret");
    },
  }),
  defineCheck({
    id: "advance-makes-every-retry-on-the-way",
    section: "D24",
    title: "One step of the clock over two retries of an event makes both: the second falls due during the step, after the first failed, and is made in it.",
    scenario: ONE_STEP_SCENARIO,
    async run(ctx) {
      const { attempts, seconds } = await oneStepOverTwoRetries(ctx);
      const [first, second] = ctx.rules.retryWaitsSeconds;
      expectThat(
        attempts === 3,
        `${seconds} s in one step after a failed first attempt: the retries due at ${first} s and, after that one failed, at ${first! + second!} s were not both made (D24: an advance makes what falls due on the way, in order, not only what was due when it began)`,
        "3 attempts: the first and two retries",
        `${attempts}`,
      );
    },
  }),
  defineCheck({
    id: "webhooks-sharing-a-url-count-failures-apart",
    section: "§3, D7, D9",
    title: `Two webhooks with one URL keep a failure count each: ${SHARED_URL_FAILURES} failures of each, ${2 * SHARED_URL_FAILURES} at the URL, disable neither, and every failed event is delivered by its retry.`,
    scenario: `two more webhooks of one business with one URL; ${SHARED_URL_FAILURES} events whose first attempt at each webhook fails, their retries answered 2xx`,
    async run(ctx) {
      const { refused, deliveredAfterFailing, unattributed } = await failuresAtASharedUrl(ctx);
      expectThat(refused === undefined, "a second webhook with a registered URL was refused (D9; webhooks-sharing-a-url-each-get-the-event)", "201", refused);
      expectThat(
        unattributed === 0,
        "deliveries at the shared URL were signed with neither webhook's secret, so the suite cannot tell whose they are (signature-uses-webhook-own-secret says why)",
        "each signed with its webhook's secret",
        `${unattributed} not`,
      );
      expectEqual(
        deliveredAfterFailing,
        [SHARED_URL_FAILURES, SHARED_URL_FAILURES],
        `events whose first attempts failed were not delivered by their retries within 1.2 times the first wait (${ctx.rules.retryWaitsSeconds[0]} s; under a scaled clock ${ctx.conformance.dueNowRealSeconds} real seconds more): either a count kept per URL (${2 * SHARED_URL_FAILURES} failures there) disabled a webhook that failed ${SHARED_URL_FAILURES} times (D7: the count is the webhook's), or the retries came late (retry-waits-follow-schedule judges when retries come)`,
      );
    },
  }),
  defineCheck({
    id: "any-2xx-counts-as-success",
    section: "§6, D6",
    title: "Any 2xx answer is a successful attempt, whatever its code: the event is not attempted again.",
    scenario: `${OTHER_2XX.length} events whose first attempts are answered ${OTHER_2XX.join(", ")}`,
    async run(ctx) {
      const { events } = await other2xxAnswers(ctx);
      expectThat(events.length >= OTHER_2XX.length, "the events' first attempts did not all arrive", `${OTHER_2XX.length} events`, `${events.length}`);
      const again = events.filter((e) => e.attempts > 1);
      expectThat(
        again.length === 0,
        "an attempt answered with a 2xx other than 200 was taken for a failure and made again (D6: any 2xx succeeds)",
        "each event attempted once",
        again.map((e) => `${e.id}: first attempt answered ${e.firstAnswer}, ${e.attempts} attempts`),
      );
    },
  }),
  defineCheck({
    id: "redirect-counts-as-failure",
    section: "§6, D6",
    title: "A 3xx answer is a failed attempt: retried after the first wait, and the redirect is not followed.",
    scenario: "one endpoint answering its first attempt with 307",
    async run(ctx, record) {
      const { redirect, redirectFollowed } = await failureKinds(ctx);
      expectEqual(redirectFollowed, 0, "the redirect was followed");
      expectRetries([redirect], redirect.verdict === "missing" ? "a 3xx was not retried as a failure" : `a 3xx's retry came ${redirect.verdict}${offSchedule}`, { ctx, record, title: "The retry after a 307" });
    },
  }),
  defineCheck({
    id: "closed-connection-counts-as-failure",
    section: "§6, D6",
    title: "A connection closed without an answer is a failed attempt, retried after the first wait.",
    scenario: "one endpoint closing the connection of its first attempt",
    async run(ctx, record) {
      const { closed } = await failureKinds(ctx);
      expectRetries(
        [closed],
        closed.verdict === "early" && (closed.window.cameMs ?? Number.POSITIVE_INFINITY) < closed.window.dueMs / 2
          ? "a closed connection's event came again long before the first wait: a connection closed without an answer is a failed attempt, made again at the next retry, not at once (D6); an HTTP client's own retry on a new connection does that (OkHttp's retryOnConnectionFailure, Go's Transport with an Idempotency-Key header): turn it off"
          : closed.verdict === "missing"
            ? "a closed connection was not retried as a failure"
            : `a closed connection's retry came ${closed.verdict}${offSchedule}`,
        { ctx, record, title: "The retry after a closed connection" },
      );
    },
  }),
  defineCheck({
    id: "timeout-counts-as-failure",
    section: "§6, D6, D24",
    title: "No answer within the attempt timeout is a failed attempt: retried the timeout plus the first wait after it began.",
    scenario: "one endpoint never answering its first attempt",
    async run(ctx, record) {
      expectRetries([(await failureKinds(ctx)).timeout], "a timed-out attempt was not retried at the timeout plus the first wait", {
        ctx,
        record,
        title: "The retry after an attempt that got no answer (due the timeout plus the first wait after it began)",
      });
    },
  }),
  defineCheck({
    id: "unfinished-answer-counts-as-failure",
    section: "§6, D6, D24",
    title: "A 2xx whose body does not end within the attempt timeout is no complete answer: a failed attempt, retried the timeout plus the first wait after it began.",
    scenario: "one endpoint answering its first attempt 200 with 8 of the 64 bytes its Content-Length promises, then nothing",
    async run(ctx, record) {
      expectRetries([(await failureKinds(ctx)).unfinished], "an attempt whose 2xx never completed was not retried at the timeout plus the first wait: a status without its whole body is no answer (D6), however the HTTP client hands it over", {
        ctx,
        record,
        title: "The retry after a 200 whose body never ended (due the timeout plus the first wait after the attempt began)",
      });
    },
  }),
  defineCheck({
    id: "unanswered-attempt-given-up-in-time",
    section: "§6, D6, D24",
    title:
      "An attempt that gets no answer is not given up before its timeout (under a scaled clock the scaled timeout, at least 1 real second; under a virtual clock 0.5 real seconds), nor after 5 real seconds under a virtual clock.",
    scenario: "one endpoint never answering its first attempt",
    async run(ctx) {
      const { unanswered } = await failureKinds(ctx);
      const { triggeredAt, arrivedAt, givenUp } = unanswered;
      const scaled = ctx.options.clock.kind === "scaled" ? ctx.options.clock.factor : undefined;
      const bounds = ctx.conformance.virtualClock.unansweredAttemptRealSeconds;
      const minMs = scaled === undefined ? bounds.min * 1000 : scaledAttemptTimeoutMs(ctx, scaled);
      // A scaled clock's late give-up shows as a late retry (timeout-counts-as-failure).
      const maxMs = scaled === undefined ? bounds.max * 1000 : Infinity;
      const expected = scaled === undefined ? `given up between ${minMs} and ${maxMs} ms (real) after the attempt began` : `given up no earlier than ${minMs} ms (real) after the attempt began`;
      // The attempt began after its trigger was sent and before it arrived: early only if early counted
      // from the trigger, late only if late counted from its arrival (timers and the event loop: 20 ms
      // early, 500 ms late allowed).
      expectThat(givenUp !== undefined, "the attempt that got no answer was never given up: neither its connection closed nor its retry came", expected, "neither");
      const fromTrigger = givenUp.at - triggeredAt;
      const fromArrival = givenUp.at - arrivedAt;
      const actual = `given up (by ${givenUp.by}) ${Math.round(fromArrival)} ms after the attempt arrived, ${Math.round(fromTrigger)} ms after its trigger was sent`;
      expectThat(fromTrigger >= minMs - 20, `an attempt that got no answer was given up before its timeout (D6, D24)`, expected, actual);
      expectThat(fromArrival <= maxMs + 500, `an attempt that got no answer was held longer than ${maxMs / 1000} real seconds under a virtual clock (D24: virtualClock.unansweredAttemptRealSeconds)`, expected, actual);
    },
  }),
  defineCheck({
    id: "webhook-disabled-after-consecutive-failures",
    section: "§3, §6, §8, D7",
    title:
      "After 5 consecutive failed attempts, of any kind, the webhook is disabled: no further attempt of the failing event. A success at another webhook of its business does not reset its count.",
    scenario: DISABLE_SCENARIO,
    async run(ctx) {
      const { firstAttempts, retries, afterDisable } = await failingUntilDisabled(ctx);
      const attempts = firstAttempts.length + retries.filter((r) => r.verdict !== "missing").length;
      expectEqual(attempts, ctx.rules.disableAfterConsecutiveFailures, "the number of attempts before disabling is wrong");
      expectEqual(summary(afterDisable), [], "attempts were made after the webhook should be disabled");
    },
  }),
  defineCheck({
    id: "disabled-webhook-receives-nothing",
    section: "§3, D7",
    title: "A disabled webhook is delivered no later event.",
    scenario: `${DISABLE_SCENARIO}, then a new event`,
    async run(ctx) {
      const { afterDisable } = await failingUntilDisabled(ctx);
      expectEqual(summary(afterDisable), [], "a disabled webhook received a delivery");
    },
  }),
  defineCheck({
    id: "new-webhook-at-a-disabled-url-leaves-it-disabled",
    section: "§3, D9, D26",
    title: "A new webhook registered at a disabled webhook's URL (as the disable e-mail says to) is a webhook of its own: the disabled one stays disabled, and an event both subscribe to reaches the new one only.",
    scenario: `${DISABLE_SCENARIO}, then a new webhook at its URL, which now answers 2xx, and a new event`,
    async run(ctx) {
      const { disabled, fresh, deliveries } = await reRegisteredAtTheDisabledUrl(ctx);
      const signedFor = (w: RegisteredWebhook) => deliveries.filter((d) => signedWith(ctx, d, w.secret)).length;
      expectEqual(
        { newWebhook: signedFor(fresh) > 0, disabledWebhook: signedFor(disabled) },
        { newWebhook: true, disabledWebhook: 0 },
        "the event did not reach the new webhook alone: registering its URL again must not enable the disabled webhook (D9: nothing re-enables one)",
      );
    },
  }),
  defineCheck({
    id: "disable-sends-one-notice",
    section: "§3, §6, D26",
    title: "Disabling sends one e-mail notice that names the webhook: any repeat (at-least-once across a crash) carries the same Message-ID.",
    scenario: DISABLE_SCENARIO,
    async run(ctx) {
      const run = await failingUntilDisabled(ctx);
      expectSomeMail(ctx, run);
      const ids = run.mine.map(messageIdOf);
      expectThat(
        ids.length >= 1 && new Set(ids).size === 1 && run.mine.every((m) => m.headers["message-id"] !== undefined),
        `the e-mails naming webhook ${run.webhook.webhookID} are not one notice (one Message-ID, sent once or repeated)`,
        "one Message-ID",
        ids,
      );
    },
  }),
  defineCheck({
    id: "disable-email-goes-to-partner-contact",
    section: "§3, D15, D26",
    title: "The disable e-mail goes to the partner's contact address (--partner-email), the only address it shows (To, Cc), with no Bcc header, not even an empty one; a copy to the platform's own mailbox may go by Bcc, unseen.",
    scenario: DISABLE_SCENARIO,
    async run(ctx) {
      const run = await failingUntilDisabled(ctx);
      expectSomeMail(ctx, run);
      const mails = run.mine.length ? run.mine : run.mails;
      const contact = mailbox(ctx.options.partnerEmail);
      // A Bcc copy sent in a transaction of its own is part of its notice (D26).
      // No Bcc header at all, not even an empty one (D26): whom it names or hides is none of the partner's business.
      const seen = notices(mails).map((copies) => ({ sentToContact: noticeAddressedTo(copies, contact), shows: noticeShows(copies), bccHeader: copies.some((m) => "bcc" in m.headers) }));
      expectEqual(
        seen,
        seen.map(() => ({ sentToContact: true, shows: [contact], bccHeader: false })),
        `the e-mail did not go to the partner's contact, shows another address, or has a Bcc header (its copies went to ${recipients(mails)})`,
      );
    },
  }),
  defineCheck({
    id: "disable-email-names-webhook-and-reason",
    section: "§3, D26",
    title:
      "The disable e-mail names the webhook (subject, header, text: id, URL, business), why it was disabled, that its pending deliveries were cancelled, and what to do: register a new webhook.",
    scenario: DISABLE_SCENARIO,
    async run(ctx) {
      const run = await failingUntilDisabled(ctx);
      expectSomeMail(ctx, run);
      const { webhookID, url, businessID } = run.webhook;
      const header = ctx.rules.disableEmail.webhookIdHeader.toLowerCase();
      const reason = `${ctx.rules.disableAfterConsecutiveFailures} consecutive failed delivery attempts`;
      // The id as a word of its own: 3000011 is another webhook than 300001.
      const namesId = (text: string) => new RegExp(`(?<![0-9A-Za-z])${webhookID.replace(/[^0-9A-Za-z]/g, "\\$&")}(?![0-9A-Za-z])`).test(text);
      const look = (m: DisableMailSeen) => {
        // Words are looked for across the lines a mailer wrapped the text into (RFC 5322 §2.1.1: 78 characters).
        const words = m.text.replace(/\s+/g, " ");
        return {
          subjectNamesWebhook: namesId(m.subject),
          [header]: m.headers[header],
          textNames: { webhookID: namesId(m.text), url: m.text.includes(url), businessID: m.text.includes(businessID) },
          textGivesReason: words.toLowerCase().includes(reason),
          textSaysCancelled: /\bcancell?ed\b/i.test(words),
          textSaysWhatToDo: /\bregist/i.test(words) || words.includes("POST /api/v2/webhooks"),
        };
      };
      const expected = {
        subjectNamesWebhook: true,
        [header]: webhookID,
        textNames: { webhookID: true, url: true, businessID: true },
        textGivesReason: true,
        textSaysCancelled: true,
        textSaysWhatToDo: true,
      };
      // A notice that names another webhook in its header is that webhook's: this one's has not come.
      const shown = run.mine[0] ?? run.mails[0]!;
      const another = run.mine.length === 0 ? shown.headers[header] : undefined;
      expectThat(
        another === undefined || another === webhookID,
        `no notice of webhook ${webhookID} came by the time the suite looked; the notice that came is webhook ${another}'s (a notice late, D25?)`,
        `a notice with ${header}: ${webhookID}`,
        `${header}: ${another}`,
      );
      expectEqual(look(shown), expected, "the e-mail does not say which webhook was disabled and why");
    },
  }),
  defineCheck({
    id: "disable-email-states-last-failure",
    section: "§3, D26",
    title: `The disable e-mail gives the last failure: for a webhook disabled by a ${LAST_FAILURE_STATUS} after four 503s, its text names the status ${LAST_FAILURE_STATUS}.`,
    scenario: `a webhook of --business-id whose endpoint answers one event's four attempts 503, then a new event's first attempt ${LAST_FAILURE_STATUS}, which disables it`,
    async run(ctx) {
      const { webhook } = await newEventAfterFailures(ctx);
      const dueNowMs = ctx.conformance.dueNowRealSeconds * 1000;
      const about = (mails: readonly DisableMailSeen[]) => mails.filter((m) => isAbout(ctx, m, webhook.webhookID));
      await waitForMails(ctx, (mails) => about(mails).length > 0, dueNowMs + 1000, "the notice of the webhook disabled by a 507").catch(() => undefined);
      const [notice] = about((await receivedMails(ctx)).map(({ mail }) => mail));
      expectThat(notice !== undefined, `no notice named webhook ${webhook.webhookID}, disabled by its fifth failure (D26)`, "a notice", "none");
      // Its id, URL and business may hold the digits too: they are not the failure.
      const rest = [webhook.webhookID, webhook.url, webhook.businessID].reduce((text, named) => text.split(named).join(" "), notice.text);
      expectThat(
        new RegExp(`\\b${LAST_FAILURE_STATUS}\\b`).test(rest),
        `the notice does not give the last failure, the endpoint's ${LAST_FAILURE_STATUS} after four 503s: D26 asks for the last one beside the reason (not a fixed status, nor the first failure)`,
        `${LAST_FAILURE_STATUS} in the text`,
        notice.text,
      );
    },
  }),
  defineCheck({
    id: "refused-notice-is-sent-again",
    section: "§3, D26",
    title: "A disable notice the SMTP server refuses (451, try again later) is kept and sent again, within 30 real seconds (x-conformance), with the Message-ID it was refused with.",
    scenario: "the reset scenario's webhook, disabled by a new event's failures; the first notice naming it refused with 451",
    async run(ctx) {
      const { webhook } = await resetThenLongWaits(ctx);
      const retryMs = ctx.conformance.refusedMailRetryRealSeconds * 1000;
      // Disabled by the end of its scenario: its notice falls due then (D26: within 5 s).
      await ctx.smtp.waitFor(() => ctx.smtp.refused.length > 0, ctx.conformance.dueNowRealSeconds * 1000 + 1000, "the refused notice").catch(() => undefined);
      const refusal = ctx.smtp.refused[0];
      expectThat(
        refusal !== undefined && isAbout(ctx, await decodedOnce(refusal), webhook.webhookID),
        `no notice naming the reset scenario's webhook ${webhook.webhookID} came to be refused: it is disabled by the new event's failures (failure-count-kept-while-nothing-is-pending)`,
        "a notice, refused once",
        "none",
      );
      // The refused notice itself, to the partner's contact: a copy to another mailbox, sent apart, is not it,
      // nor a notice with another Message-ID (D26: mail systems take that for a second notice).
      const refusedId = (await decodedOnce(refusal)).headers["message-id"]?.trim();
      const toContact = (m: DisableMailSeen) => isAbout(ctx, m, webhook.webhookID) && addressedTo(m, ctx.options.partnerEmail);
      const sentAgain = await waitForMails(
        ctx,
        (mails) => mails.some((m) => toContact(m) && m.headers["message-id"]?.trim() === refusedId),
        Math.max(0, refusal.receivedAt + retryMs - performance.now()),
        "the notice sent again",
        refusal.receivedAt,
      ).then(
        () => true,
        () => false,
      );
      const others = (await receivedMails(ctx)).filter(({ receivedAt, mail }) => receivedAt > refusal.receivedAt && toContact(mail)).map(({ mail }) => mail.headers["message-id"]);
      expectThat(
        sentAgain,
        others.length > 0
          ? `the notice the SMTP server refused with 451 came again with another Message-ID: a notice keeps its disabling's Message-ID when it is sent again (D26)`
          : `the notice the SMTP server refused with 451 was not sent again within ${retryMs / 1000} s: an e-mail the SMTP server does not take is kept and tried again (D26)`,
        { sentAgainWithin: `${retryMs / 1000} s`, messageId: refusedId },
        others.length > 0 ? { messageIds: others } : "not sent again",
      );
    },
  }),
  defineCheck({
    id: "each-disabling-sends-one-notice-in-time",
    section: "§3, D7, D24, D26",
    title:
      "Every disabling sends its notice, one Message-ID of its own, within 5 s of the failure that disabled: also when that failure is a first attempt, or one of several recorded together; and no second notice comes within those 5 s, nor any for a count a success reset.",
    scenario:
      "the first client's three webhooks the run disables: one whose endpoint always fails, one whose five events' first attempts fail together, one whose new event fails after another event's four failures; and the reset scenario's webhook (four failures, a success, failures until it is disabled)",
    async run(ctx) {
      const disabled = [(await failingUntilDisabled(ctx)).webhook, (await failuresAcrossEvents(ctx)).webhook, (await newEventAfterFailures(ctx)).webhook];
      const reset = (await resetThenLongWaits(ctx)).webhook;
      const dueNowMs = ctx.conformance.dueNowRealSeconds * 1000;
      // The notice falls due when the disabling failure is recorded: at the latest, after the last
      // failure the endpoint answered, or the server gave up waiting for an answer (when it closed the
      // connection, or the longest it may wait).
      const giveUpMs =
        ctx.options.clock.kind === "scaled"
          ? scaledAttemptTimeoutMs(ctx, ctx.options.clock.factor)
          : ctx.conformance.virtualClock.unansweredAttemptRealSeconds.max * 1000;
      const failedBy = (d: Delivery) => d.answeredAt ?? d.abandonedAt ?? (d.answer?.kind === "hang" ? d.arrivedAt + giveUpMs : d.arrivedAt);
      // Its failures only: a later success at the URL is another webhook's (new-webhook-at-a-disabled-url-leaves-it-disabled).
      const disabledBy = (w: RegisteredWebhook) => Math.max(...ctx.receiver.at(w.endpoint).filter((d) => !isSuccess(d)).map(failedBy));
      const deadlines = disabled.map((w) => disabledBy(w) + dueNowMs);
      // Until each has a copy to the contact about its webhook, or the time is up: a copy to the
      // platform's own mailbox may come first (D26).
      const contact = ctx.options.partnerEmail;
      const named = (mails: readonly DisableMailSeen[]) => disabled.every((w) => mails.some((m) => isAbout(ctx, m, w.webhookID) && addressedTo(m, contact)));
      await waitForMails(ctx, named, Math.max(0, Math.max(...deadlines) - performance.now()), "the disable e-mails").catch(() => undefined);
      // A second notice may come after the first (a send tried again with a new Message-ID), and a notice
      // sent early (at the fourth failure) only after its webhook's fifth came: every e-mail the 5 s allow
      // has come before they are counted.
      await delay(Math.max(0, Math.max(...deadlines, disabledBy(reset) + dueNowMs) - performance.now()));
      const decoded = await receivedMails(ctx);
      // The reset scenario's webhook is disabled once at most: a notice for its first four failures, which
      // a success reset, would be a second one (D7, D26).
      const resetNotices = notices(decoded.map(({ mail }) => mail).filter((mail) => isAbout(ctx, mail, reset.webhookID)));
      expectThat(
        resetNotices.length <= 1,
        `the reset scenario's webhook ${reset.webhookID} got ${resetNotices.length} notices (Message-IDs): it is disabled once at most, and a count a success reset disables nothing (D7, D26)`,
        "at most one notice",
        resetNotices.map((copies) => messageIdOf(copies[0]!)),
      );
      const mailsOf = disabled.map((w) => decoded.filter(({ mail }) => isAbout(ctx, mail, w.webhookID)));
      const idsOf = mailsOf.map((mails) => messageIds(mails.map(({ mail }) => mail)));
      const seen = disabled.map((w, i) => {
        const mails = mailsOf[i]!;
        // Timed by its copy to the contact: a copy to the platform's mailbox in time is not the notice.
        // Where none went there, by its first copy (where it went is disable-email-goes-to-partner-contact's concern).
        const toContact = mails.filter(({ mail }) => addressedTo(mail, contact));
        const first = Math.min(...(toContact.length ? toContact : mails).map((m) => m.receivedAt));
        return { webhook: w.endpoint, notices: idsOf[i]!.length, inTime: mails.length > 0 && first <= deadlines[i]! };
      });
      expectEqual(
        seen,
        disabled.map((w) => ({ webhook: w.endpoint, notices: 1, inTime: true })),
        "a disabling sent no notice, more than one (another Message-ID), or its notice came more than 5 s after the failure that disabled",
      );
      const ids = idsOf.map((ids) => ids[0]);
      expectThat(new Set(ids).size === ids.length, "two disablings' notices share a Message-ID: each disabling's notice is a message of its own (D26)", "a Message-ID per disabling", ids);
    },
  }),
  defineCheck({
    id: "disable-email-goes-to-its-own-partner-only",
    section: "§3, D15, D26, D27",
    title:
      "A notice goes to the contact of the partner whose webhook was disabled, and to no other partner, not even unseen by Bcc: the second client's notice to --second-partner-email alone, none of the first client's there.",
    scenario: "a webhook of the second client whose five events' first attempts fail (with --second-partner-email), and every notice of the run",
    async run(ctx) {
      const second = ctx.options.secondPartnerEmail === undefined ? undefined : mailbox(ctx.options.secondPartnerEmail);
      if (second === undefined) {
        throw new CheckSkipped("give --second-partner-email (the second client's contact address) to check that each partner's notice goes to that partner alone");
      }
      const { webhook, mails } = await secondPartnerDisabled(ctx);
      const first = mailbox(ctx.options.partnerEmail);
      const its = mails.filter((m) => isAbout(ctx, m, webhook.webhookID));
      expectThat(its.length > 0, `no e-mail named the second client's webhook ${webhook.webhookID} after its fifth failure in a row`, "a notice", "none");
      const seen = notices(its).map((copies) => ({
        toItsPartner: noticeAddressedTo(copies, second),
        toTheFirstPartner: noticeAddressedTo(copies, first),
        shows: noticeShows(copies),
      }));
      expectEqual(
        seen,
        seen.map(() => ({ toItsPartner: true, toTheFirstPartner: false, shows: [second] })),
        `the second client's notice did not go to its own contact alone (its copies went to ${recipients(its)})`,
      );
      // The notices of the first client's webhooks the suite registered (a notice of another run's, in a
      // store kept from it, is no concern here).
      const firstClients = ctx.registered.filter((w) => w.businessID !== ctx.options.secondClientBusinessId);
      const leaked = mails.filter((m) => addressedTo(m, second) && firstClients.some((w) => isAbout(ctx, m, w.webhookID))).map((m) => m.subject);
      expectEqual(leaked, [], "a notice of the first client's webhooks was sent to the second partner's contact (D26: a copy may go only to the platform's own mailbox)");
    },
  }),
  defineCheck({
    id: "no-notice-before-disabling",
    section: "§3, D7, D26",
    title:
      "No notice comes before its webhook is disabled: none for four failures (under a virtual clock the suite waits a second for one), a success and three more; none before the attempt whose failure disabled.",
    scenario:
      "the reset scenario's webhook (four failures, another event's success, then failures: none until the fourth after the success), and the first client's three webhooks the run disables (their fifth failed attempt)",
    async run(ctx) {
      const threshold = ctx.rules.disableAfterConsecutiveFailures;
      const reset = await resetThenLongWaits(ctx);
      const disabled = [(await failingUntilDisabled(ctx)).webhook, (await failuresAcrossEvents(ctx)).webhook, (await newEventAfterFailures(ctx)).webhook];
      // A server learns of a failure only once the attempt has come (the receiver answers after it
      // arrived): no notice of a disabling can come before its threshold-th attempt did. The reset
      // scenario's webhook is disabled at the earliest by the (threshold - 1)-th failure that arrived after
      // the success (the held failure before it may be recorded after it): a notice at a fourth failure comes sooner.
      // An attempt that reached the receiver unfinished (connecting or TLS took the server's whole timeout
      // on a loaded machine, D6) may be a failure it counted: each one between a webhook's registration and
      // a notice moves that notice's bound an attempt sooner. One that waits for the server's own pool never
      // comes; a connection closed at once, before any request, is no attempt given up by its timeout but a
      // client connecting for a request it gave up already (Node's Agent does, for one it queued).
      const y = reset.resetTrigger.arrived;
      const afterSuccess = y ? ctx.receiver.at(reset.webhook.endpoint).filter((d) => d.arrivedAt > y.arrivedAt && !isSuccess(d)) : [];
      const arrivedAt = (attempts: Delivery[], i: number, missing: number) => (i < 0 ? -Infinity : (attempts[i]?.arrivedAt ?? missing));
      const notBefore = [
        {
          webhook: reset.webhook,
          since: (unfinished: number) =>
            Math.max(unfinished > 0 ? -Infinity : reset.newEventArrivedAt, arrivedAt(afterSuccess, threshold - 2 - unfinished, -Infinity)),
        },
        ...disabled.map((w) => ({ webhook: w, since: (unfinished: number) => arrivedAt(ctx.receiver.at(w.endpoint), threshold - 1 - unfinished, Infinity) })),
      ];
      // Open at least half the shortest unanswered-attempt timeout D24 allows (under a scaled clock the floor is longer).
      const givenUpConnectionMs = (ctx.conformance.virtualClock.unansweredAttemptRealSeconds.min * 1000) / 2;
      const unfinishedBefore = (webhook: RegisteredWebhook, at: number) =>
        ctx.receiver.unfinished.filter(
          (u) =>
            u.at >= webhook.registeredAt &&
            u.at < at &&
            (u.endpoint ?? webhook.endpoint) === webhook.endpoint &&
            (u.endpoint !== undefined || u.endedAt - u.at >= givenUpConnectionMs),
        ).length;
      const decoded = await receivedMails(ctx);
      const early = notBefore.map(({ webhook, since }) => ({
        webhook: webhook.endpoint,
        early: decoded.filter(({ mail, receivedAt }) => isAbout(ctx, mail, webhook.webhookID) && receivedAt < since(unfinishedBefore(webhook, receivedAt))).length,
      }));
      expectEqual(
        early,
        notBefore.map(({ webhook }) => ({ webhook: webhook.endpoint, early: 0 })),
        `a notice came before its webhook was disabled (D7: at the ${threshold}th consecutive failure; a success resets the count), or ${UNSENT_COUNTED}`,
      );
    },
  }),
  defineCheck({
    id: "lead-expires-after-7-days",
    section: "§3, §8",
    title:
      "A lead without a hire produces lead.expired exactly 7 days after it was created, not before, whether the pro responded meanwhile or it was left new, and once: not again in the 7 days and an hour after (a scaled clock: the day after), also when a late lead.updated names it.",
    scenario: EXPIRY_SCENARIO,
    async run(ctx) {
      const { expiring, early, atExpiry, after } = await leadExpiry(ctx);
      expectThat(expiring.length === 2, "the two service requests did not each match a lead for the business", "2 leads", expiring);
      // Events, not attempts: a repeat of the expiry carries its id (D4).
      const seen = expiring.map(({ leadID, previousStatus }) => {
        const idsIn = (ds: Delivery[]) => new Set(ds.filter((d) => envelopeOf(d).data.leadID === leadID).map((d) => envelopeOf(d).id));
        const due = idsIn(atExpiry);
        return { lead: `the ${previousStatus} one`, before7Days: idsIn(early).size, at7Days: due.size, later: [...idsIn(after)].filter((id) => !due.has(id)).length };
      });
      expectEqual(
        seen,
        expiring.map(({ previousStatus }) => ({ lead: `the ${previousStatus} one`, before7Days: 0, at7Days: 1, later: 0 })),
        "a lead did not expire once, when 7 days after its creation fell due (D19: a change such as a response does not restart them, and expired is final, also for a late lead.updated; one later came late or again: a repeat of the same event would carry its id, D4)",
      );
    },
  }),
  defineCheck({
    id: "lead-expired-names-the-created-lead",
    section: "§3, D19, D20",
    title:
      "lead.expired names the lead that was created: its leadID, businessID and createdAt (an instant within the service request that created it), previousStatus the status it expired from (responded where lead.updated moved it there, new where nothing did), and expiredAt 7 days after createdAt, when the event occurred (its timestamp).",
    scenario: EXPIRY_SCENARIO,
    async run(ctx) {
      const { expiring, finalLeads, early, atExpiry } = await leadExpiry(ctx);
      const { requested, requestLeads } = await basics(ctx);
      expectThat(expiring.length === 2, "the two service requests did not each match a lead for the business", "2 leads", expiring);
      // createdAt is when the lead was created: an instant within the service request that created it, on
      // the implementation's clock (whole seconds: a timestamp or a reading may drop the fraction, D14).
      const [from, to] = wholeSecondsAround(requested[0], requested[1]);
      const window = `an instant from ${new Date(from).toISOString()} to ${new Date(to).toISOString()} (the service request that created the lead)`;
      const instant = (t: unknown) => (typeof t === "string" && UTC_TIMESTAMP.test(t) ? Date.parse(t) : NaN);
      const createdDuringRequest = (t: unknown) => (instant(t) >= from && instant(t) <= to ? window : t);
      // expiredAt is when the lead expired, and the event's timestamp when it occurred (D14): 7 days after
      // createdAt, within what lead-expires-after-7-days judges on time. A second either way where one of
      // the two dropped its fraction; later by the time the requests took (the lead may have been created,
      // and its 7 days begun, at their end), under a virtual clock by the advance that reached the expiry
      // (its target within half a second of it), and under a scaled one early or late as an event may be.
      const lifetimeMs = ctx.rules.leadExpirySeconds * 1000;
      const clock = ctx.options.clock;
      const { earlyRealMs, lateRealMs } = ctx.conformance.scaledClock.tolerance;
      const scaledMs = (realMs: number, sample: ClockSample) => (clock.kind === "scaled" ? (realMs + sample.halfWidthMs) / clock.factor : 0);
      const earlyMs = 1000 + scaledMs(earlyRealMs, requested[0]);
      const lateMs = 2000 + (requested[1].clockMs - requested[0].clockMs) + scaledMs(lateRealMs, requested[1]);
      const due = `an instant ${ctx.rules.leadExpirySeconds} s after createdAt, from ${Math.round(earlyMs / 1000)} s before to ${Math.round(lateMs / 1000)} s after`;
      const expiredWhenDue = (createdAt: unknown, expiredAt: unknown, read = instant) => {
        const late = read(expiredAt) - instant(createdAt) - lifetimeMs;
        return late >= -earlyMs && late <= lateMs ? due : expiredAt;
      };
      // The timestamp's form is timestamp-is-utc-iso8601's concern: any instant is read here.
      const anyInstant = (t: unknown) => (typeof t === "string" ? Date.parse(t) : NaN);
      // Leads of the suite's own first two requests (the final leads are left out below); another lead of the business expiring now was made before the
      // run (by `certify api` against the same store, say) and is no concern of this check.
      const ours = new Set<unknown>(requestLeads.map((l) => l.leadID));
      const before = (t: unknown) => typeof t === "string" && Date.parse(t) < from;
      const actual = [...early, ...atExpiry]
        .map((d) => envelopeOf(d))
        .filter(({ data }) => data.businessID === ctx.options.businessId && !Object.values(finalLeads).includes(data.leadID as string))
        .filter(({ data }) => ours.has(data.leadID) || !before(data.createdAt))
        .map(({ timestamp, data: { leadID, businessID, previousStatus, createdAt, expiredAt } }) => ({
          leadID,
          businessID,
          previousStatus,
          createdAt: createdDuringRequest(createdAt),
          expiredAt: expiredWhenDue(createdAt, expiredAt),
          timestamp: expiredWhenDue(createdAt, timestamp, anyInstant),
        }));
      // In any order (D5).
      const expected = expiring.map(({ leadID, previousStatus }) => ({ leadID, businessID: ctx.options.businessId, previousStatus, createdAt: window, expiredAt: due, timestamp: due }));
      expectEqual(actual.sort(byLeadID), expected.sort(byLeadID), "lead.expired does not describe the lead that was created, or is not stamped when it expired");
    },
  }),
  finalLeadNeverExpires("hired", "third", "§3, §6, D19"),
  finalLeadNeverExpires("declined", "fourth", "§3, D19"),
  finalLeadNeverExpires("cancelled", "fifth", "§3, D19"),
  defineCheck({
    id: "delivery-is-json-post",
    section: "§6, D1",
    title: "Every delivery of the run is a POST with Content-Type application/json, in UTF-8 if it names a charset.",
    scenario: "every delivery the suite's receiver saw",
    async run(ctx) {
      await basics(ctx);
      const seen = ctx.receiver.deliveries.map((d) => `${d.method} ${d.headers["content-type"] ?? "(none)"}`);
      const wanted = `${ctx.rules.method} ${ctx.rules.contentType}`;
      const charsets = (s: string) => s.split(";").slice(1).map((p) => p.trim().toLowerCase().replace(/"/g, "")).filter((p) => p.startsWith("charset="));
      const wrong = [...new Set(seen.filter((s) => s.split(";")[0]!.trim() !== wanted || charsets(s).some((c) => c !== "charset=utf-8")))];
      expectEqual(wrong, [], "a delivery used another method or content type, or named a charset other than UTF-8 (D1, D29: JSON has one encoding)");
    },
  }),
  defineCheck({
    id: "delivery-states-its-length",
    section: "§6, D1",
    title: "Every delivery of the run states its body's length (Content-Length) and is not chunked: receivers may read exactly that many bytes.",
    scenario: "every delivery the suite's receiver saw",
    async run(ctx) {
      await basics(ctx);
      const framing = (d: Delivery) => `Content-Length ${d.headers["content-length"] ?? "(none)"} of a ${d.body.length}-byte body${d.headers["transfer-encoding"] ? `, Transfer-Encoding ${d.headers["transfer-encoding"]}` : ""}`;
      const wrong = [...new Set(ctx.receiver.deliveries.filter((d) => d.headers["content-length"] !== String(d.body.length) || d.headers["transfer-encoding"] !== undefined).map(framing))];
      expectEqual(wrong, [], "a delivery did not state its length in Content-Length, or was sent chunked (D1: receivers written from the source read Content-Length)");
    },
  }),
  defineCheck({
    id: "triggered-event-carries-its-data",
    section: "D24",
    title:
      "An event triggered through the Control API with data carries that data as sent (its businessID the trigger's): nothing escaped, trimmed or re-encoded, and a member the event's schema does not define kept (events are open, D16).",
    scenario: `${DISABLE_SCENARIO}: its message.received, triggered with a text of <, >, &, /, "é", "—" and spaces at its ends, and a member conformanceNote that no schema defines`,
    async run(ctx) {
      const run = await failingUntilDisabled(ctx);
      const first = run.firstAttempts[0];
      expectThat(first !== undefined, "the triggered event's first attempt did not arrive", "an attempt", "none");
      const sent: Record<string, unknown> = { ...run.triggered, businessID: ctx.options.businessId };
      const data = envelopeOf(first!).data;
      const changed = Object.keys(sent).filter((name) => !isDeepStrictEqual(data[name], sent[name]));
      expectEqual(
        Object.fromEntries(changed.map((name) => [name, data[name]])),
        Object.fromEntries(changed.map((name) => [name, sent[name]])),
        "the event's data is not the data it was triggered with (D24: it replaces the example's; D1: UTF-8 JSON of the event)",
      );
    },
  }),
  defineCheck({
    id: "delivery-goes-to-the-registered-url",
    section: "§6, D28",
    title: "Every delivery of the run is made to the URL its webhook registered, path and query as registered: nothing added, nothing changed, and its Host header the URL's host and port.",
    scenario: "every delivery the suite's receiver saw",
    async run(ctx) {
      await basics(ctx);
      // Host is the URL's authority, its port included where it is not the scheme's default (RFC 9110 §7.2);
      // the request-target its path and query (a registered URL with capitals and a query among them).
      // A request-target in other letters than the registered one still names its webhook (the suite's endpoints differ otherwise).
      const urlOf = (endpoint: string) =>
        (ctx.registered.find((w) => w.endpoint === endpoint) ?? ctx.registered.find((w) => w.endpoint.toLowerCase() === endpoint.toLowerCase()))?.url ?? ctx.receiver.url(endpoint);
      const wrong = ctx.receiver.deliveries
        .map((d) => {
          const registered = new URL(urlOf(d.endpoint));
          return { registered: { host: registered.host, target: `${registered.pathname}${registered.search}` }, requested: { host: d.headers.host ?? "(no Host)", target: d.target } };
        })
        // The default port written or not (a receiver on 443: the registered URL writes it).
        .filter(({ registered, requested }) => registered.target !== requested.target || ![registered.host, `${registered.host}:443`].includes(requested.host.toLowerCase()));
      const absoluteForm = wrong.some((w) => !w.requested.target.startsWith("/"));
      expectEqual(
        [...new Map(wrong.map((w) => [`${w.requested.host} ${w.requested.target}`, w])).values()],
        [],
        `a delivery was made to another request-target or Host than the registered URL's${absoluteForm ? " (a request-target in absolute form is for a proxy: to the origin server a client sends the path and query alone, RFC 9112 §3.2.1)" : ""}`,
      );
    },
  }),
  defineCheck({
    id: "delivery-asks-no-100-continue",
    section: "§6, D52",
    title: "No delivery of the run sends Expect: 100-continue: the receiver answers each with its final response alone.",
    scenario: "every delivery the suite's receiver saw",
    async run(ctx) {
      await basics(ctx);
      const expecting = [...new Set(ctx.receiver.deliveries.map((d) => d.headers.expect).filter((v): v is string => v !== undefined))];
      expectEqual(expecting, [], "a delivery sent an Expect header (D52: a delivery never asks for 100 Continue, which many receivers' stacks do not send and undici refuses)");
    },
  }),
  defineCheck({
    id: "envelope-matches-event-schema",
    section: "§2.3, §2.4, D1, D20",
    title: "Every envelope delivered in the run is UTF-8 JSON without a byte order mark (RFC 8259 §8.1) that validates against its event's JSON Schema.",
    scenario: "every delivery the suite's receiver saw",
    async run(ctx) {
      await basics(ctx);
      const problems = ctx.receiver.deliveries.flatMap((d) => {
        // A parser may skip a byte order mark, a sender must not write one (RFC 8259 §8.1): many receivers' parsers fail on it.
        if (d.body.subarray(0, 3).equals(Buffer.from([0xef, 0xbb, 0xbf]))) return [`${d.endpoint}: the body starts with a byte order mark (U+FEFF), which JSON sent over a network must not have (RFC 8259 §8.1)`];
        const parsed = parseEvent(d.body);
        return parsed.ok ? [] : [`${d.endpoint}: ${parsed.error} ${parsed.issues.join("; ")}`];
      });
      expectEqual([...new Set(problems)], [], "a delivered envelope does not match its schema");
    },
  }),
  defineCheck({
    id: "event-id-names-one-event",
    section: "§2.3, D4",
    title: "An envelope id names one event across the whole run: every delivery that carries it, at any webhook, is of the same event name and timestamp.",
    scenario: "every delivery the suite's receiver saw, up to the leads' expiry (events of every name, first attempts and retries)",
    async run(ctx) {
      // With --only, the scenarios whose deliveries this is about, in the order a full run makes them.
      await basics(ctx);
      await failingUntilDisabled(ctx);
      await leadExpiry(ctx);
      const firstOf = new Map<string, { event: string; at: number }>();
      const clashes = ctx.receiver.deliveries.flatMap((d) => {
        const envelope = envelopeOrUndefined(d);
        if (!envelope || typeof envelope.id !== "string") return [];
        const seen = { event: envelope.event, at: Date.parse(envelope.timestamp) };
        const first = firstOf.get(envelope.id);
        if (!first) return void firstOf.set(envelope.id, seen), [];
        return first.event === seen.event && first.at === seen.at ? [] : [{ id: envelope.id, first: first.event, then: envelope.event, timestamps: [first.at, seen.at].map((t) => (Number.isNaN(t) ? "not a date" : new Date(t).toISOString())) }];
      });
      expectEqual(clashes, [], "one envelope id was given to two events (D4: an id is unique per event; a receiver that drops repeats by id loses the second)");
    },
  }),
  defineCheck({
    id: "every-delivery-matches-its-webhook",
    section: "§5.2, §5.3, §6, D2, D8",
    title:
      "Every delivery of the run is signed over its exact bytes with its own webhook's secret, and is of an event and a business that webhook subscribed to.",
    scenario:
      "every delivery to the webhooks the suite registered, up to the leads' expiry (one webhook has a secret of the longest length a registration takes, one event's text has <, >, &, / and non-ASCII characters)",
    async run(ctx) {
      // With --only, the scenarios whose deliveries this is about, in the order a full run makes them.
      await basics(ctx);
      await failingUntilDisabled(ctx);
      await leadExpiry(ctx);
      // The webhooks of each URL: one, or two that share it (webhooks-sharing-a-url-each-get-the-event);
      // a delivery is judged as one of the webhook its signature names, else of the URL's first.
      const byUrl = new Map<string, RegisteredWebhook[]>();
      for (const w of ctx.registered) byUrl.set(w.endpoint, [...(byUrl.get(w.endpoint) ?? []), w]);
      const wrong = ctx.receiver.deliveries.flatMap((d) => {
        const ofUrl = byUrl.get(d.endpoint);
        if (!ofUrl) return [];
        const webhook = ofUrl.find((w) => signedWith(ctx, d, w.secret)) ?? ofUrl[0]!;
        // Not a JSON object: envelope-matches-event-schema's concern; only the signature is checked here.
        const envelope = envelopeOrUndefined(d);
        const faults = [
          ...(signedWith(ctx, d, webhook.secret) ? [] : ["not signed with its secret over its bytes"]),
          ...(!envelope || webhook.events.includes(envelope.event as EventName) ? [] : [`an event it did not subscribe to`]),
          ...(!envelope || envelope.data?.businessID === webhook.businessID ? [] : [`business ${String(envelope.data?.businessID)}, not ${webhook.businessID}`]),
        ];
        return faults.length ? [`${d.endpoint}: ${envelope?.event ?? "(not readable)"}: ${faults.join(", ")}`] : [];
      });
      expectEqual([...new Set(wrong)], [], "a delivery was not signed with its webhook's secret, or was of an event or a business the webhook did not subscribe to");
    },
  }),
  // Last: every other check's e-mails have come by now.
  defineCheck({
    id: "no-webhook-gets-a-second-notice",
    section: "§3, D7, D26",
    title:
      "Over the whole run, the e-mails naming any one webhook carry one Message-ID: a notice sent again, however much later (before the run ends), and a copy for the platform's own mailbox keep their disabling's.",
    scenario: "the disablings of each-disabling-sends-one-notice-in-time, then every e-mail of the run, judged at its end (at least 6 s after its first e-mail)",
    async run(ctx) {
      await failingUntilDisabled(ctx);
      await failuresAcrossEvents(ctx);
      await newEventAfterFailures(ctx);
      await resetThenLongWaits(ctx);
      // A second notice may come later than the 5 s each-disabling-sends-one-notice-in-time waits for: every
      // one that came before the run's end counts. Alone (--only), the run lasts the 5 s and a second more.
      const first = Math.min(...ctx.smtp.messages.map((m) => m.receivedAt));
      if (Number.isFinite(first)) await delay(Math.max(0, first + (ctx.conformance.dueNowRealSeconds + 1) * 1000 - performance.now()));
      const mails = (await receivedMails(ctx)).map(({ mail }) => mail);
      const twice = ctx.registered.flatMap((w) => {
        const ids = messageIds(mails.filter((m) => isAbout(ctx, m, w.webhookID)));
        return ids.length > 1 ? [{ webhook: w.webhookID, messageIds: ids }] : [];
      });
      expectEqual(twice, [], "a webhook's e-mails carry more than one Message-ID: a second notice (D26: a notice sent again, and a copy for the platform's own mailbox, keep its Message-ID)");
    },
  }),
];
