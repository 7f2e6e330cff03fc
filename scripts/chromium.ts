// Headless Chromium (Debian's package, installed by scripts/install-system-deps.sh) driven by
// playwright-core. Background networking is off: this machine has no network besides registries.
import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export function hasChromium(): boolean {
  return existsSync(chromiumPath);
}

export async function launchChromium(): Promise<BrowserContext> {
  const userDataDir = await mkdtemp(path.join(tmpdir(), "chromium-profile-"));
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1400, height: 900 },
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
}
