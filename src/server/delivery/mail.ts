// The "webhook disabled" e-mail (spec/DECISIONS.md D26): which webhook, why, what was cancelled,
// what to do; one stable Message-ID per disabling so that a copy sent again can be recognised.
import type { DisableMail } from "./parts.js";

export interface DisabledWebhook {
  to: string;
  webhookId: string;
  url: string;
  businessId: string;
  /** Clock time of the failure that disabled it. */
  disabledAt: number;
  /** Consecutive failed attempts that disabled it, and the attempt timeout (D6, D7). */
  failures: number;
  attemptTimeoutSeconds: number;
  /** The header naming the webhook, for mail filters and tools (x-delivery.disableEmail). */
  webhookIdHeader: string;
  lastFailure: { status: number | null; error: string | null };
}

function describeFailure(f: DisabledWebhook["lastFailure"]): string {
  if (f.status !== null) return `HTTP ${f.status}`;
  return f.error ?? "no answer";
}

export function composeDisableMail(w: DisabledWebhook): DisableMail {
  const text = [
    `Your Partner Platform webhook ${w.webhookId} was disabled at ${new Date(w.disabledAt).toISOString()}.`,
    "",
    `  Webhook:  ${w.webhookId}`,
    `  URL:      ${w.url}`,
    `  Business: ${w.businessId}`,
    "",
    `Why: ${w.failures} consecutive failed delivery attempts. The last one failed with: ${describeFailure(w.lastFailure)}.`,
    `An attempt fails when the endpoint answers with a status other than 2xx, cannot be reached, or gives no complete answer within ${w.attemptTimeoutSeconds} seconds.`,
    "",
    "Its pending deliveries were cancelled, and no further events will be sent to it.",
    "Once your endpoint answers with 2xx, register a new webhook (POST /api/v2/webhooks).",
    "",
  ].join("\n");
  return {
    to: w.to,
    subject: `Partner Platform: webhook ${w.webhookId} disabled`,
    text,
    headers: {
      "Message-ID": `<webhook-${w.webhookId}-disabled@partner-platform.example>`,
      [w.webhookIdHeader]: w.webhookId,
    },
  };
}
