// SSRF (DECISIONS D22): which webhook URLs registration refuses; delivery-time re-checks are in delivery.test.ts.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { refuseUrl } from "../../src/server/ssrf.js";

const cases = JSON.parse(readFileSync(path.join(import.meta.dirname, "data/ssrf-cases.json"), "utf8")) as { refused: string[]; accepted: string[] };

describe("webhook URL check", () => {
  it.each(cases.refused)("refuses %s", async (url) => {
    expect(await refuseUrl(url)).toMatch(/private or loopback address/);
  });
  it.each(cases.accepted)("accepts %s", async (url) => {
    expect(await refuseUrl(url)).toBeUndefined();
  });
});
