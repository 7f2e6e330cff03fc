import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { verifySignature } from "../../src/signing.js";
import type { Bench } from "../bench.js";

const secret = "whsec-bench-0123456789abcdef";

function rate(fn: () => void, seconds = 0.5): number {
  for (let i = 0; i < 1000; i++) fn(); // warm up
  let n = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 100; i++) fn();
    n += 100;
  }
  return n / seconds;
}

/** verifySignature against a bare createHmac + timingSafeEqual loop on the same bodies. */
const bench: Bench = async () => {
  const results = [];
  for (const size of [200, 2048, 65536]) {
    const body = randomBytes(size);
    const header = createHmac("sha256", secret).update(body).digest("hex");
    // The bare loop decodes the received hex header too: any verifier has to.
    const bare = rate(() => {
      timingSafeEqual(createHmac("sha256", secret).update(body).digest(), Buffer.from(header, "hex"));
    });
    const lib = rate(() => {
      verifySignature(body, header, secret);
    });
    results.push({
      name: `verifySignature, ${size} B bodies`,
      value: `${(lib / bare).toFixed(2)}x bare HMAC loop (${Math.round(lib)}/s vs ${Math.round(bare)}/s)`,
      target: ">= 0.9x",
    });
  }
  return results;
};
export default bench;
