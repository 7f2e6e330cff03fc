// The compatibility gate's comparison (policy: spec/DECISIONS.md D60). Each change between two contracts
// is classified by whom it breaks: API clients, event receivers, server implementations, or no one.
// REST operations and every schema are compared by hand over the compiled OpenAPI 3.1 document (the
// README says why no OpenAPI diff tool fits); the AsyncAPI document is diffed by @asyncapi/diff and its
// changes classified here by what they mean for deliveries.
import { diff as asyncapiDiff } from "@asyncapi/diff";
import type { Contract, Json, SpecLocation } from "./contract.js";

export type Consumer = "clients" | "receivers" | "servers";
export type Area = "rest" | "events" | "signature" | "delivery" | "docs";

export interface Change {
  /** What kind of change, e.g. `property-removed`, `retry-waits-changed`. */
  kind: Kind;
  area: Area;
  /** What changed, in words, e.g. "POST /api/v4/requests 201 response: `leads[].leadID` removed". */
  message: string;
  /** Whom it breaks; empty when it is compatible. */
  breaks: Consumer[];
  /** Marks an element deprecated. */
  deprecation?: boolean;
  /** Where it is in spec/ (in the working tree, or in the base for what was removed). */
  location?: SpecLocation & { side: "base" | "head" };
  /** For removals: the element was deprecated in the base, with this `#deprecated` message. */
  removesDeprecated?: string | true;
  /** For a deprecation: its `#deprecated` message, which names the earliest removal date (D60). */
  deprecationMessage?: string;
}

export type Kind =
  | "operation-added" | "operation-removed" | "operation-deprecated" | "scopes-changed" | "auth-server-changed"
  | "parameter-added" | "parameter-removed" | "parameter-required-changed" | "parameter-deprecated"
  | "request-body-changed" | "media-type-added" | "media-type-removed"
  | "response-added" | "response-removed" | "header-added" | "header-removed"
  | "property-added" | "property-removed" | "property-deprecated" | "required-added" | "required-removed"
  | "enum-value-added" | "enum-value-removed" | "type-changed" | "constraint-narrowed" | "constraint-widened"
  | "constraint-changed" | "closed-changed" | "schema-deprecated"
  | "event-added" | "event-removed" | "event-deprecated"
  | "signature-changed" | "retry-waits-changed" | "attempt-timeout-changed" | "disable-threshold-changed"
  | "lead-expiry-changed" | "delivery-changed" | "operation-rule-changed" | "version-mismatch" | "documentation";

/** `error`: the problem+json body of a 4xx or 5xx answer. */
type Flow = "request" | "response" | "error" | "event";
type Effect = "narrower" | "wider" | "different";

/** Whom a change of what a party accepts or sends breaks, by flow (D60). */
function breaksOf(flow: Flow, effect: Effect): Consumer[] {
  // Clients act on an error answer's status and show its title and detail (D13): a new problem type or
  // cause is, like a new error status, something only servers must now produce. A problem type taken
  // away (or renamed) still breaks a client that recognizes it.
  if (flow === "error") return effect === "different" ? ["clients", "servers"] : ["servers"];
  const consumer: Consumer = flow === "event" ? "receivers" : "clients";
  if (flow === "request") return effect === "wider" ? ["servers"] : ["clients", "servers"];
  // Responses and events: a narrower schema can make what a server sends today invalid; a wider one
  // lets a server send what a client or receiver does not expect.
  if (effect === "narrower") return ["servers"];
  if (effect === "wider") return [consumer];
  return [consumer, "servers"];
}

interface Ctx {
  flow: Flow;
  /** Human path of the value, e.g. `customer.email` (empty at the body's root). */
  at: string;
  /** Prefix of every message, e.g. "POST /api/v4/requests request body". */
  where: string;
  /** The innermost named schema and property, for the location. */
  model?: string;
  prop?: string;
  area: Area;
  seen: Set<string>;
  /** Where to point when no named schema is at hand (an inline parameter schema: the operation). */
  fallback?: Change["location"];
  /** Inside an allOf part: the values the enclosing schema allows for each of its properties (base, head). */
  partLimits?: Record<string, Limit>;
  /** This value's own limit, from the enclosing schema of the allOf part it is a property of. */
  limit?: Limit;
}

/** The values (enum or const) a schema allows in the base and the head; undefined where it allows any. */
interface Limit {
  base?: unknown[];
  head?: unknown[];
}

/** Which way each known field of an operation's limits is stricter (compareOperationRules). */
const LIMIT_FIELDS: Record<string, Record<string, "higher-is-looser" | "higher-is-stricter">> = {
  "x-live-tokens-per-client": { max: "higher-is-looser" },
  "x-failed-authentication-throttle": { perClientId: "higher-is-looser", perAddress: "higher-is-looser", windowSeconds: "higher-is-stricter" },
};

export function compareContracts(base: Contract, head: Contract): Change[] {
  const changes: Change[] = [];
  const locate = (c: Contract, side: "base" | "head", ...keys: (string | undefined)[]) => {
    for (const key of keys) {
      if (!key) continue;
      const loc = c.declarations.get(key);
      if (loc) return { ...loc, side };
    }
    return undefined;
  };
  const add = (change: Change) => changes.push(change);

  // --- Schemas -------------------------------------------------------------------------------------
  const resolve = (doc: Json, schema: Json | undefined): { schema: Json | undefined; name?: string } => {
    let name: string | undefined;
    let s = schema;
    for (let i = 0; i < 20 && s; i++) {
      if (typeof s.$ref === "string") {
        name = s.$ref.split("/").pop();
        const { $ref: _ref, ...rest } = s;
        s = { ...doc.components?.schemas?.[name!], ...rest };
        continue;
      }
      // TypeSpec wraps a reference in a one-element allOf to give it a description of its own.
      if (Array.isArray(s.allOf) && s.allOf.length === 1 && !s.type && !s.properties) {
        const { allOf, ...rest } = s;
        s = { ...allOf[0], ...rest };
        continue;
      }
      // A union of single-value string enums (LeadStatus.new | LeadStatus.responded) is one enum.
      if (Array.isArray(s.anyOf) && s.anyOf.every((b: Json) => !b.$ref && Array.isArray(b.enum) && Object.keys(b).every((k) => k === "type" || k === "enum"))) {
        const { anyOf, ...rest } = s;
        s = { type: anyOf[0].type, enum: anyOf.flatMap((b: Json) => b.enum), ...rest };
        continue;
      }
      break;
    }
    return { schema: s, name };
  };
  const modelName = (name: string | undefined) => name?.split(".").pop();
  const same = (x: unknown, y: unknown) => JSON.stringify(x) === JSON.stringify(y);
  const enumValues = (s: Json | undefined): unknown[] | undefined => (s?.const !== undefined ? [s.const] : Array.isArray(s?.enum) ? s.enum : undefined);
  /** The enum or const values of each property a schema gives in the base and the head. */
  const limitsOf = (b: Json, a: Json): Record<string, Limit> => {
    const limits: Record<string, Limit> = {};
    for (const name of new Set([...Object.keys(b.properties ?? {}), ...Object.keys(a.properties ?? {})])) {
      limits[name] = { base: enumValues(resolve(base.openapi, b.properties?.[name]).schema), head: enumValues(resolve(head.openapi, a.properties?.[name]).schema) };
    }
    return limits;
  };

  const schemaChange = (ctx: Ctx, kind: Kind, effect: Effect | "none", text: string, side: "base" | "head" = "head", extra: Partial<Change> = {}) => {
    const c = side === "base" ? base : head;
    add({
      kind,
      area: ctx.area,
      message: `${ctx.where}${ctx.at ? ` \`${ctx.at}\`` : ""}: ${text}`,
      breaks: effect === "none" ? [] : breaksOf(ctx.flow, effect),
      location: locate(c, side, ctx.model && ctx.prop ? `${ctx.model}.${ctx.prop}` : undefined, ctx.model) ?? ctx.fallback,
      ...extra,
    });
  };

  const numeric: [keyword: string, upper: boolean][] = [
    ["maximum", true], ["exclusiveMaximum", true], ["maxLength", true], ["maxItems", true],
    ["minimum", false], ["exclusiveMinimum", false], ["minLength", false], ["minItems", false],
  ];

  function compareSchema(b0: Json | undefined, a0: Json | undefined, ctx: Ctx): void {
    const rb = resolve(base.openapi, b0);
    const ra = resolve(head.openapi, a0);
    const b = rb.schema ?? {};
    const a = ra.schema ?? {};
    const model = modelName(ra.name ?? rb.name);
    const inner: Ctx = model && (rb.name || ra.name) ? { ...ctx, model, prop: undefined } : ctx;
    const key = `${rb.name ?? ""}|${ra.name ?? ""}|${ctx.flow}|${ctx.where}|${ctx.at}`;
    if (rb.name && ra.name && ctx.seen.has(key)) return;
    const seen = new Set(ctx.seen).add(key);
    const sub = (at: string, extra: Partial<Ctx> = {}): Ctx => ({ ...inner, partLimits: undefined, limit: undefined, ...extra, at, seen });

    const componentDeprecated = (c: Contract, name?: string) => !!(name && c.openapi.components?.schemas?.[name]?.deprecated);
    if (!componentDeprecated(base, rb.name) && componentDeprecated(head, ra.name) && ctx.flow !== "event") {
      schemaChange(inner, "schema-deprecated", "none", "deprecated", "head", { deprecation: true, deprecationMessage: head.deprecations.get(model ?? "") ?? "" });
    }

    const typeOf = (s: Json) => (s.const !== undefined ? typeof s.const : Array.isArray(s.type) ? [...s.type].sort().join("|") : s.type ?? (s.properties ? "object" : undefined));
    const tb = typeOf(b);
    const ta = typeOf(a);
    if (tb !== ta && tb !== undefined && ta !== undefined) {
      schemaChange(inner, "type-changed", "different", `type ${tb} → ${ta}`);
      return;
    }

    // An object that becomes a choice of named objects, or the other way round: one change, not each member
    // reported removed. In a problem body it is a new cause, which only servers must produce (D60), unless
    // a problem type the body could have is taken away, which still breaks a client that recognizes it.
    const choiceOf = (c: Contract, s: Json): Json[] | undefined => {
      const members = (s.oneOf ?? s.anyOf) as Json[] | undefined;
      if (s.properties || !members?.every((m) => typeof m.$ref === "string")) return undefined;
      return members.every((m) => typeOf(resolve(c.openapi, m).schema ?? {}) === "object") ? members : undefined;
    };
    const [cb, ca] = [choiceOf(base, b), choiceOf(head, a)];
    if (!cb !== !ca && typeOf(cb ? a : b) === "object") {
      const show = (choice: Json[] | undefined, name: string | undefined) =>
        choice ? `one of ${choice.map((m) => String(m.$ref).split("/").pop()).join(", ")}` : (name ?? "an object");
      /** The `type` values a problem body of this shape can have. */
      const problemTypes = (c: Contract, s: Json, choice: Json[] | undefined) =>
        (choice ? choice.map((m) => resolve(c.openapi, m).schema ?? {}) : [s]).flatMap((m) => enumValues(resolve(c.openapi, m.properties?.type).schema) ?? []);
      const lost = ctx.flow === "error" && problemTypes(base, b, cb).some((t) => !problemTypes(head, a, ca).some((u) => same(t, u)));
      schemaChange(inner, "type-changed", ctx.flow === "error" && !lost ? "wider" : "different", `${show(cb, rb.name)} → ${show(ca, ra.name)}`);
      return;
    }

    // enum and const: a value added widens, a value removed narrows. In an allOf part only the values the
    // enclosing schema also allows count (RateLimitedProblem's `type` stays rate-limited whatever Problem's
    // list of types gains).
    const within = (vs: unknown[] | undefined, limit: unknown[] | undefined) => (vs && limit ? vs.filter((v) => limit.some((l) => same(l, v))) : vs);
    const vb = within(enumValues(b), ctx.limit?.base);
    const va = within(enumValues(a), ctx.limit?.head);
    // Where the enclosing schema gained or lost its own limit, that change is reported there, once.
    const limitChanged = ctx.limit !== undefined && !ctx.limit.base !== !ctx.limit.head;
    if ((vb || va) && !limitChanged) {
      if (!vb) schemaChange(inner, "constraint-narrowed", "narrower", `limited to ${JSON.stringify(va)}`);
      else if (!va) schemaChange(inner, "constraint-widened", "wider", `no longer limited to ${JSON.stringify(vb)}`);
      else {
        const added = va.filter((v) => !vb.some((x) => same(x, v)));
        const removed = vb.filter((v) => !va.some((x) => same(x, v)));
        for (const v of removed) schemaChange(inner, "enum-value-removed", ctx.flow === "error" ? "different" : "narrower", `value ${JSON.stringify(v)} removed`, "base");
        // Event names reach a client or receiver only as it subscribed to them: a new name breaks no one of them (D60).
        const gated = ctx.flow !== "request" && (ra.name === "EventName" || rb.name === "EventName");
        for (const v of added) schemaChange(inner, "enum-value-added", gated ? "none" : "wider", `value ${JSON.stringify(v)} added`);
      }
    }

    for (const kw of ["pattern", "format"]) {
      if (b[kw] === a[kw]) continue;
      if (b[kw] === undefined) schemaChange(inner, "constraint-narrowed", "narrower", `${kw} ${JSON.stringify(a[kw])} added`);
      else if (a[kw] === undefined) schemaChange(inner, "constraint-widened", "wider", `${kw} ${JSON.stringify(b[kw])} removed`);
      else schemaChange(inner, "constraint-changed", "different", `${kw} ${JSON.stringify(b[kw])} → ${JSON.stringify(a[kw])}`);
    }
    for (const [kw, upper] of numeric) {
      if (b[kw] === a[kw]) continue;
      const narrower = b[kw] === undefined || (a[kw] !== undefined && (upper ? a[kw] < b[kw] : a[kw] > b[kw]));
      schemaChange(inner, narrower ? "constraint-narrowed" : "constraint-widened", narrower ? "narrower" : "wider", `${kw} ${b[kw] ?? "none"} → ${a[kw] ?? "none"}`);
    }
    if (!b.uniqueItems !== !a.uniqueItems) {
      schemaChange(inner, a.uniqueItems ? "constraint-narrowed" : "constraint-widened", a.uniqueItems ? "narrower" : "wider", `uniqueItems ${!!b.uniqueItems} → ${!!a.uniqueItems}`);
    }
    const closed = (s: Json) => s.additionalProperties === false || s.unevaluatedProperties === false || (s.unevaluatedProperties && s.unevaluatedProperties.not);
    if (!!closed(b) !== !!closed(a)) {
      schemaChange(inner, "closed-changed", closed(a) ? "narrower" : "wider", closed(a) ? "unknown members now refused" : "unknown members now accepted");
    }

    if (b.items || a.items) compareSchema(b.items, a.items, sub(`${ctx.at}[]`));

    // Objects. Request bodies are closed (D16): a member removed is refused from then on. Responses and
    // events are open, and their consumers ignore unknown members: an optional member added breaks no one.
    const pb = (b.properties ?? {}) as Json;
    const pa = (a.properties ?? {}) as Json;
    const reqB = new Set<string>(b.required ?? []);
    const reqA = new Set<string>(a.required ?? []);
    const join = (name: string) => (ctx.at ? `${ctx.at}.${name}` : name);
    for (const name of Object.keys(pb)) {
      if (name in pa) continue;
      const deprecated = pb[name]?.deprecated || resolve(base.openapi, pb[name]).schema?.deprecated;
      const message = base.deprecations.get(`${model}.${name}`);
      add({
        kind: "property-removed",
        area: ctx.area,
        message: `${ctx.where} \`${join(name)}\`: removed`,
        breaks: ctx.flow === "request" ? ["clients", "servers"] : ctx.flow === "error" ? ["servers"] : [ctx.flow === "event" ? "receivers" : "clients"],
        location: locate(base, "base", model ? `${model}.${name}` : undefined, model),
        ...(deprecated ? { removesDeprecated: message ?? true } : {}),
      });
    }
    for (const name of Object.keys(pa)) {
      if (name in pb) continue;
      const required = reqA.has(name);
      const breaks: Consumer[] = ctx.flow === "request" ? (required ? ["clients", "servers"] : ["servers"]) : required ? ["servers"] : [];
      add({
        kind: "property-added",
        area: ctx.area,
        message: `${ctx.where} \`${join(name)}\`: ${required ? "required" : "optional"} member added`,
        breaks,
        location: locate(head, "head", model ? `${model}.${name}` : undefined, model),
      });
    }
    for (const name of Object.keys(pa)) {
      if (!(name in pb)) continue;
      const propCtx = sub(join(name), { prop: name, limit: ctx.partLimits?.[name] });
      if (reqB.has(name) && !reqA.has(name)) schemaChange(propCtx, "required-removed", "wider", "no longer required");
      if (!reqB.has(name) && reqA.has(name)) schemaChange(propCtx, "required-added", "narrower", "now required");
      if (!pb[name]?.deprecated && pa[name]?.deprecated) {
        schemaChange(propCtx, "property-deprecated", "none", "deprecated", "head", { deprecation: true, deprecationMessage: head.deprecations.get(`${model}.${name}`) ?? "" });
      }
      compareSchema(pb[name], pa[name], propCtx);
    }

    // Unions (oneOf/anyOf of references): variants by schema name; allOf: every part must hold, so a part
    // added narrows and a part removed widens.
    for (const kw of ["oneOf", "anyOf", "allOf"]) {
      const names = (s: Json) => ((s[kw] ?? []) as Json[]).map((v) => (typeof v.$ref === "string" ? v.$ref.split("/").pop() : JSON.stringify(v)));
      const nb = names(b);
      const na = names(a);
      const all = kw === "allOf";
      for (const n of nb.filter((n) => !na.includes(n))) {
        schemaChange(inner, all ? "constraint-widened" : "enum-value-removed", all ? "wider" : "narrower", `${all ? "part" : "variant"} ${n} removed`, "base");
      }
      for (const n of na.filter((n) => !nb.includes(n))) {
        schemaChange(inner, all ? "constraint-narrowed" : "enum-value-added", all ? "narrower" : "wider", `${all ? "part" : "variant"} ${n} added`);
      }
      // A part's properties are limited by the values this schema gives the same properties.
      const partLimits: Record<string, Limit> | undefined = all ? limitsOf(b, a) : undefined;
      for (const [i, n] of na.entries()) {
        const j = nb.indexOf(n);
        if (j >= 0 && n && !n.startsWith("{")) compareSchema(b[kw][j], a[kw][i], sub(ctx.at, { partLimits }));
      }
    }
  }

  /**
   * An operation's own limits (`x-…` members: the token endpoint's throttle of failed authentication, D30,
   * and its bound on live tokens, D32). Servers must follow any change. A limit added breaks no client that
   * does what the guides say (authenticate correctly, cache and reuse tokens); made stricter afterwards, it
   * may refuse a client what it got before. Which way is stricter is known per field (LIMIT_FIELDS); a
   * field this gate does not know counts as stricter either way. A limit's description is documentation.
   */
  function compareOperationRules(key: string, b: Json, a: Json, location: Change["location"]): void {
    const rules = (op: Json) => Object.keys(op).filter((k) => k.startsWith("x-") && op[k] && typeof op[k] === "object");
    const shown = (v: unknown) => JSON.stringify(v);
    for (const rule of new Set([...rules(b), ...rules(a)])) {
      const [rb, ra] = [(b[rule] ?? {}) as Json, (a[rule] ?? {}) as Json];
      const message = (text: string) => `${key} ${rule}${text}`;
      if (!b[rule] || !a[rule]) {
        const added = !b[rule];
        const values = Object.entries(added ? ra : rb).filter(([field]) => field !== "description").map(([field, v]) => `${field} ${shown(v)}`);
        add({ kind: "operation-rule-changed", area: "rest", message: message(`: limit ${added ? "added" : "removed"} (${values.join(", ")})`), breaks: ["servers"], location });
        continue;
      }
      for (const field of new Set([...Object.keys(rb), ...Object.keys(ra)])) {
        if (same(rb[field], ra[field])) continue;
        if (field === "description") {
          add({ kind: "documentation", area: "docs", message: message(` description changed`), breaks: [], location });
          continue;
        }
        const direction = LIMIT_FIELDS[rule]?.[field];
        const [before, after] = [rb[field], ra[field]];
        const stricter =
          after === undefined ? false : before === undefined || direction === undefined || typeof before !== "number" || typeof after !== "number" ? true : direction === "higher-is-looser" ? after < before : after > before;
        add({ kind: "operation-rule-changed", area: "rest", message: message(`.${field} ${shown(before)} → ${shown(after)}`), breaks: stricter ? ["clients", "servers"] : ["servers"], location });
      }
    }
  }

  // --- The problem types (D13) ------------------------------------------------------------------------
  // Every problem body reaches ProblemType through a part whose own `type` limits it (compareSchema), so
  // the list's changes count once, here: a new type is a problem servers may now be asked to produce (D60).
  {
    const problemTypes = (c: Contract) => enumValues(resolve(c.openapi, { $ref: "#/components/schemas/ProblemType" }).schema) ?? [];
    const [tb, ta] = [problemTypes(base), problemTypes(head)];
    const ctx: Ctx = { flow: "error", at: "", where: "problem types (ProblemType)", area: "rest", seen: new Set(), model: "ProblemType" };
    for (const v of tb.filter((v) => !ta.includes(v))) schemaChange(ctx, "enum-value-removed", "different", `value ${JSON.stringify(v)} removed`, "base");
    for (const v of ta.filter((v) => !tb.includes(v))) schemaChange(ctx, "enum-value-added", "wider", `value ${JSON.stringify(v)} added`);
  }

  // --- The document's own description: title, description, contact, license (documentation) ---------
  for (const key of new Set([...Object.keys(base.openapi.info ?? {}), ...Object.keys(head.openapi.info ?? {})])) {
    if (key === "version") continue;
    const [b, a] = [base.openapi.info?.[key], head.openapi.info?.[key]];
    if (JSON.stringify(b) === JSON.stringify(a)) continue;
    add({
      kind: "documentation",
      area: "docs",
      message: `info.${key} ${b === undefined ? "added" : a === undefined ? "removed" : "changed"}`,
      breaks: [],
      location: locate(head, "head", "PartnerPlatform") ?? locate(base, "base", "PartnerPlatform"),
    });
  }

  // --- REST operations -----------------------------------------------------------------------------
  interface Op { key: string; op: Json; id: string }
  const operations = (doc: Json): Map<string, Op> => {
    const out = new Map<string, Op>();
    for (const [route, item] of Object.entries((doc.paths ?? {}) as Json)) {
      for (const [method, op] of Object.entries(item as Json)) {
        if (!["get", "put", "post", "delete", "patch", "head", "options"].includes(method)) continue;
        const key = `${method.toUpperCase()} ${route}`;
        out.set(key, { key, op: op as Json, id: String((op as Json).operationId ?? key).split("_").pop()! });
      }
    }
    return out;
  };
  const opsB = operations(base.openapi);
  const opsA = operations(head.openapi);
  const scopesOf = (op: Json) => JSON.stringify(((op.security ?? []) as Json[]).map((r) => Object.entries(r).map(([k, v]) => `${k}:${[...(v as string[])].sort().join(" ")}`).sort()));

  for (const [key, { op, id }] of opsB) {
    if (opsA.has(key)) continue;
    add({
      kind: "operation-removed",
      area: "rest",
      message: `${key}: operation removed`,
      breaks: ["clients"],
      location: locate(base, "base", `op:${id}`),
      ...(op.deprecated ? { removesDeprecated: base.deprecations.get(`op:${id}`) ?? true } : {}),
    });
  }
  for (const [key, { id }] of opsA) {
    if (!opsB.has(key)) add({ kind: "operation-added", area: "rest", message: `${key}: operation added`, breaks: ["servers"], location: locate(head, "head", `op:${id}`) });
  }
  for (const [key, { op: a, id }] of opsA) {
    const found = opsB.get(key);
    if (!found) continue;
    const b = found.op;
    const opLoc = locate(head, "head", `op:${id}`);
    const ctx = (where: string, flow: Flow): Ctx => ({ flow, at: "", where: `${key} ${where}`, area: "rest", seen: new Set(), fallback: opLoc });
    compareOperationRules(key, b, a, opLoc);
    if (!b.deprecated && a.deprecated) add({ kind: "operation-deprecated", area: "rest", message: `${key}: operation deprecated`, breaks: [], deprecation: true, deprecationMessage: head.deprecations.get(`op:${id}`) ?? "", location: opLoc });
    if (scopesOf(b) !== scopesOf(a)) {
      add({ kind: "scopes-changed", area: "rest", message: `${key}: required scopes ${scopesOf(b)} → ${scopesOf(a)}`, breaks: ["clients", "servers"], location: opLoc });
    }
    if (JSON.stringify(b.servers ?? null) !== JSON.stringify(a.servers ?? null)) {
      add({ kind: "auth-server-changed", area: "rest", message: `${key}: servers changed`, breaks: ["clients", "servers"], location: opLoc });
    }
    for (const kw of ["summary", "description"]) {
      if (b[kw] !== a[kw]) add({ kind: "documentation", area: "docs", message: `${key}: ${kw} changed`, breaks: [], location: opLoc });
    }

    // Parameters (query, path, header) by place and name.
    const params = (op: Json, doc: Json) => new Map(((op.parameters ?? []) as Json[]).map((p) => {
      const r = typeof p.$ref === "string" ? doc.components?.parameters?.[p.$ref.split("/").pop()!] ?? p : p;
      return [`${r.in} parameter ${r.name}`, r as Json] as const;
    }));
    const pb = params(b, base.openapi);
    const pa = params(a, head.openapi);
    const paramLoc = (c: Contract, side: "base" | "head", name: string) => locate(c, side, `op:${id}.${name}`, `op:${id}`);
    for (const [name, p] of pb) {
      if (!pa.has(name)) {
        add({ kind: "parameter-removed", area: "rest", message: `${key} ${name}: removed`, breaks: ["clients"], location: paramLoc(base, "base", p.name), ...(p.deprecated ? { removesDeprecated: base.deprecations.get(`op:${id}.${p.name}`) ?? true } : {}) });
      }
    }
    for (const [name, p] of pa) {
      const old = pb.get(name);
      if (!old) {
        add({ kind: "parameter-added", area: "rest", message: `${key} ${name}: ${p.required ? "required" : "optional"} parameter added`, breaks: p.required ? ["clients", "servers"] : ["servers"], location: paramLoc(head, "head", p.name) });
        continue;
      }
      if (!!old.required !== !!p.required) {
        add({ kind: "parameter-required-changed", area: "rest", message: `${key} ${name}: ${p.required ? "now required" : "no longer required"}`, breaks: p.required ? ["clients", "servers"] : ["servers"], location: paramLoc(head, "head", p.name) });
      }
      if (!old.deprecated && p.deprecated) add({ kind: "parameter-deprecated", area: "rest", message: `${key} ${name}: deprecated`, breaks: [], deprecation: true, deprecationMessage: head.deprecations.get(`op:${id}.${p.name}`) ?? "", location: paramLoc(head, "head", p.name) });
      compareSchema(old.schema, p.schema, { ...ctx(name, "request"), model: undefined, fallback: paramLoc(head, "head", p.name) });
    }

    // Request body, by media type.
    const cb = (b.requestBody?.content ?? {}) as Json;
    const ca = (a.requestBody?.content ?? {}) as Json;
    for (const t of Object.keys(cb)) if (!(t in ca)) add({ kind: "media-type-removed", area: "rest", message: `${key} request body: ${t} no longer accepted`, breaks: ["clients", "servers"], location: opLoc });
    for (const t of Object.keys(ca)) if (!(t in cb)) add({ kind: "media-type-added", area: "rest", message: `${key} request body: ${t} accepted`, breaks: ["servers"], location: opLoc });
    if (!!b.requestBody?.required !== !!a.requestBody?.required) {
      add({ kind: "request-body-changed", area: "rest", message: `${key} request body: ${a.requestBody?.required ? "now required" : "no longer required"}`, breaks: a.requestBody?.required ? ["clients", "servers"] : ["servers"], location: opLoc });
    }
    for (const t of Object.keys(ca)) if (t in cb) compareSchema(cb[t].schema, ca[t].schema, ctx("request body", "request"));

    // Responses, by status. A new error status, like any change of an error's problem body, breaks servers
    // only: clients handle any 4xx problem by its status (D13).
    const rb = (b.responses ?? {}) as Json;
    const ra = (a.responses ?? {}) as Json;
    for (const s of Object.keys(rb)) if (!(s in ra)) add({ kind: "response-removed", area: "rest", message: `${key}: ${s} response removed`, breaks: ["servers"], location: opLoc });
    for (const s of Object.keys(ra)) {
      if (!(s in rb)) {
        add({ kind: "response-added", area: "rest", message: `${key}: ${s} response added`, breaks: s.startsWith("2") ? ["clients", "servers"] : ["servers"], location: opLoc });
        continue;
      }
      const rsb = rb[s] as Json;
      const rsa = ra[s] as Json;
      const hb = (rsb.headers ?? {}) as Json;
      const ha = (rsa.headers ?? {}) as Json;
      for (const h of Object.keys(hb)) if (!(h in ha)) add({ kind: "header-removed", area: "rest", message: `${key} ${s} response: header ${h} removed`, breaks: ["clients"], location: opLoc });
      for (const h of Object.keys(ha)) {
        if (!(h in hb)) add({ kind: "header-added", area: "rest", message: `${key} ${s} response: ${ha[h].required ? "required" : "optional"} header ${h} added`, breaks: ha[h].required ? ["servers"] : [], location: opLoc });
        else {
          compareSchema(hb[h].schema, ha[h].schema, ctx(`${s} response header ${h}`, "response"));
          // What a header names is told in its description (D35's Location): a change of it is documentation.
          if (hb[h].description !== ha[h].description) add({ kind: "documentation", area: "docs", message: `${key} ${s} response: header ${h} description changed`, breaks: [], location: opLoc });
        }
      }
      const mb = (rsb.content ?? {}) as Json;
      const ma = (rsa.content ?? {}) as Json;
      for (const t of Object.keys(mb)) if (!(t in ma)) add({ kind: "media-type-removed", area: "rest", message: `${key} ${s} response: ${t} no longer sent`, breaks: ["servers"], location: opLoc });
      for (const t of Object.keys(ma)) {
        if (!(t in mb)) add({ kind: "media-type-added", area: "rest", message: `${key} ${s} response: ${t} may be sent`, breaks: ["clients"], location: opLoc });
        else compareSchema(mb[t].schema, ma[t].schema, ctx(`${s} response`, s.startsWith("2") ? "response" : "error"));
      }
    }
  }

  // --- Events ----------------------------------------------------------------------------------------
  for (const [name, schema] of base.events) {
    if (head.events.has(name)) continue;
    const deprecated = base.openapi.components?.schemas?.[schema]?.deprecated;
    add({
      kind: "event-removed",
      area: "events",
      message: `event ${name}: removed`,
      breaks: ["receivers"],
      location: locate(base, "base", schema),
      ...(deprecated ? { removesDeprecated: base.deprecations.get(schema) ?? true } : {}),
    });
  }
  for (const [name, schema] of head.events) {
    const old = base.events.get(name);
    if (!old) {
      add({ kind: "event-added", area: "events", message: `event ${name}: added`, breaks: ["servers"], location: locate(head, "head", schema) });
      continue;
    }
    const sb = base.openapi.components?.schemas?.[old];
    const sa = head.openapi.components?.schemas?.[schema];
    if (!sb?.deprecated && sa?.deprecated) add({ kind: "event-deprecated", area: "events", message: `event ${name}: deprecated`, breaks: [], deprecation: true, deprecationMessage: head.deprecations.get(schema) ?? "", location: locate(head, "head", schema) });
    compareSchema({ $ref: `#/components/schemas/${old}` }, { $ref: `#/components/schemas/${schema}` }, { flow: "event", at: "", where: `event ${name}`, area: "events", seen: new Set(), model: schema });
  }

  // --- The AsyncAPI document: signature, delivery numbers --------------------------------------------
  changes.push(...asyncapiChanges(base, head));

  // One contract, one version (D60): main.tsp and asyncapi.yaml carry the same info.version.
  const asyncVersion = String(head.asyncapi.info?.version ?? "");
  if (asyncVersion !== head.version) {
    add({
      kind: "version-mismatch",
      area: "docs",
      message: `info.version ${head.version} in main.tsp but ${asyncVersion} in asyncapi.yaml`,
      breaks: [],
      location: head.asyncapiLine(["info", "version"]) ? { ...head.asyncapiLine(["info", "version"])!, side: "head" } : undefined,
    });
  }

  // A schema shared by several places changes once per place; a description changes many times: keep one of each.
  const unique = new Map<string, Change>();
  for (const c of changes) unique.set(`${c.kind}|${c.message}`, c);
  return [...unique.values()];
}

interface AsyncApiEdit {
  action: "add" | "remove" | "edit";
  path: string;
  before?: unknown;
  after?: unknown;
}

function asyncapiChanges(base: Contract, head: Contract): Change[] {
  const out: Change[] = [];
  const output = asyncapiDiff(base.asyncapi, head.asyncapi, { outputType: "json" } as never) as unknown as { getOutput(): { changes: AsyncApiEdit[] } };
  const edits = (output.getOutput() as { changes: AsyncApiEdit[] }).changes;
  const segments = (p: string) => p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  const at = (edit: AsyncApiEdit, seg: (string | number)[]) => {
    const c = edit.action === "remove" ? base : head;
    const loc = c.asyncapiLine(seg);
    return loc ? { ...loc, side: edit.action === "remove" ? ("base" as const) : ("head" as const) } : undefined;
  };
  const db = (base.asyncapi["x-delivery"] ?? {}) as Json;
  const da = (head.asyncapi["x-delivery"] ?? {}) as Json;
  const done = new Set<string>();
  for (const edit of edits) {
    const seg = segments(edit.path);
    const [top, second, third] = seg;
    const location = at(edit, seg);
    if (top === "x-delivery") {
      const key = String(second);
      if (done.has(key)) continue;
      done.add(key);
      const before = db[key];
      const after = da[key];
      const show = `x-delivery.${key} ${JSON.stringify(before)} → ${JSON.stringify(after)}`;
      const loc = at(edit, ["x-delivery", key]);
      if (key === "retryWaitsSeconds") {
        const b = (before ?? []) as number[];
        const a = (after ?? []) as number[];
        // Receivers rely on the retries to outlast an outage: fewer or sooner retries break them.
        const receivers = a.length < b.length || a.some((w, i) => b[i] !== undefined && w < b[i]!);
        out.push({ kind: "retry-waits-changed", area: "delivery", message: show, breaks: receivers ? ["receivers", "servers"] : ["servers"], location: loc });
      } else if (key === "attemptTimeoutSeconds" || key === "disableAfterConsecutiveFailures") {
        const lower = typeof before === "number" && typeof after === "number" ? after < before : true;
        out.push({
          kind: key === "attemptTimeoutSeconds" ? "attempt-timeout-changed" : "disable-threshold-changed",
          area: "delivery",
          message: show,
          breaks: lower ? ["receivers", "servers"] : ["servers"],
          location: loc,
        });
      } else if (key === "leadExpirySeconds") {
        out.push({ kind: "lead-expiry-changed", area: "delivery", message: show, breaks: ["receivers", "servers"], location: loc });
      } else if (key === "signatureHeader" || key === "signatureAlgorithm") {
        out.push({ kind: "signature-changed", area: "signature", message: show, breaks: ["receivers", "servers"], location: loc });
      } else {
        // method, contentType, the e-mail header, or a rule added: every certified server must follow it.
        out.push({ kind: "delivery-changed", area: "delivery", message: show, breaks: before === undefined ? ["servers"] : ["receivers", "servers"], location: loc });
      }
      continue;
    }
    const isDoc = ["description", "summary", "title", "examples", "externalDocs"].includes(String(seg[seg.length - 1]));
    if (top === "components" && (second === "schemas" || second === "messageTraits") && !isDoc) {
      // The signed-delivery headers (DeliveryHeaders, the signedDelivery trait): the signature scheme.
      out.push({ kind: "signature-changed", area: "signature", message: `${seg.join(".")}: ${edit.action} ${JSON.stringify(edit.action === "remove" ? edit.before : edit.after)}`, breaks: ["receivers", "servers"], location });
      continue;
    }
    // Events are compared by name above; message keys, payload references and channel lists follow them.
    if (top === "components" && second === "messages" && (seg[3] === "name" || seg[3] === "payload" || seg.length === 3)) continue;
    if (top === "channels" || top === "operations") {
      if (!isDoc) continue;
    }
    if (top === "info" && third === undefined && second === "version") continue;
    if (isDoc || top === "info") {
      out.push({ kind: "documentation", area: "docs", message: `asyncapi.yaml ${seg.join(".")}: ${edit.action === "edit" ? "changed" : edit.action === "add" ? "added" : "removed"}`, breaks: [], location });
    }
  }
  return out;
}
