// The catalogue of broken receivers: a correct node:http receiver with exactly one fault each. The
// receiver certification must catch every one (conformance/broken/receiver-expected-failures.json).
import { createHmac, timingSafeEqual } from "node:crypto";
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { readRawBody, sendProblem, verifyDelivery, loadDeliveryRules } from "@partner-platform/sdk";
import { reserializations } from "../receiver/index.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
/** A receiver that speaks HTTP/1.1 by hand on each connection (a node:http server always reads a body it was not asked for). */
export interface RawReceiver {
  connection(socket: Socket): void;
}
const header = () => loadDeliveryRules().signatureHeader.toLowerCase();
const hmac = (body: Buffer | string, secret: string) => createHmac("sha256", secret).update(body).digest("hex");

/**
 * A receiver that is correct but for `decide`, which may override the verdict on the raw body, and for
 * the body's size limit (default 1 MiB).
 */
function receiver(
  secret: string,
  decide: (body: Buffer, signature: string | undefined, correct: () => number) => number | Promise<number>,
  limitBytes = 1024 * 1024,
): Handler {
  return (req, res) => {
    void (async () => {
      const body = await readRawBody(req, limitBytes);
      if (body === "too-large") return void res.writeHead(413).end();
      const correct = () => {
        const result = verifyDelivery(body, req.headers, secret);
        if (!result.ok) sendProblem(res, result.problem);
        return result.ok ? 204 : result.problem.status;
      };
      const status = await decide(body, req.headers[header()] as string | undefined, correct);
      if (!res.headersSent) res.writeHead(status).end();
    })();
  };
}

const envelopeOf = (body: Buffer) => JSON.parse(body.toString("utf8")) as { id?: string; timestamp?: string };

/** Answers `status` to an id it acknowledged before, without verifying the delivery; verifies the others. */
function answersSeenIds(secret: string, status: number): Handler {
  const seen = new Set<string>();
  return receiver(secret, (body, _signature, correct) => {
    const id = envelopeOf(body).id ?? "";
    if (seen.has(id)) return status;
    const verdict = correct();
    if (verdict < 300) seen.add(id);
    return verdict;
  });
}

/**
 * A hand-written HTTP/1.1 receiver that keeps its connections alive and acknowledges what `accepts`
 * accepts. With `answersBeforeBody` (the fault) it refuses a delivery without the header, or with an
 * empty one, at once, before reading the body, whose bytes are then read as the start of the next request
 * (a 400 and a closed connection). With `closesAfterRefusal` (legal) it closes the connection after each
 * refusal without saying so first.
 */
export function handWrittenReceiver(
  accepts: (body: Buffer, headers: Record<string, string>) => boolean,
  { answersBeforeBody = false, closesAfterRefusal = false } = {},
): RawReceiver {
  return {
    connection(socket) {
      let buffer = Buffer.alloc(0);
      const answer = (status: number, close = false) =>
        socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-length: 0\r\n${close ? "connection: close\r\n" : ""}\r\n`);
      const refuse = () => (answer(401), closesAfterRefusal && socket.end());
      socket.on("error", () => socket.destroy());
      socket.on("data", (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk]);
        for (let end = buffer.indexOf("\r\n\r\n"); end >= 0 && socket.writable; end = buffer.indexOf("\r\n\r\n")) {
          const [requestLine = "", ...lines] = buffer.subarray(0, end).toString("latin1").split("\r\n");
          if (!/^POST \S+ HTTP\/1\.1$/.test(requestLine)) return void (answer(400, true), socket.end());
          const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
          if (answersBeforeBody && !headers[header()]) {
            buffer = buffer.subarray(end + 4); // the body stays, to be read as the next request
            refuse();
            continue;
          }
          const length = Number(headers["content-length"] ?? 0);
          if (buffer.length < end + 4 + length) return;
          const body = buffer.subarray(end + 4, end + 4 + length);
          buffer = buffer.subarray(end + 4 + length);
          if (accepts(body, headers)) answer(204);
          else refuse();
        }
      });
    },
  };
}

export const brokenReceivers: Record<string, (secret: string, opts: { delayMs: number }) => Handler | RawReceiver> = {
  "no-verification": (secret) => receiver(secret, () => 204),
  "verifies-reserialized-json": (secret) =>
    receiver(secret, (body, signature) => {
      const again = JSON.stringify(JSON.parse(body.toString("utf8")));
      return signature === hmac(again, secret) ? 204 : 401;
    }),
  // Handles the events it knows and refuses the one added after it was written.
  "refuses-payment-received": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const status = correct();
      return status < 300 && (JSON.parse(body.toString("utf8")) as { event?: string }).event === "payment.received" ? 422 : status;
    }),
  "accepts-missing-header": (secret) => receiver(secret, (_body, signature, correct) => (signature === undefined ? 204 : correct())),
  "accepts-signature-prefix": (secret) =>
    receiver(secret, (body, signature) => (signature && hmac(body, secret).startsWith(signature) ? 204 : 401)),
  // The common idiom: hex-decoding the header, which takes uppercase (and stops at the first non-hex character).
  "decodes-hex-signature": (secret) =>
    receiver(secret, (body, signature) => {
      const given = Buffer.from(signature ?? "", "hex");
      const right = createHmac("sha256", secret).update(body).digest();
      return given.length === right.length && timingSafeEqual(given, right) ? 204 : 401;
    }),
  "strips-sha256-prefix": (secret) => receiver(secret, (body, signature) => (signature?.replace(/^sha256=/, "") === hmac(body, secret) ? 204 : 401)),
  // Reads the first 64 characters of the header and compares those (a fixed-size buffer's habit).
  "compares-first-64-characters": (secret) => receiver(secret, (body, signature) => (signature?.slice(0, 64) === hmac(body, secret) ? 204 : 401)),
  // Takes the header as a comma-separated list, as some providers send several signatures.
  "accepts-any-listed-signature": (secret) =>
    receiver(secret, (body, signature) => ((signature ?? "").split(",").some((s) => s.trim() === hmac(body, secret)) ? 204 : 401)),
  // Takes the first of a comma-separated list (a provider's "v1=…,v0=…" habit): the right one first gets through.
  "takes-first-listed-signature": (secret) => receiver(secret, (body, signature) => ((signature ?? "").split(",")[0] === hmac(body, secret) ? 204 : 401)),
  // Handles lead.created and booking.confirmed, verified; acknowledges any other event at once, as "not wanted".
  "acknowledges-unwanted-events-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const event = (JSON.parse(body.toString("utf8")) as { event?: string }).event;
      return event === "lead.created" || event === "booking.confirmed" ? correct() : 204;
    }),
  // Drops (acknowledges) events stamped more than a day ago before verifying them.
  "acknowledges-old-events-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (Date.now() - Date.parse(envelopeOf(body).timestamp ?? "") > 24 * 3600_000 ? 204 : correct())),
  // Falls back to the signature of Python's json.dumps form of the parsed body when the raw bytes' does not match.
  "verifies-raw-or-python-dumps": (secret) =>
    receiver(secret, (body, signature, correct) => {
      const dumps = reserializations["spaced (Python's json.dumps)"]!;
      return signature === hmac(dumps(JSON.parse(body.toString("utf8"))), secret) ? 204 : correct();
    }),
  "compares-first-half": (secret) =>
    receiver(secret, (body, signature) => (signature?.length === 64 && signature.slice(0, 32) === hmac(body, secret).slice(0, 32) ? 204 : 401)),
  "rejects-duplicates": (secret) => answersSeenIds(secret, 409),
  // A replay window: refuses events stamped more than 5 minutes ago, retries included.
  "refuses-old-events": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const status = correct();
      return status < 300 && Date.now() - Date.parse(envelopeOf(body).timestamp ?? "") > 5 * 60_000 ? 401 : status;
    }),
  // Looks the header up by its exact lowercase name in the raw headers (a hand-written parser's habit).
  "reads-lowercase-header-name-only": (secret) => (req, res) => {
    const raw = req.rawHeaders;
    const at = raw.findIndex((name, i) => i % 2 === 0 && name === header());
    delete req.headers[header()];
    if (at >= 0) req.headers[header()] = raw[at + 1];
    receiver(secret, (_body, _signature, correct) => correct())(req, res);
  },
  "limits-body-to-16-kib": (secret) => receiver(secret, (_body, _signature, correct) => correct(), 16 * 1024),
  // Acknowledges an id it has seen before verifying the signature (D2: verify first).
  "deduplicates-before-verifying": (secret) => answersSeenIds(secret, 204),
  "refuses-before-reading-body": (secret) => handWrittenReceiver((body, headers) => verifyDelivery(body, headers, secret).ok, { answersBeforeBody: true }),
  // The same, checking only that a signature is there: verdicts must not come from an earlier delivery's unread body.
  "checks-signature-presence-only": () => handWrittenReceiver(() => true, { answersBeforeBody: true }),
  // Slow only on its first delivery (a cold start): one late answer must be enough to fail.
  "answers-after-timeout": (secret, { delayMs }) => {
    let first = true;
    return receiver(secret, async (_body, _signature, correct) => {
      if (first) {
        first = false;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      return correct();
    });
  },
};
