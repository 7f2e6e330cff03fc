// A hanging receiver does not delay deliveries to others (real time: no clock tricks).
import type { EventName } from "@partner-platform/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa } from "../../conformance/harness/pki.js";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import type { DeliveryParts } from "../../src/server/delivery/index.js";
import { startServer, type RunningServer, type ServerOptions } from "../../src/server/index.js";
import { api, register } from "./helpers.js";

const review = (i: number) => ({ reviewID: String(i), businessID: "4711", rating: 5, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });

/** Queues `count` events in one transaction, so that the first claim finds them all due. */
async function queueTogether(server: RunningServer, name: EventName, count: number, data: (i: number) => Record<string, unknown>) {
  await server.engine.transaction(async (_tx, emit) => {
    for (let i = 0; i < count; i++) await emit(name, "4711", data(i));
  });
}

/**
 * A server whose webhook at /stuck never answers (past any timeout) until `release`, with 100
 * attempts due to it: the run that claimed them waits for it. A webhook at /fails-once answers each
 * event's first attempt with a 500, every other one 204s. `sentTo(path)` lists the deliveries to
 * the webhooks whose URL ends in `path`. `before` runs once the server is up, before the backlog is queued.
 */
async function withStuckBacklog(
  clock: ServerOptions["clock"],
  before: (server: RunningServer) => Promise<unknown>,
  more: { lookAroundMs?: number; retryAt?: DeliveryParts["retryAt"] } = {},
) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const sent: { url: string; id?: string; event?: string }[] = [];
  const sentTo = (path: string) => sent.filter((s) => s.url.endsWith(path));
  const stuck = await startServer({
    clock,
    conformance: true,
    allowPrivateWebhooks: true,
    log: () => undefined,
    lookAroundMs: more.lookAroundMs,
    parts: () => ({
      async send(url, body) {
        const { id, event } = JSON.parse(body.toString()) as { id?: string; event?: string };
        const first = !sent.some((s) => s.url === url && s.id === id);
        sent.push({ url, id, event });
        if (url.endsWith("/stuck")) await released;
        return { status: url.endsWith("/fails-once") && first ? 500 : 204, timedOut: false };
      },
      ...(more.retryAt ? { retryAt: more.retryAt } : {}),
    }),
  });
  await before(stuck);
  await register(stuck, "https://127.0.0.1:10/stuck", ["payment.received"]);
  await queueTogether(stuck, "payment.received", 100, (i) => ({ paymentID: `p-${i}` }));
  await expect.poll(() => sentTo("/stuck").length, { timeout: 5_000 }).toBe(16);
  return {
    server: stuck,
    sentTo,
    async close() {
      release();
      await stuck.close();
    },
  };
}

describe("delivery concurrency", () => {
  let receiver: Receiver;
  /** Receivers of their own: each is another origin (host:port), outside the others' connection shares (D40). */
  let elsewhere: Receiver[];
  let server: RunningServer;
  beforeAll(async () => {
    const ca = await createTestCa();
    receiver = await startReceiver({ ca });
    elsewhere = await Promise.all(Array.from({ length: 4 }, () => startReceiver({ ca })));
    server = await startServer({ clock: { mode: "real" }, conformance: true, allowPrivateWebhooks: true, webhookCa: receiver.pki.caCert, log: () => undefined });
  });
  afterAll(async () => {
    await server.close();
    await Promise.all([receiver, ...elsewhere].map((r) => r.close()));
  });

  it("delivers to a healthy webhook while another one hangs", async () => {
    for (const endpoint of ["hangs", "healthy"]) await register(server, receiver.url(endpoint), ["review.created"]);
    receiver.script("hangs", [answers.hang]);
    await server.engine.emit("review.created", "4711", review(1));
    await receiver.waitFor((d) => d.some((x) => x.endpoint === "hangs"), 5000, "the hanging attempt");
    // Another event while the first attempt still hangs: the attempt timeout (10 s) is twice the time
    // allowed below, so a blocked engine cannot pass.
    await server.engine.emit("review.created", "4711", review(2));
    await receiver.waitFor((d) => d.filter((x) => x.endpoint === "healthy").length === 2, 5000, "both deliveries to the healthy webhook");
    expect(receiver.at("healthy")).toHaveLength(2);
  });

  it("goes on claiming while a caller waits for its attempts' outcomes (a timing that makes first attempts at once)", async () => {
    // The legal timing 'eager-slow' (conformance/server/timings.ts): a trigger waits for its event's
    // attempts. One that hangs must not hold up the runs after it: they make other events' attempts,
    // and expire leads, at their time.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const sent: string[] = [];
    const eager = await startServer({
      clock: { mode: "real" },
      conformance: true,
      allowPrivateWebhooks: true,
      log: () => undefined,
      parts: () => ({
        timing: { queued: (makeDue) => makeDue() },
        async send(url) {
          sent.push(url);
          if (url.endsWith("/held")) await released;
          return { status: 204, timedOut: false };
        },
      }),
    });
    const to = (path: string) => sent.filter((url) => url.endsWith(path)).length;
    let waiting: Promise<unknown> | undefined;
    try {
      await register(eager, "https://127.0.0.1:10/held", ["payment.received"]);
      await register(eager, "https://127.0.0.1:10/beside-held", ["lead.created"]);
      waiting = eager.engine.emit("payment.received", "4711", { paymentID: "p-held" });
      await expect.poll(() => to("/held"), { timeout: 5_000 }).toBe(1);
      // Not awaited: this caller waits for its own attempt, which the held one must not delay.
      void eager.engine.emit("lead.created", "4711", { leadID: "l-beside" });
      await expect.poll(() => to("/beside-held"), { timeout: 5_000 }).toBe(1);
    } finally {
      release();
      await waiting;
      await eager.close();
    }
  });

  it("delivers new events to others while a webhook hangs with more due than it may claim", async () => {
    // More due than the stuck webhook may hold claimed (D40): the run that claimed them waits for it to
    // take more, and claims the events that come meanwhile.
    const stuck = await withStuckBacklog({ mode: "real" }, (server) => register(server, "https://127.0.0.1:9/beside-stuck", ["lead.created"]));
    try {
      for (let i = 0; i < 5; i++) await stuck.server.engine.emit("lead.created", "4711", { leadID: `l-${i}` });
      await expect.poll(() => stuck.sentTo("/beside-stuck").length, { timeout: 5_000 }).toBe(5);
    } finally {
      await stuck.close();
    }
  });

  it("keeps claims for a new webhook while webhooks on four other hosts hang with a backlog (D44)", async () => {
    // Each hanging webhook has far more due than it can make at once; before D44 they claimed 64 each,
    // the server's whole 256, and a webhook whose events came next waited for their attempt timeouts.
    for (const [i, r] of elsewhere.entries()) {
      r.script(`backlog-${i}`, [], answers.hang);
      await register(server, r.url(`backlog-${i}`), ["booking.cancelled"], "4711");
    }
    const booking = { businessID: "4711", cancelledBy: "customer", cancelledAt: "2026-11-22T14:00:00Z" };
    await queueTogether(server, "booking.cancelled", 100, (i) => ({ ...booking, bookingID: `b-${i}` }));
    // Every hanging webhook makes its share (16 alone at its host) at once; the claims beyond it wait.
    for (const [i, r] of elsewhere.entries()) await r.waitFor((d) => d.filter((x) => x.endpoint === `backlog-${i}`).length === 16, 5000, `16 attempts to backlog-${i}`);
    await register(server, receiver.url("newcomer"), ["review.created"]);
    for (let i = 0; i < 20; i++) await server.engine.emit("review.created", "4711", review(100 + i));
    // Well within the hanging attempts' 10 s timeout: claims for the newcomer did not wait for them.
    await receiver.waitFor((d) => d.filter((x) => x.endpoint === "newcomer").length === 20, 5000, "20 deliveries to the newcomer");
    expect(server.engine.claimed()).toBeLessThan(256);
  });

  it("expires leads while a run waits for a webhook with a backlog (scaled clock, D44)", async () => {
    const scale = 0.001;
    const stuck = await withStuckBacklog({ mode: "scaled", scale }, async (server) => {
      await register(server, "https://127.0.0.1:9/leads", ["lead.expired"]);
      const customer = { name: "Jane Doe", email: "jane@example.com", phone: "+12125550143" };
      expect((await api(server).POST("/api/v4/requests", { body: { categoryID: "1000123", zipCode: "10001", customer } })).response.status).toBe(201);
    });
    try {
      // The lead falls due in 1 s of real time rather than 7 days of the clock's (D19).
      await stuck.server.db.query("UPDATE leads SET expires_at = $1", [stuck.server.clock.now() + 1_000 / scale]);
      await expect.poll(() => stuck.sentTo("/leads").map((s) => s.event), { timeout: 10_000 }).toEqual(["lead.expired"]);
    } finally {
      await stuck.close();
    }
  });

  it("makes each retry at its time while a run waits for a webhook with a backlog (D44)", async () => {
    // Two retries asked for while the run waits: it wakes for the earlier, and the later, not kept
    // meanwhile, is looked up once the earlier is claimed. The run looks around once a minute here,
    // so a retry left to that look would come a minute late.
    const waitsMs = [300, 1_500];
    let failures = 0;
    const stuck = await withStuckBacklog({ mode: "real" }, (server) => register(server, "https://127.0.0.1:9/fails-once", ["review.created"]), {
      lookAroundMs: 60_000,
      retryAt: (failure) => failure.endedAt + waitsMs[failures++ % 2]!,
    });
    try {
      await queueTogether(stuck.server, "review.created", 2, review);
      await expect.poll(() => stuck.sentTo("/fails-once").length, { timeout: 10_000 }).toBe(4);
      expect(failures).toBe(2);
    } finally {
      await stuck.close();
    }
  });

  it("hands back a dead server's claims while a run waits for a webhook with a backlog (D41, D44)", async () => {
    const stuck = await withStuckBacklog({ mode: "real" }, async () => undefined);
    try {
      // An attempt claimed by a server that has died since: its claim is young, only the hand-back frees it.
      const { server } = stuck;
      const webhookId = await register(server, "https://127.0.0.1:9/handed-back", ["review.created"]);
      await server.db.query("INSERT INTO events (id, name, business_id, body, created_at) VALUES ('evt_handedback01', 'review.created', '4711', '{}', $1)", [Date.now()]);
      await server.db.query(
        "INSERT INTO attempts (event_id, webhook_id, attempt, due_at, state, claimed_by, claimed_at) VALUES ('evt_handedback01', $1, 1, $2, 'in_flight', 'a-server-that-died', $3)",
        [webhookId, server.clock.now(), Date.now()],
      );
      // Checked every 5 s (D41), also by a run that waits.
      await expect.poll(() => stuck.sentTo("/handed-back").length, { timeout: 10_000 }).toBe(1);
    } finally {
      await stuck.close();
    }
  });
});
