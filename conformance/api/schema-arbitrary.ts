// JSON Schema → fast-check, for the subset the spec uses: valid values (`arbitraryOf`) and, from a
// valid value, one-fault invalid variants with the pointer of the fault (`mutationsOf`).
//
// Written here rather than taken from a library: json-schema-fast-check (0.0.x) is unmaintained and
// knows nothing of fast-check 4's `stringMatching`, and json-schema-faker has its own random source
// (no seed replay or shrinking through fast-check) and makes no invalid values. The subset is small,
// and anything outside it throws instead of producing values that might not validate.
import fc from "fast-check";

type Json = Record<string, any>;
export type Schema = Json;
export type Resolve = (ref: string) => Schema;

/** Keywords that constrain values and that this converter honours. */
const CONSTRAINTS = new Set([
  "type", "enum", "const", "properties", "required", "additionalProperties", "unevaluatedProperties", "items",
  "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
  "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
]);
/** Keywords that do not constrain values. */
const ANNOTATIONS = new Set([
  "description", "title", "examples", "example", "default", "$comment", "discriminator", "readOnly", "writeOnly",
  "deprecated", "$id", "$schema", "summary", "externalDocs", "xml",
]);
/** Formats generated and broken on purpose; the others listed only annotate (OpenAPI numeric widths, secrets). */
const GENERATED_FORMATS = new Set(["uri", "email", "date-time"]);
const ANNOTATION_FORMATS = new Set(["int32", "int64", "float", "double", "password"]);

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

function intersectTypes(a: unknown, b: unknown): unknown {
  if (a === undefined || a === b) return b ?? a;
  if (b === undefined) return a;
  const pair = new Set([a, b]);
  if (pair.has("integer") && pair.has("number")) return "integer";
  throw new Error(`conflicting types in allOf: ${JSON.stringify(a)} and ${JSON.stringify(b)}`);
}

/** Intersection of two flattened schemas (what allOf means), for the keywords of the subset. */
function merge(a: Schema, b: Schema, resolve: Resolve): Schema {
  const out: Schema = { ...a, ...b };
  out.type = intersectTypes(a.type, b.type);
  if (out.type === undefined) delete out.type;
  if (a.properties && b.properties) {
    out.properties = { ...a.properties };
    for (const [key, schema] of Object.entries(b.properties as Json)) {
      out.properties[key] = key in a.properties ? merge(flatten(a.properties[key], resolve), flatten(schema, resolve), resolve) : schema;
    }
  }
  if (a.required || b.required) out.required = [...new Set([...(a.required ?? []), ...(b.required ?? [])])];
  if (a.enum && b.enum) out.enum = (a.enum as unknown[]).filter((v) => (b.enum as unknown[]).includes(v));
  for (const key of ["minLength", "minItems", "minimum"] as const) {
    if (a[key] !== undefined && b[key] !== undefined) out[key] = Math.max(a[key], b[key]);
  }
  for (const key of ["maxLength", "maxItems", "maximum"] as const) {
    if (a[key] !== undefined && b[key] !== undefined) out[key] = Math.min(a[key], b[key]);
  }
  for (const key of ["pattern", "format", "const"] as const) {
    if (a[key] !== undefined && b[key] !== undefined && JSON.stringify(a[key]) !== JSON.stringify(b[key])) {
      throw new Error(`allOf with two different ${key}s is not supported`);
    }
  }
  return out;
}

/** The schema with `$ref` and `allOf` replaced by what they refer to, merged into one. */
export function flatten(schema: Schema, resolve: Resolve, depth = 0): Schema {
  if (depth > 32) throw new Error("schema nesting too deep (a recursive $ref?)");
  let out: Schema = schema;
  if (typeof out.$ref === "string") {
    const { $ref, ...rest } = out;
    out = merge(flatten(resolve($ref), resolve, depth + 1), rest, resolve);
  }
  if (Array.isArray(out.allOf)) {
    const { allOf, ...rest } = out;
    out = (allOf as Schema[]).reduce<Schema>((acc, part) => merge(acc, flatten(part, resolve, depth + 1), resolve), rest);
  }
  for (const key of Object.keys(out)) {
    if (!CONSTRAINTS.has(key) && !ANNOTATIONS.has(key)) throw new Error(`unsupported JSON Schema keyword "${key}"`);
  }
  if (typeof out.format === "string" && !GENERATED_FORMATS.has(out.format) && !ANNOTATION_FORMATS.has(out.format)) {
    throw new Error(`unsupported format "${out.format}"`);
  }
  return out;
}

const typeOf = (s: Schema): string | undefined =>
  typeof s.type === "string"
    ? s.type
    : s.properties
      ? "object"
      : s.items
        ? "array"
        : Array.isArray(s.enum) && s.enum.length > 0
          ? jsonType(s.enum[0])
          : undefined;

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

const codePoints = (s: string) => [...s].length;

/** A value the string keywords of `s` accept (length in code points, pattern with the `u` flag, as Ajv). */
function fitsString(s: Schema): (v: string) => boolean {
  const pattern = typeof s.pattern === "string" ? new RegExp(s.pattern, "u") : undefined;
  return (v) =>
    codePoints(v) >= (s.minLength ?? 0) && (s.maxLength === undefined || codePoints(v) <= s.maxLength) && (!pattern || pattern.test(v));
}

// Letters in both cases: a created resource holds an address as it was sent, not lower-cased.
const label = fc.stringMatching(/^[A-Za-z0-9]{1,12}$/);

function stringArbitrary(s: Schema): fc.Arbitrary<string> {
  let arb: fc.Arbitrary<string>;
  switch (s.format) {
    // Public-looking HTTPS addresses: a server may refuse private or loopback hosts (D16), and these never resolve.
    // Half the time with capitals in the host, and without a path where there are no segments: a created
    // resource holds the URL as sent, not as a URL parser writes it again (D28).
    case "uri":
      arb = fc
        .tuple(fc.constantFrom("hooks.example.com", "Hooks.Example.com"), fc.array(fc.stringMatching(/^[a-z0-9-]{1,12}$/), { maxLength: 4 }))
        .map(([host, segments]) => `https://${host}${segments.length > 0 ? `/${segments.join("/")}` : host === "hooks.example.com" ? "/" : ""}`);
      break;
    // Plain dot-atom addresses that any e-mail validator accepts; the RFC 5322 corners are not what is certified.
    case "email":
      arb = fc.tuple(label, fc.option(label, { nil: undefined }), label).map(([a, b, d]) => `${a}${b ? `.${b}` : ""}@${d}.example.com`);
      break;
    case "date-time":
      arb = fc
        .date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true })
        .map((d) => d.toISOString());
      break;
    default: {
      const minLength = s.minLength ?? 0;
      const text = fc.string({ unit: "grapheme-composite", minLength, maxLength: s.maxLength ?? minLength + 32 });
      // Free text with a space at each end, or a decomposed é, a third of the time each, which a created
      // resource keeps (held as sent, neither trimmed nor normalized).
      arb = typeof s.pattern === "string" ? fc.stringMatching(new RegExp(s.pattern)) : fc.oneof(text, text.map((v) => ` ${v} `), text.map((v) => `e\u0301${v}`));
    }
  }
  return arb.filter(fitsString(s));
}

function numberArbitrary(s: Schema, integer: boolean): fc.Arbitrary<number> {
  const wide = integer || s.format === "int32" ? INT32 : { min: -1e9, max: 1e9 };
  const lower = s.exclusiveMinimum ?? s.minimum ?? wide.min;
  const upper = s.exclusiveMaximum ?? s.maximum ?? wide.max;
  if (integer) {
    const min = s.exclusiveMinimum !== undefined ? Math.floor(lower) + 1 : Math.ceil(lower);
    const max = s.exclusiveMaximum !== undefined ? Math.ceil(upper) - 1 : Math.floor(upper);
    return fc.integer({ min, max });
  }
  return fc.double({
    min: lower,
    max: upper,
    minExcluded: s.exclusiveMinimum !== undefined,
    maxExcluded: s.exclusiveMaximum !== undefined,
    noNaN: true,
    noDefaultInfinity: true,
  });
}

export interface ArbitraryOptions {
  /**
   * Mix the schema's `examples` in (1 in 4): generated requests then also name data the
   * implementation holds (the examples' category, business) and reach its success path, not only 404.
   */
  examples?: boolean;
}

/** An arbitrary of values valid against `schema` (local `$ref`s resolved with `resolve`). */
export function arbitraryOf(schema: Schema, resolve: Resolve, options: ArbitraryOptions = {}): fc.Arbitrary<unknown> {
  const s = flatten(schema, resolve);
  const base = baseArbitrary(s, resolve, options);
  const examples = Array.isArray(s.examples) ? (s.examples as unknown[]) : [];
  if (!options.examples || examples.length === 0 || s.enum || "const" in s) return base;
  return fc.oneof({ arbitrary: fc.constantFrom(...examples), weight: 1 }, { arbitrary: base, weight: 3 });
}

function baseArbitrary(s: Schema, resolve: Resolve, options: ArbitraryOptions): fc.Arbitrary<unknown> {
  if ("const" in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) {
    if (s.enum.length === 0) throw new Error("an enum with no member admits no value");
    return fc.constantFrom(...(s.enum as unknown[]));
  }
  const branches = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (branches) {
    const { anyOf: _a, oneOf: _o, ...rest } = s;
    return fc.oneof(...branches.map((b) => arbitraryOf(merge(rest, flatten(b, resolve), resolve), resolve, options)));
  }
  if (Array.isArray(s.type)) return fc.oneof(...(s.type as string[]).map((type) => baseArbitrary({ ...s, type }, resolve, options)));
  switch (typeOf(s)) {
    case "string":
      return stringArbitrary(s);
    case "integer":
      return numberArbitrary(s, true);
    case "number":
      return numberArbitrary(s, false);
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array": {
      const items = arbitraryOf(s.items ?? {}, resolve, options);
      const minLength = s.minItems ?? 0;
      const maxLength = s.maxItems ?? minLength + 4;
      return s.uniqueItems
        ? fc.uniqueArray(items, { minLength, maxLength, selector: (v) => JSON.stringify(v) })
        : fc.array(items, { minLength, maxLength });
    }
    case "object": {
      const properties = (s.properties ?? {}) as Record<string, Schema>;
      const required = (s.required ?? []) as string[];
      const unknown = required.filter((k) => !(k in properties));
      if (unknown.length) throw new Error(`required member(s) without a schema: ${unknown.join(", ")}`);
      const model = Object.fromEntries(Object.entries(properties).map(([k, p]) => [k, arbitraryOf(p, resolve, options)]));
      // Only the listed members: a closed object refuses any other, and an open one needs none.
      return fc.record(model, { requiredKeys: required });
    }
    default:
      throw new Error(`cannot generate values for a schema without a type: ${JSON.stringify(s).slice(0, 200)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Invalid values: one fault each, at a known place.

export interface Mutation {
  /** JSON Pointer of the faulty member ("" for the whole value). */
  pointer: string;
  /** What was done there, e.g. `missing-required`, `pattern`, `wrong-type`. */
  kind: string;
  /** The whole value with the fault in it. */
  value: unknown;
}

const REMOVE = Symbol("remove");

const pointerFrom = (tokens: readonly (string | number)[]) =>
  tokens.map((t) => `/${String(t).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");

function setAt(root: unknown, tokens: readonly (string | number)[], replacement: unknown): unknown {
  if (tokens.length === 0) return replacement;
  const copy = structuredClone(root) as any;
  let parent = copy;
  for (const t of tokens.slice(0, -1)) parent = parent[t];
  const last = tokens.at(-1)!;
  if (replacement === REMOVE) {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else {
    parent[last] = replacement;
  }
  return copy;
}

/** A value of another JSON type than the schema's. */
function wrongTypeFor(type: string | undefined): unknown {
  switch (type) {
    case "string":
      return 12345;
    case "integer":
    case "number":
      return "12345";
    case "boolean":
      return "true";
    case "object":
      return "not-an-object";
    case "array":
      return "not-an-array";
    default:
      return { unexpected: true };
  }
}

const BAD_FORMAT: Record<string, string> = { uri: "not a uri", email: "not-an-email", "date-time": "yesterday" };

/**
 * Addresses made from a valid one that RFC 5321's Mailbox refuses (D16: dots only between atoms, no space)
 * and a loose pattern (one @, a dot after it, no spaces) takes: two dots together in the local part or the
 * domain, a dot at either end of the local part; and the address with a space inside or a line feed after it.
 */
function badAddressesLike(address: string): string[] {
  const at = address.lastIndexOf("@");
  if (at < 1) return [];
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  return [
    `${local}..${local}@${domain}`,
    `.${address}`,
    `${local}.@${domain}`,
    ...(domain.includes(".") ? [`${local}@${domain.replace(".", "..")}`] : []),
    `${local} ${address}`,
    `${address}\n`,
    // A dot after the domain (DNS's root, which RFC 5321's Domain does not write).
    `${address}.`,
    // RFC 5321's Domain: letters, digits and hyphens inside a label; what a pattern of "anything but @" takes.
    `${local}@under_score.${domain}`,
    `${local}@-${domain}`,
    // Well-formed, labels of at most 63 characters, one character past maxLength 254: a format check alone takes it.
    wellFormedOfLength(local, domain, 255),
  ];
}

/** `local@…domain` of `length` characters, labels of 63 "a" or fewer added before `domain`. */
function wellFormedOfLength(local: string, domain: string, length: number): string {
  let address = `${local}@${domain}`;
  while (address.length < length) {
    const label = "a".repeat(Math.min(63, length - address.length - 1));
    address = label.length > 0 ? `${local}@${label}.${address.slice(local.length + 1)}` : `${address}a`;
  }
  return address;
}

/** A schema no value satisfies: `false`, or `{not: {}}` as TypeSpec's `...Record<never>` emits it. */
const admitsNothing = (s: unknown) =>
  s === false || (s !== null && typeof s === "object" && Object.keys(s).length === 1 && JSON.stringify((s as Json).not) === "{}");

/** An object schema that refuses members it does not list (closed request bodies, D16). */
export const isClosed = (s: Schema) => admitsNothing(s.unevaluatedProperties) || admitsNothing(s.additionalProperties);

/** `name` as a client would misspell it: its middle two characters swapped (`secret` → `secert`). */
function typoOf(name: string): string {
  const chars = [...name];
  const i = Math.min(Math.floor(chars.length / 2), chars.length - 2);
  if (i >= 0) [chars[i], chars[i + 1]] = [chars[i + 1]!, chars[i]!];
  return chars.join("");
}

/**
 * Every one-fault variant of the valid `value` that the keywords of `schema` let this function make:
 * a missing required member, an extra member in a closed object, a value of the wrong type (null, an
 * array or an object included), outside an enum, a pattern, a length, a format, a bound, an item count or a duplicate item. `isInvalid` (the
 * real validator) drops any that happen to be valid anyway.
 */
export function mutationsOf(schema: Schema, value: unknown, resolve: Resolve, isInvalid?: (value: unknown) => boolean): Mutation[] {
  const out: Mutation[] = [];
  const emit = (tokens: readonly (string | number)[], kind: string, replacement: unknown) =>
    out.push({ pointer: pointerFrom(tokens), kind, value: setAt(value, tokens, replacement) });

  function walk(raw: Schema, v: unknown, tokens: (string | number)[]): void {
    const s = flatten(raw, resolve);
    const type = typeOf(s) ?? (s.anyOf ?? s.oneOf ? typeOf(flatten((s.anyOf ?? s.oneOf)[0], resolve)) : undefined);
    emit(tokens, "wrong-type", wrongTypeFor(type));
    // The wrong types a JSON library hands over without complaint, where code expects an object or a string.
    if (tokens.length > 0) emit(tokens, "null", null);
    emit(tokens, "wrong-type", type === "array" ? {} : []);
    if (Array.isArray(s.enum) || "const" in s) {
      const members = (s.enum ?? [s.const]) as unknown[];
      const outsider = type === "string" ? "not-a-member" : typeof members[0] === "number" ? Math.max(...(members as number[])) + 1 : undefined;
      if (outsider !== undefined) emit(tokens, "not-in-enum", outsider);
      // A member in other letters: members are compared exactly (a case-insensitive lookup takes it).
      const recased = typeof members[0] === "string" ? (members[0] as string).toUpperCase() : undefined;
      if (recased !== undefined && !members.includes(recased)) emit(tokens, "not-in-enum", recased);
      // With a line feed after it or a space before it: nothing is trimmed (D16).
      if (typeof members[0] === "string") for (const padded of [`${members[0]}\n`, ` ${members[0]}`]) emit(tokens, "not-in-enum", padded);
      return;
    }
    if (typeof v === "string") {
      if (typeof s.pattern === "string") {
        const pattern = new RegExp(s.pattern, "u");
        // Derived from the value, so that generated values give varied faults: a stray character at
        // either end, the value three times over (too long for a bounded repetition), empty, with a line
        // feed after it (which `$` matches before in PHP, Python and Perl, not in the ECMA-262 patterns of
        // JSON Schema), and in other letters (`HTTPS://`: patterns are case-sensitive).
        // Its digits in another script too (Arabic-Indic: `[0-9]` and `\d` are ASCII in ECMA-262, not in Java's or .NET's Unicode classes).
        const otherDigits = v.replace(/[0-9]/g, (d) => String.fromCodePoint(0x660 + Number(d)));
        // Just past a bounded repetition (its last character once more each time, up to 24: a 20-digit id,
        // a 16-digit phone number), a space in the middle, and its first non-zero digit a 0 (`+0…`). A space
        // before it (a parser that trims) and a suffix after a hyphen (a ZIP+4, read by a parser of its prefix).
        const overBound = Array.from({ length: 24 }, (_, i) => v + v.slice(-1).repeat(i + 1)).find((c) => !pattern.test(c));
        // Its first digit a sign (+1000, -1000: what Go's Atoi, Java's parseInt and Python's int() take as digits).
        const signed = /^\d/.test(v) ? [`+${v.slice(1)}`, `-${v.slice(1)}`] : [];
        // And one short of its lower bound (+123456 where +[1-9][0-9]{6,14} wants 7 digits): the longest cut that fails.
        const underBound = Array.from({ length: Math.min(24, v.length - 1) }, (_, i) => v.slice(0, v.length - i - 1)).find((c) => !pattern.test(c));
        const middle = Math.floor(v.length / 2);
        const candidates = [`!${v}`, `${v}!`, v.repeat(3), ...(overBound ? [overBound] : []), ...(underBound ? [underBound] : []), `${v.slice(0, middle)} ${v.slice(middle)}`, v.replace(/[1-9]/, "0"), "", `${v}\n`, ` ${v}`, `${v}-1234`, ...signed];
        const breaking = new Set([...candidates, v.toUpperCase(), v.toLowerCase(), otherDigits].filter((c) => !pattern.test(c)));
        for (const c of breaking) emit(tokens, "pattern", c);
      }
      if (s.minLength > 0) emit(tokens, "too-short", [...v].slice(0, s.minLength - 1).join(""));
      if (s.minLength > 1) {
        // Too short in code points, long enough in UTF-8 bytes (D16: lengths are counted in code points),
        // and long enough in UTF-16 units (Java's and JavaScript's String length).
        emit(tokens, "too-short", "é".repeat(s.minLength - 1));
        emit(tokens, "too-short", "😀".repeat(Math.ceil(s.minLength / 2)));
      }
      if (s.maxLength !== undefined) emit(tokens, "too-long", v + "a".repeat(Math.max(1, s.maxLength + 1 - codePoints(v))));
      if (typeof s.format === "string" && s.format in BAD_FORMAT) emit(tokens, "format", BAD_FORMAT[s.format]);
      if (s.format === "email") for (const c of badAddressesLike(v)) emit(tokens, "format", c);
    }
    if (typeof v === "number") {
      if (s.minimum !== undefined) emit(tokens, "below-minimum", s.minimum - 1);
      if (s.exclusiveMinimum !== undefined) emit(tokens, "below-minimum", s.exclusiveMinimum);
      if (s.maximum !== undefined) emit(tokens, "above-maximum", s.maximum + 1);
      if (s.exclusiveMaximum !== undefined) emit(tokens, "above-maximum", s.exclusiveMaximum);
      if (type === "integer") emit(tokens, "not-an-integer", v + 0.5);
    }
    if (Array.isArray(v)) {
      if (s.minItems > 0) emit(tokens, "too-few-items", v.slice(0, s.minItems - 1));
      if (s.maxItems !== undefined && v.length > 0) emit(tokens, "too-many-items", Array.from({ length: s.maxItems + 1 }, (_, i) => v[i % v.length]));
      if (s.uniqueItems && v.length > 0) emit(tokens, "duplicate-item", [...v, v[0]]);
      // The first item stands for the others: their schema is the same.
      if (s.items && v.length > 0) walk(s.items, v[0], [...tokens, 0]);
    }
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const properties = (s.properties ?? {}) as Record<string, Schema>;
      for (const key of (s.required ?? []) as string[]) {
        if (key in (v as Json)) emit([...tokens, key], "missing-required", REMOVE);
      }
      if (isClosed(s)) {
        // A misspelt copy of the first member, with its value: only the name is wrong.
        const [name, member] = Object.entries(v as Json)[0] ?? [undefined, true];
        let extra = name === undefined ? "extra" : typoOf(name);
        while (Object.hasOwn(properties, extra) || Object.hasOwn(v as Json, extra)) extra += "_";
        emit([...tokens, extra], "extra-member", member);
        // The same name in other letters, beside it: names are compared exactly (a case-insensitive binder takes it for the member).
        const recased = name === undefined ? undefined : name.toUpperCase() === name ? name.toLowerCase() : name.toUpperCase();
        if (recased !== undefined && recased !== name && !Object.hasOwn(properties, recased)) emit([...tokens, recased], "extra-member", member);
        // A name with ~ and / in it, whose pointer escapes both, ~ first (RFC 6901 §3: secret~/v2 is /secret~0~1v2).
        emit([...tokens, `${name ?? "extra"}~/v2`], "extra-member", member);
      }
      for (const [key, member] of Object.entries(v as Json)) {
        if (properties[key]) walk(properties[key], member, [...tokens, key]);
      }
    }
  }

  walk(schema, value, []);
  return isInvalid ? out.filter((m) => isInvalid(m.value)) : out;
}

/**
 * The JSON text of a valid body with bytes that are not UTF-8 (0xFF 0xFE) at the start of its first string
 * value: well-formed JSON otherwise, so only the encoding is wrong (D29). Without a string value, the bytes
 * come first. A server must refuse it with a 4xx, never store U+FFFD in its place.
 */
export function invalidUtf8Of(text: string): Buffer {
  const at = /:\s*"/.exec(text);
  const cut = at ? at.index + at[0].length : 0;
  return Buffer.concat([Buffer.from(text.slice(0, cut), "utf8"), Buffer.from([0xff, 0xfe]), Buffer.from(text.slice(cut), "utf8")]);
}

/**
 * The valid `body` with a lone surrogate (U+D800, sent as the JSON escape `\ud800`) before the value of
 * its first string member where that is the only fault: the same body with U+FFFD there instead still
 * validates, so a server that repaired it would accept it. Undefined when no string member allows that.
 */
/**
 * The body with each free-text string member (a maxLength, and no pattern, format or enum) at its maxLength
 * in `unit`: as long as the schema allows in code points, longer in UTF-8 bytes (é: 2 each) or UTF-16 units
 * (😀: 2 each, 4 bytes), which D16 does not count. Undefined where the body has no such member.
 */
export function atMaxLength(schema: Schema, body: unknown, resolve: Resolve, unit: string): { body: unknown; pointers: string[] } | undefined {
  return withFreeText(schema, body, resolve, (max) => unit.repeat(max));
}

/** `body` with each free-text member (a maxLength, no pattern, format or enum) replaced by `write(its maxLength)`, and their pointers. */
export function withFreeText(schema: Schema, body: unknown, resolve: Resolve, write: (max: number) => string): { body: unknown; pointers: string[] } | undefined {
  const found: { tokens: string[]; max: number }[] = [];
  const walk = (raw: Schema, value: unknown, tokens: string[]) => {
    const s = flatten(raw, resolve);
    // `password` (TypeSpec's @secret) marks a member as sensitive, and constrains nothing.
    const free = s.pattern === undefined && (s.format === undefined || s.format === "password") && s.enum === undefined;
    if (typeof value === "string" && typeof s.maxLength === "number" && free) found.push({ tokens, max: s.maxLength });
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      for (const [key, member] of Object.entries(value)) if (s.properties?.[key]) walk(s.properties[key], member, [...tokens, key]);
    }
  };
  walk(schema, body, []);
  if (found.length === 0) return undefined;
  return { body: found.reduce((at, f) => setAt(at, f.tokens, write(f.max)), body), pointers: found.map((f) => pointerFrom(f.tokens)) };
}

export function loneSurrogateVariant(body: unknown, isValid: (value: unknown) => boolean): { pointer: string; body: unknown } | undefined {
  const strings: { tokens: (string | number)[]; value: string }[] = [];
  const walk = (value: unknown, tokens: (string | number)[]) => {
    if (typeof value === "string") strings.push({ tokens, value });
    else if (Array.isArray(value)) value.forEach((item, i) => walk(item, [...tokens, i]));
    else if (value !== null && typeof value === "object") for (const [key, member] of Object.entries(value)) walk(member, [...tokens, key]);
  };
  walk(body, []);
  for (const { tokens, value } of strings) {
    if (isValid(setAt(body, tokens, `\uFFFD${value}`))) return { pointer: pointerFrom(tokens), body: setAt(body, tokens, `\uD800${value}`) };
  }
  return undefined;
}
