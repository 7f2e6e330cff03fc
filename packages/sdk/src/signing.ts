// Webhook signatures (source document, section 5.3; spec/DECISIONS.md D2): lowercase hex
// HMAC-SHA256 of the exact body bytes, keyed with the secret's UTF-8 bytes, no prefix.
import { createHmac, timingSafeEqual } from "node:crypto";

/** The exact bytes of a delivery body (a Buffer is a Uint8Array). A string is taken as its UTF-8 bytes. */
export type Payload = string | Uint8Array;

const SIGNATURE = /^[0-9a-f]{64}$/;

/** The `X-Service-Signature` value for a body: 64 lowercase hex digits. */
export function signPayload(body: Payload, secret: string): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

export type VerifyFailure =
  | "missing-signature"
  | "malformed-signature"
  | "signature-mismatch"
  | "missing-secret"
  /** The body given is not bytes or a string (typically an already parsed object). */
  | "invalid-body";

export type VerifyResult =
  | { valid: true }
  | {
      valid: false;
      reason: VerifyFailure;
      /** One sentence for logs and CLI output. */
      message: string;
    };

const fail = (reason: VerifyFailure, message: string): VerifyResult => ({ valid: false, reason, message });

/** Says what is wrong with a header that is not 64 lowercase hex digits (failure path only). */
function malformed(value: unknown): VerifyResult {
  const rule = "it must be 64 lowercase hex digits with no prefix";
  if (typeof value !== "string") return fail("malformed-signature", `The signature header is not text; ${rule}.`);
  const what = /^[a-z][a-z0-9-]{0,15}=/i.test(value)
    ? `has a "${value.slice(0, value.indexOf("=") + 1)}" prefix`
    : value.length !== 64
      ? `has ${value.length} characters`
      : /^[0-9a-fA-F]+$/.test(value)
        ? "has uppercase hex digits"
        : "has characters that are not hex digits";
  return fail("malformed-signature", `The signature ${what}; ${rule}.`);
}

/**
 * Checks a signature header against the raw body, in constant time. Never throws: a missing,
 * repeated or malformed (wrong length, uppercase, prefixed, non-hex) header, a wrong signature, an
 * empty secret or a body that is not bytes gives `valid: false` with a reason.
 */
export function verifySignature(
  body: Payload,
  header: string | readonly string[] | null | undefined,
  secret: string,
): VerifyResult {
  // Callers in plain JavaScript can pass anything: check the types instead of letting node:crypto throw.
  if (typeof secret !== "string" || secret === "") return fail("missing-secret", "No webhook secret was given.");
  if (typeof body !== "string" && !ArrayBuffer.isView(body)) {
    return fail(
      "invalid-body",
      `The body must be the raw bytes received (Buffer, Uint8Array or string), not ${body === null ? "null" : typeof body}: verify before parsing the JSON.`,
    );
  }
  let value: unknown = header;
  if (Array.isArray(header)) {
    if (header.length > 1) return fail("malformed-signature", "The signature header appears more than once.");
    value = header[0];
  }
  if (value === undefined || value === null || value === "") {
    return fail("missing-signature", "The signature header is missing.");
  }
  if (typeof value !== "string" || !SIGNATURE.test(value)) return malformed(value);
  const expected = createHmac("sha256", secret).update(body).digest();
  if (!timingSafeEqual(expected, Buffer.from(value, "hex"))) {
    return fail(
      "signature-mismatch",
      "The signature does not match the body: wrong secret, or the bytes were changed (re-serialized?).",
    );
  }
  return { valid: true };
}
