// Sending the "webhook disabled" e-mails (spec/DECISIONS.md D26): each claimed before it is sent, so that
// it goes out once however many servers share the database, and tried again at growing waits while the
// SMTP server refuses it. Its text is mail.ts's.
import type { DeliveryRules } from "@partner-platform/sdk";
import type { Clock } from "../clock.js";
import type { Db } from "../store.js";
import { composeDisableMail } from "./mail.js";
import type { DisableMail } from "./parts.js";

/** Disable e-mails claimed at a time: each is renewed before its send, so a slow SMTP server cannot outlast the claims. */
const MAIL_BATCH = 10;
/**
 * Real ms before a disable e-mail whose send failed is tried again, doubled at each failure up to the
 * most: every pass of a busy engine tried every e-mail an SMTP server had refused. The failures are
 * counted in its row, and its claim is kept until the wait is over, so every server waits it out.
 */
const MAIL_RETRY_MS = { first: 1_000, most: 300_000 };

export interface DisableMailer {
  /** Sends the e-mails not sent yet; a call while they are being sent joins that run. */
  sendPending(): Promise<void>;
}

export function createDisableMailer(options: {
  db: Db;
  clock: Clock;
  rules: DeliveryRules;
  /** This process's name on its claims, and real ms after which another's claim is free. */
  owner: string;
  leaseMs: number;
  contactEmailFor: (clientId: string) => string | undefined;
  sendMail: (mail: DisableMail) => Promise<void>;
  log: (message: string) => void;
}): DisableMailer {
  const { db, clock, rules } = options;
  /**
   * Sends the "webhook disabled" e-mails not sent yet, each claimed first so that it goes out once (D26).
   * One run at a time in a process: a call during a run joins it, and the run looks once more before it
   * ends. A run claims a few at a time, and renews each claim just before its send: a claim left to run
   * out while slow sends went before it was taken by the next run, and the e-mail went twice.
   */
  let mailing: Promise<void> | undefined;
  let mailAgain = false;
  function sendPendingNotifications(): Promise<void> {
    if (mailing) {
      mailAgain = true;
      return mailing;
    }
    mailing = (async () => {
      do {
        mailAgain = false;
        while ((await sendNotificationBatch()) === MAIL_BATCH);
      } while (mailAgain);
    })().finally(() => (mailing = undefined));
    return mailing;
  }

  /** Claims and sends up to MAIL_BATCH e-mails; returns how many were sent. */
  async function sendNotificationBatch(): Promise<number> {
    const realNow = Date.now();
    const { rows } = await db.query<{ webhook_id: string; client_id: string; url: string; business_id: string; created_at: string; send_failures: number }>(
      `WITH claimed AS (
         UPDATE notifications SET claimed_by = $1, claimed_at = $2 WHERE webhook_id IN (
           SELECT webhook_id FROM notifications WHERE sent_at IS NULL AND (claimed_by IS NULL OR claimed_at < $3)
           ORDER BY webhook_id LIMIT $4 FOR UPDATE SKIP LOCKED)
         RETURNING webhook_id, client_id, created_at, send_failures)
       SELECT c.webhook_id, c.client_id, c.created_at, c.send_failures, w.url, w.business_id FROM claimed c JOIN webhooks w ON w.id = c.webhook_id`,
      [options.owner, realNow, realNow - options.leaseMs, MAIL_BATCH],
    );
    let sent = 0;
    for (const n of rows) {
      // Still ours? Renewed, it stays ours for a lease from now; taken over, it is the other run's to send.
      const { rows: ours } = await db.query("UPDATE notifications SET claimed_at = $1 WHERE webhook_id = $2 AND claimed_by = $3 AND sent_at IS NULL RETURNING 1", [
        Date.now(),
        n.webhook_id,
        options.owner,
      ]);
      if (ours.length === 0) continue;
      try {
        const recipient = options.contactEmailFor(n.client_id);
        if (!recipient) throw new Error(`no contact address is configured for client ${n.client_id}`);
        const { rows: last } = await db.query<{ status: number | null; error: string | null }>(
          "SELECT status, error FROM attempts WHERE webhook_id = $1 AND state = 'failed' ORDER BY recorded_seq DESC LIMIT 1",
          [n.webhook_id],
        );
        await options.sendMail(
          composeDisableMail({
            to: recipient,
            webhookId: n.webhook_id,
            url: n.url,
            businessId: n.business_id,
            disabledAt: Number(n.created_at),
            failures: rules.disableAfterConsecutiveFailures,
            attemptTimeoutSeconds: rules.attemptTimeoutSeconds,
            webhookIdHeader: rules.disableEmail.webhookIdHeader,
            lastFailure: last[0] ?? { status: null, error: null },
          }),
        );
      } catch (error) {
        // Kept claimed until the wait is over (a claim older than a lease is free), then any server tries again.
        const failures = n.send_failures + 1;
        const waitMs = Math.min(MAIL_RETRY_MS.first * 2 ** (failures - 1), MAIL_RETRY_MS.most);
        await db.query("UPDATE notifications SET send_failures = $1, claimed_at = $2 WHERE webhook_id = $3 AND claimed_by = $4", [
          failures,
          Date.now() + waitMs - options.leaseMs,
          n.webhook_id,
          options.owner,
        ]);
        if (failures === 1) options.log(`e-mail for webhook ${n.webhook_id} not sent yet; tried again in ${waitMs / 1000} s, then at waits doubling up to ${MAIL_RETRY_MS.most / 60_000} min: ${(error as Error).message}`);
        continue;
      }
      try {
        await db.query("UPDATE notifications SET sent_at = $1 WHERE webhook_id = $2", [clock.now(), n.webhook_id]);
        sent++;
      } catch (error) {
        // Sent, not recorded: it goes again after its claim's lease, with the same Message-ID (D26).
        options.log(`e-mail for webhook ${n.webhook_id} sent, but not recorded as sent; it may go again with its Message-ID: ${(error as Error).message}`);
      }
    }
    return sent;
  }

  return { sendPending: sendPendingNotifications };
}
