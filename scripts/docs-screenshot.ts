// `npm run docs:screenshot`: renders generated/docs/index.html offline in headless Chromium into
// reports/docs.png (the overview) and reports/docs-event.png (one webhook event's page).
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { chromiumPath, hasChromium, launchChromium, refuseNetwork } from "./chromium.js";

const root = path.resolve(import.meta.dirname, "..");
if (!hasChromium()) {
  process.stderr.write(`docs:screenshot: no Chromium at ${chromiumPath}; run scripts/install-system-deps.sh\n`);
  process.exit(1);
}
const url = pathToFileURL(path.join(root, "generated/docs/index.html")).href;
await mkdir(path.join(root, "reports"), { recursive: true });
const context = await launchChromium();
try {
  const attempts = await refuseNetwork(context);
  const page = await context.newPage();
  // Each shot waits for its heading and for the last thing to appear (the sidebar expands with an animation).
  const shots: Array<[file: string, hash: string, heading: string, last: string]> = [
    ["reports/docs.png", "", "Partner Platform v4", "Webhook events"],
    ["reports/docs-event.png", "#/webhook-events/leadcreatedwebhook", "lead.created", "payment.received"],
  ];
  for (const [file, hash, heading, last] of shots) {
    await page.goto(url + hash);
    await page.getByRole("heading", { name: heading }).first().waitFor({ timeout: 30_000 });
    await page.locator('[data-component-name="Menu/MenuItem"]', { hasText: last }).last().waitFor();
    await page.screenshot({ path: path.join(root, file), animations: "disabled" });
    process.stdout.write(`Wrote ${file}\n`);
  }
  const refused = await attempts(page);
  if (refused.length > 0) throw new Error(`the page tried to reach the network: ${refused.join(", ")}`);
} catch (error) {
  process.stderr.write(`docs:screenshot: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await context.close();
}
