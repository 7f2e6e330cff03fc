// The contract facts the library needs at run time, compiled in by `npm run generate` (generated/sdk/)
// rather than read from spec/ files: the library ships no YAML parser and no schema compiler.
import type { components } from "../../../generated/types/api.js";
import { deliveryRules, eventNames as names } from "../../../generated/sdk/delivery.js";

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

/** The delivery rules of the spec. */
export function loadDeliveryRules(): DeliveryRules {
  return deliveryRules as DeliveryRules;
}

/** The eight event names, in the order of the spec. */
export const eventNames: readonly EventName[] = names;

/** JSON Schema file name (without `.json`) of each event's envelope, e.g. `LeadCreatedEvent`. */
export function eventSchemaName(event: EventName): string {
  return `${event
    .split(".")
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join("")}Event`;
}

/** One JSON Schema violation as Ajv reports it (the members used here). */
export interface SchemaError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** Schema errors as `pointer: message` lines, e.g. `/data/leadID: must match pattern "^[0-9]{1,19}$"`. */
export function describeSchemaErrors(errors: readonly SchemaError[] | null | undefined): string[] {
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
