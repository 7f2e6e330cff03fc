// D16: every object of a JSON request body is closed (an unknown member is refused), while responses,
// events and the token form stay open (clients and receivers ignore members they do not know; RFC 6749
// ignores unknown parameters). Checked in each generated form: OpenAPI 3.1, OpenAPI 3.0 and JSON Schema.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { isClosed } from "../../conformance/api/schema-arbitrary.js";
import { specPaths } from "../../src/paths.js";

type Json = Record<string, any>;

/** Every object schema reachable from `schema`, by where it is (`$ref`s followed once each). */
function objectsUnder(doc: Json, schema: Json, at: string, out = new Map<string, Json>()): Map<string, Json> {
  if (typeof schema.$ref === "string") {
    const name = schema.$ref.split("/").pop()!;
    if (!out.has(name)) objectsUnder(doc, doc.components.schemas[name], name, out);
    return out;
  }
  if (schema.type === "object" || schema.properties) out.set(at, schema);
  for (const [key, member] of Object.entries((schema.properties ?? {}) as Json)) objectsUnder(doc, member, `${at}.${key}`, out);
  for (const part of [...(schema.allOf ?? []), ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])] as Json[]) objectsUnder(doc, part, at, out);
  if (schema.items) objectsUnder(doc, schema.items, `${at}[]`, out);
  return out;
}

interface Bodies {
  closed: Map<string, Json>;
  open: Map<string, Json>;
}

function bodiesOf(doc: Json): Bodies {
  const closed = new Map<string, Json>();
  const open = new Map<string, Json>();
  const operations = (section: Json | undefined) =>
    Object.values(section ?? {}).flatMap((item) => Object.values(item as Json) as Json[]);
  for (const op of operations(doc.paths)) {
    for (const [mediaType, media] of Object.entries((op.requestBody?.content ?? {}) as Json)) {
      objectsUnder(doc, media.schema, op.operationId, mediaType === "application/json" ? closed : open);
    }
    for (const response of Object.values(op.responses as Json)) {
      for (const media of Object.values(((response as Json).content ?? {}) as Json)) objectsUnder(doc, media.schema, op.operationId, open);
    }
  }
  // The events, as the bodies of deliveries.
  for (const op of operations(doc.webhooks)) {
    for (const media of Object.values((op.requestBody?.content ?? {}) as Json)) objectsUnder(doc, media.schema, op.operationId, open);
  }
  return { closed, open };
}

/** Where the objects are that are (or are not) closed. */
const placesOf = (objects: Map<string, Json>, closed: boolean) =>
  [...objects].filter(([, schema]) => isClosed(schema) === closed).map(([place]) => place).sort();

// OpenAPI 3.0 has no `webhooks` section: the events are only in 3.1 (and in the JSON Schema files).
describe.each([
  ["OpenAPI 3.1", specPaths.openapi, ["Customer", "TokenRequest", "LeadCreatedEvent"]],
  ["OpenAPI 3.0", specPaths.openapi30, ["Customer", "TokenRequest"]],
])("closed request bodies in %s (D16)", (_version, file, someOpen) => {
  const { closed, open } = bodiesOf(parseYaml(readFileSync(file, "utf8")) as Json);

  it("closes every object of the JSON request bodies", () => {
    expect([...closed.keys()].sort()).toEqual(["CustomerInput", "ServiceRequestInput", "WebhookRegistration"]);
    expect(placesOf(closed, false)).toEqual([]);
  });

  it("leaves responses, events and the token form open", () => {
    expect([...open.keys()]).toEqual(expect.arrayContaining(someOpen));
    expect(placesOf(open, true)).toEqual([]);
  });
});

describe("closed request bodies in the JSON Schema files (D16)", () => {
  it("closes exactly the request bodies' objects", () => {
    const closedFiles = readdirSync(specPaths.jsonSchemaDir)
      .filter((f) => isClosed(JSON.parse(readFileSync(path.join(specPaths.jsonSchemaDir, f), "utf8")) as Json))
      .sort();
    expect(closedFiles).toEqual(["CustomerInput.json", "ServiceRequestInput.json", "WebhookRegistration.json"]);
  });
});
