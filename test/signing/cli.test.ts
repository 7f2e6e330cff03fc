// The verify and send commands as a user runs them.
import { execFile, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { loadSigningVectors } from "../../conformance/vectors/index.js";
import { parseEvent, eventNames, loadDeliveryRules } from "@partner-platform/sdk";
import { packageRoot } from "../../src/paths.js";

const cli = ["--import", "tsx", path.join(packageRoot, "src/cli/main.ts")];
const run = promisify(execFile);

async function partnerPlatform(args: string[], stdin?: Buffer, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...cli, ...args], { cwd: packageRoot, env: { ...process.env, ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (t: string) => (stdout += t));
  child.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
  child.stdin.end(stdin);
  const [code] = (await once(child, "exit")) as [number];
  return { code, stdout, stderr };
}

describe("partner-platform verify", () => {
  const vectors = loadSigningVectors().filter((v) => ["pretty-printed", "reserialized-body-signature", "uppercase-hex"].includes(v.id));

  it.each(vectors.map((v) => [v.id, v] as const))("%s from stdin", async (_id, v) => {
    const result = await partnerPlatform(["verify", "--secret", v.secret, "--signature", v.header!, "-"], v.body);
    expect(result.code).toBe(v.valid ? 0 : 1);
    expect(result.stdout).toMatch(v.valid ? /^valid\n$/ : /^invalid: .+\n$/);
  });

  it("reads a file byte for byte", async () => {
    const [v] = vectors;
    const dir = await mkdtemp(path.join(tmpdir(), "verify-"));
    try {
      await writeFile(path.join(dir, "body.json"), v!.body);
      const { stdout } = await run(process.execPath, [...cli, "verify", "--secret", v!.secret, "--signature", v!.header!, path.join(dir, "body.json")]);
      expect(stdout).toBe("valid\n");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("takes the secret from PARTNER_PLATFORM_WEBHOOK_SECRET, and --secret wins over it", async () => {
    const [v] = vectors; // pretty-printed: valid
    const fromEnv = await partnerPlatform(["verify", "--signature", v!.header!, "-"], v!.body, { PARTNER_PLATFORM_WEBHOOK_SECRET: v!.secret });
    expect(fromEnv).toEqual({ code: 0, stdout: "valid\n", stderr: "" });
    const flagWins = await partnerPlatform(["verify", "--secret", v!.secret, "--signature", v!.header!, "-"], v!.body, { PARTNER_PLATFORM_WEBHOOK_SECRET: "another-secret" });
    expect(flagWins.stdout).toBe("valid\n");
    const emptyEnv = await partnerPlatform(["verify", "--signature", v!.header!, "-"], v!.body, { PARTNER_PLATFORM_WEBHOOK_SECRET: "" });
    expect(emptyEnv.code).toBe(2);
    expect(emptyEnv.stderr.split("\n")[0]).toMatch(/--secret.*from env 'PARTNER_PLATFORM_WEBHOOK_SECRET' is invalid\. must not be empty/);
  });

  it("exits 2 with one line when an option is missing", async () => {
    const result = await partnerPlatform(["verify", "--secret", "s"]);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toMatch(/required option '--signature <hex>' not specified/);
  });

  it("exits 2, not 1 (invalid), when the body cannot be read", async () => {
    const result = await partnerPlatform(["verify", "--secret", "s", "--signature", "0".repeat(64), path.join(packageRoot, "no-such-body.json")]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/^partner-platform: cannot read the body from .*no-such-body\.json: ENOENT.*\n$/);
  });
});

describe("partner-platform send", () => {
  let receiver: Receiver;
  let dir: string;
  let caFile: string;
  const secret = "whsec-send-test-0123456789";
  const header = loadDeliveryRules().signatureHeader.toLowerCase();

  beforeAll(async () => {
    receiver = await startReceiver();
    dir = await mkdtemp(path.join(tmpdir(), "send-"));
    caFile = path.join(dir, "ca.pem");
    await writeFile(caFile, receiver.pki.caCert);
  });
  afterAll(async () => {
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each(eventNames.map((n) => [n] as const))("delivers a signed, schema-valid %s over HTTPS with --ca", async (event) => {
    const endpoint = `send-${event}`;
    const result = await partnerPlatform(["send", event, "--url", receiver.url(endpoint), "--secret", secret, "--business-id", "4799", "--ca", caFile]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^#1 200 [0-9.]+ ms$/m);
    const [delivery] = receiver.at(endpoint);
    expect(delivery!.method).toBe("POST");
    expect(delivery!.headers["content-type"]).toBe("application/json");
    expect(delivery!.headers[header]).toBe(createHmac("sha256", secret).update(delivery!.body).digest("hex"));
    const parsed = parseEvent(delivery!.body);
    expect(parsed.ok && parsed.event.event).toBe(event);
    expect(parsed.ok && (parsed.event.data as { businessID: string }).businessID).toBe("4799");
  });

  it("takes the secret from PARTNER_PLATFORM_WEBHOOK_SECRET", async () => {
    const result = await partnerPlatform(["send", "lead.created", "--url", receiver.url("env"), "--ca", caFile], undefined, { PARTNER_PLATFORM_WEBHOOK_SECRET: secret });
    expect(result.code).toBe(0);
    const [delivery] = receiver.at("env");
    expect(delivery!.headers[header]).toBe(createHmac("sha256", secret).update(delivery!.body).digest("hex"));
  });

  it("sends the same event id on every --repeat, and fails on a non-2xx answer", async () => {
    receiver.script("repeat", [answers.ok, answers.status(500)]);
    const result = await partnerPlatform(["send", "lead.created", "--url", receiver.url("repeat"), "--secret", secret, "--repeat", "2", "--ca", caFile]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/#2 500 /);
    const ids = receiver.at("repeat").map((d) => (JSON.parse(d.body.toString()) as { id: string }).id);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(ids[1]);
  });

  it("refuses an untrusted certificate unless --insecure", async () => {
    const refused = await partnerPlatform(["send", "lead.created", "--url", receiver.url("tls"), "--secret", secret]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/#1 no answer \(.*certificate.*\)/);
    const accepted = await partnerPlatform(["send", "lead.created", "--url", receiver.url("tls"), "--secret", secret, "--insecure"]);
    expect(accepted.code).toBe(0);
  });

  it("delivers over plain HTTP the exact bytes it signed, the same bytes on every --repeat", async () => {
    const received: { headers: IncomingHttpHeaders; body: Buffer }[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks) });
        res.writeHead(202).end();
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const result = await partnerPlatform(["send", "review.created", "--url", url, "--secret", secret, "--repeat", "3"]);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^review\.created evt_[0-9A-Za-z]+ -> http:.*\n#1 202 .*\n#2 202 .*\n#3 202 [0-9.]+ ms\n$/);
      expect(received).toHaveLength(3);
      for (const r of received) {
        expect(r.body.equals(received[0]!.body)).toBe(true);
        expect(r.headers[header]).toBe(createHmac("sha256", secret).update(r.body).digest("hex"));
        expect(r.headers["content-length"]).toBe(String(r.body.length));
      }
    } finally {
      server.close();
    }
  });

  it("validates --data against the event's schema before sending anything", async () => {
    const file = path.join(dir, "data.json");
    await writeFile(file, JSON.stringify({ leadID: "abc", businessID: "4711" }));
    const result = await partnerPlatform(["send", "lead.created", "--url", receiver.url("data"), "--secret", secret, "--data", file, "--ca", caFile]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('/data/leadID: must match pattern "^[0-9]{1,19}$"');
    expect(result.stderr).toContain("/data: must have required property 'request'");
    expect(receiver.at("data")).toHaveLength(0);
  });

  it("refuses a --data file that is not UTF-8 with one line, sending nothing (D29)", async () => {
    const file = path.join(dir, "latin1.json");
    await writeFile(file, Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]));
    const result = await partnerPlatform(["send", "lead.created", "--url", receiver.url("latin1"), "--secret", secret, "--data", file, "--ca", caFile]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`partner-platform: --data ${file}: not valid UTF-8\n`);
    expect(receiver.at("latin1")).toHaveLength(0);
  });

  it("names the eight events when given another", async () => {
    const result = await partnerPlatform(["send", "lead.create", "--url", receiver.url("x"), "--secret", secret]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`partner-platform: unknown event "lead.create"; use one of: ${eventNames.join(", ")}\n`);
  });
});

describe("partner-platform usage errors", () => {
  // Commander's own messages begin "error: " and put a suggestion on a second line; every usage error is one line, exit status 2.
  it.each([
    [["certify", "server", "--base-uri", "x"], "partner-platform: unknown option '--base-uri' (Did you mean --base-url?)"],
    [["serve", "--prot", "1"], "partner-platform: unknown option '--prot' (Did you mean --port?)"],
    [["serve", "--port", "abc"], "partner-platform: option '--port <port>' argument 'abc' is invalid. a port is a whole number from 0 to 65535"],
    [["frobnicate"], "partner-platform: unknown command 'frobnicate' (run with --help for usage)"],
  ])("%j", async (args, line) => {
    expect(await partnerPlatform(args)).toEqual({ code: 2, stdout: "", stderr: `${line}\n` });
  });
});
