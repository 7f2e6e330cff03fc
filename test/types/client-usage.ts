// Type-level tests, checked by `tsc --noEmit` (part of npm test): the usage below must compile, and
// every `@ts-expect-error` line must fail to compile (tsc reports an unused directive otherwise).
import { createPartnerClient, parseEvent, TokenRequestError, verifyDelivery, type components, type EventOf, type WebhookEvent } from "@partner-platform/sdk";

const client = createPartnerClient({
  baseUrl: "https://api.partner-platform.example",
  authUrl: "https://auth.partner-platform.example",
  clientId: "partner-acme",
  clientSecret: "s3cr3t",
  scopes: ["demand::search", "demand::request", "webhooks::write"],
});

createPartnerClient({
  baseUrl: "https://api.partner-platform.example",
  authUrl: "https://auth.partner-platform.example",
  clientId: "partner-acme",
  clientSecret: "s3cr3t",
  // @ts-expect-error: not a scope of this API
  scopes: ["demand::searh"],
});

export async function searchUsage(): Promise<string[]> {
  const { data, error } = await client.GET("/api/v2/businesses/search", {
    params: { query: { category_id: "1000123", zip: "10001" } },
  });
  if (error) {
    // Errors are typed problem+json bodies with a closed set of types.
    const type: components["schemas"]["ProblemType"] = error.type;
    // @ts-expect-error: not a problem type of this API
    const wrong: typeof error.type = "urn:partner-platform:problem:teapot";
    return [type, error.detail, wrong];
  }
  return data.businesses.map((b) => `${b.businessID} ${b.name} ${b.rating ?? "-"}`);
}

export async function wrongCalls(): Promise<void> {
  // @ts-expect-error: no such path
  await client.GET("/api/v2/business/search", { params: { query: { category_id: "1", zip: "10001" } } });

  // @ts-expect-error: the query parameter is category_id, not categoryID
  await client.GET("/api/v2/businesses/search", { params: { query: { categoryID: "1", zip: "10001" } } });

  // @ts-expect-error: zip is required
  await client.GET("/api/v2/businesses/search", { params: { query: { category_id: "1" } } });

  // @ts-expect-error: search is a GET, not a POST
  await client.POST("/api/v2/businesses/search", {});

  await client.POST("/api/v4/requests", {
    body: {
      categoryID: "1000123",
      // @ts-expect-error: the field is zipCode (source document, section 2.1)
      zip: "10001",
      customer: { name: "Jane Doe", email: "jane@example.com", phone: "+12125550143" },
    },
  });

  // @ts-expect-error: customer is required
  await client.POST("/api/v4/requests", { body: { categoryID: "1000123", zipCode: "10001" } });

  await client.POST("/api/v2/webhooks", {
    body: {
      url: "https://hooks.example/partner",
      // @ts-expect-error: not one of the eight event names
      events: ["lead.create"],
      businessID: "4711",
      secret: "0123456789abcdef",
    },
  });
}

export async function registerUsage(): Promise<string | undefined> {
  const { data } = await client.POST("/api/v2/webhooks", {
    body: {
      url: "https://hooks.example/partner",
      events: ["lead.created", "booking.confirmed"],
      businessID: "4711",
      secret: "0123456789abcdef",
    },
  });
  // @ts-expect-error: the secret is never returned
  void data?.secret;
  return data?.webhookID;
}

export function eventUsage(raw: Buffer): string {
  const parsed = parseEvent(raw);
  // @ts-expect-error: the event is only there once `ok` is checked
  void parsed.event;
  if (!parsed.ok) return parsed.error;
  const event: WebhookEvent = parsed.event;
  switch (event.event) {
    case "lead.created":
      return `${event.data.leadID} ${event.data.customer.name} ${event.data.request.location.zip}`;
    case "review.created":
      // @ts-expect-error: review events have no customer
      void event.data.customer;
      return String(event.data.rating);
    case "payment.received":
      return `${event.data.amount.amount} ${event.data.amount.currency}`;
    // @ts-expect-error: not one of the eight event names
    case "lead.create":
      return "";
    default:
      return event.id;
  }
}

export const created: EventOf<"lead.created">["event"] = "lead.created";
// @ts-expect-error: not one of the eight event names
export type Wrong = EventOf<"lead.create">["data"]["leadID"];

// The README's handling of a refused token request: the call rejects, typed by TokenRequestError.
export async function tokenRefusedUsage(): Promise<string | undefined> {
  try {
    await client.GET("/api/v2/businesses/search", { params: { query: { category_id: "1000123", zip: "10001" } } });
    return undefined;
  } catch (e) {
    if (e instanceof TokenRequestError) return `${e.status} ${e.body?.error ?? ""}: ${e.message}`;
    throw e;
  }
}

// verifyDelivery takes node:http's headers, any object of header names, or a Fetch API Headers.
export function verifyDeliveryUsage(body: Buffer, secret: string): boolean {
  const fromObject = verifyDelivery(body, { "Content-Type": "application/json", "X-Service-Signature": "0".repeat(64) }, secret);
  const fromHeaders = verifyDelivery(body, new Headers({ "content-type": "application/json" }), secret);
  // @ts-expect-error: header values are strings (or lists of them)
  verifyDelivery(body, { "content-type": 1 }, secret);
  return fromObject.ok && fromHeaders.ok;
}
