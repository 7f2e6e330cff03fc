import { describe, expect, it } from "vitest";
import type { ClaimedAttempt } from "../../src/server/delivery/parts.js";
import { createPlaces } from "../../src/server/delivery/places.js";
import { WantedTimes } from "../../src/server/delivery/wakeups.js";

// The engine's bounds on its claims (D40, D44), with the server's defaults: 256 places, 32 connections
// per origin, 16 attempts per webhook at once.
const defaults = { maxInFlight: 256, connectionsPerOrigin: 32, maxInFlightPerWebhook: 16 };

function places() {
  let rooms = 0;
  const p = createPlaces({ ...defaults, onRoom: () => rooms++ });
  /** Attempts that hold their connection until `end` is called. */
  const hold = (webhookId: string, n: number, url = "https://receiver.example:8443/hooks") => {
    const ends: (() => void)[] = [];
    for (let i = 0; i < n; i++) void p.admit(webhookId, url, () => new Promise<void>((resolve) => ends.push(resolve)));
    return ends;
  };
  return { p, hold, rooms: () => rooms };
}

const claimed = (...webhookIds: string[]): ClaimedAttempt[] =>
  webhookIds.map((webhookId, i) => ({ id: String(i), webhookId, attempt: 1, url: null, secret: null, webhookStatus: null, body: null }));

describe("the server's places in flight (D44)", () => {
  it("lets a claim with no webhook holding claims take half of every place, 64 of one webhook", () => {
    const { p } = places();
    expect(p.nextClaim()).toEqual({ busy: [], perWebhook: 64, limit: 128 });
    expect(p.roomForClaim()).toBe(true);
  });

  it("leaves a lone webhook out once it holds more than twice its share (32), and asks for a claim when it can take more", async () => {
    const { p, hold, rooms } = places();
    const ends = hold("w1", 33);
    expect(p.nextClaim().busy).toEqual(["w1"]);
    // Its share of the origin (16) admitted a turn later.
    await new Promise((resolve) => setImmediate(resolve));
    expect(ends).toHaveLength(16);
    expect(rooms()).toBe(0);
    ends[0]!();
    // The attempt's end is seen a few turns later (the share's admission and the attempt's own promise).
    await new Promise((resolve) => setImmediate(resolve));
    expect(p.isBusy("w1")).toBe(false);
    expect(rooms()).toBe(1);
  });

  it("keeps floor(256 / (n + 2)) places free and shares the rest: two webhooks, 75 each at most", () => {
    const { p, hold } = places();
    hold("w1", 10, "https://a.example/hooks");
    hold("w2", 10, "https://b.example/hooks");
    for (let i = 0; i < 20; i++) p.started();
    // 256 - 20 under way - floor(256 / 4) kept free; half of floor(256 / 3) of one webhook.
    expect(p.nextClaim()).toEqual({ busy: [], perWebhook: 43, limit: 172 });
    // 43 claimed: more than twice its share, and another claim of 43 would overfill its 85 places.
    hold("w1", 33, "https://a.example/hooks");
    expect(p.nextClaim().busy).toEqual(["w1"]);
  });

  it("says there is room for a claim only with a batch's room (64) free, and asks for a claim when there is", () => {
    const { p, rooms } = places();
    for (let i = 0; i < 193; i++) p.started();
    expect(p.roomForClaim()).toBe(false);
    p.ended();
    expect(p.roomForClaim()).toBe(true);
    expect(rooms()).toBe(1);
    expect(p.underWay).toBe(192);
  });

  it("names the webhooks that may have more due after a claim: those it left out and those it took a full share of", () => {
    const { p } = places();
    const bounds = { busy: ["w9"], perWebhook: 2, limit: 10 };
    expect(p.mayHaveMore(bounds, claimed("w1", "w1", "w2"))).toEqual(["w9", "w1"]);
  });
});

describe("the times the loop was asked to run at", () => {
  it("keeps the earliest, and once it is claimed looks up the next when a later one was asked for", () => {
    const wanted = new WantedTimes();
    wanted.want(20);
    wanted.want(10);
    expect(wanted.at).toBe(10);
    wanted.claimedFor(9);
    expect(wanted.at).toBe(10);
    wanted.claimedFor(10);
    expect(wanted.at).toBe(Infinity);
    expect(wanted.lookUp).toBe(true);
  });

  it("does not look up again when nothing later was asked for", () => {
    const wanted = new WantedTimes();
    wanted.want(10);
    wanted.claimedFor(10);
    expect(wanted.lookUp).toBe(false);
  });

  it("looks up again after a looked-up time is claimed: there may be more after it", () => {
    const wanted = new WantedTimes();
    wanted.lookedUp(30);
    wanted.claimedFor(30);
    expect(wanted.lookUp).toBe(true);
    wanted.reset();
    expect([wanted.at, wanted.lookUp]).toEqual([Infinity, false]);
  });
});
