// SSRF (DECISIONS D22): which webhook URLs registration refuses; delivery-time re-checks are in delivery.test.ts.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { addressPolicy, refuseUrl } from "../../src/server/ssrf.js";

const cases = JSON.parse(readFileSync(path.join(import.meta.dirname, "data/ssrf-cases.json"), "utf8")) as {
  refused: string[];
  loopback: string[];
  accepted: string[];
};

describe("webhook URL check", () => {
  it.each(cases.refused)("refuses %s", async (url) => {
    expect(await refuseUrl(url)).toMatch(/private or loopback address/);
  });
  it.each(cases.accepted)("accepts %s", async (url) => {
    expect(await refuseUrl(url)).toBeUndefined();
  });

  describe("while the Conformance Control API is on (loopback allowed)", () => {
    const certifying = addressPolicy({ allowLoopback: true });
    it.each(cases.loopback)("accepts %s", async (url) => {
      expect(await certifying.refuseUrl(url)).toBeUndefined();
      expect(certifying.refuseAddressUrl(url)).toBeUndefined();
    });
    it.each(cases.refused.filter((url) => !cases.loopback.includes(url)))("still refuses %s", async (url) => {
      expect(await certifying.refuseUrl(url)).toMatch(/private or loopback address/);
    });
  });
});
