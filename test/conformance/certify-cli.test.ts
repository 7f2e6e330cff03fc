// `certify server` from the command line, against an implementation started beforehand that trusts the
// suite's kept CA (--pki-dir) and mails its SMTP sink (--smtp-port); reports as JUnit and JSON.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOrCreatePki } from "../../conformance/harness/pki.js";
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
    const pki = await loadOrCreatePki(path.join(dir, "pki"));
    smtpPort = await freePort();
    server = await startServer({
      conformance: true,
      allowPrivateWebhooks: true,
      clock: { mode: "virtual" },
      webhookCa: pki.caCert,
      smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
      log: () => undefined,
    });
  });
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("certifies, prints a row per check, and writes JUnit and JSON reports", async () => {
    const args = [
      "--import", "tsx", path.join(packageRoot, "src/cli/main.ts"), "certify", "server",
      "--base-url", server.url, "--auth-url", server.url, "--control-url", server.url,
      "--client-id", client.clientId, "--client-secret", client.clientSecret, "--partner-email", client.contactEmail,
      "--pki-dir", path.join(dir, "pki"), "--smtp-port", String(smtpPort),
      "--junit", path.join(dir, "junit.xml"), "--json", path.join(dir, "report.json"),
    ];
    const { stdout } = await run(process.execPath, args, { cwd: packageRoot });
    expect(stdout).toMatch(/^PASS {2}signature-is-hmac-of-exact-bytes +\d+ ms {2}§5\.3, D2$/m);
    expect(stdout).toMatch(/^CERTIFIED: server suite against http:\/\/127\.0\.0\.1:\d+: 23 passed, 0 failed, 0 skipped/m);
    const junit = await readFile(path.join(dir, "junit.xml"), "utf8");
    expect(junit).toContain('tests="23"');
    expect(junit).toContain('failures="0"');
    const report = JSON.parse(await readFile(path.join(dir, "report.json"), "utf8")) as { passed: boolean; results: unknown[] };
    expect(report.passed).toBe(true);
    expect(report.results).toHaveLength(23);
  });

  it("exits non-zero with one line for an unknown check id", async () => {
    const args = ["--import", "tsx", path.join(packageRoot, "src/cli/main.ts"), "certify", "server",
      "--base-url", server.url, "--auth-url", server.url, "--control-url", server.url,
      "--client-id", "x", "--client-secret", "y", "--only", "no-such-check"];
    const result = await run(process.execPath, args, { cwd: packageRoot }).catch((e: { code: number; stderr: string }) => e);
    expect(result).toMatchObject({ code: 1 });
    expect((result as { stderr: string }).stderr.trim()).toBe("partner-platform: --only names unknown check(s): no-such-check");
  });
});
