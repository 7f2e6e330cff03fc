// The API certification against the reference server: wall time of a full run (default seed and
// runs, and 4x the runs), and generated inputs tried per second by the property checks.
import { certifyApi, defaultRuns } from "../../conformance/api/index.js";
import type { SuiteReport } from "../../conformance/framework/check.js";
import { loadConfig, startServer } from "../../src/server/index.js";
import type { Bench, BenchResult } from "../bench.js";

const client = loadConfig().clients[0]!;

const bench: Bench = async () => {
  // No DNS check of webhook hosts (a resolver without network stalls 5 s on some lookups), no deliveries.
  const server = await startServer({ clock: { mode: "virtual" }, allowPrivateWebhooks: true, log: () => undefined });
  const results: BenchResult[] = [];
  const options = { baseUrl: server.url, authUrl: server.url, clientId: client.clientId, clientSecret: client.clientSecret };
  try {
    await certifyApi({ ...options, runs: 5 }); // warm-up: schema compilation, JIT
    for (const runs of [defaultRuns, defaultRuns * 4]) {
      const started = performance.now();
      const report: SuiteReport = await certifyApi({ ...options, runs });
      const seconds = (performance.now() - started) / 1000;
      const generated = report.results.filter((r) => r.id.includes("-generated-"));
      const inputs = generated.length * runs;
      const generatedSeconds = generated.reduce((sum, r) => sum + r.durationMs, 0) / 1000;
      const verdict = report.passed ? "certified" : "NOT certified";
      results.push(
        {
          name: `full API certification, ${report.results.length} checks, ${runs} inputs per property (reference server)`,
          value: `${seconds.toFixed(2)} s, ${verdict}`,
          target: runs === defaultRuns ? "a few seconds" : undefined,
        },
        { name: `generated inputs tried per second (${inputs} inputs, ${generated.length} property checks)`, value: `${Math.round(inputs / generatedSeconds)}/s` },
      );
    }
  } finally {
    await server.close();
  }
  return results;
};
export default bench;
