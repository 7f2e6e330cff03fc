// The suite receiver's certificates: a CA that the implementation under test trusts, and a server
// certificate issued from it for the exact host the receiver listens on. The CA is made per run, or kept
// in a folder (--pki-dir) for an implementation started beforehand.
import { X509Certificate, createPrivateKey, randomBytes, webcrypto } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import * as x509 from "@peculiar/x509";

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
const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
// @peculiar/x509 is typed against the DOM's Crypto, which node:crypto's webcrypto is at run time.
const crypto = webcrypto as unknown as NonNullable<Parameters<typeof x509.X509CertificateGenerator.create>[1]>;

// What the strictest verifiers ask of a chain (OpenSSL's -x509_strict, Python 3.13's default
// VERIFY_X509_STRICT): a Subject Key Identifier on each certificate, an Authority Key Identifier on the
// issued one, and a critical basicConstraints on the CA.
/** Valid for `days` from a minute ago (clock skew); `days` below 0: expired that long ago, after a week's validity. */
const validity = (days: number) => ({
  serialNumber: `01${randomBytes(15).toString("hex")}`, // positive, 16 bytes
  notBefore: new Date(days < 0 ? Date.now() + (days - 7) * DAY_MS : Date.now() - 60_000),
  notAfter: new Date(Date.now() + days * DAY_MS),
  signingAlgorithm: algorithm,
});
const pemKey = async (key: webcrypto.CryptoKey) => x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
const newKeys = () => webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"]) as Promise<webcrypto.CryptoKeyPair>;

export async function createTestCa(validDays = 7): Promise<TestCa> {
  const keys = await newKeys();
  const ca = await x509.X509CertificateGenerator.createSelfSigned(
    {
      ...validity(validDays),
      // Valid since well before any certificate it issues, an expired one's included: a verifier that
      // checks the chain at a moment inside the leaf's validity then finds the CA valid too.
      notBefore: new Date(Date.now() - 30 * DAY_MS),
      name: "CN=partner-platform conformance CA",
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { caCert: ca.toString("pem"), caKey: await pemKey(keys.privateKey) };
}

/**
 * A server certificate for `host`: an IP address goes into the SAN as an IP, a name as a DNS name. Valid
 * for a week, or with `validDays` below 0 expired that many days ago.
 */
export async function issueServerCertificate(ca: TestCa, host: string, validDays = 7): Promise<TestPki> {
  const caCert = new x509.X509Certificate(ca.caCert);
  const der = createPrivateKey(ca.caKey).export({ type: "pkcs8", format: "der" });
  const signingKey = await webcrypto.subtle.importKey("pkcs8", der, algorithm, false, ["sign"]);
  const keys = await newKeys();
  const server = await x509.X509CertificateGenerator.create(
    {
      ...validity(validDays),
      subject: `CN=${host}`,
      issuer: caCert.subject,
      publicKey: keys.publicKey,
      signingKey,
      extensions: [
        new x509.BasicConstraintsExtension(false),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([isIP(host) ? { type: "ip", value: host } : { type: "dns", value: host }]),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { caCert: ca.caCert, cert: server.toString("pem"), key: await pemKey(keys.privateKey) };
}

/** Why a kept CA cannot be used (no key, expiring, key of another certificate), or undefined. */
function unusable(dir: string, files: { cert: string; key: string }): string | undefined {
  if (!existsSync(files.key)) return `${dir} has no ca-key.pem (made by an earlier version)`;
  try {
    const cert = new X509Certificate(readFileSync(files.cert));
    if (Date.parse(cert.validTo) < Date.now() + DAY_MS) return `the CA in ${files.cert} expires on ${cert.validTo}`;
    const key = createPrivateKey(readFileSync(files.key));
    if (!cert.checkPrivateKey(key)) return `${files.key} is not the key of ${files.cert}`;
    if (!new x509.X509Certificate(cert.raw).getExtension(x509.SubjectKeyIdentifierExtension)) {
      return `the CA in ${files.cert} has no Subject Key Identifier, which strict verifiers (Python 3.13's default) require`;
    }
    if (key.asymmetricKeyDetails?.namedCurve !== "prime256v1") return `${files.key} is not a P-256 key`;
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
  } else {
    // An implementation started before this run cannot trust it yet: the run will stop saying so.
    notice(`made a CA in ${files.cert} (the first use of ${dir}); the implementation must trust it (restart it if it runs already)`);
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
