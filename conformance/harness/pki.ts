// A certificate authority and a server certificate made fresh for one run, so that an implementation
// under test can trust the suite's HTTPS receiver without trusting anything else.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { generate } from "selfsigned";

export interface TestPki {
  /** PEM of the CA: what the implementation under test must trust. */
  caCert: string;
  /** PEM of the server certificate, signed by the CA. */
  cert: string;
  /** PEM of the server certificate's private key. */
  key: string;
}

export async function createTestPki(hosts: { dns: string[]; ips: string[] } = { dns: ["localhost"], ips: ["127.0.0.1", "::1"] }): Promise<TestPki> {
  const notAfterDate = new Date(Date.now() + 7 * 24 * 3600 * 1000);
  const ca = await generate([{ name: "commonName", value: "partner-platform conformance CA" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const server = await generate([{ name: "commonName", value: hosts.dns[0] ?? hosts.ips[0] ?? "localhost" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [...hosts.dns.map((value) => ({ type: 2 as const, value })), ...hosts.ips.map((ip) => ({ type: 7 as const, ip }))],
      },
    ],
  });
  return { caCert: ca.cert, cert: server.cert, key: server.private };
}

/**
 * The PKI kept in a folder (ca.pem, cert.pem, key.pem), made on first use: for an implementation that is
 * started before the suite and told to trust `dir/ca.pem`.
 */
export async function loadOrCreatePki(dir: string): Promise<TestPki> {
  const files = { caCert: "ca.pem", cert: "cert.pem", key: "key.pem" } as const;
  if (Object.values(files).every((f) => existsSync(path.join(dir, f)))) {
    return {
      caCert: readFileSync(path.join(dir, files.caCert), "utf8"),
      cert: readFileSync(path.join(dir, files.cert), "utf8"),
      key: readFileSync(path.join(dir, files.key), "utf8"),
    };
  }
  const pki = await createTestPki();
  mkdirSync(dir, { recursive: true });
  for (const [key, file] of Object.entries(files)) writeFileSync(path.join(dir, file), pki[key as keyof TestPki]);
  return pki;
}
