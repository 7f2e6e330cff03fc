// A claim is a lease (engine.ts): one older than the lease is taken over as a dead process's. A live
// server renews its own, so an attempt that waits (for its webhook's share of a busy origin, D40) or lasts
// longer than the lease is not taken over and made a second time by the same or another server.
// Real time on purpose: the lease is about processes, so it runs on the real clock in every mode.
import { expect, it } from "vitest";
import { loadConformanceRules } from "../../src/spec.js";
import { register, virtualServers } from "./helpers.js";

const start = virtualServers(() => ({}));

it("makes an attempt that outlasts its claim's lease once", async () => {
  const scale = 0.001;
  const timeoutMs = loadConformanceRules().scaledClock.attemptTimeoutFloorRealSeconds * 1000;
  const leaseMs = 3 * timeoutMs + 10_000; // src/server/index.ts
  const sent: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const server = await start({
    clock: { mode: "scaled", scale },
    parts: () => ({
      // The first attempt holds past the lease (as one queued behind hanging neighbours would).
      async send(_url, body) {
        sent.push(JSON.parse(body.toString()).id as string);
        if (sent.length === 1) await released;
        return { status: 204, timedOut: false };
      },
    }),
  });
  await register(server, "https://127.0.0.1:9/lease", ["review.created"]);
  const review = (id: string) => ({ reviewID: id, businessID: "4711", rating: 5, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });
  await server.engine.emit("review.created", "4711", review("1"));
  await expect.poll(() => sent.length, { timeout: 10_000 }).toBe(1);
  await new Promise((resolve) => setTimeout(resolve, leaseMs + 1_000));
  // A new event makes the server claim again, after the first claim's lease ran out.
  await server.engine.emit("review.created", "4711", review("2"));
  await expect.poll(() => sent.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
  release();
  const open = async () => (await server.db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts WHERE state IN ('pending', 'in_flight')")).rows[0]!.n;
  await expect.poll(open, { timeout: 10_000 }).toBe(0);
  expect(sent).toEqual([...new Set(sent)]);
  expect(sent).toHaveLength(2);
}, 60_000);
