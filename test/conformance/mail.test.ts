// The suite's attribution of a caught e-mail to the webhook it is about (conformance/server/mail.ts):
// a webhook id may be one digit (D14), which is also a word of any notice's date, count or business.
import MailComposer from "nodemailer/lib/mail-composer/index.js";
import { describe, expect, it } from "vitest";
import { loadDeliveryRules } from "@partner-platform/sdk";
import { addressedTo, decodeMail, namesWebhook } from "../../conformance/server/mail.js";
import { composeDisableMail } from "../../src/server/delivery/mail.js";

const rules = loadDeliveryRules();
const header = rules.disableEmail.webhookIdHeader;

/** The reference server's notice for a webhook, as the suite's SMTP sink catches it. */
async function caughtNotice(webhookId: string, withIdHeader = true) {
  const mail = composeDisableMail({
    to: "partner@globex-partner.example",
    webhookId,
    url: "https://127.0.0.1:8443/hooks/28",
    businessId: "4713",
    disabledAt: Date.parse("2026-11-28T05:28:11.005Z"),
    failures: 5,
    attemptTimeoutSeconds: 10,
    webhookIdHeader: header,
    lastFailure: { status: 503, error: null },
  });
  const headers = withIdHeader ? mail.headers : Object.fromEntries(Object.entries(mail.headers).filter(([name]) => name !== header));
  const raw = await new MailComposer({ from: "no-reply@partner-platform.example", to: mail.to, subject: mail.subject, text: mail.text, headers }).compile().build();
  return decodeMail({ from: "no-reply@partner-platform.example", to: [mail.to], raw: raw.toString("utf8"), receivedAt: 0 });
}

describe("which webhook a caught notice is about", () => {
  it("is the one its webhook-id header names, though other short ids are words of its text", async () => {
    const notice = await caughtNotice("7");
    expect(namesWebhook(notice, "7", header)).toBe(true);
    // Each of these is a word of the notice (its count, date, time, status, timeout, business, URL).
    for (const other of ["5", "28", "11", "2026", "503", "10", "4713"]) expect(namesWebhook(notice, other, header), other).toBe(false);
  });

  it("is any webhook the notice names where it has no webhook-id header (that is the header check's failure)", async () => {
    const notice = await caughtNotice("300001", false);
    expect(namesWebhook(notice, "300001", header)).toBe(true);
    expect(namesWebhook(notice, "30000", header)).toBe(false);
  });
});

describe("whether a caught e-mail went to an address", () => {
  it("compares the domain in any letter case and the local part exactly (RFC 5321 §2.4)", () => {
    const mail = { to: ["Ops.Hooks+pp@ACME-Partner.example"] };
    expect(addressedTo(mail, "Ops.Hooks+pp@acme-partner.example")).toBe(true);
    expect(addressedTo(mail, "ops.hooks+pp@acme-partner.example")).toBe(false);
  });
});
