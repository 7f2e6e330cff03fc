// The catalogue of broken receivers: a correct node:http receiver with exactly one fault each. The
// receiver certification must catch every one (conformance/broken/receiver-expected-failures.json).
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { eventNames, readRawBody, sendProblem, verifyDelivery, loadDeliveryRules, type EventName } from "@partner-platform/sdk";
import { sharedEventExample } from "../../src/spec.js";
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
      // What cannot be parsed where a fault reads it first is a 500, as a framework answers a handler's throw.
      const status = await Promise.resolve()
        .then(() => decide(body, req.headers[header()] as string | undefined, correct))
        .catch(() => 500);
      if (!res.headersSent) res.writeHead(status).end();
    })();
  };
}

const envelopeOf = (body: Buffer) => JSON.parse(body.toString("utf8")) as { id?: string; event?: EventName; timestamp?: string; data?: Record<string, unknown> };

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
 * (a 400 and a closed connection); with `refusesMalformedBeforeBody`, one whose header is not 64 hex
 * digits; with `readsBeforeRefusing`, a delivery without the header after reading only that many bytes
 * of its body. With `closesAfterRefusal` (legal) it closes the connection after each refusal without
 * saying so first. With `cutsAcknowledgementsShort` (a fault) each acknowledgement is a 200 whose body
 * stops at 8 of the 64 bytes its Content-Length says, and the connection is closed.
 */
export function handWrittenReceiver(
  accepts: (body: Buffer, headers: Record<string, string>) => boolean,
  { answersBeforeBody = false, closesAfterRefusal = false, readsBeforeRefusing = Infinity, refusesMalformedBeforeBody = false, cutsAcknowledgementsShort = false } = {},
): RawReceiver {
  return {
    connection(socket) {
      let buffer = Buffer.alloc(0);
      const answer = (status: number, close = false) =>
        status < 300 && cutsAcknowledgementsShort
          ? socket.end(`HTTP/1.1 200 OK\r\ncontent-length: 64\r\n\r\nreceived`)
          : socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-length: 0\r\n${close ? "connection: close\r\n" : ""}\r\n`);
      const refuse = () => (answer(401), closesAfterRefusal && socket.end());
      socket.on("error", () => socket.destroy());
      socket.on("data", (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk]);
        for (let end = buffer.indexOf("\r\n\r\n"); end >= 0 && socket.writable; end = buffer.indexOf("\r\n\r\n")) {
          const [requestLine = "", ...lines] = buffer.subarray(0, end).toString("latin1").split("\r\n");
          if (!/^POST \S+ HTTP\/1\.1$/.test(requestLine)) return void (answer(400, true), socket.end());
          // Repeated lines of a header are one list (RFC 9110 §5.3).
          const headers: Record<string, string> = {};
          for (const l of lines) {
            const name = l.slice(0, l.indexOf(":")).trim().toLowerCase();
            const value = l.slice(l.indexOf(":") + 1).trim();
            headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
          }
          const signature = headers[header()];
          if ((answersBeforeBody && !signature) || (refusesMalformedBeforeBody && signature && !/^[0-9a-f]{64}$/.test(signature))) {
            buffer = buffer.subarray(end + 4); // the body stays, to be read as the next request
            refuse();
            continue;
          }
          const length = Number(headers["content-length"] ?? 0);
          if (!signature && length > readsBeforeRefusing) {
            // Reads so much of the body, and leaves the rest to be read as the next request.
            if (buffer.length < end + 4 + readsBeforeRefusing) return;
            buffer = buffer.subarray(end + 4 + readsBeforeRefusing);
            refuse();
            continue;
          }
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

/** Falls back to the signature of the parsed body written again in `form` when the raw bytes' does not match. */
function verifiesRawOr(secret: string, form: keyof typeof reserializations): Handler {
  const write = reserializations[form]!;
  return receiver(secret, (body, signature, correct) => (signature === hmac(write(JSON.parse(body.toString("utf8"))), secret) ? 204 : correct()));
}

/** Whether an object inside `value` has a member its counterpart in `example` does not (the top level's are not looked at). */
function hasUnknownNested(value: unknown, example: unknown, top = true): boolean {
  if (Array.isArray(value)) return value.some((v) => hasUnknownNested(v, Array.isArray(example) ? example[0] : undefined, false));
  if (value === null || typeof value !== "object" || example === null || typeof example !== "object") return false;
  const known = example as Record<string, unknown>;
  return Object.entries(value).some(([k, v]) => (!top && !(k in known)) || hasUnknownNested(v, known[k], false));
}

/** Verifies correctly, and refuses (409, as a replay) an id's authentic deliveries past the first `allowed`. */
function refusesDeliveriesOfAnIdPast(secret: string, allowed: number): Handler {
  const deliveries = new Map<string, number>();
  return receiver(secret, (body, _signature, correct) => {
    const verdict = correct();
    if (verdict >= 300) return verdict;
    const id = envelopeOf(body).id ?? "";
    deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
    return deliveries.get(id)! > allowed ? 409 : verdict;
  });
}

/** Verifies correctly, then refuses with `status` an authentic delivery that `refuses` picks. */
function refusesAuthentic(secret: string, status: number, refuses: (envelope: ReturnType<typeof envelopeOf>) => boolean): Handler {
  return receiver(secret, (body, _signature, correct) => {
    const verdict = correct();
    return verdict < 300 && refuses(envelopeOf(body)) ? status : verdict;
  });
}

/** Acknowledges, unverified, a request that `skips` picks (its body read), and verifies the others. */
function acknowledgesUnverified(secret: string, skips: (req: IncomingMessage) => boolean): Handler {
  const verifying = receiver(secret, (_body, _signature, correct) => correct());
  return (req, res) => {
    if (!skips(req)) return verifying(req, res);
    req.resume().on("end", () => res.writeHead(204).end());
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
  "verifies-raw-or-python-dumps": (secret) => verifiesRawOr(secret, "spaced (Python's json.dumps)"),
  "compares-first-half": (secret) =>
    receiver(secret, (body, signature) => (signature?.length === 64 && signature.slice(0, 32) === hmac(body, secret).slice(0, 32) ? 204 : 401)),
  "rejects-duplicates": (secret) => answersSeenIds(secret, 409),
  // Handles an authentic lead.updated for a while (a slow write of the lead) and answers 409 to a delivery of an id it is still handling.
  "refuses-duplicates-in-progress": (secret) => {
    const handling = new Set<string>();
    return receiver(secret, async (body, _signature, correct) => {
      const verdict = correct();
      const { id = "", event } = envelopeOf(body);
      if (verdict >= 300 || event !== "lead.updated") return verdict;
      if (handling.has(id)) return 409;
      handling.add(id);
      await new Promise((resolve) => setTimeout(resolve, 500));
      handling.delete(id);
      return verdict;
    });
  },
  // A replay window: refuses events stamped more than 5 minutes ago, retries included.
  "refuses-old-events": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const status = correct();
      return status < 300 && Date.now() - Date.parse(envelopeOf(body).timestamp ?? "") > 5 * 60_000 ? 401 : status;
    }),
  // Looks the header up by its exact lowercase name in the raw headers (a hand-written parser's habit).
  "reads-lowercase-header-name-only": (secret) => (req, res) => {
    const raw = req.rawHeaders;
    const values = raw.flatMap((name, i) => (i % 2 === 0 && name === header() ? [raw[i + 1]!] : []));
    delete req.headers[header()];
    if (values.length > 0) req.headers[header()] = values.join(", ");
    receiver(secret, (_body, _signature, correct) => correct())(req, res);
  },
  "limits-body-to-16-kib": (secret) => receiver(secret, (_body, _signature, correct) => correct(), 16 * 1024),
  // Acknowledges an id it has seen before verifying the signature (D2: verify first).
  "deduplicates-before-verifying": (secret) => answersSeenIds(secret, 204),
  "refuses-before-reading-body": (secret) => handWrittenReceiver((body, headers) => verifyDelivery(body, headers, secret).ok, { answersBeforeBody: true }),
  // The same, checking only that a signature is there: verdicts must not come from an earlier delivery's unread body.
  "checks-signature-presence-only": () => handWrittenReceiver(() => true, { answersBeforeBody: true }),
  // Secret rotation with the old secret's variable unset: the HMAC keyed with no bytes, which anyone can make, passes.
  "tries-an-unset-old-secret": (secret) =>
    receiver(secret, (body, signature, correct) => ([secret, ""].some((key) => signature === hmac(body, key)) ? 204 : correct())),
  "accepts-plain-sha256": (secret) =>
    receiver(secret, (body, signature, correct) => (signature === createHash("sha256").update(body).digest("hex") ? 204 : correct())),
  // Verifies JSON deliveries only; anything else is taken as a ping and acknowledged.
  "verifies-json-only": (secret) => acknowledgesUnverified(secret, (req) => !/^application\/json\b/.test(req.headers["content-type"] ?? "")),
  // A catch-all route: only POST is verified.
  "acknowledges-other-methods": (secret) => acknowledgesUnverified(secret, (req) => req.method !== "POST"),
  // Parses first and acknowledges what it cannot parse, as junk not worth a retry.
  "acknowledges-unparseable-bodies": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      try {
        JSON.parse(body.toString("utf8"));
      } catch {
        return 204;
      }
      return correct();
    }),
  // Remembers the ids of refused deliveries and refuses them again: a forgery sent first blocks its event.
  "refuses-ids-seen-refused": (secret) => {
    const refused = new Set<string>();
    return receiver(secret, (body, _signature, correct) => {
      const id = envelopeOf(body).id ?? "";
      if (refused.has(id)) return 409;
      const verdict = correct();
      if (verdict >= 300) refused.add(id);
      return verdict;
    });
  },
  // Reads the envelope into a closed type: a member the spec's example does not have is a 400.
  "refuses-unknown-members": (secret) =>
    refusesAuthentic(secret, 400, ({ event, data, ...envelope }) => {
      const example = sharedEventExample(event!) as { data: object };
      return Object.keys(envelope).some((k) => !["id", "timestamp"].includes(k)) || Object.keys(data ?? {}).some((k) => !(k in example.data));
    }),
  // Reads every member of the spec's example as required: a missing optional one is a 500.
  "requires-optional-members": (secret) =>
    refusesAuthentic(secret, 500, ({ event, data }) => Object.keys((sharedEventExample(event!) as { data: object }).data).some((k) => !(k in (data ?? {})))),
  // Stores texts in a column of 2,000 characters.
  "limits-texts-to-2000-characters": (secret) => refusesAuthentic(secret, 500, ({ data }) => typeof data?.text === "string" && [...data.text].length > 2000),
  // Refuses an event about a lead it has not seen created (but an expiry, which may concern an old lead).
  "refuses-events-of-unknown-leads": (secret) => {
    const leads = new Set<unknown>();
    return refusesAuthentic(secret, 409, ({ event, data }) => {
      if (event === "lead.created") leads.add(data?.leadID);
      return event !== "lead.created" && event !== "lead.expired" && data?.leadID !== undefined && !leads.has(data.leadID);
    });
  },
  // Refuses timestamps more than 5 s ahead of its own clock.
  "refuses-timestamps-ahead": (secret) => refusesAuthentic(secret, 400, ({ timestamp }) => Date.parse(timestamp ?? "") > Date.now() + 5000),
  "refuses-events-older-than-48-hours": (secret) => refusesAuthentic(secret, 400, ({ timestamp }) => Date.now() - Date.parse(timestamp ?? "") > 48 * 3600_000),
  // Keys the HMAC with the secret's Latin-1 bytes (one byte a character), not its UTF-8 bytes.
  "keys-hmac-with-latin-1-secret": (secret) =>
    receiver(secret, (body, signature) => (signature === createHmac("sha256", Buffer.from(secret, "latin1")).update(body).digest("hex") ? 204 : 401)),
  "verifies-raw-or-sorted-python-dumps": (secret) => verifiesRawOr(secret, "spaced, keys sorted (json.dumps with sort_keys)"),
  "verifies-raw-or-indented-python-dumps": (secret) => verifiesRawOr(secret, "indented by 4 (json.dumps with indent=4)"),
  "refuses-after-reading-1-kib": (secret) => handWrittenReceiver((body, headers) => verifyDelivery(body, headers, secret).ok, { readsBeforeRefusing: 1024 }),
  "refuses-malformed-before-reading-body": (secret) =>
    handWrittenReceiver((body, headers) => verifyDelivery(body, headers, secret).ok, { refusesMalformedBeforeBody: true }),
  "accepts-plain-sha1": (secret) =>
    receiver(secret, (body, signature, correct) => (signature === createHash("sha1").update(body).digest("hex") ? 204 : correct())),
  // Picks the HMAC's hash by the header's length (40 hex digits SHA-1, 128 SHA-512), as receivers of several providers do.
  "picks-hash-by-header-length": (secret) =>
    receiver(secret, (body, signature) => {
      const hash = { 40: "sha1", 96: "sha384", 128: "sha512" }[signature?.length ?? 0] ?? "sha256";
      return signature === createHmac(hash, secret).update(body).digest("hex") ? 204 : 401;
    }),
  // Drops (acknowledges) events stamped more than 30 days ago before verifying them.
  "acknowledges-very-old-events-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (Date.now() - Date.parse(envelopeOf(body).timestamp ?? "") > 30 * 86_400_000 ? 204 : correct())),
  // Drops (acknowledges) events stamped more than an hour ahead of its clock before verifying them.
  "acknowledges-events-ahead-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (Date.parse(envelopeOf(body).timestamp ?? "") > Date.now() + 3600_000 ? 204 : correct())),
  // Acknowledges, unverified, an event of a name it does not know (one a later version adds) as not wanted.
  "acknowledges-unknown-events-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (eventNames.includes(envelopeOf(body).event as EventName) ? correct() : 204)),
  // A router with POST and PUT verified, and a catch-all acknowledging the rest.
  "verifies-post-and-put-only": (secret) => acknowledgesUnverified(secret, (req) => req.method !== "POST" && req.method !== "PUT"),
  // Remembers two deliveries of an id: a third (a second retry) is refused as a replay.
  "refuses-third-delivery-of-an-id": (secret) => refusesDeliveriesOfAnIdPast(secret, 2),
  "accepts-any-space-separated-signature": (secret) =>
    receiver(secret, (body, signature) => ((signature ?? "").split(" ").some((s) => s === hmac(body, secret)) ? 204 : 401)),
  // Reads the first of repeated header lines (Python's message.get, Go's Header.Get), not the list they make.
  "reads-first-signature-header-line": (secret) => (req, res) => {
    const at = req.rawHeaders.findIndex((name, i) => i % 2 === 0 && name.toLowerCase() === header());
    if (at >= 0) req.headers[header()] = req.rawHeaders[at + 1];
    receiver(secret, (_body, _signature, correct) => correct())(req, res);
  },
  "strips-v1-prefix": (secret) => receiver(secret, (body, signature) => (signature?.replace(/^v1=/, "") === hmac(body, secret) ? 204 : 401)),
  "verifies-raw-or-indented-by-2": (secret) => verifiesRawOr(secret, "indented by 2 (json.dumps with indent=2)"),
  "verifies-raw-or-tab-indented": (secret) => verifiesRawOr(secret, "indented by a tab (json.dumps with indent='\\t')"),
  // Deletes every character that is not a hex digit before comparing: a signature in quotes or behind t= gets through.
  "strips-non-hex-characters": (secret) => receiver(secret, (body, signature) => ((signature ?? "").replace(/[^0-9a-f]/g, "") === hmac(body, secret) ? 204 : 401)),
  // Reads timestamps with a fixed format, seconds and Z: one with a fraction is a 400.
  "refuses-timestamp-fractions": (secret) => refusesAuthentic(secret, 400, ({ timestamp }) => !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(timestamp ?? "")),
  // Stores event ids in a column of 32 characters: a longer one is a 500.
  "stores-ids-in-32-characters": (secret) => refusesAuthentic(secret, 500, ({ id }) => (id ?? "").length > 32),
  // Takes only the Content-Type application/json, written so: with a charset parameter it is a 415.
  "takes-bare-json-content-type-only": (secret) => {
    const verifying = receiver(secret, (_body, _signature, correct) => correct());
    return (req, res) => (req.headers["content-type"] === "application/json" ? verifying(req, res) : void req.resume().on("end", () => res.writeHead(415).end()));
  },
  // Acknowledges with a 200 whose body is cut short (8 of 64 bytes), then closes: D6 makes that a failed attempt.
  "answers-2xx-cut-short": (secret) => handWrittenReceiver((body, headers) => verifyDelivery(body, headers, secret).ok, { cutsAcknowledgementsShort: true }),
  // Once a delivery on a kept-alive connection was verified, trusts the connection: later requests on it are acknowledged unverified.
  "trusts-a-verified-connection": (secret) => {
    const trusted = new WeakSet<Socket>();
    return (req, res) => {
      if (trusted.has(req.socket)) return void req.resume().on("end", () => res.writeHead(204).end());
      receiver(secret, (_body, _signature, correct) => {
        const verdict = correct();
        if (verdict < 300) trusted.add(req.socket);
        return verdict;
      })(req, res);
    };
  },
  // A "large payload" path that acknowledges bodies over 60,000 bytes without verifying them.
  "acknowledges-large-bodies-unverified": (secret) => receiver(secret, (body, _signature, correct) => (body.length > 60_000 ? 204 : correct())),
  // Verifies only a Content-Type written exactly application/json: with a charset it acknowledges unverified.
  "skips-verification-with-a-charset": (secret) => acknowledgesUnverified(secret, (req) => /;\s*charset=/i.test(req.headers["content-type"] ?? "")),
  // Drops (acknowledges) events stamped with a fraction of a second before verifying them, as from a system it does not know.
  "acknowledges-fractional-timestamps-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (/\.\d+Z$/.test(envelopeOf(body).timestamp ?? "") ? 204 : correct())),
  // Looks the header up by its name in lower case only, and acknowledges a request it finds none in as a ping.
  "acknowledges-header-spelled-otherwise-unverified": (secret) => (req, res) => {
    const spelled = req.rawHeaders.filter((_, i) => i % 2 === 0).find((name) => name.toLowerCase() === header());
    if (spelled !== undefined && spelled !== header()) return void req.resume().on("end", () => res.writeHead(204).end());
    receiver(secret, (_body, _signature, correct) => correct())(req, res);
  },
  // Acknowledges, unverified, JSON that is not an event (no data, or an id that is not an event id), as junk.
  "acknowledges-non-events-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const { id, data } = envelopeOf(body);
      return data === undefined || !/^evt_/.test(id ?? "") ? 204 : correct();
    }),
  // A "too large to be ours" path: bodies over 64 KiB acknowledged unverified, so that they are not retried.
  "acknowledges-oversized-bodies-unverified": (secret) => receiver(secret, (body, _signature, correct) => (body.length > 64 * 1024 ? 204 : correct())),
  // Drops (acknowledges) events stamped over two years ago or over two days ahead before verifying them, as a clock gone wrong.
  "acknowledges-timestamps-years-off-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const off = Date.now() - Date.parse(envelopeOf(body).timestamp ?? "");
      return off > 730 * 86_400_000 || off < -2 * 86_400_000 ? 204 : correct();
    }),
  // Drops (acknowledges) events whose timestamp it cannot read before verifying them.
  "acknowledges-unreadable-timestamps-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (Number.isNaN(Date.parse(envelopeOf(body).timestamp ?? "")) ? 204 : correct())),
  // Acknowledges, unverified, JSON that is not an envelope it can route (not an object, no id, no event name, a name that is not a string).
  "acknowledges-unroutable-json-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const value = JSON.parse(body.toString("utf8")) as unknown;
      if (value === null || typeof value !== "object" || Array.isArray(value)) return 204;
      const { id, event } = value as { id?: unknown; event?: unknown };
      return id === undefined || typeof event !== "string" ? 204 : correct();
    }),
  // Decodes the body strictly first, and acknowledges bytes that are not UTF-8 as junk.
  "acknowledges-non-utf8-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      try {
        new TextDecoder("utf-8", { fatal: true }).decode(body);
      } catch {
        return 204;
      }
      return correct();
    }),
  // Acknowledges, unverified, a body that begins with a byte order mark (the service never writes one, D1).
  "acknowledges-bom-prefixed-unverified": (secret) =>
    receiver(secret, (body, _signature, correct) => (body.subarray(0, 3).equals(Buffer.from([0xef, 0xbb, 0xbf])) ? 204 : correct())),
  // A legacy form handler on the same route: forms are acknowledged unverified.
  "acknowledges-forms-unverified": (secret) =>
    acknowledgesUnverified(secret, (req) => /^(application\/x-www-form-urlencoded|multipart\/form-data)\b/i.test(req.headers["content-type"] ?? "")),
  // A clock-skew guard: events stamped over 10 minutes ahead are refused.
  "refuses-timestamps-over-10-minutes-ahead": (secret) => refusesAuthentic(secret, 400, ({ timestamp }) => Date.parse(timestamp ?? "") > Date.now() + 600_000),
  "refuses-events-older-than-2-years": (secret) => refusesAuthentic(secret, 400, ({ timestamp }) => Date.now() - Date.parse(timestamp ?? "") > 730 * 86_400_000),
  "verifies-raw-or-php-pretty-print": (secret) => verifiesRawOr(secret, "indented by 4 and ending in a newline (PHP's JSON_PRETTY_PRINT and a newline)"),
  // Remembers six deliveries of an id, as many as one webhook makes of an event: a seventh is refused as a replay.
  "refuses-seventh-delivery-of-an-id": (secret) => refusesDeliveriesOfAnIdPast(secret, 6),
  // Reads the objects inside an event's data into closed types: a member the spec's example does not have there is a 400.
  "refuses-unknown-nested-members": (secret) =>
    refusesAuthentic(secret, 400, ({ event, data }) => hasUnknownNested(data, (sharedEventExample(event!) as { data: unknown }).data)),
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
