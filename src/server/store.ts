// The reference server's storage: one set of PostgreSQL statements, run by PGlite (embedded, the
// default: no server needed) or by a PostgreSQL server (DATABASE_URL). Webhooks, tokens, requests,
// leads, events and pending attempts all live here, so a restart loses nothing.
import { execFile } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rename, rm, statfs } from "node:fs/promises";
import { createRequire } from "node:module";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { Worker } from "node:worker_threads";
import { once } from "node:events";
import pg from "pg";
import type { StoreReply, StoreRequest, StoreWorkerData } from "./store-worker.js";
import { callsTo } from "../worker-calls.js";

export interface Queryable {
  query<R>(sql: string, params?: unknown[]): Promise<{ rows: R[] }>;
}

export interface Db extends Queryable {
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** A name for this process's claims that other processes on the database can tell is alive. */
  claimOwner(): Promise<string>;
  /**
   * Hands back to the queue the attempts claimed by processes known to be gone, at once rather than
   * after their lease: on the embedded store, every other claim (its data is this process's alone);
   * on PostgreSQL, claims whose owner's session lock is no longer held (the process died or closed).
   */
  handBackOrphans(owner: string): Promise<number>;
  /**
   * Only this process uses the database (the embedded store: its folder is locked to one process). Its
   * claims are then held in the process's memory rather than written (D41): no other process could take
   * an attempt over, and one left pending by a process that died is made again by the next as it starts.
   */
  readonly exclusive: boolean;
}

/** Advisory-lock namespace of the servers' liveness locks (the two-int4 form: objsubid 2). */
const LIVENESS_LOCKS = 20261123;

/** How often the embedded database is checkpointed and vacuumed, when it was written to since. */
const EMBEDDED_MAINTENANCE_MS = 5_000;

/**
 * Settings of the embedded database. Its shared buffers are memory of the server's own process:
 * PostgreSQL's 128 MB default made a third of its idle RSS; at 16 MB delivery measured the same.
 */
const EMBEDDED_SETTINGS = ["-c", "shared_buffers=16MB"];

/**
 * A fresh cluster of the embedded database (initdb's output), made once per PGlite version in a
 * folder of the system's temporary folder: copying it takes well under a second, and initdb, run in a
 * child process, leaves the server's memory alone (in the process, it and the copy it loaded from
 * added 450 MB of RSS that was never given back).
 */
let freshCluster: Promise<string> | undefined;
const INITDB = `
const { PGlite } = require(process.argv[1]);
(async () => {
  const db = new PGlite(process.argv[2]);
  await db.waitReady;
  await db.close();
})().catch((error) => {
  console.error(error);
  process.exit(1);
});`;

function freshClusterDir(): Promise<string> {
  freshCluster ??= (async () => {
    const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
    const { version } = JSON.parse(await readFile(path.join(path.dirname(entry), "..", "package.json"), "utf8")) as { version: string };
    const dir = path.join(tmpdir(), `partner-platform-pglite-${version}-cluster`);
    if (existsSync(path.join(dir, "PG_VERSION"))) return dir;
    const partial = `${dir}.${process.pid}.${randomUUID()}`;
    try {
      await promisify(execFile)(process.execPath, ["-e", INITDB, entry, partial]);
      // Another process may have made it meanwhile: its copy is as good.
      await rename(partial, dir).catch((error: unknown) => {
        if (!existsSync(path.join(dir, "PG_VERSION"))) throw error;
      });
    } finally {
      await rm(partial, { recursive: true, force: true });
    }
    return dir;
  })();
  freshCluster.catch(() => (freshCluster = undefined));
  return freshCluster;
}

/**
 * Why `dir` cannot be the embedded database's folder, if it cannot: it must be new, empty, or hold a
 * database (PG_VERSION); a database is never mixed into other files.
 */
export function embeddedDirProblem(dir: string): string | undefined {
  if (!existsSync(dir)) return undefined;
  if (!statSync(dir).isDirectory()) return `${dir} is not a folder`;
  const user = liveUserOf(dir);
  if (user) return inUse(dir, user);
  const others = readdirSync(dir).filter((entry) => !ownEntry(entry));
  if (others.length > 0 && !existsSync(path.join(dir, "PG_VERSION")) && !existsSync(path.join(dir, COPYING))) {
    return `${dir} holds files but no database (no PG_VERSION): give a new or empty folder, or one an earlier serve made`;
  }
  return undefined;
}

/**
 * A serve's mark in its embedded database's folder. PGlite's own postmaster.pid names no real process,
 * so PostgreSQL's lock does not keep a second process out, and two processes on one folder lost
 * committed rows. A lock whose process is gone (kill -9) or is this one (a restarted container's pid 1)
 * is taken over.
 */
const LOCK_FILE = "partner-platform-serve.lock";

/**
 * What a folder may hold besides a database and still be taken as new: a serve's lock, the files it
 * writes the lock through, its copy's mark (a start stopped before or during its copy left them), and
 * the lost+found of a volume formatted ext4.
 */
const ownEntry = (entry: string) => entry === LOCK_FILE || entry.startsWith(`${LOCK_FILE}.`) || entry === COPYING || entry === "lost+found";

const inUse = (dir: string, holder: { pid: number; since: string }) =>
  `${dir} is in use by another serve (pid ${holder.pid} on this host, since ${holder.since}): stop it, or give another folder`;

function liveUserOf(dir: string): { pid: number; since: string } | undefined {
  return liveHolder(path.join(dir, LOCK_FILE));
}

/** The process a lock file names, if it is another one alive on this host. */
function liveHolder(file: string): { pid: number; since: string } | undefined {
  let lock: { pid: number; host: string; since: string };
  try {
    lock = JSON.parse(readFileSync(file, "utf8")) as typeof lock;
  } catch {
    return undefined;
  }
  if (lock.host !== hostname() || lock.pid === process.pid || !Number.isInteger(lock.pid)) return undefined;
  try {
    process.kill(lock.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return undefined;
  }
  return lock;
}

function lockEmbeddedDir(dir: string): () => void {
  const file = path.join(dir, LOCK_FILE);
  // Linked into place whole, and only where no lock is: of two starts that both found the folder free,
  // one takes it, and a lock is never read half-written. One whose process is gone is replaced.
  const content = JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString() });
  const take = () => {
    const written = `${file}.${randomUUID()}`;
    writeFileSync(written, content);
    try {
      linkSync(written, file);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
      // A file system without hard links: created in place where none is.
      try {
        writeFileSync(file, content, { flag: "wx" });
        return true;
      } catch (inPlace) {
        if ((inPlace as NodeJS.ErrnoException).code === "EEXIST") return false;
        throw inPlace;
      }
    } finally {
      rmSync(written, { force: true });
    }
  };
  for (let tries = 0; !take(); tries++) {
    const holder = liveUserOf(dir);
    if (holder) throw new Error(inUse(dir, holder));
    if (tries > 0) throw new Error(`${dir} is being taken by another serve starting at the same time: give another folder`);
    // A lock whose process is gone is moved aside and judged there: one that another start put in its
    // place meanwhile (it too found the old lock dead) is put back, not removed.
    const aside = `${file}.${randomUUID()}`;
    try {
      renameSync(file, aside);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw error;
    }
    const moved = liveHolder(aside);
    if (moved) {
      try {
        linkSync(aside, file);
      } finally {
        rmSync(aside, { force: true });
      }
      throw new Error(inUse(dir, moved));
    }
    rmSync(aside, { force: true });
  }
  return () => {
    try {
      if ((JSON.parse(readFileSync(file, "utf8")) as { pid: number }).pid === process.pid) rmSync(file, { force: true });
    } catch {
      // Gone already, or taken over.
    }
  };
}

/** Why PGlite cannot open the database in `dir`, if it is one of another PostgreSQL version (PGlite says only that it failed to start). */
async function versionProblem(dir: string): Promise<string | undefined> {
  const major = async (folder: string) => (await readFile(path.join(folder, "PG_VERSION"), "utf8")).trim();
  const [found, own] = [await major(dir), await major(await freshClusterDir())];
  return found === own
    ? undefined
    : `${dir} holds a database of PostgreSQL ${found}, and this serve's embedded database is PostgreSQL ${own}: give a new folder, or run the version of partner-platform that made it`;
}

/** Marks a folder a fresh cluster is being copied into; found at start, the copy stopped half-way and is made again. */
const COPYING = "partner-platform-copying";

/**
 * Copied into the folder (which may be a mount point, a container's volume, that nothing can be renamed
 * onto), PG_VERSION last and under a mark while the copy is under way: a copy that stops half-way (kill
 * -9) must not look like a database, and is removed and made again by the next start. The folder is
 * locked first, so two starts never copy into one folder.
 */
async function copyFreshCluster(dir: string): Promise<void> {
  const mark = path.join(dir, COPYING);
  if (existsSync(mark)) {
    for (const entry of await readdir(dir)) if (!ownEntry(entry)) await rm(path.join(dir, entry), { recursive: true, force: true });
  } else {
    writeFileSync(mark, "");
  }
  const fresh = await freshClusterDir();
  const version = path.join(fresh, "PG_VERSION");
  await cp(fresh, dir, { recursive: true, filter: (source) => source !== version });
  await cp(version, path.join(dir, "PG_VERSION"));
  rmSync(mark);
}

/**
 * The database's thread keeps little alive (PGlite's memory is WebAssembly's, outside V8's heap) but
 * allocates fast: V8 let its young generation grow to 48 MB (32 MB resident under a backlog); 12 MB
 * (semi-spaces of 4 MB) is part of what keeps `serve` within its memory target (D42).
 */
const STORE_WORKER_LIMITS = { maxYoungGenerationSizeMb: 12 };

/**
 * The embedded database's thread (store-worker.ts). The packed package runs dist/. In a checkout the
 * sources are TypeScript: the thread runs store-worker.ts bundled with its local imports by esbuild
 * (a devDependency; once per process, in memory, as a data: URL whose package imports are absolute
 * file URLs), not through tsx, which cost the thread 50–70 MB of RSS at idle. It takes none of the
 * parent's Node.js options: it needs no loader (`node --import tsx` would load tsx there again), and
 * V8's options, which a worker refuses, apply to the whole process anyway.
 */
async function startStoreWorker(data: StoreWorkerData): Promise<Worker> {
  const here = fileURLToPath(import.meta.url);
  const entry = path.join(path.dirname(here), `store-worker${path.extname(here)}`);
  const options = { workerData: data, resourceLimits: STORE_WORKER_LIMITS };
  if (!entry.endsWith(".ts")) return new Worker(entry, options);
  const source = `data:text/javascript,${encodeURIComponent(await bundledWorker(entry))}`;
  return new Worker(new URL(source), { ...options, execArgv: [] });
}

let bundled: Promise<string> | undefined;
function bundledWorker(entry: string): Promise<string> {
  bundled ??= (async () => {
    const esbuild = await import("esbuild");
    try {
      const result = await esbuild.build({
        entryPoints: [entry],
        bundle: true,
        format: "esm",
        platform: "node",
        target: `node${process.versions.node}`,
        write: false,
        logLevel: "silent",
        plugins: [
          {
            // Packages stay outside the bundle, imported by absolute URL (a data: URL has no folder to resolve from).
            name: "packages-by-url",
            setup(build) {
              build.onResolve({ filter: /^[^./]/ }, async (args) => {
                if (args.pluginData === "packages-by-url") return undefined;
                const found = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "packages-by-url" });
                if (found.errors.length > 0) return { errors: found.errors };
                return { path: found.external ? found.path : pathToFileURL(found.path).href, external: true };
              });
            },
          },
        ],
      });
      return result.outputFiles[0]!.text;
    } finally {
      // Its service is a child process this server needs no more.
      await esbuild.stop();
    }
  })();
  bundled.catch(() => (bundled = undefined));
  return bundled;
}

/**
 * A temporary store's folder is named with its process's id and its host's name (hashed): a later
 * start on the same host can tell it was abandoned. Another host's (containers sharing a temporary
 * folder see other process ids) is never touched.
 */
const temporaryStorePrefix = (pid: number) => `partner-platform-db-${pid}-${createHash("sha256").update(hostname()).digest("hex").slice(0, 8)}-`;
const TEMPORARY_STORE = /^partner-platform-db-(\d+)-([0-9a-f]{8})-/;

/**
 * Removes the temporary stores of processes that are gone: a server killed (kill -9, a crash) runs no
 * clean-up, and each store it leaves is tens of MB. A folder whose process id is alive (or now
 * belongs to another process) is left alone; so is one this user may not remove.
 */
export async function removeAbandonedStores(): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(tmpdir()).catch(() => [])) {
    const match = TEMPORARY_STORE.exec(name);
    const pid = Number(match?.[1]);
    if (!match || !name.startsWith(temporaryStorePrefix(pid)) || processExists(pid)) continue;
    const dir = path.join(tmpdir(), name);
    if (await rm(dir, { recursive: true, force: true }).then(() => true, () => false)) removed.push(dir);
  }
  return removed;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user's.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Below this much free space on its file system the embedded database takes no new work (D33): its next
 * write-ahead log segment alone needs 16 MB, and PGlite, out of room for one, spun forever instead of
 * failing (every request then hung, and no line was logged).
 */
export const EMBEDDED_MIN_FREE_BYTES = 64 * 2 ** 20;
const DISK_CHECK_MS = 1000;
const noNewWork = (diskProblem: string) => `${diskProblem}: it takes no new work until there is room`;
const freeBytesOf = async (dir: string) => {
  const { bavail, bsize } = await statfs(dir);
  return bavail * bsize;
};

/**
 * `dataDir` persists the embedded database; without it, it lives in a temporary folder removed on close.
 * `freeBytes` reads the free space of the folder's file system (a seam for tests); `log` hears when the
 * store stops taking work for want of disk, and when it takes work again.
 */
export async function openEmbedded(
  dataDir?: string,
  { freeBytes = freeBytesOf, log = () => undefined }: { freeBytes?: (dir: string) => Promise<number>; log?: (message: string) => void } = {},
): Promise<Db> {
  // On disk even when nothing is kept: PGlite's in-memory file system holds every file in the
  // JavaScript heap, the operating system's page cache costs the process nothing.
  if (!dataDir) await removeAbandonedStores();
  const temporary = dataDir ? undefined : await mkdtemp(path.join(tmpdir(), temporaryStorePrefix(process.pid)));
  const dir = dataDir ?? temporary!;
  const problem = embeddedDirProblem(dir);
  if (problem) throw new Error(problem);
  const shortOfDisk = async () => {
    const free = await freeBytes(dir);
    return free < EMBEDDED_MIN_FREE_BYTES
      ? `the file system of ${dir} has ${(free / 2 ** 20).toFixed(1)} MB free, and the embedded database needs ${EMBEDDED_MIN_FREE_BYTES / 2 ** 20} MB`
      : undefined;
  };
  mkdirSync(dir, { recursive: true });
  const unlock = dataDir ? lockEmbeddedDir(dir) : () => undefined;
  let worker: Worker | undefined;
  let diskCheck: NodeJS.Timeout | undefined;
  /** What a start that fails leaves behind: nothing (no lock, timer, thread or temporary folder). */
  const abandon = async () => {
    clearInterval(diskCheck);
    await worker?.terminate();
    unlock();
    if (temporary) await rm(temporary, { recursive: true, force: true });
  };
  let diskProblem: string | undefined;
  try {
    // Before and after a fresh cluster's copy (about 40 MB): a server must not start only to refuse every request.
    diskProblem = await shortOfDisk();
    if (!diskProblem && !existsSync(path.join(dir, "PG_VERSION"))) {
      await copyFreshCluster(dir);
      diskProblem = await shortOfDisk();
    }
    if (diskProblem) throw new Error(diskProblem);
    // PGlite runs in a worker thread (checkpointed and vacuumed there), so that its WebAssembly's CPU
    // overlaps the delivery attempts on this thread's event loop instead of taking turns with them.
    worker = await startStoreWorker({ dir, settings: EMBEDDED_SETTINGS, maintenanceMs: EMBEDDED_MAINTENANCE_MS });
  } catch (error) {
    await abandon();
    throw error;
  }
  diskCheck = setInterval(
    () =>
      void shortOfDisk().then((now) => {
        if (Boolean(now) !== Boolean(diskProblem)) log(now ? noNewWork(now) : `the file system of ${dir} has room again: the embedded database takes work again`);
        diskProblem = now;
      }, () => undefined),
    DISK_CHECK_MS,
  ).unref();
  const thread = callsTo<DistributiveOmit<StoreRequest, "id">, StoreReply>(worker, "the embedded database's thread");
  const call = async (request: DistributiveOmit<StoreRequest, "id">) => {
    try {
      // Short of disk, nothing new begins (53100, PostgreSQL's disk_full: answered 503); what a transaction began still ends.
      if (diskProblem && (request.op === "begin" || (request.op === "query" && request.tx === undefined))) {
        throw Object.assign(new Error(noNewWork(diskProblem)), { code: "53100" });
      }
      const reply = await thread.call(request);
      if ("error" in reply) throw Object.assign(new Error(String(reply.error.message)), reply.error);
      return reply;
    } catch (error) {
      throw fromStore(error);
    }
  };
  const query = async <R>(sql: string, params?: unknown[], tx?: number) => ({ rows: (await call({ op: "query", sql, params, tx })).rows as R[] });
  try {
    await query("SELECT 1");
  } catch (error) {
    const version = await versionProblem(dir).catch(() => undefined);
    await abandon();
    throw new Error(version ?? (error as Error).message, { cause: error });
  }
  return {
    query: (sql, params) => query(sql, params),
    async transaction(fn) {
      const { tx } = await call({ op: "begin" });
      let result;
      try {
        result = await fn({ query: (sql, params) => query(sql, params, tx) });
      } catch (error) {
        await call({ op: "end", tx: tx!, commit: false });
        throw error;
      }
      await call({ op: "end", tx: tx!, commit: true });
      return result;
    },
    async close() {
      clearInterval(diskCheck);
      if (!thread.ended()) {
        const exited = once(worker, "exit");
        await call({ op: "close" });
        worker.ref();
        await exited;
      }
      unlock();
      if (temporary) await rm(temporary, { recursive: true, force: true });
    },
    exclusive: true,
    claimOwner: async () => randomUUID(),
    async handBackOrphans(owner) {
      const { rows } = await query<{ n: number }>(
        `WITH back AS (UPDATE attempts SET state = 'pending', claimed_by = NULL WHERE state = 'in_flight' AND claimed_by IS DISTINCT FROM $1 RETURNING 1)
         SELECT count(*)::int AS n FROM back`,
        [owner],
      );
      return rows[0]!.n;
    },
  };
}

/** The errors a store's call threw: only those can say the database is unavailable (a client's own ECONNRESET cannot). */
const storeErrors = new WeakSet<object>();

/** Marks `error` as thrown by a store call (both stores mark theirs). */
export function fromStore<E>(error: E): E {
  if (typeof error === "object" && error !== null) storeErrors.add(error);
  return error;
}

const rethrowFromStore = (error: unknown): never => {
  throw fromStore(error);
};

/**
 * Whether a store call failed because the database cannot serve now, not because of what was asked: the
 * server is unreachable, a connection ended, it is out of disk, memory or connections, shutting down or
 * starting, or a statement ran out its time (D33). The API answers those 503 with Retry-After.
 */
export function storeUnavailable(error: unknown): boolean {
  if (typeof error !== "object" || error === null || !storeErrors.has(error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (UNAVAILABLE_CODES.has(code) || code.startsWith("08") || code.startsWith("53"))) return true;
  return error instanceof Error && UNAVAILABLE_MESSAGES.test(error.message);
}

/** Socket errors, and PostgreSQL's shutdown, crash, start-up and statement-timeout codes (classes 08 and 53 are tested by prefix). */
const UNAVAILABLE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EPIPE", "57P01", "57P02", "57P03", "57014"]);
/** What node-postgres and its pool throw, without a code, when a connection cannot be had or is gone. */
const UNAVAILABLE_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed)/;

/** The longest a statement may run on PostgreSQL (D33); a migration has no limit. */
export const STATEMENT_TIMEOUT_MS = 30_000;

/** Omit over each member of a union (the built-in Omit merges them). */
type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

/**
 * A flat array of strings, numbers, booleans and nulls as PostgreSQL's array literal, the text pg would
 * send for it, made with less work: pg quotes every element and runs two replaces on each (the delivery
 * engine's outcomes go as eight arrays of up to 128 a statement: in a profile of sustained delivery, pg's
 * conversion was 3.6% of the event loop's busy time, this 1.4%). Anything else is left to pg.
 */
function arrayLiteral(value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  let literal = "{";
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    if (i > 0) literal += ",";
    if (v === null || v === undefined) literal += "NULL";
    else if (typeof v === "string") literal += `"${v.includes("\\") || v.includes('"') ? v.replace(/[\\"]/g, "\\$&") : v}"`;
    else if (typeof v === "number" || typeof v === "bigint" || typeof v === "boolean") literal += String(v);
    else return value;
  }
  return literal + "}";
}

/**
 * `onConnectionLost` hears of a pooled connection that ended while idle (a restart, a failover,
 * `pg_terminate_backend`, an idle timeout): the pool drops it and opens another on the next query;
 * unheard, pg-pool's error event would end the process.
 */
export async function openPostgres(connectionString: string, onConnectionLost: (error: Error) => void = () => undefined): Promise<Db> {
  const pool = new pg.Pool({ connectionString, max: 10, keepAlive: true, connectionTimeoutMillis: 10_000, statement_timeout: STATEMENT_TIMEOUT_MS });
  pool.on("error", onConnectionLost);
  let liveness: pg.Client | undefined;
  let closing = false;
  /**
   * The liveness session, with its lock on `key`. Lost (a restart, a failover, an idle timeout), the lock
   * is released and other servers would take this one's claims as a dead process's: it is opened again
   * and the same key taken again, retried every second until it is or the store closes.
   */
  const holdLiveness = async (key: number): Promise<boolean> => {
    if (closing) return true;
    const client = new pg.Client({ connectionString, keepAlive: true });
    client.on("error", () => undefined);
    let rows: { ok: boolean }[];
    try {
      await client.connect();
      ({ rows } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1, $2) AS ok", [LIVENESS_LOCKS, key]));
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (!rows[0]!.ok || closing) {
      await client.end();
      return closing;
    }
    liveness = client;
    client.once("end", () => {
      if (closing) return;
      onConnectionLost(new Error(`the liveness session of pg-${key} ended: taking its lock again`));
      const retake = () => void holdLiveness(key).then((held) => held || setTimeout(retake, 1000).unref(), () => setTimeout(retake, 1000).unref());
      retake();
    });
    return true;
  };
  /** Statements on the pool or on one of its connections, their errors marked as the store's. */
  const queryOn =
    (on: pg.Pool | pg.PoolClient) =>
    async <R>(sql: string, params?: unknown[]) => ({ rows: (await on.query(sql, params?.map(arrayLiteral)).catch(rethrowFromStore)).rows as R[] });
  const query = queryOn(pool);
  return {
    query,
    async transaction(fn) {
      const client = await pool.connect().catch(rethrowFromStore);
      // A connection the pool has lent out has no listener of the pool's: one that ends between two
      // statements (a restart, pg_terminate_backend) would emit an error nobody hears and end the
      // process. Heard here, its next statement fails instead, and it is released as broken.
      let lost: Error | undefined;
      const onLost = (error: Error) => {
        lost = error;
        onConnectionLost(error);
      };
      client.on("error", onLost);
      const onClient = queryOn(client);
      try {
        await onClient("BEGIN");
        const result = await fn({ query: onClient });
        await onClient("COMMIT");
        return result;
      } catch (error) {
        // A connection that is gone cannot roll back (PostgreSQL did): the first error is the one to tell.
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        client.removeListener("error", onLost);
        client.release(lost);
      }
    },
    exclusive: false,
    async claimOwner() {
      // The owner's name is a lock key held by a session of its own for as long as the process lives:
      // PostgreSQL releases it when the connection ends, a kill -9 included.
      for (;;) {
        const key = 1 + Math.floor(Math.random() * (2 ** 31 - 2));
        if (await holdLiveness(key)) return `pg-${key}`;
      }
    },
    async handBackOrphans(owner) {
      const { rows } = await pool.query<{ n: number }>(
        // SKIP LOCKED: another server handing back (or claiming) the same orphans at once takes the rows
        // it locked; waiting for them instead deadlocked two hand-backs that locked them in other orders.
        `WITH orphans AS (
           SELECT id FROM attempts
           WHERE state = 'in_flight' AND claimed_by LIKE 'pg-%' AND claimed_by <> $1 AND NOT EXISTS (
             SELECT 1 FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $2 AND l.objsubid = 2
               AND l.objid = substring(claimed_by FROM 4)::bigint::oid
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
           FOR UPDATE SKIP LOCKED),
         back AS (
           UPDATE attempts SET state = 'pending', claimed_by = NULL
           WHERE id = ANY(ARRAY(SELECT id FROM orphans)) AND state = 'in_flight'
           RETURNING 1)
         SELECT count(*)::int AS n FROM back`,
        [owner, LIVENESS_LOCKS],
      );
      return rows[0]!.n;
    },
    async close() {
      closing = true;
      await pool.end();
      await liveness?.end();
    },
  };
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tokens (
  token_hash text PRIMARY KEY,
  client_id text NOT NULL,
  scopes text NOT NULL,
  expires_at bigint NOT NULL
);
-- The order tokens were issued in: the bound on live tokens drops the oldest (DECISIONS D32).
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS issued bigserial;
CREATE INDEX IF NOT EXISTS tokens_client ON tokens (client_id, issued);
CREATE SEQUENCE IF NOT EXISTS ids START 100000001;
CREATE TABLE IF NOT EXISTS webhooks (
  id text PRIMARY KEY,
  client_id text NOT NULL,
  url text NOT NULL,
  events text NOT NULL,
  business_id text NOT NULL,
  secret text NOT NULL,
  status text NOT NULL DEFAULT 'enabled',
  consecutive_failures integer NOT NULL DEFAULT 0,
  created_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS webhooks_business ON webhooks (business_id);
-- Which client owns which business (DECISIONS D27), from the configuration at each start: events are
-- queued only for webhooks of the business's owner, whatever was registered before.
CREATE TABLE IF NOT EXISTS business_owners (
  business_id text PRIMARY KEY,
  client_id text NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
  id text PRIMARY KEY,
  client_id text NOT NULL,
  body text NOT NULL,
  created_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS leads (
  id text PRIMARY KEY,
  request_id text NOT NULL,
  business_id text NOT NULL,
  status text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
-- The open leads by when they expire (D19): each pass of the delivery loop asks which are due and
-- when the next one is. Without it each pass read every lead: with 100k leads on the embedded store,
-- 17 and 46 ms of its thread per pass, against 1 and 4 ms.
CREATE INDEX IF NOT EXISTS leads_open_expiry ON leads (expires_at) WHERE status IN ('new', 'responded');
CREATE TABLE IF NOT EXISTS events (
  id text PRIMARY KEY,
  name text NOT NULL,
  business_id text NOT NULL,
  body text NOT NULL,
  created_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
  id bigserial PRIMARY KEY,
  event_id text NOT NULL,
  webhook_id text NOT NULL,
  attempt integer NOT NULL,
  due_at bigint NOT NULL,
  state text NOT NULL DEFAULT 'pending',
  status integer,
  error text,
  finished_at bigint,
  -- The process that claimed it, and when in real milliseconds (a lease: see delivery.ts).
  claimed_by text,
  claimed_at bigint
);
-- No unique index on (event_id, webhook_id, attempt): each attempt's row is rewritten twice (claimed,
-- recorded), and each rewrite took an entry in it (on the embedded store 15-20 µs of the database's
-- CPU per delivery, a tenth of it). An attempt is queued once by construction: first attempts by the
-- statement that stores their event (its id is the events table's key), a retry by the statement
-- that records its attempt's failure, which finds that attempt claimed by its recorder once (D7).
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_event_id_webhook_id_attempt_key;
-- Partial indexes only: an attempt's row is rewritten when it is claimed and when its outcome is
-- recorded, and each index that holds every row takes an entry on each rewrite (on the embedded store,
-- a large part of a delivery's cost). attempts_due and attempts_webhook_recorded held every row.
DROP INDEX IF EXISTS attempts_due;
DROP INDEX IF EXISTS attempts_webhook_recorded;
-- When the next attempt falls due.
CREATE INDEX IF NOT EXISTS attempts_pending_due ON attempts (due_at) WHERE state = 'pending';
-- What a claim reads: each webhook's earliest pending attempts, and claims left by a process that died.
CREATE INDEX IF NOT EXISTS attempts_pending_by_webhook ON attempts (webhook_id, due_at) WHERE state = 'pending';
-- Planned as if each webhook were on 20 attempts, whatever the statistics say. Where a few webhooks hold
-- the pending attempts (one with a backlog, the others idle), the planner took a claim's webhook_id =
-- w.id to match nearly every row and probed each webhook through attempts_pending_due, reading the
-- whole backlog once per webhook: 2 s a claim for 1,000 webhooks and a backlog of 3,000.
ALTER TABLE attempts ALTER COLUMN webhook_id SET (n_distinct = -0.05);
CREATE INDEX IF NOT EXISTS attempts_in_flight ON attempts (claimed_at) WHERE state = 'in_flight';
-- The order in which outcomes were recorded: the order "in a row" follows (DECISIONS D7).
CREATE SEQUENCE IF NOT EXISTS outcome_order;
ALTER TABLE attempts ADD COLUMN IF NOT EXISTS recorded_seq bigint;
-- The last failure of a webhook (its disable e-mail).
CREATE INDEX IF NOT EXISTS attempts_webhook_failed ON attempts (webhook_id, recorded_seq) WHERE state = 'failed';
CREATE TABLE IF NOT EXISTS notifications (
  webhook_id text PRIMARY KEY,
  client_id text,
  created_at bigint NOT NULL,
  sent_at bigint,
  claimed_by text,
  claimed_at bigint
);
ALTER TABLE notifications ADD COLUMN IF NOT EXISTS client_id text;
ALTER TABLE notifications DROP COLUMN IF EXISTS recipient;
ALTER TABLE notifications ADD COLUMN IF NOT EXISTS send_failures int NOT NULL DEFAULT 0;
`;

/**
 * The two ways a process holds the attempts it claimed (D41), each with its own record and claim
 * functions made from one text. Written: the claim marks them in flight, with the process's name and
 * when (a lease another server takes over once it runs out); the outcome is recorded where the claim
 * is still the process's. In memory (a store only this process uses): the claim only reads them, and
 * the process says which it holds (p_held): a claim leaves those out, a disabling leaves those
 * pending to be recorded as they end, and an outcome is recorded where its attempt is still pending.
 * On the embedded store, writing a claim (its row lock and rewrite) was about 17 µs of a claimed attempt's
 * 41 on the database's thread; held in memory, `serve` used 139-151 µs of CPU per delivery against 150-155
 * (sustained, 3 pairs alternated: docs/benchmarks.md).
 */
interface ClaimsHeld {
  inMemory: boolean;
  claim: string;
  record: string;
  /** The functions' last parameter, where the process names the attempts it holds. */
  heldParam: string;
  /** The test that an attempt's claim is still the process's, of the row named by `row` ("t." or ""), the process named by `owner`. */
  mine: (row: string, owner: string) => string;
  /** A condition leaving out the attempts the process holds, by their `id` column, after AND. */
  notHeld: (id: string) => string;
}
/** After AND: `id` is none of the ids of the array `ids`. NOT IN a subquery: hashed once per statement (<> ALL compared each row with every id). */
const notAmong = (id: string, ids: string) => ` AND ${id} NOT IN (SELECT unnest(${ids}))`;
const CLAIMS_WRITTEN: ClaimsHeld = {
  inMemory: false,
  claim: "claim_due_attempts",
  record: "record_batch_outcomes",
  heldParam: "",
  mine: (row, owner) => `${row}state || '' = 'in_flight' AND ${row}claimed_by = ${owner}`,
  notHeld: () => "",
};
const CLAIMS_IN_MEMORY: ClaimsHeld = {
  inMemory: true,
  claim: "claim_held_attempts",
  record: "record_held_outcomes",
  heldParam: ", p_held bigint[]",
  mine: (row) => `${row}state || '' = 'pending'`,
  notHeld: (id) => notAmong(id, "p_held"),
};
/** How a process claims attempts and records their outcomes on a store, as the store holds claims (D41). */
export interface ClaimCalls {
  /** Claims are held in the process's memory (PartsContext.held), not written: each call's last parameter is the ids held. */
  inMemory: boolean;
  /** The claim (its rows: each claimed webhook's, id null, then the attempts); parameters: clock now, owner, real now, the oldest live lease's real time, limit, per webhook, busy webhooks[, held]. */
  claim: string;
  /** The record (rows: place, ended); parameters: the outcomes' attempts, webhooks, ok, cancelled, status, error, ended at, retry at; owner, threshold[, held]. */
  record: string;
  /** The test (plain SQL, of an attempts row) that an attempt's claim is still the process's, named by the placeholder `owner` (unused held in memory). */
  mine: (owner: string) => string;
}
const callsOf = (held: ClaimsHeld): ClaimCalls => {
  const placeholders = (n: number) => Array.from({ length: n + (held.inMemory ? 1 : 0) }, (_, i) => `$${i + 1}`).join(", ");
  return {
    inMemory: held.inMemory,
    // Named functions: each statement's plan is made once per connection, not per call.
    claim: `SELECT * FROM ${held.claim}(${placeholders(7)})`,
    record: `SELECT place, ended FROM ${held.record}(${placeholders(10)})`,
    mine: (owner) => held.mine("", owner),
  };
};
const CALLS = { written: callsOf(CLAIMS_WRITTEN), inMemory: callsOf(CLAIMS_IN_MEMORY) };
/** How claims are made and recorded on `db` (D41): held in memory on a store only this process uses, written otherwise. */
export const claimCalls = (db: Pick<Db, "exclusive">): ClaimCalls => (db.exclusive ? CALLS.inMemory : CALLS.written);

/**
 * Records attempt outcomes in the order given, each atomically with what it causes (DECISIONS D7):
 * a success resets the webhook's consecutive-failure counter, a failure increments it and either
 * queues the retry (at the time given) or, at the threshold, disables the webhook, cancels its
 * pending attempts and queues the e-mail. The batch's webhooks are locked first, in id order, so
 * two servers recording at once serialize per webhook and never deadlock. An attempt no longer
 * claimed by this server (its lease was taken over) is left alone: 'stale'.
 * A run of successes in a row of the batch is recorded by two statements, not two per outcome (on
 * the embedded store the per-outcome statements were most of a delivery's database time): within a
 * run the order does not change any counter, so their places in the recorded order (recorded_seq)
 * may come in any order among themselves, always after what precedes the run and before what follows.
 * It answers a row for each outcome not recorded as succeeded (stale, failed, disabled, cancelled),
 * with the outcome's place in the arrays (1-based; an attempt may appear twice, made again after its
 * lease lapsed): a row per succeeded outcome, nearly all of them, cost the embedded store 12-14 µs of
 * its thread's CPU per outcome (64 against 77, 40 a statement). It has a name of its own because its
 * rows changed: record_outcomes, its earlier form, stays in databases made before, for servers of the
 * earlier version still running on the same PostgreSQL while others are upgraded.
 * "state || '' = ..." (here and in claim_due_attempts) is the state test no partial index can answer:
 * with "state = 'in_flight'" the planner read every in-flight row through attempts_in_flight and
 * filtered them by id, instead of probing the primary key per id (measured on PostgreSQL with 3,000
 * attempts: the database's CPU for recording 73–97 µs per outcome before, 40–47 after).
 */
const recordOutcomes = (held: ClaimsHeld) => `
CREATE OR REPLACE FUNCTION ${held.record}(
  p_attempts bigint[], p_webhooks text[], p_ok boolean[], p_cancelled boolean[], p_status integer[],
  p_error text[], p_ended_at bigint[], p_retry_at bigint[], p_owner text, p_threshold integer${held.heldParam})
RETURNS TABLE (place integer, ended text) LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  i integer := 1;
  j integer;
  n integer := coalesce(array_length(p_attempts, 1), 0);
  run bigint[];
  done bigint[];
  a attempts%ROWTYPE;
  w webhooks%ROWTYPE;
BEGIN
  PERFORM 1 FROM webhooks WHERE id = ANY(p_webhooks) ORDER BY id FOR UPDATE;
  WHILE i <= n LOOP
    IF p_ok[i] AND NOT p_cancelled[i] THEN
      j := i;
      WHILE j < n AND p_ok[j + 1] AND NOT p_cancelled[j + 1] LOOP j := j + 1; END LOOP;
      run := p_attempts[i:j];
      -- = ANY: a probe of the primary key per id, whatever the planner's statistics.
      WITH recorded AS (
        UPDATE attempts t SET state = 'succeeded', status = p_status[i - 1 + array_position(run, t.id)],
            error = p_error[i - 1 + array_position(run, t.id)], finished_at = p_ended_at[i - 1 + array_position(run, t.id)],
            claimed_by = NULL, recorded_seq = nextval('outcome_order')
          WHERE t.id = ANY(run) AND ${held.mine("t.", "p_owner")}
          RETURNING t.id, t.webhook_id),
      reset AS (
        UPDATE webhooks SET consecutive_failures = 0
          WHERE id IN (SELECT webhook_id FROM recorded) AND status = 'enabled' AND consecutive_failures <> 0)
      SELECT coalesce(array_agg(id), '{}') INTO done FROM recorded;
      IF cardinality(done) < j - i + 1 THEN
        FOR k IN i .. j LOOP
          CONTINUE WHEN p_attempts[k] = ANY(done);
          place := k;
          ended := 'stale';
          RETURN NEXT;
        END LOOP;
      END IF;
      i := j + 1;
      CONTINUE;
    END IF;
    place := i;
    UPDATE attempts SET
        state = CASE WHEN p_cancelled[i] THEN 'cancelled' WHEN p_ok[i] THEN 'succeeded' ELSE 'failed' END,
        status = p_status[i], error = p_error[i], finished_at = p_ended_at[i], claimed_by = NULL,
        recorded_seq = CASE WHEN p_cancelled[i] THEN NULL ELSE nextval('outcome_order') END
      WHERE id = p_attempts[i] AND ${held.mine("", "p_owner")}
      RETURNING * INTO a;
    IF NOT FOUND THEN
      ended := 'stale';
    ELSIF p_cancelled[i] THEN
      ended := 'cancelled';
    ELSE
      SELECT * INTO w FROM webhooks WHERE id = a.webhook_id;
      IF NOT FOUND OR w.status <> 'enabled' THEN
        ended := CASE WHEN p_ok[i] THEN 'succeeded' ELSE 'failed' END;
      ELSIF w.consecutive_failures + 1 >= p_threshold THEN
        UPDATE webhooks SET consecutive_failures = w.consecutive_failures + 1, status = 'disabled' WHERE id = w.id;
        UPDATE attempts SET state = 'cancelled' WHERE webhook_id = w.id AND state = 'pending'${held.notHeld("id")};
        INSERT INTO notifications (webhook_id, client_id, created_at) VALUES (w.id, w.client_id, p_ended_at[i])
          ON CONFLICT DO NOTHING;
        ended := 'disabled';
      ELSE
        UPDATE webhooks SET consecutive_failures = w.consecutive_failures + 1 WHERE id = w.id;
        IF p_retry_at[i] IS NOT NULL THEN
          INSERT INTO attempts (event_id, webhook_id, attempt, due_at)
            VALUES (a.event_id, a.webhook_id, a.attempt + 1, p_retry_at[i]);
        END IF;
        ended := 'failed';
      END IF;
    END IF;
    RETURN NEXT;
    i := i + 1;
  END LOOP;
END $$`;

/**
 * The enabled webhooks of each business by the events they take and their client, kept by triggers on
 * webhooks (for whichever server writes them): an event is queued by one index range of its business,
 * name and owner, not by reading each webhook of its business and parsing its events. With 1,000
 * webhooks of one business taking another event, that read cost each event queued about 2 ms on the
 * embedded store (bench `delivery`, end to end: 0.30x with none, 0.10x with them).
 */
const SUBSCRIPTIONS = [
  `CREATE TABLE IF NOT EXISTS subscriptions (
  business_id text NOT NULL,
  event text NOT NULL,
  client_id text NOT NULL,
  webhook_id text NOT NULL,
  PRIMARY KEY (business_id, event, client_id, webhook_id)
)`,
  // events is a JSON array of names.
  `CREATE OR REPLACE FUNCTION webhook_subscriptions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    DELETE FROM subscriptions
    WHERE business_id = OLD.business_id AND event IN (SELECT jsonb_array_elements_text(OLD.events::jsonb)) AND client_id = OLD.client_id AND webhook_id = OLD.id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'enabled' THEN
    INSERT INTO subscriptions SELECT DISTINCT NEW.business_id, jsonb_array_elements_text(NEW.events::jsonb), NEW.client_id, NEW.id ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END $$`,
];
/** The triggers that keep subscriptions, by name. */
const SUBSCRIPTION_TRIGGERS: Record<string, string> = {
  webhooks_inserted: "AFTER INSERT ON webhooks FOR EACH ROW",
  webhooks_deleted: "AFTER DELETE ON webhooks FOR EACH ROW",
  // Not on each failure counted (consecutive_failures): only when what an event is queued by changes.
  webhooks_changed: `AFTER UPDATE OF business_id, events, client_id, status ON webhooks FOR EACH ROW
  WHEN (OLD.business_id IS DISTINCT FROM NEW.business_id OR OLD.events IS DISTINCT FROM NEW.events
    OR OLD.client_id IS DISTINCT FROM NEW.client_id OR OLD.status IS DISTINCT FROM NEW.status)`,
};
/**
 * The subscriptions of webhooks written while the triggers were not all there (before they existed):
 * run only then, as it reads and parses every webhook (2.3 s a start for 100k on the embedded store).
 */
const ADD_MISSING_SUBSCRIPTIONS = `
INSERT INTO subscriptions SELECT DISTINCT business_id, jsonb_array_elements_text(events::jsonb), client_id, id FROM webhooks WHERE status = 'enabled'
ON CONFLICT DO NOTHING`;

/**
 * Stores events and queues their first attempts for the subscribed, enabled webhooks of each
 * business's owner (D8, D27) in one statement: on the embedded store a statement costs far more than
 * its rows, and one statement needs no transaction around it. The engine stores the events emitted
 * meanwhile together (engine.ts). Returns how many attempts it queued per event, in the order given.
 */
const STORE_EVENTS = `
CREATE OR REPLACE FUNCTION store_events(p_ids text[], p_names text[], p_businesses text[], p_bodies text[], p_at bigint[])
RETURNS integer[] LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  counts integer[];
BEGIN
  INSERT INTO events (id, name, business_id, body, created_at) SELECT * FROM unnest(p_ids, p_names, p_businesses, p_bodies, p_at);
  WITH queued AS (
    INSERT INTO attempts (event_id, webhook_id, attempt, due_at)
    SELECT e.id, s.webhook_id, 1, e.at FROM unnest(p_ids, p_names, p_businesses, p_at) AS e(id, name, business, at)
      -- Enabled ones only (subscriptions holds no other), of the business owner (D27): one partner's
      -- events never reach another. The owner as a subquery, so that all three are the index's
      -- condition whatever the statistics: joined, it was planned (from an empty table's) to read every
      -- subscription of the business and owner, then keep the event's.
      JOIN subscriptions s ON s.business_id = e.business AND s.event = e.name
        AND s.client_id = (SELECT o.client_id FROM business_owners o WHERE o.business_id = e.business)
    RETURNING event_id),
  per_event AS (SELECT event_id, count(*)::int AS n FROM queued GROUP BY event_id)
  SELECT array_agg(coalesce(q.n, 0) ORDER BY e.i) INTO counts
    FROM unnest(p_ids) WITH ORDINALITY AS e(id, i) LEFT JOIN per_event q ON q.event_id = e.id;
  RETURN counts;
END $$`;

/**
 * The webhooks with pending attempts, when fewer than p_fewer_than (else NULL): one index descent each,
 * a skip scan of attempts_pending_by_webhook, never a read of a webhook's backlog.
 */
const PENDING_WEBHOOKS = `
CREATE OR REPLACE FUNCTION pending_webhooks(p_fewer_than integer) RETURNS text[]
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  seen text[];
BEGIN
  WITH RECURSIVE hooks(webhook_id) AS (
    (SELECT webhook_id FROM attempts WHERE state = 'pending' ORDER BY webhook_id LIMIT 1)
    UNION ALL
    SELECT (SELECT a.webhook_id FROM attempts a WHERE a.state = 'pending' AND a.webhook_id > h.webhook_id ORDER BY a.webhook_id LIMIT 1)
    FROM hooks h WHERE h.webhook_id IS NOT NULL)
  SELECT ARRAY(SELECT webhook_id FROM hooks WHERE webhook_id IS NOT NULL LIMIT p_fewer_than) INTO seen;
  RETURN CASE WHEN cardinality(seen) < p_fewer_than THEN seen END;
END $$`;

/**
 * Claims at most p_limit attempts that are due (at most p_per_webhook of each webhook, none of the
 * webhooks in p_busy: D40) or were left claimed past their lease by a process that died, with what
 * they need. Held in memory (claim_held_attempts, D41), it only reads the due attempts, those held
 * (p_held) left out, and takes no claim left by another process (the store has none: a starting server
 * hands back what an earlier version left in flight). A function so that its plan is made once per connection: planning the statement took
 * about as long as running it on the embedded store, for every claim.
 * The functions run with enable_seqscan off: a plan kept for the connection may have been made from
 * an empty table's statistics (after an ANALYZE at start), where a scan of attempts per webhook
 * looked cheapest; under a 100k backlog that claim kept the database busy for minutes.
 * The claimed webhooks come first, a row each (id NULL: url, secret, status), then the attempts in
 * order (id, webhook_id, attempt, body, due_at): a webhook's columns once per webhook, not once per attempt,
 * cost the embedded store's thread 8 µs less per attempt (the join and the columns' encoding).
 * It has a name of its own because its rows changed: claim_attempts, their earlier form, stays in
 * databases made before, for servers of the earlier version still running on the same PostgreSQL
 * while others are upgraded (it would read the new rows as attempts without a webhook, and cancel them).
 */
const claimAttempts = (held: ClaimsHeld) => `
CREATE OR REPLACE FUNCTION ${held.claim}(
  p_now bigint, p_owner text, p_real_now bigint, p_lease_before bigint, p_limit integer, p_per_webhook integer, p_busy text[]${held.heldParam})
RETURNS TABLE (id bigint, webhook_id text, attempt integer, body text, url text, secret text, webhook_status text, due_at bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
  chosen bigint[];
  scanned integer;
  registered real := (SELECT reltuples FROM pg_class WHERE oid = 'webhooks'::regclass);
  pending text[];
BEGIN
  -- Which due attempts to take: the p_limit earliest of each webhook's p_per_webhook earliest, busy
  -- webhooks left out. Where many webhooks could fill the claim (more than twice p_limit besides the
  -- busy ones, by the table's statistics), first from the 4 * p_limit earliest due attempts of all: a
  -- webhook's earliest are the first of it in that order, so when those give p_limit (or are all that is
  -- due) they are the same attempts, for one index scan instead of a probe per webhook (1,000 webhooks
  -- with a backlog of 100k on the embedded store: 10-14 against 25-32 ms a claim of 115). Not where
  -- at most p_limit / p_per_webhook webhooks have pending attempts: that read could at best just fill
  -- it, and probing those few costs less (a lone busy webhook among 1,000 idle ones: the read was 2 ms
  -- of a claim of 64, for nothing).
  IF registered - cardinality(p_busy) > 2 * p_limit THEN
    pending := pending_webhooks(p_limit / greatest(p_per_webhook, 1) + 1);
    IF pending IS NULL THEN
      WITH earliest AS MATERIALIZED (
        SELECT id, webhook_id, due_at FROM attempts WHERE state = 'pending' AND due_at <= p_now${held.notHeld("id")} ORDER BY due_at LIMIT 4 * p_limit)
      SELECT (SELECT count(*) FROM earliest), ARRAY(
        SELECT id FROM (
          SELECT id, due_at, row_number() OVER (PARTITION BY webhook_id ORDER BY due_at, id) AS nth
          FROM earliest WHERE webhook_id NOT IN (SELECT unnest(p_busy))) ranked
        WHERE nth <= p_per_webhook ORDER BY due_at, id LIMIT p_limit)
      INTO scanned, chosen;
      -- Fewer, with more due than were read: a few webhooks' backlogs came first; probe instead.
      IF cardinality(chosen) < p_limit AND scanned = 4 * p_limit THEN chosen := NULL; END IF;
    END IF;
  END IF;
  -- A probe per webhook of its earliest (never a scan of the backlog), so one webhook's backlog cannot
  -- fill a claim: where 128 or more are registered, of each webhook with pending attempts while they
  -- are fewer than a quarter of those registered (a probe costs about as much as the descent that finds
  -- a webhook; a lone busy webhook among 1,000 idle ones: 2 descents and a probe, not 1,000 probes),
  -- else of each one registered (fewer take about 1 ms a claim to probe; 20 at 20 origins, all busy,
  -- cost 21 descents a claim more for nothing).
  -- NOT IN a subquery: a hash of the busy webhooks; <> ALL(p_busy) compared each webhook with each
  -- busy one (the plan is generic, so the array is not hashed): 13 of a claim's 28 ms on the embedded
  -- store with 1,000 webhooks, 256 of them busy. p_busy holds no NULL (webhook ids).
  IF chosen IS NULL THEN
    pending := coalesce(pending, CASE WHEN registered >= 128 THEN pending_webhooks((registered / 4)::integer) END, ARRAY(SELECT id FROM webhooks));
    chosen := ARRAY(
      SELECT a.id FROM unnest(pending) AS w(id) CROSS JOIN LATERAL (
        SELECT id, due_at FROM attempts
        WHERE webhook_id = w.id AND state = 'pending' AND due_at <= p_now${held.notHeld("id")}
        ORDER BY due_at LIMIT p_per_webhook) a
      WHERE w.id NOT IN (SELECT unnest(p_busy))
      ORDER BY a.due_at LIMIT p_limit);
  END IF;
  RETURN QUERY
  WITH ${held.inMemory ? PICKED : CLAIMED}
  -- Webhooks and events by key, one probe each, whatever the statistics: a plan made while events was
  -- empty joined it by hash, reading every event for each claim until the next ANALYZE.
  SELECT NULL::bigint AS id, w.id AS webhook_id, NULL, NULL, w.url, w.secret, w.status, NULL::bigint AS due_at
  FROM webhooks w WHERE w.id = ANY(ARRAY(SELECT DISTINCT webhook_id FROM claimed))
  UNION ALL
  SELECT c.id, c.webhook_id, c.attempt, (SELECT e.body FROM events e WHERE e.id = c.event_id), NULL, NULL, NULL, c.due_at FROM claimed c
  -- The webhooks' rows first, then the attempts, earliest due first.
  ORDER BY due_at NULLS FIRST, id;
END $$`;

/** The claim's attempts, written as claimed (the shared store's way: leases, D41). */
const CLAIMED = `
  -- Orphaned claims come first.
  orphaned AS (
    SELECT id, 0 AS k, due_at FROM attempts WHERE state = 'in_flight' AND claimed_at < p_lease_before
    ORDER BY claimed_at LIMIT p_limit FOR UPDATE SKIP LOCKED),
  -- Only the attempts chosen are locked, and those still pending (another server may have claimed
  -- them since): locking inside the per-webhook probe locked every webhook's share, 32,000 rows a
  -- claim for 1,000 webhooks with a backlog, to take 256. state || '': by primary key, not by reading
  -- every pending attempt through attempts_pending_by_webhook (the whole backlog, for each claim).
  due AS (
    SELECT id, 1 AS k, due_at FROM attempts WHERE id = ANY(chosen) AND state || '' = 'pending'
    FOR UPDATE SKIP LOCKED),
  claimed AS (
    -- = ANY(ARRAY(...)): a probe of the primary key per claimed id, whatever the planner's statistics
    -- (the embedded store has no autovacuum to gather them: IN (...) scanned the whole table).
    UPDATE attempts SET state = 'in_flight', claimed_by = p_owner, claimed_at = p_real_now WHERE id = ANY(ARRAY(
      SELECT id FROM (SELECT * FROM orphaned UNION ALL SELECT * FROM due) picked ORDER BY k, due_at LIMIT p_limit))
    RETURNING id, event_id, webhook_id, attempt, due_at)`;
/** The claim's attempts, only read: the process holds them in memory (the exclusive store's way, D41). */
const PICKED = `claimed AS (
    SELECT id, event_id, webhook_id, attempt, due_at FROM attempts WHERE id = ANY(chosen) AND state || '' = 'pending')`;

/**
 * A webhook's secret as the webhooks table holds it. PostgreSQL's text holds no U+0000, which a secret
 * may have (D2: any code point): such a secret is kept as the base64 of its UTF-8 bytes after 257 "=",
 * longer than any secret as sent (256 code points at most), so that no secret is ever read as encoded.
 * Every other secret is kept as it is, as servers of earlier versions keep and read it.
 */
const ENCODED_SECRET = "=".repeat(257);
export const storedSecret = (secret: string): string => (secret.includes("\0") ? ENCODED_SECRET + Buffer.from(secret, "utf8").toString("base64") : secret);
export const secretFromStore = (stored: string): string =>
  stored.length > 256 && stored.startsWith(ENCODED_SECRET) ? Buffer.from(stored.slice(ENCODED_SECRET.length), "base64").toString("utf8") : stored;

/**
 * What each pass of the delivery loop asks of the leads and the queue (D19): which open leads are due
 * (expired, each with the status it had), and when the next attempt or lead falls due after $1, the
 * attempts of $2 left out (claims held in memory, D41: pending in the store, and due already). Both read
 * the open leads through leads_open_expiry.
 */
export const EXPIRE_DUE_LEADS = `
UPDATE leads SET status = 'expired' FROM (
  SELECT id, status FROM leads WHERE expires_at <= $1 AND status IN ('new', 'responded') FOR UPDATE SKIP LOCKED) AS previous
WHERE leads.id = previous.id
RETURNING leads.id, leads.business_id, previous.status AS previous_status, leads.created_at, leads.expires_at`;
export const NEXT_DUE_AT = `
SELECT LEAST(
  (SELECT MIN(due_at) FROM attempts WHERE state = 'pending' AND due_at > $1${notAmong("id", "$2::bigint[]")}),
  (SELECT MIN(expires_at) FROM leads WHERE status IN ('new', 'responded') AND expires_at > $1)) AS at`;

/** What servers starting together on one database take turns on (migrations, the owners). */
const START_LOCK = "SELECT pg_advisory_xact_lock(20261122)";

/** Creates what is missing; servers starting together on one database take turns (an advisory lock). */
export async function migrate(db: Db): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("SET LOCAL statement_timeout = 0");
    await tx.query(START_LOCK);
    for (const statement of SCHEMA.split(";").map((s) => s.trim()).filter(Boolean)) await tx.query(statement);
    const { rows: triggers } = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid = 'webhooks'::regclass AND tgname = ANY($1)", [
      Object.keys(SUBSCRIPTION_TRIGGERS),
    ]);
    for (const statement of SUBSCRIPTIONS) await tx.query(statement);
    for (const [name, when] of Object.entries(SUBSCRIPTION_TRIGGERS)) await tx.query(`CREATE OR REPLACE TRIGGER ${name} ${when} EXECUTE FUNCTION webhook_subscriptions()`);
    if (triggers[0]!.n < Object.keys(SUBSCRIPTION_TRIGGERS).length) await tx.query(ADD_MISSING_SUBSCRIPTIONS);
    await tx.query(PENDING_WEBHOOKS);
    for (const held of [CLAIMS_WRITTEN, CLAIMS_IN_MEMORY]) {
      await tx.query(recordOutcomes(held));
      await tx.query(claimAttempts(held));
    }
    await tx.query(STORE_EVENTS);
  });
}

/** A business whose owner a start changed (D27): `from` or `to` is absent where it had or has none. */
export interface OwnerChange {
  businessId: string;
  from?: string;
  to?: string;
}

/**
 * Records the configuration's business owners (D27), replacing what an earlier start recorded, and
 * says what changed. Servers starting together take turns, so the second finds the first's rows
 * rather than inserting them again.
 */
export async function recordOwners(db: Db, clients: { clientId: string; businessIDs: string[] }[]): Promise<OwnerChange[]> {
  return db.transaction(async (tx) => {
    await tx.query(START_LOCK);
    const { rows } = await tx.query<{ business_id: string; client_id: string }>("SELECT business_id, client_id FROM business_owners");
    const before = new Map(rows.map((r) => [r.business_id, r.client_id]));
    const after = new Map(clients.flatMap((c) => c.businessIDs.map((b) => [b, c.clientId] as const)));
    const changes = [...new Set([...before.keys(), ...after.keys()])]
      .filter((b) => before.get(b) !== after.get(b))
      .sort()
      .map((businessId) => ({ businessId, ...(before.has(businessId) ? { from: before.get(businessId) } : {}), ...(after.has(businessId) ? { to: after.get(businessId) } : {}) }));
    if (changes.length > 0) {
      await tx.query("DELETE FROM business_owners");
      await tx.query("INSERT INTO business_owners (business_id, client_id) SELECT * FROM unnest($1::text[], $2::text[])", [[...after.keys()], [...after.values()]]);
    }
    return changes;
  });
}

/** A new numeric identifier, carried as a string (DECISIONS D14). */
export async function nextId(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string }>("SELECT nextval('ids')::text AS id");
  return rows[0]!.id;
}
