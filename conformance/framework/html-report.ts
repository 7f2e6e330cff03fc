// The certification report as one offline HTML page (--html FILE): the verdict, a row per check with
// its source section, what was expected and seen, and for the timing checks a picture of when each
// attempt was due, the band the suite accepts around it, and when it came. No script, no request.
import { inspect } from "node:util";
import type { CheckResult, SuiteReport, Timeline, TimelineAttempt } from "./check.js";

const escape = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

const show = (value: unknown) => inspect(value, { depth: 4, breakLength: 100, maxStringLength: 300 });

/** A duration in the unit a reader thinks in: 150 ms, 1.5 s, 5 min, 2 h 36 min. */
export function humanDuration(ms: number): string {
  const sign = ms < 0 ? "−" : "";
  const a = Math.abs(ms);
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${+(a / 1000).toFixed(a < 10_000 ? 2 : 1)} s`;
  const minutes = Math.round(a / 60_000);
  if (minutes < 60) return `${sign}${minutes} min`;
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  return `${sign}${h} h${m ? ` ${m} min` : ""}`;
}

/** Whether the attempt came within the band the suite accepts. */
const inBand = (a: TimelineAttempt) => a.cameMs !== undefined && a.cameMs >= a.earliestMs && a.cameMs <= a.latestMs;

const WIDTH = 520;
const ROW = 34;
const LEFT = 150;

/**
 * One row per attempt, each on an axis of its own centred on when it was due: the accepted band as a
 * bar, the due time as a tick and the arrival as a dot (green inside the band, red outside; an arrow at
 * the edge when it came far outside, a cross when it never came).
 */
function timelineSvg(timeline: Timeline): string {
  const height = timeline.attempts.length * ROW + 24;
  const rows = timeline.attempts.map((a, i) => attemptRow(a, i * ROW + 20)).join("");
  return `<svg class="timeline" role="img" aria-label="${escape(timeline.title)}" width="${LEFT + WIDTH + 20}" height="${height}" viewBox="0 0 ${LEFT + WIDTH + 20} ${height}" xmlns="http://www.w3.org/2000/svg">
<text x="${LEFT}" y="12" class="axis">earlier</text><text x="${LEFT + WIDTH / 2}" y="12" class="axis" text-anchor="middle">due</text><text x="${LEFT + WIDTH}" y="12" class="axis" text-anchor="end">later</text>${rows}</svg>`;
}

function attemptRow(a: TimelineAttempt, y: number): string {
  const before = a.dueMs - a.earliestMs;
  const after = a.latestMs - a.dueMs;
  // Half the axis is 1.5 times the wider side of the band, so the band always shows whole.
  const half = Math.max(before, after, 1) * 1.5;
  const x = (ms: number) => LEFT + WIDTH / 2 + ((ms - a.dueMs) / half) * (WIDTH / 2);
  const clamp = (v: number) => Math.min(LEFT + WIDTH, Math.max(LEFT, v));
  let mark: string;
  if (a.cameMs === undefined) {
    mark = `<text x="${LEFT + WIDTH - 4}" y="${y + 14}" class="late" text-anchor="end">✕ never came</text>`;
  } else {
    const cx = x(a.cameMs);
    const shown = clamp(cx);
    const off = shown !== cx ? (cx < LEFT ? "◀ " : " ▶") : "";
    mark = `<circle cx="${shown}" cy="${y + 10}" r="5" class="${inBand(a) ? "ok" : "late"}"/>${off ? `<text x="${shown}" y="${y + 26}" class="late" text-anchor="${cx < LEFT ? "start" : "end"}">${escape(off)}</text>` : ""}`;
  }
  const came = a.cameMs === undefined ? "never came" : `came ${humanDuration(a.cameMs - a.dueMs)} from due`;
  return `<g class="row"><title>${escape(`${a.label}: due ${humanDuration(a.dueMs)}, accepted ${humanDuration(a.earliestMs - a.dueMs)} … +${humanDuration(after)}, ${came}`)}</title>
<text x="0" y="${y + 14}" class="label">${escape(a.label)}</text>
<line x1="${LEFT}" x2="${LEFT + WIDTH}" y1="${y + 10}" y2="${y + 10}" class="axisline"/>
<rect x="${x(a.earliestMs)}" y="${y + 4}" width="${Math.max(1, x(a.latestMs) - x(a.earliestMs))}" height="12" class="band"/>
<line x1="${x(a.dueMs)}" x2="${x(a.dueMs)}" y1="${y + 1}" y2="${y + 19}" class="due"/>${mark}</g>`;
}

function timelineTable(timeline: Timeline): string {
  const rows = timeline.attempts
    .map(
      (a) =>
        `<tr><td>${escape(a.label)}</td><td>+${humanDuration(a.dueMs)}</td><td>${humanDuration(a.earliestMs - a.dueMs)} … +${humanDuration(a.latestMs - a.dueMs)}</td><td class="${inBand(a) ? "ok" : "late"}">${a.cameMs === undefined ? "never" : `+${humanDuration(a.cameMs)} (${a.cameMs >= a.dueMs ? "+" : ""}${humanDuration(a.cameMs - a.dueMs)})`}</td></tr>`,
    )
    .join("");
  return `<table class="times"><thead><tr><th>attempt</th><th>due (${escape(timeline.clock)} time from the first)</th><th>accepted</th><th>came</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function checkRow(r: CheckResult): string {
  const details: string[] = [];
  if (r.message) details.push(`<p class="message">${escape(r.message)}</p>`);
  if (r.status === "failed" && ("expected" in r || "actual" in r)) {
    details.push(`<dl><dt>expected</dt><dd><pre>${escape(show(r.expected))}</pre></dd><dt>actual</dt><dd><pre>${escape(show(r.actual))}</pre></dd></dl>`);
  }
  if (r.note) details.push(`<p class="note">${escape(r.note)}</p>`);
  for (const t of r.timelines ?? []) {
    details.push(`<figure><figcaption>${escape(t.title)}</figcaption>${timelineSvg(t)}${timelineTable(t)}</figure>`);
  }
  return `<tr class="${r.status}" id="check-${escape(r.id)}"><td class="status">${r.status.toUpperCase()}</td><td><code>${escape(r.id)}</code><div class="title">${escape(r.title)}</div>${details.join("")}</td><td>${escape(r.section)}</td><td class="num">${humanDuration(r.durationMs)}</td></tr>`;
}

export function toHtml(report: SuiteReport): string {
  const count = (s: CheckResult["status"]) => report.results.filter((r) => r.status === s).length;
  const verdict = report.passed ? "CERTIFIED" : "NOT CERTIFIED";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${escape(`${verdict}: partner-platform ${report.suite} certification`)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1d2330}
h1{font-size:1.5em;margin:0 0 .2em}.verdict.pass{color:#176d2e}.verdict.fail{color:#b3261e}
table.checks{border-collapse:collapse;width:100%;margin-top:1em}
table.checks>tbody>tr>td,table.checks>thead>tr>th{border-top:1px solid #d9dde5;padding:.5em;vertical-align:top;text-align:left}
td.status{font-weight:600;width:4.5em}tr.passed td.status{color:#176d2e}tr.failed td.status{color:#b3261e}tr.skipped{color:#7a8190}
.title{color:#454c5a}pre{margin:0;white-space:pre-wrap}dl{display:grid;grid-template-columns:auto 1fr;gap:.2em 1em}dt{font-weight:600}
td.num{text-align:right;white-space:nowrap}figure{margin:.8em 0}figcaption{font-weight:600;margin-bottom:.3em}
svg.timeline .label{font-size:12px}svg.timeline .axis{font-size:11px;fill:#7a8190}svg.timeline .axisline{stroke:#c3c8d2}
svg.timeline .band{fill:#cfe8d5}svg.timeline .due{stroke:#1d2330;stroke-width:2}svg.timeline .ok{fill:#176d2e}svg.timeline .late{fill:#b3261e;font-size:12px}
table.times{border-collapse:collapse;font-size:12px;margin-top:.4em}table.times td,table.times th{padding:.15em .8em .15em 0;text-align:left}
table.times .ok{color:#176d2e}table.times .late{color:#b3261e}
</style></head><body>
<h1 class="verdict ${report.passed ? "pass" : "fail"}">${verdict}</h1>
<p>partner-platform <b>${escape(report.suite)}</b> suite against <code>${escape(report.target)}</code>, started ${escape(report.startedAt)}:
${count("passed")} passed, ${count("failed")} failed, ${count("skipped")} skipped in ${humanDuration(report.durationMs)}.</p>
${report.caveat ? `<p class="caveat"><b>Note:</b> ${escape(report.caveat)}</p>\n` : ""}<table class="checks"><thead><tr><th>verdict</th><th>check</th><th>source</th><th>time</th></tr></thead><tbody>
${report.results.map(checkRow).join("\n")}
</tbody></table></body></html>
`;
}
