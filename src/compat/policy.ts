// The gate's verdict on each change, by the policy of spec/DECISIONS.md D60.
import type { Change, Consumer } from "./compare.js";

export interface Verdict extends Change {
  /** Whether the policy lets this change through. */
  allowed: boolean;
  /** Why not, or what it requires (re-certification). */
  note?: string;
}

export interface GateResult {
  baseVersion: string;
  headVersion: string;
  /** The smallest version the head should carry (semver of `info.version`, D60). */
  suggestedVersion: string;
  verdicts: Verdict[];
  /** False when a change is not allowed: the gate fails. */
  passed: boolean;
}

/** Days a deprecated element stays at least, from the day the gate first sees its deprecation. */
export const DEPRECATION_DAYS = 180;

const removalDate = (message: string | undefined) => /not before (\d{4}-\d{2}-\d{2})/i.exec(message ?? "")?.[1];

function parseVersion(v: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [0, 0, 0];
}

export function evaluate(changes: Change[], baseVersion: string, headVersion: string, today: string): GateResult {
  const [bMajor, bMinor, bPatch] = parseVersion(baseVersion);
  const [hMajor] = parseVersion(headVersion);
  const majorUp = hMajor > bMajor;
  const day = (iso: string) => Date.parse(`${iso}T00:00:00Z`);
  const verdicts = changes.map((c): Verdict => {
    const partners = c.breaks.filter((b): b is Exclude<Consumer, "servers"> => b !== "servers");
    if (c.kind === "version-mismatch") return { ...c, allowed: false, note: "set the same info.version in spec/main.tsp and spec/asyncapi.yaml" };
    if (c.deprecation) {
      const date = removalDate(c.deprecationMessage);
      if (!date) return { ...c, allowed: false, note: 'its #deprecated message must name the earliest removal date: "... Removal not before YYYY-MM-DD."' };
      if (day(date) < day(today) + DEPRECATION_DAYS * 86_400_000) {
        return { ...c, allowed: false, note: `removal date ${date} is less than ${DEPRECATION_DAYS} days after ${today}` };
      }
      return { ...c, allowed: true, note: `removal not before ${date}` };
    }
    if (partners.length === 0) {
      return { ...c, allowed: true, ...(c.breaks.includes("servers") ? { note: "implementations must follow it and re-certify" } : {}) };
    }
    const need = `a new major version (info.version ${baseVersion} → ${bMajor + 1}.0.0, in main.tsp and asyncapi.yaml)`;
    if (c.area === "delivery" || c.area === "signature" || c.kind === "operation-rule-changed") {
      const what = c.kind === "operation-rule-changed" ? "an operation's limits" : "delivery and signature rules";
      return majorUp ? { ...c, allowed: true, note: "in a new major version" } : { ...c, allowed: false, note: `${what} change only in ${need}` };
    }
    if (c.removesDeprecated) {
      const date = removalDate(typeof c.removesDeprecated === "string" ? c.removesDeprecated : undefined);
      if (!majorUp) return { ...c, allowed: false, note: `a deprecated element is removed only in ${need}` };
      if (!date) return { ...c, allowed: false, note: "its #deprecated message in the base names no removal date" };
      if (day(today) < day(date)) return { ...c, allowed: false, note: `deprecated until ${date}: not removable before then` };
      return { ...c, allowed: true, note: `deprecated, removable since ${date}` };
    }
    return {
      ...c,
      allowed: false,
      note: "never allowed in place: add the new form beside it (a new path version, member or event name), deprecate this one, remove it after its date in a new major version",
    };
  });
  const breaksPartners = changes.some((c) => c.breaks.some((b) => b !== "servers"));
  const grows = changes.some((c) => c.breaks.length > 0 || c.deprecation || /added/.test(c.kind));
  const suggestedVersion = breaksPartners
    ? `${bMajor + 1}.0.0`
    : grows
      ? `${bMajor}.${bMinor + 1}.0`
      : changes.length > 0
        ? `${bMajor}.${bMinor}.${bPatch + 1}`
        : baseVersion;
  return { baseVersion, headVersion, suggestedVersion, verdicts, passed: verdicts.every((v) => v.allowed) };
}
