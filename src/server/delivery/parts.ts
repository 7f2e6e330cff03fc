// The delivery engine's parts (spec/DECISIONS.md D1–D8, D24, D26), each a function with one job:
// make an envelope, queue an event's first attempts, claim what is due, sign, send, schedule the
// retry, record outcomes, send the disable e-mail. The engine (engine.ts) only wires them. They are
// also the seams through which conformance/broken builds its deliberately broken servers and
// conformance/server/timings.ts its other legal timings: a variant replaces a part, never a branch here.
import type { Dispatcher } from "undici";
import { newEventId, signPayload, type DeliveryRules, type EventName } from "@partner-platform/sdk";
import { answerOf, explainedAnswerError } from "../../sender.js";
import type { Clock } from "../clock.js";
import type { AddressPolicy } from "../ssrf.js";
import { claimCalls, EXPIRE_DUE_LEADS, secretFromStore, type Db, type Queryable } from "../store.js";
import type { AttemptSignal } from "./deadlines.js";
import type { HeldClaims } from "./held.js";

/** What every part may use. */
export interface PartsContext {
  db: Db;
  clock: Clock;
  rules: DeliveryRules;
  /** This process's name on its claims (leases). */
  owner: string;
  /** Real ms after which a claim belongs to a process that died and may be taken over. */
  leaseMs: number;
  /**
   * The attempts this process has claimed and not yet recorded (the engine's): on a store only this
   * process uses, claims are held here rather than written (D41), and a claim leaves them out. A
   * claim is noted through it (`claiming`), and a record issued through it (`recording`).
   */
  held: HeldClaims;
  /** Pools connections per receiver and trusts extra CAs. */
  dispatcher: Dispatcher;
  /** PEM of the extra CAs the dispatcher trusts besides the public ones (a conformance receiver's), if any. */
  webhookCa?: string;
  /** Real ms an attempt may take before it has failed (D6, D24). */
  attemptTimeoutRealMs: number;
  addressPolicy: AddressPolicy;
  /** Hands an e-mail to the SMTP server; resolves once it accepted it. */
  transport: (mail: DisableMail) => Promise<void>;
}

export interface NewEvent {
  id: string;
  name: EventName;
  businessId: string;
  /** Clock time it occurred. */
  at: number;
  /** The envelope's exact bytes (what every attempt sends). */
  body: string;
}

export interface ExpiredLead {
  id: string;
  businessId: string;
  previousStatus: string;
  createdAt: number;
  expiresAt: number;
}

/** A claimed attempt, with what it needs (null where the webhook or event is gone). */
export interface ClaimedAttempt {
  id: string;
  webhookId: string;
  attempt: number;
  url: string | null;
  secret: string | null;
  webhookStatus: string | null;
  /** The stored envelope. */
  body: string | null;
}

/** What an HTTP attempt came to: a status, or an error (connection, TLS, timeout). */
export interface SendResult {
  status?: number;
  error?: string;
  timedOut: boolean;
}

export interface Failure {
  /** 1 for the first attempt. */
  attempt: number;
  /** Clock time the attempt began and ended (a timed-out attempt ends at its start plus the timeout). */
  startedAt: number;
  endedAt: number;
  timedOut: boolean;
}

export interface Outcome {
  attemptId: string;
  webhookId: string;
  ok: boolean;
  /** Not made: its webhook is gone or disabled. */
  cancelled: boolean;
  status?: number;
  error?: string;
  endedAt: number;
  /** When the retry is due if this failure does not disable the webhook (none after the last retry). */
  retryAt?: number;
}

/** What recording an outcome did; "stale": another server took the attempt over (its lease ran out). */
export type Recorded = "succeeded" | "failed" | "disabled" | "cancelled" | "stale";

/** The "webhook disabled" e-mail (D26). */
export interface DisableMail {
  to: string;
  subject: string;
  text: string;
  /** Includes Message-ID, stable per disabling. */
  headers: Record<string, string>;
}

/**
 * When attempts that fall due are made. Real and scaled clocks run a timer; a virtual clock makes
 * what is due in `advance`. A timing may also make first attempts as soon as they are queued
 * (`queued`: before the caller answers, or in the background), or delay each attempt (`beforeAttempt`).
 */
export interface Timing {
  queued?(makeDue: () => Promise<void>): void | Promise<void>;
  beforeAttempt?(): Promise<void>;
  /**
   * The steps of a virtual clock's advance before its last, to `target`: by default one to each instant
   * something falls due on the way, in order (D24), each waiting for its outcomes, so that a retry that
   * falls due within the advance is made in it.
   */
  advanceSteps?(target: number, clock: AdvanceSteps): Promise<void>;
}

/** What an advance's steps are made of. */
export interface AdvanceSteps {
  /** The earliest instant something is due, if anything is pending. */
  nextDueAt(): Promise<number | undefined>;
  /** Moves the clock to `at`, makes what is due and waits for its outcomes; false once the engine stops. */
  step(at: number): Promise<boolean>;
}

export interface DeliveryParts {
  /** The envelope of a new event: its id and the exact bytes every attempt sends (§2.3, D4). */
  envelope(name: EventName, data: Record<string, unknown>, at: number): { id: string; body: string };
  /**
   * Stores new events and queues their first attempts for their subscribed, enabled webhooks (D8), in
   * one statement: atomic on its own, so that events emitted alone need no transaction. Returns how
   * many attempts each event queued, in the order given.
   */
  queue(tx: Queryable, events: NewEvent[]): Promise<number[]>;
  /** Marks the leads due to expire by `now` as expired (D19) and returns them. */
  expireLeads(tx: Queryable, now: number): Promise<ExpiredLead[]>;
  /**
   * Moves a stored lead to the status a lead.updated names, where the lead is of the event's business and
   * still open, new or responded (D19); any other lead.updated changes no lead.
   */
  updateLead(tx: Queryable, lead: { id: string; businessId: string; status: string }): Promise<void>;
  /**
   * Claims at most `limit` attempts that are due — with `spread`, at most `perWebhook` of each webhook
   * and none of the webhooks in `busy` (they have enough claimed already: D40) — or were left claimed
   * past their lease by a process that died.
   */
  claim(now: number, limit: number, spread?: { busy: string[]; perWebhook: number }): Promise<ClaimedAttempt[]>;
  /** Whether a claimed attempt is still to be made (its webhook exists and is enabled). */
  deliverable(a: ClaimedAttempt): boolean;
  /** The bytes an attempt sends and their signature (D2). */
  sign(a: ClaimedAttempt & { body: string; secret: string }): Promise<{ body: Buffer; signature: string }>;
  /**
   * Makes one HTTP attempt (D1, D6), abandoned when `signal` aborts: at the attempt timeout
   * (`signal.timedOut`: a failure) or when the engine stops (it throws: nothing is recorded).
   */
  send(url: string, body: Buffer, signature: string, signal: AttemptSignal): Promise<SendResult>;
  /** When the retry after a failed attempt is due (D7), or undefined after the last retry. */
  retryAt(failure: Failure): number | undefined;
  /** Records outcomes in the order given, each atomically (D7). */
  record(outcomes: Outcome[]): Promise<Recorded[]>;
  /** Sends the disable e-mail. */
  sendMail(mail: DisableMail): Promise<void>;
  timing: Timing;
}

/** A variant of the reference server: replaces some parts, given the default ones. */
export type PartsOverride = (base: DeliveryParts, ctx: PartsContext) => Partial<DeliveryParts>;

const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"]);

export function defaultParts(ctx: PartsContext): DeliveryParts {
  const { db, clock, rules } = ctx;
  // Claims written as leases, or held in this process's memory (D41): then each call names the ids held last.
  const claims = claimCalls(db);
  const signatureHeader = rules.signatureHeader.toLowerCase();
  // A webhook's URL is checked on each attempt (the policy may be stricter than at registration): the
  // same answer for the same URL, parsed once.
  const refusalOf = memoized((url: string) => ctx.addressPolicy.refuseAddressUrl(url));
  const targetOf = memoized((url: string) => {
    const { origin, pathname, search } = new URL(url);
    return { origin, path: pathname + search };
  });

  /**
   * An attempt's POST, as sender.ts's `answerOf` sends it: its answer counts once its body has ended.
   * The engine makes an attempt only with a connection of its origin free for it (D40, share.ts):
   * inside the attempt's deadline (the signal, deadlines.ts) there is connecting, the answer and its
   * body (D6), never a queue for a connection. undici's own timeouts, coarser, are a backstop.
   * Its fields are named, not spread from the target: on Node 20 each property written after a spread
   * cost about a microsecond (a spread and four more were 3.6 µs a request, named 50 ns; Node 22 and 24
   * take 50 ns either way).
   */
  const request = (url: string, body: Buffer, signature: string) => {
    const { origin, path } = targetOf(url);
    return { origin, path, method: rules.method, body, headers: { "content-type": rules.contentType, [signatureHeader]: signature }, timeoutMs: ctx.attemptTimeoutRealMs };
  };
  /** Claims what is due (DeliveryParts.claim). */
  async function claimDue(now: number, limit: number, spread = { busy: [] as string[], perWebhook: limit }): Promise<ClaimedAttempt[]> {
    const realNow = Date.now();
    const { rows } = await db.query<{
      // int8: a string from PostgreSQL's driver, a number from PGlite.
      id: string | number | null;
      webhook_id: string;
      attempt: number;
      body: string | null;
      url: string | null;
      secret: string | null;
      webhook_status: string | null;
    }>(
      // Its rows: each claimed webhook's (id null), then the attempts.
      claims.claim,
      [now, ctx.owner, realNow, realNow - ctx.leaseMs, limit, spread.perWebhook, spread.busy, ...(claims.inMemory ? [[...ctx.held]] : [])],
    );
    const webhooks = new Map(rows.filter((r) => r.id === null).map((r) => [r.webhook_id, r]));
    return rows.flatMap((r) => {
      if (r.id === null) return [];
      // A webhook deleted meanwhile has no row: its attempts are not deliverable.
      const w = webhooks.get(r.webhook_id);
      return [{ id: String(r.id), webhookId: r.webhook_id, attempt: r.attempt, url: w?.url ?? null, secret: w?.secret == null ? null : secretFromStore(w.secret), webhookStatus: w?.webhook_status ?? null, body: r.body }];
    });
  }

  return {
    envelope(name, data, at) {
      const id = newEventId(at);
      return { id, body: JSON.stringify({ id, event: name, timestamp: new Date(at).toISOString(), data }) };
    },

    async queue(tx, events) {
      const { rows } = await tx.query<{ counts: number[] }>("SELECT store_events($1, $2, $3, $4, $5) AS counts", [
        events.map((e) => e.id),
        events.map((e) => e.name),
        events.map((e) => e.businessId),
        events.map((e) => e.body),
        events.map((e) => e.at),
      ]);
      return rows[0]!.counts;
    },

    async expireLeads(tx, now) {
      const { rows } = await tx.query<{ id: string; business_id: string; previous_status: string; created_at: string; expires_at: string }>(
        EXPIRE_DUE_LEADS,
        [now],
      );
      return rows.map((r) => ({
        id: r.id,
        businessId: r.business_id,
        previousStatus: r.previous_status,
        createdAt: Number(r.created_at),
        expiresAt: Number(r.expires_at),
      }));
    },

    async updateLead(tx, lead) {
      await tx.query("UPDATE leads SET status = $1 WHERE id = $2 AND business_id = $3 AND status IN ('new', 'responded')", [lead.status, lead.id, lead.businessId]);
    },

    // Held in memory, a record waits for a claim under way and spares what it took (HeldClaims).
    claim: (now, limit, spread) => (claims.inMemory ? ctx.held.claiming(claimDue(now, limit, spread)) : claimDue(now, limit, spread)),
    deliverable: (a) => a.url !== null && a.secret !== null && a.body !== null && a.webhookStatus === "enabled",

    async sign(a) {
      const body = Buffer.from(a.body, "utf8");
      return { body, signature: signPayload(body, a.secret) };
    },

    async send(url, body, signature, signal) {
      // Names are re-checked by the connection's own look-up (the dispatcher's); addresses here.
      const refused = refusalOf(url);
      if (refused) return { error: refused, timedOut: false };
      // answerOf never rejects: an answer, or the error that ended it (a status with it is not kept).
      const { status, error: e } = await answerOf(ctx.dispatcher, request(url, body, signature), signal);
      if (!e) return { status, timedOut: false };
      if (signal.aborted && !signal.timedOut) throw e;
      const timedOut = signal.timedOut || TIMEOUT_CODES.has((e as { code?: string }).code ?? "") || e.name === "TimeoutError";
      const error = timedOut ? "no complete answer within the attempt timeout" : explainedAnswerError((e as { cause?: Error }).cause?.message ?? e.message);
      return { error, timedOut };
    },

    retryAt(failure) {
      const wait = rules.retryWaitsSeconds[failure.attempt - 1];
      return wait === undefined ? undefined : failure.endedAt + wait * 1000;
    },

    async record(outcomes) {
      const column = <T>(pick: (o: Outcome) => T) => outcomes.map(pick);
      const params = [
        column((o) => o.attemptId),
        column((o) => o.webhookId),
        column((o) => o.ok),
        column((o) => o.cancelled),
        column((o) => o.status ?? null),
        column((o) => o.error ?? null),
        column((o) => o.endedAt),
        column((o) => o.retryAt ?? null),
        ctx.owner,
        rules.disableAfterConsecutiveFailures,
      ];
      // Rows only for the outcomes not recorded as succeeded, by their place in the batch (store.ts).
      const recording = (...spared: string[][]) => db.query<{ place: number; ended: Recorded }>(claims.record, [...params, ...spared]);
      const { rows } = await (claims.inMemory ? ctx.held.recording(recording) : recording());
      const ended = outcomes.map((): Recorded => "succeeded");
      for (const r of rows) ended[r.place - 1] = r.ended;
      return ended;
    },

    sendMail: (mail) => ctx.transport(mail),

    timing: {},
  };
}

/** `fn` with its answers kept, for the last few thousand arguments (a server's webhooks' URLs). */
export function memoized<T>(fn: (key: string) => T, max = 4096): (key: string) => T {
  const answers = new Map<string, T>();
  return (key) => {
    if (answers.has(key)) return answers.get(key)!;
    const answer = fn(key);
    if (answers.size >= max) answers.clear();
    answers.set(key, answer);
    return answer;
  };
}

/** The default parts with a variant's replacements. */
export function buildParts(ctx: PartsContext, override?: PartsOverride): DeliveryParts {
  const base = defaultParts(ctx);
  return override ? { ...base, ...override(base, ctx) } : base;
}

/** Clock time an attempt ended: a timed-out attempt took the whole timeout (under a virtual clock, which did not move meanwhile: D24). */
export function endOf(clock: Clock, rules: DeliveryRules, startedAt: number, timedOut: boolean): number {
  return timedOut && clock.mode === "virtual" ? startedAt + rules.attemptTimeoutSeconds * 1000 : clock.now();
}
