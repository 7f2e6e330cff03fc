// `certify server` from the command line, against an implementation started beforehand that trusts the
// suite's kept CA (--pki-dir) and mails its SMTP sink on a fixed port, and that `certify api` certified
// first (its leads and webhooks stay in the store, as in a CI job that runs both suites against one
// server); the client's credentials come from the environment; reports as JUnit and JSON.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certifyApi } from "../../conformance/api/index.js";
import type { SuiteReport } from "../../conformance/framework/check.js";
import { loadOrCreateCa } from "../../conformance/harness/pki.js";
import { serverChecks } from "../../conformance/server/checks.js";
import { packageRoot } from "../../src/paths.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import { freePort } from "../../scripts/free-port.js";

const run = promisify(execFile);
const client = loadConfig().clients[0]!;

describe("partner-platform certify server (CLI)", () => {
  let dir: string;
  let server: RunningServer;
  let smtpPort: number;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "certify-cli-"));
    // The CA the CLI will find in --pki-dir: the implementation trusts it before the suite starts.
    const notices: string[] = [];
    const ca = await loadOrCreateCa(path.join(dir, "pki"), (line) => notices.push(line));
    expect(notices).toEqual([expect.stringMatching(/^made a CA in .*ca\.pem \(the first use of /)]);
    smtpPort = await freePort();
    server = await startServer({
      conformance: true,
      clock: { mode: "virtual" },
      webhookCa: ca.caCert,
      smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
      log: () => undefined,
    });
    // Not the token lifetime check: it waits a minute, and api.test.ts holds it against the reference.
    const api = await certifyApi({ baseUrl: server.url, authUrl: server.url, clientId: client.clientId, clientSecret: client.clientSecret }, { skip: ["token-still-works-a-minute-later"] });
    expect(api.results.filter((r) => r.status === "failed")).toEqual([]);
  }, 120_000);
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("certifies, prints a row per check, and writes JUnit and JSON reports", async () => {
    const args = [
      "--import", "tsx", path.join(packageRoot, "src/cli/main.ts"), "certify", "server",
      "--base-url", server.url, "--auth-url", server.url, "--control-url", server.url, "--partner-email", client.contactEmail,
      "--second-partner-email", loadConfig().clients[1]!.contactEmail,
      "--pki-dir", path.join(dir, "pki"), "--smtp-port", String(smtpPort), "--receiver-port", String(await freePort()),
      "--junit", path.join(dir, "reports/junit.xml"), "--json", path.join(dir, "reports/report.json"),
    ];
    const second = loadConfig().clients[1]!;
    const env = {
      ...process.env,
      PARTNER_PLATFORM_CLIENT_ID: client.clientId,
      PARTNER_PLATFORM_CLIENT_SECRET: client.clientSecret,
      PARTNER_PLATFORM_SECOND_CLIENT_ID: second.clientId,
      PARTNER_PLATFORM_SECOND_CLIENT_SECRET: second.clientSecret,
    };
    const { stdout, stderr } = await run(process.execPath, args, { cwd: packageRoot, env });
    expect(stderr).toBe("");
    const rows = stdout.split("\n").filter((line) => /^(PASS|FAIL|SKIP) /.test(line));
    expect(rows.map((row) => row.split(/\s+/)[1])).toEqual(serverChecks.map((c) => c.id));
    expect(rows.filter((row) => !row.startsWith("PASS"))).toEqual([]);
    expect(stdout).toMatch(/^PASS {2}signature-is-hmac-of-exact-bytes +\d+ ms {2}§5\.3, D2$/m);
    const n = serverChecks.length;
    expect(stdout).toMatch(new RegExp(`^CERTIFIED: server suite against http://127\\.0\\.0\\.1:\\d+: ${n} passed, 0 failed, 0 skipped`, "m"));
    const junit = await readFile(path.join(dir, "reports/junit.xml"), "utf8");
    expect(junit).toContain(`tests="${n}"`);
    expect(junit).toContain('failures="0"');
    const report = JSON.parse(await readFile(path.join(dir, "reports/report.json"), "utf8")) as SuiteReport;
    expect(report.passed).toBe(true);
    expect(report.results.map((r) => r.id)).toEqual(serverChecks.map((c) => c.id));
  });
});
