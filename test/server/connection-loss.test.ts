// PostgreSQL ending the server's pooled connections (a restart, a failover, pg_terminate_backend, an
// idle timeout) is survived: the pool drops them and the next request opens others. Unheard, pg-pool's
// error event for an idle connection ended the process.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import { storageBackends } from "./helpers.js";

const hasPostgres = storageBackends().some((b) => b.postgres);
const [acme] = loadConfig().clients;

describe.skipIf(!hasPostgres)("PostgreSQL connections lost while idle", () => {
  let postgres: TestPostgres;
  let server: RunningServer;
  let url: string;
  beforeAll(async () => {
    postgres = await startTestPostgres();
    url = await postgres.createDatabase("connection_loss");
    server = await startServer({ databaseUrl: url, clock: { mode: "virtual" }, conformance: true, log: () => undefined });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    postgres?.stop();
  });

  /** Reads until it gives `wanted`, at most 50 times 100 ms apart; the last value read. */
  const eventually = async <T>(read: () => Promise<T>, wanted: T): Promise<T> => {
    let value = await read();
    for (let i = 1; i < 50 && value !== wanted; i++) {
      await new Promise((r) => setTimeout(r, 100));
      value = await read();
    }
    return value;
  };

  const token = async () =>
    (
      await fetch(`${server.url}/oauth2/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "client_credentials", client_id: acme!.clientId, client_secret: acme!.clientSecret }),
      })
    ).status;

  it("keeps serving, and takes its liveness lock (D41) again, after every connection of its database is terminated", async () => {
    expect(await token()).toBe(200);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ n: number }>(
        "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      expect(rows[0]!.n).toBeGreaterThan(0);
    } finally {
      await admin.end();
    }
    // The pool hears of each ended connection as it happens; poll until a request gets through again.
    expect(await eventually(() => token().catch(() => 0), 200)).toBe(200);
    // The liveness lock (D41) is taken again: without it other servers would take this one's claims.
    const locks = async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const { rows } = await c.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = 20261123 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())");
        return rows[0]!.n;
      } finally {
        await c.end();
      }
    };
    expect(await eventually(locks, 1)).toBe(1);
  });
});
