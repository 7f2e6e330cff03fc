// examples/client/search.ts, run as the README says, against the reference server: it searches, then
// creates a service request, with the demo client's credentials.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { packageRoot } from "../../src/paths.js";
import { startServer, type RunningServer } from "../../src/server/index.js";

let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ log: () => undefined });
});
afterAll(async () => server?.close());

it("examples/client/search.ts searches and creates a service request", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "examples/client/search.ts"], {
    cwd: packageRoot,
    env: { ...process.env, BASE_URL: server.url },
  });
  expect(stdout).toMatch(/^business 4711: Chelsea Pipe Works$/m);
  expect(stdout).toMatch(/^request \d+: matched, leads for 4711, 4712$/m);
});
