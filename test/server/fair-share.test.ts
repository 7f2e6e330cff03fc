// A webhook that hangs costs its neighbours on the same host:port only a fair share (D40): it holds at
// most maxInFlightPerWebhook of the origin's connections, and a burst to one healthy webhook is made
// that many at a time, never queued for a connection inside its timeout. Counts only: the attempt
// timeout is far longer than the work, so nothing here depends on the machine's speed.
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
  it("keeps delivering to a webhook while another on the same host:port hangs", async () => {
    // 60 s real attempt timeout: a hanging attempt holds its connection for the whole test.
    const server = await start({ virtualAttemptTimeoutMs: 60_000 });
    receiver.script("fair-hang", [], answers.hang);
    receiver.script("fair-ok", [], answers.ok);
    await register(server, receiver.url("fair-hang"), ["review.created"]);
    await register(server, receiver.url("fair-ok"), ["review.created"]);
    const events = 40;
    for (let i = 0; i < events; i++) expect((await control(server).trigger("review.created", "4711")).body.queuedFor).toBe(2);
    const advancing = control(server).advance(0).catch(() => undefined);
    // Every attempt to the healthy webhook is made and answered while the other's attempts hang.
    await receiver.waitFor(
      (d) => d.filter((x) => x.endpoint === "fair-ok" && x.answeredAt !== undefined).length === events && d.filter((x) => x.endpoint === "fair-hang").length >= PER_WEBHOOK,
      30_000,
      `${events} answered deliveries to fair-ok beside ${PER_WEBHOOK} hanging ones`,
    );
    // The hanging webhook holds exactly its share: no more of its attempts were started.
    expect(receiver.at("fair-hang")).toHaveLength(PER_WEBHOOK);
    const { rows } = await server.db.query<{ state: string; n: number }>(
      "SELECT a.state, count(*)::int AS n FROM attempts a JOIN webhooks w ON w.id = a.webhook_id WHERE w.url = $1 GROUP BY a.state",
      [receiver.url("fair-ok")],
    );
    // Recorded too (the advance waits on the hanging ones, not on these).
    await expect.poll(async () => (await server.db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts WHERE state = 'succeeded'")).rows[0]!.n, { timeout: 30_000 }).toBe(events);
    expect(rows.every((r) => r.state === "succeeded" || r.state === "in_flight")).toBe(true);
    await start.close(server);
    await advancing;
  });

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
