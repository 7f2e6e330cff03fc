import { afterEach, describe, expect, it, vi } from "vitest";
import type { ClaimedAttempt, Outcome, Recorded } from "../../src/server/delivery/parts.js";
import { createPlaces } from "../../src/server/delivery/places.js";
import { createRecorder } from "../../src/server/delivery/recorder.js";
import { Kicks, WantedTimes } from "../../src/server/delivery/wakeups.js";
import type { Db } from "../../src/server/store.js";

// The delivery engine's small parts, each alone (src/server/delivery/): what the integration tests show
// only through a server.
afterEach(() => vi.useRealTimers());

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

describe("a waiting run's kicks", () => {
  it("keeps a kick that came while nobody waited for the next wait, unless a claim forgot it", async () => {
    const kicks = new Kicks();
    kicks.kick();
    await kicks.kicked();
    kicks.kick();
    kicks.forget();
    vi.useFakeTimers();
    let woken = false;
    const wait = kicks.kicked(1000).then(() => (woken = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(woken).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await wait;
    expect(woken).toBe(true);
  });
});

describe("recording outcomes (D7)", () => {
  const outcome = (id: string): Outcome => ({ attemptId: id, webhookId: "w1", ok: true, cancelled: false, endedAt: 0 });
  function recorder(underWay: () => number, record?: (o: Outcome[]) => Promise<Recorded[]>) {
    const batches: string[][] = [];
    const queries: unknown[][] = [];
    const db = { query: async (...args: unknown[]) => (queries.push(args), { rows: [] }) } as unknown as Db;
    const r = createRecorder({
      db,
      record: record ?? (async (outcomes) => (batches.push(outcomes.map((o) => o.attemptId)), outcomes.map((): Recorded => "succeeded"))),
      owner: "server-1",
      claimsInMemory: false,
      underWay,
      log: () => undefined,
    });
    return { r, batches, queries };
  }

  it("records the outcomes of attempts ending together in one statement, as soon as no attempt is left to end", async () => {
    vi.useFakeTimers();
    let underWay = 2;
    const { r, batches } = recorder(() => underWay);
    void r.record(outcome("a1"));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches).toEqual([]);
    underWay = 0;
    void r.record(outcome("a2"));
    // Not a millisecond later: the wait ends with the last attempt's outcome.
    await vi.advanceTimersByTimeAsync(0);
    expect(batches).toEqual([["a1", "a2"]]);
  });

  it("waits 30 ms at most for more while attempts are under way", async () => {
    vi.useFakeTimers();
    const { r, batches } = recorder(() => 1);
    const recorded = r.record(outcome("a1"));
    await vi.advanceTimersByTimeAsync(29);
    expect(batches).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(await recorded).toBe("succeeded");
    expect(batches).toEqual([["a1"]]);
  });

  it("hands a batch it could not record back to the queue, claimed by this server only, and fails its outcomes", async () => {
    const { r, queries } = recorder(() => 0, () => Promise.reject(new Error("disk full")));
    await expect(r.record(outcome("a1"))).rejects.toThrow("disk full");
    expect(queries).toHaveLength(1);
    expect(queries[0]![0]).toMatch(/^UPDATE attempts SET state = 'pending', claimed_by = NULL/);
    expect(queries[0]![1]).toEqual([["a1"], "server-1"]);
  });
});
