// The delivery engine (spec/DECISIONS.md D1–D8, numbers from x-delivery): signed POSTs of the exact
// bytes, retries counted from each failure, one consecutive-failure counter per webhook, disabling
// with exactly one e-mail. State lives in the database, so a restart resumes the schedule.
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { request, type Dispatcher } from "undici";
import { newEventId } from "../events/index.js";
import { signPayload } from "../signing.js";
import type { DeliveryRules, EventName } from "../spec.js";
import type { Clock } from "./clock.js";
import type { Db, Queryable } from "./store.js";

const privateRanges = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
] as const) {
  privateRanges.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
] as const) {
  privateRanges.addSubnet(net, bits, "ipv6");
}

function isPrivate(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return privateRanges.check(mapped[1]!, "ipv4");
  return privateRanges.check(address, isIP(address) === 6 ? "ipv6" : "ipv4");
}

/** Why a webhook URL may not be called (SSRF), or undefined when it may. */
export async function refuseUrl(url: string, allowPrivate: boolean): Promise<string | undefined> {
  if (allowPrivate) return undefined;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  let addresses: string[];
  try {
    // A stalled resolver must not hold a registration or an attempt: 2 s, then treat it as unresolved.
    const resolved = isIP(host)
      ? [{ address: host }]
      : await Promise.race([
          lookup(host, { all: true }),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error("DNS timeout")), 2000).unref()),
        ]);
    addresses = resolved.map((a) => a.address);
  } catch {
    // Not resolvable now: nothing private to protect; the attempt itself will fail and count.
    return undefined;
  }
  const blocked = addresses.find(isPrivate);
  return blocked ? `the host ${host} resolves to a private or loopback address (${blocked})` : undefined;
}

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

export interface DeliveryEngine {
  /** Records an event and queues its first attempt for every enabled, subscribed webhook of the business. */
  emit(name: EventName, businessID: string, data: Record<string, unknown>, at?: number): Promise<{ id: string; queuedFor: number }>;
  /** Makes every attempt (and lead expiry) due by `now` and (by default) waits for their outcomes. */
  runDue(waitForAttempts?: boolean): Promise<void>;
  /** Virtual clock: moves it by `seconds`, running everything that falls due on the way, in order. */
  advance(seconds: number): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createDeliveryEngine(options: EngineOptions): DeliveryEngine {
  const { db, clock, rules } = options;
  const fault = (f: ServerFault) => options.faults?.has(f) ?? false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;
  const inFlight = new Set<Promise<void>>();

  async function emit(name: EventName, businessID: string, data: Record<string, unknown>, at = clock.now()) {
    const id = newEventId(at);
    const envelope = { id, event: name, timestamp: new Date(at).toISOString(), data };
    const body = JSON.stringify(envelope);
    const queuedFor = await db.transaction(async (tx) => {
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
      return subscribed.length;
    });
    wake();
    return { id, queuedFor };
  }

  async function expireLeads(now: number): Promise<void> {
    const { rows } = await db.query<{ id: string; business_id: string; status: string; created_at: string; expires_at: string }>(
      `UPDATE leads SET status = 'expired' WHERE expires_at <= $1 AND status IN ('new', 'responded')
       RETURNING id, business_id, status, created_at, expires_at`,
      [now],
    );
    for (const lead of rows) {
      const expiredAt = Number(lead.expires_at);
      await emit(
        "lead.expired",
        lead.business_id,
        {
          leadID: lead.id,
          businessID: lead.business_id,
          previousStatus: "new",
          createdAt: new Date(Number(lead.created_at)).toISOString(),
          expiredAt: new Date(expiredAt).toISOString(),
        },
        expiredAt,
      );
    }
  }

  async function sendPendingNotifications(): Promise<void> {
    const { rows } = await db.query<{ webhook_id: string; recipient: string }>(
      "SELECT webhook_id, recipient FROM notifications WHERE sent_at IS NULL",
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
        options.log(`e-mail for webhook ${n.webhook_id} not sent yet: ${(error as Error).message}`);
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

  async function attempt(a: AttemptRow): Promise<void> {
    const startedAt = clock.now();
    const { rows } = await db.query<{ url: string; secret: string; status: string; body: string }>(
      "SELECT w.url, w.secret, w.status, e.body FROM webhooks w, events e WHERE w.id = $1 AND e.id = $2",
      [a.webhook_id, a.event_id],
    );
    const target = rows[0];
    if (!target || (target.status !== "enabled" && !fault("delivers-after-disable"))) {
      await db.query("UPDATE attempts SET state = 'cancelled' WHERE id = $1", [a.id]);
      return;
    }
    let status: number | undefined;
    let error: string | undefined;
    let timedOut = false;
    const refused = await refuseUrl(target.url, options.allowPrivateWebhooks);
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
          headersTimeout: options.attemptTimeoutRealMs,
          bodyTimeout: options.attemptTimeoutRealMs,
          dispatcher: options.dispatcher,
        });
        status = response.statusCode;
        await response.body.dump().catch(() => undefined);
      } catch (e) {
        const code = (e as { code?: string }).code;
        timedOut = code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT" || code === "UND_ERR_CONNECT_TIMEOUT";
        error = timedOut ? "no answer within the attempt timeout" : ((e as { cause?: Error }).cause?.message ?? (e as Error).message);
      }
    }
    const ok = status !== undefined && status >= 200 && status < 300;
    // A timed-out attempt took the whole timeout, in the clock's time: a virtual clock did not move meanwhile.
    const finishedAt = timedOut && clock.mode === "virtual" ? startedAt + rules.attemptTimeoutSeconds * 1000 : clock.now();
    await db.transaction(async (tx) => {
      await tx.query("UPDATE attempts SET state = $1, status = $2, error = $3, finished_at = $4 WHERE id = $5", [
        ok ? "succeeded" : "failed",
        status ?? null,
        error ?? null,
        finishedAt,
        a.id,
      ]);
      if (!ok) await recordFailure(tx, a, finishedAt);
      else if (!fault("no-reset-on-success")) await tx.query("UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1", [a.webhook_id]);
    });
  }

  async function claimDue(now: number): Promise<AttemptRow[]> {
    const { rows } = await db.query<AttemptRow>(
      `UPDATE attempts SET state = 'in_flight' WHERE id IN (
         SELECT id FROM attempts WHERE state = 'pending' AND due_at <= $1 ORDER BY due_at FOR UPDATE SKIP LOCKED)
       RETURNING id::text AS id, event_id, webhook_id, attempt`,
      [now],
    );
    return rows;
  }

  /**
   * Claims what is due and starts the attempts, each on its own: a slow or hanging receiver delays
   * nobody else. With `waitForAttempts` (virtual time, tests) it also waits for their outcomes.
   */
  async function runDueOnce(waitForAttempts: boolean): Promise<void> {
    const now = clock.now();
    await expireLeads(now);
    const due = await claimDue(now);
    const work = due.map((a) => {
      const w: Promise<void> = attempt(a)
        .catch((e: unknown) => options.log(`attempt ${a.id} failed to run: ${(e as Error).message}`))
        .then(() => sendPendingNotifications())
        .finally(() => {
          inFlight.delete(w);
          wake(); // its retry may be due before the next scheduled check
        });
      inFlight.add(w);
      return w;
    });
    if (waitForAttempts) await Promise.all(work);
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

  function wake(): void {
    if (stopped || clock.mode === "virtual") return;
    clearTimeout(timer);
    timer = setTimeout(loop, 0);
  }

  async function loop(): Promise<void> {
    if (stopped) return;
    try {
      await runDue(false);
      const next = await nextDueAt();
      // Re-check at least every second of real time, in case another process queued work.
      const delay = next === undefined ? 1000 : Math.min(1000, clock.realDelayUntil(next));
      if (!stopped) timer = setTimeout(loop, delay);
    } catch (error) {
      options.log(`delivery loop: ${(error as Error).message}`);
      if (!stopped) timer = setTimeout(loop, 1000);
    }
  }

  return {
    emit,
    runDue,
    async advance(seconds) {
      const target = clock.now() + seconds * 1000;
      for (;;) {
        const next = await nextDueAt();
        if (next === undefined || next > target) break;
        clock.set(next);
        await runDue();
      }
      clock.set(target);
      await runDue();
    },
    async start() {
      // Attempts that were in flight when a previous process stopped are made again (at-least-once).
      await db.query("UPDATE attempts SET state = 'pending' WHERE state = 'in_flight'");
      stopped = false;
      wake();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      while (running) await running;
      await Promise.all(inFlight);
    },
  };
}
