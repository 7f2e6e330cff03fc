// src/sender.ts from code (the receiver certification reuses it): envelopes built from the spec's
// examples, and single delivery attempts against real local servers.
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { parseEvent, eventNames, loadDeliveryRules } from "@partner-platform/sdk";
import { buildEnvelope, connectionTo, deliver, tlsDispatcher, tlsTrust } from "../../src/sender.js";
import { eventExample } from "../../src/spec.js";

const rules = loadDeliveryRules();
const secret = "whsec-sender-test-0123456789";

describe("buildEnvelope", () => {
  it.each(eventNames.map((n) => [n] as const))("%s: schema-valid, fresh evt_ id, UTC timestamp, the example's data", (event) => {
    const now = Date.UTC(2027, 0, 2, 3, 4, 5, 678);
    const envelope = buildEnvelope(event, { now });
    expect(parseEvent(JSON.stringify(envelope)).ok).toBe(true);
    expect(envelope.event).toBe(event);
    expect(envelope.id).toMatch(/^evt_[0-9A-Za-z]{8,64}$/);
    expect(envelope.id).not.toBe(buildEnvelope(event, { now }).id);
    expect(envelope.timestamp).toBe("2027-01-02T03:04:05Z");
    expect(envelope.data).toEqual(eventExample(event).data);
  });

  it("sets data.businessID and replaces data, validating the result", () => {
    expect((buildEnvelope("review.created", { businessId: "9001" }).data as { businessID: string }).businessID).toBe("9001");
    const data = { ...eventExample("lead.updated").data, status: "hired" as const };
    expect(buildEnvelope("lead.updated", { data }).data).toEqual(data);
    expect(() => buildEnvelope("lead.updated", { data: { ...data, status: "won" } })).toThrow(/^the lead\.updated event does not match its schema:\n\/data\/status: /);
    expect(() => buildEnvelope("lead.updated", { businessId: "x" })).toThrow(/\/data\/businessID: must match pattern/);
  });
});

describe("deliver over HTTP", () => {
  const received: { method: string; headers: IncomingHttpHeaders; body: Buffer }[] = [];
  let answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(204).end();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ method: req.method!, headers: req.headers, body: Buffer.concat(chunks) });
      answer(req, res);
    });
  });
  let url: string;

  beforeAll(async () => {
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it("gives a header undici will not send as the attempt's error, sending nothing", async () => {
    const before = received.length;
    const outcome = await deliver(url, Buffer.from("{}"), { secret: "s", header: "line\r\nbreak" });
    expect(outcome).toMatchObject({ ok: false, error: expect.stringMatching(/invalid x-service-signature header/) });
    expect(received.length).toBe(before);
  });

  it("sends the exact bytes with the spec's method, content type and signature header", async () => {
    // Bytes JSON.stringify would not produce: they must arrive, and be signed, as given.
    const body = Buffer.from(`{ "id" : "evt_0123456789",\r\n"x": 1.0 }`);
    received.length = 0;
    const outcome = await deliver(url, body, { secret });
    expect(outcome).toMatchObject({ ok: true, status: 204 });
    expect(outcome.latencyMs).toBeGreaterThan(0);
    expect(received).toHaveLength(1);
    expect(received[0]!.method).toBe(rules.method);
    expect(received[0]!.headers["content-type"]).toBe(rules.contentType);
    expect(received[0]!.body.equals(body)).toBe(true);
    expect(received[0]!.headers[rules.signatureHeader.toLowerCase()]).toBe(createHmac("sha256", secret).update(body).digest("hex"));
  });

  it("sends another header, or none, when asked (for testing receivers)", async () => {
    received.length = 0;
    await deliver(url, Buffer.from("{}"), { secret, header: "sha256=x" });
    await deliver(url, Buffer.from("{}"), { secret, header: null });
    expect(received.map((r) => r.headers[rules.signatureHeader.toLowerCase()])).toEqual(["sha256=x", undefined]);
  });

  it("counts a 3xx as a failure and does not follow it", async () => {
    answer = (_req, res) => res.writeHead(307, { location: `${url}/elsewhere` }).end();
    received.length = 0;
    const outcome = await deliver(url, Buffer.from("{}"), { secret });
    expect(outcome).toMatchObject({ ok: false, status: 307 });
    expect(received).toHaveLength(1);
  });

  it("gives up at the attempt timeout when no answer comes", async () => {
    answer = () => undefined; // never answers
    const outcome = await deliver(url, Buffer.from("{}"), { secret, timeoutMs: 200 });
    expect(outcome).toMatchObject({ ok: false, error: "no answer within 0.2 s" });
    expect(outcome.status).toBeUndefined();
  });

  it("says what is likeliest behind undici's \"bad response\": a 100 Continue the delivery did not ask for (D52)", async () => {
    answer = (_req, res) => {
      res.writeContinue();
      res.writeHead(204).end();
    };
    const outcome = await deliver(url, Buffer.from("{}"), { secret });
    expect(outcome).toMatchObject({ ok: false, error: "bad response, UND_ERR_SOCKET: not one HTTP/1.1 answer (an unasked 100 Continue is refused, D52)" });
  });

  it("counts a 2xx whose body stops short of its Content-Length as a failure (D6); a refusal cut short keeps its status", async () => {
    for (const [line, expected] of [
      ["200 OK", { ok: false, error: expect.stringMatching(/^HTTP 200, but its body did not end \(.*\): an answer is complete when its body has ended \(D6\)$/) }],
      ["401 Unauthorized", { ok: false, status: 401 }],
    ] as const) {
      answer = (req) => req.socket.end(`HTTP/1.1 ${line}\r\ncontent-length: 64\r\n\r\nreceived`);
      const outcome = await deliver(url, Buffer.from("{}"), { secret });
      expect(outcome).toMatchObject(expected);
      if (line.startsWith("200")) expect(outcome.status).toBeUndefined();
    }
  });

  it("takes a 2xx's status once its body passes 128 KiB, without waiting for the rest", async () => {
    answer = (_req, res) => {
      res.writeHead(200, { "content-length": String(10 * 1024 * 1024) });
      res.write(Buffer.alloc(256 * 1024, "x"));
    };
    expect(await deliver(url, Buffer.from("{}"), { secret, timeoutMs: 5_000 })).toMatchObject({ ok: true, status: 200 });
  });

  it("names what undici does not read in an answer: headers over 16 KiB (D52)", async () => {
    answer = (_req, res) => res.writeHead(204, Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`x-debug-${i}`, "x".repeat(1024)]))).end();
    expect(await deliver(url, Buffer.from("{}"), { secret })).toMatchObject({ ok: false, error: expect.stringMatching(/: the answer's header section is over 16 KiB, more than undici reads \(D52\)$/) });
  });

  it("reports a connection that closes without an answer", async () => {
    answer = (req) => req.socket.destroy();
    const outcome = await deliver(url, Buffer.from("{}"), { secret });
    expect(outcome.ok).toBe(false);
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toBeTruthy();
  });
});

describe("deliver over HTTPS", () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(() => receiver.close());

  it("trusts an extra CA with tlsDispatcher({ ca }), any certificate with { insecure }, and neither by default", async () => {
    const body = Buffer.from(JSON.stringify(buildEnvelope("payment.received")));
    const untrusted = await deliver(receiver.url("tls"), body, { secret });
    expect(untrusted.ok).toBe(false);
    expect(untrusted.error).toMatch(/certificate/);
    for (const dispatcher of [tlsDispatcher({ ca: receiver.pki.caCert }), tlsDispatcher({ insecure: true })]) {
      const outcome = await deliver(receiver.url("tls"), body, { secret, dispatcher });
      await dispatcher!.close();
      expect(outcome).toMatchObject({ ok: true, status: 200 });
    }
    expect(receiver.at("tls").map((d) => d.body.equals(body))).toEqual([true, true]);
  });

  it("trusts the public roots alone through tlsTrust's context unless given a CA, on each connection made with it", async () => {
    const body = Buffer.from(JSON.stringify(buildEnvelope("payment.received")));
    const before = receiver.at("tls").length;
    const byDefault = tlsTrust({});
    const withCa = tlsTrust({ ca: receiver.pki.caCert });
    // Made here, once for every connection given it (src/sender.ts says why).
    expect(byDefault.secureContext).toBeDefined();
    expect(withCa.secureContext).not.toBe(byDefault.secureContext);
    const outcomes = [];
    for (const trust of [byDefault, withCa, withCa]) {
      const dispatcher = connectionTo(receiver.url("tls"), trust);
      outcomes.push(await deliver(receiver.url("tls"), body, { secret, dispatcher }));
      await dispatcher.close();
    }
    expect(outcomes[0]).toMatchObject({ ok: false, error: expect.stringMatching(/certificate/) });
    expect(outcomes.slice(1)).toMatchObject([{ ok: true, status: 200 }, { ok: true, status: 200 }]);
    expect(receiver.at("tls").length - before).toBe(2);
  });
});
