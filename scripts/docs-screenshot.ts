// `npm run docs:screenshot`: renders generated/docs/index.html in headless Chromium into reports/docs.png.
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { hasChromium, launchChromium, chromiumPath } from "./chromium.js";

const root = path.resolve(import.meta.dirname, "..");
if (!hasChromium()) {
  process.stderr.write(`docs:screenshot: no Chromium at ${chromiumPath}; run scripts/install-system-deps.sh\n`);
  process.exit(1);
}
const context = await launchChromium();
try {
  const page = await context.newPage();
  await page.goto(pathToFileURL(path.join(root, "generated/docs/index.html")).href);
  await page.waitForSelector("h1", { timeout: 30_000 });
  await mkdir(path.join(root, "reports"), { recursive: true });
  const file = path.join(root, "reports/docs.png");
  await page.screenshot({ path: file });
  process.stdout.write(`Wrote ${path.relative(process.cwd(), file)}\n`);
} finally {
  await context.close();
}
