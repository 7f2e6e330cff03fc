import { describe, expect, it } from "vitest";
import { parseEvent, eventNames } from "@partner-platform/sdk";
import { eventExample } from "../../src/spec.js";

describe("parseEvent", () => {
  it.each(eventNames.map((n) => [n] as const))("accepts the spec's %s example and types it", (name) => {
    const raw = Buffer.from(JSON.stringify(eventExample(name)));
    const result = parseEvent(raw);
    expect(result).toEqual({ ok: true, event: eventExample(name) });
  });

  it("reports a body that is not JSON", () => {
    const result = parseEvent("{\"id\": ");
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toMatch(/^The body is not JSON/);
  });

  it("reports a body that is not UTF-8 rather than reading it with U+FFFD in place of its bytes", () => {
    const event = { ...eventExample("review.created") };
    const latin1 = Buffer.from(JSON.stringify({ ...event, data: { ...event.data, text: "Très bien" } }), "latin1");
    expect(parseEvent(latin1)).toEqual({ ok: false, error: "The body is not UTF-8 (a delivery's body is UTF-8 JSON).", issues: [] });
    expect(parseEvent(Buffer.from(JSON.stringify({ ...event, data: { ...event.data, text: "Très bien" } }), "utf8")).ok).toBe(true);
  });

  it("names the failing field of a known event", () => {
    const event = eventExample("lead.created");
    event.data.businessID = "acme";
    const result = parseEvent(JSON.stringify(event));
    expect(result).toEqual({
      ok: false,
      error: "The body is not a valid lead.created event.",
      issues: ['/data/businessID: must match pattern "^[0-9]{1,19}$"'],
    });
  });

  it("rejects a timestamp that is not UTC and an id without evt_", () => {
    const event = { ...eventExample("review.created"), id: "01JDE5D7F9H1K3M5P7R9T1V3X5", timestamp: "2026-11-25T18:45:00+01:00" };
    const result = parseEvent(JSON.stringify(event));
    expect(!result.ok && result.issues).toEqual([
      '/id: must match pattern "^evt_[0-9A-Za-z]{8,64}$"',
      '/timestamp: must match pattern "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$"',
    ]);
  });

  it("says when the event name is not one of the eight", () => {
    const result = parseEvent(JSON.stringify({ ...eventExample("lead.created"), event: "lead.create" }));
    expect(!result.ok && result.error).toBe("The body is not an event: `event` is not one of the eight event names.");
  });

  it("tolerates members it does not know (forward compatibility, DECISIONS D16)", () => {
    const event = { ...eventExample("lead.updated"), extra: true };
    expect(parseEvent(JSON.stringify(event)).ok).toBe(true);
  });
});
