// The storage interface (src/server/store.ts), one suite for both back-ends: the embedded database
// and PostgreSQL. On PostgreSQL, two server processes share one database and claim each attempt once.
import { once } from "node:events";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startServe } from "../../scripts/bench/lib/procs.js";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { HeldClaims } from "../../src/server/delivery/held.js";
import { defaultParts } from "../../src/server/delivery/parts.js";
import { startServer } from "../../src/server/index.js";
import { claimCalls, EXPIRE_DUE_LEADS, migrate, NEXT_DUE_AT, nextId, openEmbedded, openPostgres, recordOwners, type Db, type Queryable } from "../../src/server/store.js";
import { validatorFor } from "../../src/spec.js";
import { client, envelope, partsContext, register, seededRandom, storageBackends } from "./helpers.js";

describe.each(storageBackends())("storage, $name", ({ postgres }) => {
  let pg: TestPostgres | undefined;
  let dir: string;
  let databases = 0;
  beforeAll(async () => {
    pg = postgres ? await startTestPostgres() : undefined;
    dir = await mkdtemp(path.join(tmpdir(), "storage-"));
  });
  afterAll(async () => {
    pg?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  /** A new, empty, durable database; `open` opens it again (as a restarted server does). */
  async function fresh(): Promise<{ open: () => Promise<Db> }> {
    const name = `db${++databases}`;
    if (pg) {
      const url = await pg.createDatabase(name);
      return { open: () => openPostgres(url) };
    }
    return { open: () => openEmbedded(path.join(dir, name)) };
  }

  /** A new, empty database, open until the test ends. */
  async function freshDb(): Promise<Db> {
    const db = await (await fresh()).open();
    onTestFinished(() => db.close());
    return db;
  }

  it("passes array parameters element for element: quotes, backslashes, braces, commas, NULL as text, nulls, numbers, booleans", async () => {
    const db = await freshDb();
    const texts = ['say "hi"', "C:\\path\\", "{a,b}", "a, b", "NULL", "null", "", " padded ", "é ✓ 𝄞", '\\"', "line\nbreak", null];
    const ids = ["1", "9007199254740993", null];
    const flags = [true, false, null];
    const numbers = [0, -5, 1_764_000_000_000, null];
    const { rows } = await db.query<{ t: string[]; i: string[]; f: boolean[]; n: string[] }>(
      "SELECT $1::text[] AS t, $2::bigint[]::text[] AS i, $3::boolean[] AS f, $4::bigint[]::text[] AS n",
      [texts, ids, flags, numbers],
    );
    expect(rows[0]).toEqual({ t: texts, i: ids, f: flags, n: numbers.map((n) => (n === null ? null : String(n))) });
  });

  it("migrates idempotently and keeps what was committed across a reopen", async () => {
    const store = await fresh();
    const db = await store.open();
    await migrate(db);
    await migrate(db);
    await db.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ('h', 'c', 's', 1)");
    await db.close();
    const again = await store.open();
    try {
      await migrate(again);
      expect((await again.query<{ client_id: string }>("SELECT client_id FROM tokens")).rows).toEqual([{ client_id: "c" }]);
    } finally {
      await again.close();
    }
  });

  it("rolls a failed transaction back entirely", async () => {
    const db = await freshDb();
    await migrate(db);
    await expect(
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ('h', 'c', 's', 1)");
        await tx.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ('h', 'c', 's', 1)");
      }),
    ).rejects.toThrow();
    expect((await db.query("SELECT * FROM tokens")).rows).toEqual([]);
  });

  // The embedded store prepares each statement text once (store-worker.ts): what a prepared statement
  // is given and answers, its errors, and texts past the number it keeps prepared.
  it("answers every statement as written: parameters of every kind, errors that leave the connection usable, any number of texts", async () => {
    const db = await freshDb();
    await migrate(db);
    const params = [null, ["a", "b,c", 'q"\\', "{}", "", null, "ü ✓"], true, ["1", "-9223372036854775808", null], "ü ✓", [], [200, null, -5], [true, false, null], [1, 2n]];
    const sql =
      "SELECT $1::text IS NULL AS a, $2::text[] AS b, $3::boolean AS c, $4::bigint[]::text[] AS d, $5::text AS e, cardinality($6::bigint[]) AS f, $7::integer[] AS g, $8::boolean[] AS h, $9::bigint[]::text[] AS i";
    const expected = { a: true, b: params[1], c: true, d: params[3], e: params[4], f: 0, g: params[6], h: params[7], i: ["1", "2"] };
    for (let i = 0; i < 2; i++) expect((await db.query(sql, params)).rows).toEqual([expected]);
    // What PostgreSQL refuses in an array's text is refused as such however it is passed.
    await expect(db.query("SELECT $1::bigint[] AS a", [["9223372036854775808"]])).rejects.toMatchObject({ code: "22003" });
    await expect(db.query("SELECT $1::bigint[] AS a", [["1", "x1"]])).rejects.toMatchObject({ code: "22P02" });
    await expect(db.query("SELEC 1")).rejects.toMatchObject({ code: "42601" });
    await db.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ($1, 'c', 's', 1)", ["h"]);
    await expect(db.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ($1, 'c', 's', 1)", ["h"])).rejects.toMatchObject({ code: "23505" });
    expect((await db.query(sql, params)).rows).toEqual([expected]);
    expect(await db.transaction(async (tx) => (await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM tokens")).rows)).toEqual([{ n: 1 }]);
    const texts = Array.from({ length: 300 }, (_, i) => `SELECT ${i}::int + $1::int AS n`);
    for (const [i, text] of texts.entries()) expect((await db.query<{ n: number }>(text, [1])).rows).toEqual([{ n: i + 1 }]);
    expect((await db.query<{ n: number }>(texts[0]!, [2])).rows).toEqual([{ n: 2 }]);
  });

  /**
   * The sequential and index scans of `table` so far in `tx`'s transaction, and the rows they read. This
   * connection's scans not yet reported to the statistics (migrate's index builds among them) are in it:
   * what a statement did is the difference of a count before and after it.
   */
  async function tableReads(tx: Queryable, table: string): Promise<{ seq: number; idx: number; rows: number }> {
    const { rows } = await tx.query<{ seq: number; idx: number; rows: number }>(
      "SELECT seq_scan::int AS seq, idx_scan::int AS idx, (seq_tup_read + coalesce(idx_tup_fetch, 0))::int AS rows FROM pg_stat_xact_user_tables WHERE relname = $1",
      [table],
    );
    return rows[0]!;
  }

  /**
   * What a claim's ways have done so far in `tx`'s transaction (store.ts, claim_due_attempts): the index
   * scans of attempts_pending_due (the earliest due of all) and of attempts_pending_by_webhook (a probe
   * per webhook, and a descent per webhook found by pending_webhooks), and the calls of pending_webhooks
   * (counted once `trackCalls` has run in the transaction).
   */
  async function claimWays(tx: Queryable): Promise<{ earliest: number; probes: number; lookups: number }> {
    const { rows } = await tx.query<{ earliest: number; probes: number; lookups: number }>(
      `SELECT pg_stat_get_xact_numscans('attempts_pending_due'::regclass)::int AS earliest,
        pg_stat_get_xact_numscans('attempts_pending_by_webhook'::regclass)::int AS probes,
        coalesce(pg_stat_get_xact_function_calls('pending_webhooks'::regproc), 0)::int AS lookups`,
    );
    return rows[0]!;
  }
  const trackCalls = (tx: Queryable) => tx.query("SET LOCAL track_functions = 'pl'");

  /** The sequential and index scans of `table` that `fn`'s statements make, in a transaction of their own. */
  function scansOf(db: Db, table: string, fn: (tx: Queryable) => Promise<void>): Promise<{ seq: number; idx: number }> {
    return db.transaction(async (tx) => {
      const before = await tableReads(tx, table);
      await fn(tx);
      const after = await tableReads(tx, table);
      return { seq: after.seq - before.seq, idx: after.idx - before.idx };
    });
  }

  /** Webhooks w1..wN, and 2,000 attempts of events e1..e2000 spread over them, due at 1..2000. */
  const webhooksW1To = (n: number) =>
    `INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) SELECT 'w' || i, 'c', 'https://example.com/', '["lead.created"]', '4711', 's', 0 FROM generate_series(1, ${n}) i`;
  const attemptsOverW1To = (n: number) => `INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'e' || i, 'w' || (i % ${n} + 1), 1, i FROM generate_series(1, 2000) i`;
  const TWENTY_WEBHOOKS = webhooksW1To(20);
  const ATTEMPTS_OVER_THEM = attemptsOverW1To(20);

  /**
   * A claim as the backend's server makes it (D41: claims written on PostgreSQL, held in memory on the
   * embedded store, none held yet), with the parameters after the first: now, limit, per webhook, busy.
   */
  const calls = claimCalls({ exclusive: !postgres });
  const CLAIM = calls.claim;
  /** A claim's parameters as process "me" makes it, no lease run out and none held. */
  const claimParams = (now: number, limit: number, perWebhook: number, busy: string[]) => [now, "me", 0, -1, limit, perWebhook, busy, ...(calls.inMemory ? [[]] : [])];
  /** The attempts a claim of at most 32 due by 5000 (`perWebhook` a webhook) takes (its rows without the webhooks' own). */
  const claimAttempts = async (tx: Queryable, perWebhook = 2) =>
    (await tx.query<{ id: string | number | null }>(CLAIM, claimParams(5000, 32, perWebhook, []))).rows.filter((r) => r.id !== null);

  // The claim's plan is made once per connection and kept (a generic plan): made from statistics of an
  // empty table (the embedded store analyzes a changed table once a minute, as PostgreSQL's autovacuum does), it chose
  // a scan of attempts per webhook, and a 100k backlog then kept the database busy for minutes.
  it("claims by index probes, never a scan of attempts, even planned from an empty table's statistics", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query("ANALYZE");
    await db.query(TWENTY_WEBHOOKS);
    await db.query(ATTEMPTS_OVER_THEM);
    const scans = await scansOf(db, "attempts", async (tx) => {
      expect(await claimAttempts(tx)).toHaveLength(32);
    });
    expect(scans.seq, "scans of attempts").toBe(0);
    expect(scans.idx).toBeGreaterThan(0);
  });

  // Where many webhooks could fill a claim it reads the earliest due attempts of all first: that plan too
  // is made once, maybe from an empty table's statistics, and must read a claim's worth, not the backlog.
  it("reads only the earliest due attempts where many webhooks could fill a claim, even planned from an empty table's statistics", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query("ANALYZE");
    await db.query(webhooksW1To(100));
    await db.query(attemptsOverW1To(100));
    // The webhooks' count, which chooses the way; the attempts' statistics stay those of an empty table.
    await db.query("ANALYZE webhooks");
    const { reads, earliest, probes, lookups } = await db.transaction(async (tx) => {
      await trackCalls(tx);
      const before = await tableReads(tx, "attempts");
      const waysBefore = await claimWays(tx);
      expect(await claimAttempts(tx)).toHaveLength(32);
      const after = await tableReads(tx, "attempts");
      const waysAfter = await claimWays(tx);
      return {
        reads: { seq: after.seq - before.seq, rows: after.rows - before.rows },
        earliest: waysAfter.earliest - waysBefore.earliest,
        probes: waysAfter.probes - waysBefore.probes,
        lookups: waysAfter.lookups - waysBefore.lookups,
      };
    });
    // Enough webhooks with pending attempts to fill it (found by 32 / 2 + 1 descents), then the earliest due.
    const found = 32 / 2 + 1;
    expect({ earliest: earliest > 0, probes, lookups }, "the way the claim read them").toEqual({ earliest: true, probes: found, lookups: 1 });
    expect(reads.seq, "scans of attempts").toBe(0);
    // A row per descent, the 4 × 32 earliest, then the 32 taken by key, locked and updated: far from the 2,000 due.
    expect(reads.rows, "attempts read by a claim of 32").toBeLessThanOrEqual(found + 4 * 32 + 2 * 32);
  });

  // With statistics where one webhook holds every pending attempt, the planner read a probe's webhook_id
  // = w.id as matching nearly every row and probed each idle webhook through the index of all due
  // attempts, the whole backlog once per webhook (store.ts sets the column's n_distinct).
  it("probes each webhook by its own attempts, even with statistics where one webhook holds the backlog", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query(webhooksW1To(100));
    await db.query(attemptsOverW1To(1));
    // And one attempt each of w2..w40, due after w1's: the earliest due give too few, and with fewer
    // than 128 registered every one is probed.
    await db.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'f' || i, 'w' || i, 1, 3000 + i FROM generate_series(2, 40) i");
    await db.query("ANALYZE");
    const reads = await db.transaction(async (tx) => {
      const before = await tableReads(tx, "attempts");
      // 32 places, 16 a webhook: the earliest due are all w1's, so the claim probes the 100 webhooks.
      expect(await claimAttempts(tx, 16)).toHaveLength(32);
      return (await tableReads(tx, "attempts")).rows - before.rows;
    });
    // A row per descent (32 / 16 + 1), the 4 × 32 earliest, w1's 16 and the others' one each through
    // their probes, the 32 taken by key, locked and updated; the other 60 probes find nothing.
    expect(reads, "attempts read by the claim").toBeLessThanOrEqual(3 + 4 * 32 + 16 + 39 + 2 * 32);
  });

  // A claim reads the due attempts one of two ways (store.ts, claim_due_attempts): where many webhooks
  // could fill it, from the earliest due of all; otherwise, or when a few webhooks' backlogs come first,
  // by a probe per webhook: of those with pending attempts where 128 or more are registered and few have
  // any, else of each registered.
  // Either way it takes the same attempts, which this model says (D40, D44).
  async function claimsAgainstModel(registered: number, active: number) {
    const db = await freshDb();
    await migrate(db);
    const next = seededRandom(20261126);
    const webhooks = Array.from({ length: active }, (_, i) => `w${i + 1}`);
    const late = `w${active + 1}`;
    // Distinct due times: which attempts are the earliest is never a tie. w1 has a backlog of 200
    // spread over the day; in the second half the backlog of 400 of the next one comes before everything.
    const times = Array.from({ length: 4000 }, (_, i) => i + 1).sort(() => next() - 0.5);
    const rows: { webhook: string; due: number }[] = [];
    for (const webhook of webhooks) for (let n = webhook === "w1" ? 200 : 1 + Math.floor(next() * 20); n > 0; n--) rows.push({ webhook, due: 1000 + times.pop()! });
    await db.query(webhooksW1To(registered));
    const insert = (of: typeof rows) =>
      db.query<{ id: string }>("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'e', w, 1, d FROM unnest($1::text[], $2::bigint[]) AS t(w, d) RETURNING id::text", [of.map((r) => r.webhook), of.map((r) => r.due)]);
    const ids = (await insert(rows)).rows.map((r) => r.id);
    const attempts = rows.map((r, i) => ({ ...r, id: ids[i]! }));
    // The statistics the claim chooses its way by: the webhooks registered.
    await db.query("ANALYZE webhooks");

    const expected = (now: number, limit: number, perWebhook: number, busy: string[]) => {
      const byWebhook = new Map<string, typeof attempts>();
      for (const a of attempts) if (a.due <= now && !busy.includes(a.webhook)) byWebhook.set(a.webhook, [...(byWebhook.get(a.webhook) ?? []), a]);
      const firsts = [...byWebhook.values()].flatMap((own) => own.sort((x, y) => x.due - y.due).slice(0, perWebhook));
      return firsts.sort((x, y) => x.due - y.due).slice(0, limit).map((a) => a.id).sort();
    };
    // Each claim in a transaction rolled back (its attempts stay pending), with what its ways did.
    const claim = async (now: number, limit: number, perWebhook: number, busy: string[]) => {
      let got: { ids: string[]; earliestScans: number; probes: number } | undefined;
      await db
        .transaction(async (tx) => {
          const before = await claimWays(tx);
          const claimed = await tx.query<{ id: string | number | null }>(CLAIM, claimParams(now, limit, perWebhook, busy));
          const after = await claimWays(tx);
          got = { ids: claimed.rows.flatMap((r) => (r.id === null ? [] : [String(r.id)])).sort(), earliestScans: after.earliest - before.earliest, probes: after.probes - before.probes };
          throw new Error("rolled back");
        })
        .catch((error: Error) => {
          if (error.message !== "rolled back") throw error;
        });
      return got!;
    };

    // The ways taken: answered from the earliest due; fell back from them to probes; probes only. And
    // the most index scans of attempts_pending_by_webhook (descents and probes) a claim made.
    const ways = { earliest: 0, fellBack: 0, probes: 0, mostScans: 0 };
    const check = async (round: number) => {
      const now = 1000 + Math.floor(next() * 4400);
      const limit = 1 + Math.floor(next() * 40);
      const perWebhook = 1 + Math.floor(next() * 4);
      const busy = webhooks.filter(() => next() < [0, 0.1, 0.5][round % 3]!);
      const got = await claim(now, limit, perWebhook, busy);
      expect(got.ids, `round ${round}: now ${now}, limit ${limit}, ${perWebhook} a webhook, ${busy.length} busy`).toEqual(expected(now, limit, perWebhook, busy));
      // Before the earliest due, pending_webhooks looks for limit / perWebhook + 1 webhooks, one descent
      // each: scans beyond those are the fall-back's.
      if (got.earliestScans > 0 && got.probes <= Math.floor(limit / perWebhook) + 1) ways.earliest++;
      else if (got.earliestScans > 0) ways.fellBack++;
      else ways.probes++;
      ways.mostScans = Math.max(ways.mostScans, got.probes);
    };
    for (let round = 0; round < 40; round++) await check(round);
    // A backlog, due before everything else: the earliest due are mostly its own.
    const backlog = Array.from({ length: 400 }, (_, i) => ({ webhook: late, due: 1 + i }));
    const backlogIds = (await insert(backlog)).rows.map((r) => r.id);
    attempts.push(...backlog.map((r, i) => ({ ...r, id: backlogIds[i]! })));
    for (let round = 40; round < 80; round++) await check(round);
    return ways;
  }

  it("claims the earliest due attempts of each webhook but the busy ones, the same whichever way it reads them", async () => {
    const ways = await claimsAgainstModel(61, 60);
    // Every way and the fall-back between them were taken (else the comparison proved less).
    expect(ways.earliest, "claims answered from the earliest due of all").toBeGreaterThan(0);
    expect(ways.fellBack, "claims that fell back to a probe per webhook").toBeGreaterThan(0);
    expect(ways.probes, "claims by a probe per webhook only").toBeGreaterThan(0);
  });

  it("claims the same among many registered webhooks of which a few have attempts, without a probe of each registered", async () => {
    const ways = await claimsAgainstModel(400, 6);
    // At most 7 webhooks have attempts: each lookup descends once per webhook and once more, and only
    // those 7 are probed; a probe of each registered webhook would be 400 scans.
    expect(ways.mostScans, "index scans of attempts_pending_by_webhook in a claim").toBeLessThanOrEqual(8 + 8 + 7);
    expect(ways.fellBack, "claims that fell back to a probe per webhook").toBeGreaterThan(0);
    expect(ways.probes, "claims by a probe per webhook only").toBeGreaterThan(0);
  });

  // store_events finds the webhooks an event is queued for through subscriptions, which triggers on
  // webhooks keep (store.ts): whatever changes a webhook, and webhooks written before the triggers.
  it("queues an event for the enabled webhooks subscribed to it, reading only those, however their rows were written", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query("INSERT INTO business_owners (business_id, client_id) VALUES ('4711', 'c'), ('4712', 'c')");
    // 1,000 webhooks of the business that take lead.created, one that takes review.created.
    await db.query(webhooksW1To(1000));
    await db.query(`INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ('r1', 'c', 'https://example.com/', '["review.created","lead.created"]', '4711', 's', 0)`);
    let n = 0;
    const queued = (name: string, business = "4711") =>
      db.transaction(async (tx) => {
        const read = async () => (await tableReads(tx, "webhooks")).rows + (await tableReads(tx, "subscriptions")).rows;
        const before = await read();
        const { rows } = await tx.query<{ counts: number[] }>("SELECT store_events($1, $2, $3, $4, $5) AS counts", [[`x${++n}`], [name], [business], ["{}"], [0]]);
        return { count: rows[0]!.counts[0], read: (await read()) - before };
      });
    const review = await queued("review.created");
    expect(review.count).toBe(1);
    // Not the 1,000 others (the index alone may answer, without the row).
    expect(review.read, "rows of webhooks and subscriptions read").toBeLessThanOrEqual(1);
    expect((await queued("lead.created")).count).toBe(1001);
    expect((await queued("booking.confirmed")).count).toBe(0);
    await db.query(`UPDATE webhooks SET events = '["booking.confirmed"]' WHERE id = 'r1'`);
    expect([(await queued("review.created")).count, (await queued("booking.confirmed")).count], "after its events changed").toEqual([0, 1]);
    await db.query("UPDATE webhooks SET status = 'disabled' WHERE id = 'r1'");
    expect((await queued("booking.confirmed")).count, "disabled").toBe(0);
    await db.query("UPDATE webhooks SET status = 'enabled', business_id = '4712' WHERE id = 'r1'");
    expect([(await queued("booking.confirmed")).count, (await queued("booking.confirmed", "4712")).count], "enabled, of another business").toEqual([0, 1]);
    await db.query("UPDATE webhooks SET client_id = 'other' WHERE id = 'r1'");
    expect((await queued("booking.confirmed", "4712")).count, "of a client that does not own the business (D27)").toBe(0);
    await db.query("UPDATE webhooks SET client_id = 'c' WHERE id = 'r1'");
    expect((await queued("booking.confirmed", "4712")).count, "its owner's again").toBe(1);
    await db.query("DELETE FROM webhooks WHERE id = 'r1'");
    expect((await queued("booking.confirmed", "4712")).count, "deleted").toBe(0);
    // Written without the triggers (as before they existed): the next start adds its subscriptions.
    await db.query("DROP TRIGGER webhooks_inserted ON webhooks");
    await db.query(`INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ('r2', 'c', 'https://example.com/', '["review.created"]', '4711', 's', 0)`);
    expect((await queued("review.created")).count).toBe(0);
    await migrate(db);
    expect((await queued("review.created")).count, "after a start").toBe(1);
  });

  // The same plan, made while events was still empty (a new database's first claims find nothing due),
  // joined the claimed attempts' events by hash: each claim then read every event until the next ANALYZE.
  it("reads a claim's events by key, even with its plan made while there were none", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query("ANALYZE");
    // One transaction: on PostgreSQL, one connection, whose plan the first claim makes.
    const read = await db.transaction(async (tx) => {
      expect(await claimAttempts(tx)).toHaveLength(0);
      await tx.query(TWENTY_WEBHOOKS);
      await tx.query("INSERT INTO events (id, name, business_id, body, created_at) SELECT 'e' || i, 'lead.created', '4711', '{}', i FROM generate_series(1, 2000) i");
      await tx.query(ATTEMPTS_OVER_THEM);
      const before = await tableReads(tx, "events");
      expect(await claimAttempts(tx)).toHaveLength(32);
      return (await tableReads(tx, "events")).rows - before.rows;
    });
    expect(read, "events read by a claim of 32").toBeLessThanOrEqual(32);
  });

  // record_batch_outcomes answers rows only for the outcomes not recorded as succeeded, by their place
  // in the batch; the engine reads every other outcome as succeeded. A stale one inside a run of
  // successes must come back at its place, and so must an attempt's second outcome in one batch (made
  // again after its lease lapsed), which its id alone would confuse with its first.
  it("records a batch's outcomes each as it ended: succeeded, stale where another process took the claim or it was recorded already, failed, cancelled", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query(TWENTY_WEBHOOKS);
    await db.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'e' || i, 'w1', 1, i FROM generate_series(1, 6) i");
    // As the store holds claims (D41): written with the process's name, or held in its memory.
    const { inMemory } = claimCalls(db);
    const claimed = (await db.query<{ id: string | number | null }>(CLAIM, claimParams(5000, 32, 32, []))).rows
      .filter((r) => r.id !== null)
      .map((r) => String(r.id));
    expect(claimed).toHaveLength(6);
    // The second attempt is no longer this process's: its lease was taken over by another process, or
    // (held in memory, where no other process can take it) it was recorded meanwhile.
    await db.query(inMemory ? "UPDATE attempts SET state = 'succeeded' WHERE id = $1" : "UPDATE attempts SET claimed_by = 'other' WHERE id = $1", [claimed[1]]);
    const held = new HeldClaims();
    for (const id of claimed) held.add(id);
    const parts = defaultParts(partsContext({ db, owner: "me", held }));
    const outcome = (i: number, fields: { ok: boolean; cancelled?: boolean; status?: number; retryAt?: number }) =>
      ({ attemptId: claimed[i]!, webhookId: "w1", cancelled: false, endedAt: 10 + i, ...fields });
    const recorded = await parts.record([
      outcome(0, { ok: true, status: 200 }),
      outcome(1, { ok: true, status: 200 }),
      outcome(2, { ok: true, status: 204 }),
      outcome(3, { ok: false, status: 500, retryAt: 100 }),
      outcome(4, { ok: false, cancelled: true }),
      outcome(5, { ok: true, status: 201 }),
      outcome(0, { ok: false, status: 503, retryAt: 100 }),
    ]);
    expect(recorded).toEqual(["succeeded", "stale", "succeeded", "failed", "cancelled", "succeeded", "stale"]);
    const { rows } = await db.query<{ event_id: string; attempt: number; state: string; status: number | null }>(
      "SELECT event_id, attempt, state, status FROM attempts ORDER BY event_id, attempt",
    );
    expect(rows).toEqual([
      { event_id: "e1", attempt: 1, state: "succeeded", status: 200 },
      { event_id: "e2", attempt: 1, state: inMemory ? "succeeded" : "in_flight", status: null },
      { event_id: "e3", attempt: 1, state: "succeeded", status: 204 },
      { event_id: "e4", attempt: 1, state: "failed", status: 500 },
      { event_id: "e4", attempt: 2, state: "pending", status: null },
      { event_id: "e5", attempt: 1, state: "cancelled", status: null },
      { event_id: "e6", attempt: 1, state: "succeeded", status: 201 },
    ]);
  });

  // D41: on a store only one process uses, its claims are held in its memory, not written. The store
  // then answers for what it is told is held: a claim leaves those attempts out, the next due time is
  // not theirs, and a disabling cancels what is pending but not those, which are recorded as they end.
  it("holds claims in memory: a claim leaves out the attempts held, and a disabling cancels the pending ones but not those held", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query(TWENTY_WEBHOOKS);
    await db.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'e' || i, 'w1', 1, i FROM generate_series(1, 7) i");
    const pick = async (limit: number, held: string[]) =>
      (await db.query<{ id: string | number | null }>("SELECT * FROM claim_held_attempts(5000, 'me', 0, -1, $1, 32, '{}', $2)", [limit, held])).rows
        .flatMap((r) => (r.id === null ? [] : [String(r.id)]));
    const first = await pick(3, []);
    expect(first).toHaveLength(3);
    // Not written: the same three again while none is held, the next three once they are.
    expect(await pick(3, [])).toEqual(first);
    const second = await pick(3, first);
    expect(second.filter((id) => first.includes(id))).toEqual([]);
    const held = [...first, ...second];
    const nextDue = async (heldNow: string[]) => Number((await db.query<{ at: string | number | null }>(NEXT_DUE_AT, [0, heldNow])).rows[0]!.at);
    expect(await nextDue([])).toBe(1);
    expect(await nextDue(held)).toBe(7);
    // One failure short of the threshold: the first held attempt's failure disables the webhook.
    const threshold = 5;
    await db.query("UPDATE webhooks SET consecutive_failures = $1 WHERE id = 'w1'", [threshold - 1]);
    const record = (i: number, ok: boolean, stillHeld: string[]) =>
      db.query<{ place: number; ended: string }>("SELECT place, ended FROM record_held_outcomes($1, $2, $3, $4, $5, $6, $7, $8, 'me', $9, $10)", [
        [held[i]],
        ["w1"],
        [ok],
        [false],
        [ok ? 200 : 500],
        [null],
        [10 + i],
        [ok ? null : 100],
        threshold,
        stillHeld,
      ]);
    expect((await record(0, false, held)).rows).toEqual([{ place: 1, ended: "disabled" }]);
    // Held, it was spared by the disabling: recorded as it ended, without counting (the webhook is disabled).
    expect((await record(1, true, held.slice(1))).rows).toEqual([]);
    const { rows } = await db.query<{ event_id: string; state: string }>("SELECT event_id, state FROM attempts ORDER BY due_at, id");
    expect(rows).toEqual([
      { event_id: "e1", state: "failed" },
      { event_id: "e2", state: "succeeded" },
      ...["e3", "e4", "e5", "e6"].map((event_id) => ({ event_id, state: "pending" })),
      { event_id: "e7", state: "cancelled" },
    ]);
  });

  // A record is issued whenever attempts end, a claim whenever there is room: held in memory, the
  // attempts a claim takes are held once the engine has its answer, and a disabling recorded meanwhile
  // (after the claim, in the store) must spare them as well.
  it.skipIf(postgres)("spares what a claim under way takes when a disabling is recorded meanwhile (claims held in memory)", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query(TWENTY_WEBHOOKS);
    await db.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'e' || i, 'w1', 1, i FROM generate_series(1, 4) i");
    const held = new HeldClaims();
    const parts = defaultParts(partsContext({ db, owner: "me", held }));
    const [failing] = await parts.claim(5000, 1);
    held.add(failing!.id);
    // One failure short of the threshold (5, D7).
    await db.query("UPDATE webhooks SET consecutive_failures = 4 WHERE id = 'w1'");
    // The next claim, and at once the failure that disables the webhook: the claim reaches the store first.
    const claiming = parts.claim(5000, 2);
    const recording = parts.record([{ attemptId: failing!.id, webhookId: "w1", ok: false, cancelled: false, status: 500, endedAt: 10, retryAt: 100 }]);
    expect((await claiming).map((a) => a.attempt)).toEqual([1, 1]);
    expect(await recording).toEqual(["disabled"]);
    const { rows } = await db.query<{ event_id: string; state: string }>("SELECT event_id, state FROM attempts ORDER BY due_at, id");
    expect(rows).toEqual([
      { event_id: "e1", state: "failed" },
      { event_id: "e2", state: "pending" },
      { event_id: "e3", state: "pending" },
      { event_id: "e4", state: "cancelled" },
    ]);
  });

  // The engine issues its next claim whenever it has room, some turns of the event loop after a claim's
  // answer: a record that has waited for the claims under way must be issued in the same turn as its wait
  // ends, or a claim issued in between reaches the store first and the disabling cancels what it took.
  it.skipIf(postgres)("spares what a claim issued just after the last one ends takes, however few turns later (claims held in memory)", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query(TWENTY_WEBHOOKS);
    for (let turns = 0; turns <= 6; turns++) {
      await db.query("DELETE FROM attempts");
      await db.query("INSERT INTO attempts (event_id, webhook_id, attempt, due_at) SELECT 'e' || i, 'w1', 1, i FROM generate_series(1, 6) i");
      await db.query("UPDATE webhooks SET status = 'enabled', consecutive_failures = 4 WHERE id = 'w1'");
      const held = new HeldClaims();
      const parts = defaultParts(partsContext({ db, owner: "me", held }));
      const [failing] = await parts.claim(5000, 1);
      held.add(failing!.id);
      const claiming = parts.claim(5000, 1);
      const recording = parts.record([{ attemptId: failing!.id, webhookId: "w1", ok: false, cancelled: false, status: 500, endedAt: 10, retryAt: 100 }]);
      // The next claim, `turns` turns of the event loop after the first one's answer.
      const next = claiming.then(async (taken) => {
        for (const a of taken) held.add(a.id);
        for (let i = 0; i < turns; i++) await Promise.resolve();
        return parts.claim(5000, 1);
      });
      const taken = [...(await claiming), ...(await next)].map((a) => a.id);
      expect(await recording).toEqual(["disabled"]);
      // What a claim took is made and recorded as it ends, never cancelled under it (D41).
      const { rows } = await db.query<{ id: string | number; state: string }>("SELECT id, state FROM attempts WHERE id = ANY($1::bigint[])", [taken]);
      expect({ turns, states: rows.map((r) => r.state) }).toEqual({ turns, states: taken.map(() => "pending") });
    }
  });

  // Each pass of the delivery loop asks which open leads are due and when the next one is (D19); as
  // scans of leads, with 100k leads these cost the embedded store's thread 17 and 46 ms a pass.
  it("finds the due and the next lead by index, never a scan of leads", async () => {
    const db = await freshDb();
    await migrate(db);
    await db.query(
      "INSERT INTO leads (id, request_id, business_id, status, created_at, expires_at) SELECT 'l' || i, 'r' || i, '4711', CASE WHEN i % 3 = 0 THEN 'hired' ELSE 'new' END, 0, 1000000 + i FROM generate_series(1, 5000) i",
    );
    await db.query("ANALYZE leads");
    // Past PostgreSQL's first five plans of a prepared statement (the embedded store prepares each
    // text once), so that what is measured is the plan kept for every pass after.
    for (let i = 0; i < 8; i++) {
      expect((await db.query(EXPIRE_DUE_LEADS, [999999])).rows).toEqual([]);
      await db.query(NEXT_DUE_AT, [999999, []]);
    }
    const scans = await scansOf(db, "leads", async (tx) => {
      expect((await tx.query(EXPIRE_DUE_LEADS, [1000002])).rows).toHaveLength(2);
      expect(Number((await tx.query<{ at: string | number }>(NEXT_DUE_AT, [1000002, []])).rows[0]!.at)).toBe(1000004);
    });
    expect(scans.seq, "scans of leads").toBe(0);
    expect(scans.idx).toBeGreaterThan(0);
  });

  it("hands out distinct numeric identifiers (D14), also to concurrent callers", async () => {
    const db = await freshDb();
    await migrate(db);
    const ids = await Promise.all(Array.from({ length: 50 }, () => nextId(db)));
    expect(new Set(ids).size).toBe(50);
    for (const id of ids) expect(validatorFor("LeadId")(id)).toBe(true);
  });

  it("records the configuration's business owners (D27) when servers start together, and says what changed", async () => {
    const store = await fresh();
    // Two servers' connections on PostgreSQL; one database, called at once, on the embedded store.
    const [a, b] = postgres ? [await store.open(), await store.open()] : Array(2).fill(await store.open());
    const owners = (db: Db) => db.query<{ business_id: string; client_id: string }>("SELECT business_id, client_id FROM business_owners ORDER BY business_id").then((r) => r.rows);
    try {
      await migrate(a);
      // Two configurations that move 4712 between the partners: each round both servers start with the next.
      const configs = [
        [{ clientId: "partner-acme", businessIDs: ["4711", "4712"] }, { clientId: "partner-globex", businessIDs: ["4713"] }],
        [{ clientId: "partner-acme", businessIDs: ["4711"] }, { clientId: "partner-globex", businessIDs: ["4712", "4713"] }],
      ];
      for (let round = 0; round < 10; round++) {
        const config = configs[round % 2]!;
        const changes = await Promise.all([recordOwners(a, config), recordOwners(b, config)]);
        // One of the two records the change (all three owners on a new database); the other finds it done.
        expect(changes.flat().length, `round ${round}`).toBe(round === 0 ? 3 : 1);
      }
      await recordOwners(a, configs[0]!);
      expect(await owners(a)).toEqual([
        { business_id: "4711", client_id: "partner-acme" },
        { business_id: "4712", client_id: "partner-acme" },
        { business_id: "4713", client_id: "partner-globex" },
      ]);
      expect(await recordOwners(b, [{ clientId: "partner-globex", businessIDs: ["4712", "4713"] }])).toEqual([
        { businessId: "4711", from: "partner-acme" },
        { businessId: "4712", from: "partner-acme", to: "partner-globex" },
      ]);
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it.runIf(postgres)("lets two servers share one database and delivers each event once", async () => {
    const receiver: Receiver = await startReceiver();
    const databaseUrl = await pg!.createDatabase("shared");
    // An answer slowed by a loaded machine must not count as a timeout here (D24's real bound, 1 s by default).
    const options = { databaseUrl, clock: { mode: "virtual" as const, start: Date.now() }, conformance: true, allowPrivateWebhooks: true, webhookCa: receiver.pki.caCert, virtualAttemptTimeoutMs: 60_000, log: () => undefined };
    // Started together: the second waits for the first one's migration instead of racing it.
    const [a, b] = await Promise.all([startServer(options), startServer(options)]);
    try {
      await register(a, receiver.url("shared"), ["review.created"]);
      const events = 40;
      for (let i = 0; i < events; i++) {
        await a.engine.emit("review.created", "4711", { reviewID: String(i + 1), businessID: "4711", rating: 5, reviewer: { name: client.clientId }, createdAt: "2026-11-22T14:00:00Z" });
      }
      // One time on both virtual clocks: everything queued is due for both.
      await Promise.all([a.engine.runDue(), b.engine.runDue(), a.engine.runDue(), b.engine.runDue()]);
      const ids = receiver.at("shared").map((d) => envelope(d.body).id);
      expect([ids.length, new Set(ids).size]).toEqual([events, events]);
    } finally {
      await a.close();
      await b.close();
      await receiver.close();
    }
  });
});

describe("temporary embedded stores", () => {
  it("a server killed without --data-dir leaves its store behind, and the next start removes it (not a live server's)", async () => {
    const storesOf = async (pid: number) => (await readdir(tmpdir())).filter((name) => name.startsWith(`partner-platform-db-${pid}-`));
    const killed = await startServe(["--port", "0"]);
    const live = await startServe(["--port", "0"]);
    try {
      const abandoned = await storesOf(killed.child.pid!);
      expect(abandoned).toHaveLength(1);
      killed.child.kill("SIGKILL");
      await once(killed.child, "exit");
      expect(await storesOf(killed.child.pid!)).toEqual(abandoned);
      const db = await openEmbedded();
      await db.close();
      expect(await storesOf(killed.child.pid!)).toEqual([]);
      expect(await storesOf(live.child.pid!)).toHaveLength(1);
    } finally {
      await live.stop();
    }
    expect(await storesOf(live.child.pid!)).toEqual([]);
  });
});
