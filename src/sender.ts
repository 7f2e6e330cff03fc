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

/** undici's messages for answers it cannot read, with what is likeliest behind each (D52). */
const answerErrors: [RegExp, string][] = [
  [/^bad response\b/, "not one HTTP/1.1 answer (an unasked 100 Continue is refused, D52)"],
  [/^Response body length does not match content-length header\b/, "the body is not as long as its Content-Length, or whitespace follows the Content-Length value, which undici does not read (D52)"],
  [/^Headers Overflow Error\b/, "the answer's header section is over 16 KiB, more than undici reads (D52)"],
];

/** An undici error message with what is likeliest behind it; other messages as they are. */
export function explainedAnswerError(message: string): string {
  const known = answerErrors.find(([pattern]) => pattern.test(message));
  return known ? `${message}: ${known[1]}` : message;
}

/** Past this much of an answer's body its status decides; the rest is not read (D6). */
export const MAX_ANSWER_BYTES = 128 * 1024;

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
    const status = response.statusCode;
    // D6: an answer is complete when its body has ended (a 2xx cut short is a failed attempt); past
    // 128 KiB its status decides.
    let received = 0;
    try {
      for await (const chunk of response.body) {
        received += (chunk as Buffer).length;
        if (received > MAX_ANSWER_BYTES) break;
      }
    } catch (error) {
      // A refusal cut short is a refusal all the same.
      if (status < 200 || status >= 300) return { status, latencyMs: performance.now() - start, ok: false };
      const e = error as Error & { code?: string };
      const why = e.name === "TimeoutError" || e.name === "AbortError" ? `it had not ended after ${(options.timeoutMs ?? rules.attemptTimeoutSeconds * 1000) / 1000} s` : explainedAnswerError(e.message);
      return { latencyMs: performance.now() - start, error: `HTTP ${status}, but its body did not end (${why}): an answer is complete when its body has ended (D6)`, ok: false };
    }
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
