// `partner-platform compat` / `npm run compat`: the compatibility gate between a base contract (a git
// revision or a directory) and the working tree's spec/. Policy: spec/DECISIONS.md D60.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "../paths.js";
import { compareContracts, type Consumer } from "./compare.js";
import { CompatError, loadContract, specDirOf, type Contract } from "./contract.js";
import { evaluate, type GateResult, type Verdict } from "./policy.js";

export { CompatError, loadContract, specDirOf } from "./contract.js";
export type { Contract } from "./contract.js";
export { compareContracts } from "./compare.js";
export { evaluate } from "./policy.js";
export type { Change, Consumer } from "./compare.js";
export type { GateResult, Verdict } from "./policy.js";

export interface CompatReport extends GateResult {
  base: string;
}

/** A folder for copies of spec/ that TypeSpec can compile: under node_modules, so its libraries resolve. */
export function scratchDir(): string {
  const dir = path.join(packageRoot, "node_modules", ".cache", "partner-platform-compat");
  mkdirSync(dir, { recursive: true });
  return mkdtempSync(path.join(dir, "spec-"));
}

const git = (cwd: string, args: string[]) => execFileSync("git", ["-C", cwd, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

/**
 * The spec folder of `--base`: a directory (holding main.tsp, or spec/main.tsp), or a git revision of the
 * repository that holds the head's spec/, whose spec/ is extracted with `git archive`.
 */
export function resolveBase(base: string, headSpecDir: string): { specDir: string; cleanup: () => void } {
  if (existsSync(base) && statSync(base).isDirectory()) return { specDir: specDirOf(path.resolve(base)), cleanup: () => {} };
  let top: string;
  try {
    top = git(headSpecDir, ["rev-parse", "--show-toplevel"]);
  } catch {
    throw new CompatError(`--base ${base}: not a directory, and ${headSpecDir} is not in a git repository`);
  }
  let sha: string;
  try {
    sha = git(top, ["rev-parse", "--verify", "--quiet", `${base}^{commit}`]);
  } catch {
    const shallow = existsSync(path.join(top, ".git", "shallow")) ? " (this clone is shallow: fetch the revision, e.g. git fetch --deepen=50 or git fetch origin tag NAME)" : "";
    throw new CompatError(`--base ${base}: neither a directory nor a git revision of ${top}${shallow}`);
  }
  // The base's spec folder sits where the head's does; a head outside the repository's tree (a copy
  // elsewhere) is compared with the repository's spec/.
  let rel = path.relative(top, headSpecDir) || ".";
  const exists = (p: string) => {
    try {
      git(top, ["cat-file", "-e", `${sha}:${p === "." ? "" : p}`]);
      return true;
    } catch {
      return false;
    }
  };
  if (rel.startsWith("..") || !exists(rel)) rel = "spec";
  const dir = scratchDir();
  try {
    const tar = execFileSync("git", ["-C", top, "archive", "--format=tar", sha, rel], { maxBuffer: 64 * 1024 * 1024, stdio: ["ignore", "pipe", "pipe"] });
    execFileSync("tar", ["-x", "-C", dir], { input: tar });
  } catch {
    rmSync(dir, { recursive: true, force: true });
    throw new CompatError(`--base ${base}: ${rel}/ does not exist at ${sha.slice(0, 12)}`);
  }
  return { specDir: specDirOf(path.join(dir, rel)), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The base the package's own CI compares with (D60): the last release tag (`v*`) reachable from HEAD; else
 * the merge base with main when HEAD is on another branch; else HEAD's parent. A clone too shallow for any
 * of them has no base: the caller says so and skips (fetch tags or history to gate there).
 */
export function ciBase(repoDir: string): { base: string; why: string } | { base?: undefined; why: string } {
  const tryGit = (args: string[]) => {
    try {
      return git(repoDir, args);
    } catch {
      return undefined;
    }
  };
  const tag = tryGit(["describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD"]);
  if (tag) return { base: tag, why: `last release tag ${tag}` };
  const head = tryGit(["rev-parse", "HEAD"]);
  for (const main of ["origin/main", "main"]) {
    const mergeBase = tryGit(["merge-base", "HEAD", main]);
    if (mergeBase && mergeBase !== head) return { base: mergeBase, why: `no release tag; merge base with ${main}` };
  }
  const parent = tryGit(["rev-parse", "--verify", "--quiet", "HEAD^1"]);
  if (parent) return { base: parent, why: "no release tag and HEAD is on main: its parent commit" };
  const shallow = tryGit(["rev-parse", "--is-shallow-repository"]) === "true";
  return { why: shallow ? "shallow clone without tags or parent commit" : "no release tag and no parent commit" };
}

export function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/** Compares two loaded contracts and applies the policy. */
export function gate(base: Contract, head: Contract, label: string, day = today()): CompatReport {
  return { base: label, ...evaluate(compareContracts(base, head), base.version, head.version, day) };
}

export async function runCompat(options: { base: string; head?: string; today?: string }): Promise<CompatReport> {
  const headSpecDir = specDirOf(path.resolve(options.head ?? process.cwd()));
  let baseRef = options.base;
  if (baseRef === "auto") {
    const found = ciBase(headSpecDir);
    if (!found.base) throw new CompatError(`--base auto: ${found.why}; give --base a tag, branch or directory`);
    baseRef = found.base;
  }
  const { specDir, cleanup } = resolveBase(baseRef, headSpecDir);
  try {
    const [base, head] = [await loadContract(specDir), await loadContract(headSpecDir)];
    return gate(base, head, baseRef === options.base ? baseRef : `${baseRef.slice(0, 12)} (auto)`, options.today);
  } finally {
    cleanup();
  }
}

// --- Output --------------------------------------------------------------------------------------


export function classOf(v: Pick<Verdict, "breaks" | "deprecation">): string {
  if (v.deprecation) return "deprecation";
  return v.breaks.length === 0 ? "compatible" : `breaking for ${v.breaks.join(", ")}`;
}

const where = (v: Verdict) => (v.location ? `${v.location.file}:${v.location.line}${v.location.side === "base" ? " (in the base)" : ""}` : "");

export function formatText(report: CompatReport): string {
  const lines = [`Contract ${report.headVersion} compared with ${report.base} (${report.baseVersion}): ${report.verdicts.length} change(s).`];
  // A reason shared by many refused changes (a shared scalar used in many places) is printed once, numbered.
  const notes: string[] = [];
  for (const v of report.verdicts) {
    let mark = "";
    if (!v.allowed) {
      const note = v.note ?? "not allowed";
      const n = notes.includes(note) ? notes.indexOf(note) + 1 : notes.push(note);
      mark = `NOT ALLOWED (${n}) `;
    }
    lines.push(`${mark}[${classOf(v)}] ${v.message}${v.location ? `  (${where(v)})` : ""}`);
  }
  notes.forEach((note, i) => lines.push(`(${i + 1}) ${note}`));
  const refused = report.verdicts.filter((v) => !v.allowed).length;
  lines.push(
    refused > 0
      ? `FAILED: ${refused} change(s) the policy (spec/DECISIONS.md D60) does not allow.`
      : `OK: every change is allowed. Version at least ${report.suggestedVersion} (now ${report.headVersion}).`,
  );
  return `${lines.join("\n")}\n`;
}

export function formatJson(report: CompatReport): string {
  return `${JSON.stringify({ ...report, verdicts: report.verdicts.map((v) => ({ class: classOf(v), ...v })) }, null, 2)}\n`;
}

/** How an entry says its version is ahead of info.version (a changelog keeps one such entry). */
export const UNRELEASED = "Not released yet:";

/** A CHANGELOG.md entry: the changes grouped by whom they break. */
export function formatMarkdown(report: CompatReport, heading = `## ${report.suggestedVersion}`): string {
  const out = [heading, "", `Compared with \`${report.base}\` (${report.baseVersion}) by \`npm run compat\`.`, ""];
  if (report.headVersion !== report.suggestedVersion && report.verdicts.length > 0) {
    out.splice(4, 0, `${UNRELEASED} info.version is ${report.headVersion}; these changes need ${report.suggestedVersion}.`, "");
  }
  const item = (v: Verdict) => `- ${v.message.replace(/\s+/g, " ")}${v.location ? ` (\`${where(v)}\`)` : ""}${v.allowed ? "" : " **not allowed**"}`;
  const groups: [string, Verdict[]][] = [
    ["Breaking for API clients", report.verdicts.filter((v) => v.breaks.includes("clients"))],
    ["Breaking for event receivers", report.verdicts.filter((v) => v.breaks.includes("receivers"))],
    ["Server implementations must follow (re-certify)", report.verdicts.filter((v) => v.breaks.includes("servers"))],
    ["Deprecated", report.verdicts.filter((v) => v.deprecation)],
    ["Compatible", report.verdicts.filter((v) => v.breaks.length === 0 && !v.deprecation && v.area !== "docs")],
    ["Documentation", report.verdicts.filter((v) => v.area === "docs")],
  ];
  for (const [title, list] of groups) {
    if (list.length === 0) continue;
    out.push(`### ${title}`, "", ...list.map(item), "");
  }
  if (report.verdicts.length === 0) out.push("No change to the contract.", "");
  return `${out.join("\n")}`;
}
