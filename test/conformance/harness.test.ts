import { afterAll, beforeAll, describe, expect, it } from "vitest";
import nodemailer from "nodemailer";
import { Agent, request } from "undici";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startSmtpSink } from "../../conformance/harness/smtp-sink.js";

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
