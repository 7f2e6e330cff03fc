// The example receivers (examples/receivers) against every signing vector: valid deliveries are
// acknowledged, every forgery is refused, a duplicate is acknowledged once handled.
import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createExpressReceiver } from "../../examples/receivers/express.js";
import { createFastifyReceiver } from "../../examples/receivers/fastify.js";
import { createNodeReceiver } from "../../examples/receivers/node-http.js";
import { loadSigningVectors } from "../../conformance/vectors/index.js";
import { type WebhookEvent, loadDeliveryRules } from "@partner-platform/sdk";

const vectors = loadSigningVectors();
const { signatureHeader, contentType } = loadDeliveryRules();

interface Running {
  url: string;
  handled: WebhookEvent[];
  close(): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const receivers: Record<string, (secret: string) => Promise<Running>> = {
  "node:http": async (secret) => {
    const handled: WebhookEvent[] = [];
    const server = createNodeReceiver(secret, (e) => handled.push(e));
    const url = `${await listen(server)}/`;
    return { url, handled, close: () => new Promise((r) => server.close(() => r())) };
  },
  express: async (secret) => {
    const handled: WebhookEvent[] = [];
    const server = createExpressReceiver(secret, (e) => handled.push(e)).listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/partner-platform`;
    return { url, handled, close: () => new Promise((r) => server.close(() => r())) };
  },
  fastify: async (secret) => {
    const handled: WebhookEvent[] = [];
    const app = createFastifyReceiver(secret, (e) => handled.push(e));
    const origin = await app.listen({ port: 0, host: "127.0.0.1" });
    return { url: `${origin}/webhooks/partner-platform`, handled, close: () => app.close() };
  },
};

function deliver(url: string, body: Buffer, header: string | null, type = contentType): Promise<Response> {
  return fetch(url, {
    method: "POST",
    body,
    headers: { "content-type": type, ...(header === null ? {} : { [signatureHeader]: header }) },
  });
}

for (const [name, start] of Object.entries(receivers)) {
  describe(`${name} example receiver`, () => {
    // Most vectors use the same secret; the others get a receiver each. A receiver may refuse to be made
    // without a secret (empty-secret), rather than refuse every delivery.
    const bySecret = new Map<string, Running>();
    const notMade = new Map<string, Error>();
    beforeAll(async () => {
      for (const secret of new Set(vectors.map((v) => v.secret))) {
        try {
          bySecret.set(secret, await start(secret));
        } catch (error) {
          if (secret !== "") throw error;
          notMade.set(secret, error as Error);
        }
      }
    });
    afterAll(async () => {
      for (const r of bySecret.values()) await r.close();
    });

    it.each(vectors.map((v) => [v.id, v] as const))("%s", async (_id, v) => {
      if (notMade.has(v.secret)) {
        expect(v.reason).toBe("missing-secret");
        expect(notMade.get(v.secret)!.message).toMatch(/secret is empty/);
        return;
      }
      const response = await deliver(bySecret.get(v.secret)!.url, v.body, v.header);
      await response.body?.cancel();
      if (v.valid) expect(response.status).toBeGreaterThanOrEqual(200);
      expect(response.status < 300).toBe(v.valid);
    });

    it("acknowledges a duplicate delivery and handles the event once", async () => {
      const [v] = vectors.filter((x) => x.valid && x.id === "compact-envelope");
      const receiver = bySecret.get(v!.secret)!;
      const id = (JSON.parse(v!.body.toString("utf8")) as { id: string }).id;
      for (let i = 0; i < 2; i++) {
        const response = await deliver(receiver.url, v!.body, v!.header);
        expect(response.status).toBe(204);
      }
      expect(receiver.handled.filter((e) => e.id === id)).toHaveLength(1);
    });

    it("refuses a body over its 1 MiB limit with 413", async () => {
      const body = Buffer.alloc(1024 * 1024 + 1, 0x20);
      const response = await deliver(bySecret.get(vectors[0]!.secret)!.url, body, "0".repeat(64));
      await response.body?.cancel();
      expect(response.status).toBe(413);
    });

    it("refuses a body that is not JSON-typed", async () => {
      const [v] = vectors.filter((x) => x.valid);
      const response = await deliver(bySecret.get(v!.secret)!.url, v!.body, v!.header, "text/plain");
      await response.body?.cancel();
      expect(response.status).toBeGreaterThanOrEqual(400);
    });
  });
}
