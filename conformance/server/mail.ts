// The disable e-mails the suite's SMTP sink caught, decoded (MIME, quoted-printable, base64), and
// attributed to the webhook they name (D26), so that one scenario's e-mail is never counted for another.
import PostalMime from "postal-mime";
import type { CapturedMail } from "../harness/smtp-sink.js";

export interface DisableMailSeen {
  /** The envelope's recipients (RCPT TO), Bcc included. */
  to: string[];
  /** The recipients the message shows (its To, Cc and, sent as a header, Bcc), lower case. */
  shownTo: string[];
  subject: string;
  /** Header names in lower case; the last value of a repeated one. */
  headers: Record<string, string>;
  /** The text/plain body, decoded. */
  text: string;
}

export async function decodeMail(mail: CapturedMail): Promise<DisableMailSeen> {
  const parsed = await PostalMime.parse(mail.raw);
  return {
    to: mail.to,
    shownTo: [...(parsed.to ?? []), ...(parsed.cc ?? []), ...(parsed.bcc ?? [])].flatMap((a) => ("group" in a && a.group ? a.group : [a])).map((a) => (a.address ?? "").toLowerCase()),
    subject: parsed.subject ?? "",
    headers: Object.fromEntries(parsed.headers.map((h) => [h.key, h.value])),
    text: parsed.text ?? "",
  };
}

/** Whether the e-mail was sent to the address (an envelope recipient, Bcc included), in any letter case. */
export function addressedTo(mail: DisableMailSeen, address: string): boolean {
  return mail.to.some((a) => a.toLowerCase() === address.toLowerCase());
}

/** Whether an e-mail names the webhook anywhere: subject, a header or the text. */
export function namesWebhook(mail: DisableMailSeen, webhookID: string): boolean {
  const word = new RegExp(`(^|[^0-9])${webhookID}([^0-9]|$)`);
  return word.test(mail.subject) || Object.values(mail.headers).some((v) => word.test(v)) || word.test(mail.text);
}
