// The disable e-mails the suite's SMTP sink caught, decoded (MIME, quoted-printable, base64), and
// attributed to the webhook they name (D26), so that one scenario's e-mail is never counted for another.
import PostalMime from "postal-mime";
import type { CapturedMail } from "../harness/smtp-sink.js";

export interface DisableMailSeen {
  /** The envelope's recipients (RCPT TO), Bcc included. */
  to: string[];
  /** The recipients the message shows (its To, Cc and, sent as a header, Bcc), as `mailbox` writes them. */
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
    shownTo: [...(parsed.to ?? []), ...(parsed.cc ?? []), ...(parsed.bcc ?? [])].flatMap((a) => ("group" in a && a.group ? a.group : [a])).map((a) => mailbox(a.address ?? "")),
    subject: parsed.subject ?? "",
    headers: Object.fromEntries(parsed.headers.map((h) => [h.key, h.value])),
    text: parsed.text ?? "",
  };
}

/**
 * An address as compared: its domain in lower case, its local part as written (RFC 5321 §2.4: a local
 * part's letter case may matter to its mailbox, so a platform sends it as the partner gave it).
 */
export function mailbox(address: string): string {
  const at = address.lastIndexOf("@");
  return at < 0 ? address : `${address.slice(0, at)}@${address.slice(at + 1).toLowerCase()}`;
}

/** Whether the e-mail was sent to the address (an envelope recipient, Bcc included); caught or decoded. */
export function addressedTo(mail: { readonly to: readonly string[] }, address: string): boolean {
  return mail.to.some((a) => mailbox(a) === mailbox(address));
}

/** An e-mail's Message-ID, for comparing notices and for a failure's message. */
export const messageIdOf = (mail: DisableMailSeen) => mail.headers["message-id"] ?? "(no Message-ID)";

/** The distinct Message-IDs of e-mails, in the order they first came. */
export const messageIds = (mails: readonly DisableMailSeen[]) => [...new Set(mails.map(messageIdOf))];

/**
 * The e-mails grouped into notices by Message-ID: a platform may send its Bcc copy in an SMTP
 * transaction of its own (D26: a copy may go to its own mailbox, unseen), so a notice's transactions
 * are judged together. Each shows what every copy of it shows and goes where any copy went.
 */
export function notices(mails: readonly DisableMailSeen[]): DisableMailSeen[][] {
  const byId = new Map<string, DisableMailSeen[]>();
  const withoutId: DisableMailSeen[][] = [];
  for (const m of mails) {
    const id = m.headers["message-id"];
    // Without a Message-ID nothing says two e-mails are one notice: each is one of its own.
    if (id === undefined) withoutId.push([m]);
    else byId.set(id, [...(byId.get(id) ?? []), m]);
  }
  return [...byId.values(), ...withoutId];
}

/** Whether any copy of a notice went to the address (an envelope recipient, Bcc included). */
export const noticeAddressedTo = (copies: readonly DisableMailSeen[], address: string) => copies.some((m) => addressedTo(m, address));

/** The addresses the copies of a notice show (To, Cc, a Bcc header), each once. */
export const noticeShows = (copies: readonly DisableMailSeen[]) => [...new Set(copies.flatMap((m) => m.shownTo))];

/** Where e-mails went (their envelope recipients, Bcc included), each address once: for a failure's message. */
export const recipients = (mails: readonly DisableMailSeen[]) => [...new Set(mails.flatMap((m) => m.to))].join(", ");

/**
 * Whether an e-mail is about the webhook: the one its webhook-id header names (D26) where it has that
 * header, else any that its subject, a header or its text names. The header decides where there is one:
 * a short id (D14 allows one digit) is also a word of another notice's text ("5 consecutive failed
 * delivery attempts", a date, a business id), so a search of the text found notices about other webhooks.
 */
export function namesWebhook(mail: DisableMailSeen, webhookID: string, idHeader: string): boolean {
  const named = mail.headers[idHeader.toLowerCase()];
  if (named !== undefined) return named.trim() === webhookID;
  const word = new RegExp(`(^|[^0-9])${webhookID}([^0-9]|$)`);
  return word.test(mail.subject) || Object.values(mail.headers).some((v) => word.test(v)) || word.test(mail.text);
}
