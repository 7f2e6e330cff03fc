// Proof that the API certification certifies: the reference server passes every check; the Prism mock's
// known gaps and each broken variant of the reference server fail exactly the checks listed for them in
// conformance/api/expected-failures.json (a stale entry fails as surely as an unlisted failure).
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { brokenApis, legalApis, startBrokenApi } from "../../conformance/api/broken.js";
import { certifyApi, defaultRuns } from "../../conformance/api/index.js";
import type { SuiteReport } from "../../conformance/framework/check.js";
import { compareWithExpected, loadExpectedFailures } from "../../conformance/framework/expected-failures.js";
import { formatResult } from "../../conformance/framework/report.js";
import { packageRoot } from "../../src/paths.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import type { ClientConfig } from "../../src/server/config.js";
import { shareOf, takesTheRest } from "../share.js";

const expected = loadExpectedFailures(path.join(packageRoot, "conformance/api/expected-failures.json"));
const [client, secondClient, limitedClient] = loadConfig().clients as [ClientConfig, ClientConfig, ClientConfig];
const cli = path.join(packageRoot, "src/cli/main.ts");

/**
 * Without a second client the token lifetime check waits most of a minute: the variants' runs skip it but
 * the one about a token's lifetime. The reference's run and the legal fronts that shape token answers hold it.
 */
const lifetimeCheck = "token-still-works-a-minute-later";
const certify = (url: string, second = false, skip: readonly string[] = [lifetimeCheck]) =>
  certifyApi(
    {
      baseUrl: url,
      authUrl: url,
      clientId: client.clientId,
      clientSecret: client.clientSecret,
      limitedClientId: limitedClient.clientId,
      limitedClientSecret: limitedClient.clientSecret,
      ...(second ? { secondClientId: secondClient.clientId, secondClientSecret: secondClient.clientSecret } : {}),
    },
    { skip },
  );
/** Broken fronts whose fault only the token lifetime check sees. */
const aboutLifetime = new Set(["tokens-die-after-30-seconds"]);
/** Fronts whose fault only the check that locks out a second client sees: certified with it (the reference too), each run then waits about a minute for the lock-out to end. */
const withSecondClient = new Set(["real-clients-failures-not-counted", "success-resets-failure-count", "right-secret-passes-the-throttle", "throttle-skips-basic", "retry-after-half-the-window-left", "retry-after-always-60", "throttle-window-of-5-seconds", "real-clients-get-twice-the-budget", "lockout-revokes-tokens"]);
/** Fronts whose fault only a second client's tokens show: certified with the second client, without the check that locks it out. */
const aboutTwoClients = new Set(["hands-back-tokens-by-scope-only", "caps-tokens-over-all-clients"]);
/** Legal fronts that shape token answers: the check that locks out a second client is certified behind each too. */
const shapingTokenAnswers = ["limits-token-requests-in-bursts-of-5", "refuses-one-token-request-in-15", "refuses-one-token-request-in-6-of-a-client", "throttle-windows-aligned-to-the-clock", "throttle-window-ends-mid-check", "real-client-window-ends-mid-try", "hands-back-live-tokens"] as const;
const failures = (report: SuiteReport) => report.results.filter((r) => r.status === "failed").map(formatResult).join("\n");

function expectExactly(report: SuiteReport, variant: string): void {
  const entry = expected.variants[variant];
  expect(entry, `no entry for ${variant} in conformance/api/expected-failures.json`).toBeDefined();
  expect(compareWithExpected(report, entry!), failures(report)).toEqual({ unexpected: [], stale: [] });
}

async function freePort(): Promise<number> {
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Resolves once `text` appears on the child's stdout. */
function printed(child: ChildProcessWithoutNullStreams, text: string): Promise<void> {
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      if (out.includes(text)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code} before printing "${text}": ${out}`)));
  });
}

// No DNS check of webhook hosts: this sandbox's resolver stalls 5 s on a few percent of lookups, and the
// suite's generated hosts (hooks.example.com) are public-looking anyway. A virtual clock: no deliveries.
const ownServer = (trustProxy?: string[]) => startServer({ clock: { mode: "virtual" }, allowPrivateWebhooks: true, log: () => undefined, trustProxy });
/** The legal fronts the reference is started behind as a deployment would be: trusting the front, the proxy it stands for. */
const trustsTheFront = new Set(["appends-x-forwarded-for"]);
let server: RunningServer;
beforeAll(async () => {
  // Each variant gets a server of its own (about a second to start): a run spends two of the client's ten
  // failed authentications a minute (D30), and a server shared by the variants throttled the client every
  // fifth run, for up to a minute.
  server = await ownServer();
});
afterAll(async () => server.close());

describe("API certification", () => {
  // Run in shares side by side (vitest.config.ts): the variants split among them, the other tests in the first.
  it.runIf(takesTheRest())("certifies the reference server; generated-input checks say how many inputs they tried", { timeout: 150_000 }, async () => {
    const report = await certify(server.url, true, []);
    expect(report.results.find((r) => r.id === "token-throttles-a-real-clients-wrong-secrets")?.note).toMatch(/^waited \d+ s in all for the second client's lock-outs to end$/);
    expect(report.results.filter((r) => r.status !== "passed").map(formatResult)).toEqual([]);
    const generated = report.results.filter((r) => r.id.includes("-generated-"));
    expect(generated.length).toBeGreaterThanOrEqual(6);
    for (const r of generated) expect(r.note).toMatch(new RegExp(`^${defaultRuns} generated inputs, seed \\d+$`));
  });

  it.runIf(takesTheRest())("lists the Prism mock and every broken variant in the expected-failures file, and nothing else", () => {
    expect(Object.keys(expected.variants).sort()).toEqual(["prism-mock", ...brokenApis.map((b) => b.id)].sort());
  });

  it.each(shareOf(brokenApis).map((b) => [b.id] as const))("catches the broken variant %s with the checks that name its fault", { timeout: 150_000 }, async (id) => {
    const own = await ownServer();
    const front = await startBrokenApi(own.url, id);
    try {
      const skip = [...(aboutLifetime.has(id) ? [] : [lifetimeCheck]), ...(aboutTwoClients.has(id) ? ["token-throttles-a-real-clients-wrong-secrets"] : [])];
      expectExactly(await certify(front.url, withSecondClient.has(id) || aboutTwoClients.has(id), skip), id);
    } finally {
      await front.close();
      await own.close();
    }
  });

  // What the contract leaves to an implementation: whose businesses are whose (D27) and rate limits (D18).
  // behind-one-address has a test of its own: it throttles the address every client of its server comes from.
  it.each(shareOf(legalApis.filter((b) => b.id !== "behind-one-address")).map((b) => [b.id] as const))("certifies the legal variant %s", async (id) => {
    const own = await ownServer(trustsTheFront.has(id) ? ["127.0.0.1"] : undefined);
    const front = await startBrokenApi(own.url, id);
    try {
      const report = await certify(front.url);
      expect(failures(report)).toBe("");
      // Under a rate limit of the deployment that also answers successes (D18), D30's budget per address cannot be seen.
      const perAddress = report.results.find((r) => r.id === "token-throttles-failed-authentication-per-address");
      if (["limits-token-requests-per-address", "limits-failed-authentications-in-bursts", "limits-token-requests-in-bursts-of-5", "refuses-one-token-request-in-15", "refuses-one-token-request-in-6-of-a-client"].includes(id)) {
        expect(perAddress).toMatchObject({ status: "skipped", message: expect.stringMatching(/^a rate limit of the deployment answered 429 after about \d+ token requests/) });
      }
      else expect(perAddress?.status).toBe("passed");
      // The per-client check met what the variant is about: a rate limit it waited out, a window that ended during its first try.
      const perClient = report.results.find((r) => r.id === "token-throttles-failed-authentication");
      if (id === "limits-token-requests-in-bursts-of-5") expect(perClient?.note).toMatch(/a rate limit of the deployment \(D18\) answered 429 to every client's token requests meanwhile: waited \d+ s in all/);
      if (id === "throttle-window-ends-mid-check") expect(perClient?.note).toMatch(/^the first client id was not throttled after 10 failures/);
    } finally {
      await front.close();
      await own.close();
    }
  });

  // Each waits about a minute for the second client's lock-out to end, which ages the first token: together.
  it.concurrent.each(shareOf(shapingTokenAnswers).map((id) => [id] as const))("certifies a real client's throttle and a minute-old token behind the legal variant %s", { timeout: 150_000 }, async (id) => {
    const own = await ownServer();
    const front = await startBrokenApi(own.url, id);
    try {
      const only = ["token-issued-for-valid-credentials", "token-throttles-failed-authentication", "token-throttles-a-real-clients-wrong-secrets", lifetimeCheck];
      const report = await certifyApi(
        { baseUrl: front.url, authUrl: front.url, clientId: client.clientId, clientSecret: client.clientSecret, secondClientId: secondClient.clientId, secondClientSecret: secondClient.clientSecret },
        { only },
      );
      expect(failures(report)).toBe("");
      expect(only.map((check) => report.results.find((r) => r.id === check)?.status)).toEqual(["passed", "passed", "passed", "passed"]);
    } finally {
      await front.close();
      await own.close();
    }
  });

  it.runIf(takesTheRest())("certifies an implementation that sees one address for all (behind-one-address), and waits out the throttle of its own address", { timeout: 150_000 }, async () => {
    // A server of its own: for up to a minute after the check, it refuses every token request from 127.0.0.1.
    const own = await ownServer();
    const front = await startBrokenApi(own.url, "behind-one-address");
    try {
      const report = await certifyApi({ baseUrl: front.url, authUrl: front.url, clientId: client.clientId, clientSecret: client.clientSecret }, { only: ["token-rejects-wrong-secret", "token-throttles-failed-authentication-per-address"] });
      expect(failures(report)).toBe("");
      expect(report.results.find((r) => r.id === "token-throttles-failed-authentication-per-address")?.note).toMatch(/^the implementation saw the suite's two addresses as one .*: waited \d+ s for its window to end$/);
      // Left as found: the client gets a token again.
      const again = await fetch(`${front.url}/oauth2/token`, { method: "POST", body: new URLSearchParams({ grant_type: "client_credentials", client_id: client.clientId, client_secret: client.clientSecret }) });
      expect(again.status).toBe(200);
    } finally {
      await front.close();
      await own.close();
    }
  });

  describe.runIf(takesTheRest())("against the Prism mock (partner-platform mock)", () => {
    let mock: ChildProcessWithoutNullStreams;
    let origin: string;

    beforeAll(async () => {
      const port = await freePort();
      origin = `http://127.0.0.1:${port}`;
      mock = spawn(process.execPath, ["--import", "tsx", cli, "mock", "--port", String(port)], { cwd: packageRoot });
      await printed(mock, `API (base_url): ${origin}`);
    });

    afterAll(async () => {
      if (mock.exitCode === null) {
        mock.kill("SIGINT");
        await once(mock, "exit");
      }
    });

    it("names its gaps (token validity, scopes, body limit, static error bodies, unknown members) as failures", async () => {
      expectExactly(await certify(origin), "prism-mock");
    });
  });

  it.runIf(takesTheRest())("certify api prints a row per check, writes JSON and JUnit, and exits 1 on a failure", async () => {
    const front = await startBrokenApi(server.url, "no-scope-check");
    const dir = await mkdtemp(path.join(tmpdir(), "certify-api-"));
    try {
      const only = ["token-issued-for-valid-credentials", "search-businesses-requires-scope", "search-businesses-generated-valid-inputs-accepted"];
      const child = spawn(
        process.execPath,
        [
          "--import", "tsx", cli, "certify", "api",
          "--base-url", front.url, "--auth-url", front.url,
          "--client-id", client.clientId, "--client-secret", client.clientSecret,
          "--only", only.join(","), "--runs", "5", "--seed", "3",
          "--json", path.join(dir, "api.json"), "--junit", path.join(dir, "api.xml"),
        ],
        { cwd: packageRoot },
      );
      let stdout = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
      const [code] = (await once(child, "exit")) as [number];
      expect(code).toBe(1);
      expect(stdout).toMatch(/^PASS {2}token-issued-for-valid-credentials .*§4\.1, §5\.1, D11$/m);
      expect(stdout).toMatch(/^FAIL {2}search-businesses-requires-scope .*§4\.2, D12\n.*expected HTTP 403, got 200/m);
      expect(stdout).toContain("(5 generated inputs, seed 3)");
      expect(stdout).toMatch(/^NOT CERTIFIED: api suite against .*: 2 passed, 1 failed, \d+ skipped/m);
      const json = JSON.parse(await readFile(path.join(dir, "api.json"), "utf8")) as SuiteReport;
      expect(json.results.filter((r) => r.status !== "skipped").map((r) => [r.id, r.status])).toEqual([
        [only[0], "passed"],
        [only[1], "failed"],
        [only[2], "passed"],
      ]);
      expect(await readFile(path.join(dir, "api.xml"), "utf8")).toContain('failures="1"');
    } finally {
      await front.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
