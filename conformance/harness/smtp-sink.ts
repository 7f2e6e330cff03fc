// An SMTP server that accepts and keeps every message but those it was told to refuse once: where an
// implementation under test sends the "webhook disabled" e-mail.
import { EventEmitter } from "node:events";
import { waitUntil } from "./wait.js";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

export interface CapturedMail {
  from: string;
  to: string[];
  /** The whole message as received (headers and body). */
  raw: string;
  receivedAt: number;
}

export interface SmtpSink {
  /** `smtp://HOST:PORT`, for an implementation's SMTP_URL. */
  url: string;
  readonly messages: readonly CapturedMail[];
  /** Messages refused with a 451 (`refuseOnce`), as received; not in `messages`. */
  readonly refused: readonly CapturedMail[];
  /** Refuses the next message `matches` picks with `451 4.3.0` (try again later), once. */
  refuseOnce(matches: (mail: CapturedMail) => boolean | Promise<boolean>): void;
  /** Resolves when `predicate` holds, re-checked on every message; rejects after `timeoutMs`. */
  waitFor(predicate: (messages: readonly CapturedMail[]) => boolean, timeoutMs: number, what: string): Promise<void>;
  close(): Promise<void>;
}

/** Listens on `host` (default 127.0.0.1) and `port` (default: any free port). */
export async function startSmtpSink(host = "127.0.0.1", port = 0): Promise<SmtpSink> {
  const messages: CapturedMail[] = [];
  const refused: CapturedMail[] = [];
  const refusals: ((mail: CapturedMail) => boolean | Promise<boolean>)[] = [];
  const arrivals = new EventEmitter();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", async () => {
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : "";
        const mail = { from, to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString("utf8"), receivedAt: performance.now() };
        for (const [i, matches] of refusals.entries()) {
          if (!(await Promise.resolve(matches(mail)).catch(() => false))) continue;
          refusals.splice(i, 1);
          refused.push(mail);
          arrivals.emit("message");
          return callback(Object.assign(new Error("Requested action aborted: try again later"), { responseCode: 451 }));
        }
        messages.push(mail);
        arrivals.emit("message");
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.server.address() as AddressInfo;
  return {
    url: `smtp://${host.includes(":") ? `[${host}]` : host}:${bound}`,
    messages,
    refused,
    refuseOnce: (matches) => void refusals.push(matches),
    waitFor: (predicate, timeoutMs, what) => waitUntil(arrivals, "message", () => predicate(messages), timeoutMs, what),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
