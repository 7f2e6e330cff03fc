// Typed webhook events: the discriminated union over `event`, and parsing of a delivery body.
import type { components } from "../../../generated/types/api.js";
import * as validators from "../../../generated/sdk/validators.js";
import { describeSchemaErrors, eventNames, eventSchemaName, type EventName, type SchemaError } from "./contract.js";
import type { Payload } from "./signing.js";

/** Any of the eight events; `switch (event.event)` narrows `data`. */
export type WebhookEvent = components["schemas"]["WebhookEvent"];

/** The envelope of one event, e.g. `EventOf<"lead.created">`. */
export type EventOf<N extends EventName> = Extract<WebhookEvent, { event: N }>;

export type ParseEventResult =
  | { ok: true; event: WebhookEvent }
  | {
      ok: false;
      /** One sentence: what is wrong. */
      error: string;
      /** Each schema violation as `pointer: message`. */
      issues: string[];
    };

/** A validator compiled from the generated JSON Schema at generate time (Ajv standalone code). */
interface Validator {
  (value: unknown): boolean;
  errors?: SchemaError[] | null;
}

const validatorOf = (schemaName: string) => (validators as unknown as Record<string, Validator>)[schemaName]!;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses a delivery body (verify its signature first, on these same bytes) and validates it
 * against the event's JSON Schema. Never throws.
 */
export function parseEvent(rawBody: Payload): ParseEventResult {
  let text: string;
  try {
    text = typeof rawBody === "string" ? rawBody : strictUtf8.decode(rawBody);
  } catch {
    // Bytes in another encoding would be read with U+FFFD in their place: data lost without a word.
    return { ok: false, error: "The body is not UTF-8 (a delivery's body is UTF-8 JSON).", issues: [] };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `The body is not JSON: ${(error as Error).message}`, issues: [] };
  }
  const validate = validatorOf("WebhookEvent");
  if (validate(value)) return { ok: true, event: value as WebhookEvent };
  const name = (value as { event?: unknown } | null)?.event;
  // The union reports every branch; the branch named by `event` tells what is actually wrong.
  const known = eventNames.includes(name as EventName);
  const branch = known ? validatorOf(eventSchemaName(name as EventName)) : undefined;
  if (branch) branch(value);
  const issues = describeSchemaErrors(branch ? branch.errors : validate.errors);
  const what = known ? `a valid ${String(name)} event` : "an event: `event` is not one of the eight event names";
  return { ok: false, error: `The body is not ${what}.`, issues };
}


const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * Random bytes drawn 4 KiB at a time: a call of getRandomValues costs far more than 16 bytes of it
 * (measured: 2.5% of a server's main thread making an id per Control API trigger).
 */
const randomPool = new Uint8Array(4096);
let randomUsed = randomPool.length;

/** A new envelope id: `evt_` and a ULID (48-bit time, 80 random bits), so ids sort by creation time. */
export function newEventId(now: number = Date.now()): string {
  let id = "";
  for (let t = now, i = 0; i < 10; i++, t = Math.floor(t / 32)) id = CROCKFORD[t % 32]! + id;
  if (randomUsed + 16 > randomPool.length) {
    crypto.getRandomValues(randomPool);
    randomUsed = 0;
  }
  // Each byte's low 5 bits: uniform, as 256 is a multiple of 32.
  for (let i = 0; i < 16; i++) id += CROCKFORD[randomPool[randomUsed++]! % 32];
  return `evt_${id}`;
}
