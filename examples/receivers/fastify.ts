// A webhook receiver on Fastify. The JSON content-type parser is replaced by one that keeps the
// body as a Buffer: the signature covers the exact bytes, not a re-serialized object.
import Fastify, { type FastifyInstance } from "fastify";
import { verifyDelivery, type WebhookEvent } from "partner-platform";

export function createFastifyReceiver(secret: string, onEvent: (event: WebhookEvent) => void): FastifyInstance {
  const seen = new Set<string>();
  const app = Fastify({ bodyLimit: 1024 * 1024 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  app.post("/webhooks/partner-platform", async (req, reply) => {
    const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const result = verifyDelivery(rawBody, req.headers, secret);
    if (!result.ok) return reply.code(result.problem.status).type("application/problem+json").send(JSON.stringify(result.problem));
    if (!seen.has(result.event.id)) {
      seen.add(result.event.id);
      onEvent(result.event);
    }
    return reply.code(204).send();
  });
  return app;
}
