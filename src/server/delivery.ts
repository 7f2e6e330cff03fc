// The delivery engine (spec/DECISIONS.md D1–D8, numbers from x-delivery): signed POSTs of the exact
// bytes, retries counted from each failure, one consecutive-failure counter per webhook, disabling
// with exactly one e-mail. State lives in the database, so a restart resumes the schedule.
import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import { request, type Dispatcher } from "undici";
import { newEventId } from "../events/index.js";
import { signPayload } from "../signing.js";
import type { DeliveryRules, EventName } from "../spec.js";
import type { Clock } from "./clock.js";
import { refuseAddressUrl } from "./ssrf.js";
import type { Db, Queryable } from "./store.js";

export interface EngineOptions {
  db: Db;
  clock: Clock;
  rules: DeliveryRules;
  /** Sends the "webhook disabled" e-mail; resolves once the SMTP server accepted it. */
  sendMail: (to: string, subject: string, text: string) => Promise<void>;
  contactEmailFor: (clientId: string) => string | undefined;
  /** Pools connections per receiver (and trusts extra CAs). */
  dispatcher: Dispatcher;
  allowPrivateWebhooks: boolean;
  /** Real milliseconds an attempt may take; by default the spec's timeout (scaled clocks included). */
  attemptTimeoutRealMs: number;
  log: (message: string) => void;
  /** Deliberate faults, for the conformance suite's broken variants only (conformance/broken). */
  faults?: ReadonlySet<ServerFault>;
}

/** The faults a broken variant of the reference server can have, one each. */
export type ServerFault =
  | "signs-reserialized-body"
  | "uppercase-hex-signature"
  | "signs-with-another-webhooks-secret"
  | "new-event-id-per-retry"
  | "no-reset-on-success"
  | "delivers-after-disable"
  | "no-disable-email"
  | "ignores-events-filter"
  | "ignores-business-filter"
  | "accepts-plain-http-url";

/** A claimed attempt, with what it needs to be made (null when the webhook or event is gone). */
interface AttemptRow {
  id: string;
  event_id: string;
  webhook_id: string;
  attempt: number;
  url: string | null;
  secret: string | null;
  webhook_status: string | null;
  body: string | null;
}

/** How an attempt ended, and what follows: the e-mail of a disabling, a retry due at `retryAt`. */
interface Outcome {
  ended: "succeeded" | "failed" | "disabled" | "cancelled" | "abandoned";
  retryAt?: number;
}

/** Records an event and queues its first attempts, inside the caller's transaction. */
export type Emit = (name: EventName, businessID: string, data: Record<string, unknown>, at?: number) => Promise<{ id: string; queuedFor: number }>;

export interface DeliveryEngine {
  /** Records an event and queues its first attempt for every enabled, subscribed webhook of the business. */
  emit: Emit;
  /** Runs `fn` in one transaction: the events it emits are stored and queued with its other writes, or not at all. */
  transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<T>;
  /** Makes every attempt (and lead expiry, and pending e-mail) due by now and (by default) waits for their outcomes. */
  runDue(waitForAttempts?: boolean): Promise<void>;
  /** Virtual clock: moves it by `seconds`, running everything that falls due on the way, in order. */
  advance(seconds: number): Promise<void>;
  start(): Promise<void>;
  /** Stops: attempts in flight are abandoned unrecorded and handed back to the queue, to be made again on the next start. */
  stop(): Promise<void>;
}

export function createDeliveryEngine(options: EngineOptions): DeliveryEngine {
  const { db, clock, rules } = options;
  const fault = (f: ServerFault) => options.faults?.has(f) ?? false;
  const timeoutMs = options.attemptTimeoutRealMs;
  // Claims of attempts and e-mails name their process; a claim older than any attempt can last (DNS,
  // connect, answer, body) belongs to a process that died, and is taken over. Real time: it is about processes.
  const owner = randomUUID();
  const leaseMs = 3 * timeoutMs + 10_000;
  const stopping = new AbortController();
  setMaxListeners(0, stopping.signal); // one listener per attempt in flight
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;
  let looping = false;
  /** Clock time of the next pass of the loop, and the earliest time asked for during the current one. */
  let timerAt = Infinity;
  let wanted = Infinity;
  const inFlight = new Set<Promise<void>>();
  const mailFailuresLogged = new Set<string>();

  async function record(tx: Queryable, name: EventName, businessID: string, data: Record<string, unknown>, at = clock.now()) {
    const id = newEventId(at);
    const body = JSON.stringify({ id, event: name, timestamp: new Date(at).toISOString(), data });
    await tx.query("INSERT INTO events (id, name, business_id, body, created_at) VALUES ($1, $2, $3, $4, $5)", [id, name, businessID, body, at]);
    // D8: the business's enabled webhooks that subscribe to the event.
    const { rows } = await tx.query<{ id: string; events: string }>(
      "SELECT id, events FROM webhooks WHERE (status = 'enabled' OR $1) AND (business_id = $2 OR $3)",
      [fault("delivers-after-disable"), businessID, fault("ignores-business-filter")],
    );
    const subscribed = rows.filter((w) => fault("ignores-events-filter") || (JSON.parse(w.events) as string[]).includes(name));
    for (const w of subscribed) {
      await tx.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) VALUES ($1, $2, 1, $3)", [id, w.id, at]);
    }
    return { id, queuedFor: subscribed.length };
  }

  async function transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<T> {
    let queued = 0;
    const result = await db.transaction((tx) =>
      fn(tx, async (...args) => {
        const recorded = await record(tx, ...args);
        queued += recorded.queuedFor;
        return recorded;
      }),
    );
    if (queued) wake();
    return result;
  }

  /** Expires the leads due by `now` (D19), each with its lead.expired, in one transaction. */
  async function expireLeads(now: number): Promise<void> {
    await transaction(async (tx, emit) => {
      const { rows } = await tx.query<{ id: string; business_id: string; previous_status: string; created_at: string; expires_at: string }>(
        `UPDATE leads SET status = 'expired' FROM (
           SELECT id, status FROM leads WHERE expires_at <= $1 AND status IN ('new', 'responded') FOR UPDATE SKIP LOCKED) AS previous
         WHERE leads.id = previous.id
         RETURNING leads.id, leads.business_id, previous.status AS previous_status, leads.created_at, leads.expires_at`,
        [now],
      );
      for (const lead of rows) {
        const expiredAt = Number(lead.expires_at);
        const data = {
          leadID: lead.id,
          businessID: lead.business_id,
          previousStatus: lead.previous_status,
          createdAt: new Date(Number(lead.created_at)).toISOString(),
          expiredAt: new Date(expiredAt).toISOString(),
        };
        await emit("lead.expired", lead.business_id, data, expiredAt);
      }
    });
  }

  /** Sends the "webhook disabled" e-mails not sent yet, each claimed first so that it goes out once. */
  async function sendPendingNotifications(): Promise<void> {
    const realNow = Date.now();
    const { rows } = await db.query<{ webhook_id: string; recipient: string }>(
      `UPDATE notifications SET claimed_by = $1, claimed_at = $2 WHERE webhook_id IN (
         SELECT webhook_id FROM notifications WHERE sent_at IS NULL AND (claimed_by IS NULL OR claimed_at < $3) FOR UPDATE SKIP LOCKED)
       RETURNING webhook_id, recipient`,
      [owner, realNow, realNow - leaseMs],
    );
    for (const n of rows) {
      try {
        await options.sendMail(
          n.recipient,
          `Partner Platform: webhook ${n.webhook_id} disabled`,
          `Your webhook ${n.webhook_id} was disabled after ${rules.disableAfterConsecutiveFailures} consecutive failed delivery attempts. ` +
            `Pending deliveries were cancelled and no further events will be sent to it. Register a new webhook once your endpoint answers with 2xx.`,
        );
        await db.query("UPDATE notifications SET sent_at = $1 WHERE webhook_id = $2", [clock.now(), n.webhook_id]);
      } catch (error) {
        // Handed back: the next run tries again.
        await db.query("UPDATE notifications SET claimed_by = NULL WHERE webhook_id = $1", [n.webhook_id]);
        if (!mailFailuresLogged.has(n.webhook_id)) options.log(`e-mail for webhook ${n.webhook_id} not sent yet, will retry: ${(error as Error).message}`);
        mailFailuresLogged.add(n.webhook_id);
      }
    }
  }

  /** Counts a failure (D7): queues the retry (returning when it is due), or disables the webhook at the threshold. */
  async function recordFailure(tx: Queryable, a: AttemptRow, failedAt: number): Promise<Outcome> {
    const { rows } = await tx.query<{ consecutive_failures: number; status: string; client_id: string }>(
      `UPDATE webhooks SET consecutive_failures = consecutive_failures + 1 WHERE id = $1
       RETURNING consecutive_failures, status, client_id`,
      [a.webhook_id],
    );
    const webhook = rows[0]!;
    if (webhook.status !== "enabled" && !fault("delivers-after-disable")) return { ended: "failed" };
    if (webhook.status === "enabled" && webhook.consecutive_failures >= rules.disableAfterConsecutiveFailures) {
      await tx.query("UPDATE webhooks SET status = 'disabled' WHERE id = $1", [a.webhook_id]);
      if (!fault("delivers-after-disable")) {
        await tx.query("UPDATE attempts SET state = 'cancelled' WHERE webhook_id = $1 AND state = 'pending'", [a.webhook_id]);
      }
      const recipient = options.contactEmailFor(webhook.client_id);
      if (recipient && !fault("no-disable-email")) {
        await tx.query("INSERT INTO notifications (webhook_id, recipient, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [
          a.webhook_id,
          recipient,
          failedAt,
        ]);
      }
      return { ended: "disabled" };
    }
    const wait = rules.retryWaitsSeconds[a.attempt - 1];
    if (wait === undefined) return { ended: "failed" }; // its last retry failed: the event is dropped (D7)
    const retryAt = failedAt + wait * 1000;
    await tx.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", [
      a.event_id,
      a.webhook_id,
      a.attempt + 1,
      retryAt,
    ]);
    return { ended: "failed", retryAt };
  }

  /** The bytes to send and their signature: the stored body, signed as is (unless a fault says otherwise). */
  async function signedBody(a: AttemptRow, stored: string, secret: string): Promise<{ body: Buffer; signature: string }> {
    let text = stored;
    if (fault("new-event-id-per-retry") && a.attempt > 1) {
      text = JSON.stringify({ ...(JSON.parse(stored) as object), id: newEventId(clock.now()) });
    }
    if (fault("signs-reserialized-body")) {
      const pretty = JSON.stringify(JSON.parse(text), null, 2);
      return { body: Buffer.from(pretty), signature: signPayload(JSON.stringify(JSON.parse(pretty)), secret) };
    }
    let key = secret;
    if (fault("signs-with-another-webhooks-secret")) {
      const { rows } = await db.query<{ secret: string }>("SELECT secret FROM webhooks WHERE id <> $1 ORDER BY id LIMIT 1", [a.webhook_id]);
      key = rows[0]?.secret ?? `${secret}-other`;
    }
    const body = Buffer.from(text, "utf8");
    const signature = signPayload(body, key);
    return { body, signature: fault("uppercase-hex-signature") ? signature.toUpperCase() : signature };
  }

  /** One attempt (D6). */
  async function attempt(a: AttemptRow): Promise<Outcome> {
    const startedAt = clock.now();
    if (a.url === null || a.secret === null || a.body === null || (a.webhook_status !== "enabled" && !fault("delivers-after-disable"))) {
      await db.query("UPDATE attempts SET state = 'cancelled', claimed_by = NULL WHERE id = $1", [a.id]);
      return { ended: "cancelled" };
    }
    const target = { url: a.url, secret: a.secret, body: a.body };
    let status: number | undefined;
    let error: string | undefined;
    let timedOut = false;
    // Names are re-checked by the connection's own look-up (the dispatcher's guarded lookup); addresses here.
    const refused = options.allowPrivateWebhooks ? undefined : refuseAddressUrl(target.url);
    if (refused) {
      error = refused;
    } else {
      const { body, signature } = await signedBody(a, target.body, target.secret);
      try {
        const response = await request(target.url, {
          method: rules.method,
          body,
          headers: { "content-type": rules.contentType, [rules.signatureHeader.toLowerCase()]: signature },
          // Timed from the moment the request is on a connection, not while it waits for one.
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          dispatcher: options.dispatcher,
          signal: stopping.signal,
        });
        status = response.statusCode;
        // The answer is complete when its body is: bounded too, so a trickling body cannot hold the attempt.
        // Past 128 KiB undici closes the connection rather than read on.
        await response.body.dump({ limit: 128 * 1024, signal: AbortSignal.any([stopping.signal, AbortSignal.timeout(timeoutMs)]) });
      } catch (e) {
        // Stopping: left claimed, handed back to the queue by stop(), made again after the restart.
        if (stopping.signal.aborted) return { ended: "abandoned" };
        const code = (e as { code?: string }).code;
        timedOut = ["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"].includes(code ?? "") || (e as Error).name === "TimeoutError";
        error = timedOut ? "no complete answer within the attempt timeout" : ((e as { cause?: Error }).cause?.message ?? (e as Error).message);
      }
    }
    const ok = error === undefined && status !== undefined && status >= 200 && status < 300;
    // A timed-out attempt took the whole timeout, in the clock's time: a virtual clock did not move meanwhile (D24).
    const finishedAt = timedOut && clock.mode === "virtual" ? startedAt + rules.attemptTimeoutSeconds * 1000 : clock.now();
    if (ok) {
      // One statement, so no transaction round trips on the common path.
      await db.query(
        `WITH done AS (UPDATE attempts SET state = 'succeeded', status = $2, finished_at = $3, claimed_by = NULL WHERE id = $1)
         UPDATE webhooks SET consecutive_failures = 0 WHERE id = $4 AND NOT $5`,
        [a.id, status, finishedAt, a.webhook_id, fault("no-reset-on-success")],
      );
      return { ended: "succeeded" };
    }
    return db.transaction(async (tx) => {
      await tx.query("UPDATE attempts SET state = 'failed', status = $2, error = $3, finished_at = $4, claimed_by = NULL WHERE id = $1", [
        a.id,
        status ?? null,
        error ?? null,
        finishedAt,
      ]);
      return recordFailure(tx, a, finishedAt);
    });
  }

  /** Claims what is due, and what a dead process left claimed past its lease (at-least-once), with what each needs. */
  async function claimDue(now: number): Promise<AttemptRow[]> {
    const realNow = Date.now();
    const { rows } = await db.query<AttemptRow>(
      `WITH claimed AS (
         UPDATE attempts SET state = 'in_flight', claimed_by = $2, claimed_at = $3 WHERE id IN (
           SELECT id FROM attempts
           WHERE (state = 'pending' AND due_at <= $1) OR (state = 'in_flight' AND claimed_at < $4)
           FOR UPDATE SKIP LOCKED)
         RETURNING id, event_id, webhook_id, attempt, due_at)
       SELECT c.id::text AS id, c.event_id, c.webhook_id, c.attempt, w.url, w.secret, w.status AS webhook_status, e.body
       FROM claimed c LEFT JOIN webhooks w ON w.id = c.webhook_id LEFT JOIN events e ON e.id = c.event_id
       ORDER BY c.due_at`,
      [now, owner, realNow, realNow - leaseMs],
    );
    return rows;
  }

  /**
   * Claims what is due and starts the attempts, each on its own: a slow or hanging receiver delays
   * nobody else. With `waitForAttempts` (virtual time, tests) it also waits for their outcomes.
   */
  async function runDueOnce(waitForAttempts: boolean): Promise<void> {
    if (stopped) return;
    const now = clock.now();
    await expireLeads(now);
    const due = await claimDue(now);
    // E-mails not sent by an earlier run (SMTP was down) are tried again on each run.
    const work = [...due.map((a) => track(run(a), `attempt ${a.id}`)), track(sendPendingNotifications(), "e-mails")];
    if (waitForAttempts) await Promise.all(work);
  }

  /** Makes an attempt, then what its outcome calls for: the e-mail of a disabling, the retry's timer. */
  async function run(a: AttemptRow): Promise<void> {
    const { ended, retryAt } = await attempt(a);
    if (ended === "disabled") await sendPendingNotifications();
    if (retryAt !== undefined) wake(retryAt);
  }

  /** Background work, tracked until it ends (stop waits for it). */
  function track(work: Promise<void>, what: string): Promise<void> {
    const w: Promise<void> = work.catch((e: unknown) => options.log(`${what}: ${(e as Error).message}`)).finally(() => inFlight.delete(w));
    inFlight.add(w);
    return w;
  }

  /** Serializes runs: callers that arrive during a run wait for a fresh one. */
  async function runDue(waitForAttempts = true): Promise<void> {
    while (running) await running;
    running = runDueOnce(waitForAttempts).finally(() => {
      running = undefined;
    });
    await running;
  }

  async function nextDueAt(): Promise<number | undefined> {
    const { rows } = await db.query<{ at: string | null }>(
      `SELECT LEAST(
         (SELECT MIN(due_at) FROM attempts WHERE state = 'pending'),
         (SELECT MIN(expires_at) FROM leads WHERE status IN ('new', 'responded'))) AS at`,
    );
    return rows[0]?.at === null || rows[0]?.at === undefined ? undefined : Number(rows[0].at);
  }

  /**
   * Real and scaled clocks: makes sure the loop runs by clock time `at` (now by default), e.g. for a
   * new event or a retry due before the next scheduled pass. Virtual clocks move only when advanced.
   */
  function wake(at = clock.now()): void {
    if (stopped || clock.mode === "virtual") return;
    if (looping) {
      wanted = Math.min(wanted, at);
      return;
    }
    if (at >= timerAt) return;
    clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(loop, clock.realDelayUntil(at));
  }

  async function loop(): Promise<void> {
    if (stopped) return;
    looping = true;
    timerAt = Infinity;
    wanted = Infinity;
    // Re-check at least every second of real time, in case another process queued work.
    let next = clock.now() + 1000 / clock.scale;
    try {
      await runDue(false);
      next = Math.min(next, (await nextDueAt()) ?? Infinity);
    } catch (error) {
      options.log(`delivery loop: ${(error as Error).message}`);
    } finally {
      looping = false;
    }
    if (stopped) return;
    timerAt = Math.min(next, wanted);
    timer = setTimeout(loop, clock.realDelayUntil(timerAt));
  }

  return {
    emit: (...args) => transaction((_tx, emit) => emit(...args)),
    transaction,
    runDue,
    async advance(seconds) {
      const target = clock.now() + seconds * 1000;
      for (;;) {
        if (stopped) return;
        const next = await nextDueAt();
        if (next === undefined || next > target) break;
        clock.set(next);
        await runDue();
      }
      clock.set(target);
      await runDue();
    },
    async start() {
      stopped = false;
      wake();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      stopping.abort();
      while (running) await running;
      await Promise.all(inFlight);
      await db.query("UPDATE attempts SET state = 'pending', claimed_by = NULL WHERE state = 'in_flight' AND claimed_by = $1", [owner]);
    },
  };
}
