// Receiving webhook deliveries on node:http without losing the raw body: the signature covers the
// exact bytes sent, so they are verified before anything parses them (spec/DECISIONS.md D2).
import type { IncomingMessage, ServerResponse } from "node:http";
import { loadDeliveryRules } from "./contract.js";
import { parseEvent, type WebhookEvent } from "./events.js";
import { verifySignature } from "./signing.js";

export interface ReceiveOptions {
  /** The secret given at webhook registration. */
  secret: string;
  /** Largest body accepted, in bytes. Default 1 MiB. */
  maxBytes?: number;
}

/** A problem+json answer for a refused delivery. */
export interface ReceiverProblem {
  type: "about:blank";
  title: string;
  status: 400 | 401 | 413 | 415;
  detail: string;
}

export type ReceiveResult =
  | { ok: true; event: WebhookEvent; rawBody: Buffer }
  | { ok: false; problem: ReceiverProblem };

const problem = (status: ReceiverProblem["status"], title: string, detail: string) => ({
  ok: false as const,
  problem: { type: "about:blank" as const, title, status, detail },
});

/** Reads the whole body as bytes, refusing more than `maxBytes` (without buffering the excess). */
export function readRawBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | "too-large"> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (declared > maxBytes) {
      req.resume();
      return resolve("too-large");
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners("data");
        req.resume();
        resolve("too-large");
      } else {
        chunks.push(chunk);
      }
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject); // also a client that goes away mid-body ("aborted")
  });
}

/** Request headers as frameworks hand them over: a Fetch API `Headers`, or an object keyed by name in any case. */
export type DeliveryHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * A header's value, its name matched in any case (RFC 9110 §5.1): node:http gives lowercase keys, but
 * AWS API Gateway, many test doubles and hand-built objects keep the case sent. A header given under
 * two spellings is given twice.
 */
function headerValue(headers: DeliveryHeaders, name: string): string | string[] | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const values = Object.entries(headers as Record<string, string | string[] | undefined>)
    .filter(([key, value]) => key.toLowerCase() === name && value !== undefined)
    .flatMap(([, value]) => value!);
  return values.length <= 1 ? values[0] : values;
}

/** Verifies and parses a body received with its headers (names in any case); the framework-independent core. */
export function verifyDelivery(rawBody: Buffer, headers: DeliveryHeaders, secret: string): ReceiveResult {
  const rules = loadDeliveryRules();
  const contentType = String(headerValue(headers, "content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (contentType !== rules.contentType) {
    return problem(415, "Unsupported media type", `Deliveries are ${rules.contentType}, not ${contentType || "untyped"}.`);
  }
  const check = verifySignature(rawBody, headerValue(headers, rules.signatureHeader.toLowerCase()), secret);
  if (!check.valid) return problem(401, "Invalid signature", check.message);
  const parsed = parseEvent(rawBody);
  if (!parsed.ok) return problem(400, "Invalid event", [parsed.error, ...parsed.issues].join(" "));
  return { ok: true, event: parsed.event, rawBody };
}

/** Reads, verifies and parses one delivery from a node:http request. */
export async function readVerifiedEvent(req: IncomingMessage, options: ReceiveOptions): Promise<ReceiveResult> {
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  const rawBody = await readRawBody(req, maxBytes);
  if (rawBody === "too-large") return problem(413, "Payload too large", `The body exceeds ${maxBytes} bytes.`);
  return verifyDelivery(rawBody, req.headers, options.secret);
}

export function sendProblem(res: ServerResponse, p: ReceiverProblem): void {
  res.writeHead(p.status, { "content-type": "application/problem+json" }).end(JSON.stringify(p));
}

/**
 * A node:http request handler for deliveries: 204 once `onEvent` has taken the event (also for a
 * duplicate: deduplicating by `event.id` is `onEvent`'s job), 401/400/413/415 with problem+json
 * otherwise. If `onEvent` throws, 500, so that the service retries.
 */
export function createWebhookHandler(
  options: ReceiveOptions & { onEvent: (event: WebhookEvent, rawBody: Buffer) => void | Promise<void> },
): (req: IncomingMessage, res: ServerResponse) => void {
  // Fails where it is configured, not with a 401 on every delivery: an unset secret is a setup error.
  if (typeof options.secret !== "string" || options.secret === "") throw new TypeError("createWebhookHandler: options.secret is empty; give the secret of the webhook's registration");
  return (req, res) => {
    void (async () => {
      if (req.method !== "POST") {
        res.writeHead(405, { allow: "POST" }).end();
        return;
      }
      const result = await readVerifiedEvent(req, options);
      if (!result.ok) return sendProblem(res, result.problem);
      await options.onEvent(result.event, result.rawBody);
      res.writeHead(204).end();
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  };
}
