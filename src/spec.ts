// Runtime access to the contract: delivery rules from spec/asyncapi.yaml and the JSON Schema
// that TypeSpec emits. Everything that needs a number or a schema reads it from here.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { parse as parseYaml } from "yaml";
import type { components } from "../generated/types/api.js";
import { specPaths } from "./paths.js";

export type EventName = components["schemas"]["EventName"];

/** The machine-readable delivery rules (`x-delivery` of spec/asyncapi.yaml). */
export interface DeliveryRules {
  method: "POST";
  contentType: string;
  signatureHeader: string;
  signatureAlgorithm: "hmac-sha256-hex";
  /** Wait before each retry, counted from the previous failed attempt. */
  retryWaitsSeconds: number[];
  disableAfterConsecutiveFailures: number;
  attemptTimeoutSeconds: number;
  leadExpirySeconds: number;
  disableEmail: { webhookIdHeader: string };
}

let deliveryRules: DeliveryRules | undefined;

export function loadDeliveryRules(): DeliveryRules {
  deliveryRules ??= (parseYaml(readFileSync(specPaths.asyncapi, "utf8")) as { "x-delivery": DeliveryRules })[
    "x-delivery"
  ];
  return deliveryRules;
}

/** The timing rules of certification (`x-conformance` of the Conformance Control API, spec/control/main.tsp). */
export interface ConformanceRules {
  virtualClock: { unansweredAttemptRealSeconds: { min: number; max: number } };
  scaledClock: {
    attemptTimeoutFloorRealSeconds: number;
    tolerance: { earlyRealMs: number; lateFractionOfWait: number; lateRealMs: number };
  };
  dueNowRealSeconds: number;
}

let conformanceRules: ConformanceRules | undefined;

export function loadConformanceRules(): ConformanceRules {
  conformanceRules ??= (parseYaml(readFileSync(specPaths.controlOpenapi, "utf8")) as { "x-conformance": ConformanceRules })[
    "x-conformance"
  ];
  return conformanceRules;
}

function readSchema(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(specPaths.jsonSchemaDir, `${name}.json`), "utf8")) as Record<
    string,
    unknown
  >;
}

/** The eight event names, in the order of the spec. */
export const eventNames: readonly EventName[] = readSchema("EventName").enum as EventName[];

/** JSON Schema file name (without `.json`) of each event's envelope, e.g. `LeadCreatedEvent`. */
export function eventSchemaName(event: EventName): string {
  return `${event
    .split(".")
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join("")}Event`;
}

/** Each event's example envelope, read once: every Control API trigger without `data` uses one. */
const examples = new Map<EventName, unknown>();

/** The example envelope of an event, from its JSON Schema `examples` (a copy the caller may change). */
export function eventExample<N extends EventName>(event: N): Extract<components["schemas"]["WebhookEvent"], { event: N }> {
  let example = examples.get(event);
  if (example === undefined) examples.set(event, (example = (readSchema(eventSchemaName(event)).examples as unknown[])[0]));
  return structuredClone(example) as Extract<components["schemas"]["WebhookEvent"], { event: N }>;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
let ajv: Ajv2020 | undefined;

/** One Ajv (JSON Schema 2020-12) instance holding every file in generated/json-schema, by `$id`. */
export function schemaRegistry(): Ajv2020 {
  if (!ajv) {
    ajv = addFormats(new Ajv2020({ allErrors: true, strict: true }));
    for (const file of readdirSync(specPaths.jsonSchemaDir).filter((f) => f.endsWith(".json"))) {
      ajv.addSchema(JSON.parse(readFileSync(path.join(specPaths.jsonSchemaDir, file), "utf8")) as object);
    }
  }
  return ajv;
}

/** The compiled validator of a generated schema, e.g. `validatorFor("WebhookRegistration")`. */
export function validatorFor(schemaName: string): ValidateFunction {
  const validate = schemaRegistry().getSchema(`${schemaName}.json`);
  if (!validate) throw new Error(`partner-platform: no generated JSON Schema named ${schemaName}`);
  return validate;
}

/** Ajv errors as `pointer: message` lines, e.g. `/data/leadID: must match pattern "^[0-9]{1,19}$"`. */
export function describeSchemaErrors(errors: readonly ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const pointer = e.instancePath || "/";
    const extra =
      e.keyword === "additionalProperties"
        ? ` (${(e.params as { additionalProperty: string }).additionalProperty})`
        : e.keyword === "const"
          ? ` (${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)})`
          : e.keyword === "enum"
            ? ` (${JSON.stringify((e.params as { allowedValues: unknown }).allowedValues)})`
            : "";
    return `${pointer}: ${e.message ?? e.keyword}${extra}`;
  });
}
