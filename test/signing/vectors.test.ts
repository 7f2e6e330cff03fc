import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { loadSigningVectors, signingVectorsFile } from "../../conformance/vectors/index.js";
import { signPayload, verifySignature } from "../../src/signing.js";
import { loadDeliveryRules } from "../../src/spec.js";

const raw = JSON.parse(readFileSync(signingVectorsFile, "utf8")) as { header: string; vectors: { bodyBase64: string; bodyText?: string }[] };
const vectors = loadSigningVectors();

describe("signing test vectors", () => {
  it("validate against their schema and name the spec's signature header", () => {
    const schema = JSON.parse(readFileSync(path.join(path.dirname(signingVectorsFile), "signing.schema.json"), "utf8")) as object;
    const validate = new Ajv2020({ allErrors: true }).compile(schema);
    expect(validate(raw), JSON.stringify(validate.errors)).toBe(true);
    expect(raw.header).toBe(loadDeliveryRules().signatureHeader);
  });

  it("carry bodyText equal to the base64 body wherever the body is UTF-8", () => {
    for (const v of raw.vectors.filter((x) => x.bodyText !== undefined)) {
      expect(Buffer.from(v.bodyText!, "utf8").equals(Buffer.from(v.bodyBase64, "base64"))).toBe(true);
    }
  });

  it("include valid bodies that re-serializing would change, and every kind of failure", () => {
    expect(vectors.filter((v) => v.valid && v.changesWhenReserialized).length).toBeGreaterThanOrEqual(3);
    expect(new Set(vectors.filter((v) => !v.valid).map((v) => v.reason))).toEqual(
      new Set(["signature-mismatch", "malformed-signature", "missing-signature"]),
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
});
