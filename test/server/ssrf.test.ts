// Webhook URL rules (DECISIONS D22, D28): which webhook URLs registration refuses; delivery-time
// re-checks are in delivery.test.ts. The cases are shared with `certify server` (conformance/vectors).
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../src/paths.js";
import { addressPolicy, refuseUrl } from "../../src/server/ssrf.js";

const cases = JSON.parse(readFileSync(path.join(packageRoot, "conformance/vectors/webhook-urls.json"), "utf8")) as {
  refused: string[];
  loopback: string[];
  malformed: string[];
  accepted: string[];
};

describe("webhook URL check", () => {
  it.each(cases.refused)("refuses %s", async (url) => {
    expect(await refuseUrl(url)).toMatch(/not a public address/);
  });
  it.each(cases.accepted)("accepts %s", async (url) => {
    expect(await refuseUrl(url)).toBeUndefined();
  });
  it.each(cases.malformed)("refuses %s by its form, whatever the address policy", async (url) => {
    for (const policy of [addressPolicy(), addressPolicy({ allowLoopback: true }), addressPolicy({ allowPrivate: true })]) {
      const why = await policy.refuseUrl(url);
      expect(why).toBeDefined();
      expect(why).not.toMatch(/not a public address/);
    }
  });

  describe("while the Conformance Control API is on (loopback allowed)", () => {
    const certifying = addressPolicy({ allowLoopback: true });
    it.each(cases.loopback)("accepts %s", async (url) => {
      expect(await certifying.refuseUrl(url)).toBeUndefined();
      expect(certifying.refuseAddressUrl(url)).toBeUndefined();
    });
    it.each(cases.refused.filter((url) => !cases.loopback.includes(url)))("still refuses %s", async (url) => {
      expect(await certifying.refuseUrl(url)).toMatch(/not a public address/);
    });
  });
});
