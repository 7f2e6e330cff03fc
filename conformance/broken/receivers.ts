// The catalogue of broken receivers: a correct node:http receiver with exactly one fault each. The
// receiver certification must catch every one (conformance/broken/receiver-expected-failures.json).
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { readRawBody, sendProblem, verifyDelivery, loadDeliveryRules } from "@partner-platform/sdk";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const header = () => loadDeliveryRules().signatureHeader.toLowerCase();
const hmac = (body: Buffer | string, secret: string) => createHmac("sha256", secret).update(body).digest("hex");

/** A receiver that is correct but for `decide`, which may override the verdict on the raw body. */
function receiver(
  secret: string,
  decide: (body: Buffer, signature: string | undefined, correct: () => number) => number | Promise<number>,
): Handler {
  return (req, res) => {
    void (async () => {
      const body = await readRawBody(req, 1024 * 1024);
      if (body === "too-large") return void res.writeHead(413).end();
      const correct = () => {
        const result = verifyDelivery(body, req.headers, secret);
        if (!result.ok) sendProblem(res, result.problem);
        return result.ok ? 204 : result.problem.status;
      };
      const status = await decide(body, req.headers[header()] as string | undefined, correct);
      if (!res.headersSent) res.writeHead(status).end();
    })();
  };
}

export const brokenReceivers: Record<string, (secret: string, opts: { delayMs: number }) => Handler> = {
  "no-verification": (secret) => receiver(secret, () => 204),
  "verifies-reserialized-json": (secret) =>
    receiver(secret, (body, signature) => {
      const again = JSON.stringify(JSON.parse(body.toString("utf8")));
      return signature === hmac(again, secret) ? 204 : 401;
    }),
  // Handles the events it knows and refuses the one added after it was written.
  "refuses-payment-received": (secret) =>
    receiver(secret, (body, _signature, correct) => {
      const status = correct();
      return status < 300 && (JSON.parse(body.toString("utf8")) as { event?: string }).event === "payment.received" ? 422 : status;
    }),
  "accepts-missing-header": (secret) => receiver(secret, (_body, signature, correct) => (signature === undefined ? 204 : correct())),
  "accepts-signature-prefix": (secret) =>
    receiver(secret, (body, signature) => (signature && hmac(body, secret).startsWith(signature) ? 204 : 401)),
  // The common idiom: hex-decoding the header, which takes uppercase (and stops at the first non-hex character).
  "decodes-hex-signature": (secret) =>
    receiver(secret, (body, signature) => {
      const given = Buffer.from(signature ?? "", "hex");
      const right = createHmac("sha256", secret).update(body).digest();
      return given.length === right.length && timingSafeEqual(given, right) ? 204 : 401;
    }),
  "strips-sha256-prefix": (secret) => receiver(secret, (body, signature) => (signature?.replace(/^sha256=/, "") === hmac(body, secret) ? 204 : 401)),
  "compares-first-half": (secret) =>
    receiver(secret, (body, signature) => (signature?.length === 64 && signature.slice(0, 32) === hmac(body, secret).slice(0, 32) ? 204 : 401)),
  "rejects-duplicates": (secret) => {
    const seen = new Set<string>();
    return receiver(secret, (body, _signature, correct) => {
      const id = (JSON.parse(body.toString("utf8")) as { id?: string }).id ?? "";
      if (seen.has(id)) return 409;
      const status = correct();
      if (status < 300) seen.add(id);
      return status;
    });
  },
  // Slow only on its first delivery (a cold start): one late answer must be enough to fail.
  "answers-after-timeout": (secret, { delayMs }) => {
    let first = true;
    return receiver(secret, async (_body, _signature, correct) => {
      if (first) {
        first = false;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      return correct();
    });
  },
};
