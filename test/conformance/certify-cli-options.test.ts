// `certify server|receiver|api` before and around a run: options checked before anything starts (one
// line, exit status 2), --list, secrets from the environment, the preflights that stop a run that cannot
// give a verdict, and the receiver's host, port and kept CA.
import { execFile } from "node:child_process";
import { X509Certificate, webcrypto } from "node:crypto";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import * as x509 from "@peculiar/x509";
import { Command, CommanderError } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiChecks } from "../../conformance/api/checks.js";
import { loadContract } from "../../conformance/api/contract.js";
import { SetupError } from "../../conformance/framework/check.js";
import { toHtml } from "../../conformance/framework/html-report.js";
import { formatSummary, toJUnitXml } from "../../conformance/framework/report.js";
import { createTestCa, issueServerCertificate, loadOrCreateCa } from "../../conformance/harness/pki.js";
import { startReceiver } from "../../conformance/harness/receiver.js";
import { certifyReceiver, receiverChecks } from "../../conformance/receiver/index.js";
import { serverChecks } from "../../conformance/server/checks.js";
import { certifyServer, type CertifyServerOptions } from "../../conformance/server/index.js";
import { startImplementation } from "../../conformance/server/start.js";
import { certifyCommand } from "../../src/cli/certify.js";
import { oneLineUsageErrors } from "../../src/cli/program.js";
import { packageRoot } from "../../src/paths.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";

const client = loadConfig().clients[0]!;
const second = loadConfig().clients[1]!;
const limitedClient = loadConfig().clients[2]!;
const execFileAsync = promisify(execFile);

/** `certify ...` in this process, as the CLI formats its usage errors, its output captured through commander's output hooks. */
async function certify(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const configure = (command: Command): void => {
    command.exitOverride().configureOutput({ writeOut: (s) => (stdout += s), writeErr: (s) => (stderr += s) });
    command.commands.forEach(configure);
  };
  const command = oneLineUsageErrors(certifyCommand());
  configure(command);
  try {
    await command.parseAsync(args, { from: "user" });
    return { code: 0, stdout, stderr };
  } catch (error) {
    if (error instanceof CommanderError) return { code: error.exitCode, stdout, stderr };
    throw error;
  }
}

/** The real CLI, for what only a process shows: the environment and the exit status. */
async function partnerPlatform(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const cli = ["--import", "tsx", path.join(packageRoot, "src/cli/main.ts")];
  return execFileAsync(process.execPath, [...cli, ...args], { cwd: packageRoot, env: { ...process.env, ...env } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
}

async function listen(handler: RequestListener): Promise<{ url: string; server: Server }> {
  const server = createServer(handler).listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const close = (server: Server) => new Promise((resolve) => server.close(resolve));

let dir: string;
/** Counts every request: a usage error must be found before anything reaches the implementation. */
let requests = 0;
let counting: { url: string; server: Server };
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "certify-options-"));
  counting = await listen((_req, res) => {
    requests++;
    res.writeHead(404).end();
  });
});
afterAll(async () => {
  await close(counting.server);
  await rm(dir, { recursive: true, force: true });
});

const serverArgs = (url: string) => [
  "server", "--base-url", url, "--auth-url", url, "--control-url", url,
  "--client-id", "id", "--client-secret", "secret", "--second-client-id", "id2", "--second-client-secret", "secret2", "--partner-email", "partner@example.com",
];

describe("certify: options are checked before anything runs", () => {
  const cases: [string, () => string[], string][] = [
    ["an empty secret", () => [...serverArgs(counting.url), "--client-secret", ""], "--client-secret: must not be empty"],
    ["a missing second client", () => serverArgs(counting.url).filter((a, i, all) => a !== "--second-client-id" && all[i - 1] !== "--second-client-id"), "--second-client-id: required (give it, or set PARTNER_PLATFORM_SECOND_CLIENT_ID)"],
    ["a malformed --base-url", () => [...serverArgs(counting.url), "--base-url", "notaurl"], '--base-url: must be an absolute http:// or https:// URL, got "notaurl"'],
    ["a receiver URL of another scheme", () => ["receiver", "--url", "ftp://example.com/hook", "--secret", "s"], '--url: must be an absolute http:// or https:// URL, got "ftp://example.com/hook"'],
    ["an empty webhook secret", () => ["receiver", "--url", "https://example.com/hook", "--secret", ""], "--secret: must not be empty"],
    ["an unknown check id", () => [...serverArgs(counting.url), "--only", "signature-is-hmac-of-exact-bytes,no-such-check"], "--only: unknown check id(s): no-such-check (--list shows the ids)"],
    ["an unknown skipped id", () => ["api", "--base-url", counting.url, "--auth-url", counting.url, "--client-id", "i", "--client-secret", "s", "--skip", "nope"], "--skip: unknown check id(s): nope (--list shows the ids)"],
    ["an unwritable --json", () => [...serverArgs(counting.url), "--json", path.join(packageRoot, "package.json", "report.json")], `--json: cannot make the folder ${path.join(packageRoot, "package.json")}: part of its path is a file`],
    ["an unwritable --junit", () => [...serverArgs(counting.url), "--junit", packageRoot], `--junit: cannot write ${packageRoot} (EISDIR)`],
    ["a bad port", () => [...serverArgs(counting.url), "--receiver-port", "70000"], '--receiver-port: must be a port number from 1 to 65535, got "70000"'],
    ["a bad --start-timeout", () => [...serverArgs(counting.url), "--start-timeout", "1.5"], '--start-timeout: must be a whole number of at least 1, got "1.5"'],
    ["a bad host", () => [...serverArgs(counting.url), "--smtp-host", "not a host"], '--smtp-host: must be an IP address or a host name, got "not a host"'],
    ["a bad --clock", () => [...serverArgs(counting.url), "--clock", "scaled:2"], '--clock: must be "virtual" or "scaled:FACTOR" with 0 < FACTOR <= 1, got "scaled:2"'],
    ["a --clock faster than the suite certifies", () => [...serverArgs(counting.url), "--clock", "scaled:0.00001"], "--clock: scaled:0.00001 is faster than the suite can certify: use a FACTOR of at least 0.00003 (x-conformance.scaledClock.minFactor, D24), or the virtual clock"],
    ["a bad --partner-email", () => [...serverArgs(counting.url), "--partner-email", "partner.example.com"], '--partner-email: must be an e-mail address, got "partner.example.com"'],
    ["a missing --partner-email", () => serverArgs(counting.url).slice(0, -2), "--partner-email: required"],
    ["a bad --second-partner-email", () => [...serverArgs(counting.url), "--second-partner-email", "globex"], '--second-partner-email: must be an e-mail address, got "globex"'],
    ["--second-partner-email the same as --partner-email", () => [...serverArgs(counting.url), "--second-partner-email", "Partner@example.com"], "--second-partner-email: must be another partner's address than --partner-email"],
    ["a missing secret", () => ["api", "--base-url", counting.url, "--auth-url", counting.url, "--client-id", "i"], "--client-secret: required (give it, or set PARTNER_PLATFORM_CLIENT_SECRET)"],
    ["a bad --runs", () => ["api", "--base-url", counting.url, "--auth-url", counting.url, "--client-id", "i", "--client-secret", "s", "--runs", "0"], '--runs: must be a whole number of at least 1, got "0"'],
    ["an unreadable --ca", () => ["receiver", "--url", "https://example.com/hook", "--secret", "s", "--ca", path.join(packageRoot, "no-such-ca.pem")], `--ca: cannot read ${path.join(packageRoot, "no-such-ca.pem")} (ENOENT)`],
    ["a --ca that is no certificate", () => ["receiver", "--url", "https://example.com/hook", "--secret", "s", "--ca", path.join(packageRoot, "package.json")], `--ca: ${path.join(packageRoot, "package.json")} is not a PEM certificate`],
    ["--json - without --list", () => [...serverArgs(counting.url), "--json", "-"], "--json: - (stdout) is for --list --json only: give a file"],
  ];

  it.each(cases)("%s: one line, exit status 2, nothing reached", async (_what, args, message) => {
    const before = requests;
    const result = await certify(args());
    expect(result).toEqual({ code: 2, stdout: "", stderr: `partner-platform: ${message}\n` });
    expect(requests).toBe(before);
  });

  it("exits 2 from the command line too, on one line", async () => {
    const result = await partnerPlatform(["certify", "server", "--base-url", "notaurl"]);
    expect(result).toEqual({ code: 2, stdout: "", stderr: 'partner-platform: --base-url: must be an absolute http:// or https:// URL, got "notaurl"\n' });
  });
});

describe("certify --list", () => {
  const suites = [
    ["server", serverChecks],
    ["receiver", receiverChecks],
    ["api", apiChecks(loadContract())],
  ] as const;

  it.each(suites)("%s: every check's id, section, title and scenario, with no other option, the sections in one column", async (suite, checks) => {
    const result = await certify([suite, "--list"]);
    expect(result.code).toBe(0);
    const sectionColumns = new Set<number>();
    for (const check of checks) {
      expect(check.scenario.length, check.id).toBeGreaterThan(10);
      const block = new RegExp(`^${check.id}( +)${escapeRegExp(check.section)}\n {4}${escapeRegExp(check.title)}\n {4}scenario: ${escapeRegExp(check.scenario)}\n`, "m").exec(result.stdout);
      expect(block, check.id).not.toBeNull();
      sectionColumns.add(check.id.length + block![1]!.length);
    }
    expect([...sectionColumns]).toHaveLength(1);
    expect(result.stdout).toMatch(new RegExp(`\\n${checks.length} checks in the ${suite} suite\\n$`));
  });

  it.each(suites)("%s: as JSON on stdout with --json -", async (suite, checks) => {
    const result = await certify([suite, "--list", "--json", "-"]);
    expect(JSON.parse(result.stdout)).toEqual({ suite, checks: checks.map(({ id, section, title, scenario }) => ({ id, section, title, scenario })) });
  });

  it("writes the JSON list to a file, only the checks selected", async () => {
    const file = path.join(dir, "list", "receiver.json");
    const result = await certify(["receiver", "--list", "--json", file, "--only", "rejects-tampered-body,acknowledges-duplicate-delivery"]);
    expect(result).toEqual({ code: 0, stdout: "", stderr: "" });
    const list = JSON.parse(await readFile(file, "utf8")) as { checks: { id: string }[] };
    expect(list.checks.map((c) => c.id)).toEqual(["rejects-tampered-body", "acknowledges-duplicate-delivery"]);
  });

  it("shows the environment variables of the secrets and the exit statuses in --help", async () => {
    const server = await certify(["server", "--help"]);
    expect(server.stdout).toMatch(/--client-id <id> .*\(env:\s+PARTNER_PLATFORM_CLIENT_ID\)/s);
    expect(server.stdout).toMatch(/--client-secret <secret> .*\(env:\s+PARTNER_PLATFORM_CLIENT_SECRET\)/s);
    expect(server.stdout).toContain("Exit status: 0 certified, 1 not certified, 2 usage error or the certification could not run.");
    expect((await certify(["receiver", "--help"])).stdout).toMatch(/--secret <secret> .*\(env:\s+PARTNER_PLATFORM_WEBHOOK_SECRET\)/s);
    expect((await certify(["api", "--help"])).stdout).toMatch(/--client-secret <secret> .*\(env:\s+PARTNER_PLATFORM_CLIENT_SECRET\)/s);
    expect((await certify(["api", "--help"])).stdout).toMatch(/--limited-client-secret <secret> .*\(env:\s+PARTNER_PLATFORM_LIMITED_CLIENT_SECRET\)/s);
  });
});

describe("certify: the implementation is checked before the checks", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ conformance: true, clock: { mode: "virtual" }, log: () => undefined });
  });
  afterAll(async () => server.close());

  const target = (url: string, more: Partial<CertifyServerOptions> = {}): CertifyServerOptions => ({
    baseUrl: url,
    authUrl: url,
    controlUrl: url,
    clientId: client.clientId,
    clientSecret: client.clientSecret,
    secondClientId: second.clientId,
    secondClientSecret: second.clientSecret,
    partnerEmail: client.contactEmail,
    clock: { kind: "virtual" },
    notice: () => undefined,
    ...more,
  });

  it("stops with one line when nothing answers: exit status 2, no report written", async () => {
    const closed = await listen(() => undefined);
    await close(closed.server);
    const report = path.join(dir, "unreached.json");
    const result = await certify([...serverArgs(closed.url), "--json", report]);
    expect(result).toEqual({
      code: 2,
      stdout: "",
      stderr: `partner-platform: certify server: cannot reach the Conformance Control API at ${closed.url}/conformance/clock (ECONNREFUSED): is the implementation running, and is --control-url its address?\n`,
    });
    await expect(readFile(report)).rejects.toThrow(/ENOENT/);
    const api = await certify(["api", "--base-url", closed.url, "--auth-url", closed.url, "--client-id", "i", "--client-secret", "s"]);
    expect(api.stderr).toBe(`partner-platform: certify api: cannot reach the API at ${closed.url} (ECONNREFUSED): is the implementation running, and is --base-url its address?\n`);
  });

  it("stops with one line when --start does not answer within --start-timeout", async () => {
    const closed = await listen(() => undefined);
    await close(closed.server);
    const result = await certify([...serverArgs(closed.url), "--start", "sleep 30", "--start-timeout", "1"]);
    expect(result).toEqual({
      code: 2,
      stdout: "",
      stderr: `partner-platform: certify server: --start: the implementation did not answer ${closed.url}/conformance/clock within 1 s (--start-timeout), and wrote nothing\n`,
    });
  });

  it("refuses --start when something answers its Control API already, and never runs the command (a server left on the port would take the run)", async () => {
    const leftOver = await listen((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"mode":"virtual"}'));
    const ran = path.join(dir, "start-ran");
    try {
      const result = await certify([...serverArgs(leftOver.url), "--start", `touch ${JSON.stringify(ran)}; sleep 30`]);
      expect(result).toEqual({
        code: 2,
        stdout: "",
        stderr: `partner-platform: certify server: --start: something answers ${leftOver.url}/conformance/clock already, before the command has run (a server left running on that port?): stop it, or start the implementation on a free port and give the suite that address (--control-url, --base-url, --auth-url)\n`,
      });
      await expect(readFile(ran)).rejects.toThrow(/ENOENT/);
    } finally {
      await close(leftOver.server);
    }
  });

  it("tells how a command started by --start ended on its own, and by a signal too", async () => {
    const closed = await listen(() => undefined);
    await close(closed.server);
    const port = new URL(closed.url).port;
    // Answers once, then exits with 3 (an implementation that dies during a run).
    const answersThenExits = `${JSON.stringify(process.execPath)} -e "require('node:http').createServer((q, r) => { r.end('{}'); setTimeout(() => process.exit(3), 20); }).listen(${port}, '127.0.0.1')"`;
    const started = await startImplementation(answersThenExits, `${closed.url}/conformance/clock`, { caCert: "", smtpUrl: "smtp://127.0.0.1:1", clock: { kind: "virtual" } }, 10_000);
    try {
      expect(started.ended()).toBeUndefined();
      await expect.poll(() => started.ended(), { timeout: 10_000 }).toBe("exited with code 3");
    } finally {
      await started.stop();
    }
    const killed = await certify([...serverArgs(closed.url), "--start", "kill -KILL $$", "--start-timeout", "5"]);
    expect(killed.code).toBe(2);
    expect(killed.stderr).toBe(`partner-platform: certify server: --start: the implementation was killed by SIGKILL before answering, and wrote nothing\n`);
  });

  it("says that an answer came but could not be read, not that nothing answers (an unasked 100 Continue, D52)", async () => {
    const continuing = await listen((_req, res) => {
      res.writeContinue();
      res.writeHead(404).end();
    });
    try {
      const api = await certify(["api", "--base-url", continuing.url, "--auth-url", continuing.url, "--client-id", "i", "--client-secret", "s"]);
      expect(api).toEqual({
        code: 2,
        stdout: "",
        stderr: `partner-platform: certify api: the API at ${continuing.url} answered, but the suite's HTTP client (undici) could not read the answer (UND_ERR_SOCKET: bad response): send no 100 Continue that was not asked for, nothing after a Content-Length value, and a body as long as its Content-Length (D52)\n`,
      });
    } finally {
      await close(continuing.server);
    }
  });

  it("says how to enable the Conformance Control API when it answers 404", async () => {
    await expect(certifyServer(target(counting.url))).rejects.toThrow(
      new SetupError(`the Conformance Control API is not enabled at ${counting.url}: start the implementation with its conformance switch (the reference server: --conformance)`),
    );
  });

  it("names --clock when the implementation runs another clock", async () => {
    await expect(certifyServer(target(server.url, { clock: { kind: "scaled", factor: 0.001 } }))).rejects.toThrow(
      new SetupError("the implementation's clock is virtual but --clock is scaled:0.001: pass --clock virtual, or start it with CONFORMANCE_CLOCK=scaled:0.001"),
    );
  });

  it("names --business-id when the implementation says the business is not the client's", async () => {
    await expect(certifyServer(target(server.url, { businessId: "4713" }), { only: ["event-id-has-evt-prefix"] })).rejects.toThrow(
      "--business-id and --other-business-id must be businesses of the client (--client-id) in the implementation's configuration (D27)",
    );
  });

  it("names --second-client-id/--second-client-secret when the token endpoint refuses the second client", async () => {
    await expect(certifyServer(target(server.url, { secondClientSecret: "wrong" }))).rejects.toThrow(
      new SetupError(`the token endpoint (${server.url}/oauth2/token) refused --second-client-id/--second-client-secret (HTTP 401 invalid_client): pass the credentials of a client the implementation knows`),
    );
  });

  it("names --client-id/--client-secret when the token endpoint refuses them (server and api suites)", async () => {
    const refused = `the token endpoint (${server.url}/oauth2/token) refused --client-id/--client-secret (HTTP 401 invalid_client): pass the credentials of a client the implementation knows`;
    await expect(certifyServer(target(server.url, { clientSecret: "wrong" }))).rejects.toThrow(new SetupError(refused));
    const api = await certify(["api", "--base-url", server.url, "--auth-url", server.url, "--client-id", client.clientId, "--client-secret", "wrong"]);
    expect(api).toEqual({ code: 2, stdout: "", stderr: `partner-platform: certify api: ${refused}\n` });
  });

  it("names the flag of a receiver port that is taken", async () => {
    const taken = await listen(() => undefined);
    try {
      const port = Number(new URL(taken.url).port);
      await expect(certifyServer(target(server.url, { receiverPort: port }))).rejects.toThrow(
        new SetupError(`cannot listen on 127.0.0.1:${port} for the suite's HTTPS receiver (EADDRINUSE): choose another --receiver-host/--receiver-port`),
      );
    } finally {
      await close(taken.server);
    }
  });

  it("receiver: a certificate that is not trusted stops the run before any check; the receiver records the failed handshake", async () => {
    const receiver = await startReceiver();
    try {
      const url = receiver.url("hook");
      await expect(certifyReceiver({ url, secret: "s" })).rejects.toThrow(
        new SetupError(
          `TLS handshake with ${url} failed: unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE): pass --ca FILE with the CA that signed the receiver's certificate, or --insecure`,
        ),
      );
      await receiver.waitFor(() => receiver.tlsErrors.length === 1, 5000, "the failed handshake");
      // Node's client checks the chain after the handshake and hangs up; others send an alert ("unknown ca").
      expect(receiver.tlsErrors[0]!.message).toMatch(/hang up|alert/);
      expect(receiver.deliveries).toHaveLength(0);
      const trusted = await certifyReceiver({ url, secret: " sé ", tls: { ca: receiver.pki.caCert } }, { only: ["rejects-missing-signature"] });
      expect(trusted.results.find((r) => r.id === "rejects-missing-signature")?.status).toBe("failed"); // the harness receiver acknowledges anything
      expect(receiver.deliveries).toHaveLength(2); // the event correctly signed, then the forgery
      expect(trusted.caveat).toBeUndefined();
    } finally {
      await receiver.close();
    }
  });

  it("receiver: --insecure runs, and every report says the certificate was not verified, as the service would", async () => {
    const receiver = await startReceiver();
    try {
      const url = receiver.url("hook");
      const report = await certifyReceiver({ url, secret: "s", tls: { insecure: true } }, { only: ["rejects-missing-signature"] });
      expect(report.caveat).toMatch(/^the receiver's certificate was not verified \(--insecure\); the service verifies it \(D6\)/);
      expect(formatSummary(report)).toMatch(/\nNOTE: the receiver's certificate was not verified/);
      expect(toJUnitXml(report)).toMatch(/<property name="caveat" value="the receiver's certificate was not verified/);
      expect(toHtml(report)).toContain('<p class="caveat"><b>Note:</b> the receiver&#39;s certificate was not verified');
    } finally {
      await receiver.close();
    }
  });

  it("receiver: a refused connection is one line", async () => {
    const closed = await listen(() => undefined);
    await close(closed.server);
    const result = await certify(["receiver", "--url", `${closed.url}/hook`, "--secret", "s"]);
    expect(result.stderr).toBe(`partner-platform: certify receiver: cannot connect to ${closed.url}/hook (ECONNREFUSED): is the receiver running, and is --url its address?\n`);
    expect(result.code).toBe(2);
  });

  it("receiver: deliveries that get no HTTP answer are reported as such, without the re-serialization hint", async () => {
    const dropping = await listen((req) => req.socket.destroy());
    try {
      const report = await certifyReceiver({ url: dropping.url, secret: "s" }, { only: ["verifies-raw-bytes-not-reserialized-json", "rejects-other-secret"] });
      const failed = report.results.filter((r) => r.status === "failed");
      expect(failed.map((r) => r.id)).toEqual(["verifies-raw-bytes-not-reserialized-json", "rejects-other-secret"]);
      for (const r of failed) {
        expect(r.message).toBe("deliveries got no complete HTTP answer (a connection, TLS or timeout failure, an answer that is not valid HTTP/1.1, or a 2xx whose body did not end)");
        expect(JSON.stringify(r.actual)).toMatch(/no answer \(other side closed/);
      }
    } finally {
      await close(dropping.server);
    }
  });
});

describe("secrets from the environment", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ clock: { mode: "virtual" }, log: () => undefined });
  });
  afterAll(async () => server.close());

  it("certify api takes the client from PARTNER_PLATFORM_CLIENT_ID/_SECRET, and a flag wins over the environment", async () => {
    const args = ["certify", "api", "--base-url", server.url, "--auth-url", server.url, "--only", "token-issued-for-valid-credentials"];
    const fromEnv = await partnerPlatform(args, { PARTNER_PLATFORM_CLIENT_ID: client.clientId, PARTNER_PLATFORM_CLIENT_SECRET: client.clientSecret });
    expect(fromEnv.stdout).toMatch(/^CERTIFIED: api suite .*: 1 passed, 0 failed, \d+ skipped/m);
    expect(fromEnv.code).toBe(0);
    const flagWins = await partnerPlatform([...args, "--client-secret", client.clientSecret], {
      PARTNER_PLATFORM_CLIENT_ID: client.clientId,
      PARTNER_PLATFORM_CLIENT_SECRET: "not-the-secret",
    });
    expect(flagWins.code).toBe(0);
    const emptyEnv = await partnerPlatform(args, { PARTNER_PLATFORM_CLIENT_ID: client.clientId, PARTNER_PLATFORM_CLIENT_SECRET: "" });
    expect(emptyEnv).toEqual({ code: 2, stdout: "", stderr: "partner-platform: --client-secret: must not be empty (PARTNER_PLATFORM_CLIENT_SECRET is set but empty)\n" });
  });

  it("certify api takes the limited client from PARTNER_PLATFORM_LIMITED_CLIENT_ID/_SECRET, and skips its check without one", async () => {
    const args = ["certify", "api", "--base-url", server.url, "--auth-url", server.url, "--only", "token-refuses-scopes-the-client-may-not-have", "--client-id", client.clientId, "--client-secret", client.clientSecret];
    const limited = await partnerPlatform(args, { PARTNER_PLATFORM_LIMITED_CLIENT_ID: limitedClient.clientId, PARTNER_PLATFORM_LIMITED_CLIENT_SECRET: limitedClient.clientSecret });
    expect(limited.stdout).toMatch(/^CERTIFIED: api suite .*: 1 passed, 0 failed, \d+ skipped/m);
    expect(limited.code).toBe(0);
    const without = await partnerPlatform(args, {});
    expect(without.stdout).toMatch(/SKIP\s+token-refuses-scopes-the-client-may-not-have[\s\S]*give --limited-client-id and --limited-client-secret/);
    const noSecret = await partnerPlatform([...args, "--limited-client-id", limitedClient.clientId], {});
    expect(noSecret).toMatchObject({ code: 2, stdout: "" });
    expect(noSecret.stderr).toMatch(/^partner-platform: --limited-client-secret: required/);
  });
});

describe("receiver certificates", () => {
  it("puts an IP address into the SAN as an IP, a name as a DNS name", async () => {
    const ca = await createTestCa();
    const ip = new X509Certificate((await issueServerCertificate(ca, "127.0.0.1")).cert);
    expect(ip.subjectAltName).toBe("IP Address:127.0.0.1");
    expect(ip.checkIssued(new X509Certificate(ca.caCert))).toBe(true);
    const name = new X509Certificate((await issueServerCertificate(ca, "receiver.test")).cert);
    expect(name.subjectAltName).toBe("DNS:receiver.test");
  });

  it("issues a chain that strict verifiers accept (OpenSSL's -x509_strict, Python 3.13's default): key identifiers on both, the CA's constraints critical", async () => {
    const ca = await createTestCa();
    const caCert = new x509.X509Certificate(ca.caCert);
    const server = new x509.X509Certificate((await issueServerCertificate(ca, "127.0.0.1")).cert);
    const caKeyId = caCert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
    expect(caKeyId).toMatch(/^[0-9a-f]{40}$/);
    expect(caCert.getExtension(x509.BasicConstraintsExtension)).toMatchObject({ ca: true, critical: true });
    expect(server.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId).toMatch(/^[0-9a-f]{40}$/);
    expect(server.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId).toBe(caKeyId);
    expect(await server.verify({ publicKey: caCert.publicKey, signatureOnly: true })).toBe(true);
  });

  it("listens on the host and port asked for, with a certificate for that host", async () => {
    const probe = await listen(() => undefined);
    const port = Number(new URL(probe.url).port);
    await close(probe.server);
    const receiver = await startReceiver({ host: "127.0.0.1", port });
    try {
      expect(receiver.url("hook")).toBe(`https://127.0.0.1:${port}/hook`);
      expect(new X509Certificate(receiver.pki.cert).checkIP("127.0.0.1")).toBe("127.0.0.1");
    } finally {
      await receiver.close();
    }
  });

  it("keeps the CA and its key in --pki-dir, saying when it made one; an old folder without the key gets a new CA and a notice", async () => {
    const pkiDir = path.join(dir, "pki");
    const notices: string[] = [];
    const first = await loadOrCreateCa(pkiDir, (line) => notices.push(line));
    const second = await loadOrCreateCa(pkiDir, (line) => notices.push(line));
    expect(second).toEqual(first);
    expect(notices.splice(0)).toEqual([
      `made a CA in ${path.join(pkiDir, "ca.pem")} (the first use of ${pkiDir}); the implementation must trust it (restart it if it runs already)`,
    ]);
    expect(await readFile(path.join(pkiDir, "ca-key.pem"), "utf8")).toBe(first.caKey);

    const oldDir = path.join(dir, "old-pki");
    const old = await createTestCa();
    await loadOrCreateCa(oldDir, () => undefined);
    await writeFile(path.join(oldDir, "ca.pem"), old.caCert);
    await rm(path.join(oldDir, "ca-key.pem"));
    const renewed = await loadOrCreateCa(oldDir, (line) => notices.push(line));
    expect(renewed.caCert).not.toBe(old.caCert);
    expect(await readFile(path.join(oldDir, "ca.pem"), "utf8")).toBe(renewed.caCert);
    expect(notices).toEqual([
      `${oldDir} has no ca-key.pem (made by an earlier version): made a new CA in ${path.join(oldDir, "ca.pem")}; the implementation must trust it (restart it if it runs already)`,
    ]);
  });

  it("renews a kept CA without a Subject Key Identifier (made by an earlier version), with a notice", async () => {
    const keptDir = path.join(dir, "pki-without-ski");
    const keys = (await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
    const withoutSki = await x509.X509CertificateGenerator.createSelfSigned({
      name: "CN=an earlier CA",
      keys: keys as unknown as CryptoKeyPairOfX509,
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
      notAfter: new Date(Date.now() + 30 * 24 * 3600 * 1000),
      extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
    });
    await mkdir(keptDir, { recursive: true });
    await writeFile(path.join(keptDir, "ca.pem"), withoutSki.toString("pem"));
    await writeFile(path.join(keptDir, "ca-key.pem"), x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey), "PRIVATE KEY"));
    const notices: string[] = [];
    const renewed = await loadOrCreateCa(keptDir, (line) => notices.push(line));
    expect(new x509.X509Certificate(renewed.caCert).getExtension(x509.SubjectKeyIdentifierExtension)).not.toBeNull();
    expect(notices).toEqual([
      `the CA in ${path.join(keptDir, "ca.pem")} has no Subject Key Identifier, which strict verifiers (Python 3.13's default) require: made a new CA in ${path.join(keptDir, "ca.pem")}; the implementation must trust it (restart it if it runs already)`,
    ]);
  });
});

type CryptoKeyPairOfX509 = Parameters<typeof x509.X509CertificateGenerator.createSelfSigned>[0]["keys"];

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
