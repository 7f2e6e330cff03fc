// Delivering a signed event exactly as a conforming server does (spec/DECISIONS.md D1, D2, D6): the
// bytes signed are the bytes sent, with the method, content type, header and timeout of the spec.
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import { Agent, Client, request, type Dispatcher } from "undici";
import { newEventId, type WebhookEvent, signPayload, describeSchemaErrors, eventSchemaName, loadDeliveryRules, type EventName } from "@partner-platform/sdk";
import { eventExample, validatorFor } from "./spec.js";

export interface EnvelopeOptions {
  businessId?: string;
  /** Replaces the example's `data`; validated against the event's schema. */
  data?: unknown;
  id?: string;
  /** Epoch ms for `timestamp` (and the id's time part). Default now. */
  now?: number;
}

/** A schema-valid envelope for `event`, from the spec's example; throws with one line per violation. */
export function buildEnvelope(event: EventName, options: EnvelopeOptions = {}): WebhookEvent {
  const now = options.now ?? Date.now();
  const example = eventExample(event) as WebhookEvent & { data: Record<string, unknown> };
  const data = (options.data ?? example.data) as Record<string, unknown>;
  const envelope = {
    id: options.id ?? newEventId(now),
    event,
    timestamp: new Date(now).toISOString().replace(/\.\d{3}Z$/, "Z"),
    data: options.businessId ? { ...data, businessID: options.businessId } : data,
  };
  const validate = validatorFor(eventSchemaName(event));
  if (!validate(envelope)) {
    throw new Error(`the ${event} event does not match its schema:\n${describeSchemaErrors(validate.errors).join("\n")}`);
  }
  return envelope as WebhookEvent;
}

export interface DeliveryOutcome {
  /** HTTP status, or undefined when no answer came (connection error, timeout). */
  status?: number;
  latencyMs: number;
  /** Why there was no answer. */
  error?: string;
  ok: boolean;
}

export interface DeliverOptions {
  secret: string;
  /** Attempt timeout; default the spec's `attemptTimeoutSeconds`. */
  timeoutMs?: number;
  /** For HTTPS with a private CA (`--ca`) or none at all (`--insecure`). */
  dispatcher?: Dispatcher;
  /** A signature header to send instead of the right one (null: none; several: as many header lines), for testing receivers. */
  header?: string | string[] | null;
  /** The signature header's name as written on the wire (names are case-insensitive); default the spec's, in lowercase. */
  headerName?: string;
  /** A method and a content type (null: none) other than a delivery's, for testing receivers. */
  method?: string;
  contentType?: string | null;
}

/**
 * TLS options that also trust `ca` (PEM, added to the public roots), or any certificate; undefined for the
 * default trust. Built once and shared: each context parses the ~140 public roots.
 */
export function tlsTrust(options: { ca?: string; insecure?: boolean }): { rejectUnauthorized: false } | { secureContext: SecureContext } | undefined {
  if (options.insecure) return { rejectUnauthorized: false };
  return options.ca ? { secureContext: createSecureContext({ ca: [...rootCertificates, options.ca] }) } : undefined;
}

/** An undici dispatcher with the trust of `tlsTrust`, or undefined for the default one. */
export function tlsDispatcher(options: { ca?: string; insecure?: boolean }): Dispatcher | undefined {
  const connect = tlsTrust(options);
  return connect && new Agent({ connect });
}

/** One kept-alive connection to `url`'s origin (made again if the other side closes it), with a trust of `tlsTrust`. */
export function connectionTo(url: string, trust: ReturnType<typeof tlsTrust>): Dispatcher {
  return new Client(new URL(url).origin, trust ? { connect: trust } : {});
}

/**
 * undici's "bad response" with what is likeliest behind it: a `100 Continue` that the delivery never
 * asked for, which undici refuses (D52). Other messages as they are.
 */
export function explainedAnswerError(message: string): string {
  return /^bad response\b/.test(message) ? `${message}: not one HTTP/1.1 answer (an unasked 100 Continue is refused, D52)` : message;
}

/** One delivery attempt of `body` (exact bytes) to `url`. Redirects are not followed. */
export async function deliver(url: string, body: Buffer, options: DeliverOptions): Promise<DeliveryOutcome> {
  const rules = loadDeliveryRules();
  const start = performance.now();
  try {
    const response = await request(url, {
      method: (options.method ?? rules.method) as Dispatcher.HttpMethod,
      body,
      headers: {
        ...(options.contentType === null ? {} : { "content-type": options.contentType ?? rules.contentType }),
        ...(options.header === null ? {} : { [options.headerName ?? rules.signatureHeader.toLowerCase()]: options.header ?? signPayload(body, options.secret) }),
      },
      signal: AbortSignal.timeout(options.timeoutMs ?? rules.attemptTimeoutSeconds * 1000),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
    await response.body.dump();
    const status = response.statusCode;
    return { status, latencyMs: performance.now() - start, ok: status >= 200 && status < 300 };
  } catch (error) {
    const e = error as Error & { code?: string; cause?: { code?: string; message?: string } };
    const code = e.cause?.code ?? e.code;
    const message = e.cause?.message ?? e.message;
    const waited = options.timeoutMs ?? rules.attemptTimeoutSeconds * 1000;
    const reason = e.name === "TimeoutError" ? `no answer within ${waited / 1000} s` : explainedAnswerError(code && !message.includes(code) ? `${message}, ${code}` : message);
    return { latencyMs: performance.now() - start, error: reason, ok: false };
  }
}
