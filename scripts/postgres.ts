// A throwaway PostgreSQL server for tests: initdb into a temporary folder and start it on a free
// port of 127.0.0.1 (as the postgres user when running as root, which PostgreSQL refuses to be).
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";

export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const version = readdirSync(root).sort((a, b) => Number(b) - Number(a))[0];
  const dir = version ? path.join(root, version, "bin") : undefined;
  return dir && existsSync(path.join(dir, "initdb")) ? dir : undefined;
}


export interface TestPostgres {
  url: string;
  /** A fresh, empty database on the server. */
  createDatabase(name: string): Promise<string>;
  stop(): void;
}

export async function startTestPostgres(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL is not installed (scripts/install-system-deps.sh installs it)");
  const dir = mkdtempSync(path.join(tmpdir(), "pg-test-"));
  const asRoot = userInfo().uid === 0;
  const run = (cmd: string, args: string[]) =>
    asRoot
      ? execFileSync("su", ["postgres", "-s", "/bin/sh", "-c", [path.join(bin, cmd), ...args].map((a) => `'${a}'`).join(" ")], { stdio: "pipe" })
      : execFileSync(path.join(bin, cmd), args, { stdio: "pipe" });
  if (asRoot) chownSync(dir, Number(execFileSync("id", ["-u", "postgres"]).toString()), Number(execFileSync("id", ["-g", "postgres"]).toString()));
  const data = path.join(dir, "data");
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const port = await freePort();
  run("pg_ctl", ["-D", data, "-l", path.join(dir, "log"), "-w", "-o", `-p ${port} -k ${dir} -h 127.0.0.1 -F`, "start"]);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    async createDatabase(name) {
      const pg = (await import("pg")).default;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`CREATE DATABASE "${name}"`);
      await client.end();
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    stop() {
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
