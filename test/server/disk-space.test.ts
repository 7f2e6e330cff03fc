// The embedded database short of disk (D33): out of room for a write-ahead log segment, PGlite spun
// forever and every request hung. Below EMBEDDED_MIN_FREE_BYTES the store takes no new work, with
// PostgreSQL's disk_full code (the API answers 503), and takes it again once there is room.
import { afterEach, describe, expect, it } from "vitest";
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
