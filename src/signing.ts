// Webhook signatures (source document, section 5.3; spec/DECISIONS.md "Signing"): lowercase hex
// HMAC-SHA256 of the exact body bytes, keyed with the secret's UTF-8 bytes, no prefix.
import { createHmac, timingSafeEqual } from "node:crypto";

/** The exact bytes of a delivery body. A string is taken as its UTF-8 bytes. */
export type Payload = string | Uint8Array;

const SIGNATURE = /^[0-9a-f]{64}$/;

function toBytes(body: Payload): Uint8Array {
  return typeof body === "string" ? Buffer.from(body, "utf8") : body;
}

/** The `X-Service-Signature` value for a body: 64 lowercase hex digits. */
export function signPayload(body: Payload, secret: string): string {
  return createHmac("sha256", secret).update(toBytes(body)).digest("hex");
}

export type VerifyFailure = "missing-signature" | "malformed-signature" | "signature-mismatch" | "missing-secret";

export type VerifyResult =
  | { valid: true }
  | {
      valid: false;
      reason: VerifyFailure;
      /** One sentence for logs and CLI output. */
      message: string;
    };

/**
 * Checks a signature header against the raw body, in constant time. Never throws: a missing,
 * malformed (wrong length, uppercase, prefixed, non-hex) or wrong header gives `valid: false`
 * with a reason.
 */
export function verifySignature(
  body: Payload,
  header: string | readonly string[] | null | undefined,
  secret: string,
): VerifyResult {
  if (!secret) return { valid: false, reason: "missing-secret", message: "No webhook secret was given." };
  if (Array.isArray(header) && header.length !== 1) {
    return header.length === 0
      ? { valid: false, reason: "missing-signature", message: "The signature header is missing." }
      : { valid: false, reason: "malformed-signature", message: "The signature header appears more than once." };
  }
  const value = typeof header === "string" ? header : (header as readonly string[] | null | undefined)?.[0];
  if (value === undefined || value === null || value === "") {
    return { valid: false, reason: "missing-signature", message: "The signature header is missing." };
  }
  if (!SIGNATURE.test(value)) {
    return {
      valid: false,
      reason: "malformed-signature",
      message: `The signature must be 64 lowercase hex digits with no prefix; got ${value.length} characters.`,
    };
  }
  const expected = createHmac("sha256", secret).update(toBytes(body)).digest();
  if (!timingSafeEqual(expected, Buffer.from(value, "hex"))) {
    return {
      valid: false,
      reason: "signature-mismatch",
      message: "The signature does not match the body: wrong secret, or the bytes were changed (re-serialized?).",
    };
  }
  return { valid: true };
}
