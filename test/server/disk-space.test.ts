// The embedded database short of disk (D33): out of room for a write-ahead log segment, PGlite spun
// forever and every request hung. Below EMBEDDED_MIN_FREE_BYTES the store takes no new work, with
// PostgreSQL's disk_full code (the API answers 503), and takes it again once there is room.
import { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig, startServer } from "../../src/server/index.js";
import { EMBEDDED_MIN_FREE_BYTES, openEmbedded, storeUnavailable, type Db } from "../../src/server/store.js";
import { eventually } from "./helpers.js";

const plenty = 10 * EMBEDDED_MIN_FREE_BYTES;
const short = EMBEDDED_MIN_FREE_BYTES / 4;

/** Runs `attempt` until it settles as `wanted` (the disk is looked at once a second), at most 5 s; what it settled as last. */
const until = (attempt: () => Promise<unknown>, wanted: "fulfilled" | "rejected") =>
  eventually(async () => (await Promise.allSettled([attempt()]))[0]!, (result) => result.status === wanted);

describe("the embedded database short of disk", () => {
  let db: Db | undefined;
  afterEach(async () => {
    await db?.close();
    db = undefined;
  });

  it("does not open, and says how much room it has and needs", async () => {
    await expect(openEmbedded(undefined, { freeBytes: async () => short })).rejects.toThrow(/has 16\.0 MB free, and the embedded database needs 64 MB/);
  });

  it("does not open when the fresh database's copy leaves too little room (it would refuse every request)", async () => {
    let reads = 0;
    await expect(openEmbedded(undefined, { freeBytes: async () => (reads++ === 0 ? EMBEDDED_MIN_FREE_BYTES + 2 ** 20 : short) })).rejects.toThrow(/has 16\.0 MB free/);
    expect(reads).toBe(2);
  });

  it("takes no new work while short (53100, answered 503), neither a statement nor a transaction, and works again once there is room", async () => {
    let free = plenty;
    const logged: string[] = [];
    db = await openEmbedded(undefined, { freeBytes: async () => free, log: (m) => logged.push(m) });
    const open = db;
    await open.query("CREATE TABLE t (n int)");
    free = short;
    const refused = await until(() => open.query("SELECT 1"), "rejected");
    expect(refused.status).toBe("rejected");
    const error = (refused as PromiseRejectedResult).reason as Error & { code: string };
    expect(error.code).toBe("53100");
    expect(storeUnavailable(error)).toBe(true);
    expect(error.message).toMatch(/has 16\.0 MB free, and the embedded database needs 64 MB: it takes no new work until there is room/);
    expect(logged).toEqual([error.message]);
    await expect(open.transaction((tx) => tx.query("INSERT INTO t VALUES (1)"))).rejects.toMatchObject({ code: "53100" });
    free = plenty;
    const back = await until(() => open.transaction((tx) => tx.query("INSERT INTO t VALUES (2)")), "fulfilled");
    expect(back.status).toBe("fulfilled");
    expect((await open.query<{ n: number }>("SELECT n FROM t")).rows).toEqual([{ n: 2 }]);
    expect(logged).toHaveLength(2);
    expect(logged[1]).toMatch(/has room again/);
  });
});

describe("the API while the database cannot serve (D33)", () => {
  it("answers 503 to every request, and logs the outage at error once with its stack, then counts the 503s of each period, not a line and a stack per request", async () => {
    let free = EMBEDDED_MIN_FREE_BYTES * 10;
    const db = await openEmbedded(undefined, { freeBytes: async () => free, log: () => undefined });
    const lines: Record<string, any>[] = [];
    const logStream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split("\n")) if (line) lines.push(JSON.parse(line) as Record<string, any>);
        done();
      },
    });
    const server = await startServer({ db, clock: { mode: "virtual" }, logLevel: "error", logStream, log: () => undefined });
    let refused = 0;
    try {
      const [acme] = loadConfig().clients;
      const token = async () => {
        const { status } = await fetch(`${server.url}/oauth2/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ grant_type: "client_credentials", client_id: acme!.clientId, client_secret: acme!.clientSecret }),
        });
        if (status === 503) refused++;
        return status;
      };
      expect(await token()).toBe(200);
      free = short;
      expect(await eventually(token, (status) => status === 503)).toBe(503);
      const statuses = await Promise.all(Array.from({ length: 30 }, token));
      expect(statuses.every((status) => status === 503)).toBe(true);
    } finally {
      // Handing attempts back needs the database: the stop reports that it could not, and still stops.
      await server.close().catch(() => undefined);
      await db.close();
    }
    const outage = lines.filter((line) => String(line.msg).startsWith("the database is"));
    // The first line with its stack; then lines that count the rest (one, or more should the requests have spanned a 10 s period).
    expect(outage[0]).toMatchObject({ level: 50, msg: "the database is unavailable", err: { code: "53100" } });
    expect(outage[0]!.err.stack).toMatch(/takes no new work/);
    expect(outage.length).toBeGreaterThanOrEqual(2);
    expect(outage.length).toBeLessThan(refused);
    expect(1 + outage.slice(1).reduce((sum, line) => sum + (line.answered503 as number), 0)).toBe(refused);
  });
});
