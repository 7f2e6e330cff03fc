// The delivery engine (spec/DECISIONS.md D1–D8, numbers from x-delivery): signed POSTs of the exact
// bytes, retries counted from each failure, one consecutive-failure counter per webhook, disabling
// with exactly one e-mail. State lives in the database, so a restart resumes the schedule.
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

interface AttemptRow {
  id: string;
  event_id: string;
  webhook_id: string;
  attempt: number;
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
  const owner = `${process.pid}-${newEventId(Date.now())}`;
  const leaseMs = 3 * timeoutMs + 10_000;
  const stopping = new AbortController();
  setMaxListeners(0, stopping.signal); // one listener per attempt in flight
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;
  let looping = false;
  let again = false;
  const inFlight = new Set<Promise<void>>();
  const mailFailuresLogged = new Set<string>();

  async function record(tx: Queryable, name: EventName, businessID: string, data: Record<string, unknown>, at = clock.now()) {
    const id = newEventId(at);
    const body = JSON.stringify({ id, event: name, timestamp: new Date(at).toISOString(), data });
    await tx.query("INSERT INTO events (id, name, business_id, body, created_at) VALUES ($1, $2, $3, $4, $5)", [id, name, businessID, body, at]);
    const { rows } = await tx.query<{ id: string; events: string; business_id: string }>(
      "SELECT id, events, business_id FROM webhooks WHERE status = 'enabled' OR $1",
      [fault("delivers-after-disable")],
    );
    const subscribed = rows.filter(
      (w) =>
        (fault("ignores-business-filter") || w.business_id === businessID) &&
        (fault("ignores-events-filter") || (JSON.parse(w.events) as string[]).includes(name)),
    );
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

  async function recordFailure(tx: Queryable, a: AttemptRow, failedAt: number): Promise<void> {
    const { rows } = await tx.query<{ consecutive_failures: number; status: string; client_id: string }>(
      `UPDATE webhooks SET consecutive_failures = consecutive_failures + 1 WHERE id = $1
       RETURNING consecutive_failures, status, client_id`,
      [a.webhook_id],
    );
    const webhook = rows[0]!;
    if (webhook.status !== "enabled" && !fault("delivers-after-disable")) return;
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
      return;
    }
    const wait = rules.retryWaitsSeconds[a.attempt - 1];
    if (wait !== undefined) {
      await tx.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", [
        a.event_id,
        a.webhook_id,
        a.attempt + 1,
        failedAt + wait * 1000,
      ]);
    }
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

  /** One attempt (D6); returns whether it failed. */
  async function attempt(a: AttemptRow): Promise<boolean> {
    const startedAt = clock.now();
    const { rows } = await db.query<{ url: string; secret: string; status: string; body: string }>(
      "SELECT w.url, w.secret, w.status, e.body FROM webhooks w, events e WHERE w.id = $1 AND e.id = $2",
      [a.webhook_id, a.event_id],
    );
    const target = rows[0];
    if (!target || (target.status !== "enabled" && !fault("delivers-after-disable"))) {
      await db.query("UPDATE attempts SET state = 'cancelled' WHERE id = $1", [a.id]);
      return false;
    }
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
        if (stopping.signal.aborted) return false;
        const code = (e as { code?: string }).code;
        timedOut = ["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"].includes(code ?? "") || (e as Error).name === "TimeoutError";
        error = timedOut ? "no complete answer within the attempt timeout" : ((e as { cause?: Error }).cause?.message ?? (e as Error).message);
      }
    }
    const ok = error === undefined && status !== undefined && status >= 200 && status < 300;
    // A timed-out attempt took the whole timeout, in the clock's time: a virtual clock did not move meanwhile (D24).
    const finishedAt = timedOut && clock.mode === "virtual" ? startedAt + rules.attemptTimeoutSeconds * 1000 : clock.now();
    await db.transaction(async (tx) => {
      await tx.query("UPDATE attempts SET state = $1, status = $2, error = $3, finished_at = $4, claimed_by = NULL WHERE id = $5", [
        ok ? "succeeded" : "failed",
        status ?? null,
        error ?? null,
        finishedAt,
        a.id,
      ]);
      if (!ok) await recordFailure(tx, a, finishedAt);
      else if (!fault("no-reset-on-success")) await tx.query("UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1", [a.webhook_id]);
    });
    return !ok;
  }

  /** Claims what is due, and what a dead process left claimed past its lease (at-least-once). */
  async function claimDue(now: number): Promise<AttemptRow[]> {
    const realNow = Date.now();
    const { rows } = await db.query<AttemptRow>(
      `UPDATE attempts SET state = 'in_flight', claimed_by = $2, claimed_at = $3 WHERE id IN (
         SELECT id FROM attempts
         WHERE (state = 'pending' AND due_at <= $1) OR (state = 'in_flight' AND claimed_at < $4)
         ORDER BY due_at FOR UPDATE SKIP LOCKED)
       RETURNING id::text AS id, event_id, webhook_id, attempt`,
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
    const work = [...due.map(track), track(undefined)];
    if (waitForAttempts) await Promise.all(work);
  }

  /** Runs an attempt (or, without one, only the pending e-mails) in the background, tracked until it ends. */
  function track(a: AttemptRow | undefined): Promise<void> {
    const w: Promise<void> = (a ? attempt(a) : Promise.resolve(false))
      .catch((e: unknown) => {
        options.log(`attempt ${a?.id} failed to run: ${(e as Error).message}`);
        return false;
      })
      .then(async (failed) => {
        await sendPendingNotifications();
        if (failed) wake(); // its retry may be due before the next scheduled check
      })
      .catch((e: unknown) => options.log(`e-mails: ${(e as Error).message}`))
      .finally(() => inFlight.delete(w));
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

  /** Real and scaled clocks: run the loop now (or right after the current pass). Virtual clocks move only when advanced. */
  function wake(): void {
    if (stopped || clock.mode === "virtual") return;
    if (looping) {
      again = true;
      return;
    }
    clearTimeout(timer);
    timer = setTimeout(loop, 0);
  }

  async function loop(): Promise<void> {
    if (stopped) return;
    looping = true;
    let delay: number;
    try {
      do {
        again = false;
        await runDue(false);
      } while (again && !stopped);
      const next = await nextDueAt();
      // Re-check at least every second of real time, in case another process queued work.
      delay = again ? 0 : next === undefined ? 1000 : Math.min(1000, clock.realDelayUntil(next));
    } catch (error) {
      options.log(`delivery loop: ${(error as Error).message}`);
      delay = 1000;
    } finally {
      looping = false;
    }
    if (!stopped) timer = setTimeout(loop, delay);
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
