// The reference docs as a reader sees them: built fresh (generated/docs/ is not committed), opened
// offline in headless Chromium, every operation and every event on its own page, and no request
// leaving the machine, not even the usage telemetry Redoc sends a few seconds after a click.
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parse as parseYaml } from "yaml";
import { chromiumPath, hasChromium, launchChromium, refuseNetwork } from "../../scripts/chromium.js";
import { packageRoot, specPaths } from "../../src/paths.js";
import { eventNames, loadDeliveryRules } from "@partner-platform/sdk";
import { duration, guidesDir, receiverTabs } from "../../scripts/guides.js";

const available = hasChromium();
const ci = !["", "0", "false"].includes(process.env.CI ?? "");
if (!available && ci) throw new Error(`CI needs Chromium at ${chromiumPath}: scripts/install-system-deps.sh installs it`);
if (!available) console.warn(`docs test skipped: no Chromium at ${chromiumPath} (run scripts/install-system-deps.sh)`);

type Json = Record<string, any>;
const openapi = parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json;

/** Redoc 3 renders each operation on its own page, `#/<tag>/<operationid>`, inside an element with that id. */
const pageId = (op: Json) => `${(op.tags[0] as string).toLowerCase().replace(/[^a-z0-9]+/g, "-")}/${(op.operationId as string).toLowerCase()}`;
const operations = Object.entries(openapi.paths as Json).flatMap(([route, item]) =>
  Object.entries(item as Json).map(([method, op]) => ({ route, method: method.toUpperCase(), op: op as Json })),
);
const webhooks = Object.entries(openapi.webhooks as Json).map(([event, item]) => ({ event, op: (item as Json).post as Json }));

describe.runIf(available)("generated/docs/index.html", () => {
  const url = pathToFileURL(path.join(packageRoot, "generated/docs/index.html")).href;
  let context: BrowserContext;
  let page: Page;
  let attempts: (page: Page) => Promise<string[]>;

  beforeAll(async () => {
    execFileSync(process.execPath, ["--import", "tsx", "scripts/build-docs.ts"], { cwd: packageRoot, stdio: "pipe" });
    context = await launchChromium();
    attempts = await refuseNetwork(context);
    page = await context.newPage();
    // A fake clock: timers that would fire seconds later (telemetry batches) run on demand instead.
    await page.clock.install();
    await page.goto(url);
    await page.waitForSelector("h1");
  });

  afterAll(async () => {
    await context?.close();
  });

  /** Opens an operation's page and returns the text of its section. */
  async function section(op: Json): Promise<string> {
    const id = pageId(op);
    await page.goto(`${url}#/${id}`);
    const element = page.locator(`[id="${id}"]`);
    await element.getByRole("heading", { name: op.summary as string }).waitFor();
    return element.innerText();
  }

  it("renders every REST operation: method, path, parameters and every documented status", async () => {
    expect(operations).toHaveLength(4);
    for (const { route, method, op } of operations) {
      const text = await section(op);
      expect(text, op.operationId).toContain(`${method}\n${route}`);
      for (const parameter of (op.parameters ?? []) as Json[]) expect(text, `${op.operationId} ${parameter.name}`).toContain(parameter.name);
      for (const status of Object.keys(op.responses as Json)) expect(text, `${op.operationId} ${status}`).toMatch(new RegExp(`^${status}$`, "m"));
    }
  });

  // Request examples used to be listed last-declared first, so every request sample opened on
  // "rate-limited: Too many requests" (D36): the sample a reader sees first is the operation's success.
  it("opens every request sample on the operation's success example", async () => {
    let checked = 0;
    for (const { op } of operations.filter((o) => o.op.requestBody)) {
      const successes = Object.entries(op.responses as Json)
        .filter(([status]) => status.startsWith("2"))
        .flatMap(([, r]) => Object.values(((r as Json).content ?? {}) as Json).flatMap((m) => Object.keys((m.examples ?? {}) as Json)));
      const shown = /\nPayload\n([^\n]+)\n/.exec(await section(op))?.[1];
      expect(successes, `${op.operationId}: the payload sample shows ${shown}`).toContain(shown);
      checked++;
    }
    expect(checked).toBe(3);
  });

  it("renders all eight webhook events, each with the signature header and the delivery rules", async () => {
    expect(webhooks.map((w) => w.event).sort()).toEqual([...eventNames].sort());
    const { signatureHeader, disableAfterConsecutiveFailures } = loadDeliveryRules();
    for (const { event, op } of webhooks) {
      const text = await section(op);
      expect(text, event).toMatch(new RegExp(`^${signatureHeader}$`, "m")); // the header parameter's own row
      expect(text, event).toContain(`After ${disableAfterConsecutiveFailures} consecutive failed attempts`);
      expect(text, event).toContain(`"event": "${event}"`); // the payload example
    }
  });

  it("opens on the guides: every heading of spec/guides/ on the page, each guide in the sidebar", async () => {
    await page.goto(url);
    const headings = readdirSync(guidesDir)
      .filter((f) => f.endsWith(".md"))
      .sort()
      .flatMap((f) => [...readFileSync(path.join(guidesDir, f), "utf8").matchAll(/^(#{1,3}) (.+)$/gm)].map((m) => ({ level: m[1]!.length, text: m[2]! })));
    expect(headings.map((h) => h.text)).toEqual(expect.arrayContaining(["Getting started", "Receiving webhooks"]));
    // Redoc shifts heading levels: any heading element with the text counts.
    for (const h of headings) await page.locator("h1, h2, h3, h4").filter({ hasText: h.text }).first().waitFor();
    const menu = await page.locator('[data-component-name="Menu/MenuItem"]').allInnerTexts();
    for (const h of headings.filter((x) => x.level === 1)) expect(menu).toContain(h.text);
  });

  it("shows one tab per language, each with the verify function and raw-body lines of its tested example", async () => {
    await page.goto(url);
    const tabs = receiverTabs();
    expect(tabs.map((t) => t.language)).toEqual(["Python", "Go", "Ruby", "PHP", "Java", "Node.js"]);
    for (const tab of tabs) {
      await page.locator(".pp-tabs > label").filter({ hasText: new RegExp(`^${tab.language.replace(".", "\\.")}$`) }).click();
      const visible = page.locator(".pp-tabs > .pp-panel:visible");
      expect(await visible.count(), tab.language).toBe(1);
      expect(await visible.getAttribute("data-language")).toBe(tab.language);
      const text = await visible.innerText();
      // Each snippet is on the page line for line, as cut from the example file.
      for (const snippet of [tab.verify, ...tab.rawBody].filter((x) => x !== undefined)) {
        for (const line of snippet.code.split("\n").filter((l) => l.trim())) expect(text, `${tab.language}: ${snippet.source}`).toContain(line.trim());
      }
    }
  });

  it("draws the retry and disable schedule from x-delivery", async () => {
    await page.goto(url);
    const { retryWaitsSeconds, disableAfterConsecutiveFailures } = loadDeliveryRules();
    const svg = page.locator("svg.pp-timeline");
    await svg.waitFor();
    const text = await svg.locator("text").allTextContents();
    expect(text).toContain("attempt 1");
    for (const [i, wait] of retryWaitsSeconds.entries()) {
      expect(text).toContain(`attempt ${i + 2}`);
      expect(text).toContain(`+${duration(wait)}`);
    }
    expect(text).toEqual(expect.arrayContaining(["+1 min", "+5 min", "+30 min", "+2 h", "+24 h", "disabled, one e-mail"]));
    expect(text).toContain(`after ${disableAfterConsecutiveFailures} failures in a row`);
    expect((await svg.boundingBox())!.height).toBeGreaterThan(200);
  });

  it("lists the operations and events in the sidebar, and sends nothing anywhere after clicking through it", async () => {
    await page.goto(url);
    const items = page.locator('[data-component-name="Menu/MenuItem"]');
    // The sidebar is an accordion: open each tag, then its operations must be listed under it.
    const byTag = new Map<string, Json[]>();
    for (const { op } of [...operations, ...webhooks]) byTag.set(op.tags[0], [...(byTag.get(op.tags[0]) ?? []), op]);
    for (const [tag, ops] of byTag) {
      // Exact text: the guide "Receiving webhooks" also contains "Webhooks".
      const tagItem = items.filter({ hasText: new RegExp(`^\\s*${tag}\\s*$`) }).first();
      const firstOp = items.filter({ hasText: ops[0]!.summary as string }).first();
      // Redoc may open the tag itself (the section in view), and a click can come before its handler on a
      // loaded machine: click while its operations are hidden, until they show.
      await vi.waitFor(
        async () => {
          if (!(await firstOp.isVisible())) await tagItem.click();
          await firstOp.waitFor({ timeout: 5_000 });
        },
        { timeout: 50_000, interval: 100 },
      );
      for (const op of ops) await items.filter({ hasText: op.summary as string }).first().waitFor();
    }
    // Redoc batches telemetry for ~5 s: run the page's timers well past that before looking.
    await page.clock.runFor(60_000);
    expect(await attempts(page)).toEqual([]);
  });
});
