// A webhook that hangs costs its neighbours on the same host:port only a fair share (D40): with n
// webhooks at an origin each may make floor(32 / (n + 1)) attempts at once, so webhooks that hang hold
// only their shares and a healthy neighbour keeps its own — its delivery rate is its share divided by
// its receiver's answer time, whatever the others do. A burst to one healthy webhook is made
// maxInFlightPerWebhook at a time, never queued for a connection inside its timeout. Counts only: the
// attempt timeouts are far longer than the work, so nothing here depends on the machine's speed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { control, register, virtualServers } from "./helpers.js";

const PER_WEBHOOK = 16; // the default (D40)

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

const start = virtualServers(() => ({ webhookCa: receiver.pki.caCert }));

/** The most requests the receiver held open at once at an endpoint (arrived, not yet answered). */
function maxOpen(endpoint: string): number {
  const edges = receiver.at(endpoint).flatMap((d) => [
    { t: d.arrivedAt, open: 1 },
    ...(d.answeredAt === undefined ? [] : [{ t: d.answeredAt, open: -1 }]),
  ]);
  edges.sort((a, b) => a.t - b.t || a.open - b.open);
  let open = 0;
  let max = 0;
  for (const e of edges) max = Math.max(max, (open += e.open));
  return max;
}

describe("fair share of an origin's connections (D40)", () => {
  // The engine before the fair share gave each hanging webhook 16 of the 32 connections: two took all.
  for (const hanging of [1, 2, 3]) {
    it(`keeps a healthy webhook at its fair share while ${hanging} other${hanging > 1 ? "s" : ""} on the same host:port hang`, async () => {
      // 60 s real attempt timeout: a hanging attempt holds its connection for the whole test.
      const server = await start({ virtualAttemptTimeoutMs: 60_000 });
      const hangs = Array.from({ length: hanging }, (_, i) => `fair-${hanging}-hang-${i}`);
      const ok = `fair-${hanging}-ok`;
      // Each answer takes 300 ms: far longer than making a connection, so its share is what bounds it.
      receiver.respond(ok, () => new Promise((resolve) => setTimeout(() => resolve(answers.ok), 300)));
      for (const endpoint of hangs) {
        receiver.script(endpoint, [], answers.hang);
        await register(server, receiver.url(endpoint), ["review.created"]);
      }
      await register(server, receiver.url(ok), ["review.created"]);
      const events = 40;
      for (let i = 0; i < events; i++) expect((await control(server).trigger("review.created", "4711")).body.queuedFor).toBe(hanging + 1);
      const advancing = control(server).advance(0).catch(() => undefined);
      // n = hanging + 1 webhooks at the origin: each may make floor(32 / (n + 1)) attempts at once.
      const share = Math.floor(32 / (hanging + 2));
      await receiver.waitFor(
        (d) => d.filter((x) => x.endpoint === ok && x.answeredAt !== undefined).length === events,
        30_000,
        `${events} answered deliveries to ${ok} beside ${hanging} hanging webhook(s)`,
      );
      // The healthy webhook made its share of attempts at once: its rate is share / 300 ms.
      expect(maxOpen(ok)).toBe(share);
      const lastOk = Math.max(...receiver.at(ok).map((d) => d.arrivedAt));
      for (const endpoint of hangs) {
        // Each hanging webhook held exactly its share meanwhile, and none was answered.
        expect(receiver.at(endpoint).filter((d) => d.arrivedAt <= lastOk)).toHaveLength(share);
        expect(receiver.at(endpoint).every((d) => d.answeredAt === undefined)).toBe(true);
      }
      // Recorded too (the advance waits on the hanging ones, not on these).
      await expect
        .poll(async () => (await server.db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts WHERE state = 'succeeded'")).rows[0]!.n, { timeout: 30_000 })
        .toBe(events);
      await start.close(server);
      await advancing;
    });
  }

  it("makes a burst to one webhook at most maxInFlightPerWebhook at a time, without queueing into timeouts", async () => {
    // A 5 s real attempt timeout; each answer takes 20 ms.
    const server = await start({ virtualAttemptTimeoutMs: 5_000 });
    receiver.respond("fair-burst", () => new Promise((resolve) => setTimeout(() => resolve(answers.ok), 20)));
    await register(server, receiver.url("fair-burst"), ["review.created"]);
    const events = 300;
    for (let i = 0; i < events; i++) await control(server).trigger("review.created", "4711");
    await control(server).advance(0);
    expect(receiver.at("fair-burst")).toHaveLength(events);
    expect(maxOpen("fair-burst")).toBe(PER_WEBHOOK);
    const { rows } = await server.db.query<{ state: string; n: number }>("SELECT state, count(*)::int AS n FROM attempts GROUP BY state");
    expect(rows).toEqual([{ state: "succeeded", n: events }]);
  });
});
