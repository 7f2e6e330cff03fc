// Runtime access to the contract for the tools: the conformance rules and the JSON Schema that TypeSpec
// emits (the delivery rules and event names are the library's: @partner-platform/sdk).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { eventSchemaName, type EventName } from "@partner-platform/sdk";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { parse as parseYaml } from "yaml";
import type { components } from "../generated/types/api.js";
import { specPaths } from "./paths.js";

/** The timing rules of certification (`x-conformance` of the Conformance Control API, spec/control/main.tsp). */
export interface ConformanceRules {
  virtualClock: { unansweredAttemptRealSeconds: { min: number; max: number } };
  scaledClock: {
    minFactor: number;
    attemptTimeoutFloorRealSeconds: number;
    tolerance: { earlyRealMs: number; lateFractionOfWait: number; lateRealMs: number };
  };
  dueNowRealSeconds: number;
  refusedMailRetryRealSeconds: number;
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

/** Each event's example envelope, read once: every Control API trigger without `data` uses one. */
const examples = new Map<EventName, unknown>();

/** The example envelope of an event, from its JSON Schema `examples` (a copy the caller may change). */
export function eventExample<N extends EventName>(event: N): Extract<components["schemas"]["WebhookEvent"], { event: N }> {
  return structuredClone(sharedEventExample(event)) as Extract<components["schemas"]["WebhookEvent"], { event: N }>;
}

/** The example envelope of an event, the one kept for every caller: read it, never change it (eventExample gives a copy). */
export function sharedEventExample(event: EventName): Readonly<components["schemas"]["WebhookEvent"]> {
  let example = examples.get(event);
  if (example === undefined) examples.set(event, (example = (readSchema(eventSchemaName(event)).examples as unknown[])[0]));
  return example as components["schemas"]["WebhookEvent"];
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
