// Wall time of certifying one example receiver per language (examples/receivers/receivers.json): the
// receiver already built and listening, `certify receiver` from start to report. A missing runtime is
// printed as such.
import { certifyReceiver } from "../../conformance/receiver/index.js";
import { exampleReceivers, findRuntime, prepare, startReceiver } from "../example-receivers.js";
import type { Bench, BenchResult } from "../bench.js";

const secret = "whsec-bench-receiver-0123456789";

const bench: Bench = async () => {
  const results: BenchResult[] = [];
  for (const r of exampleReceivers) {
    const { exe, missing } = findRuntime(r);
    if (!exe) {
      results.push({ name: `certify receiver, ${r.id}`, value: `not measured (${missing})` });
      continue;
    }
    const prepared = prepare(r, exe);
    const running = await startReceiver(prepared, secret);
    try {
      const start = performance.now();
      const report = await certifyReceiver({ url: running.url, secret });
      const ms = performance.now() - start;
      results.push({ name: `certify receiver, ${r.id} (wall time)`, value: `${(ms / 1000).toFixed(2)} s${report.passed ? "" : " (NOT certified)"}` });
    } finally {
      await running.stop();
      prepared.dispose();
    }
  }
  return results;
};
export default bench;
