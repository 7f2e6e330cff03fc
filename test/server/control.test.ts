// The Conformance Control API (spec/control/main.tsp): off by default, answers as its OpenAPI
// document says, bodies validated by its schemas.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlValidator } from "../../src/server/contract.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { control } from "./helpers.js";

let virtual: RunningServer;
let scaled: RunningServer;
let off: RunningServer;
beforeAll(async () => {
  [virtual, scaled, off] = await Promise.all([
    startServer({ clock: { mode: "virtual", start: Date.parse("2026-11-22T14:03:00Z") }, conformance: true, log: () => undefined }),
    startServer({ clock: { mode: "scaled", scale: 0.001 }, conformance: true, log: () => undefined }),
    startServer({ clock: { mode: "virtual" }, log: () => undefined }),
  ]);
});
afterAll(async () => Promise.all([virtual, scaled, off].map((s) => s.close())));

const pointers = (body: { errors?: { pointer: string }[] }) => (body.errors ?? []).map((e) => e.pointer);

describe("conformance control API", () => {
  it("does not exist without --conformance", async () => {
    for (const [method, path] of [["GET", "/conformance/clock"], ["POST", "/conformance/clock/advance"], ["POST", "/conformance/events"]] as const) {
      const response = await fetch(`${off.url}${path}`, { method, ...(method === "POST" ? { body: "{}", headers: { "content-type": "application/json" } } : {}) });
      expect([path, response.status, response.headers.get("content-type")?.split(";")[0]]).toEqual([path, 404, "application/problem+json"]);
    }
  });

  it("reads and advances a virtual clock", async () => {
    const clock = await (await fetch(`${virtual.url}/conformance/clock`)).json();
    expect(controlValidator("Clock")(clock)).toBe(true);
    expect(clock).toEqual({ now: "2026-11-22T14:03:00.000Z", mode: "virtual", scale: 0 });
    const advanced = await control(virtual).post("/clock/advance", { seconds: 60 });
    expect([advanced.status, advanced.body.now]).toEqual([200, "2026-11-22T14:04:00.000Z"]);
  });

  it("refuses to advance a clock that is not virtual (409)", async () => {
    const r = await control(scaled).post("/clock/advance", { seconds: 60 });
    expect(r.status).toBe(409);
    expect(controlValidator("ClockNotVirtualProblem")(r.body)).toBe(true);
  });

  it("triggers an event with the example data or the given data, and returns its id", async () => {
    const first = await control(virtual).trigger("booking.confirmed", "4712");
    const second = await control(virtual).trigger("review.created", "4711", { reviewID: "1", businessID: "4711", rating: 3, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });
    for (const r of [first, second]) {
      expect(r.status).toBe(201);
      expect(controlValidator("TriggeredEvent")(r.body)).toBe(true);
    }
    expect(first.body.id).not.toBe(second.body.id);
  });

  it("answers invalid bodies with 422 naming the field", async () => {
    const cases: [string, unknown, string[]][] = [
      ["/clock/advance", { seconds: -1 }, ["/seconds"]],
      ["/clock/advance", { seconds: 1.5 }, ["/seconds"]],
      ["/clock/advance", { seconds: 10 ** 12 }, ["/seconds"]],
      ["/clock/advance", {}, ["/seconds"]],
      ["/events", { event: "lead.deleted", businessID: "4711" }, ["/event"]],
      ["/events", { event: "lead.created", businessID: "x" }, ["/businessID"]],
      ["/events", { event: "lead.created", businessID: "4711", data: { leadID: "abc" } }, ["/data/leadID", "/data/request", "/data/customer"]],
    ];
    for (const [path, body, expected] of cases) {
      const r = await control(virtual).post(path, body);
      expect([path, body, r.status, pointers(r.body).sort()]).toEqual([path, body, 422, expected.sort()]);
    }
  });
});
