import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { loadSigningVectors, signingVectorsFile } from "../../conformance/vectors/index.js";
import { signingVectorDocument } from "../../scripts/make-signing-vectors.js";
import { parseEvent, signPayload, verifySignature, eventNames, loadDeliveryRules } from "@partner-platform/sdk";

const raw = JSON.parse(readFileSync(signingVectorsFile, "utf8")) as { header: string; vectors: { bodyBase64: string; bodyText?: string }[] };
const vectors = loadSigningVectors();

describe("signing test vectors", () => {
  it("validate against their schema and name the spec's signature header", () => {
    const schema = JSON.parse(readFileSync(path.join(path.dirname(signingVectorsFile), "signing.schema.json"), "utf8")) as object;
    const validate = new Ajv2020({ allErrors: true }).compile(schema);
    expect(validate(raw), JSON.stringify(validate.errors)).toBe(true);
    expect(raw.header).toBe(loadDeliveryRules().signatureHeader);
  });

  it("are exactly what scripts/make-signing-vectors.ts makes (rerun it after changing the spec's examples)", () => {
    expect(raw).toEqual(signingVectorDocument());
  });

  it("have unique ids", () => {
    expect(new Set(vectors.map((v) => v.id)).size).toBe(vectors.length);
  });

  it("have valid bodies that are schema-valid events, covering all eight", () => {
    const seen = new Set<string>();
    for (const v of vectors.filter((x) => x.valid)) {
      const parsed = parseEvent(v.body);
      expect(parsed.ok, `${v.id}: ${parsed.ok ? "" : [parsed.error, ...parsed.issues].join(" ")}`).toBe(true);
      if (parsed.ok) seen.add(parsed.event.event);
    }
    expect([...seen].sort()).toEqual([...eventNames].sort());
  });

  it("carry bodyText equal to the base64 body wherever the body is UTF-8", () => {
    for (const v of raw.vectors.filter((x) => x.bodyText !== undefined)) {
      expect(Buffer.from(v.bodyText!, "utf8").equals(Buffer.from(v.bodyBase64, "base64"))).toBe(true);
    }
  });

  it("include valid bodies that re-serializing would change, and every kind of failure", () => {
    expect(vectors.filter((v) => v.valid && v.changesWhenReserialized).length).toBeGreaterThanOrEqual(3);
    expect(new Set(vectors.filter((v) => !v.valid).map((v) => v.reason))).toEqual(
      new Set(["signature-mismatch", "malformed-signature", "missing-signature", "missing-secret"]),
    );
  });

  it.each(vectors.filter((v) => v.valid).map((v) => [v.id, v] as const))(
    "%s: the header is the HMAC computed independently with node:crypto",
    (_id, v) => {
      expect(createHmac("sha256", Buffer.from(v.secret, "utf8")).update(v.body).digest("hex")).toBe(v.header);
      expect(signPayload(v.body, v.secret)).toBe(v.header);
    },
  );

  it.each(vectors.map((v) => [v.id, v] as const))("%s: verifySignature agrees with the vector", (_id, v) => {
    const result = verifySignature(v.body, v.header, v.secret);
    expect(result.valid).toBe(v.valid);
    if (!result.valid) expect(result.reason).toBe(v.reason);
  });
});

describe("verifySignature", () => {
  const [v] = vectors.filter((x) => x.valid);
  it("accepts the body as a Buffer, a Uint8Array or a string", () => {
    expect(verifySignature(new Uint8Array(v!.body), v!.header, v!.secret).valid).toBe(true);
    expect(verifySignature(v!.body.toString("utf8"), v!.header, v!.secret).valid).toBe(true);
  });

  it("takes a header given once as an array (node:http) and refuses a repeated one", () => {
    expect(verifySignature(v!.body, [v!.header!], v!.secret).valid).toBe(true);
    expect(verifySignature(v!.body, [v!.header!, v!.header!], v!.secret)).toMatchObject({ valid: false, reason: "malformed-signature" });
    expect(verifySignature(v!.body, [], v!.secret)).toMatchObject({ valid: false, reason: "missing-signature" });
  });

  it("refuses an empty secret instead of verifying with it", () => {
    expect(verifySignature(v!.body, v!.header, "")).toMatchObject({ valid: false, reason: "missing-secret" });
  });

  // Plain-JavaScript callers can pass anything; none of it may throw.
  it("never throws on values of the wrong type", () => {
    const loose = verifySignature as (body: unknown, header: unknown, secret: unknown) => ReturnType<typeof verifySignature>;
    expect(loose(JSON.parse(v!.body.toString("utf8")), v!.header, v!.secret)).toMatchObject({ valid: false, reason: "invalid-body" });
    expect(loose(null, v!.header, v!.secret)).toMatchObject({ valid: false, reason: "invalid-body" });
    expect(loose(v!.body, v!.header, undefined)).toMatchObject({ valid: false, reason: "missing-secret" });
    expect(loose(v!.body, 42, v!.secret)).toMatchObject({ valid: false, reason: "malformed-signature" });
    expect(loose(v!.body, [undefined], v!.secret)).toMatchObject({ valid: false, reason: "missing-signature" });
  });

  it("says what is wrong with a malformed header", () => {
    const message = (header: string) => {
      const result = verifySignature(v!.body, header, v!.secret);
      return result.valid ? "" : result.message;
    };
    expect(message(`sha256=${v!.header!}`)).toMatch(/"sha256=" prefix/);
    expect(message(v!.header!.toUpperCase())).toMatch(/uppercase/);
    expect(message(v!.header!.slice(0, 63))).toMatch(/63 characters/);
    expect(message("z".repeat(64))).toMatch(/not hex digits/);
  });

  it("accepts a Uint8Array that is a view into a larger buffer", () => {
    const padded = Buffer.concat([Buffer.from("xx"), v!.body, Buffer.from("yy")]);
    expect(verifySignature(padded.subarray(2, 2 + v!.body.length), v!.header, v!.secret).valid).toBe(true);
  });
});
