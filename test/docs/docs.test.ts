// The reference docs as a reader sees them: rendered offline in headless Chromium, every operation
// and every event on the page, and no request leaving the machine.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { chromiumPath, hasChromium, launchChromium } from "../../scripts/chromium.js";
import { packageRoot, specPaths } from "../../src/paths.js";
import { eventNames } from "../../src/spec.js";

const available = hasChromium();
if (!available && process.env.CI) throw new Error(`CI needs Chromium at ${chromiumPath}: scripts/install-system-deps.sh installs it`);
if (!available) console.warn(`docs test skipped: no Chromium at ${chromiumPath} (run scripts/install-system-deps.sh)`);

type Json = Record<string, any>;
const openapi = parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json;
const operations = Object.keys(openapi.paths as Json);

describe.runIf(available)("generated/docs/index.html", () => {
  let context: BrowserContext;
  let page: Page;
  /** All text the page showed while scrolled from top to bottom (Redoc renders sections as they come into view). */
  let shown = "";
  const offMachine: string[] = [];

  beforeAll(async () => {
    execFileSync(process.execPath, ["--import", "tsx", "scripts/build-docs.ts"], { cwd: packageRoot, stdio: "ignore" });
    context = await launchChromium();
    page = await context.newPage();
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith("file:") || url.startsWith("data:")) return route.continue();
      offMachine.push(url);
      return route.abort();
    });
    await page.goto(pathToFileURL(path.join(packageRoot, "generated/docs/index.html")).href);
    await page.waitForSelector("h1");
    for (let bottom = false; !bottom; ) {
      shown += await page.innerText("body");
      // A string, because this project's TypeScript has no DOM types.
      bottom = (await page.evaluate(
        "window.scrollBy(0, window.innerHeight), window.scrollY + window.innerHeight >= document.body.scrollHeight",
      )) as boolean;
    }
    shown += await page.innerText("body");
  });

  afterAll(async () => {
    await context?.close();
  });

  it("renders every REST operation", () => {
    expect(operations).toHaveLength(4);
    for (const route of operations) expect(shown, route).toContain(route);
  });

  it("renders all eight webhook events and the delivery rules with the signature header", () => {
    for (const event of eventNames) expect(shown, event).toContain(event);
    expect(shown).toContain("X-Service-Signature");
    expect(shown).toContain("consecutive failed attempts");
  });

  it("loads nothing from the network", () => {
    expect(offMachine).toEqual([]);
  });
});
