// `npm run docs`: one self-contained HTML reference from generated/openapi/openapi.yaml (REST operations
// and the webhook events) with the guides of spec/guides/ at its top, rendered by Redocly's build-docs
// with the Redoc bundle inlined.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { renderGuides } from "./guides.js";

const root = path.resolve(import.meta.dirname, "..");
const out = path.join(root, "generated/docs/index.html");
// The guides become Markdown sections of info.description (Redoc lists each # heading in its sidebar).
// They are added to a copy only: generated/openapi/ stays the contract, without the docs' prose.
const openapi = parseYaml(readFileSync(path.join(root, "generated/openapi/openapi.yaml"), "utf8")) as { info: { description?: string } };
openapi.info.description = `${openapi.info.description ?? ""}\n\n${renderGuides()}`;
const work = mkdtempSync(path.join(tmpdir(), "docs-"));
const input = path.join(work, "openapi.yaml");
writeFileSync(input, stringifyYaml(openapi, { lineWidth: 0 }));
const build = spawnSync(
  path.join(root, "node_modules/.bin/redocly"),
  ["build-docs", input, "--inlineBundle", "--title", "Partner Platform v4 reference", "-o", out],
  // REDOCLY_TELEMETRY=off also writes `disableTelemetry: true` into the page: Redoc 3 otherwise posts
  // usage traces to otel.cloud.redocly.com from the reader's browser (and the CLI reports the build).
  { cwd: root, encoding: "utf8", env: { ...process.env, REDOCLY_TELEMETRY: "off" } },
);
rmSync(work, { recursive: true, force: true });
if (build.status !== 0) {
  // Redocly's banners are noise on success; on failure they hold the reason.
  process.stderr.write(`${build.stdout}${build.stderr}${build.error ? `${build.error.message}\n` : ""}`);
  process.stderr.write("docs: redocly build-docs failed\n");
  process.exit(1);
}
// The only remote asset left is the "API docs by" logo, fetched at run time; an offline page must not
// reach out, so it becomes an inline image of the name.
const logo = (text: string, width: number) =>
  `data:image/svg+xml,${encodeURIComponent(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="16"><text x="0" y="12" font-family="sans-serif" font-size="12" font-weight="bold" fill="#555">${text}</text></svg>`,
  ).replace(/'/g, "%27")}`;
const html = readFileSync(out, "utf8")
  .replace(/https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini-full\.svg/g, logo("Redocly", 52))
  .replace(/https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini\.svg/g, logo("R", 10));
writeFileSync(out, html);
process.stdout.write(`Wrote ${path.relative(process.cwd(), out)} (${Math.round(html.length / 1024)} KiB)\n`);
