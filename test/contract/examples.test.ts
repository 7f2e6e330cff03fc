// Every example in the spec validates against its schema; the examples of 4xx answers that carry an
// invalid request must fail exactly where their problem says (so they cannot drift either).
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { specPaths } from "../../src/paths.js";
import { fieldErrors } from "../../src/server/contract.js";
import { eventNames, eventSchemaName } from "@partner-platform/sdk";
import { validatorFor } from "../../src/spec.js";

type Json = Record<string, any>;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface ExampleCase {
  where: string;
  schema: Json;
  value: unknown;
}

function describeExamples(name: string, file: string, partnerApi: boolean): void {
  const openapi = parseYaml(readFileSync(file, "utf8")) as Json;
  // OpenAPI keywords (discriminator, format int32) are not JSON Schema vocabulary: not strict.
  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
  ajv.addSchema({ ...openapi, $id: "openapi" });
  // An inline schema (e.g. a 403 whose problem is one of two) refers into the document: resolve it there.
  const validatorOf = (schema: Json) =>
    typeof schema.$ref === "string"
      ? ajv.getSchema(`openapi${schema.$ref}`)!
      : ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/')) as Json);


  const operations = Object.entries(openapi.paths as Json).flatMap(([route, item]) =>
    Object.entries(item as Json).map(([method, op]) => ({ route, method, op: op as Json })),
  );

  function requestExamples(op: Json): Map<string, { schema: Json; value: unknown }> {
    const out = new Map<string, { schema: Json; value: unknown }>();
    for (const media of Object.values((op.requestBody?.content ?? {}) as Json)) {
      for (const [name, example] of Object.entries((media.examples ?? {}) as Json)) {
        out.set(name, { schema: media.schema, value: example.value });
      }
    }
    return out;
  }

  function responseExamples(op: Json): { status: string; name: string; schema: Json; value: any }[] {
    return Object.entries(op.responses as Json).flatMap(([status, response]) =>
      Object.values(((response as Json).content ?? {}) as Json).flatMap((media) =>
        Object.entries((media.examples ?? {}) as Json).map(([name, example]) => ({
          status,
          name,
          schema: media.schema,
          value: example.value,
        })),
      ),
    );
  }

  const cases: ExampleCase[] = [];
  for (const { route, method, op } of operations) {
    const requests = requestExamples(op);
    for (const r of responseExamples(op)) {
      cases.push({ where: `${method.toUpperCase()} ${route} ${r.status} ${r.name} (response)`, ...r });
      const request = requests.get(r.name);
      // A 422 example carries the invalid request that causes it; it is checked separately below.
      if (request && r.status !== "422") {
        cases.push({ where: `${method.toUpperCase()} ${route} ${r.name} (request)`, ...request });
      }
    }
  }
  // Every parameter and response header has an example (D36: mocks and Dredd send them), valid like any other.
  for (const { route, method, op } of operations) {
    for (const p of (op.parameters ?? []) as Json[]) {
      cases.push({ where: `${method.toUpperCase()} ${route} ${p.in} parameter ${p.name}`, schema: p.schema, value: p.example });
    }
    for (const [status, response] of Object.entries(op.responses as Json)) {
      for (const [name, header] of Object.entries(((response as Json).headers ?? {}) as Json)) {
        cases.push({ where: `${method.toUpperCase()} ${route} ${status} header ${name}`, schema: header.schema, value: header.example });
      }
    }
  }
  for (const [name, schema] of Object.entries(openapi.components.schemas as Json)) {
    for (const [i, value] of ((schema.examples ?? []) as unknown[]).entries()) {
      cases.push({ where: `components.schemas.${name}.examples[${i}]`, schema: { $ref: `#/components/schemas/${name}` }, value });
    }
  }

  describe(`examples in ${name}`, () => {
    if (partnerApi) it("cover a success and every declared error of every operation", () => {
      for (const { route, method, op } of operations) {
        const withExamples = new Set(responseExamples(op).map((r) => r.status));
        expect([...withExamples].sort(), `${method} ${route}`).toEqual(Object.keys(op.responses).sort());
      }
    });

    it.each(cases.map((c) => [c.where, c] as const))("%s validates against its schema", (_where, c) => {
      expect(c.value, "no example").toBeDefined();
      const validate = validatorOf(c.schema);
      expect(validate(c.value), JSON.stringify(validate.errors)).toBe(true);
    });

    it("give problems whose status is the response's status", () => {
      for (const { op } of operations) {
        for (const r of responseExamples(op).filter((r) => r.status.startsWith("4") && r.value.status !== undefined)) {
          expect(r.value.status, r.name).toBe(Number(r.status));
        }
      }
    });

    // The Control API's 422 also covers `data` that fails the event's schema, which its request schema cannot see.
    if (partnerApi) it("make each 422 example's request fail exactly at the pointers its problem lists", () => {
      let checked = 0;
      for (const { route, op } of operations) {
        const requests = requestExamples(op);
        for (const r of responseExamples(op).filter((r) => r.status === "422")) {
          // The invalid body goes with the 422 answer's example (x-request-body), where linters do not validate it (D61).
          expect(requests.has(r.name), `${route} ${r.name}: an invalid request example would fail Spectral`).toBe(false);
          const schema = (Object.values(op.requestBody.content as Json)[0] as Json).schema as Json;
          const request = { schema, value: (op.responses["422"].content["application/problem+json"].examples as Json)[r.name]["x-request-body"] };
          expect(request.value, `${route} ${r.name} has no x-request-body`).toBeDefined();
          const validate = validatorOf(request.schema);
          expect(validate(request.value), `${route} ${r.name} request should be invalid`).toBe(false);
          // Pointers as the reference server gives them: a missing or unknown member at itself.
          const failing = new Set(fieldErrors(validate, request.value).map((e) => e.pointer));
          expect([...failing].sort()).toEqual(r.value.errors.map((e: { pointer: string }) => e.pointer).sort());
          checked++;
        }
      }
      expect(checked).toBeGreaterThan(0);
    });
  });
}

describeExamples("the API (generated/openapi/openapi.yaml)", specPaths.openapi, true);
describeExamples("the Control API (generated/control/openapi.yaml)", specPaths.controlOpenapi, false);

describe("event examples (generated JSON Schema)", () => {
  it.each(eventNames.map((n) => [n] as const))("%s has one example that validates and names the event", (name) => {
    const schema = JSON.parse(
      readFileSync(`${specPaths.jsonSchemaDir}/${eventSchemaName(name)}.json`, "utf8"),
    ) as { examples: { event: string }[] };
    expect(schema.examples).toHaveLength(1);
    expect(schema.examples[0]!.event).toBe(name);
    const validate = validatorFor("WebhookEvent");
    expect(validate(schema.examples[0]), JSON.stringify(validate.errors)).toBe(true);
  });
});
