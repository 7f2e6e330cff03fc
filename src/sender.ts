// Delivering a signed event exactly as a conforming server does (spec/DECISIONS.md D1, D2, D6): the
// bytes signed are the bytes sent, with the method, content type, header and timeout of the spec.
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import { Agent, Client, getGlobalDispatcher, type Dispatcher } from "undici";
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
 * TLS options for connections that trust the public roots and `ca` (PEM) too if given, or any certificate
 * (`insecure`), with one TLS context shared by every connection made with them: without it each
 * connection builds its own (about 0.3 ms of CPU and 26 KB of memory a connection; with `ca`, a parse of
 * the ~140 public roots too: docs/benchmarks.md).
 */
export function tlsTrust(options: { ca?: string; insecure?: boolean }): { secureContext: SecureContext; rejectUnauthorized?: false } {
  const secureContext = createSecureContext(options.ca && !options.insecure ? { ca: [...rootCertificates, options.ca] } : {});
  return options.insecure ? { secureContext, rejectUnauthorized: false } : { secureContext };
}

/** An undici dispatcher with the trust of `tlsTrust`, or undefined (the default dispatcher) for the public roots alone. */
export function tlsDispatcher(options: { ca?: string; insecure?: boolean }): Dispatcher | undefined {
  return options.ca || options.insecure ? new Agent({ connect: tlsTrust(options) }) : undefined;
}

/** One kept-alive connection to `url`'s origin (made again if the other side closes it), with a trust of `tlsTrust`. */
export function connectionTo(url: string, trust: ReturnType<typeof tlsTrust>): Dispatcher {
  return new Client(new URL(url).origin, { connect: trust });
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
const MAX_ANSWER_BYTES = 128 * 1024;

/** What abandons a request (the reference engine's attempt signal has this shape): aborted once, calling `onabort`. */
export interface RequestSignal {
  readonly aborted: boolean;
  readonly reason: Error | undefined;
  onabort: (() => void) | undefined;
}

/** How an answer ended: its status (0 where none came), and what went wrong before its body ended. */
export interface AnswerEnd {
  status: number;
  error?: Error;
}

/**
 * Sends one request and settles once its answer's body has ended (D6: an answer is complete when its
 * body has ended; past 128 KiB of it the status decides, and the connection is closed rather than read
 * on). Redirects are not followed. Through the dispatcher's own handler interface: `request()`'s response
 * stream, promise and async resource per attempt were a large part of the reference engine's time, and
 * the body is only counted, never kept. `timeoutMs` is undici's own backstop; `signal` is the deadline.
 */
export function answerOf(
  dispatcher: Dispatcher,
  target: { origin: string; path: string; method: string; body: Buffer; headers: Record<string, string | string[]>; timeoutMs: number },
  signal: RequestSignal,
): Promise<AnswerEnd> {
  return new Promise((resolve) => {
    const handler = new AnswerHandler(signal, resolve);
    signal.onabort = () => handler.started?.abort(signal.reason!);
    const { origin, path, method, body, headers, timeoutMs } = target;
    // A request undici will not send (a header value it refuses) throws here: an error like any other.
    try {
      dispatcher.dispatch({ origin, path, method: method as Dispatcher.HttpMethod, body, headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
    } catch (error) {
      signal.onabort = undefined;
      resolve({ status: 0, error: error as Error });
    }
  });
}

/** answerOf's handler: an object of a class, not six closures per request (the reference engine makes thousands a second). */
class AnswerHandler implements Dispatcher.DispatchHandler {
  status = 0;
  received = 0;
  tooLarge = false;
  started: Dispatcher.DispatchController | undefined;

  constructor(
    readonly signal: RequestSignal,
    readonly resolve: (end: AnswerEnd) => void,
  ) {}

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.started = c;
    // Aborted while connecting: ended now (undici calls this once it has the connection).
    if (this.signal.aborted) c.abort(this.signal.reason!);
  }

  onResponseStart(c: Dispatcher.DispatchController, statusCode: number, answerHeaders: Record<string, string | string[] | undefined>): void {
    this.status = statusCode;
    this.past(c, Number(answerHeaders["content-length"] ?? 0));
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.received += chunk.length;
    this.past(c, this.received);
  }

  onResponseEnd(): void {
    this.signal.onabort = undefined;
    this.resolve({ status: this.status });
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    this.signal.onabort = undefined;
    this.resolve(this.tooLarge && !this.signal.aborted ? { status: this.status } : { status: this.status, error });
  }

  private past(c: Dispatcher.DispatchController, bytes: number): void {
    if (bytes <= MAX_ANSWER_BYTES) return;
    this.tooLarge = true;
    c.abort(new Error("answer body over 128 KiB"));
  }
}

/** One delivery attempt of `body` (exact bytes) to `url`. Redirects are not followed. */
export async function deliver(url: string, body: Buffer, options: DeliverOptions): Promise<DeliveryOutcome> {
  const rules = loadDeliveryRules();
  const timeoutMs = options.timeoutMs ?? rules.attemptTimeoutSeconds * 1000;
  const { origin, pathname, search } = new URL(url);
  const headers = {
    ...(options.contentType === null ? {} : { "content-type": options.contentType ?? rules.contentType }),
    ...(options.header === null ? {} : { [options.headerName ?? rules.signatureHeader.toLowerCase()]: options.header ?? signPayload(body, options.secret) }),
  };
  const signal: { -readonly [K in keyof RequestSignal]: RequestSignal[K] } = { aborted: false, reason: undefined, onabort: undefined };
  const timer = setTimeout(() => {
    signal.aborted = true;
    signal.reason = new Error(`no complete answer within ${timeoutMs / 1000} s`);
    signal.onabort?.();
  }, timeoutMs);
  const start = performance.now();
  const target = { origin, path: pathname + search, method: options.method ?? rules.method, body, headers, timeoutMs };
  const { status, error } = await answerOf(options.dispatcher ?? getGlobalDispatcher(), target, signal).finally(() => clearTimeout(timer));
  const latencyMs = performance.now() - start;
  if (!error) return { status, latencyMs, ok: status >= 200 && status < 300 };
  const code = (error as Error & { code?: string }).code;
  const timedOut = signal.aborted || code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT";
  if (status === 0) {
    const cause = (error as Error & { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? code;
    const message = cause?.message ?? error.message;
    return { latencyMs, error: timedOut ? `no answer within ${timeoutMs / 1000} s` : explainedAnswerError(why && !message.includes(why) ? `${message}, ${why}` : message), ok: false };
  }
  // A refusal cut short is a refusal all the same; a 2xx cut short is a failed attempt.
  if (status < 200 || status >= 300) return { status, latencyMs, ok: false };
  const why = timedOut ? `it had not ended after ${timeoutMs / 1000} s` : explainedAnswerError(error.message);
  return { latencyMs, error: `HTTP ${status}, but its body did not end (${why}): an answer is complete when its body has ended (D6)`, ok: false };
}
