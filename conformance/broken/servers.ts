// The catalogue of broken servers: the reference server with exactly one fault each. The
// certification suite must catch every one with the check that names that fault
// (conformance/broken/server-expected-failures.json).
import type { ServerFault } from "../../src/server/delivery.js";
import type { DeliveryRules } from "../../src/spec.js";

export interface BrokenServer {
  id: string;
  faults?: ServerFault[];
  rules?: (rules: DeliveryRules) => DeliveryRules;
}

export const brokenServers: BrokenServer[] = [
  { id: "signs-reserialized-body", faults: ["signs-reserialized-body"] },
  { id: "uppercase-hex-signature", faults: ["uppercase-hex-signature"] },
  { id: "signs-with-another-webhooks-secret", faults: ["signs-with-another-webhooks-secret"] },
  { id: "new-event-id-per-retry", faults: ["new-event-id-per-retry"] },
  { id: "retries-one-step-early", rules: (r) => ({ ...r, retryWaitsSeconds: r.retryWaitsSeconds.map((w) => w - 1) }) },
  { id: "waits-20-percent-short", rules: (r) => ({ ...r, retryWaitsSeconds: r.retryWaitsSeconds.map((w) => w * 0.8) }) },
  { id: "disables-after-6", rules: (r) => ({ ...r, disableAfterConsecutiveFailures: r.disableAfterConsecutiveFailures + 1 }) },
  { id: "never-disables", rules: (r) => ({ ...r, disableAfterConsecutiveFailures: Number.POSITIVE_INFINITY }) },
  { id: "no-reset-on-success", faults: ["no-reset-on-success"] },
  { id: "delivers-after-disable", faults: ["delivers-after-disable"] },
  { id: "no-disable-email", faults: ["no-disable-email"] },
  { id: "ignores-events-filter", faults: ["ignores-events-filter"] },
  { id: "ignores-business-filter", faults: ["ignores-business-filter"] },
  { id: "accepts-plain-http-url", faults: ["accepts-plain-http-url"] },
];
