// Writes conformance/vectors/signing.json: the signing test vectors every test and helper reads.
// The expected headers are computed with node:crypto here, independently of packages/sdk/src/signing.ts.
// Deterministic: test/signing/vectors.test.ts checks that the committed file is what this makes.
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { signingVectorsFile } from "../conformance/vectors/index.js";
import { loadDeliveryRules } from "@partner-platform/sdk";
import { eventExample } from "../src/spec.js";

interface Vector {
  id: string;
  description: string;
  secret: string;
  bodyBase64: string;
  bodyText?: string;
  /** The X-Service-Signature header as sent; null when the header is absent. */
  header: string | null;
  valid: boolean;
  /** Why verification fails (packages/sdk/src/signing.ts VerifyFailure), null when valid. */
  reason: string | null;
  /** The body's bytes change when it is parsed and re-serialized with JSON.stringify. */
  changesWhenReserialized: boolean;
}

const secret = "whsec-acme-4711-kP9vR2xQ";
const hmac = (body: Buffer, key: string) => createHmac("sha256", Buffer.from(key, "utf8")).update(body).digest("hex");
const reserialized = (body: Buffer) => Buffer.from(JSON.stringify(JSON.parse(body.toString("utf8"))), "utf8");

function vector(id: string, description: string, body: Buffer, header: string | null, valid: boolean, reason: string | null, key = secret): Vector {
  const text = body.toString("utf8");
  return {
    id,
    description,
    secret: key,
    bodyBase64: body.toString("base64"),
    ...(Buffer.from(text, "utf8").equals(body) ? { bodyText: text } : {}),
    header,
    valid,
    reason,
    changesWhenReserialized: !reserialized(body).equals(body),
  };
}

const compact = Buffer.from(JSON.stringify(eventExample("lead.created")));
const pretty = Buffer.from(`${JSON.stringify(eventExample("booking.confirmed"), null, 2)}\n`);
const { id, event, timestamp, data } = eventExample("lead.updated");
const reordered = Buffer.from(JSON.stringify({ data, timestamp, event, id }));
const message = eventExample("message.received");
const escapes = Buffer.from(
  JSON.stringify({ ...message, data: { ...message.data, text: "@@TEXT@@" } }).replace(
    '"@@TEXT@@"',
    '"Caf\\u00e9 at 9? \\u2028 The leak is \\"under\\" the sink \\ud83d\\udebf"',
  ),
);
// Another event than the escapes vector: receivers that deduplicate by id must see two events.
const nonAscii = Buffer.from(
  JSON.stringify({ ...message, id: "evt_01JDB3F2H4K6M8P0R2T4V6X8Z1", data: { ...message.data, text: "Café – Straße – 東京 – 🔧" } }),
);
const payment = eventExample("payment.received");
const numbers = Buffer.from(
  JSON.stringify({ ...payment, data: { ...payment.data, amount: { amount: 18950, currency: "USD" } } })
    .replace('"amount":18950', '"amount":18950.0')
    .replace('"currency":"USD"}', '"currency":"USD","ledgerEntry":12345678901234567890,"rate":1e3}'),
);
// Tabs and CRLF line ends, as some serializers and proxies on other platforms write them.
const crlf = Buffer.from(`${JSON.stringify(eventExample("lead.expired"), null, "\t").replaceAll("\n", "\r\n")}\r\n`);
const cancelled = eventExample("booking.cancelled");
// PHP's json_encode escapes "/" by default; JSON.stringify writes it bare.
const solidus = Buffer.from(
  JSON.stringify({ ...cancelled, data: { ...cancelled.data, reason: "@@REASON@@" } }).replace(
    '"@@REASON@@"',
    '"Moved to 12\\/01, see https:\\/\\/example.com\\/b\\/6600001"',
  ),
);
const review = eventExample("review.created");
const wholeFloat = Buffer.from(JSON.stringify({ ...review, data: { ...review.data, rating: 5 } }).replace('"rating":5', '"rating":5.0'));
const unicodeSecret = "sécret-ключ-🔑-0123456789";

const tampered = Buffer.from(compact);
tampered[tampered.indexOf("4711")] = "5".charCodeAt(0);
const good = hmac(compact, secret);

const vectors: Vector[] = [
  vector("compact-envelope", "lead.created as compact JSON.", compact, good, true, null),
  vector("pretty-printed", "booking.confirmed indented with two spaces and a trailing newline.", pretty, hmac(pretty, secret), true, null),
  vector("unusual-key-order", "lead.updated with its members in reverse order.", reordered, hmac(reordered, secret), true, null),
  vector("unicode-escapes", "message.received whose text uses \\u escapes, an escaped U+2028 and a surrogate pair.", escapes, hmac(escapes, secret), true, null),
  vector("non-ascii-utf8", "message.received whose text is raw non-ASCII UTF-8.", nonAscii, hmac(nonAscii, secret), true, null),
  vector("large-numbers", "payment.received with 18950.0, a 20-digit integer and 1e3, which JSON.parse cannot keep.", numbers, hmac(numbers, secret), true, null),
  vector("crlf-and-tabs", "lead.expired indented with tabs, CRLF line ends and a trailing CRLF.", crlf, hmac(crlf, secret), true, null),
  vector("escaped-solidus", "booking.cancelled whose reason escapes every / as \\/ (as PHP's json_encode does).", solidus, hmac(solidus, secret), true, null),
  vector("integer-written-as-float", "review.created whose integer rating is written 5.0.", wholeFloat, hmac(wholeFloat, secret), true, null),
  vector("non-ascii-secret", "A secret with non-ASCII characters: the key is its UTF-8 bytes.", compact, hmac(compact, unicodeSecret), true, null, unicodeSecret),
  vector("tampered-byte", "One byte of the body changed after signing.", tampered, good, false, "signature-mismatch"),
  vector("wrong-secret", "Signed with another webhook's secret.", compact, hmac(compact, "whsec-other-webhook-secret"), false, "signature-mismatch"),
  vector("reserialized-body-signature", "The signature of the re-serialized body, not of the bytes sent.", pretty, hmac(reserialized(pretty), secret), false, "signature-mismatch"),
  vector("truncated-header", "The signature cut to 63 hex digits.", compact, good.slice(0, 63), false, "malformed-signature"),
  vector("uppercase-hex", "The right digest in uppercase hex.", compact, good.toUpperCase(), false, "malformed-signature"),
  vector("sha256-prefixed", "The right digest behind a sha256= prefix.", compact, `sha256=${good}`, false, "malformed-signature"),
  vector("extended-header", "The right digest followed by one more hex digit: the whole header is compared.", compact, `${good}0`, false, "malformed-signature"),
  vector(
    "signature-list",
    "Another secret's digest and the right one, comma-separated: the header holds one signature.",
    compact,
    `${hmac(compact, "whsec-other-webhook-secret")},${good}`,
    false,
    "malformed-signature",
  ),
  vector("non-hex", "64 characters that are not hex digits.", compact, "z".repeat(64), false, "malformed-signature"),
  vector("empty-header", "The header is present but empty.", compact, "", false, "missing-signature"),
  vector("missing-header", "No signature header at all.", compact, null, false, "missing-signature"),
  vector(
    "empty-secret",
    "The receiver's secret is unset (empty), and the header is the HMAC keyed with no bytes, which anyone can make: refused, whatever the header.",
    compact,
    hmac(compact, ""),
    false,
    "missing-secret",
    "",
  ),
];

/** The whole vector file, as committed. */
export function signingVectorDocument(): object {
  return {
    $schema: "./signing.schema.json",
    $comment:
      "Generated by `npx tsx scripts/make-signing-vectors.ts`. Signature: lowercase hex HMAC-SHA256 of the body bytes keyed with the secret's UTF-8 bytes (spec/DECISIONS.md D2).",
    header: loadDeliveryRules().signatureHeader,
    vectors,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeFileSync(signingVectorsFile, `${JSON.stringify(signingVectorDocument(), null, 2)}\n`);
  process.stdout.write(`Wrote ${vectors.length} vectors to ${path.relative(process.cwd(), signingVectorsFile)}\n`);
}
