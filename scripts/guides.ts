// The guides of the reference docs (spec/guides/*.md, in file-name order) as one Markdown text for the
// OpenAPI `info.description`. Directives are filled at build time, so no copy can drift:
//   <!-- guide:receiver-tabs -->      one tab per language: the verify function and the raw-body lines,
//                                     cut from the tested example receivers between docs:… marker comments
//   <!-- guide:delivery-timeline -->  the retry and disable schedule as an inline SVG, from x-delivery
//   {{name}}                          a number of x-delivery in spec/asyncapi.yaml
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { loadDeliveryRules, type DeliveryRules } from "@partner-platform/sdk";
import { exampleReceivers, receiversDir } from "./example-receivers.js";

const root = path.resolve(import.meta.dirname, "..");
export const guidesDir = path.join(root, "spec/guides");

/** The lines between `docs:<name>:start` and `docs:<name>:end` comments of a source file, dedented. */
export function snippet(file: string, name: string): string {
  const lines = readFileSync(file, "utf8").split("\n");
  const start = lines.findIndex((l) => l.includes(`docs:${name}:start`));
  const end = lines.findIndex((l, i) => i > start && l.includes(`docs:${name}:end`));
  if (start < 0 || end < 0) throw new Error(`${path.relative(root, file)}: no docs:${name}:start … docs:${name}:end markers`);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((l) => l.trim()).map((l) => l.match(/^\s*/)![0].length));
  return body.map((l) => l.slice(indent)).join("\n").replace(/^\n+|\n+$/g, "");
}

const escapeHtml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
// A Markdown HTML block ends at a blank line, and Redoc drops newline characters in HTML: code keeps
// its line breaks as <br> on one line.
const code = (text: string, lang: string) => `<pre class="pp-code"><code class="language-${lang}">${escapeHtml(text).replace(/\n/g, "<br>")}</code></pre>`;
const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");

interface Tab {
  language: string;
  intro: string;
  verify?: { code: string; lang: string; source: string };
  rawBody: { framework: string; code: string; lang: string; source: string }[];
}

/** The tabs: the languages of examples/receivers/receivers.json, then Node.js (the package's own functions). */
export function receiverTabs(): Tab[] {
  const tabs = new Map<string, Tab>();
  for (const r of exampleReceivers) {
    const file = path.join(receiversDir, r.source);
    const source = `examples/receivers/${r.source}`;
    const tab = tabs.get(r.language) ?? { language: r.language, intro: "", rawBody: [] };
    tab.verify ??= { code: snippet(file, "verify"), lang: r.highlight, source };
    tab.rawBody.push({ framework: r.framework, code: snippet(file, "raw-body"), lang: r.highlight, source });
    tabs.set(r.language, tab);
  }
  tabs.set("Node.js", {
    language: "Node.js",
    intro: "The package does the verification: `verifySignature(rawBody, header, secret)`, `verifyDelivery(rawBody, headers, secret)`, or `createWebhookHandler` for node:http (see the README).",
    rawBody: [{ framework: "Express", code: snippet(path.join(receiversDir, "express.ts"), "raw-body"), lang: "ts", source: "examples/receivers/express.ts" }],
  });
  return [...tabs.values()];
}

/** CSS-only tabs (radio buttons): the page stays a static, offline document with no script of ours. */
export function renderReceiverTabs(): string {
  const tabs = receiverTabs();
  const ids = tabs.map((t) => slug(t.language));
  const style =
    `<style>.pp-tabs{margin:16px 0}.pp-tabs>input{position:absolute;opacity:0;pointer-events:none}` +
    `.pp-tabs>label{display:inline-block;padding:6px 14px;margin:0 4px 0 0;border:1px solid #d0d0d0;border-bottom:0;border-radius:6px 6px 0 0;cursor:pointer;background:#f6f6f6}` +
    `.pp-tabs>input:checked+label{background:#fff;font-weight:600;box-shadow:inset 0 3px 0 #3b6fd8}` +
    `.pp-tabs>input:focus-visible+label{outline:2px solid #3b6fd8}` +
    `.pp-tabs>.pp-panel{display:none;border:1px solid #d0d0d0;padding:4px 16px 12px}` +
    `.pp-tabs .pp-code,.pp-tabs .pp-code code{white-space:pre;tab-size:4;overflow-x:auto;font-size:13px}` +
    ids.map((id) => `#pp-tab-${id}:checked~.pp-panel-${id}`).join(",") +
    `{display:block}</style>`;
  const heads = tabs
    .map((t, i) => `<input type="radio" name="pp-receiver-tabs" id="pp-tab-${ids[i]}"${i === 0 ? " checked" : ""}><label for="pp-tab-${ids[i]}">${escapeHtml(t.language)}</label>`)
    .join("");
  const panels = tabs
    .map((t, i) => {
      const md = (s: string) => escapeHtml(s).replace(/`([^`]+)`/g, "<code>$1</code>");
      const parts = [`<div class="pp-panel pp-panel-${ids[i]}" data-language="${escapeHtml(t.language)}">`];
      if (t.intro) parts.push(`<p>${md(t.intro)}</p>`);
      if (t.verify) parts.push(`<p>The verify function (<code>${t.verify.source}</code>):</p>`, code(t.verify.code, t.verify.lang));
      for (const r of t.rawBody) parts.push(`<p>The raw body with ${escapeHtml(r.framework)} (<code>${r.source}</code>):</p>`, code(r.code, r.lang));
      return `${parts.join("")}</div>`;
    })
    .join("");
  return `${style}<div class="pp-tabs" role="group" aria-label="Signature verification by language">${heads}${panels}</div>`;
}

/** "1 min", "2 h", "2 h 36 min", "26 h 36 min": a wait, or a time since the first attempt. */
export function duration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const min = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return [h && `${h} h`, min && `${min} min`, s && `${s} s`].filter(Boolean).join(" ") || "0 s";
}

/**
 * The schedule of one event whose attempts all fail, top to bottom: the first attempt, one retry after
 * each wait of retryWaitsSeconds, and the webhook disabled (one e-mail) at the failure that makes
 * disableAfterConsecutiveFailures in a row; later retries happen only when a 2xx reset the count.
 */
export function renderTimeline(rules: DeliveryRules = loadDeliveryRules()): string {
  const attempts = [0, ...rules.retryWaitsSeconds];
  const disableAt = rules.disableAfterConsecutiveFailures; // 1-based attempt number
  const row = 46;
  const x = 24;
  const y0 = 22;
  const width = 440;
  const height = y0 + row * (attempts.length - 1) + 40;
  const yDisable = y0 + row * (Math.min(disableAt, attempts.length) - 1);
  const yLast = y0 + row * (attempts.length - 1);
  let t = 0;
  const marks = attempts.map((wait, i) => {
    t += wait;
    const y = y0 + row * i;
    const after = i + 1 > disableAt;
    const color = i + 1 === disableAt ? "#c62828" : after ? "#9e9e9e" : "#3b6fd8";
    return [
      `<circle cx="${x}" cy="${y}" r="8" fill="${after ? "#fff" : color}" stroke="${color}" stroke-width="2"${after ? ' stroke-dasharray="3 2"' : ""}/>`,
      `<text x="${x + 22}" y="${y + 5}" font-weight="600" fill="${after ? "#757575" : "#222"}">attempt ${i + 1}</text>`,
      `<text x="${x + 112}" y="${y + 5}" fill="${after ? "#757575" : "#222"}">${i === 0 ? "when the event occurs" : `+${duration(wait)}`}</text>`,
      `<text x="${x + 112}" y="${y + 21}" fill="#757575" font-size="12">${i === 0 ? "t = 0" : `t = ${duration(t)}`}</text>`,
    ].join("");
  });
  const label = `Retry and disable schedule: attempt 1, then retries after ${rules.retryWaitsSeconds.map((w) => `+${duration(w)}`).join(", ")}; ${disableAt} failed attempts in a row disable the webhook with one e-mail`;
  return [
    `<svg class="pp-timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(label)}" font-family="sans-serif" font-size="14">`,
    `<title>${escapeHtml(label)}</title>`,
    `<line x1="${x}" y1="${y0}" x2="${x}" y2="${yDisable}" stroke="#3b6fd8" stroke-width="3"/>`,
    `<line x1="${x}" y1="${yDisable}" x2="${x}" y2="${yLast}" stroke="#9e9e9e" stroke-width="2" stroke-dasharray="5 4"/>`,
    ...marks,
    `<text x="${x + 205}" y="${yDisable + 5}" fill="#c62828" font-weight="600">disabled, one e-mail</text>`,
    `<text x="${x + 205}" y="${yDisable + 21}" fill="#c62828" font-size="12">after ${disableAt} failures in a row</text>`,
    attempts.length > disableAt
      ? `<text x="${x + 205}" y="${yLast + 5}" fill="#757575" font-size="12">only if a 2xx reset the count</text>`
      : "",
    `</svg>`,
  ].join("");
}

/** Every guide, directives filled, as Markdown. */
export function renderGuides(rules: DeliveryRules = loadDeliveryRules()): string {
  const files = readdirSync(guidesDir).filter((f) => f.endsWith(".md")).sort();
  return files
    .map((f) =>
      readFileSync(path.join(guidesDir, f), "utf8")
        .replace(/<!-- guide:receiver-tabs -->/g, () => renderReceiverTabs())
        .replace(/<!-- guide:delivery-timeline -->/g, () => renderTimeline(rules))
        .replace(/\{\{(\w+)\}\}/g, (whole, name: string) => {
          const value = (rules as unknown as Record<string, unknown>)[name];
          if (typeof value !== "number") throw new Error(`spec/guides/${f}: ${whole} is not a number of x-delivery`);
          return String(value);
        })
        .replace(/<!-- guide:[\w-]+ -->/g, (d) => {
          throw new Error(`spec/guides/${f}: unknown directive ${d}`);
        }),
    )
    .join("\n\n");
}
