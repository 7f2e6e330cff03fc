// The embedded database's folder (--data-dir): a folder that exists (a container's volume is a mount
// point, which cannot be renamed onto) gets its database copied into it, a copy stopped half-way is
// made again, and a database of another PostgreSQL version is named as such.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openEmbedded, type Db } from "../../src/server/store.js";

/** Whether this process may mount a tmpfs (root with the capability, as in CI): the mount point's case needs one. */
function canMount(): boolean {
  const probe = path.join(tmpdir(), `mount-probe-${process.pid}`);
  mkdirSync(probe, { recursive: true });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { stdio: "ignore" });
    execFileSync("umount", [probe], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    execFileSync("rmdir", [probe]);
  }
}
const mountable = canMount();
if (!mountable) console.log("data-dir.test: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): the mount point's case is skipped");

describe("the embedded database's folder", () => {
  let parent: string;
  const opened: Db[] = [];
  beforeEach(async () => {
    parent = await mkdtemp(path.join(tmpdir(), "data-dir-"));
  });
  afterEach(async () => {
    for (const db of opened.splice(0)) await db.close();
    if (existsSync(path.join(parent, "volume"))) execFileSync("sh", ["-c", `umount ${path.join(parent, "volume")} 2>/dev/null || true`]);
    await rm(parent, { recursive: true, force: true });
  });
  const open = async (dir: string) => {
    const db = await openEmbedded(dir);
    opened.push(db);
    return db;
  };

  it.skipIf(!mountable)("holds the database when it is a mount point (a container's volume)", async () => {
    const volume = path.join(parent, "volume");
    mkdirSync(volume);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=200m", "tmpfs", volume]);
    const db = await open(volume);
    expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    expect(existsSync(path.join(volume, "PG_VERSION"))).toBe(true);
  });

  it.each([
    ["a folder whose parent does not exist yet", []],
    ["a folder holding a volume's lost+found", ["lost+found/"]],
    ["a folder holding the lock a dead start left, and the file it wrote it through", ["partner-platform-serve.lock.0b1e", "partner-platform-serve.lock"]],
  ])("opens %s", async (_name, entries) => {
    const dir = path.join(parent, "a", "b");
    for (const entry of entries) {
      const file = path.join(dir, entry);
      mkdirSync(entry.endsWith("/") ? file : path.dirname(file), { recursive: true });
      if (!entry.endsWith("/")) writeFileSync(file, JSON.stringify({ pid: 2 ** 22 + 1, host: "elsewhere", since: "2026-01-01T00:00:00.000Z" }));
    }
    const db = await open(dir);
    expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  it("names the PostgreSQL version of a database another version of the embedded database made (PGlite says only that it failed to start)", async () => {
    const dir = path.join(parent, "data");
    await (await openEmbedded(dir)).close();
    writeFileSync(path.join(dir, "PG_VERSION"), "15\n");
    await expect(openEmbedded(dir)).rejects.toThrow(/holds a database of PostgreSQL 15, and this serve's embedded database is PostgreSQL \d+/);
  });

  it("makes again a copy that stopped half-way (its mark left behind), removing what it had copied", async () => {
    const dir = path.join(parent, "data");
    mkdirSync(path.join(dir, "base"), { recursive: true });
    writeFileSync(path.join(dir, "partner-platform-copying"), "");
    writeFileSync(path.join(dir, "base", "half-copied"), "x");
    const db = await open(dir);
    expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    const entries = await readdir(dir);
    expect(entries).toContain("PG_VERSION");
    expect(entries).not.toContain("partner-platform-copying");
    expect(await readdir(path.join(dir, "base"))).not.toContain("half-copied");
  });
});
