// Headless Chromium (Debian's package, installed by scripts/install-system-deps.sh) driven by
// playwright-core. Background networking is off: this machine has no network besides registries.
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export function hasChromium(): boolean {
  return existsSync(chromiumPath);
}

/** Headless Chromium with a fresh profile, removed again when the context closes. */
export async function launchChromium(): Promise<BrowserContext> {
  const userDataDir = await mkdtemp(path.join(tmpdir(), "chromium-profile-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1400, height: 900 },
    // Service workers fetch outside `route()`; nothing here needs one.
    serviceWorkers: "block",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  // Removed after close() has finished (the browser writes to it until it exits); a leftover is only litter.
  const close = context.close.bind(context);
  context.close = async (options) => {
    await close(options);
    await rm(userDataDir, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  };
  return context;
}

/** Nothing may leave the machine: file:, data:, blob: and loopback only. */
const local = /^(file:|data:|blob:|https?:\/\/(localhost|127\.0\.0\.1|\[::1\])[:/])/;

/**
 * Refuses every request to another host, and records it. Calls that page scripts make (fetch,
 * sendBeacon, XHR, WebSocket, EventSource) are recorded in the page when they are made, so a check
 * right after an action sees them without waiting for the network layer. Call before opening pages.
 */
export async function refuseNetwork(context: BrowserContext): Promise<(page: Page) => Promise<string[]>> {
  const refused: string[] = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (local.test(url)) return route.continue();
    refused.push(url);
    return route.abort("blockedbyclient");
  });
  await context.addInitScript(`(() => {
    const local = ${local};
    const calls = (window.__offMachineCalls = []);
    const note = (target) => {
      const url = new URL(String(target instanceof Request ? target.url : target), location.href).href;
      if (!local.test(url)) calls.push(url);
    };
    const fetch = window.fetch;
    window.fetch = function (target, ...rest) { note(target); return fetch.call(this, target, ...rest); };
    const beacon = navigator.sendBeacon.bind(navigator);
    navigator.sendBeacon = (url, data) => { note(url); return beacon(url, data); };
    const open = XMLHttpRequest.prototype.open;
    XMLHttpRequest.prototype.open = function (method, url, ...rest) { note(url); return open.call(this, method, url, ...rest); };
    for (const name of ["WebSocket", "EventSource"]) {
      const Original = window[name];
      window[name] = class extends Original { constructor(url, ...rest) { note(url); super(url, ...rest); } };
    }
  })()`);
  return async (page) => [...new Set([...refused, ...((await page.evaluate("window.__offMachineCalls")) as string[])])];
}
