// packages/sdk/src/receiver.ts on a real node:http server: every answer of createWebhookHandler, the raw bytes
// handed to onEvent, the size limit with and without Content-Length, and a client that goes away.
import { once } from "node:events";
import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadSigningVectors } from "../../conformance/vectors/index.js";
import { type WebhookEvent, createWebhookHandler, readRawBody, signPayload, loadDeliveryRules, verifyDelivery } from "@partner-platform/sdk";

const { signatureHeader, contentType } = loadDeliveryRules();
const vectors = loadSigningVectors();
const valid = vectors.find((v) => v.valid && v.changesWhenReserialized)!;
const secret = valid.secret;

async function listen(server: Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function post(url: string, body: Buffer, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: "POST", body, headers: { "content-type": contentType, [signatureHeader]: signPayload(body, secret), ...headers } });
}

describe("createWebhookHandler", () => {
  const handled: { event: WebhookEvent; rawBody: Buffer }[] = [];
  let failNext = false;
  let server: Server;
  let url: string;
  let small: string;
  let smallServer: Server;

  beforeAll(async () => {
    const onEvent = (event: WebhookEvent, rawBody: Buffer) => {
      if (failNext) {
        failNext = false;
        throw new Error("database down");
      }
      handled.push({ event, rawBody });
    };
    server = createServer(createWebhookHandler({ secret, onEvent }));
    url = await listen(server);
    smallServer = createServer(createWebhookHandler({ secret, onEvent, maxBytes: 100 }));
    small = await listen(smallServer);
  });
  afterAll(() => {
    server.close();
    smallServer.close();
  });
  afterEach(() => void (handled.length = 0));

  it("answers 204 and hands onEvent the event and the exact bytes", async () => {
    const response = await post(url, valid.body);
    expect(response.status).toBe(204);
    expect(handled).toHaveLength(1);
    expect(handled[0]!.rawBody.equals(valid.body)).toBe(true);
    expect(handled[0]!.event.id).toBe((JSON.parse(valid.body.toString("utf8")) as { id: string }).id);
  });

  it("answers 401 problem+json to a bad signature, without calling onEvent", async () => {
    const response = await post(url, valid.body, { [signatureHeader]: "0".repeat(64) });
    expect(response.status).toBe(401);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.json()).toMatchObject({ status: 401, title: "Invalid signature", detail: expect.stringContaining("does not match") });
    expect(handled).toHaveLength(0);
  });

  it("answers 400 to a correctly signed body that is not JSON, or not an event", async () => {
    for (const body of [Buffer.from("{not json"), Buffer.from('{"id":"evt_x","event":"lead.created"}')]) {
      const response = await post(url, body);
      expect(response.status).toBe(400);
      expect(((await response.json()) as { status: number }).status).toBe(400);
    }
    expect(handled).toHaveLength(0);
  });

  it("answers 415 to another content type, 405 to another method", async () => {
    const wrongType = await post(url, valid.body, { "content-type": "text/plain" });
    expect(wrongType.status).toBe(415);
    await wrongType.body?.cancel();
    const get = await fetch(url);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
  });

  it("answers 413 to a body over maxBytes, declared by Content-Length or not", async () => {
    const declared = await post(small, Buffer.alloc(101, 0x20));
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { status: number }).status).toBe(413);
    // Chunked: no Content-Length, so the limit is enforced while reading.
    const chunked = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(small, { method: "POST", headers: { "content-type": contentType, [signatureHeader]: "0".repeat(64) } }, resolve);
      req.on("error", reject);
      for (let i = 0; i < 5; i++) req.write(Buffer.alloc(30, 0x20));
      req.end();
    });
    chunked.resume();
    expect(chunked.statusCode).toBe(413);
    expect(handled).toHaveLength(0);
  });

  it("accepts a body of exactly maxBytes", async () => {
    const body = Buffer.alloc(100, 0x20);
    const response = await post(small, body);
    expect(response.status).toBe(400); // past the size check: signature fine, not an event
    await response.body?.cancel();
  });

  it("answers 500 when onEvent throws, so that the service retries", async () => {
    failNext = true;
    const response = await post(url, valid.body);
    expect(response.status).toBe(500);
  });

  it("refuses to be made without a secret: with one unset, anyone could sign", () => {
    const onEvent = () => undefined;
    expect(() => createWebhookHandler({ secret: "", onEvent })).toThrow("createWebhookHandler: options.secret is empty");
    expect(() => createWebhookHandler({ secret: undefined as unknown as string, onEvent })).toThrow(TypeError);
  });
});

describe("verifyDelivery", () => {
  const signature = signPayload(valid.body, secret);
  const verdict = (headers: Parameters<typeof verifyDelivery>[1]) => {
    const result = verifyDelivery(valid.body, headers, secret);
    return result.ok ? "ok" : `${result.problem.status} ${result.problem.detail}`;
  };

  it("finds the headers whatever the case of their names (API Gateway, hand-built objects) and in a Fetch API Headers", () => {
    const capitalized = signatureHeader.toLowerCase().replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase());
    expect(verdict({ "Content-Type": contentType, [capitalized]: signature })).toBe("ok");
    expect(verdict({ "CONTENT-TYPE": `${contentType}; charset=utf-8`, [signatureHeader.toUpperCase()]: signature })).toBe("ok");
    expect(verdict(new Headers({ "Content-Type": contentType, [capitalized]: signature }))).toBe("ok");
  });

  it("takes a header given under two spellings as given twice: refused, as a repeated signature is", () => {
    expect(verdict({ "content-type": contentType, [signatureHeader.toLowerCase()]: signature, [signatureHeader.toUpperCase()]: signature })).toMatch(/^401 .*more than once/);
  });

  it("refuses every delivery when the secret is empty, even one signed with the empty key", () => {
    const emptyKey = vectors.find((v) => v.id === "empty-secret")!;
    const result = verifyDelivery(emptyKey.body, { "content-type": contentType, [signatureHeader]: emptyKey.header! }, emptyKey.secret);
    expect(result).toMatchObject({ ok: false, problem: { status: 401, detail: "No webhook secret was given." } });
  });
});

describe("readRawBody", () => {
  it("settles when the client goes away before the body is complete", async () => {
    let settled!: (outcome: string) => void;
    const outcome = new Promise<string>((resolve) => (settled = resolve));
    const server = createServer((req) => {
      readRawBody(req, 1024).then(
        () => settled("resolved"),
        (error: Error) => settled(`rejected: ${error.message}`),
      );
    });
    const url = await listen(server);
    try {
      const req = request(url, { method: "POST", headers: { "content-length": "500" } });
      req.on("error", () => undefined);
      req.write(Buffer.alloc(10, 0x20));
      await once(server, "request");
      req.destroy();
      expect(await outcome).toMatch(/^rejected: /);
    } finally {
      server.close();
    }
  });
});
