// The delivery engine: wires the parts (parts.ts) into claim → attempt → record outcome → schedule,
// runs them on the server's clock, and sends the disable e-mails. State lives in the database, so a
// restart resumes the schedule; claims are leases, so several servers can share one PostgreSQL.
import type { DeliveryRules, EventName } from "@partner-platform/sdk";
import type { Clock } from "../clock.js";
import { claimCalls, NEXT_DUE_AT, type Db, type Queryable } from "../store.js";
import { createBatcher } from "./batches.js";
import { createDeadlines } from "./deadlines.js";
import { composeDisableMail } from "./mail.js";
import type { HeldClaims } from "./held.js";
import { endOf, memoized, type AdvanceSteps, type ClaimedAttempt, type DeliveryParts, type NewEvent, type Outcome, type Recorded } from "./parts.js";
import { originShares } from "./share.js";

/**
 * The delivery engine's defaults (D40, D44): connections per origin (host:port), attempts claimed and
 * under way at once, and attempts to one webhook at once (its share while it is alone at its origin).
 */
export const DELIVERY_DEFAULTS = { connectionsPerOrigin: 32, maxInFlight: 256, maxInFlightPerWebhook: 16 } as const;

export interface EngineOptions {
  db: Db;
  clock: Clock;
  rules: DeliveryRules;
  parts: DeliveryParts;
  /** This process's name on its claims. */
  owner: string;
  /** Real ms after which another process's claim is taken over. */
  leaseMs: number;
  /** Where the engine keeps the attempts it has claimed and not yet recorded (the parts' too: PartsContext.held). */
  held: HeldClaims;
  contactEmailFor: (clientId: string) => string | undefined;
  /** Each attempt's outcome once recorded, for the server's log. */
  outcomeLog?: (outcome: { webhookId: string; attemptId: string; attempt: number; ok: boolean; status?: number; error?: string; recorded: string }) => void;
  log: (message: string) => void;
  /** Real ms an attempt may take before it has failed (D6, D24): connecting, the answer and its body. */
  attemptTimeoutRealMs: number;
  /** At most this many attempts in flight at once (claims are bounded by it). */
  maxInFlight?: number;
  /** The dispatcher's connections per origin (host:port), shared by the webhooks there (D40). */
  connectionsPerOrigin: number;
  /** At most this many attempts to one webhook at once (D40): a lone webhook's share; below the connections per origin. */
  maxInFlightPerWebhook: number;
  /** Real ms at most between a waiting run's looks for work nobody told it of (D44; default 1000). */
  lookAroundMs?: number;
  /** Real ms a batch of outcomes waits for more attempts to end before it is recorded (default 30). */
  recordLingerMs?: number;
}

/** An attempt's bytes and their signature (DeliveryParts.sign). */
type Signed = ReturnType<DeliveryParts["sign"]>;

/** Records an event and queues its first attempts, inside the caller's transaction. */
export type Emit = (name: EventName, businessID: string, data: Record<string, unknown>, at?: number) => Promise<{ id: string; queuedFor: number }>;

export interface DeliveryEngine {
  /** Records an event and queues its first attempt for every enabled, subscribed webhook of the business. */
  emit: Emit;
  /** Runs `fn` in one transaction: the events it emits are stored and queued with its other writes, or not at all. */
  transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<T>;
  /** Emits a lead.updated "as if it had occurred" and, in the same transaction, moves the stored lead it names (D19). */
  updateLead(businessID: string, data: Record<string, unknown> & { leadID: string; status: string }): Promise<{ id: string; queuedFor: number }>;
  /** Makes every attempt (and lead expiry, and pending e-mail) due by now and (by default) waits for their outcomes. */
  runDue(waitForAttempts?: boolean): Promise<void>;
  /** Virtual clock: waits for what is under way, then moves the clock by `seconds`, running everything that falls due on the way, in order. */
  advance(seconds: number): Promise<void>;
  start(): Promise<void>;
  /** How many attempts this process has claimed and not yet recorded (D44: at most its places in flight). */
  claimed(): number;
  /** Stops: attempts in flight are abandoned unrecorded and handed back to the queue, to be made again on the next start. */
  stop(): Promise<void>;
}

/**
 * Outcomes recorded per statement before the next batch is taken without waiting (D7: in the order
 * the attempts ended), and real ms a batch waits for more to end before it is recorded. Measured on
 * PostgreSQL (3,000 outcomes, store alone): 32 a statement cost the server 23-27 µs and the database
 * 33-43 µs of CPU per outcome, 128 a statement 10 and 27; at ~3,000 deliveries/s a 10 ms wait
 * gathered ~30, so it is 30 ms (an outcome is recorded later, its attempt's place is freed as before).
 */
const RECORD_BATCH = 128;
const RECORD_LINGER_MS = 30;
/** Disable e-mails claimed at a time: each is renewed before its send, so a slow SMTP server cannot outlast the claims. */
const MAIL_BATCH = 10;
/**
 * Real ms before a disable e-mail whose send failed is tried again, doubled at each failure up to the
 * most: every pass of a busy engine tried every e-mail an SMTP server had refused. The failures are
 * counted in its row, and its claim is kept until the wait is over, so every server waits it out.
 */
const MAIL_RETRY_MS = { first: 1_000, most: 300_000 };
/** Events emitted alone stored per statement at most. */
const EMIT_BATCH = 256;
/** Real ms at least between two passes of the loop (real and scaled clocks), so that new events share one. */
const PASS_GAP_MS = 5;
/** Real ms at most between a waiting run's looks at what a pass does besides claiming (real and scaled clocks). */
const RUN_LOOK_MS = 1000;

export function createDeliveryEngine(options: EngineOptions): DeliveryEngine {
  const { db, clock, rules, parts } = options;
  const maxInFlight = options.maxInFlight ?? DELIVERY_DEFAULTS.maxInFlight;
  const lookAroundMs = options.lookAroundMs ?? RUN_LOOK_MS;
  const recordLingerMs = options.recordLingerMs ?? RECORD_LINGER_MS;
  // Room for at least this many before claiming again (or all of it when maxInFlight is small).
  const claimBatch = Math.max(1, Math.min(64, Math.floor(maxInFlight / 4)));
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;
  let looping = false;
  /** Clock time of the next pass of the loop, and the earliest time asked for during the current one. */
  let timerAt = Infinity;
  let orphansCheckedAt = Date.now();
  let wanted = Infinity;
  /**
   * A waiting run keeps one time to wake at (`wanted`): a later time asked for meanwhile is not kept but
   * noted here (Infinity: there may be one), and looked up once `wanted` is claimed (`lookUpWanted`).
   */
  let wantedLater = -Infinity;
  let lookUpWanted = false;
  /** Attempts and e-mail runs under way; the attempts' deadlines, which stop aborts at once. */
  const inFlight = new Set<Promise<void>>();
  const deadlines = createDeadlines(options.attemptTimeoutRealMs);
  let renewal: NodeJS.Timeout | undefined;
  let renewing: Promise<void> | undefined;
  let attemptsUnderWay = 0;
  /** Wakes a run waiting to claim: room was made, a webhook can take more, new work, a stop. */
  let waiting: (() => void) | undefined;
  let kickedMeanwhile = false;
  const kick = () => {
    if (waiting) waiting();
    else kickedMeanwhile = true;
  };
  /** Resolves on the next kick (or one that came meanwhile), or after `timeoutMs` real ms. */
  const kicked = (timeoutMs = Infinity): Promise<void> => {
    if (kickedMeanwhile) {
      kickedMeanwhile = false;
      return Promise.resolve();
    }
    let timeout: NodeJS.Timeout | undefined;
    return new Promise<void>((resolve) => {
      waiting = resolve;
      if (timeoutMs !== Infinity) timeout = setTimeout(resolve, timeoutMs);
    }).finally(() => {
      waiting = undefined;
      clearTimeout(timeout);
    });
  };
  /**
   * Attempts are made as their webhook's share of its origin's connections admits them (D40, share.ts).
   * A webhook is claimed for again once its claimed attempts fall to 2× its share, at most 4× the
   * per-webhook maximum at a time: a webhook that hangs holds a bounded part of the claims, and a
   * busy one costs a claim statement per 4× its maximum of deliveries (the embedded store's claims
   * cost far more than their rows), not one per delivery.
   */
  const shares = originShares({ connectionsPerOrigin: options.connectionsPerOrigin, maxPerWebhook: options.maxInFlightPerWebhook });
  const webhooks = new Map<string, { claimed: number; busy: boolean }>();
  const claimPerWebhook = 4 * options.maxInFlightPerWebhook;
  const claimBound = (webhookId: string) => 2 * shares.shareOf(webhookId);
  const originOf = memoized((url: string) => new URL(url).origin);
  /**
   * The server's places in flight are shared by the webhooks holding claims as an origin's connections
   * are (D44): with n of them each holds at most floor(maxInFlight / (n + 1)), and a claim leaves
   * floor(maxInFlight / (n + 2)) places free, so webhooks that hang on different hosts never hold them
   * all and the next webhook is claimed for at once. A claim takes at most half a webhook's places.
   */
  const placesEach = (n: number) => Math.max(1, Math.floor(maxInFlight / (n + 1)));
  const placesKeptFree = (n: number) => Math.floor(maxInFlight / (n + 2));
  const claimPerWebhookNow = () => Math.min(claimPerWebhook, Math.ceil(placesEach(webhooks.size) / 2));
  /**
   * A webhook with more than twice its share claimed already (D40), or whose places (D44) the next
   * claim could overfill: claims leave it out until it can take more. Asking marks it, so that the end
   * of one of its attempts kicks a claim once it can.
   */
  const isBusy = (webhookId: string) => {
    const own = webhooks.get(webhookId);
    if (own === undefined) return false;
    return (own.busy = own.claimed > claimBound(webhookId) || own.claimed + claimPerWebhookNow() > placesEach(webhooks.size));
  };
  /** The webhooks a claim took a full share of: they may have more due. */
  const fullShares = (claimed: ClaimedAttempt[], perWebhook: number) => {
    const counts = new Map<string, number>();
    for (const a of claimed) counts.set(a.webhookId, (counts.get(a.webhookId) ?? 0) + 1);
    return [...counts].filter(([, n]) => n >= perWebhook).map(([id]) => id);
  };

  // -- Events ------------------------------------------------------------------------------------

  function newEvent(name: EventName, businessID: string, data: Record<string, unknown>, at = clock.now()): NewEvent {
    // Fields named, not spread: on Node 20 each property written after a spread costs about a microsecond.
    const { id, body } = parts.envelope(name, data, at);
    return { id, body, name, businessId: businessID, at };
  }

  async function storeEvent(tx: Queryable, ...args: Parameters<Emit>) {
    const event = newEvent(...args);
    const [queuedFor] = await parts.queue(tx, [event]);
    return { id: event.id, queuedFor: queuedFor! };
  }

  // -- Events emitted alone: stored together (group commit) --------------------------------------

  /**
   * Events emitted outside a transaction, stored many per statement (at most EMIT_BATCH): measured on
   * the embedded store, a statement cost about a millisecond of the database thread's CPU per trigger.
   * A batch whose statement failed stored none: each of its events is stored on its own, so that one
   * that cannot be (a duplicate id, ...) fails only its own emit.
   */
  const emitted = createBatcher<NewEvent, number>({
    max: EMIT_BATCH,
    run: (events) => parts.queue(db, events),
    async failed(events, error) {
      if (events.length === 1) return [error];
      const results: (number | Error)[] = [];
      for (const event of events) results.push(await parts.queue(db, [event]).then(([n]) => n!, (e: unknown) => e as Error));
      return results;
    },
  });

  /** Runs `fn` in one transaction and says how many first attempts the events it emitted queued. */
  async function storeTransaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<{ result: T; queued: number }> {
    let queued = 0;
    const result = await db.transaction((tx) =>
      fn(tx, async (...args) => {
        const stored = await storeEvent(tx, ...args);
        queued += stored.queuedFor;
        return stored;
      }),
    );
    return { result, queued };
  }

  async function transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<T> {
    const { result, queued } = await storeTransaction(fn);
    await queuedSome(queued);
    return result;
  }

  /** After events were queued: the loop runs for them (and a timing may make them at once). */
  async function queuedSome(queued: number): Promise<void> {
    if (queued && !stopped) {
      wake();
      await parts.timing.queued?.(() => runDue());
    }
  }

  /** Expires the leads due by `now` (D19), each with its lead.expired, in one transaction; the run that expires them makes their attempts. */
  async function expireLeads(now: number): Promise<void> {
    await storeTransaction(async (tx, emit) => {
      for (const lead of await parts.expireLeads(tx, now)) {
        const data = {
          leadID: lead.id,
          businessID: lead.businessId,
          previousStatus: lead.previousStatus,
          createdAt: new Date(lead.createdAt).toISOString(),
          expiredAt: new Date(lead.expiresAt).toISOString(),
        };
        await emit("lead.expired", lead.businessId, data, lead.expiresAt);
      }
    });
  }

  // -- Recording outcomes: in the order the attempts ended, many per statement (D7) --------------

  /** Ends a batch's wait for more outcomes early: enough are waiting, or no attempt is left to end. */
  let gathered: (() => void) | undefined;
  const outcomes = createBatcher<Outcome, Recorded>({ max: 500, run: (batch) => recordOrHandBack(batch), beforeBatch: gather });

  /**
   * The attempts this process has claimed and not yet recorded: the only claims it renews, and on a
   * store only it uses, its claims themselves (D41: a claim leaves them out). One whose outcome could not
   * be recorded is handed back, or, where that fails too, left to run out its lease and be claimed again
   * (at-least-once, D4): renewing every claim of the process kept such attempts claimed, never made
   * again, until it stopped. Held in memory, it is claimed again once it is no longer held.
   */
  const held = options.held;
  /** Claims held in memory, not written (D41): nothing to renew or hand back. */
  const claimsInMemory = claimCalls(db).inMemory;

  async function recordOrHandBack(batch: Outcome[]): Promise<Recorded[]> {
    try {
      return await parts.record(batch);
    } catch (error) {
      // Claims held in memory are handed back as they are let go (run(): held.delete).
      if (claimsInMemory) throw error;
      await db
        .query("UPDATE attempts SET state = 'pending', claimed_by = NULL WHERE id = ANY($1::bigint[]) AND claimed_by = $2 AND state = 'in_flight'", [
          batch.map((o) => o.attemptId),
          options.owner,
        ])
        .catch((e: unknown) => options.log(`${batch.length} attempts whose outcomes were not recorded are claimed again once their leases run out: ${(e as Error).message}`));
      throw error;
    }
  }
  const enoughGathered = () => outcomes.waiting >= RECORD_BATCH || attemptsUnderWay === 0;

  function record(outcome: Outcome): Promise<Recorded> {
    const recorded = outcomes.add(outcome);
    if (enoughGathered()) gathered?.();
    return recorded;
  }

  /**
   * Waits up to recordLingerMs for the outcomes of attempts ending about now, so that they share
   * one statement: a statement costs far more than a row (measured on the embedded store: a batch of
   * one outcome per statement was 60% of the server's time per delivery).
   */
  function gather(): Promise<void> {
    if (enoughGathered()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, recordLingerMs);
      gathered = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => (gathered = undefined));
  }

  // -- One attempt -------------------------------------------------------------------------------

  /**
   * A claim's attempts are signed as it returns, one after another, not each as it starts: made
   * between attempts, a signature found the signing code and data evicted from the caches (by the
   * database's thread and the connections' TLS) and cost 15-25 µs of CPU instead of 5 (measured with
   * 8 MB read between signatures; in `serve`, sustained embedded, 8 runs alternated: 340-380 against
   * 360-413 µs of CPU per delivery). Undeliverable attempts are not signed.
   */
  function signClaimed(claimed: ClaimedAttempt[]): (Signed | undefined)[] {
    return claimed.map((a) => {
      if (!parts.deliverable(a)) return undefined;
      // A signer that throws fails its attempt, as a rejection would.
      let signed: Signed;
      try {
        signed = Promise.resolve(parts.sign(a as ClaimedAttempt & { body: string; secret: string }));
      } catch (error) {
        signed = Promise.reject(error as Error);
      }
      // Awaited by the attempt; one that never starts (a stop) must not leave a failure unhandled.
      signed.catch(() => undefined);
      return signed;
    });
  }

  async function attempt(a: ClaimedAttempt, signed: Signed | undefined): Promise<Outcome | undefined> {
    // Not signed: not deliverable (its webhook or event gone, or the webhook disabled).
    if (!signed) return { attemptId: a.id, webhookId: a.webhookId, ok: false, cancelled: true, endedAt: clock.now() };
    // The attempt starts, and its timeout with it, once its webhook's share of the origin admits it,
    // which is only with a connection free for it (D40): a burst waits here, before its deadline.
    let slot = webhooks.get(a.webhookId);
    if (!slot) webhooks.set(a.webhookId, (slot = { claimed: 0, busy: false }));
    slot.claimed++;
    const own = slot;
    try {
      return await shares.run(originOf(a.url!), a.webhookId, () => attemptNow(a, signed));
    } finally {
      if (--own.claimed === 0) webhooks.delete(a.webhookId);
      // Left out of claims while it had enough claimed: claimed for again now.
      if (own.busy && !isBusy(a.webhookId)) kick();
    }
  }

  async function attemptNow(a: ClaimedAttempt, signed: Signed): Promise<Outcome | undefined> {
    if (stopped) return undefined;
    // Not awaited when there is none: a microtask's turn less per attempt.
    if (parts.timing.beforeAttempt) await parts.timing.beforeAttempt();
    const startedAt = clock.now();
    const { body, signature } = await signed;
    if (stopped) return undefined;
    const signal = deadlines.start();
    try {
      const result = await parts.send(a.url!, body, signature, signal);
      const ok = result.error === undefined && result.status !== undefined && result.status >= 200 && result.status < 300;
      const endedAt = endOf(clock, rules, startedAt, result.timedOut);
      const retryAt = ok ? undefined : parts.retryAt({ attempt: a.attempt, startedAt, endedAt, timedOut: result.timedOut });
      return { attemptId: a.id, webhookId: a.webhookId, ok, cancelled: false, status: result.status, error: result.error, endedAt, retryAt };
    } catch (error) {
      // Stopping: left claimed, handed back to the queue by stop(), made again after the restart.
      if (signal.aborted && !signal.timedOut) return undefined;
      throw error;
    } finally {
      deadlines.end(signal);
    }
  }

  /** Makes an attempt, records it, then what its outcome calls for: the e-mail of a disabling, the retry's timer. */
  async function run(a: ClaimedAttempt, signed: Signed | undefined): Promise<void> {
    attemptsUnderWay++;
    let outcome: Outcome | undefined;
    try {
      outcome = await attempt(a, signed);
      if (!outcome) {
        held.delete(a.id);
        return;
      }
    } finally {
      attemptsUnderWay--;
      if (maxInFlight - attemptsUnderWay === claimBatch) kick();
    }
    const recorded = await record(outcome).finally(() => held.delete(a.id));
    options.outcomeLog?.({ webhookId: a.webhookId, attemptId: String(a.id), attempt: a.attempt, ok: outcome.ok, status: outcome.status, error: outcome.error, recorded });
    if (recorded === "disabled") await sendPendingNotifications();
    else if (recorded === "failed" && outcome.retryAt !== undefined) wake(outcome.retryAt);
  }

  /** Background work, tracked until it ends (advance and stop wait for it). */
  function track(work: Promise<void>, what: string): Promise<void> {
    const w: Promise<void> = work.catch((e: unknown) => options.log(`${what}: ${(e as Error).message}`)).finally(() => inFlight.delete(w));
    inFlight.add(w);
    return w;
  }

  // -- The disable e-mail (D26) ------------------------------------------------------------------

  /**
   * Sends the "webhook disabled" e-mails not sent yet, each claimed first so that it goes out once (D26).
   * One run at a time in a process: a call during a run joins it, and the run looks once more before it
   * ends. A run claims a few at a time, and renews each claim just before its send: a claim left to run
   * out while slow sends went before it was taken by the next run, and the e-mail went twice.
   */
  let mailing: Promise<void> | undefined;
  let mailAgain = false;
  function sendPendingNotifications(): Promise<void> {
    if (mailing) {
      mailAgain = true;
      return mailing;
    }
    mailing = (async () => {
      do {
        mailAgain = false;
        while ((await sendNotificationBatch()) === MAIL_BATCH);
      } while (mailAgain);
    })().finally(() => (mailing = undefined));
    return mailing;
  }

  /** Claims and sends up to MAIL_BATCH e-mails; returns how many were sent. */
  async function sendNotificationBatch(): Promise<number> {
    const realNow = Date.now();
    const { rows } = await db.query<{ webhook_id: string; client_id: string; url: string; business_id: string; created_at: string; send_failures: number }>(
      `WITH claimed AS (
         UPDATE notifications SET claimed_by = $1, claimed_at = $2 WHERE webhook_id IN (
           SELECT webhook_id FROM notifications WHERE sent_at IS NULL AND (claimed_by IS NULL OR claimed_at < $3)
           ORDER BY webhook_id LIMIT $4 FOR UPDATE SKIP LOCKED)
         RETURNING webhook_id, client_id, created_at, send_failures)
       SELECT c.webhook_id, c.client_id, c.created_at, c.send_failures, w.url, w.business_id FROM claimed c JOIN webhooks w ON w.id = c.webhook_id`,
      [options.owner, realNow, realNow - options.leaseMs, MAIL_BATCH],
    );
    let sent = 0;
    for (const n of rows) {
      // Still ours? Renewed, it stays ours for a lease from now; taken over, it is the other run's to send.
      const { rows: ours } = await db.query("UPDATE notifications SET claimed_at = $1 WHERE webhook_id = $2 AND claimed_by = $3 AND sent_at IS NULL RETURNING 1", [
        Date.now(),
        n.webhook_id,
        options.owner,
      ]);
      if (ours.length === 0) continue;
      try {
        const recipient = options.contactEmailFor(n.client_id);
        if (!recipient) throw new Error(`no contact address is configured for client ${n.client_id}`);
        const { rows: last } = await db.query<{ status: number | null; error: string | null }>(
          "SELECT status, error FROM attempts WHERE webhook_id = $1 AND state = 'failed' ORDER BY recorded_seq DESC LIMIT 1",
          [n.webhook_id],
        );
        await parts.sendMail(
          composeDisableMail({
            to: recipient,
            webhookId: n.webhook_id,
            url: n.url,
            businessId: n.business_id,
            disabledAt: Number(n.created_at),
            failures: rules.disableAfterConsecutiveFailures,
            attemptTimeoutSeconds: rules.attemptTimeoutSeconds,
            webhookIdHeader: rules.disableEmail.webhookIdHeader,
            lastFailure: last[0] ?? { status: null, error: null },
          }),
        );
      } catch (error) {
        // Kept claimed until the wait is over (a claim older than a lease is free), then any server tries again.
        const failures = n.send_failures + 1;
        const waitMs = Math.min(MAIL_RETRY_MS.first * 2 ** (failures - 1), MAIL_RETRY_MS.most);
        await db.query("UPDATE notifications SET send_failures = $1, claimed_at = $2 WHERE webhook_id = $3 AND claimed_by = $4", [
          failures,
          Date.now() + waitMs - options.leaseMs,
          n.webhook_id,
          options.owner,
        ]);
        if (failures === 1) options.log(`e-mail for webhook ${n.webhook_id} not sent yet; tried again in ${waitMs / 1000} s, then at waits doubling up to ${MAIL_RETRY_MS.most / 60_000} min: ${(error as Error).message}`);
        continue;
      }
      try {
        await db.query("UPDATE notifications SET sent_at = $1 WHERE webhook_id = $2", [clock.now(), n.webhook_id]);
        sent++;
      } catch (error) {
        // Sent, not recorded: it goes again after its claim's lease, with the same Message-ID (D26).
        options.log(`e-mail for webhook ${n.webhook_id} sent, but not recorded as sent; it may go again with its Message-ID: ${(error as Error).message}`);
      }
    }
    return sent;
  }

  // -- Running what is due -----------------------------------------------------------------------

  /**
   * Claims what is due, in bounded batches, and starts the attempts, each on its own: a slow or
   * hanging receiver delays nobody else. With `started` (virtual time, tests, timings that make first
   * attempts at once) it collects them, for the caller to wait for their outcomes.
   */
  async function runDueOnce(started?: Promise<void>[]): Promise<void> {
    if (stopped) return;
    await expireLeads(clock.now());
    let lookedAround = Date.now();
    /**
     * Waits for a kick. A run waits as long as a webhook with more due has enough claimed, which is
     * as long as its receiver hangs when it has a backlog: on real and scaled clocks the run claims what
     * fell due meanwhile (new events and retries, each at its time: each claim is for its own now),
     * expires leads at their time, and every `lookAroundMs` does what a new pass would (claims handed
     * back by servers that died, work queued by other servers).
     */
    const waitInRun = async () => {
      if (clock.mode === "virtual") return kicked();
      if (lookUpWanted) {
        // When work falls due next (a retry asked for while an earlier one was kept, a lead, another
        // server's): the run wakes then, and looks again once it is claimed.
        lookUpWanted = false;
        const next = await nextDueAt(clock.now());
        if (next !== undefined) {
          want(next);
          wantedLater = Infinity;
        }
      }
      // The time waited for came while this run claimed: claim now if there is room (a wait for it
      // would last until the next look around, the time being past).
      const now = clock.now();
      if (wanted <= now && maxInFlight - attemptsUnderWay >= claimBatch) return;
      // Work due by now waits for the kick of room or of a webhook that can take more.
      const until = wanted > now ? wanted : Infinity;
      await kicked(until !== Infinity ? Math.min(lookAroundMs, passDelay(until)) : lookAroundMs);
      if (stopped) return;
      const look = Date.now() - lookedAround >= lookAroundMs;
      if (look) {
        lookedAround = Date.now();
        lookUpWanted = true;
        await handBackOrphans();
      }
      // Leads that fell due (D19): at each look, and when a time waited for came (a lead's, looked up).
      if (look || until <= clock.now()) await expireLeads(clock.now());
    };
    for (;;) {
      if (stopped) break;
      if (maxInFlight - attemptsUnderWay < claimBatch) {
        // Claims come in batches (a claim per ended attempt would cost a statement each): wait for room.
        await waitInRun();
        continue;
      }
      const now = clock.now();
      // Claimed by this claim, if due: the pass asked for need not come.
      if (wanted <= now) {
        wanted = Infinity;
        if (wantedLater > now) lookUpWanted = true;
        wantedLater = -Infinity;
      }
      // Webhooks with their share claimed already are left for a later claim.
      kickedMeanwhile = false;
      const busy = [...webhooks.keys()].filter(isBusy);
      const perWebhook = claimPerWebhookNow();
      const limit = maxInFlight - attemptsUnderWay - placesKeptFree(webhooks.size);
      if (limit < 1) {
        // Held by webhooks claimed for while fewer held claims (D44): wait for one of their attempts to end.
        await waitInRun();
        continue;
      }
      const due = await parts.claim(now, limit, { busy, perWebhook });
      for (const a of due) held.add(a.id);
      const signed = signClaimed(due);
      const runs = due.map((a, i) => track(run(a, signed[i]), `attempt ${a.id}`));
      // Kept only to be waited for: a run in the background may claim a whole backlog.
      started?.push(...runs);
      // A claim short of its limit took every due attempt but those of the busy webhooks and of the
      // webhooks it took a full share of: claiming again before one of them can take more would be a
      // statement for nothing.
      const mayHaveMore = [...busy, ...fullShares(due, perWebhook)];
      if (due.length === limit || mayHaveMore.some((id) => !isBusy(id))) continue;
      if (mayHaveMore.length === 0) break;
      // Only busy webhooks may have more due: claim again when one of them can take more.
      await waitInRun();
    }
    // E-mails not sent by an earlier run (SMTP was down) are tried again on each run: started whether
    // or not anyone waits for them (`started?.push(track(…))` would not call it when nobody does).
    const mails = track(sendPendingNotifications(), "e-mails");
    started?.push(mails);
  }

  /** Serializes runs: callers that arrive during a run wait for a fresh one. */
  async function runDue(waitForAttempts = true): Promise<void> {
    while (running) await running;
    const started = waitForAttempts ? [] : undefined;
    running = runDueOnce(started).finally(() => {
      running = undefined;
    });
    await running;
    // Outside the run: a caller waiting for its attempts (a hanging receiver's, up to their timeout)
    // must not hold up the runs after it, which claim what falls due meanwhile and expire leads.
    if (started) await Promise.all(started);
  }

  /** Waits until nothing is under way: no run, no attempt, no outcome waiting to be recorded. */
  async function settle(): Promise<void> {
    while (running || inFlight.size > 0 || outcomes.draining) {
      await Promise.all([running, ...inFlight, outcomes.draining]);
    }
  }

  /** Clock time the next attempt or lead (after clock time `after`, if given) falls due. */
  async function nextDueAt(after = Number.MIN_SAFE_INTEGER): Promise<number | undefined> {
    // Attempts held in memory are still pending in the store, due already: not the next to fall due.
    const { rows } = await db.query<{ at: string | null }>(NEXT_DUE_AT, [after, claimsInMemory ? [...held] : []]);
    return rows[0]?.at === null || rows[0]?.at === undefined ? undefined : Number(rows[0].at);
  }

  /** Keeps the earlier of `at` and `wanted`; the later one is noted in `wantedLater`. */
  function want(at: number): void {
    const later = Math.max(at, wanted);
    if (later !== Infinity) wantedLater = Math.max(wantedLater, later);
    wanted = Math.min(wanted, at);
  }

  /**
   * Real and scaled clocks: makes sure the loop runs by clock time `at` (now by default), e.g. for a
   * new event or a retry due before the next scheduled pass. Virtual clocks move only when advanced.
   */
  function wake(at = clock.now()): void {
    if (stopped || clock.mode === "virtual") return;
    if (looping) {
      // Due now, or before the time a waiting run wakes at: it claims, or waits until then.
      if (at <= clock.now() || at < wanted) kick();
      want(at);
      return;
    }
    if (at >= timerAt) return;
    clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(loop, passDelay(at));
  }

  /**
   * Real milliseconds until a pass for work due at clock time `at`, at least PASS_GAP_MS: the events
   * triggered within a few milliseconds share a pass (a claim, and the look for the next due time)
   * instead of each taking one of its own.
   */
  function passDelay(at: number): number {
    return Math.max(PASS_GAP_MS, clock.realDelayUntil(at));
  }

  /** Another server on the database may have died: its claims are handed back as soon as seen (D41), checked every 5 s. */
  async function handBackOrphans(): Promise<void> {
    if (Date.now() - orphansCheckedAt <= 5000) return;
    orphansCheckedAt = Date.now();
    const handedBack = await db.handBackOrphans(options.owner);
    if (handedBack) options.log(`${handedBack} attempts left in flight by a stopped process are queued again`);
  }

  async function loop(): Promise<void> {
    if (stopped) return;
    looping = true;
    timerAt = Infinity;
    wanted = Infinity;
    wantedLater = -Infinity;
    lookUpWanted = false;
    // Re-check at least every second of real time, in case another process queued work.
    let next = clock.now() + 1000 / clock.scale;
    try {
      await handBackOrphans();
      await runDue(false);
      next = Math.min(next, (await nextDueAt()) ?? Infinity);
    } catch (error) {
      options.log(`delivery loop: ${(error as Error).message}`);
    } finally {
      looping = false;
    }
    if (stopped) return;
    timerAt = Math.min(next, wanted);
    timer = setTimeout(loop, passDelay(timerAt));
  }

  return {
    // An event alone needs no transaction: parts.queue stores it atomically, with others emitted meanwhile.
    async emit(...args) {
      const event = newEvent(...args);
      const queuedFor = await emitted.add(event);
      await queuedSome(queuedFor);
      return { id: event.id, queuedFor };
    },
    transaction,
    updateLead: (businessID, data) =>
      transaction(async (tx, emit) => {
        await parts.updateLead(tx, { id: data.leadID, businessId: businessID, status: data.status });
        return emit("lead.updated", businessID, data);
      }),
    runDue,
    claimed: () => held.size,
    async advance(seconds) {
      await settle();
      const target = clock.now() + seconds * 1000;
      const steps: AdvanceSteps = {
        nextDueAt: async () => (stopped ? undefined : nextDueAt()),
        async step(at) {
          if (stopped) return false;
          clock.set(at);
          await runDue();
          await settle();
          return true;
        },
      };
      await (parts.timing.advanceSteps ?? stepThroughDueInstants)(target, steps);
      await steps.step(target);
    },
    async start() {
      // Attempts in flight when a process died (kill -9) are made again now, not after their lease.
      const handedBack = await db.handBackOrphans(options.owner);
      if (handedBack) options.log(`${handedBack} attempts left in flight by a stopped process are queued again`);
      stopped = false;
      // A claim is a lease: one older than leaseMs is taken over as a dead process's. A live process's
      // attempts may wait longer than that for their webhook's share of a busy origin (D40), so it
      // renews its claims while it lives; only a process that died stops renewing. Only the claims older
      // than a sixth of a lease: renewed by half a lease at the latest, or by five sixths if a renewal
      // fails once, and a busy engine's young claims (most of them) are not rewritten for nothing.
      clearInterval(renewal);
      renewal = setInterval(() => {
        const now = Date.now();
        // Held in memory, a claim has no lease to renew.
        if (held.size === 0 || claimsInMemory) return;
        renewing ??= db
          .query("UPDATE attempts SET claimed_at = $1 WHERE id = ANY($4::bigint[]) AND state = 'in_flight' AND claimed_by = $2 AND claimed_at < $3", [
            now,
            options.owner,
            now - Math.floor(options.leaseMs / 6),
            [...held],
          ])
          .then(() => undefined, (error: unknown) => options.log(`renewing the claims failed (tried again in ${options.leaseMs / 3} ms): ${String(error)}`))
          .finally(() => (renewing = undefined));
      }, options.leaseMs / 3);
      renewal.unref();
      wake();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      clearInterval(renewal);
      await renewing;
      kick();
      deadlines.abortAll(new Error("the server is stopping"));
      await settle();
      await db.query("UPDATE attempts SET state = 'pending', claimed_by = NULL WHERE state = 'in_flight' AND claimed_by = $1", [options.owner]);
    },
  };
}

/** D24: an advance moves through every instant something falls due on the way, in order. */
async function stepThroughDueInstants(target: number, steps: AdvanceSteps): Promise<void> {
  for (;;) {
    const next = await steps.nextDueAt();
    if (next === undefined || next > target || !(await steps.step(next))) return;
  }
}
