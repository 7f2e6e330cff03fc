// What every server check works with: the implementation's API and control port, the suite's own
// receiver and SMTP sink, the clock driver, and the delivery and certification rules read from the spec.
//
// Timing rule of every scenario (docs/implementing-a-server.md): count what an endpoint has seen
// *before* acting, then wait for an exact count. An implementation may make an attempt that is due
// now before the trigger answers, right after, or only in the next advance: all three pass.
import { randomBytes } from "node:crypto";
import { createPartnerClient, type PartnerClient, loadDeliveryRules, type DeliveryRules, type EventName } from "@partner-platform/sdk";
import { loadConformanceRules, type ConformanceRules } from "../../src/spec.js";
import { waitingOutRateLimits } from "../api/context.js";
import { SetupError } from "../framework/check.js";
import type { Delivery, Receiver } from "../harness/receiver.js";
import type { SmtpSink } from "../harness/smtp-sink.js";
import { createClockDriver, scaledTolerance, type ClockDriver, type ClockSetting } from "./clock.js";
import { createControl, type Control } from "./control.js";

export interface ServerSuiteOptions {
  baseUrl: string;
  authUrl: string;
  clientId: string;
  clientSecret: string;
  controlUrl: string;
  clock: ClockSetting;
  /** The contact address the implementation holds for this client: the disable e-mail must go there. */
  partnerEmail: string;
  /** A business that serves `categoryId` at `zip` (default: the spec examples' 4711, 1000123, 10001). */
  businessId?: string;
  /** Another existing business of the same client (default 4712). */
  otherBusinessId?: string;
  /** A second client (another partner) allowed webhooks::write, for the business-ownership checks (D27). */
  secondClientId: string;
  secondClientSecret: string;
  /** A business of the second client, not of `clientId` (default 4713). */
  secondClientBusinessId?: string;
  /**
   * The contact address the implementation holds for the second client: with it, the suite disables a
   * webhook of that client too, and checks that each partner's notice goes to that partner alone.
   */
  secondPartnerEmail?: string;
  categoryId?: string;
  zip?: string;
}

export interface RegisteredWebhook {
  webhookID: string;
  endpoint: string;
  /** The URL registered: the suite receiver's URL of the endpoint. */
  url: string;
  secret: string;
  events: EventName[];
  businessID: string;
  /** `performance.now()` when its registration was sent: none of its attempts comes sooner. */
  registeredAt: number;
}

/** What a registration was answered, for the registration checks. */
export interface RegistrationAnswer {
  status: number;
  body: unknown;
}

export interface ServerContext {
  options: Required<Omit<ServerSuiteOptions, "secondPartnerEmail">> & Pick<ServerSuiteOptions, "secondPartnerEmail">;
  api: PartnerClient;
  control: Control;
  clock: ClockDriver;
  receiver: Receiver;
  smtp: SmtpSink;
  rules: DeliveryRules;
  conformance: ConformanceRules;
  /**
   * Registers a webhook for an endpoint of the suite's receiver with `secret` (default: a new one of 30
   * code points), its URL with `query` if given; a refusal stops the run (SetupError) with what to change.
   */
  register(endpoint: string, events: EventName[], businessID: string, secret?: string, query?: string): Promise<RegisteredWebhook>;
  /** The same as the second client (another partner), for its business (`secondClientBusinessId`). */
  registerAsSecondClient(endpoint: string, events: EventName[]): Promise<RegisteredWebhook>;
  /** Every webhook `register` and `registerAsSecondClient` made, in order. */
  readonly registered: readonly RegisteredWebhook[];
  /** Posts a registration body as is, for the checks of registration rules. */
  registerRaw(body: unknown): Promise<RegistrationAnswer>;
  /** The same as the second client (another partner, D27). */
  registerRawAsSecondClient(body: unknown): Promise<RegistrationAnswer>;
  /** A fresh secret of `length` code points (default 30), not ASCII only. */
  newSecret(length?: number): string;
  /** Runs a scenario once and shares its outcome among the checks that assert on it. */
  once<T>(key: string, scenario: () => Promise<T>): Promise<T>;
  /** How many attempts an endpoint has seen so far: take it before acting. */
  count(endpoint: string): number;
  /**
   * Makes what is due now (a virtual clock: advance 0) and waits until `endpoint` has seen `n` more
   * attempts than `since`; returns those that arrived after `since` (fewer if they did not come).
   */
  arrivals(endpoint: string, since: number, n: number, what: string): Promise<Delivery[]>;
  /** Lets exactly `seconds` pass and returns the attempts that arrived at `endpoint` meanwhile. */
  during(endpoint: string, seconds: number): Promise<Delivery[]>;
  /** Like `during`, plus (scaled time) the tolerance band, for asserting that nothing arrives. */
  quietFor(endpoint: string, seconds: number): Promise<Delivery[]>;
  /**
   * Under a scaled clock, waits (at most D24's due-now bound) until `done` holds: retries made one after
   * another may each be late by D25's allowance, so a chain of them may end after any window (when they
   * come is retry-waits-follow-schedule's concern). A virtual clock's step makes all that is due in it.
   */
  retriesCame(done: () => boolean, what: string): Promise<void>;
  /**
   * Waits for the next attempt at `endpoint` after those the scenario has accounted for (the ones
   * `arrivals` waited for, and earlier `nextAttempt`s), expected `waitSeconds` after `since` (default:
   * the last of those) failed. `scaledRealMs` replaces the expected real gap under a scaled clock (an
   * attempt timeout measured in real time); `startedAfter` (real ms, `performance.now()`) is a moment
   * the previous attempt cannot have begun before, where the wait counts from its beginning, which
   * comes before its arrival by its connecting and TLS.
   */
  nextAttempt(endpoint: string, waitSeconds: number, opts?: NextAttemptOptions): Promise<RetryObservation>;
}

export interface NextAttemptOptions {
  since?: Delivery;
  scaledRealMs?: number;
  startedAfter?: number;
}

/** "not timed": it came before the suite's virtual clock reached its due time, but counted from a retry that was not on time itself (the clock went past that one). */
export type RetryVerdict = "on-time" | "early" | "late" | "missing" | "not timed";

export interface RetryObservation {
  expectedSeconds: number;
  verdict: RetryVerdict;
  /** What was seen, for the report, e.g. "60 s", "within 59 s", "none within 72 s". */
  observed: string;
  /**
   * For the report's timeline, in ms after the previous attempt on the clock the suite measured with
   * (the server's under a virtual clock, real time under a scaled one): when it was due, the accepted
   * band, and when it came (under a virtual clock the end of the step it came in).
   */
  window: { dueMs: number; earliestMs: number; latestMs: number; cameMs?: number };
}

/** The businesses, category and zip code of the spec's examples, which the reference seed data serves. */
export const defaultTargets = { businessId: "4711", otherBusinessId: "4712", secondClientBusinessId: "4713", categoryId: "1000123", zip: "10001" } as const;

const guide = "docs/implementing-a-server.md";

/** What a refused registration of the suite's own receiver URL means for the setup. */
function registrationHint(status: number, body: unknown, url: string, secondClient: boolean): string {
  const pointers = ((body as { errors?: { pointer?: string }[] } | undefined)?.errors ?? []).map((e) => e.pointer);
  if (pointers.includes("/url")) {
    return `during certification the implementation must accept the suite's loopback HTTPS receiver URLs (${url}); see "What to accept during certification" in ${guide} (the reference server does with --conformance)`;
  }
  if (status === 403 && /business-forbidden$/.test(String((body as { type?: unknown } | undefined)?.type))) {
    return secondClient
      ? "--second-client-business-id must be a business of the second client (--second-client-id) in the implementation's configuration (D27)"
      : "--business-id and --other-business-id must be businesses of the client (--client-id) in the implementation's configuration (D27)";
  }
  if (status === 401 || status === 403) {
    return secondClient
      ? "the second client must be allowed webhooks::write (--second-client-id, --second-client-secret)"
      : "the client must be allowed every scope of the API (--client-id, --client-secret)";
  }
  if (status === 404) return secondClient ? "--second-client-business-id must name an existing business" : "--business-id and --other-business-id must name existing businesses";
  return `see ${guide}`;
}

export function createServerContext(options: ServerSuiteOptions, receiver: Receiver, smtp: SmtpSink): ServerContext {
  const resolved = { ...defaultTargets, ...options };
  const rules = loadDeliveryRules();
  const conformance = loadConformanceRules();
  const control = createControl(options.controlUrl);
  const clock = createClockDriver(options.clock, control);
  const api = createPartnerClient({
    baseUrl: options.baseUrl,
    authUrl: options.authUrl,
    clientId: options.clientId,
    clientSecret: options.clientSecret,
    scopes: ["demand::search", "demand::request", "webhooks::write"],
    // Tokens may expire on the server's clock (docs/implementing-a-server.md): under a fast scaled clock
    // a 3600 s token lives about 0.1 s of real time and can expire again before it is used.
    tokenRenewals: 5,
    fetch: waitingOutRateLimits(),
  });
  const secondApi = createPartnerClient({
    baseUrl: options.baseUrl,
    authUrl: options.authUrl,
    clientId: options.secondClientId,
    clientSecret: options.secondClientSecret,
    scopes: ["webhooks::write"],
    tokenRenewals: 5,
    fetch: waitingOutRateLimits(),
  });
  const scenarios = new Map<string, Promise<unknown>>();
  const count = (endpoint: string) => receiver.at(endpoint).length;
  /**
   * Per endpoint, how many of its attempts the scenario has accounted for: the next attempt is the one
   * after them, never "whatever comes after the count at the call", which a retry due a few ms after its
   * attempt (a short wait under a scaled clock) may already have passed.
   */
  const accounted = new Map<string, number>();
  const dueNowMs = conformance.dueNowRealSeconds * 1000;

  async function during(endpoint: string, seconds: number): Promise<Delivery[]> {
    const before = count(endpoint);
    await clock.elapse(seconds);
    return receiver.at(endpoint).slice(before);
  }

  async function quietFor(endpoint: string, seconds: number): Promise<Delivery[]> {
    const before = count(endpoint);
    await clock.elapse(seconds);
    if (options.clock.kind === "scaled") {
      await new Promise((resolve) => setTimeout(resolve, scaledTolerance(clock.realMs(seconds)).lateMs));
    }
    return receiver.at(endpoint).slice(before);
  }

  async function retriesCame(done: () => boolean, what: string): Promise<void> {
    if (options.clock.kind === "scaled") await receiver.waitFor(done, dueNowMs, what).catch(() => undefined);
  }

  /** Nothing at all reached the receiver: say why that is likely, and stop. */
  function noDeliveryAtAll(what: string): SetupError {
    const tls = receiver.tlsErrors.at(-1);
    if (tls) {
      // A hang-up without an alert is how Node's client refuses an unknown CA, and also any client that
      // gives up mid-handshake (a timeout of milliseconds: a scaled timeout without its 1 s floor).
      const hungUp = /hang up|reset/i.test(tls.message) ? `, or it gave up the handshake (an attempt timeout under a scaled clock is never below ${conformance.scaledClock.attemptTimeoutFloorRealSeconds} real second)` : "";
      return new SetupError(
        `the implementation connected to the suite's receiver but the TLS handshake failed (${tls.message}): it must trust the receiver's CA (the file in WEBHOOK_CA_FILE, or DIR/ca.pem with --pki-dir)${hungUp}`,
      );
    }
    return new SetupError(
      `no delivery attempt reached the suite's receiver (${receiver.url("")}) within ${conformance.dueNowRealSeconds} s, waiting for ${what}: ` +
        `the implementation must deliver to registered loopback HTTPS URLs and trust the receiver's CA (see ${guide})`,
    );
  }

  async function arrivals(endpoint: string, since: number, n: number, what: string): Promise<Delivery[]> {
    if (options.clock.kind === "virtual") await clock.elapse(0);
    const reached = await receiver
      .waitFor(() => count(endpoint) >= since + n, dueNowMs, what)
      .then(() => true)
      .catch(() => false);
    if (!reached && receiver.deliveries.length === 0) throw noDeliveryAtAll(what);
    accounted.set(endpoint, since + Math.min(n, count(endpoint) - since));
    return receiver.at(endpoint).slice(since);
  }

  /** Endpoints whose last retry was not on time under a virtual clock (the clock went past it). */
  const overshot = new Set<string>();
  async function nextAttempt(
    endpoint: string,
    wait: number,
    opts: NextAttemptOptions = {},
  ): Promise<RetryObservation> {
    const before = accounted.get(endpoint) ?? count(endpoint);
    const afterUntimed = overshot.has(endpoint);
    const observation = await observeNext(endpoint, before, wait, opts);
    if (observation.verdict !== "missing") accounted.set(endpoint, before + 1);
    // Under a virtual clock a retry that was not on time is seen only at the end of the step the clock
    // moved through, after it came, so the next wait is counted from there: one on time after it would
    // look early.
    if (options.clock.kind === "virtual" && observation.verdict !== "on-time" && observation.verdict !== "missing") overshot.add(endpoint);
    else overshot.delete(endpoint);
    if (afterUntimed && observation.verdict === "early") {
      return { ...observation, verdict: "not timed", observed: `${observation.observed} of when the one before it was seen, which was not on time` };
    }
    return observation;
  }

  async function observeNext(endpoint: string, before: number, wait: number, opts: NextAttemptOptions): Promise<RetryObservation> {
    if (options.clock.kind === "virtual") {
      const exact = { dueMs: wait * 1000, earliestMs: wait * 1000, latestMs: wait * 1000 };
      await clock.elapse(wait - 1);
      if (count(endpoint) > before) return { expectedSeconds: wait, verdict: "early", observed: `within ${wait - 1} s`, window: { ...exact, cameMs: (wait - 1) * 1000 } };
      await clock.elapse(1);
      if (count(endpoint) > before) return { expectedSeconds: wait, verdict: "on-time", observed: `${wait} s`, window: { ...exact, cameMs: wait * 1000 } };
      const grace = Math.ceil(wait * 0.2);
      await clock.elapse(grace);
      return count(endpoint) > before
        ? { expectedSeconds: wait, verdict: "late", observed: `between ${wait + 1} and ${wait + grace} s`, window: { ...exact, cameMs: (wait + grace) * 1000 } }
        : { expectedSeconds: wait, verdict: "missing", observed: `none within ${wait + grace} s`, window: exact };
    }
    const previous = opts.since ?? receiver.at(endpoint)[before - 1];
    const expectedMs = opts.scaledRealMs ?? clock.realMs(wait);
    const tolerance = scaledTolerance(expectedMs);
    const factor = options.clock.factor;
    const seconds = (ms: number) => `${(ms / factor / 1000).toFixed(1)} s`;
    // On the server's clock, as the report shows it: a real-time timeout is many of its seconds.
    const expectedSeconds = opts.scaledRealMs === undefined ? wait : Math.round(expectedMs / factor / 1000);
    // Counted from its beginning, the previous attempt may have begun this long before it arrived.
    const head = opts.startedAfter !== undefined && previous ? Math.max(0, previous.arrivedAt - opts.startedAfter) : 0;
    const band = { dueMs: expectedMs, earliestMs: expectedMs - tolerance.earlyMs - head, latestMs: expectedMs + tolerance.lateMs };
    try {
      await receiver.waitFor(() => count(endpoint) > before, expectedMs + tolerance.lateMs + 1000, `retry at ${endpoint}`);
    } catch {
      return { expectedSeconds, verdict: "missing", observed: `none within ${seconds(expectedMs + tolerance.lateMs)}`, window: band };
    }
    // From the failure the wait follows (D7): when the previous attempt was answered, or, with no
    // answer, when it arrived (the timeout's allowance above counts from its beginning). Early only
    // counted from when its answer began to be written, late only from when it was handed to the OS
    // (a busy event loop here can be milliseconds between the two, a first wait at 1e-4 is 6 ms).
    const arrivedAt = receiver.at(endpoint)[before]!.arrivedAt;
    const longest = arrivedAt - (previous ? (previous.answeringAt ?? previous.arrivedAt) : 0);
    const shortest = arrivedAt - (previous ? (previous.answeredAt ?? previous.arrivedAt) : 0);
    if (longest < band.earliestMs) return { expectedSeconds, verdict: "early", observed: seconds(longest), window: { ...band, cameMs: longest } };
    if (shortest > band.latestMs) return { expectedSeconds, verdict: "late", observed: seconds(shortest), window: { ...band, cameMs: shortest } };
    return { expectedSeconds, verdict: "on-time", observed: seconds(longest), window: { ...band, cameMs: longest } };
  }

  // Not ASCII only: the HMAC is keyed with the secret's UTF-8 bytes (D2), which Latin-1 or UTF-16 keys are not.
  const newSecret = (length = 30) => `whsec-é✓-${randomBytes(length).toString("base64url")}`.slice(0, length);
  const registered: RegisteredWebhook[] = [];

  async function registerRaw(body: unknown): Promise<RegistrationAnswer> {
    // The typed client would refuse most of these bodies at compile time: that is the point of them.
    const { error, data, response } = await api.POST("/api/v2/webhooks", { body: body as never });
    return { status: response.status, body: data ?? error };
  }

  async function registerRawAsSecondClient(body: unknown): Promise<RegistrationAnswer> {
    let answer: { error?: unknown; data?: unknown; response: Response };
    try {
      answer = await secondApi.POST("/api/v2/webhooks", { body: body as never });
    } catch (error) {
      throw new SetupError(`the second client (--second-client-id) could not get a token: ${(error as Error).message}`);
    }
    if (answer.response.status === 401) {
      throw new SetupError("the second client's token was refused (HTTP 401): pass the credentials of a second client (another partner) with --second-client-id/--second-client-secret");
    }
    return { status: answer.response.status, body: answer.data ?? answer.error };
  }

  async function registerWith(asSecondClient: boolean, endpoint: string, events: EventName[], businessID: string, secret = newSecret(), query?: string): Promise<RegisteredWebhook> {
    const post = asSecondClient ? registerRawAsSecondClient : registerRaw;
    const url = `${receiver.url(endpoint)}${query === undefined ? "" : `?${query}`}`;
    const registeredAt = performance.now();
    const { status, body } = await post({ url, events, businessID, secret });
    const webhookID = (body as { webhookID?: string } | undefined)?.webhookID;
    if (status !== 201 || !webhookID) {
      throw new SetupError(
        `registering a webhook for the suite's receiver (${url}) was answered HTTP ${status} ${JSON.stringify(body)}: ${registrationHint(status, body, url, asSecondClient)}`,
      );
    }
    const webhook = { webhookID, endpoint, url, secret, events, businessID, registeredAt };
    registered.push(webhook);
    return webhook;
  }

  return {
    options: resolved,
    api,
    control,
    clock,
    receiver,
    smtp,
    rules,
    conformance,
    registered,
    register: (endpoint, events, businessID, secret, query) => registerWith(false, endpoint, events, businessID, secret, query),
    registerAsSecondClient: (endpoint, events) => registerWith(true, endpoint, events, resolved.secondClientBusinessId),
    registerRaw,
    registerRawAsSecondClient,
    newSecret,
    once<T>(key: string, scenario: () => Promise<T>): Promise<T> {
      if (!scenarios.has(key)) scenarios.set(key, scenario());
      return scenarios.get(key) as Promise<T>;
    },
    count,
    arrivals,
    during,
    quietFor,
    retriesCame,
    nextAttempt,
  };
}
