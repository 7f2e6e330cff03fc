// The reference server's storage: one set of PostgreSQL statements, run by PGlite (embedded, the
// default: no server needed) or by a PostgreSQL server (DATABASE_URL). Webhooks, tokens, requests,
// leads, events and pending attempts all live here, so a restart loses nothing.
import { existsSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";

export interface Queryable {
  query<R>(sql: string, params?: unknown[]): Promise<{ rows: R[] }>;
}

export interface Db extends Queryable {
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A fresh cluster of the embedded database, kept from the first one made: creating one (initdb) takes seconds, loading a copy well under one. */
let freshCluster: Promise<Blob> | undefined;

/** `dataDir` persists the embedded database; without it, it lives in memory. */
export async function openEmbedded(dataDir?: string): Promise<Db> {
  const isNew = !dataDir || !existsSync(path.join(dataDir, "PG_VERSION"));
  let db: PGlite;
  if (isNew && freshCluster) {
    db = new PGlite(dataDir, { loadDataDir: await freshCluster });
  } else {
    db = new PGlite(dataDir);
    if (isNew) {
      freshCluster = db.waitReady.then(() => db.dumpDataDir("none"));
      freshCluster.catch(() => (freshCluster = undefined));
    }
  }
  await db.waitReady;
  return {
    query: async <R>(sql: string, params?: unknown[]) => ({ rows: (await db.query<R>(sql, params)).rows }),
    transaction: (fn) => db.transaction((tx) => fn({ query: async <R>(sql: string, params?: unknown[]) => ({ rows: (await tx.query<R>(sql, params)).rows }) })),
    close: () => db.close(),
  };
}

export async function openPostgres(connectionString: string): Promise<Db> {
  const pool = new pg.Pool({ connectionString, max: 10 });
  const query = async <R>(sql: string, params?: unknown[]) => ({ rows: (await pool.query(sql, params)).rows as R[] });
  return {
    query,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const result = await fn({ query: async <R>(sql: string, params?: unknown[]) => ({ rows: (await client.query(sql, params)).rows as R[] }) });
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK");
        throw error;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tokens (
  token_hash text PRIMARY KEY,
  client_id text NOT NULL,
  scopes text NOT NULL,
  expires_at bigint NOT NULL
);
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
  claimed_at bigint,
  UNIQUE (event_id, webhook_id, attempt)
);
CREATE INDEX IF NOT EXISTS attempts_due ON attempts (state, due_at);
CREATE TABLE IF NOT EXISTS notifications (
  webhook_id text PRIMARY KEY,
  recipient text NOT NULL,
  created_at bigint NOT NULL,
  sent_at bigint,
  claimed_by text,
  claimed_at bigint
);
`;

/** Creates what is missing; servers starting together on one database take turns (an advisory lock). */
export async function migrate(db: Db): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(20261122)");
    for (const statement of SCHEMA.split(";").map((s) => s.trim()).filter(Boolean)) await tx.query(statement);
  });
}

/** A new numeric identifier, carried as a string (DECISIONS D14). */
export async function nextId(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string }>("SELECT nextval('ids')::text AS id");
  return rows[0]!.id;
}
