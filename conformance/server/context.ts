// What every server check works with: the implementation's API and control port, the suite's own
// receiver and SMTP sink, the clock driver, and the delivery rules read from the spec.
import { randomBytes } from "node:crypto";
import { createPartnerClient, type PartnerClient } from "../../src/client/index.js";
import { loadDeliveryRules, type DeliveryRules, type EventName } from "../../src/spec.js";
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
  /** The contact address the implementation holds for this client; when given, the e-mail must go there. */
  partnerEmail?: string;
  /** A business that serves `categoryId` at `zip` (default: the spec examples' 4711, 1000123, 10001). */
  businessId?: string;
  /** Another existing business (default 4712). */
  otherBusinessId?: string;
  categoryId?: string;
  zip?: string;
}

export interface RegisteredWebhook {
  webhookID: string;
  endpoint: string;
  secret: string;
  events: EventName[];
  businessID: string;
}

export interface ServerContext {
  options: Required<Omit<ServerSuiteOptions, "partnerEmail">> & { partnerEmail?: string };
  api: PartnerClient;
  control: Control;
  clock: ClockDriver;
  receiver: Receiver;
  smtp: SmtpSink;
  rules: DeliveryRules;
  /** Registers a webhook for an endpoint of the suite's receiver; throws if the implementation refuses. */
  register(endpoint: string, events: EventName[], businessID: string): Promise<RegisteredWebhook>;
  /** Runs a scenario once and shares its outcome among the checks that assert on it. */
  once<T>(key: string, scenario: () => Promise<T>): Promise<T>;
  /** Waits until the attempts due now at `endpoint` have arrived (`count` in all). */
  arrived(endpoint: string, count: number, what: string): Promise<Delivery[]>;
  /** Lets exactly `seconds` pass and returns the attempts that arrived at `endpoint` meanwhile. */
  during(endpoint: string, seconds: number): Promise<Delivery[]>;
  /** Like `during`, plus (scaled time) a grace period, for asserting that nothing arrives. */
  quietFor(endpoint: string, seconds: number): Promise<Delivery[]>;
  /**
   * Waits for the next attempt at `endpoint`, expected `waitSeconds` after `since` (default: the
   * endpoint's last attempt) failed. `allowRealMs` widens the window for implementations that
   * measure a part of the wait (the attempt timeout) in real time.
   */
  nextAttempt(endpoint: string, waitSeconds: number, opts?: { since?: Delivery; allowRealMs?: number }): Promise<RetryObservation>;
}

export type RetryVerdict = "on-time" | "early" | "late" | "missing";

export interface RetryObservation {
  expectedSeconds: number;
  verdict: RetryVerdict;
  /** What was seen, for the report, e.g. "60 s", "within 59 s", "none within 72 s". */
  observed: string;
}

/** Real milliseconds to wait for something due now (the first attempt, an e-mail). */
const NOW_TIMEOUT_MS = 5000;

/** The businesses, category and zip code of the spec's examples, which the reference seed data serves. */
export const defaultTargets = { businessId: "4711", otherBusinessId: "4712", categoryId: "1000123", zip: "10001" } as const;

export function createServerContext(options: ServerSuiteOptions, receiver: Receiver, smtp: SmtpSink): ServerContext {
  const resolved = { ...defaultTargets, ...options };
  const rules = loadDeliveryRules();
  const control = createControl(options.controlUrl);
  const clock = createClockDriver(options.clock, control);
  const api = createPartnerClient({
    baseUrl: options.baseUrl,
    authUrl: options.authUrl,
    clientId: options.clientId,
    clientSecret: options.clientSecret,
    scopes: ["demand::search", "demand::request", "webhooks::write"],
  });
  const scenarios = new Map<string, Promise<unknown>>();
  const countAt = (endpoint: string) => receiver.at(endpoint).length;

  async function during(endpoint: string, seconds: number): Promise<Delivery[]> {
    const before = countAt(endpoint);
    await clock.elapse(seconds);
    return receiver.at(endpoint).slice(before);
  }

  async function quietFor(endpoint: string, seconds: number): Promise<Delivery[]> {
    const before = countAt(endpoint);
    await clock.elapse(seconds);
    if (options.clock.kind === "scaled") {
      await new Promise((resolve) => setTimeout(resolve, scaledTolerance(clock.realMs(seconds)).lateMs));
    }
    return receiver.at(endpoint).slice(before);
  }

  async function nextAttempt(
    endpoint: string,
    wait: number,
    opts: { since?: Delivery; allowRealMs?: number } = {},
  ): Promise<RetryObservation> {
    const before = countAt(endpoint);
    if (options.clock.kind === "virtual") {
      await clock.elapse(wait - 1);
      if (countAt(endpoint) > before) return { expectedSeconds: wait, verdict: "early", observed: `within ${wait - 1} s` };
      await clock.elapse(1);
      if (countAt(endpoint) > before) return { expectedSeconds: wait, verdict: "on-time", observed: `${wait} s` };
      const grace = Math.ceil(wait * 0.2);
      await clock.elapse(grace);
      return countAt(endpoint) > before
        ? { expectedSeconds: wait, verdict: "late", observed: `between ${wait + 1} and ${wait + grace} s` }
        : { expectedSeconds: wait, verdict: "missing", observed: `none within ${wait + grace} s` };
    }
    const previous = opts.since ?? receiver.at(endpoint).at(-1);
    const expectedMs = clock.realMs(wait);
    const base = scaledTolerance(expectedMs);
    const tolerance = { earlyMs: base.earlyMs, lateMs: base.lateMs + (opts.allowRealMs ?? 0) };
    const factor = options.clock.factor;
    try {
      await receiver.waitFor(() => countAt(endpoint) > before, expectedMs + tolerance.lateMs + 1000, `retry at ${endpoint}`);
    } catch {
      return { expectedSeconds: wait, verdict: "missing", observed: `none within ${((expectedMs + tolerance.lateMs) / factor / 1000).toFixed(0)} s` };
    }
    const gapMs = receiver.at(endpoint)[before]!.arrivedAt - (previous?.arrivedAt ?? 0);
    const observed = `${(gapMs / factor / 1000).toFixed(1)} s`;
    if (gapMs < expectedMs - tolerance.earlyMs) return { expectedSeconds: wait, verdict: "early", observed };
    if (gapMs > expectedMs + tolerance.lateMs) return { expectedSeconds: wait, verdict: "late", observed };
    return { expectedSeconds: wait, verdict: "on-time", observed };
  }

  return {
    options: resolved,
    api,
    control,
    clock,
    receiver,
    smtp,
    rules,
    async register(endpoint, events, businessID) {
      const secret = `whsec-${randomBytes(18).toString("base64url")}`;
      const { data, error, response } = await api.POST("/api/v2/webhooks", {
        body: { url: receiver.url(endpoint), events, businessID, secret },
      });
      if (!data) throw new Error(`registering ${endpoint} failed with HTTP ${response.status}: ${JSON.stringify(error)}`);
      return { webhookID: data.webhookID, endpoint, secret, events, businessID };
    },
    once<T>(key: string, scenario: () => Promise<T>): Promise<T> {
      if (!scenarios.has(key)) scenarios.set(key, scenario());
      return scenarios.get(key) as Promise<T>;
    },
    async arrived(endpoint, count, what) {
      if (options.clock.kind === "virtual") await clock.elapse(0);
      await receiver.waitFor(() => countAt(endpoint) >= count, NOW_TIMEOUT_MS, what).catch(() => undefined);
      return receiver.at(endpoint);
    },
    during,
    quietFor,
    nextAttempt,
  };
}
