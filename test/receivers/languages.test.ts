// Proof of the example receivers in other languages (examples/receivers/receivers.json): each one's own
// verify function gives the verdict of every signing vector, and each running receiver passes
// `certify receiver`. A missing runtime skips its receiver with a warning, and fails under CI.
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatResult } from "../../conformance/framework/report.js";
import { certifyReceiver, receiverChecks } from "../../conformance/receiver/index.js";
import { exampleReceivers, findRuntime, prepare, runVectors, startReceiver, type Prepared } from "../../scripts/example-receivers.js";
import { packageRoot } from "../../src/paths.js";
import { requireRuntime } from "../runtimes.js";

const { vectors } = JSON.parse(readFileSync(path.join(packageRoot, "conformance/vectors/signing.json"), "utf8")) as {
  vectors: { id: string; secret: string; bodyBase64: string; header: string | null; valid: boolean; reason: string | null }[];
};
const secret = "whsec-partner-receiver-0123456789";

describe.each(exampleReceivers.map((r) => [r.id, r] as const))("example receiver %s", (id, receiver) => {
  const { exe, missing } = findRuntime(receiver);
  requireRuntime(exe ? undefined : missing);

  describe.runIf(exe)("with its runtime", () => {
    let prepared: Prepared;
    beforeAll(() => {
      prepared = prepare(receiver, exe!);
    });
    afterAll(() => prepared?.dispose());

    it("gives every signing vector's verdict with its own verify function", () => {
      const expected = Object.fromEntries(vectors.map((v) => [v.id, v.valid ? "valid" : v.reason]));
      expect(Object.keys(expected).length).toBeGreaterThan(10);
      expect(runVectors(prepared, vectors), id).toEqual(expected);
    });

    it("passes certify receiver while running", async () => {
      const running = await startReceiver(prepared, secret);
      try {
        const report = await certifyReceiver({ url: running.url, secret });
        const failures = report.results.filter((r) => r.status !== "passed").map(formatResult);
        expect(failures, running.output()).toEqual([]);
        expect(report.results.map((r) => r.id)).toEqual(receiverChecks.map((c) => c.id));
      } finally {
        await running.stop();
      }
    });
  });
});
