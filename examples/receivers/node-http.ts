// A webhook receiver on plain node:http. createWebhookHandler reads the raw bytes, verifies the
// signature over them, and only then parses the event: a parsed-then-re-serialized body
// (whitespace, key order, \u escapes, large numbers) would no longer match the signature.
// Run:  WEBHOOK_SECRET=... PORT=8081 npx tsx examples/receivers/node-http.ts
import { createServer, type Server } from "node:http";
import { pathToFileURL } from "node:url";
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

// Run as a program: listens on HOST:PORT (default 127.0.0.1:8080) and logs each new event.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error("node-http.ts: set WEBHOOK_SECRET to the webhook's secret");
    process.exit(1);
  }
  const [host, port] = [process.env.HOST ?? "127.0.0.1", Number(process.env.PORT ?? 8080)];
  createNodeReceiver(secret, (event) => console.error(`received ${event.event} ${event.id}`)).listen(port, host, () => console.log(`listening on http://${host}:${port}/`));
}
