// `npm run docs`: one self-contained HTML reference from generated/openapi/openapi.yaml (REST operations
// and the webhook events), rendered by Redocly's build-docs with the Redoc bundle inlined.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const out = path.join(root, "generated/docs/index.html");
execFileSync(
  path.join(root, "node_modules/.bin/redocly"),
  ["build-docs", "generated/openapi/openapi.yaml", "--inlineBundle", "--title", "Partner Platform v4 reference", "-o", out],
  { cwd: root, stdio: ["ignore", "ignore", "inherit"] },
);
// The only remote asset left is the "API docs by" logo, fetched at run time; an offline page must not
// reach out, so it becomes an empty inline image.
const emptySvg = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E";
const html = readFileSync(out, "utf8").replace(/https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini(-full)?\.svg/g, emptySvg);
writeFileSync(out, html);
process.stdout.write(`Wrote ${path.relative(process.cwd(), out)} (${Math.round(html.length / 1024)} KiB)\n`);
