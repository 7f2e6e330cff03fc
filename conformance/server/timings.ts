// Legal timings of the reference server, other than its default, that prove the suite's verdicts do
// not depend on when an implementation makes an attempt (docs/implementing-a-server.md): each is a
// replaced `timing` part (src/server/delivery/parts.ts), with other parts where it needs them, never a
// branch in the product.
import { loadConformanceRules } from "../../src/spec.js";
import type { PartsOverride, Timing } from "../../src/server/delivery/index.js";
import { envelopeBody } from "../broken/servers.js";

export interface ReferenceTiming {
  id: string;
  /** The clock it is certified with. */
  clock: "virtual" | "scaled";
  description: string;
  /** A fresh timing for one server. */
  timing(): Timing;
  /** Real ms an unanswered attempt is given under a virtual clock (within x-conformance's bounds). */
  virtualAttemptTimeoutMs?: number;
  /** Parts the timing replaces besides `timing`, as a broken server's are. */
  parts?: PartsOverride;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const referenceTimings: ReferenceTiming[] = [
  {
    id: "lazy",
    clock: "virtual",
    description: "attempts are made only inside the control API's advance (the reference server's default)",
    timing: () => ({}),
    virtualAttemptTimeoutMs: 1000,
  },
  {
    id: "eager",
    clock: "virtual",
    description:
      "an attempt due now is made, and its outcome recorded, before the trigger or request that caused it answers; an unanswered attempt is given up after 0.5 real seconds; each disable e-mail's copy for the platform's own mailbox goes first, in an SMTP transaction of its own, with the same Message-ID (D26)",
    timing: () => ({ queued: (makeDue) => makeDue() }),
    virtualAttemptTimeoutMs: 500,
    parts: (base) => ({
      async sendMail(mail) {
        // The same message to another envelope, which nodemailer sends to its recipients only; the
        // reference's mail type has no such field.
        await base.sendMail(Object.assign({}, mail, { envelope: { from: "no-reply@partner-platform.example", to: ["webhook-audit@partner-platform.example"] } }));
        await base.sendMail(mail);
      },
    }),
  },
  {
    id: "background",
    clock: "virtual",
    description:
      "an attempt due now is made in the background, at a random moment up to 20 ms after the trigger answered; an unanswered attempt is given up after 5 real seconds; each disable e-mail is copied to the platform's own mailbox by Bcc (D26); envelope timestamps drop their fraction (D14), where data's timestamps keep it",
    timing: () => ({
      queued(makeDue) {
        setTimeout(() => void makeDue().catch(() => undefined), Math.random() * 20);
      },
    }),
    virtualAttemptTimeoutMs: 5000,
    parts: (base, ctx) => ({
      ...envelopeBody((e) => ({ ...e, timestamp: e.timestamp.replace(/\.\d+Z$/, "Z") }))(base, ctx),
      // nodemailer takes `bcc` with the rest of the message; the reference's mail type has no such field.
      sendMail: (mail) => base.sendMail(Object.assign({}, mail, { bcc: "webhook-audit@partner-platform.example" })),
    }),
  },
  {
    id: "truncated",
    clock: "virtual",
    description:
      "each retry is due at its instant cut to the whole second below (a column of whole seconds that truncates: a failure at .6 s is retried 0.6 s before its wait ends, which D25 allows under a virtual clock)",
    timing: () => ({}),
    virtualAttemptTimeoutMs: 1000,
    parts: (base) => ({
      retryAt(failure) {
        const at = base.retryAt(failure);
        return at === undefined ? undefined : Math.floor(at / 1000) * 1000;
      },
    }),
  },
  {
    id: "jitter",
    clock: "scaled",
    description: "each attempt is made a random 0 to a third of D25's fixed late allowance after it is due (0-50 ms)",
    timing: () => {
      const maxMs = loadConformanceRules().scaledClock.tolerance.lateRealMs / 3;
      return { beforeAttempt: () => sleep(Math.random() * maxMs) };
    },
  },
  {
    id: "late",
    clock: "scaled",
    description:
      "each retry is due 15% of its wait late, and one whose wait is over 100 real ms (a coarser timer's) 100 ms later still: near the end of D25's band (20% of the wait and 150 ms late), where a chain of short retries ends with a long one",
    timing: () => ({}),
    parts: (base, { clock }) => ({
      retryAt(failure) {
        const at = base.retryAt(failure);
        if (at === undefined) return undefined;
        const wait = at - failure.endedAt;
        // Whole ms: times are stored as integers.
        return Math.round(at + wait * 0.15 + (wait * clock.scale > 100 ? 100 / clock.scale : 0));
      },
    }),
  },
  {
    id: "polled",
    clock: "scaled",
    description: "attempts are made only at a tick of real time every 80 ms (a poller's): each first attempt and retry up to 80 ms late",
    timing: () => ({ beforeAttempt: () => sleep(80 - (Date.now() % 80)) }),
  },
  {
    id: "eager-slow",
    clock: "scaled",
    description:
      "an attempt due now is made before the trigger answers, which then takes 20 ms more (a first retry, a few ms later, comes before it), and every other attempt to a URL spends 40 ms of its timeout connecting (a new connection's TLS, where the next attempt reuses it)",
    timing: () => ({
      async queued(makeDue) {
        await makeDue();
        await sleep(20);
      },
    }),
    parts: (base) => {
      const sent = new Map<string, number>();
      return {
        async send(url, body, signature, signal) {
          const n = sent.get(url) ?? 0;
          sent.set(url, n + 1);
          if (n % 2 === 0) await sleep(40);
          return base.send(url, body, signature, signal);
        },
      };
    },
  },
];
