// Webhook delivery on a virtual clock (DECISIONS D1–D8, D22, D24): an HTTPS receiver with its own CA,
// a real SMTP sink, and every wait taken from x-delivery.
import net from "node:net";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startSmtpSink, type SmtpSink } from "../../conformance/harness/smtp-sink.js";
import { freePort } from "../../scripts/free-port.js";
import { verifySignature, loadDeliveryRules } from "@partner-platform/sdk";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { api, client, control, envelope, register, storageBackends, virtualServers } from "./helpers.js";

const rules = loadDeliveryRules();
const [firstWait, secondWait] = rules.retryWaitsSeconds as [number, number];
const threshold = rules.disableAfterConsecutiveFailures;
const secret = "whsec-test-0123456789";

let receiver: Receiver;
let smtp: SmtpSink;

beforeAll(async () => {
  receiver = await startReceiver();
  smtp = await startSmtpSink();
});
afterAll(async () => {
  await receiver.close();
  await smtp.close();
});

const start = virtualServers(() => ({ webhookCa: receiver.pki.caCert, smtpUrl: smtp.url }));

/** Each test's endpoints are its own: names are unique per test. */
let n = 0;
const endpoint = (name: string) => `${name}-${++n}`;

describe("delivery", () => {
  it("makes an attempt again when its outcome could not be recorded (at-least-once, D4), not never", async () => {
    let failOnce = true;
    const server = await start({
      parts: (base) => ({
        async record(batch) {
          if (!failOnce) return base.record(batch);
          failOnce = false;
          throw new Error("Connection terminated unexpectedly (injected once)");
        },
      }),
    });
    const hook = endpoint("unrecorded");
    await register(server, receiver.url(hook), ["review.created"], "4711");
    const triggered = await control(server).trigger("review.created", "4711");
    await control(server).advance(0);
    // The first outcome was lost; the attempt is queued again and made again with the same event id.
    await control(server).advance(0);
    expect(receiver.at(hook).map((d) => envelope(d.body).id)).toEqual([triggered.body.id, triggered.body.id]);
  });

  it("posts the exact signed bytes, only to webhooks of the event's name and business", async () => {
    const server = await start();
    const [wanted, otherEvent, otherBusiness] = [endpoint("wanted"), endpoint("other-event"), endpoint("other-business")];
    await register(server, receiver.url(wanted), ["review.created"], "4711");
    await register(server, receiver.url(otherEvent), ["booking.confirmed"], "4711");
    await register(server, receiver.url(otherBusiness), ["review.created"], "4712");
    const triggered = await control(server).trigger("review.created", "4711");
    expect([triggered.status, triggered.body.queuedFor]).toEqual([201, 1]);
    await control(server).advance(0);

    const [delivery] = receiver.at(wanted);
    expect(receiver.at(wanted)).toHaveLength(1);
    expect([receiver.at(otherEvent).length, receiver.at(otherBusiness).length]).toEqual([0, 0]);
    expect(delivery!.method).toBe(rules.method);
    expect(delivery!.headers["content-type"]).toBe(rules.contentType);
    expect(verifySignature(delivery!.body, delivery!.headers[rules.signatureHeader.toLowerCase()], secret)).toMatchObject({ valid: true });
    expect(envelope(delivery!.body)).toMatchObject({ id: triggered.body.id, event: "review.created", data: { businessID: "4711" } });
  });

  // PostgreSQL's text holds no U+0000: such a secret is stored encoded, and one of 256 "=" as it is (D2: any code point).
  it("signs with a secret that holds U+0000, and with one of 256 =, each as registered", async () => {
    const server = await start();
    for (const [name, own] of [["nul", "whsec-\u0000-with-a-nul-\u0000"], ["equals", "=".repeat(256)]] as const) {
      const hook = endpoint(name);
      await register(server, receiver.url(hook), ["review.created"], "4711", own);
      await control(server).trigger("review.created", "4711");
      await control(server).advance(0);
      const [delivery] = receiver.at(hook);
      expect(verifySignature(delivery!.body, delivery!.headers[rules.signatureHeader.toLowerCase()], own)).toMatchObject({ valid: true });
    }
  });

  it("counts a 3xx as a failure without following it, and retries after the wait, counted from the failure, with the same id", async () => {
    const server = await start();
    const [hook, target] = [endpoint("redirects"), endpoint("redirect-target")];
    receiver.script(hook, [answers.redirect(receiver.url(target))]);
    await register(server, receiver.url(hook), ["message.received"]);
    await control(server).trigger("message.received", "4711");
    await control(server).advance(0);
    await control(server).advance(firstWait - 1);
    expect([receiver.at(hook).length, receiver.at(target).length]).toEqual([1, 0]);
    await control(server).advance(1);
    expect(receiver.at(hook)).toHaveLength(2);
    expect(new Set(receiver.at(hook).map((d) => envelope(d.body).id)).size).toBe(1);
    // Answered 2xx: no more attempts.
    await control(server).advance(2 * 24 * 3600);
    expect(receiver.at(hook)).toHaveLength(2);
  });

  it("treats an attempt with no answer as lasting the whole attempt timeout", async () => {
    const server = await start({ virtualAttemptTimeoutMs: 200 });
    const hook = endpoint("hangs");
    receiver.script(hook, [answers.hang]);
    await register(server, receiver.url(hook), ["message.received"]);
    await control(server).trigger("message.received", "4711");
    await control(server).advance(0);
    await control(server).advance(rules.attemptTimeoutSeconds + firstWait - 1);
    expect(receiver.at(hook)).toHaveLength(1);
    await control(server).advance(1);
    expect(receiver.at(hook)).toHaveLength(2);
  });

  it("resets the webhook's failure counter on any 2xx, and disables at the threshold with exactly one e-mail", async () => {
    const server = await start();
    const hook = endpoint("resets");
    // threshold - 1 failures on as many events, a success on the next one, then their retries fail.
    receiver.script(hook, [...Array<typeof answers.ok>(threshold - 1).fill(answers.status(500)), answers.ok], answers.status(500));
    await register(server, receiver.url(hook), ["payment.received"]);
    const mailsBefore = smtp.messages.length;
    for (let i = 0; i < threshold; i++) {
      await control(server).trigger("payment.received", "4711");
      await control(server).advance(0);
    }
    await control(server).advance(firstWait);
    // threshold - 1 retries failed after the reset: still enabled, no e-mail.
    expect(receiver.at(hook)).toHaveLength(threshold + threshold - 1);
    expect(smtp.messages.length).toBe(mailsBefore);
    expect((await control(server).trigger("payment.received", "4711")).body.queuedFor).toBe(1);
    await control(server).advance(0);
    expect(smtp.messages.length).toBe(mailsBefore + 1);
    expect(smtp.messages.at(-1)!.to).toEqual([client.contactEmail]);
  });

  it("on disabling, cancels pending retries, queues nothing more, and sends one e-mail though many attempts fail at once", async () => {
    const server = await start();
    const [failing, healthy] = [endpoint("always-fails"), endpoint("healthy")];
    receiver.script(failing, [], answers.status(503));
    await register(server, receiver.url(failing), ["booking.cancelled"]);
    await register(server, receiver.url(healthy), ["booking.cancelled"]);
    const mailsBefore = smtp.messages.length;
    // Twice the threshold of first attempts fail together; the threshold-th disables.
    for (let i = 0; i < 2 * threshold; i++) await control(server).trigger("booking.cancelled", "4711");
    await control(server).advance(0);
    expect([receiver.at(failing).length, receiver.at(healthy).length]).toEqual([2 * threshold, 2 * threshold]);
    expect((await control(server).trigger("booking.cancelled", "4711")).body.queuedFor).toBe(1);
    await control(server).advance(3 * 24 * 3600);
    expect(receiver.at(failing)).toHaveLength(2 * threshold);
    expect(smtp.messages.length).toBe(mailsBefore + 1);
  });

  it("keeps the e-mail until the SMTP server takes it, then sends it once", async () => {
    const port = await freePort();
    const server = await start({ smtpUrl: `smtp://127.0.0.1:${port}` });
    const hook = endpoint("mail-later");
    receiver.script(hook, [], answers.status(500));
    await register(server, receiver.url(hook), ["review.created"]);
    for (let i = 0; i < threshold; i++) await control(server).trigger("review.created", "4711");
    await control(server).advance(0);
    const late = await startSmtpSink("127.0.0.1", port);
    try {
      // Tried again a second (real time) after the failure.
      for (let i = 0; i < 100 && late.messages.length === 0; i++) {
        await control(server).advance(0);
        await new Promise((r) => setTimeout(r, 100));
      }
      await control(server).advance(0);
      expect(late.messages.map((m) => m.to)).toEqual([[client.contactEmail]]);
    } finally {
      await late.close();
    }
  });


  it("re-checks the address at delivery: a name or address that became private is a failed attempt, never a request", async () => {
    // Without the control API: with it, loopback addresses are allowed (the suite's receiver is one, D22).
    const server = await start({ allowPrivateWebhooks: false, conformance: false });
    const port = new URL(receiver.url("x")).port;
    // As if the name had resolved elsewhere at registration: stored directly.
    for (const [id, host] of [["1", "localhost"], ["2", "127.0.0.1"]]) {
      await server.db.query(
        "INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ($1, $2, $3, $4, '4711', $5, 0)",
        [id, client.clientId, `https://${host}:${port}/${endpoint("private")}`, JSON.stringify(["review.created"]), secret],
      );
    }
    const before = receiver.deliveries.length;
    await server.engine.emit("review.created", "4711", { reviewID: "1", businessID: "4711", rating: 5, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });
    await server.engine.runDue();
    expect(receiver.deliveries.length).toBe(before);
    const { rows } = await server.db.query<{ state: string; error: string }>("SELECT state, error FROM attempts WHERE attempt = 1 ORDER BY webhook_id");
    expect(rows.map((r) => r.state)).toEqual(["failed", "failed"]);
    for (const r of rows) expect(r.error).toMatch(/not a public address/);
  });
});

describe("leads", () => {
  it("emits lead.created per matched business with §2.4 data, and lead.expired after the lead lifetime unless hired", async () => {
    const server = await start();
    const [first, second] = [endpoint("leads-4711"), endpoint("leads-4712")];
    await register(server, receiver.url(first), ["lead.created", "lead.expired"], "4711");
    await register(server, receiver.url(second), ["lead.created", "lead.expired"], "4712");
    const customer = { name: "Jane Doe", email: "jane@example.com", phone: "+12125550143" };
    const { data } = await api(server).POST("/api/v4/requests", { body: { categoryID: "1000123", zipCode: "10001", customer } });
    const leads = new Map(data!.leads.map((l) => [l.businessID, l.leadID]));
    await control(server).advance(0);
    const created = envelope(receiver.at(first)[0]!.body);
    expect(created.data).toEqual({
      leadID: leads.get("4711"),
      businessID: "4711",
      request: { category: "Plumbing", location: { city: "New York", state: "NY", zip: "10001" } },
      customer: { name: customer.name, phone: customer.phone },
    });
    // The customer hires 4712: its lead no longer expires.
    const hired = await control(server).trigger("lead.updated", "4712", {
      leadID: leads.get("4712"),
      businessID: "4712",
      status: "hired",
      previousStatus: "new",
      updatedAt: created.timestamp,
    });
    expect(hired.status).toBe(201);

    await control(server).advance(rules.leadExpirySeconds - 1);
    expect([receiver.at(first).length, receiver.at(second).length]).toEqual([1, 1]);
    await control(server).advance(1);
    expect(receiver.at(second)).toHaveLength(1);
    const expired = envelope(receiver.at(first)[1]!.body);
    expect(expired).toMatchObject({
      event: "lead.expired",
      timestamp: new Date(Date.parse(created.timestamp) + rules.leadExpirySeconds * 1000).toISOString(),
      data: { leadID: leads.get("4711"), businessID: "4711", previousStatus: "new", createdAt: created.timestamp },
    });
  });
});

describe.each(storageBackends())("a disable e-mail the SMTP server refuses, $name", ({ postgres }) => {
  let pg: TestPostgres | undefined;
  let databases = 0;
  beforeAll(async () => {
    pg = postgres ? await startTestPostgres() : undefined;
  }, 60_000);
  afterAll(() => pg?.stop());

  it("is tried again at waits that double, not on every run, by every server on the database", async () => {
    // An SMTP server that ends every connection at once: each connection is one try.
    let tries = 0;
    const refusing = net.createServer((socket) => {
      tries++;
      socket.destroy();
    });
    refusing.listen(0, "127.0.0.1");
    await once(refusing, "listening");
    try {
      const options = {
        smtpUrl: `smtp://127.0.0.1:${(refusing.address() as net.AddressInfo).port}`,
        ...(pg ? { databaseUrl: await pg.createDatabase(`mail_${++databases}`) } : {}),
      };
      // On PostgreSQL two servers share the database: the wait is kept in it, not in one process.
      const servers = [await start(options), ...(pg ? [await start(options)] : [])];
      const hook = endpoint("mail-refused");
      receiver.script(hook, [], answers.status(500));
      await register(servers[0]!, receiver.url(hook), ["review.created"]);
      for (let i = 0; i < threshold; i++) await control(servers[0]!).trigger("review.created", "4711");
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      for (let i = 0; i < 100 && tries === 0; i++) await control(servers[0]!).advance(0);
      expect(tries).toBe(1);
      // Runs on every server for 7 s: tries due after waits of 1, 2 and 4 s (at 1, 3 and 7 s), not one a run.
      while (seconds() < 7) {
        for (const server of servers) await control(server).advance(0);
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(tries).toBeLessThanOrEqual(1 + Math.floor(Math.log2(1 + seconds())));
    } finally {
      refusing.close();
    }
  });
});
