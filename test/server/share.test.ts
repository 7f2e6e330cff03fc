// The share of an origin's connections (D40, src/server/delivery/share.ts), driven with attempts that
// end only when the test ends them: how many of each webhook are under way at every step.
import { describe, expect, it } from "vitest";
import { originShares } from "../../src/server/delivery/share.js";

const ORIGIN = "https://receiver.example:443";

function harness() {
  const shares = originShares({ connectionsPerOrigin: 32, maxPerWebhook: 16 });
  const underWay = new Map<string, (() => void)[]>();
  /** Queues `n` attempts of `webhook` that stay under way until ended. */
  const add = (webhook: string, n: number) => {
    for (let i = 0; i < n; i++) {
      void shares.run(ORIGIN, webhook, () => new Promise<void>((end) => underWay.set(webhook, [...(underWay.get(webhook) ?? []), end])));
    }
  };
  /** Ends the `n` oldest attempts of `webhook` under way. */
  const end = (webhook: string, n: number) => underWay.get(webhook)!.splice(0, n).forEach((e) => e());
  const count = (webhook: string) => underWay.get(webhook)?.length ?? 0;
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  return { shares, add, end, count, settle };
}

describe("a webhook's share of its origin's connections (D40)", () => {
  it("gives a lone webhook the per-webhook maximum, and n webhooks floor(32 / (n + 1)) each, one share held back", async () => {
    const h = harness();
    h.add("a", 40);
    await h.settle();
    expect(h.count("a")).toBe(16);
    // Arriving together (one claim), three webhooks get 8 each: 8 of the 32 stay free for a fourth.
    const t = harness();
    for (const w of ["a", "b", "c"]) t.add(w, 40);
    await t.settle();
    expect(["a", "b", "c"].map(t.count)).toEqual([8, 8, 8]);
    expect(t.shares.shareOf("a")).toBe(8);
  });

  it("gives a webhook that arrives beside hanging ones its share at once", async () => {
    const h = harness();
    for (const w of ["hang-1", "hang-2"]) h.add(w, 40);
    await h.settle();
    expect([h.count("hang-1"), h.count("hang-2")]).toEqual([10, 10]);
    // A third webhook: shares fall to 8, and 12 connections are free, so it makes 8 at once.
    h.add("ok", 40);
    await h.settle();
    expect(h.count("ok")).toBe(8);
    // Its attempts end and are replaced by its own; the hanging ones get nothing more while above their share.
    h.end("ok", 8);
    await h.settle();
    expect([h.count("hang-1"), h.count("hang-2"), h.count("ok")]).toEqual([10, 10, 8]);
    // A hanging attempt that ends (its timeout) is not replaced until its webhook is below its new share.
    h.end("hang-1", 2);
    await h.settle();
    expect(h.count("hang-1")).toBe(8);
    h.end("hang-1", 1);
    await h.settle();
    expect(h.count("hang-1")).toBe(8);
  });

  it("gives a newcomer what is free when earlier webhooks still hold more than their new shares, and its share as their attempts end", async () => {
    const h = harness();
    h.add("hang-1", 40);
    await h.settle();
    h.add("hang-2", 40);
    await h.settle();
    // hang-1 took 16 alone; hang-2 then 10 (shares of two): 6 free.
    expect([h.count("hang-1"), h.count("hang-2")]).toEqual([16, 10]);
    h.add("ok", 40);
    await h.settle();
    expect(h.count("ok")).toBe(6);
    // The first of hang-1's attempts to end (within one attempt timeout) gives ok the rest of its share.
    h.end("hang-1", 2);
    await h.settle();
    expect([h.count("hang-1"), h.count("ok")]).toEqual([14, 8]);
  });

  it("forgets a webhook with nothing waiting or under way: the others' shares grow back", async () => {
    const h = harness();
    h.add("a", 40);
    h.add("b", 5);
    await h.settle();
    expect([h.count("a"), h.count("b")]).toEqual([10, 5]);
    h.end("b", 5);
    await h.settle();
    expect(h.count("a")).toBe(16);
    expect(h.shares.shareOf("b")).toBe(16);
  });
});
