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

describe("look-ups at connection time (D40)", () => {
  /** A resolver that answers only when told, counting its calls per host name. */
  function heldResolver() {
    const calls = new Map<string, number>();
    const waiting: (() => void)[] = [];
    const resolve = (hostname: string, callback: (error: NodeJS.ErrnoException | null, addresses: { address: string; family: number }[]) => void) => {
      calls.set(hostname, (calls.get(hostname) ?? 0) + 1);
      waiting.push(() => callback(null, [{ address: "93.184.215.14", family: 4 }]));
    };
    return { resolve, calls, answer: () => waiting.splice(0).forEach((w) => w()) };
  }
  const lookUp = (policy: ReturnType<typeof addressPolicy>, host: string) =>
    new Promise<string>((ok, fail) => policy.lookup(host, { family: 0 }, (error, address) => (error ? fail(error) : ok(address as string))));

  it("resolves a host name once for every connection waiting for it, so a slow one holds one of the resolver's threads", async () => {
    const resolver = heldResolver();
    const policy = addressPolicy({ resolve: resolver.resolve });
    const waiting = [...Array.from({ length: 5 }, () => lookUp(policy, "slow.example")), lookUp(policy, "other.example")];
    expect(Object.fromEntries(resolver.calls)).toEqual({ "slow.example": 1, "other.example": 1 });
    resolver.answer();
    expect(await Promise.all(waiting)).toEqual(Array(6).fill("93.184.215.14"));
    // Answered, a name is looked up again by the next connection (the check is each connection's, D22).
    const again = lookUp(policy, "slow.example");
    resolver.answer();
    await again;
    expect(resolver.calls.get("slow.example")).toBe(2);
  });
});
