import { describe, expect, it } from "vitest";
import { HeldClaims } from "../../src/server/delivery/held.js";

// The order in which a process issues its claims and records to a store only it uses (D41): the store
// runs statements in that order, so it decides what a disabling in a record spares.
describe("HeldClaims", () => {
  it("issues a record that waits for a claim before the claim that follows it, however soon that comes", async () => {
    const held = new HeldClaims();
    const issued: string[] = [];
    const answers: ((taken: { id: string }[]) => void)[] = [];
    const claim = (n: number) => {
      issued.push(`claim ${n}`);
      return held.claiming(new Promise<{ id: string }[]>((resolve) => answers.push(resolve)));
    };
    let underWay = claim(1);
    const recorded = held.recording(async (spared) => {
      issued.push(`record sparing ${spared.join(" ")}`);
      return "recorded";
    });
    // A backlog's loop: each claim issued as soon as the one before is answered.
    for (let n = 2; n <= 4; n++) {
      answers[n - 2]!([{ id: `a${n - 1}` }]);
      await underWay;
      underWay = claim(n);
    }
    answers[3]!([]);
    expect(await recorded).toBe("recorded");
    // Awaited a turn after the claim's answer instead, the record came behind each next claim.
    expect(issued).toEqual(["claim 1", "record sparing a1", "claim 2", "claim 3", "claim 4"]);
  });

  it("issues a record at once when no claim is under way, sparing the ids held and what the last claim took", async () => {
    const held = new HeldClaims();
    await held.claiming(Promise.resolve([{ id: "a2" }]));
    held.add("a1");
    const spared = await held.recording(async (ids) => ids);
    expect(spared).toEqual(["a1", "a2"]);
  });

  it("issues the records waiting for a claim that failed", async () => {
    const held = new HeldClaims();
    let fail!: (error: Error) => void;
    const claim = held.claiming(new Promise<{ id: string }[]>((_, reject) => (fail = reject)));
    const recorded = held.recording(async () => "recorded");
    fail(new Error("the store went away"));
    await expect(claim).rejects.toThrow("the store went away");
    expect(await recorded).toBe("recorded");
  });
});
