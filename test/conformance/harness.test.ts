import { lookup } from "node:dns/promises";
import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import nodemailer from "nodemailer";
import { Agent, request } from "undici";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startSmtpSink } from "../../conformance/harness/smtp-sink.js";
import { createControl } from "../../conformance/server/control.js";

describe("HTTPS receiver", () => {
  let receiver: Receiver;
  let agent: Agent;
  beforeAll(async () => {
    receiver = await startReceiver();
    agent = new Agent({ connect: { ca: receiver.pki.caCert } });
  });
  afterAll(async () => {
    await agent.close();
    await receiver.close();
  });

  const post = (endpoint: string, body: Buffer, timeoutMs = 5000) =>
    request(receiver.url(endpoint), {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "x-test": "1" },
      dispatcher: agent,
      signal: AbortSignal.timeout(timeoutMs),
    });

  it("is trusted through the per-run CA only, and records the exact bytes and headers", async () => {
    const body = Buffer.from('{ "b": 1,\n  "a": "\\u00e9" }');
    const res = await post("hook-a", body);
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    const [delivery] = receiver.at("hook-a");
    expect(delivery!.body.equals(body)).toBe(true);
    expect(delivery!.headers["x-test"]).toBe("1");
    await expect(request(receiver.url("hook-a"), { method: "POST", body: "{}" })).rejects.toThrow(/certificate/);
  });

  it("answers each attempt as scripted, then the fallback", async () => {
    receiver.script("hook-b", [answers.status(500), answers.redirect("https://elsewhere.example/")], answers.status(204));
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post("hook-b", Buffer.from("{}"));
      statuses.push(res.statusCode);
      await res.body.dump();
    }
    expect(statuses).toEqual([500, 307, 204]);
    expect(receiver.at("hook-b").map((d) => d.answer)).toEqual([answers.status(500), answers.redirect("https://elsewhere.example/"), answers.status(204)]);
  });

  it("can close the connection or hang until the sender gives up, and records when the sender gave up", async () => {
    receiver.script("hook-c", [answers.close, answers.hang]);
    await expect(post("hook-c", Buffer.from("{}"))).rejects.toThrow();
    await expect(post("hook-c", Buffer.from("{}"), 200)).rejects.toThrow(/abort|timeout/i);
    const [closed, hung] = receiver.at("hook-c");
    expect(closed!.abandonedAt).toBeUndefined();
    await receiver.waitFor(() => hung!.abandonedAt !== undefined, 5000, "the sender's giving up");
    expect(hung!.answeredAt).toBeUndefined();
    expect(hung!.abandonedAt! - hung!.arrivedAt).toBeGreaterThan(0);
  });

  it("records when it began writing an answer, never after it was handed over", async () => {
    receiver.script("hook-e", [answers.status(500)]);
    const res = await post("hook-e", Buffer.from("{}"));
    await res.body.dump();
    const [d] = receiver.at("hook-e");
    await receiver.waitFor(() => d!.answeredAt !== undefined, 5000, "the answer handed over");
    expect(d!.answeringAt).toBeGreaterThanOrEqual(d!.arrivedAt);
    expect(d!.answeringAt).toBeLessThanOrEqual(d!.answeredAt!);
  });

  it("waitFor resolves on arrival and rejects on timeout", async () => {
    const waiting = receiver.waitFor((d) => d.some((x) => x.endpoint === "hook-d"), 5000, "hook-d");
    const res = await post("hook-d", Buffer.from("{}"));
    await res.body.dump();
    await expect(waiting).resolves.toBeUndefined();
    await expect(receiver.waitFor(() => false, 20, "nothing")).rejects.toThrow("timed out after 20 ms waiting for nothing");
  });
});

describe("SMTP sink", () => {
  it("captures a message with its envelope", async () => {
    const sink = await startSmtpSink();
    try {
      const transport = nodemailer.createTransport(sink.url);
      await transport.sendMail({ from: "platform@example.com", to: "partner@example.com", subject: "Webhook disabled", text: "hi" });
      await sink.waitFor((m) => m.length === 1, 5000, "one message");
      expect(sink.messages[0]).toMatchObject({ from: "platform@example.com", to: ["partner@example.com"] });
      expect(sink.messages[0]!.raw).toContain("Subject: Webhook disabled");
    } finally {
      await sink.close();
    }
  });
});

describe("HTTPS receiver on a name", () => {
  it.each([
    ["every address the name resolves to (localhost: 127.0.0.1, and ::1 where the machine has it)", undefined],
    ["each of two addresses, one port (a name with two: 127.0.0.1 and 127.0.0.2)", ["127.0.0.1", "127.0.0.2"]],
  ])("listens at %s, and takes deliveries at each", async (_, given) => {
    const receiver = await startReceiver({ host: "localhost", ...(given ? { addresses: given } : {}) });
    const addresses = given ?? (await lookup("localhost", { all: true })).map((a) => a.address);
    const port = new URL(receiver.url("x")).port;
    try {
      for (const address of addresses) {
        const agent = new Agent({ connect: { ca: receiver.pki.caCert, servername: "localhost" } });
        const res = await request(`https://${address.includes(":") ? `[${address}]` : address}:${port}/at-${address}`, { method: "POST", body: "{}", headers: { host: `localhost:${port}` }, dispatcher: agent });
        await res.body.dump();
        await agent.close();
        expect(res.statusCode).toBe(200);
      }
      expect(receiver.deliveries.map((d) => d.endpoint)).toEqual(addresses.map((address) => `at-${address}`));
    } finally {
      await receiver.close();
    }
  });
});

describe("Control API client", () => {
  it("says which call did not answer in time, and that it gave up, instead of undici's bare 'fetch failed'", async () => {
    // Reads the request, never answers: an advance that takes longer than the suite waits.
    const silent = createServer(() => undefined).listen(0, "127.0.0.1");
    await new Promise((resolve) => silent.once("listening", resolve));
    const { port } = silent.address() as { port: number };
    try {
      await expect(createControl(`http://127.0.0.1:${port}`, 0.3).advance(60)).rejects.toThrow("control API: POST /conformance/clock/advance did not answer within 0.3 s (D24)");
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });
});
