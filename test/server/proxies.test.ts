// The per-address throttle's key behind trusted proxies (D30): an address, never a port per connection
// or a word shared by everyone.
import { describe, expect, it } from "vitest";
import { clientAddress } from "../../src/server/proxies.js";

describe("clientAddress", () => {
  it.each([
    ["203.0.113.7", "203.0.113.7"],
    ["203.0.113.7:5555", "203.0.113.7"],
    ["2001:db8::1", "2001:db8::1"],
    ["[2001:db8::1]:443", "2001:db8::1"],
    ["::ffff:203.0.113.7", "203.0.113.7"],
    ["unknown", "10.0.0.5"],
    ["_hidden", "10.0.0.5"],
  ])("keys %s as %s", (forwarded, key) => {
    expect(clientAddress(forwarded, "10.0.0.5")).toBe(key);
  });
});
