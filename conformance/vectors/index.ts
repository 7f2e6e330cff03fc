// The signing test vectors (conformance/vectors/signing.json), decoded: every test and helper reads them here.
import { readFileSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "../../src/paths.js";
import type { VerifyFailure } from "@partner-platform/sdk";

export interface SigningVector {
  id: string;
  description: string;
  secret: string;
  body: Buffer;
  header: string | null;
  valid: boolean;
  reason: VerifyFailure | null;
  changesWhenReserialized: boolean;
}

export const signingVectorsFile = path.join(packageRoot, "conformance", "vectors", "signing.json");

export function loadSigningVectors(): SigningVector[] {
  const file = JSON.parse(readFileSync(signingVectorsFile, "utf8")) as {
    vectors: (Omit<SigningVector, "body"> & { bodyBase64: string })[];
  };
  return file.vectors.map(({ bodyBase64, ...v }) => ({ ...v, body: Buffer.from(bodyBase64, "base64") }));
}
