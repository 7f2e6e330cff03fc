// The WWW-Authenticate parser certify api reads challenges with, against the vectors.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { challengeOf, parseChallenges, type Challenge } from "../../conformance/api/challenges.js";

const vectors = JSON.parse(readFileSync(new URL("../../conformance/vectors/www-authenticate.json", import.meta.url), "utf8")) as {
  cases: { field: string | string[]; challenges: Challenge[] }[];
};

describe("parseChallenges", () => {
  it.each(vectors.cases.map((c) => [JSON.stringify(c.field), c] as const))("reads %s", (_name, c) => {
    expect(parseChallenges(c.field)).toEqual(c.challenges);
  });

  it("finds a scheme by name in any case, and not inside a quoted value", () => {
    expect(challengeOf('DPoP algs="ES256", BEARER', "Bearer")?.scheme).toBe("bearer");
    expect(challengeOf('Basic realm="Bearer of news"', "Bearer")).toBeUndefined();
    expect(challengeOf(undefined, "Basic")).toBeUndefined();
  });
});
