// The embedded database's thread (store.ts, openEmbedded): PGlite's WebAssembly Postgres runs here, so
// its CPU overlaps the delivery attempts on the server's event loop instead of taking turns with them.
// The main thread posts statements; a transaction holds PGlite's own lock (nothing else runs inside
// it) while its statements come one by one from the main thread, where its callback runs.
import { parentPort, workerData } from "node:worker_threads";
import { PGlite, parse, protocol, type Transaction } from "@electric-sql/pglite";

export interface StoreWorkerData {
  dir: string;
  /** PostgreSQL settings added to PGlite's own start parameters (PGlite is loaded on this thread only). */
  settings: string[];
  maintenanceMs: number;
}

export type StoreRequest =
  | { id: number; op: "query"; sql: string; params?: unknown[]; tx?: number }
  | { id: number; op: "begin" }
  | { id: number; op: "end"; tx: number; commit: boolean }
  | { id: number; op: "close" };

export type StoreReply = { id: number; rows?: unknown[]; tx?: number } | { id: number; error: Record<string, unknown> };

const port = parentPort!;
const { dir, settings, maintenanceMs } = workerData as StoreWorkerData;

/** What a failed statement carries back: message, PostgreSQL's fields (code, detail, …). */
function serialized(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const fields: Record<string, unknown> = { name: error.name, message: error.message };
  for (const [key, value] of Object.entries(error)) if (typeof value !== "object" && typeof value !== "function") fields[key] = value;
  return fields;
}

const db = new PGlite(dir, { startParams: [...PGlite.defaultStartParams, ...settings] });
const ready = db.waitReady;

// The embedded database runs without PostgreSQL's background workers: nothing checkpoints (its
// write-ahead log grows to max_wal_size, 1 GB, in memory) and nothing vacuums (every claim and outcome
// leaves a dead row). Measured on 150k attempt-like rows written three times: RSS grew 922 → 1,253 MB
// without this, and stayed at 887–913 MB with it, for 5% of the time. Only when the log has moved since
// the last time: an idle server costs one query every few seconds.
// Statistics are gathered as PostgreSQL's autovacuum gathers them by default: a table is analyzed when
// 50 rows plus a tenth of it changed since its last ANALYZE, looked at once a minute (its naptime). An
// ANALYZE samples up to 30,000 rows: run with every VACUUM, it took 90 ms and then, as attempts grew to
// 200k rows in the backlog bench, 360 ms every 5 s, 7% of this thread's time. VACUUM keeps each table's
// size (reltuples, which the claim reads) current meanwhile.
let lastLsn = "";
let lastAnalyzed = -Infinity;
const MAINTAINED = ["attempts", "events", "webhooks", "notifications", "tokens"];
const ANALYZE_EVERY_MS = 60_000;
const lsn = async () => (await db.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn")).rows[0]!.lsn;
let maintenance: Promise<void> | undefined;
const maintain = async () => {
  if ((await lsn()) === lastLsn) return;
  await db.exec("CHECKPOINT");
  await db.exec(`VACUUM ${MAINTAINED.join(", ")}`);
  if (performance.now() - lastAnalyzed >= ANALYZE_EVERY_MS) {
    lastAnalyzed = performance.now();
    const { rows } = await db.query<{ relname: string }>(
      "SELECT relname FROM pg_stat_user_tables WHERE relname = ANY($1) AND n_mod_since_analyze >= 50 + 0.1 * n_live_tup",
      [MAINTAINED],
    );
    if (rows.length > 0) await db.exec(`ANALYZE ${rows.map((r) => r.relname).join(", ")}`);
  }
  lastLsn = await lsn();
};
const timer = setInterval(() => {
  maintenance ??= maintain()
    .catch(() => undefined)
    .finally(() => (maintenance = undefined));
}, maintenanceMs);

/**
 * Each statement the server runs, prepared once under a name, with its parameters' types and its rows'
 * description. PGlite's query() parses, describes, binds, describes, executes and syncs a statement in
 * six calls into the database, every time; a prepared one is bound, executed and synced in one. Measured
 * in one process: 450 → 260 µs for a one-row statement, 1,200 → 900 µs for 64 rows; end to end (bench
 * `delivery`, 3 pairs alternated) `serve`'s CPU per delivery 1,020–1,057 → 903–950 µs. The server's
 * statements are a fixed set of texts; past MAX_PREPARED distinct texts, query() runs them unprepared.
 */
const MAX_PREPARED = 256;
const prepared = new Map<string, { name: string; paramTypes: number[]; rowDescription?: unknown }>();

/**
 * The elements of the array types the server passes, in PostgreSQL's binary form (array_recv): `of`
 * takes a value as the element (undefined: not of its type, the whole array then goes as text, for
 * PostgreSQL to judge), `size` and `write` its bytes.
 */
interface ArrayElement<T> {
  oid: number;
  of: (v: unknown) => T | undefined;
  size: (v: T) => number;
  write: (v: T, out: Buffer, at: number) => void;
}
const element = <T>(e: ArrayElement<T>) => e as ArrayElement<unknown>;
const ARRAY_ELEMENTS: Record<number, ArrayElement<unknown>> = {
  // text[]: events' bodies passed as text were parsed character by character (their quotes escaped): 12
  // bodies of 774 characters cost 590 µs a statement, 233 µs in this form; end to end (bench `delivery`,
  // 4 pairs alternated) `serve` used 803–863 µs of CPU per delivery against 827–873 µs.
  1009: element<string>({ oid: 25, of: (v) => (typeof v === "string" ? v : undefined), size: (v) => Buffer.byteLength(v), write: (v, out, at) => void out.write(v, at) }),
  // bigint[]: a decimal string (as identifiers are passed), a safe integer or a bigint, within its range.
  1016: element<bigint>({ oid: 20, of: int8Of, size: () => 8, write: (v, out, at) => void out.writeBigInt64BE(v, at) }),
  1007: element<number>({
    oid: 23,
    of: (v) => (Number.isInteger(v) && (v as number) >= -(2 ** 31) && (v as number) < 2 ** 31 ? (v as number) : undefined),
    size: () => 4,
    write: (v, out, at) => void out.writeInt32BE(v, at),
  }),
  1000: element<boolean>({ oid: 16, of: (v) => (typeof v === "boolean" ? v : undefined), size: () => 1, write: (v, out, at) => void out.writeUInt8(v ? 1 : 0, at) }),
};

function int8Of(v: unknown): bigint | undefined {
  const b = typeof v === "bigint" ? v : Number.isSafeInteger(v) ? BigInt(v as number) : typeof v === "string" && /^-?\d{1,19}$/.test(v) ? BigInt(v) : undefined;
  return b !== undefined && b >= -(2n ** 63n) && b < 2n ** 63n ? b : undefined;
}

/** `values` as a one-dimensional array of type `arrayOid` in binary form, or undefined where it cannot be. */
function binaryArray(arrayOid: number, values: unknown): Buffer | undefined {
  const type = ARRAY_ELEMENTS[arrayOid];
  if (!type || !Array.isArray(values)) return undefined;
  const elements: unknown[] = [];
  for (const v of values) {
    const e = v === null || v === undefined ? null : type.of(v);
    if (e === undefined) return undefined;
    elements.push(e);
  }
  const sizes = elements.map((e) => (e === null ? null : type.size(e)));
  const out = Buffer.alloc(20 + sizes.reduce<number>((n, size) => n + 4 + (size ?? 0), 0));
  out.writeInt32BE(1, 0);
  out.writeInt32BE(sizes.includes(null) ? 1 : 0, 4);
  out.writeUInt32BE(type.oid, 8);
  out.writeInt32BE(elements.length, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (const [i, size] of sizes.entries()) {
    out.writeInt32BE(size ?? -1, at);
    at += 4;
    if (size === null) continue;
    type.write(elements[i], out, at);
    at += size;
  }
  return out;
}

/**
 * Runs a statement as PGlite's query() does (its lock, its types, its errors), prepared; in `tx` when
 * given. A text new past MAX_PREPARED is run by query(), unprepared.
 */
async function run(sql: string, params: unknown[], tx: Transaction | undefined): Promise<unknown[]> {
  if (!prepared.has(sql) && prepared.size >= MAX_PREPARED) return (await (tx ?? db).query(sql, params)).rows;
  const exclusive = () =>
    db.runExclusive(async () => {
      let statement = prepared.get(sql);
      if (!statement) {
        const name = `s${prepared.size + 1}`;
        const described = await db.execProtocolStream(
          Buffer.concat([protocol.serialize.parse({ name, text: sql }), protocol.serialize.describe({ type: "S", name }), protocol.serialize.sync()]),
          { syncToFs: false },
        );
        statement = { name, paramTypes: parse.parseDescribeStatementResults(described), rowDescription: described.find((m) => m.name === "rowDescription") };
        prepared.set(sql, statement);
      }
      const values = params.map((value, i) => {
        if (value === null || value === undefined) return null;
        const type = statement.paramTypes[i]!;
        const binary = binaryArray(type, value);
        if (binary) return binary;
        const serializer = db.serializers[type];
        return serializer ? serializer(value) : String(value);
      });
      // Bind, execute and sync as one buffer: PGlite runs them in one call.
      const replies = await db.execProtocolStream(
        Buffer.concat([protocol.serialize.bind({ statement: statement.name, values }), protocol.serialize.execute({}), protocol.serialize.sync()]),
        { syncToFs: false },
      );
      if (!tx) await db.syncToFs();
      const [result] = parse.parseResults((statement.rowDescription ? [statement.rowDescription, ...replies] : replies) as typeof replies, db.parsers);
      return result?.rows ?? [];
    });
  try {
    // Outside a transaction, PGlite's own lock on transactions first, as query() takes it.
    return await (tx ? exclusive() : db._runExclusiveTransaction(exclusive));
  } catch (error) {
    throw Object.assign(error as Error, { query: sql });
  }
}

/** Open transactions: the callback's handle, how to end it, and PGlite's promise of its end. */
let nextTx = 1;
const transactions = new Map<number, { tx: Transaction; end: (commit: boolean) => void; done: Promise<void> }>();

async function handle(request: StoreRequest): Promise<Omit<StoreReply, "id">> {
  await ready;
  switch (request.op) {
    case "query": {
      const open = request.tx === undefined ? undefined : transactions.get(request.tx);
      if (request.tx !== undefined && !open) throw new Error(`transaction ${request.tx} is not open`);
      return { rows: await run(request.sql, request.params ?? [], open?.tx) };
    }
    case "begin": {
      const txId = nextTx++;
      let begun!: () => void;
      const started = new Promise<void>((resolve) => (begun = resolve));
      let open!: { tx: Transaction; end: (commit: boolean) => void };
      const done = db.transaction(
        (tx) =>
          new Promise<void>((resolve, reject) => {
            open = { tx, end: (commit) => (commit ? resolve() : reject(new Error("rolled back"))) };
            begun();
          }),
      );
      // A transaction that cannot begin answers its begin; one that began answers its end.
      await Promise.race([started, done]);
      transactions.set(txId, { ...open, done });
      return { tx: txId };
    }
    case "end": {
      const open = transactions.get(request.tx);
      if (!open) throw new Error(`transaction ${request.tx} is not open`);
      transactions.delete(request.tx);
      open.end(request.commit);
      if (request.commit) await open.done;
      else await open.done.catch(() => undefined);
      return {};
    }
    case "close": {
      clearInterval(timer);
      await maintenance;
      await db.close();
      return {};
    }
  }
}
port.on("message", (request: StoreRequest) => {
  handle(request)
    .then(
      (reply) => port.postMessage({ id: request.id, ...reply }),
      (error: unknown) => port.postMessage({ id: request.id, error: serialized(error) }),
    )
    // Closed: the thread ends once its answer is sent.
    .finally(() => request.op === "close" && port.close());
});
