// PostgreSQL ending the server's pooled connections (a restart, a failover, pg_terminate_backend, an
// idle timeout) is survived: the pool drops them and the next request opens others. Unheard, pg-pool's
// error event for an idle connection ended the process. While the database cannot be reached, the API
// answers 503 with Retry-After (D33), not 500.
import net from "node:net";
import { once } from "node:events";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import { fromStore, openPostgres, STATEMENT_TIMEOUT_MS, storeUnavailable } from "../../src/server/store.js";
import { eventually, storageBackends } from "./helpers.js";

const hasPostgres = storageBackends().some((b) => b.postgres);
const [acme] = loadConfig().clients;

describe.skipIf(!hasPostgres)("PostgreSQL connections lost while idle or lent to a transaction", () => {
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
    expect(await eventually(() => token().catch(() => 0), (status) => status === 200)).toBe(200);
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
    expect(await eventually(locks, (held) => held === 1)).toBe(1);
  });

  it("fails a transaction whose connection ends between two of its statements, not the process", async () => {
    const lost: Error[] = [];
    const db = await openPostgres(url, (error) => void lost.push(error));
    try {
      const outcome = await db
        .transaction(async (tx) => {
          const { rows } = await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
          const admin = new pg.Client({ connectionString: url });
          await admin.connect();
          await admin.query("SELECT pg_terminate_backend($1)", [rows[0]!.pid]).finally(() => admin.end());
          // Nothing of the connection under way when its end arrives: unheard, that error ended the process.
          await eventually(async () => lost.length, (n) => n > 0);
          return tx.query("SELECT 1");
        })
        .then(
          () => "committed",
          () => "failed",
        );
      expect({ outcome, heard: lost.length > 0 }).toEqual({ outcome: "failed", heard: true });
      expect((await db.query<{ n: number }>("SELECT 1 AS n")).rows).toEqual([{ n: 1 }]);
    } finally {
      await db.close();
    }
  });
});

/** A TCP relay to PostgreSQL that can be cut (the port refuses, open connections end) and restored on the same port. */
async function cuttableRelay(target: URL) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined).on("close", () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    async cut() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sockets) s.destroy();
      await closed;
    },
    async restore() {
      server.listen(port, "127.0.0.1");
      await once(server, "listening");
    },
  };
}

describe.skipIf(!hasPostgres)("PostgreSQL unreachable", () => {
  let postgres: TestPostgres;
  let server: RunningServer;
  let relay: Awaited<ReturnType<typeof cuttableRelay>>;
  beforeAll(async () => {
    postgres = await startTestPostgres();
    const direct = new URL(await postgres.createDatabase("unreachable"));
    relay = await cuttableRelay(direct);
    const url = new URL(direct);
    url.port = String(relay.port);
    server = await startServer({ databaseUrl: url.href, clock: { mode: "virtual" }, conformance: true, log: () => undefined });
  }, 60_000);
  afterAll(async () => {
    await relay?.restore().catch(() => undefined);
    await server?.close();
    postgres?.stop();
  });

  const tokenRequest = () =>
    fetch(`${server.url}/oauth2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "client_credentials", client_id: acme!.clientId, client_secret: acme!.clientSecret }),
    });

  it("answers 503 problem+json with Retry-After while the database cannot be reached, and serves again once it can", async () => {
    expect((await tokenRequest()).status).toBe(200);
    await relay.cut();
    const refused = await tokenRequest();
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect(refused.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(await refused.json()).toMatchObject({ type: "about:blank", title: "Service Unavailable", status: 503 });
    const trigger = await fetch(`${server.url}/conformance/events`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ event: "review.created", businessID: "4711" }) });
    expect(trigger.status).toBe(503);
    await relay.restore();
    expect((await tokenRequest()).status).toBe(200);
  });

  it(`runs each statement with a time limit of ${STATEMENT_TIMEOUT_MS / 1000} s, so a statement stuck on a lock answers 503 instead of holding its request`, async () => {
    const { rows } = await server.db.query<{ statement_timeout: string }>("SHOW statement_timeout");
    expect(rows[0]!.statement_timeout).toBe(`${STATEMENT_TIMEOUT_MS / 1000}s`);
  });
});

describe("what counts as the database being unavailable (D33)", () => {
  it.each([
    ["a refused connection", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }), true],
    ["a connection that ended", new Error("Connection terminated unexpectedly"), true],
    ["the pool's connect timeout", new Error("timeout exceeded when trying to connect"), true],
    ["a full disk (53100)", Object.assign(new Error('could not extend file "base/5/16398": No space left on device'), { code: "53100" }), true],
    ["too many connections (53300)", Object.assign(new Error("sorry, too many clients already"), { code: "53300" }), true],
    ["an administrator's shutdown (57P01)", Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }), true],
    ["a statement timeout (57014)", Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" }), true],
    ["a unique violation (23505)", Object.assign(new Error("duplicate key value"), { code: "23505" }), false],
    ["a syntax error (42601)", Object.assign(new Error("syntax error"), { code: "42601" }), false],
    ["a programming error", new TypeError("Cannot read properties of undefined"), false],
  ])("%s", (_name, error, unavailable) => {
    expect(storeUnavailable(fromStore(error))).toBe(unavailable);
  });

  it("names a database that cannot be used at start by its URL, every password in it masked", async () => {
    const start = startServer({ databaseUrl: "postgres://partner:pw-one@127.0.0.1:1/db?password=pw-two&sslpassword=pw-three", log: () => undefined });
    const error = await start.then(() => undefined, (e: Error) => e);
    expect(error?.message).toMatch(/^cannot use the PostgreSQL database of --database-url \(postgres:\/\/partner:\*\*\*@127\.0\.0\.1:1\/db\?password=\*\*\*&sslpassword=\*\*\*\): .*ECONNREFUSED/);
    expect(error?.message).not.toMatch(/pw-/);
  });

  it("only what a store call threw: a client's own reset connection (ECONNRESET, 'aborted') is not the database", () => {
    expect(storeUnavailable(Object.assign(new Error("aborted"), { code: "ECONNRESET", statusCode: 400 }))).toBe(false);
  });
});
