// Events emitted alone at the same time are stored together (engine.ts, group commit): each caller
// still gets its own event's id and count, every attempt is made once, and an event that cannot be
// stored fails only its own caller.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EventName } from "@partner-platform/sdk";
import { startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import type { PartsOverride } from "../../src/server/delivery/index.js";
import type { ServerOptions } from "../../src/server/index.js";
import { control, envelope, register, storageBackends, virtualServers } from "./helpers.js";

const review = (reviewID: string) => ({ reviewID, businessID: "4711", rating: 5, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });

/** The sizes of the batches parts.queue was given, in order. */
function countingQueue(sizes: number[]): PartsOverride {
  return (base) => ({
    queue(tx, events) {
      sizes.push(events.length);
      return base.queue(tx, events);
    },
  });
}

describe.each(storageBackends())("events emitted together, $name", ({ postgres }) => {
  let receiver: Receiver;
  let pg: TestPostgres | undefined;
  let databases = 0;
  beforeAll(async () => {
    receiver = await startReceiver();
    pg = postgres ? await startTestPostgres() : undefined;
  });
  afterAll(async () => {
    pg?.stop();
    await receiver.close();
  });
  const start = virtualServers(() => ({ webhookCa: receiver.pki.caCert }));
  const server = async (options: ServerOptions = {}) => start({ ...options, ...(pg ? { databaseUrl: await pg.createDatabase(`emit${++databases}`) } : {}) });
  const deliveredIds = (endpoint: string) => receiver.at(endpoint).map((d) => envelope(d.body).id);

  it("answers 200 concurrent triggers each with its own id and count, and makes every attempt once", async () => {
    const s = await server();
    const tag = `concurrent-${postgres ? "pg" : "embedded"}`;
    const a = `${tag}-a`, b = `${tag}-b`, c = `${tag}-c`;
    await register(s, receiver.url(a), ["review.created"]);
    await register(s, receiver.url(b), ["review.created", "lead.created"]);
    await register(s, receiver.url(c), ["lead.created"], "4712");
    // 4711: two subscribed webhooks; 4712: review.created not subscribed, lead.created one; 4713: no webhooks.
    const kinds: { event: EventName; businessID: string; endpoints: string[] }[] = [
      { event: "review.created", businessID: "4711", endpoints: [a, b] },
      { event: "review.created", businessID: "4712", endpoints: [] },
      { event: "review.created", businessID: "4713", endpoints: [] },
      { event: "lead.created", businessID: "4712", endpoints: [c] },
    ];
    const triggered = Array.from({ length: 200 }, (_, i) => kinds[i % kinds.length]!);
    const answers = await Promise.all(triggered.map((k) => control(s).trigger(k.event, k.businessID)));
    for (const [i, answer] of answers.entries()) {
      expect(answer.status).toBe(201);
      expect(answer.body).toMatchObject({ event: triggered[i]!.event, queuedFor: triggered[i]!.endpoints.length });
    }
    expect(new Set(answers.map((r) => r.body.id)).size).toBe(200);
    await control(s).advance(0);
    for (const endpoint of [a, b, c]) {
      const expected = answers.filter((_, i) => triggered[i]!.endpoints.includes(endpoint)).map((r) => r.body.id as string);
      expect(deliveredIds(endpoint).sort()).toEqual(expected.sort());
    }
  });

  it("stores events emitted while a statement is under way together, the first at once, in bounded batches", async () => {
    const sizes: number[] = [];
    const s = await server({ parts: countingQueue(sizes) });
    const endpoint = `batches-${postgres ? "pg" : "embedded"}`;
    await register(s, receiver.url(endpoint), ["review.created"]);
    const stored = await Promise.all(Array.from({ length: 600 }, (_, i) => s.engine.emit("review.created", "4711", review(`r${i}`))));
    expect(sizes).toEqual([1, 256, 256, 87]);
    expect(stored.every((e) => e.queuedFor === 1)).toBe(true);
    await s.engine.advance(0);
    expect(deliveredIds(endpoint).sort()).toEqual(stored.map((e) => e.id).sort());
  });

  it("fails only the event that cannot be stored when its batch fails, and stores the others", async () => {
    const sizes: number[] = [];
    // An event whose id is taken already: the statement storing its batch fails (a duplicate key).
    const duplicate: PartsOverride = (base, ctx) => ({
      ...countingQueue(sizes)(base, ctx),
      envelope(name, data, at) {
        const made = base.envelope(name, data, at);
        return data.reviewID === "dup" ? { id: "evt_duplicate", body: made.body.replace(made.id, "evt_duplicate") } : made;
      },
    });
    const s = await server({ parts: duplicate });
    const endpoint = `failing-${postgres ? "pg" : "embedded"}`;
    await register(s, receiver.url(endpoint), ["review.created"]);
    const first = await s.engine.emit("review.created", "4711", review("dup"));
    const emits = ["1", "2", "3", "4", "5", "dup", "6", "7", "8", "9", "10"].map((id) => s.engine.emit("review.created", "4711", review(id)));
    const settled = await Promise.allSettled(emits);
    // The first alone, then the ten that piled up in one batch, which failed, then each of them alone.
    expect(sizes).toEqual([1, 1, 10, ...Array<number>(10).fill(1)]);
    const rejected = settled.filter((r) => r.status === "rejected");
    expect(rejected).toHaveLength(1);
    expect(String((rejected[0] as PromiseRejectedResult).reason)).toMatch(/duplicate key/);
    expect(settled[5]!.status).toBe("rejected");
    const stored = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    expect(stored.every((e) => e.queuedFor === 1)).toBe(true);
    await s.engine.advance(0);
    expect(deliveredIds(endpoint).sort()).toEqual([first.id, ...stored.map((e) => e.id)].sort());
  });
});
