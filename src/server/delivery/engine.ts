// The delivery engine: the loop that claims what is due and runs each attempt through its parts —
// attempt (attempts.ts), record outcome (recorder.ts), schedule (the retry's wake-up, here) — with the
// server's places in flight (places.ts), on the server's clock, and the disable e-mails (mailer.ts).
// What each step does is a replaceable part (parts.ts). State lives in the database, so a restart
// resumes the schedule; claims are leases, so several servers can share one PostgreSQL.
import type { DeliveryRules } from "@partner-platform/sdk";
import type { Clock } from "../clock.js";
import { claimCalls, NEXT_DUE_AT, type Db, type Queryable } from "../store.js";
import { createAttempts, type Signed } from "./attempts.js";
import { createEventStore, type Emit } from "./events.js";
import type { HeldClaims } from "./held.js";
import { createDisableMailer } from "./mailer.js";
import type { AdvanceSteps, ClaimedAttempt, DeliveryParts, Outcome } from "./parts.js";
import { createPlaces } from "./places.js";
import { createRecorder } from "./recorder.js";
import { createClaimRenewal } from "./renewal.js";
import { Kicks, WantedTimes } from "./wakeups.js";

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

/** Real ms at least between two passes of the loop (real and scaled clocks), so that new events share one. */
const PASS_GAP_MS = 5;
/** Real ms at most between a waiting run's looks at what a pass does besides claiming (real and scaled clocks). */
const RUN_LOOK_MS = 1000;

export function createDeliveryEngine(options: EngineOptions): DeliveryEngine {
  const { db, clock, rules, parts, held } = options;
  const lookAroundMs = options.lookAroundMs ?? RUN_LOOK_MS;
  /** Claims held in memory, not written (D41): nothing to renew or hand back. */
  const claimsInMemory = claimCalls(db).inMemory;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;
  let looping = false;
  /** Clock time of the next pass of the loop. */
  let timerAt = Infinity;
  let orphansCheckedAt = Date.now();
  /** The earliest time asked for during the current pass, and a waiting run's kicks. */
  const wanted = new WantedTimes();
  const kicks = new Kicks();
  /** Attempts and e-mail runs under way (advance and stop wait for them). */
  const inFlight = new Set<Promise<void>>();

  const places = createPlaces({
    maxInFlight: options.maxInFlight ?? DELIVERY_DEFAULTS.maxInFlight,
    connectionsPerOrigin: options.connectionsPerOrigin,
    maxInFlightPerWebhook: options.maxInFlightPerWebhook,
    onRoom: () => kicks.kick(),
  });
  const events = createEventStore({ db, clock, parts });
  const attempts = createAttempts({ parts, clock, rules, places, timeoutRealMs: options.attemptTimeoutRealMs, stopped: () => stopped });
  const recorder = createRecorder({
    db,
    record: (outcomes) => parts.record(outcomes),
    owner: options.owner,
    claimsInMemory,
    underWay: () => places.underWay,
    lingerMs: options.recordLingerMs,
    log: options.log,
  });
  const mailer = createDisableMailer({
    db,
    clock,
    rules,
    owner: options.owner,
    leaseMs: options.leaseMs,
    contactEmailFor: options.contactEmailFor,
    sendMail: (mail) => parts.sendMail(mail),
    log: options.log,
  });
  const renewal = createClaimRenewal({ db, owner: options.owner, leaseMs: options.leaseMs, held, log: options.log });

  async function transaction<T>(fn: (tx: Queryable, emit: Emit) => Promise<T>): Promise<T> {
    const { result, queued } = await events.transaction(fn);
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

  /** Makes an attempt, records it, then what its outcome calls for: the e-mail of a disabling, the retry's wake-up. */
  async function run(a: ClaimedAttempt, signed: Signed | undefined): Promise<void> {
    places.started();
    let outcome: Outcome | undefined;
    try {
      outcome = await attempts.make(a, signed);
      if (!outcome) {
        held.delete(a.id);
        return;
      }
    } finally {
      places.ended();
    }
    const recorded = await recorder.record(outcome).finally(() => held.delete(a.id));
    options.outcomeLog?.({ webhookId: a.webhookId, attemptId: String(a.id), attempt: a.attempt, ok: outcome.ok, status: outcome.status, error: outcome.error, recorded });
    if (recorded === "disabled") await mailer.sendPending();
    else if (recorded === "failed" && outcome.retryAt !== undefined) wake(outcome.retryAt);
  }

  /** Background work, tracked until it ends (advance and stop wait for it). */
  function track(work: Promise<void>, what: string): Promise<void> {
    const w: Promise<void> = work.catch((e: unknown) => options.log(`${what}: ${(e as Error).message}`)).finally(() => inFlight.delete(w));
    inFlight.add(w);
    return w;
  }

  // -- Running what is due -----------------------------------------------------------------------

  /**
   * Claims what is due, in bounded batches, and starts the attempts, each on its own: a slow or
   * hanging receiver delays nobody else. With `started` (virtual time, tests, timings that make first
   * attempts at once) it collects them, for the caller to wait for their outcomes.
   */
  async function runDueOnce(started?: Promise<void>[]): Promise<void> {
    if (stopped) return;
    await events.expireLeads(clock.now());
    let lookedAround = Date.now();
    /**
     * Waits for a kick. A run waits as long as a webhook with more due has enough claimed, which is
     * as long as its receiver hangs when it has a backlog: on real and scaled clocks the run claims what
     * fell due meanwhile (new events and retries, each at its time: each claim is for its own now),
     * expires leads at their time, and every `lookAroundMs` does what a new pass would (claims handed
     * back by servers that died, work queued by other servers).
     */
    const waitInRun = async () => {
      if (clock.mode === "virtual") return kicks.kicked();
      if (wanted.lookUp) {
        // When work falls due next (a retry asked for while an earlier one was kept, a lead, another
        // server's): the run wakes then, and looks again once it is claimed.
        wanted.lookUp = false;
        const next = await nextDueAt(clock.now());
        if (next !== undefined) wanted.lookedUp(next);
      }
      // The time waited for came while this run claimed: claim now if there is room (a wait for it
      // would last until the next look around, the time being past).
      const now = clock.now();
      if (wanted.at <= now && places.roomForClaim()) return;
      // Work due by now waits for the kick of room or of a webhook that can take more.
      const until = wanted.at > now ? wanted.at : Infinity;
      await kicks.kicked(until !== Infinity ? Math.min(lookAroundMs, passDelay(until)) : lookAroundMs);
      if (stopped) return;
      const look = Date.now() - lookedAround >= lookAroundMs;
      if (look) {
        lookedAround = Date.now();
        wanted.lookUp = true;
        await handBackOrphans();
      }
      // Leads that fell due (D19): at each look, and when a time waited for came (a lead's, looked up).
      if (look || until <= clock.now()) await events.expireLeads(clock.now());
    };
    for (;;) {
      if (stopped) break;
      if (!places.roomForClaim()) {
        // Claims come in batches: wait for room.
        await waitInRun();
        continue;
      }
      const now = clock.now();
      // Claimed by this claim, if due: the pass asked for need not come.
      wanted.claimedFor(now);
      // Webhooks with their share claimed already are left for a later claim.
      kicks.forget();
      const bounds = places.nextClaim();
      if (bounds.limit < 1) {
        // Held by webhooks claimed for while fewer held claims (D44): wait for one of their attempts to end.
        await waitInRun();
        continue;
      }
      const due = await parts.claim(now, bounds.limit, { busy: bounds.busy, perWebhook: bounds.perWebhook });
      for (const a of due) held.add(a.id);
      const signed = attempts.sign(due);
      const runs = due.map((a, i) => track(run(a, signed[i]), `attempt ${a.id}`));
      // Kept only to be waited for: a run in the background may claim a whole backlog.
      started?.push(...runs);
      // A claim short of its limit took every due attempt but those of the busy webhooks and of the
      // webhooks it took a full share of: claiming again before one of them can take more would be a
      // statement for nothing.
      const mayHaveMore = places.mayHaveMore(bounds, due);
      if (due.length === bounds.limit || mayHaveMore.some((id) => !places.isBusy(id))) continue;
      if (mayHaveMore.length === 0) break;
      // Only busy webhooks may have more due: claim again when one of them can take more.
      await waitInRun();
    }
    // E-mails not sent by an earlier run (SMTP was down) are tried again on each run: started whether
    // or not anyone waits for them (`started?.push(track(…))` would not call it when nobody does).
    const mails = track(mailer.sendPending(), "e-mails");
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
    while (running || inFlight.size > 0 || recorder.draining) {
      await Promise.all([running, ...inFlight, recorder.draining]);
    }
  }

  /** Clock time the next attempt or lead (after clock time `after`, if given) falls due. */
  async function nextDueAt(after = Number.MIN_SAFE_INTEGER): Promise<number | undefined> {
    // Attempts held in memory are still pending in the store, due already: not the next to fall due.
    const { rows } = await db.query<{ at: string | null }>(NEXT_DUE_AT, [after, claimsInMemory ? [...held] : []]);
    return rows[0]?.at === null || rows[0]?.at === undefined ? undefined : Number(rows[0].at);
  }

  /**
   * Real and scaled clocks: makes sure the loop runs by clock time `at` (now by default), e.g. for a
   * new event or a retry due before the next scheduled pass. Virtual clocks move only when advanced.
   */
  function wake(at = clock.now()): void {
    if (stopped || clock.mode === "virtual") return;
    if (looping) {
      // Due now, or before the time a waiting run wakes at: it claims, or waits until then.
      if (at <= clock.now() || at < wanted.at) kicks.kick();
      wanted.want(at);
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
    await handBackOrphansNow();
  }

  async function handBackOrphansNow(): Promise<void> {
    const handedBack = await db.handBackOrphans(options.owner);
    if (handedBack) options.log(`${handedBack} attempts left in flight by a stopped process are queued again`);
  }

  async function loop(): Promise<void> {
    if (stopped) return;
    looping = true;
    timerAt = Infinity;
    wanted.reset();
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
    timerAt = Math.min(next, wanted.at);
    timer = setTimeout(loop, passDelay(timerAt));
  }

  return {
    // An event alone needs no transaction: parts.queue stores it atomically, with others emitted meanwhile.
    async emit(...args) {
      const stored = await events.emit(...args);
      await queuedSome(stored.queuedFor);
      return stored;
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
      await handBackOrphansNow();
      stopped = false;
      if (!claimsInMemory) renewal.start();
      wake();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await renewal.stop();
      kicks.kick();
      attempts.abortAll(new Error("the server is stopping"));
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
