// What the reference server reads from the generated OpenAPI documents (problem types, scopes, query
// parameters, the token lifetime, the control API's bodies), so that no contract fact is written twice.
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject, type Options, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { parse as parseYaml } from "yaml";
import { specPaths } from "../paths.js";
import { validatorFor } from "../spec.js";

type Json = Record<string, any>;
const readYaml = (file: string) => parseYaml(readFileSync(file, "utf8")) as Json;
const openapi = readYaml(specPaths.openapi);

export interface FieldError {
  pointer: string;
  detail: string;
}

/** Problem type by status, from the per-status problem schemas of the spec. */
export const problemTypes = new Map<number, string>(
  Object.values(openapi.components.schemas as Json)
    .filter((s: Json) => s.properties?.type?.enum && s.properties?.status?.enum)
    .map((s: Json) => [s.properties.status.enum[0] as number, s.properties.type.enum[0] as string]),
);

/** A problem type by its slug (`business-forbidden`), from the spec's ProblemType enum. */
export const problemTypeBySlug = (slug: string): string | undefined =>
  (openapi.components.schemas.ProblemType.enum as string[]).find((t) => t.endsWith(`:${slug}`));

/** The token operation, whose extensions carry the token rules. */
const tokenOperation = openapi.paths["/oauth2/token"].post as Json;

/** The token endpoint's failed-authentication budget (D30, `x-failed-authentication-throttle`). */
export const failedAuthBudget = tokenOperation["x-failed-authentication-throttle"] as {
  perClientId: number;
  perAddress: number;
  windowSeconds: number;
};

/** How many live tokens a client holds at most (D32, `x-live-tokens-per-client`): one more revokes its oldest. */
export const maxLiveTokensPerClient = (tokenOperation["x-live-tokens-per-client"] as { max: number }).max;

/** Every scope the API grants (the `Scope` enum). */
export const allScopes: readonly string[] = openapi.components.schemas.Scope.enum as string[];

/** The scope an operation requires, from its security requirement. */
export function scopeOf(route: string, method: string): string {
  const security = openapi.paths[route][method].security as Record<string, string[]>[];
  return Object.values(security[0]!)[0]![0]!;
}

/** The token lifetime the spec decides (D11), as its token example states it. */
export const specTokenLifetimeSeconds: number = (
  Object.values(tokenOperation.responses["200"].content["application/json"].examples as Json)[0] as Json
).value.expires_in;

/** A member name as a JSON Pointer token (RFC 6901: ~ and / escaped). */
export const escapeToken = (name: string) => name.replace(/~/g, "~0").replace(/\//g, "~1");
const UNKNOWN_MEMBER = "must not be present: the schema has no such member";

/** Where an Ajv error is and what it says; a missing or unknown member points at itself, not at its object. */
function located(e: ErrorObject): FieldError {
  const params = e.params as { missingProperty?: string; additionalProperty?: string; unevaluatedProperty?: string };
  if (e.keyword === "required") return { pointer: `${e.instancePath}/${escapeToken(params.missingProperty!)}`, detail: e.message ?? e.keyword };
  // A closed object with `false`: Ajv names the member in params and points at its object.
  const unknown = params.unevaluatedProperty ?? params.additionalProperty;
  if (unknown !== undefined) return { pointer: `${e.instancePath}/${escapeToken(unknown)}`, detail: UNKNOWN_MEMBER };
  // A closed object with `{not: {}}` (what TypeSpec's `...Record<never>` emits): Ajv points at the member
  // already, but says only "must NOT be valid".
  if (e.keyword === "not" && /\/(unevaluated|additional)Properties\/not$/.test(e.schemaPath)) return { pointer: e.instancePath, detail: UNKNOWN_MEMBER };
  return { pointer: e.instancePath, detail: e.message ?? e.keyword };
}

/** Ajv errors as RFC 9457 `errors[]`, one per fault; the whole body is "" (RFC 6901). */
export function fieldErrors(validate: ValidateFunction, value: unknown, prefix = ""): FieldError[] {
  if (validate(value)) return [];
  return (validate.errors ?? []).map(located).map((e) => ({ ...e, pointer: prefix + e.pointer }));
}

export const schemaErrors = (schemaName: string, value: unknown): FieldError[] => fieldErrors(validatorFor(schemaName), value);

/** Validates an operation's query parameters against their schemas; errors point at `/query/<name>` (D13). */
export function queryErrors(route: string, method: string, query: Record<string, unknown>): FieldError[] {
  const parameters = (openapi.paths[route][method].parameters as Json[]).filter((p) => p.in === "query");
  return parameters.flatMap((p) => {
    const value = query[p.name as string];
    if (value === undefined) return p.required ? [{ pointer: `/query/${p.name}`, detail: "is required" }] : [];
    const schemaName = (p.schema.$ref as string).split("/").pop()!;
    return schemaErrors(schemaName, value).map((e) => ({ pointer: `/query/${p.name}`, detail: e.detail }));
  });
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** An Ajv for JSON Schema 2020-12 with the standard formats (email, uri, date-time, ...). */
export const createAjv = (options: Options): Ajv2020 => addFormats(new Ajv2020(options));

let controlDoc: Json | undefined;
let control: Ajv2020 | undefined;

/** A validator for a schema of the Conformance Control API (generated/control/openapi.yaml). */
export function controlValidator(schemaName: string): ValidateFunction {
  if (!control) {
    controlDoc ??= readYaml(specPaths.controlOpenapi);
    // An OpenAPI document is not a schema: its other members and OpenAPI's numeric formats are ignored.
    control = createAjv({ allErrors: true, strict: false, logger: false });
    for (const format of ["int32", "int64", "float", "double"]) control.addFormat(format, true);
    control.addSchema(controlDoc, "control");
  }
  const validate = control.getSchema(`control#/components/schemas/${schemaName}`);
  if (!validate) throw new Error(`no schema ${schemaName} in the control API`);
  return validate;
}

/** The `type` and `status` a problem schema of the control API fixes, e.g. ClockNotVirtualProblem. */
export function controlProblem(schemaName: string): { type: string; status: number } {
  controlDoc ??= readYaml(specPaths.controlOpenapi);
  const properties = controlDoc.components.schemas[schemaName].properties as Json;
  return { type: properties.type.enum[0] as string, status: properties.status.enum[0] as number };
}

/** The most businesses a search returns (`maxItems` of BusinessSearchResult). */
export const maxSearchResults: number = openapi.components.schemas.BusinessSearchResult.properties.businesses.maxItems;

/** The body size limit, as the spec's 413 answers state it ("the body exceeds 64 KiB", D18). */
export const bodyLimitBytes: number = (() => {
  const descriptions = Object.values(openapi.paths as Json).flatMap((item: Json) =>
    Object.values(item).map((op: Json) => (op.responses?.["413"]?.description as string | undefined) ?? ""),
  );
  const kib = descriptions.map((d) => /exceeds (\d+) KiB/.exec(d)?.[1]).find(Boolean);
  if (!kib) throw new Error("the spec states no body size limit (a 413 answer 'exceeds N KiB')");
  return Number(kib) * 1024;
})();
