// The challenges of a WWW-Authenticate field (RFC 9110 §11.6.1): one field may hold several, in one line
// or in several, each a scheme with a token68 or auth-params. A client looks for the scheme it knows
// among them, so the suite does too.

export interface Challenge {
  /** The auth-scheme, lower case (scheme names are case-insensitive, RFC 9110 §11.1). */
  scheme: string;
  /** Its auth-params, names lower case, quoted values unquoted. */
  params: Record<string, string>;
}

// Quoted strings first, so that a comma or an "=" inside one is not read as syntax; a token (with "/",
// for a token68); "="; ","; anything else (spaces) skipped.
const TOKENS = /"((?:[^"\\]|\\.)*)"?|([!#$%&'*+./^_`|~0-9A-Za-z-]+)|(=)|(,)|[^]/g;

/** The challenges of the field's lines (as an HTTP client hands a repeated field: an array, or one joined line). */
export function parseChallenges(field: string | readonly string[] | undefined): Challenge[] {
  const lines = field === undefined ? [] : typeof field === "string" ? [field] : field;
  const challenges: Challenge[] = [];
  for (const line of lines) {
    const parts: { kind: "token" | "quoted" | "=" | ","; text: string }[] = [];
    for (const m of line.matchAll(TOKENS)) {
      if (m[1] !== undefined) parts.push({ kind: "quoted", text: m[1].replace(/\\(.)/g, "$1") });
      else if (m[2] !== undefined) parts.push({ kind: "token", text: m[2] });
      else if (m[3] !== undefined) parts.push({ kind: "=", text: "=" });
      else if (m[4] !== undefined) parts.push({ kind: ",", text: "," });
    }
    let current: Challenge | undefined;
    let afterComma = true;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (part.kind === ",") {
        afterComma = true;
        continue;
      }
      const next = parts[i + 1];
      if (part.kind === "token" && next?.kind === "=" && current) {
        const value = parts[i + 2];
        if (value?.kind === "token" || value?.kind === "quoted") {
          // An auth-param: name = token or quoted string.
          current.params[part.text.toLowerCase()] = value.text;
          i += 2;
        } else {
          // A token68 ending in "=" padding.
          while (parts[i + 1]?.kind === "=") i++;
        }
      } else if (part.kind === "token" && (afterComma || !current)) {
        // A new challenge: a scheme at the start or after a comma (a token68 follows its scheme after a space).
        current = { scheme: part.text.toLowerCase(), params: {} };
        challenges.push(current);
      }
      afterComma = false;
    }
  }
  return challenges;
}

/** The challenge of the scheme, if the field has one. */
export const challengeOf = (field: string | readonly string[] | undefined, scheme: string) => parseChallenges(field).find((c) => c.scheme === scheme.toLowerCase());
