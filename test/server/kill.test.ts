// Durability across kill -9 (D4, D41): `partner-platform serve`, in a process of its own, is killed with
// SIGKILL in the middle of a burst and started again. Every event whose trigger was acknowledged reaches
// the receiver (0 lost); an attempt cut off by the kill is made again with the same event id, and
// promptly: on PostgreSQL the claim written for it is handed back at start instead of waiting out its
// lease; the embedded store's claims are held in memory (D41), so it is still pending there. On
// PostgreSQL a second server keeps running beside the killed one and nothing but the cut-off attempts
// is made twice.
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Delivery, type Receiver } from "../../conformance/harness/receiver.js";
import { startServe } from "../../scripts/bench/lib/procs.js";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { client, envelope, storageBackends } from "./helpers.js";

type Serve = Awaited<ReturnType<typeof startServe>>;

async function registerAt(server: string, url: string): Promise<void> {
  const form = new URLSearchParams({ grant_type: "client_credentials", client_id: client.clientId, client_secret: client.clientSecret, scope: "webhooks::write" });
  const token = (await (await fetch(`${server}/oauth2/token`, { method: "POST", body: form })).json()) as { access_token: string };
  const r = await fetch(`${server}/api/v2/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token.access_token}` },
    body: JSON.stringify({ url, events: ["review.created"], businessID: "4711", secret: "whsec-kill-0123456789" }),
  });
  if (r.status !== 201) throw new Error(`registration: ${r.status} ${await r.text()}`);
}

/**
 * The local ports of process `pid`'s TCP connections to `port`, read from Linux's /proc (the process
 * stopped, so that it opens none meanwhile); undefined where there is no /proc.
 */
function portsConnectedTo(pid: number, port: number): Set<number> | undefined {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return undefined;
  }
  const inodes = new Set(fds.flatMap((fd) => /^socket:\[(\d+)\]$/.exec(safeReadlink(`/proc/${pid}/fd/${fd}`))?.[1] ?? []));
  const ports = new Set<number>();
  for (const table of ["tcp", "tcp6"]) {
    // "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode", addresses as HEX:PORT.
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, "utf8").split("\n").slice(1)) {
      const [, local, remote, , , , , , , inode] = line.trim().split(/\s+/);
      if (!local || !remote || !inode || !inodes.has(inode)) continue;
      if (parseInt(remote.split(":")[1]!, 16) === port) ports.add(parseInt(local.split(":")[1]!, 16));
    }
  }
  return ports;
}

function safeReadlink(file: string): string {
  try {
    return readlinkSync(file);
  } catch {
    return ""; // closed meanwhile
  }
}

/** Triggers events, `inFlight` at a time, until stopped or the server is gone; returns the ids acknowledged with 201. */
function burst(server: string, inFlight: number) {
  const acknowledged: string[] = [];
  let stop = false;
  const done = Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (!stop) {
        try {
          const r = await fetch(`${server}/conformance/events`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ event: "review.created", businessID: "4711" }) });
          if (r.status === 201) acknowledged.push(((await r.json()) as { id: string }).id);
        } catch {
          return; // the server was killed
        }
      }
    }),
  );
  return { acknowledged, stop: async () => ((stop = true), await done) };
}

describe.each(storageBackends())("kill -9 during a burst, $name storage", ({ postgres }) => {
  let receiver: Receiver;
  let dir: string;
  let pg: TestPostgres | undefined;
  beforeAll(async () => {
    receiver = await startReceiver();
    dir = await mkdtemp(path.join(tmpdir(), "kill-"));
    writeFileSync(path.join(dir, "ca.pem"), receiver.pki.caCert);
    pg = postgres ? await startTestPostgres() : undefined;
  });
  afterAll(async () => {
    await receiver.close();
    pg?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("loses no acknowledged event and makes the attempts cut off by the kill again, with the same id", async () => {
    const endpoint = `kill-${postgres ? "pg" : "embedded"}`;
    // Answers take 100 ms, so that attempts are in flight when the kill comes.
    receiver.respond(endpoint, () => new Promise((resolve) => setTimeout(() => resolve(answers.ok), 100)));
    const storage = pg ? ["--database-url", await pg.createDatabase("kill")] : ["--data-dir", path.join(dir, "data")];
    const args = ["--port", "0", "--conformance", "--webhook-ca", path.join(dir, "ca.pem"), ...storage];
    const servers: Serve[] = [];
    try {
      const victim = await startServe(args);
      servers.push(victim);
      if (pg) servers.push(await startServe(args)); // the neighbour that keeps running
      await registerAt(victim.url, receiver.url(endpoint));
      const load = burst(victim.url, 16);
      await receiver.waitFor((d) => d.filter((x) => x.endpoint === endpoint).length >= 100, 60_000, "100 deliveries before the kill");
      // Stopped first, so that the connections it sent on can be told from the others' (below).
      victim.child.kill("SIGSTOP");
      const killedAt = performance.now();
      const victimPorts = portsConnectedTo(victim.child.pid!, Number(new URL(receiver.url(endpoint)).port));
      victim.child.kill("SIGKILL");
      await new Promise((resolve) => victim.child.once("exit", resolve));
      await load.stop();
      const restartedAt = performance.now();
      const restarted = await startServe(args);
      servers.push(restarted);
      const acknowledged = new Set(load.acknowledged);
      expect(acknowledged.size).toBeGreaterThanOrEqual(100);
      await receiver.waitFor(
        (d) => {
          const seen = new Set(d.filter((x) => x.endpoint === endpoint).map((x) => envelope(x.body).id));
          return [...acknowledged].every((id) => seen.has(id));
        },
        90_000,
        `every one of ${acknowledged.size} acknowledged events at the receiver`,
      );
      // Made by the victim: what had arrived before the kill, and what came on one of its connections
      // (a request it sent just before its death may be read by this busy process well after it). Without
      // /proc, a connection closed before the restart stands in for the victim's.
      const byVictim = (d: Delivery) =>
        d.arrivedAt <= killedAt ||
        (victimPorts ? d.connectedAt <= killedAt && victimPorts.has(d.remotePort) : (d.connectionClosedAt ?? Infinity) <= restartedAt);
      const madeByVictim = new Set(receiver.at(endpoint).filter(byVictim).map((d) => envelope(d.body).id));
      const ids = receiver.at(endpoint).map((d) => envelope(d.body).id);
      // Made twice: only attempts that had reached the receiver before the kill (cut off, made again).
      const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
      expect(twice.filter((id) => !madeByVictim.has(id))).toEqual([]);
      // One server: it had attempts in flight (answers take 100 ms), and they were made again. On
      // PostgreSQL the neighbour may have been making all of them at the moment of the kill.
      if (!pg) expect(twice.length).toBeGreaterThan(0);
      // Claims written (PostgreSQL): handed back at once, not after the lease, by the restarted server or
      // by the neighbour. Held in memory (embedded), there was no claim in the store to hand back.
      const handedBack = servers.some((s) => /attempts left in flight by a stopped process are queued again/.test(s.stderr()));
      expect(handedBack).toBe(pg !== undefined);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  }, 240_000);
});
