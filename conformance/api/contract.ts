// What the API certification knows about the contract, all read from generated/openapi/openapi.yaml:
// the operations (server, scopes, parameters, body, examples), the per-status problem types, and a
// validator of any response against the document (Ajv 2020 over the OpenAPI 3.1 schemas).
import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { parse as parseYaml } from "yaml";
import { specPaths } from "../../src/paths.js";
import { describeSchemaErrors } from "@partner-platform/sdk";

type Json = Record<string, any>;
export type Schema = Json;

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** JSON Pointer (RFC 6901) of a location in the document, e.g. `#/paths/~1api~1v4~1requests/post`. */
export const pointerOf = (...tokens: string[]) => `#/${tokens.map((t) => t.replace(/~/g, "~0").replace(/\//g, "~1")).join("/")}`;

export interface QueryParameter {
  name: string;
  required: boolean;
  schema: Schema;
  /** Where its schema is, for validation. */
  schemaPointer: string;
}

export interface SuccessExample {
  name: string;
  status: number;
  query: Record<string, string>;
  body?: unknown;
  /** The example's answer body. */
  response?: unknown;
}

export interface Operation {
  operationId: string;
  /** Kebab-case operationId, the prefix of the operation's check ids. */
  slug: string;
  method: string;
  path: string;
  /** Served from `{auth_url}` (an operation-level server, D10) rather than `{base_url}`. */
  onAuthServer: boolean;
  /** Scopes its security requirement names; empty for the token operation. */
  scopes: string[];
  /** "§4.3" from "(source document, section 4.3)" of its description. */
  section: string;
  query: QueryParameter[];
  body?: { mediaType: string; schema: Schema; schemaPointer: string; examples: Record<string, unknown> };
  /** Declared statuses, e.g. ["201", "400", …]. */
  statuses: string[];
  /** The body size limit its 413 response states ("the body exceeds 64 KiB", D18), in bytes. */
  bodyLimitBytes?: number;
  /** Each 2xx response example, with the request of the same name. */
  successExamples: SuccessExample[];
  /** The problem types (URNs) its responses declare. */
  problemTypes: string[];
  /** Each 422 example's request body (`x-request-body`, D61) and the pointers its problem names. */
  invalidExamples: { name: string; body: unknown; pointers: string[] }[];
}

export interface ResponseSeen {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export interface Contract {
  doc: Json;
  operations: Operation[];
  /** The operation served from `{auth_url}`: the token endpoint. */
  tokenOperation: Operation;
  /** The token endpoint's failed-authentication budget (`x-failed-authentication-throttle`, D30), if it declares one. */
  failedAuthThrottle?: { perClientId: number; perAddress: number; windowSeconds: number };
  /** How many live tokens a client holds at most (`x-live-tokens-per-client`, D32), if it declares it. */
  liveTokensPerClient?: number;
  /** The API operations (those that require a scope). */
  apiOperations: Operation[];
  /** Every scope of the API, from the security scheme. */
  scopes: string[];
  /** Problem type URN and status by slug, e.g. `validation-failed` → 422, from the per-status problem schemas. */
  problem(slug: string): { type: string; status: number };
  /** The status the token endpoint answers an RFC 6749 error code with, from its response descriptions (D11). */
  oauthErrorStatus(code: string): number;
  /** Resolves a local `$ref`. */
  resolve(ref: string): Schema;
  /** A validator of the schema at a JSON Pointer of the document. */
  validatorAt(pointer: string): ValidateFunction;
  /** What is wrong with a response to `op`, against the document; empty when it validates. */
  violations(op: Operation, response: ResponseSeen): string[];
}

const kebab = (id: string) => id.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();

function sectionOf(description: string | undefined): string {
  const match = /source document, sections? ([\d.]+(?: and [\d.]+)*)/.exec(description ?? "");
  return match ? match[1]!.split(" and ").map((s) => `§${s}`).join(", ") : "§4";
}

/** `application/problem+json; charset=utf-8` → `application/problem+json`. */
export const mediaTypeOf = (contentType: string | string[] | undefined) =>
  String(contentType ?? "").split(";")[0]!.trim().toLowerCase();

const isJsonMediaType = (mediaType: string) => mediaType === "application/json" || mediaType.endsWith("+json");

/**
 * An identifier of D14's form that the suites take as naming nothing: a certified implementation has
 * no category and no business with it (the 404 of D13, the empty search of D17).
 */
export const UNKNOWN_ID = "9999999999999999999";

/**
 * A zip code of D14's form that no business serves: no US postal code is 00000, so a certified
 * implementation's search finds nothing there and a service request there matches nothing (D17).
 */
export const UNSERVED_ZIP = "00000";

let loaded: Contract | undefined;

/** The contract of generated/openapi/openapi.yaml (loaded once). */

export function loadContract(): Contract {
  loaded ??= buildContract(parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json);
  return loaded;
}

function buildContract(doc: Json): Contract {
  // OpenAPI keywords (discriminator, format int32) are not JSON Schema vocabulary: not strict.
  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
  ajv.addSchema({ ...doc, $id: "openapi" });
  const validators = new Map<string, ValidateFunction>();
  const validatorAt = (pointer: string): ValidateFunction => {
    let validate = validators.get(pointer);
    if (!validate) {
      validate = ajv.getSchema(`openapi${pointer}`);
      if (!validate) throw new Error(`no schema at ${pointer} of the OpenAPI document`);
      validators.set(pointer, validate);
    }
    return validate;
  };

  const resolve = (ref: string): Schema => {
    if (!ref.startsWith("#/")) throw new Error(`only local $refs are supported: ${ref}`);
    let node: any = doc;
    for (const token of ref.slice(2).split("/")) node = node?.[token.replace(/~1/g, "/").replace(/~0/g, "~")];
    if (node === undefined) throw new Error(`unresolved $ref ${ref}`);
    return node as Schema;
  };

  const operations: Operation[] = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json).map(([method, op]) => readOperation(path, method, op as Json)),
  );

  function readOperation(path: string, method: string, op: Json): Operation {
    const opPointer = [ "paths", path, method ] as const;
    const parameters = ((op.parameters ?? []) as Json[]).map((p, i) => ({ p, i })).filter(({ p }) => p.in === "query");
    const query = parameters.map(({ p, i }) => ({
      name: p.name as string,
      required: p.required === true,
      schema: p.schema as Schema,
      schemaPointer: pointerOf(...opPointer, "parameters", String(i), "schema"),
    }));
    const [mediaType, media] = Object.entries((op.requestBody?.content ?? {}) as Json)[0] ?? [];
    const body = mediaType
      ? {
          mediaType,
          schema: (media as Json).schema as Schema,
          schemaPointer: pointerOf(...opPointer, "requestBody", "content", mediaType, "schema"),
          examples: Object.fromEntries(Object.entries(((media as Json).examples ?? {}) as Json).map(([n, e]) => [n, (e as Json).value])),
        }
      : undefined;
    const statuses = Object.keys(op.responses as Json);
    // The limit is prose in the spec (D18): read it from the description of the response that enforces it.
    const limitKiB = Object.values(op.responses as Json)
      .map((r) => /exceeds (\d+) KiB/.exec(((r as Json).description as string | undefined) ?? "")?.[1])
      .find(Boolean);
    // Query values of an example: the parameter's own example, else its schema's first example.
    const exampleQuery = Object.fromEntries(
      query.map((q, i) => {
        const p = parameters[i]!.p;
        const schema = q.schema.$ref ? resolve(q.schema.$ref as string) : q.schema;
        return [q.name, String(p.example ?? (schema.examples as unknown[] | undefined)?.[0] ?? "")];
      }),
    );
    const successExamples = statuses
      .filter((s) => /^2\d\d$/.test(s))
      .flatMap((status) =>
        Object.values(((op.responses[status] as Json).content ?? {}) as Json).flatMap((m) =>
          Object.entries(((m as Json).examples ?? {}) as Json).map(([name, example]) => ({
            name,
            status: Number(status),
            query: exampleQuery,
            ...(body ? { body: body.examples[name] } : {}),
            response: (example as Json).value,
          })),
        ),
      );
    const invalidExamples = Object.values((((op.responses as Json)["422"] as Json | undefined)?.content ?? {}) as Json).flatMap((m) =>
      Object.entries(((m as Json).examples ?? {}) as Json)
        .filter(([, example]) => (example as Json)["x-request-body"] !== undefined)
        .map(([name, example]) => ({
          name,
          body: (example as Json)["x-request-body"],
          pointers: (((example as Json).value as Json).errors as { pointer: string }[]).map((e) => e.pointer),
        })),
    );
    const security = (op.security ?? doc.security ?? []) as Record<string, string[]>[];
    const problemTypes = new Set<string>();
    const seenRefs = new Set<string>();
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(collect);
      if (!node || typeof node !== "object") return;
      const { $ref, properties } = node as Json;
      if (typeof $ref === "string" && !seenRefs.has($ref)) {
        seenRefs.add($ref);
        collect(resolve($ref));
      }
      const type = properties?.type?.enum?.[0];
      if (typeof type === "string" && typeof properties?.status?.enum?.[0] === "number") problemTypes.add(type);
      Object.values(node as Json).forEach(collect);
    };
    collect(op.responses);
    return {
      operationId: op.operationId as string,
      slug: kebab(op.operationId as string),
      method: method.toUpperCase(),
      path,
      onAuthServer: JSON.stringify(op.servers ?? []).includes("{auth_url}"),
      scopes: security.flatMap((requirement) => Object.values(requirement).flat()),
      section: sectionOf(op.description as string | undefined),
      query,
      ...(body ? { body } : {}),
      statuses,
      ...(limitKiB ? { bodyLimitBytes: Number(limitKiB) * 1024 } : {}),
      successExamples,
      problemTypes: [...problemTypes],
      invalidExamples,
    };
  }

  const tokenOperation = operations.find((o) => o.onAuthServer);
  if (!tokenOperation) throw new Error("the OpenAPI document has no operation on {auth_url}");
  const tokenDoc = doc.paths[tokenOperation.path][tokenOperation.method.toLowerCase()] as Json;
  const scopes = Object.values((doc.components.securitySchemes ?? {}) as Json).flatMap((scheme) =>
    Object.values(((scheme as Json).flows ?? {}) as Json).flatMap((flow) => Object.keys(((flow as Json).scopes ?? {}) as Json)),
  );

  // A problem schema fixes its type and status with one-member enums (ProblemOf in spec/models/errors.tsp).
  const problems = new Map<string, { type: string; status: number }>();
  for (const schema of Object.values(doc.components.schemas as Json)) {
    const type = (schema as Json).properties?.type?.enum?.[0];
    const status = (schema as Json).properties?.status?.enum?.[0];
    if (typeof type === "string" && typeof status === "number") problems.set(type.split(":").pop()!, { type, status });
  }

  function violations(op: Operation, response: ResponseSeen): string[] {
    const { status } = response;
    const key = [String(status), `${String(status)[0]}XX`, "default"].find((k) => k in doc.paths[op.path][op.method.toLowerCase()].responses);
    if (!key) return [`status ${status} is not declared for ${op.operationId} (declared: ${op.statuses.join(", ")})`];
    const declared = doc.paths[op.path][op.method.toLowerCase()].responses[key] as Json;
    const responsePointer = [ "paths", op.path, op.method.toLowerCase(), "responses", key ] as const;
    const out: string[] = [];
    for (const [name, header] of Object.entries((declared.headers ?? {}) as Json)) {
      const raw = response.headers[name.toLowerCase()];
      const value = Array.isArray(raw) ? raw.join(", ") : raw;
      if (value === undefined) {
        if ((header as Json).required) out.push(`required header ${name} is missing`);
        continue;
      }
      const type = (header as Json).schema?.type;
      const typed = type === "integer" || type === "number" ? (/^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value) : value;
      const validate = validatorAt(pointerOf(...responsePointer, "headers", name, "schema"));
      if (!validate(typed)) out.push(...describeSchemaErrors(validate.errors).map((e) => `header ${name}: ${e.replace(/^\/: /, "")}`));
    }
    const content = (declared.content ?? {}) as Json;
    if (Object.keys(content).length === 0) return out;
    const mediaType = mediaTypeOf(response.headers["content-type"]);
    if (!(mediaType in content)) {
      return [...out, `Content-Type ${mediaType || "(none)"} is not declared for ${status} (declared: ${Object.keys(content).join(", ")})`];
    }
    if (!isJsonMediaType(mediaType)) return out;
    // RFC 8259 §8.1: JSON is UTF-8; a charset parameter naming anything else tells clients to decode it wrongly.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(String(response.headers["content-type"]))?.[1];
    if (charset !== undefined && charset.toLowerCase() !== "utf-8") return [...out, `Content-Type names charset=${charset}: JSON is UTF-8, and a client decoding the ${mediaType} body as ${charset} reads other characters (RFC 8259 §8.1)`];
    // RFC 8259 §8.1: JSON sent over a network has no byte order mark (a lenient parser skips it; a strict one fails).
    if (response.text.startsWith("\uFEFF")) return [...out, `the ${mediaType} body starts with a byte order mark (U+FEFF), which JSON sent over a network must not have (RFC 8259 §8.1)`];
    let body: unknown;
    try {
      body = JSON.parse(response.text);
    } catch {
      return [...out, `the ${mediaType} body is not JSON: ${JSON.stringify(response.text.slice(0, 120))}`];
    }
    const validate = validatorAt(pointerOf(...responsePointer, "content", mediaType, "schema"));
    if (!validate(body)) out.push(...describeSchemaErrors(validate.errors).map((e) => `body ${e}`));
    if (mediaType === "application/problem+json" && (body as Json | null)?.status !== status) {
      out.push(`problem status ${JSON.stringify((body as Json | null)?.status)} is not the response status ${status}`);
    }
    return out;
  }

  return {
    doc,
    operations,
    tokenOperation,
    failedAuthThrottle: tokenDoc["x-failed-authentication-throttle"] as Contract["failedAuthThrottle"],
    liveTokensPerClient: (tokenDoc["x-live-tokens-per-client"] as { max?: number } | undefined)?.max,
    apiOperations: operations.filter((o) => o.scopes.length > 0),
    scopes,
    problem(slug) {
      const problem = problems.get(slug);
      if (!problem) throw new Error(`the OpenAPI document has no problem schema of type …:${slug}`);
      return problem;
    },
    oauthErrorStatus(code) {
      const responses = tokenDoc.responses as Json;
      const status = Object.keys(responses).find((s) => new RegExp(`\\b${code}\\b`).test(((responses[s] as Json).description as string) ?? ""));
      if (!status) throw new Error(`no response of the token operation names the error ${code}`);
      return Number(status);
    },
    resolve,
    validatorAt,
    violations,
  };
}

/** A pointer in a problem's `errors` names the faulty member itself or a member inside it (D13: `/events/1` for a repeated event), never the object that holds it. */
export const namesPointer = (problem: Json | undefined, pointer: string): boolean =>
  pointer === "" ||
  ((problem?.errors ?? []) as { pointer?: unknown }[]).some((e) => typeof e.pointer === "string" && (e.pointer === pointer || e.pointer.startsWith(`${pointer}/`)));
