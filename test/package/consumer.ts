// A partner's code on the light library, as test/package.test.ts compiles it with tsc against the
// packed @partner-platform/sdk: once in a CommonJS project (module node16), once as ESM (NodeNext).
// It is given a delivery body and prints what it made of it.
import { createPartnerClient, parseEvent, signPayload, verifySignature, type WebhookEvent } from "@partner-platform/sdk";

const [body = ""] = process.argv.slice(2);
const secret = "whsec-consumer-0123456789";
const parsed = parseEvent(body);
const event: WebhookEvent | undefined = parsed.ok ? parsed.event : undefined;
const leadId: string | undefined = event?.event === "lead.created" ? event.data.leadID : undefined;

const client = createPartnerClient({
  baseUrl: "https://api.partner-platform.example",
  authUrl: "https://auth.partner-platform.example",
  clientId: "partner-acme",
  clientSecret: "s3cr3t",
  scopes: ["demand::search"],
});
// Never called: the types must be the API's, not `any`.
export const typed = () =>
  // @ts-expect-error: not a path of the API
  client.GET("/api/v2/no-such-path");

console.log(
  JSON.stringify({ verified: verifySignature(body, signPayload(body, secret), secret).valid, leadId, get: typeof client.GET }),
);
