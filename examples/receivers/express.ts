// A webhook receiver on Express. express.raw() keeps the body as the exact bytes received:
// express.json() would parse it, and a re-serialized body no longer matches the signature.
import express, { type Express } from "express";
import { verifyDelivery, type WebhookEvent } from "partner-platform";

export function createExpressReceiver(secret: string, onEvent: (event: WebhookEvent) => void): Express {
  const seen = new Set<string>();
  const app = express();
  app.post("/webhooks/partner-platform", express.raw({ type: () => true, limit: "1mb" }), (req, res) => {
    const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const result = verifyDelivery(rawBody, req.headers, secret);
    if (!result.ok) {
      res.status(result.problem.status).type("application/problem+json").send(JSON.stringify(result.problem));
      return;
    }
    if (!seen.has(result.event.id)) {
      seen.add(result.event.id);
      onEvent(result.event);
    }
    res.sendStatus(204);
  });
  return app;
}
