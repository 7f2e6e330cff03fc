// Certification of a partner's webhook receiver: the suite plays the service, delivering exactly as a
// conforming server does (src/sender.ts), and checks what the receiver acknowledges and refuses.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Dispatcher } from "undici";
import { buildEnvelope, deliver, type DeliveryOutcome } from "../../src/sender.js";
import { signPayload } from "../../src/signing.js";
import { eventNames, loadDeliveryRules } from "../../src/spec.js";
import { defineCheck, expectEqual, expectThat, runChecks, type Check, type RunOptions, type SuiteReport } from "../framework/check.js";
import { loadSigningVectors, type SigningVector } from "../vectors/index.js";

export interface ReceiverSuiteOptions {
  url: string;
  /** The secret the receiver verifies with. */
  secret: string;
  dispatcher?: Dispatcher;
  /** The attempt timeout the receiver must answer within; default the spec's. */
  timeoutMs?: number;
}

interface ReceiverContext {
  options: ReceiverSuiteOptions;
  timeoutMs: number;
  /** Latency of every delivery made, for the timeout check. */
  latencies: number[];
  send(body: Buffer, header: string | null): Promise<DeliveryOutcome>;
}

const otherSecret = "whsec-certification-other-secret";
const reserialize = (body: Buffer) => Buffer.from(JSON.stringify(JSON.parse(body.toString("utf8"))));

/** The vector's body with the header its kind calls for, signed for this receiver's secret. */
function headerFor(v: SigningVector, secret: string): string | null {
  const good = signPayload(v.body, secret);
  switch (v.id) {
    case "wrong-secret":
      return signPayload(v.body, otherSecret);
    case "reserialized-body-signature":
      return signPayload(reserialize(v.body), secret);
    case "truncated-header":
      return good.slice(0, 63);
    case "uppercase-hex":
      return good.toUpperCase();
    case "sha256-prefixed":
      return `sha256=${good}`;
    case "non-hex":
      return "z".repeat(64);
    case "empty-header":
      return "";
    case "missing-header":
      return null;
    default:
      return good; // valid vectors, and tampered-byte (whose body was changed after signing)
  }
}

/** For tampered-byte the body was changed after signing: sign the original instead. */
function signedBodyFor(v: SigningVector, secret: string, vectors: SigningVector[]): { body: Buffer; header: string | null } {
  if (v.id === "tampered-byte") {
    const original = vectors.find((x) => x.id === "compact-envelope")!;
    return { body: v.body, header: signPayload(original.body, secret) };
  }
  return { body: v.body, header: headerFor(v, secret) };
}

const vectors = loadSigningVectors();
const vector = (id: string) => vectors.find((v) => v.id === id)!;
const ok = (o: DeliveryOutcome) => o.status !== undefined && o.status >= 200 && o.status < 300;
const shown = (o: DeliveryOutcome) => (o.status !== undefined ? o.status : `no answer (${o.error})`);

function refusal(id: string, vectorId: string, section: string, title: string): Check<ReceiverContext> {
  return defineCheck({
    id,
    section,
    title,
    async run(ctx) {
      const { body, header } = signedBodyFor(vector(vectorId), ctx.options.secret, vectors);
      const outcome = await ctx.send(body, header);
      expectThat(outcome.status !== undefined && !ok(outcome), `the receiver acknowledged a delivery it must refuse (${vectorId})`, "a non-2xx status", shown(outcome));
    },
  });
}

export const receiverChecks: Check<ReceiverContext>[] = [
  defineCheck({
    id: "acknowledges-every-event",
    section: "§6, §5.3",
    title: "Each of the eight events, correctly signed, is acknowledged with a 2xx.",
    async run(ctx) {
      const statuses: Record<string, unknown> = {};
      for (const event of eventNames) {
        const body = Buffer.from(JSON.stringify(buildEnvelope(event)));
        statuses[event] = shown(await ctx.send(body, signPayload(body, ctx.options.secret)));
      }
      const failed = Object.entries(statuses).filter(([, s]) => typeof s !== "number" || s < 200 || s >= 300);
      expectEqual(Object.fromEntries(failed), {}, "some correctly signed events were not acknowledged");
    },
  }),
  defineCheck({
    id: "verifies-raw-bytes-not-reserialized-json",
    section: "§5.3, D2",
    title: "Valid deliveries whose bytes change when re-serialized (whitespace, key order, \\u escapes, non-ASCII, large numbers) are acknowledged.",
    async run(ctx) {
      const refused: Record<string, unknown> = {};
      for (const v of vectors.filter((x) => x.valid && x.id !== "non-ascii-secret")) {
        const outcome = await ctx.send(v.body, signPayload(v.body, ctx.options.secret));
        if (!ok(outcome)) refused[v.id] = shown(outcome);
      }
      expectEqual(refused, {}, "valid deliveries were refused: is the signature checked on re-serialized JSON?");
    },
  }),
  refusal("rejects-missing-signature", "missing-header", "§5.3", "A delivery without X-Service-Signature is refused."),
  refusal("rejects-empty-signature", "empty-header", "§5.3", "A delivery with an empty X-Service-Signature is refused."),
  refusal("rejects-wrong-signature", "non-hex", "§5.3", "A signature that is not the HMAC is refused."),
  refusal("rejects-other-secret", "wrong-secret", "§5.2, §5.3", "A signature made with another secret is refused."),
  refusal("rejects-tampered-body", "tampered-byte", "§5.3", "A body changed after signing is refused."),
  refusal("rejects-truncated-signature", "truncated-header", "§5.3, D2", "A signature cut short (a prefix of the right one) is refused."),
  refusal("rejects-reserialized-body-signature", "reserialized-body-signature", "§5.3, D2", "The signature of the re-serialized body, not of the bytes sent, is refused."),
  defineCheck({
    id: "acknowledges-duplicate-delivery",
    section: "§6, D4",
    title: "A second delivery of the same event id is acknowledged (receivers are idempotent).",
    async run(ctx) {
      const body = Buffer.from(JSON.stringify(buildEnvelope("booking.confirmed")));
      const header = signPayload(body, ctx.options.secret);
      const outcomes = [await ctx.send(body, header), await ctx.send(body, header)];
      expectThat(outcomes.every(ok), "a duplicate delivery was not acknowledged", "2xx, 2xx", outcomes.map(shown));
    },
  }),
  defineCheck({
    id: "answers-within-attempt-timeout",
    section: "§6, D6",
    title: "Every delivery is answered within the attempt timeout.",
    async run(ctx) {
      const slowest = Math.max(0, ...ctx.latencies);
      expectThat(slowest <= ctx.timeoutMs, "an answer came after the attempt timeout", `<= ${ctx.timeoutMs} ms`, `${Math.round(slowest)} ms`);
    },
  }),
];

export async function certifyReceiver(options: ReceiverSuiteOptions, run: RunOptions = {}): Promise<SuiteReport> {
  const timeoutMs = options.timeoutMs ?? loadDeliveryRules().attemptTimeoutSeconds * 1000;
  const latencies: number[] = [];
  const ctx: ReceiverContext = {
    options,
    timeoutMs,
    latencies,
    async send(body, header) {
      // Wait twice the timeout, so that a slow answer fails only the timeout check.
      const outcome = await deliver(options.url, body, {
        secret: options.secret,
        timeoutMs: timeoutMs * 2,
        dispatcher: options.dispatcher,
        header,
      });
      latencies.push(outcome.latencyMs);
      return outcome;
    },
  };
  return runChecks("receiver", options.url, receiverChecks, ctx, run);
}

/** Certifies a node:http-style handler in process, for a partner's own test runner. */
export async function certifyHandler(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  options: Omit<ReceiverSuiteOptions, "url">,
  run: RunOptions = {},
): Promise<SuiteReport> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    return await certifyReceiver({ ...options, url: `http://127.0.0.1:${port}/` }, run);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
