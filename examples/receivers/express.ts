// A webhook receiver on Express. express.raw() keeps the body as the exact bytes received: the
// signature covers those bytes, and express.json() would hand over a parsed object whose
// re-serialization (whitespace, key order, \u escapes, large numbers) no longer matches it.
import express, { type Express } from "express";
import { verifyDelivery, type WebhookEvent } from "@partner-platform/sdk";

export function createExpressReceiver(secret: string, onEvent: (event: WebhookEvent) => void): Express {
  const seen = new Set<string>(); // use a database in production: the id is the idempotency key
  const app = express();
  // Raw bytes on this route only; the rest of an app can keep express.json().
  // docs:raw-body:start
  app.post("/webhooks/partner-platform", express.raw({ type: "application/json", limit: "1mb" }), (req, res) => {
    // Another content type leaves req.body unset; verifyDelivery then answers 415.
    const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const result = verifyDelivery(rawBody, req.headers, secret);
    if (!result.ok) {
      res.status(result.problem.status).type("application/problem+json").send(JSON.stringify(result.problem));
      return;
    }
    // docs:raw-body:end
    if (!seen.has(result.event.id)) {
      seen.add(result.event.id);
      onEvent(result.event);
    } // else: a retry of an event already handled: acknowledge it again, do nothing
    res.sendStatus(204);
  });
  return app;
}
