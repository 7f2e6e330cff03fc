// A webhook receiver on plain node:http. createWebhookHandler reads the raw bytes, verifies the
// signature over them, and only then parses the event: a parsed-then-re-serialized body
// (whitespace, key order, \u escapes, large numbers) would no longer match the signature.
import { createServer, type Server } from "node:http";
import { createWebhookHandler, type WebhookEvent } from "@partner-platform/sdk";

export function createNodeReceiver(secret: string, onEvent: (event: WebhookEvent) => void): Server {
  const seen = new Set<string>(); // use a database in production: the id is the idempotency key
  return createServer(
    createWebhookHandler({
      secret,
      onEvent(event) {
        if (seen.has(event.id)) return; // a retry of an event already handled: acknowledge it again, do nothing
        seen.add(event.id);
        onEvent(event);
      },
    }),
  );
}
