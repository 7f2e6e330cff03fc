// A webhook receiver on Fastify. Its JSON parser is replaced, for the webhook route only, by one
// that keeps the body as a Buffer: the signature covers the exact bytes, and a parsed-then-
// re-serialized body (whitespace, key order, \u escapes, large numbers) no longer matches it.
import Fastify, { type FastifyInstance } from "fastify";
import { verifyDelivery, type WebhookEvent } from "@partner-platform/sdk";

export function createFastifyReceiver(secret: string, onEvent: (event: WebhookEvent) => void): FastifyInstance {
  const seen = new Set<string>(); // use a database in production: the id is the idempotency key
  const app = Fastify({ bodyLimit: 1024 * 1024 });
  // An encapsulated plugin: the parser change stays inside it, other routes keep Fastify's JSON parser.
  void app.register(async (webhooks) => {
    webhooks.removeContentTypeParser("application/json");
    webhooks.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    webhooks.post("/webhooks/partner-platform", async (req, reply) => {
      const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const result = verifyDelivery(rawBody, req.headers, secret);
      if (!result.ok) return reply.code(result.problem.status).type("application/problem+json").send(JSON.stringify(result.problem));
      if (!seen.has(result.event.id)) {
        seen.add(result.event.id);
        onEvent(result.event);
      } // else: a retry of an event already handled: acknowledge it again, do nothing
      return reply.code(204).send();
    });
  });
  return app;
}
