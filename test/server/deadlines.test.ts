// The attempts' deadlines on one timer (deadlines.ts, D6): each attempt's signal aborts at its own
// deadline, an attempt that ended is never aborted, and a stop aborts every attempt at once.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createDeadlines } from "../../src/server/delivery/deadlines.js";

beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
afterEach(() => vi.useRealTimers());

describe("attempt deadlines", () => {
  it("aborts each attempt at its own deadline, as timed out, and never one that ended", () => {
    const deadlines = createDeadlines(1000);
    const first = deadlines.start();
    vi.advanceTimersByTime(400);
    const second = deadlines.start();
    const ended = deadlines.start();
    deadlines.end(ended);
    vi.advanceTimersByTime(599);
    expect([first.aborted, second.aborted]).toEqual([false, false]);
    vi.advanceTimersByTime(1);
    expect(first.aborted && first.timedOut).toBe(true);
    expect((first.reason as Error).name).toBe("TimeoutError");
    expect(second.aborted).toBe(false);
    vi.advanceTimersByTime(400);
    expect(second.aborted && second.timedOut).toBe(true);
    expect(ended.aborted).toBe(false);
    // A later attempt gets its full timeout, though the timer had run out meanwhile.
    const third = deadlines.start();
    vi.advanceTimersByTime(999);
    expect(third.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(third.timedOut).toBe(true);
  });

  it("tells its request once", () => {
    const deadlines = createDeadlines(50);
    const signal = deadlines.start();
    const heard = vi.fn();
    signal.onabort = heard;
    vi.advanceTimersByTime(50);
    deadlines.abortAll(new Error("stopping"));
    expect(heard).toHaveBeenCalledTimes(1);
    expect(signal.timedOut).toBe(true);
  });

  it("aborts every attempt under way at a stop, not as timed out, and keeps no timer", () => {
    const deadlines = createDeadlines(1000);
    const signals = Array.from({ length: 5 }, () => deadlines.start());
    deadlines.abortAll(new Error("the server is stopping"));
    expect(signals.every((s) => s.aborted && !s.timedOut && s.reason?.message === "the server is stopping")).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
