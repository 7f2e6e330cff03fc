// The server checks. Scenarios drive the implementation once and record what the suite's receiver
// and SMTP sink saw; each check then asserts one thing about that record.
import { createHmac } from "node:crypto";
import { parseEvent } from "../../src/events/index.js";
import type { EventName } from "../../src/spec.js";
import { defineCheck, expectEqual, expectThat, type Check } from "../framework/check.js";
import { answers, type Delivery } from "../harness/receiver.js";
import type { CapturedMail } from "../harness/smtp-sink.js";
import type { RegisteredWebhook, RetryObservation, ServerContext } from "./context.js";

type ServerCheck = Check<ServerContext>;

const hmacHex = (body: Buffer, secret: string) => createHmac("sha256", secret).update(body).digest("hex");
const envelopeOf = (d: Delivery) => JSON.parse(d.body.toString("utf8")) as { id: string; event: string; timestamp: string; data: Record<string, unknown> };
const summary = (ds: readonly Delivery[]) => ds.map((d) => `${d.endpoint}: ${envelopeOf(d).event}`);

// ---------------------------------------------------------------------------------------------
// Scenario: correct deliveries to three webhooks (two secrets on one business, one other business).

interface BasicsRun {
  main: RegisteredWebhook;
  sameBusiness: RegisteredWebhook;
  otherBusiness: RegisteredWebhook;
  /** Deliveries of the two booking.confirmed events triggered for the main business. */
  bookings: Delivery[];
  /** What reached `main` for an event it is not subscribed to (review.created). */
  unsubscribed: Delivery[];
  /** What reached the main business's webhooks for the other business's event. */
  foreignBusiness: Delivery[];
  /** lead.created deliveries after a matching service request, and the request's leads. */
  leadCreated: Delivery[];
  requestLeads: { leadID: string; businessID: string }[];
}

function basics(ctx: ServerContext): Promise<BasicsRun> {
  return ctx.once("basics", async () => {
    const { businessId, otherBusinessId, categoryId, zip } = ctx.options;
    const main = await ctx.register("basics-main", ["booking.confirmed", "lead.created", "lead.expired"], businessId);
    const sameBusiness = await ctx.register("basics-second-secret", ["booking.confirmed"], businessId);
    const otherBusiness = await ctx.register("basics-other-business", ["booking.confirmed", "review.created"], otherBusinessId);

    await ctx.control.trigger("booking.confirmed", businessId);
    await ctx.control.trigger("booking.confirmed", businessId);
    await ctx.arrived(main.endpoint, 2, "two booking.confirmed at the main webhook");
    await ctx.arrived(sameBusiness.endpoint, 2, "two booking.confirmed at the second webhook");
    const bookings = [...ctx.receiver.at(main.endpoint), ...ctx.receiver.at(sameBusiness.endpoint)];

    const [mainBefore, sameBefore] = [ctx.receiver.at(main.endpoint).length, ctx.receiver.at(sameBusiness.endpoint).length];
    await ctx.control.trigger("review.created", businessId);
    await ctx.control.trigger("booking.confirmed", otherBusinessId);
    await ctx.arrived(otherBusiness.endpoint, 1, "booking.confirmed of the other business");
    await ctx.quietFor(main.endpoint, 0);
    const since = [...ctx.receiver.at(main.endpoint).slice(mainBefore), ...ctx.receiver.at(sameBusiness.endpoint).slice(sameBefore)];
    const unsubscribed = since.filter((d) => envelopeOf(d).event === "review.created");
    const foreignBusiness = since.filter((d) => envelopeOf(d).data.businessID === otherBusinessId);

    const before = ctx.receiver.at(main.endpoint).length;
    const { data, error, response } = await ctx.api.POST("/api/v4/requests", {
      body: {
        categoryID: categoryId,
        zipCode: zip,
        customer: { name: "Conformance Customer", email: "customer@example.com", phone: "+12125550143" },
      },
    });
    if (!data) throw new Error(`creating a service request failed with HTTP ${response.status}: ${JSON.stringify(error)}`);
    const requestLeads = data.leads;
    const mine = requestLeads.filter((l) => l.businessID === businessId).length;
    await ctx.arrived(main.endpoint, before + mine, "lead.created");
    const leadCreated = ctx.receiver.at(main.endpoint).slice(before).filter((d) => envelopeOf(d).event === "lead.created");
    return { main, sameBusiness, otherBusiness, bookings, unsubscribed, foreignBusiness, leadCreated, requestLeads };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: a webhook whose endpoint always fails, from the first attempt to disabling.

interface DisableRun {
  webhook: RegisteredWebhook;
  firstAttempts: Delivery[];
  retries: RetryObservation[];
  /** Attempts at the endpoint after the threshold was reached (old event or new ones). */
  afterDisable: Delivery[];
  mails: readonly CapturedMail[];
}

function failingUntilDisabled(ctx: ServerContext): Promise<DisableRun> {
  return ctx.once("disable", async () => {
    const { retryWaitsSeconds, disableAfterConsecutiveFailures } = ctx.rules;
    const webhook = await ctx.register("always-failing", ["message.received"], ctx.options.businessId);
    ctx.receiver.script(webhook.endpoint, [], answers.status(503));
    const mailsBefore = ctx.smtp.messages.length;
    await ctx.control.trigger("message.received", ctx.options.businessId);
    const firstAttempts = await ctx.arrived(webhook.endpoint, 1, "the first attempt");
    const retries: RetryObservation[] = [];
    // The threshold-th failed attempt disables: threshold - 1 retries happen.
    for (const wait of retryWaitsSeconds.slice(0, disableAfterConsecutiveFailures - 1)) {
      const observation = await ctx.nextAttempt(webhook.endpoint, wait);
      retries.push(observation);
      if (observation.verdict === "missing") break;
    }
    const afterThreshold = ctx.receiver.at(webhook.endpoint).length;
    const nextWait = retryWaitsSeconds[disableAfterConsecutiveFailures - 1] ?? retryWaitsSeconds.at(-1)!;
    await ctx.quietFor(webhook.endpoint, Math.ceil(nextWait * 1.2));
    await ctx.control.trigger("message.received", ctx.options.businessId);
    await ctx.quietFor(webhook.endpoint, 0);
    await ctx.smtp.waitFor((m) => m.length > mailsBefore, 5000, "the disable e-mail").catch(() => undefined);
    await ctx.quietFor(webhook.endpoint, 60);
    return {
      webhook,
      firstAttempts,
      retries,
      afterDisable: ctx.receiver.at(webhook.endpoint).slice(afterThreshold),
      mails: ctx.smtp.messages.slice(mailsBefore),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: failures, then a success on another event (reset), then the long retry waits.

interface ResetRun {
  waits: RetryObservation[];
  /** The reset-causing delivery arrived and was answered 2xx. */
  resetDelivered: boolean;
  /** Observation of the retry that comes after the reset and a further failure. */
  afterReset: RetryObservation[];
}

function resetThenLongWaits(ctx: ServerContext): Promise<ResetRun> {
  return ctx.once("reset", async () => {
    const waits = ctx.rules.retryWaitsSeconds;
    const threshold = ctx.rules.disableAfterConsecutiveFailures;
    const webhook = await ctx.register("reset", ["payment.received", "review.created"], ctx.options.businessId);
    // threshold - 1 failures of event X, the success of event Y, X fails once more, then X succeeds.
    const failures = Array.from({ length: threshold - 1 }, () => answers.status(500));
    ctx.receiver.script(webhook.endpoint, [...failures, answers.ok, answers.status(500)], answers.ok);
    await ctx.control.trigger("payment.received", ctx.options.businessId);
    await ctx.arrived(webhook.endpoint, 1, "the first attempt");
    const observed: RetryObservation[] = [];
    for (const wait of waits.slice(0, threshold - 2)) observed.push(await ctx.nextAttempt(webhook.endpoint, wait));
    const lastOfX = ctx.receiver.at(webhook.endpoint).at(-1);
    await ctx.control.trigger("review.created", ctx.options.businessId);
    const count = ctx.receiver.at(webhook.endpoint).length;
    const after = await ctx.arrived(webhook.endpoint, count + 1, "the resetting delivery");
    const resetDelivered = after.length > count && envelopeOf(after.at(-1)!).event === "review.created";
    const afterReset: RetryObservation[] = [];
    const [wait5, ...later] = waits.slice(threshold - 2);
    afterReset.push(await ctx.nextAttempt(webhook.endpoint, wait5!, { since: lastOfX }));
    for (const wait of later) afterReset.push(await ctx.nextAttempt(webhook.endpoint, wait));
    return { waits: observed, resetDelivered, afterReset };
  });
}

// ---------------------------------------------------------------------------------------------
// Scenario: answers that are failures without being 5xx: a redirect, a closed connection, no answer.

interface FailureKindsRun {
  redirect: RetryObservation;
  redirectFollowed: number;
  closed: RetryObservation;
  timeout: RetryObservation;
}

function failureKinds(ctx: ServerContext): Promise<FailureKindsRun> {
  return ctx.once("failure-kinds", async () => {
    // On the other business, with events no other scenario triggers there, one kind at a time.
    const business = ctx.options.otherBusinessId;
    const firstWait = ctx.rules.retryWaitsSeconds[0]!;
    const timeoutSeconds = ctx.rules.attemptTimeoutSeconds;
    const redirect = await ctx.register("redirecting", ["booking.cancelled"], business);
    ctx.receiver.script(redirect.endpoint, [answers.redirect(ctx.receiver.url("redirect-target"))]);
    await ctx.control.trigger("booking.cancelled", business);
    await ctx.arrived(redirect.endpoint, 1, "the first attempt at the redirecting endpoint");
    const redirected = await ctx.nextAttempt(redirect.endpoint, firstWait);

    const closed = await ctx.register("closing", ["lead.updated"], business);
    ctx.receiver.script(closed.endpoint, [answers.close]);
    await ctx.control.trigger("lead.updated", business);
    await ctx.arrived(closed.endpoint, 1, "the first attempt at the closing endpoint");
    const closedRetry = await ctx.nextAttempt(closed.endpoint, firstWait);

    // The retry of a hanging attempt comes the attempt timeout plus the first wait after it began.
    const hanging = await ctx.register("hanging", ["lead.updated"], business);
    ctx.receiver.script(hanging.endpoint, [answers.hang]);
    await ctx.control.trigger("lead.updated", business);
    await ctx.arrived(hanging.endpoint, 1, "the first attempt at the hanging endpoint");
    const timeout = await ctx.nextAttempt(hanging.endpoint, timeoutSeconds + firstWait, {
      allowRealMs: timeoutSeconds * 1000,
    });
    return { redirect: redirected, redirectFollowed: ctx.receiver.at("redirect-target").length, closed: closedRetry, timeout };
  });
}

// ---------------------------------------------------------------------------------------------

function expectRetries(observations: RetryObservation[], message: string): void {
  const seen = observations.map((o) => `${o.observed} (${o.verdict})`);
  const expected = observations.map((o) => `${o.expectedSeconds} s (on-time)`);
  expectThat(observations.every((o) => o.verdict === "on-time"), message, expected, seen);
}

export const serverChecks: ServerCheck[] = [
  defineCheck({
    id: "registration-rejects-plain-http-url",
    section: "§2.2, D16",
    title: "Registering a webhook with an http:// URL is refused with a 4xx problem.",
    async run(ctx) {
      // If it is accepted after all, it must not disturb other checks: lead.expired of the other business
      // comes only at the very end of the run.
      const { response } = await ctx.api.POST("/api/v2/webhooks", {
        body: { url: "http://hooks.example.com/plain", events: ["lead.expired"], businessID: ctx.options.otherBusinessId, secret: "0123456789abcdef0123" },
      });
      expectThat(response.status >= 400 && response.status < 500, "an http:// webhook URL was not refused", "4xx", response.status);
    },
  }),
  defineCheck({
    id: "registration-rejects-unknown-event-name",
    section: "§2.2, §6",
    title: "Registering a webhook for an event name that is not one of the eight is refused with a 4xx problem.",
    async run(ctx) {
      const { response } = await ctx.api.POST("/api/v2/webhooks", {
        body: {
          url: ctx.receiver.url("never"),
          events: ["lead.create" as EventName],
          businessID: ctx.options.businessId,
          secret: "0123456789abcdef0123",
        },
      });
      expectThat(response.status >= 400 && response.status < 500, "an unknown event name was not refused", "4xx", response.status);
    },
  }),
  defineCheck({
    id: "delivery-is-json-post",
    section: "§6, D1",
    title: "Every delivery is a POST with Content-Type application/json.",
    async run(ctx) {
      const { bookings } = await basics(ctx);
      expectThat(bookings.length > 0, "no delivery arrived", ">= 1 delivery", 0);
      const seen = bookings.map((d) => `${d.method} ${d.headers["content-type"] ?? "(none)"}`);
      const wanted = `${ctx.rules.method} ${ctx.rules.contentType}`;
      expectThat(
        seen.every((s) => s.split(";")[0] === wanted),
        "a delivery used another method or content type",
        wanted,
        seen,
      );
    },
  }),
  defineCheck({
    id: "envelope-matches-event-schema",
    section: "§2.3, §2.4",
    title: "Every delivered envelope validates against its event's JSON Schema.",
    async run(ctx) {
      const { bookings, leadCreated } = await basics(ctx);
      const problems = [...bookings, ...leadCreated].flatMap((d) => {
        const parsed = parseEvent(d.body);
        return parsed.ok ? [] : [`${d.endpoint}: ${parsed.error} ${parsed.issues.join("; ")}`];
      });
      expectEqual(problems, [], "a delivered envelope does not match its schema");
    },
  }),
  defineCheck({
    id: "event-id-has-evt-prefix",
    section: "§2.3, D4",
    title: "Every envelope id is evt_ followed by an identifier.",
    async run(ctx) {
      const ids = (await basics(ctx)).bookings.map((d) => envelopeOf(d).id);
      expectThat(ids.every((id) => /^evt_[0-9A-Za-z]{8,64}$/.test(id)), "an id does not have the evt_ form", "evt_<identifier>", ids);
    },
  }),
  defineCheck({
    id: "event-id-unique-per-event",
    section: "§2.3, D4",
    title: "Two events get two different ids; the same event has one id at every webhook.",
    async run(ctx) {
      const { main, sameBusiness, bookings } = await basics(ctx);
      const at = (w: RegisteredWebhook) => bookings.filter((d) => d.endpoint === w.endpoint).map((d) => envelopeOf(d).id);
      const [a, b] = [at(main), at(sameBusiness)];
      expectThat(new Set(a).size === 2, "two booking.confirmed events share an id", "2 distinct ids", a);
      expectEqual([...b].sort(), [...a].sort(), "the same events carry other ids at another webhook");
    },
  }),
  defineCheck({
    id: "event-id-stable-across-retries",
    section: "D4",
    title: "Every retry of an event carries the same envelope id.",
    async run(ctx) {
      const { webhook } = await failingUntilDisabled(ctx);
      const firstEvent = ctx.receiver.at(webhook.endpoint).slice(0, ctx.rules.disableAfterConsecutiveFailures);
      const ids = firstEvent.map((d) => envelopeOf(d).id);
      expectThat(ids.length > 1 && new Set(ids).size === 1, "the retries of one event carry different ids", "one id", ids);
    },
  }),
  defineCheck({
    id: "timestamp-is-utc-iso8601",
    section: "§2.3, D14",
    title: "Every envelope timestamp is an ISO 8601 date-time in UTC (Z).",
    async run(ctx) {
      const stamps = (await basics(ctx)).bookings.map((d) => envelopeOf(d).timestamp);
      const ok = (s: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/.test(s) && !Number.isNaN(Date.parse(s));
      expectThat(stamps.every(ok), "a timestamp is not ISO 8601 UTC", "YYYY-MM-DDTHH:MM:SS[.fff]Z", stamps);
    },
  }),
  defineCheck({
    id: "signature-is-hmac-of-exact-bytes",
    section: "§5.3, D2",
    title: "X-Service-Signature is the lowercase hex HMAC-SHA256 of the exact bytes delivered, keyed with the webhook secret.",
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
    title: "Each webhook's deliveries are signed with its own secret, not another webhook's.",
    async run(ctx) {
      const { sameBusiness, bookings } = await basics(ctx);
      const header = ctx.rules.signatureHeader.toLowerCase();
      const theirs = bookings.filter((d) => d.endpoint === sameBusiness.endpoint);
      const expected = theirs.map((d) => hmacHex(d.body, sameBusiness.secret));
      expectEqual(theirs.map((d) => d.headers[header]), expected, "a delivery is not signed with its webhook's secret");
    },
  }),
  defineCheck({
    id: "only-subscribed-events-arrive",
    section: "§6, D8",
    title: "A webhook receives only the events listed in its events field.",
    async run(ctx) {
      const { unsubscribed } = await basics(ctx);
      expectEqual(summary(unsubscribed), [], "an event the webhook did not subscribe to arrived");
    },
  }),
  defineCheck({
    id: "only-registered-business-events-arrive",
    section: "§2.2, D8",
    title: "A webhook receives only the events of its businessID.",
    async run(ctx) {
      const { foreignBusiness } = await basics(ctx);
      expectEqual(summary(foreignBusiness), [], "another business's event arrived");
    },
  }),
  defineCheck({
    id: "service-request-emits-lead-created",
    section: "§6, §2.4",
    title: "Creating a matching service request delivers lead.created for the matched business, with the request's lead and customer.",
    async run(ctx) {
      const { leadCreated, requestLeads } = await basics(ctx);
      const expected = requestLeads
        .filter((l) => l.businessID === ctx.options.businessId)
        .map((l) => ({ leadID: l.leadID, businessID: l.businessID, customer: "Conformance Customer" }));
      expectThat(expected.length > 0, "the service request matched no lead for the business", ">= 1 lead", requestLeads);
      const actual = leadCreated.map((d) => {
        const data = envelopeOf(d).data as { leadID: string; businessID: string; customer?: { name?: string } };
        return { leadID: data.leadID, businessID: data.businessID, customer: data.customer?.name };
      });
      expectEqual(actual, expected, "lead.created did not arrive as expected");
    },
  }),
  defineCheck({
    id: "retry-waits-follow-schedule",
    section: "§6, §8, D7",
    title: "Each retry waits 1 min, 5 min, 30 min, 2 h after the previous failure: never early, at most within tolerance late.",
    async run(ctx) {
      const { retries } = await failingUntilDisabled(ctx);
      expectRetries(retries, "a retry did not come at its wait after the previous failure");
    },
  }),
  defineCheck({
    id: "retry-waits-24h-after-reset",
    section: "§6, §8, D7",
    title: "After a success reset the count, the schedule goes on to the 2 h and 24 h waits.",
    async run(ctx) {
      const { waits, afterReset } = await resetThenLongWaits(ctx);
      expectRetries([...waits, ...afterReset], "the retry schedule around a reset is wrong");
    },
  }),
  defineCheck({
    id: "success-resets-failure-count",
    section: "§3, D7",
    title: "A 2xx resets the consecutive-failure count: failures before and after it do not add up to disabling.",
    async run(ctx) {
      const { resetDelivered, afterReset } = await resetThenLongWaits(ctx);
      expectThat(resetDelivered, "the success that should reset the count did not arrive", "delivered", "missing");
      const last = afterReset.at(-1)!;
      expectThat(last.verdict !== "missing", "the webhook stopped delivering: the success did not reset the count", "a further retry", last.observed);
    },
  }),
  defineCheck({
    id: "redirect-counts-as-failure",
    section: "§6, D6",
    title: "A 3xx answer is a failed attempt: retried after the first wait, and the redirect is not followed.",
    async run(ctx) {
      const { redirect, redirectFollowed } = await failureKinds(ctx);
      expectEqual(redirectFollowed, 0, "the redirect was followed");
      expectRetries([redirect], "a 3xx was not retried as a failure");
    },
  }),
  defineCheck({
    id: "closed-connection-counts-as-failure",
    section: "§6, D6",
    title: "A connection closed without an answer is a failed attempt, retried after the first wait.",
    async run(ctx) {
      expectRetries([(await failureKinds(ctx)).closed], "a closed connection was not retried as a failure");
    },
  }),
  defineCheck({
    id: "timeout-counts-as-failure",
    section: "§6, D6",
    title: "No answer within the attempt timeout is a failed attempt, retried after the first wait.",
    async run(ctx) {
      const { timeout } = await failureKinds(ctx);
      expectThat(timeout.verdict !== "missing", "a timed-out attempt was not retried", "a retry", timeout.observed);
    },
  }),
  defineCheck({
    id: "webhook-disabled-after-consecutive-failures",
    section: "§3, §6, §8, D7",
    title: "After 5 consecutive failed attempts the webhook is disabled: no further attempt of the failing event.",
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
    title: "A disabled webhook is not queued for, nor delivered, later events.",
    async run(ctx) {
      const { afterDisable } = await failingUntilDisabled(ctx);
      expectEqual(summary(afterDisable), [], "a disabled webhook received a delivery");
    },
  }),
  defineCheck({
    id: "disable-sends-exactly-one-email",
    section: "§3, §6, D15",
    title: "Disabling sends exactly one e-mail, to the partner's contact address.",
    async run(ctx) {
      const { mails } = await failingUntilDisabled(ctx);
      expectEqual(mails.length, 1, "not exactly one e-mail was sent");
      if (ctx.options.partnerEmail) expectEqual(mails[0]!.to, [ctx.options.partnerEmail], "the e-mail went elsewhere");
    },
  }),
  defineCheck({
    id: "lead-expires-after-7-days",
    section: "§3, §8",
    title: "A lead without a hire produces lead.expired exactly 7 days after it was created, not before.",
    async run(ctx) {
      const { main, leadCreated } = await basics(ctx);
      const lead = leadCreated[0] ? (envelopeOf(leadCreated[0]).data.leadID as string) : undefined;
      expectThat(lead !== undefined, "no lead to expire", "a lead.created", "none");
      const expired = (ds: Delivery[]) =>
        ds.filter((d) => envelopeOf(d).event === "lead.expired" && envelopeOf(d).data.leadID === lead).length;
      // Other scenarios moved the clock since the lead was created: count from its creation.
      const createdAt = Date.parse(envelopeOf(leadCreated[0]!).timestamp);
      const now = Date.parse((await ctx.control.clock()).now);
      const remaining = Math.round((createdAt - now) / 1000) + ctx.rules.leadExpirySeconds;
      const early = expired(await ctx.during(main.endpoint, Math.max(0, remaining - 1)));
      expectEqual(early, 0, "lead.expired came before 7 days");
      const onTime = expired(await ctx.quietFor(main.endpoint, 1));
      expectEqual(onTime, 1, "lead.expired did not come at 7 days");
    },
  }),
];
