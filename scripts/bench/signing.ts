// verifySignature throughput as a ratio to a bare createHmac + timingSafeEqual loop on the same
// bodies. The two alternate in short rounds and the median of the per-round ratios is printed,
// so that load from other processes on a shared machine hits both sides alike.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { verifySignature } from "@partner-platform/sdk";
import type { Bench } from "../bench.js";

const secret = "whsec-bench-0123456789abcdef";
const ROUNDS = 31;
const ROUND_MS = 30;

/** Calls per second of `fn`, over about `ms` milliseconds. */
function rate(fn: () => void, ms: number): number {
  let n = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < ms) {
    for (let i = 0; i < 50; i++) fn();
    n += 50;
    elapsed = performance.now() - start;
  }
  return (n * 1000) / elapsed;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const bench: Bench = async () => {
  const results = [];
  for (const size of [200, 2048, 65536]) {
    const body = randomBytes(size);
    const header = createHmac("sha256", secret).update(body).digest("hex");
    // The bare loop decodes the received hex header too: any verifier has to.
    const bare = () => {
      if (!timingSafeEqual(createHmac("sha256", secret).update(body).digest(), Buffer.from(header, "hex"))) throw new Error("bench: bad HMAC");
    };
    const lib = () => {
      if (!verifySignature(body, header, secret).valid) throw new Error("bench: verifySignature refused a valid signature");
    };
    rate(bare, ROUND_MS); // warm up both
    rate(lib, ROUND_MS);
    const bareRates: number[] = [];
    const libRates: number[] = [];
    const ratios: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which goes first, so that neither always runs in the same slot.
      const bareFirst = round % 2 === 0;
      const b1 = bareFirst ? rate(bare, ROUND_MS) : 0;
      const l = rate(lib, ROUND_MS);
      const b = bareFirst ? b1 : rate(bare, ROUND_MS);
      bareRates.push(b);
      libRates.push(l);
      ratios.push(l / b);
    }
    results.push({
      name: `verifySignature, ${size} B bodies`,
      value: `${median(ratios).toFixed(2)}x bare HMAC loop (median of ${ROUNDS} paired rounds; ${Math.round(median(libRates))}/s vs ${Math.round(median(bareRates))}/s)`,
      target: ">= 0.9x",
    });
  }
  return results;
};
export default bench;
