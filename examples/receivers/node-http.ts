// A webhook receiver on plain node:http. createWebhookHandler reads the raw bytes, verifies the
// signature over them, and only then parses the event: a parsed-then-re-serialized body
// (whitespace, key order, \u escapes, large numbers) would no longer match the signature.
// Run:  WEBHOOK_SECRET=... PORT=8081 npx tsx examples/receivers/node-http.ts
// (with TLS_CERT=cert.pem TLS_KEY=key.pem it listens on HTTPS, as webhook URLs must be)
import { readFileSync, realpathSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createServer as createTlsServer } from "node:https";
import { pathToFileURL } from "node:url";
import { createWebhookHandler, type WebhookEvent } from "@partner-platform/sdk";

/** The request listener: each verified event reaches onEvent once. */
export function webhookListener(secret: string, onEvent: (event: WebhookEvent) => void) {
  const seen = new Set<string>(); // use a database in production: the id is the idempotency key
  return createWebhookHandler({
    secret,
    onEvent(event) {
      if (seen.has(event.id)) return; // a retry of an event already handled: acknowledge it again, do nothing
      seen.add(event.id);
      onEvent(event);
    },
  });
}

export function createNodeReceiver(secret: string, onEvent: (event: WebhookEvent) => void): Server {
  return createServer(webhookListener(secret, onEvent));
}

// Run as a program: listens on HOST:PORT (default 127.0.0.1:8080) and logs each new event.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error("node-http.ts: set WEBHOOK_SECRET to the webhook's secret");
    process.exit(1);
  }
  const [host, port] = [process.env.HOST ?? "127.0.0.1", Number(process.env.PORT ?? 8080)];
  const listener = webhookListener(secret, (event) => console.error(`received ${event.event} ${event.id}`));
  const { TLS_CERT: certFile, TLS_KEY: keyFile } = process.env;
  // Webhook URLs are HTTPS: in production a TLS-terminating proxy usually sits in front of a plain receiver.
  const server = certFile && keyFile ? createTlsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, listener) : createServer(listener);
  server.listen(port, host, () => console.log(`listening on ${certFile && keyFile ? "https" : "http"}://${host}:${port}/`));
}
