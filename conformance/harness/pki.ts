// A certificate authority and a server certificate made fresh for one run, so that an implementation
// under test can trust the suite's HTTPS receiver without trusting anything else.
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
