// The suite receiver's certificates: a CA that the implementation under test trusts, and a server
// certificate issued from it for the exact host the receiver listens on. The CA is made per run, or kept
// in a folder (--pki-dir) for an implementation started beforehand.
import { X509Certificate, createPrivateKey } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import { generate } from "selfsigned";

export interface TestCa {
  /** PEM of the CA certificate: what the implementation under test must trust. */
  caCert: string;
  /** PEM of the CA's private key, to issue server certificates from it. */
  caKey: string;
}

export interface TestPki {
  /** PEM of the CA: what the implementation under test must trust. */
  caCert: string;
  /** PEM of the server certificate, signed by the CA. */
  cert: string;
  /** PEM of the server certificate's private key. */
  key: string;
}

const DAY_MS = 24 * 3600 * 1000;
const keyOptions = { keyType: "ec", curve: "P-256", algorithm: "sha256" } as const;

export async function createTestCa(validDays = 7): Promise<TestCa> {
  const ca = await generate([{ name: "commonName", value: "partner-platform conformance CA" }], {
    ...keyOptions,
    notAfterDate: new Date(Date.now() + validDays * DAY_MS),
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { caCert: ca.cert, caKey: ca.private };
}

/** A server certificate for `host`: an IP address goes into the SAN as an IP, a name as a DNS name. */
export async function issueServerCertificate(ca: TestCa, host: string): Promise<TestPki> {
  const altName = isIP(host) ? { type: 7 as const, ip: host } : { type: 2 as const, value: host };
  const server = await generate([{ name: "commonName", value: host }], {
    ...keyOptions,
    notAfterDate: new Date(Date.now() + 7 * DAY_MS),
    ca: { key: ca.caKey, cert: ca.caCert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [altName] },
    ],
  });
  return { caCert: ca.caCert, cert: server.cert, key: server.private };
}

/** Why a kept CA cannot be used (no key, expiring, key of another certificate), or undefined. */
function unusable(dir: string, files: { cert: string; key: string }): string | undefined {
  if (!existsSync(files.key)) return `${dir} has no ca-key.pem (made by an earlier version)`;
  try {
    const cert = new X509Certificate(readFileSync(files.cert));
    if (Date.parse(cert.validTo) < Date.now() + DAY_MS) return `the CA in ${files.cert} expires on ${cert.validTo}`;
    if (!cert.checkPrivateKey(createPrivateKey(readFileSync(files.key)))) return `${files.key} is not the key of ${files.cert}`;
  } catch (error) {
    return `${files.cert} or ${files.key} is not readable PEM (${(error as Error).message})`;
  }
  return undefined;
}

/**
 * The CA kept in `dir` (ca.pem, ca-key.pem), made on first use: for an implementation that is started
 * before the suite and told to trust `dir/ca.pem`. A folder whose CA cannot be used is made anew, and
 * `notice` says so (the implementation must then trust the new ca.pem).
 */
export async function loadOrCreateCa(dir: string, notice: (line: string) => void): Promise<TestCa> {
  const files = { cert: path.join(dir, "ca.pem"), key: path.join(dir, "ca-key.pem") };
  if (existsSync(files.cert)) {
    const problem = unusable(dir, files);
    if (problem === undefined) return { caCert: readFileSync(files.cert, "utf8"), caKey: readFileSync(files.key, "utf8") };
    notice(`${problem}: made a new CA in ${files.cert}; the implementation must trust it (restart it if it runs already)`);
  }
  // Kept across runs, so longer-lived than a per-run CA; each run issues its own short-lived server certificate.
  const ca = await createTestCa(825);
  mkdirSync(dir, { recursive: true });
  // Server certificates of earlier versions were kept here too: they belong to the old CA.
  for (const stale of ["cert.pem", "key.pem"]) rmSync(path.join(dir, stale), { force: true });
  writeFileSync(files.cert, ca.caCert);
  writeFileSync(files.key, ca.caKey, { mode: 0o600 });
  chmodSync(files.key, 0o600);
  return ca;
}
