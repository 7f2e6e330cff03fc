// The schema → fast-check converter of the API suite: every value it generates for the spec's schemas
// validates (Ajv over the OpenAPI document), every mutation is invalid exactly where it says, and
// schemas outside its subset are refused rather than half-generated.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { loadContract, pointerOf } from "../../conformance/api/contract.js";
import { arbitraryOf, flatten, mutationsOf } from "../../conformance/api/schema-arbitrary.js";
import { fieldErrors } from "../../src/server/contract.js";

const contract = loadContract();
const { resolve } = contract;
const componentNames = Object.keys(contract.doc.components.schemas as object);
const bodies = contract.operations.filter((op) => op.body).map((op) => [op.operationId, op.body!] as const);

describe("arbitraryOf", () => {
  it.each(componentNames.map((n) => [n]))("generates only valid values for components.schemas.%s", (name) => {
    const validate = contract.validatorAt(pointerOf("components", "schemas", name));
    for (const examples of [false, true]) {
      fc.assert(
        fc.property(arbitraryOf({ $ref: `#/components/schemas/${name}` }, resolve, { examples }), (value) => {
          expect(validate(value), JSON.stringify({ value, errors: validate.errors })).toBe(true);
        }),
        { seed: 1, numRuns: 60 },
      );
    }
  });

  it.each(contract.apiOperations.flatMap((op) => op.query.map((q) => [`${op.operationId} ${q.name}`, q] as const)))(
    "generates only valid query values for %s",
    (_name, q) => {
      const validate = contract.validatorAt(q.schemaPointer);
      fc.assert(fc.property(arbitraryOf(q.schema, resolve, { examples: true }), (v) => validate(v)), { seed: 1, numRuns: 100 });
    },
  );

  it("is deterministic for a seed, and mixes the schema's examples in", () => {
    const arbitrary = arbitraryOf({ $ref: "#/components/schemas/ServiceRequestInput" }, resolve, { examples: true });
    const first = fc.sample(arbitrary, { seed: 7, numRuns: 40 });
    expect(fc.sample(arbitrary, { seed: 7, numRuns: 40 })).toEqual(first);
    const categories = first.map((v) => (v as { categoryID: string }).categoryID);
    expect(categories).toContain("1000123");
    expect(new Set(categories).size).toBeGreaterThan(5);
  });

  it("generates public-looking https URLs, distinct events and short safe e-mail addresses in both letter cases", () => {
    for (const value of fc.sample(arbitraryOf({ $ref: "#/components/schemas/WebhookRegistration" }, resolve), { seed: 3, numRuns: 100 })) {
      const { url, events } = value as { url: string; events: string[] };
      expect(url).toMatch(/^https:\/\/(hooks\.example\.com\/|Hooks\.Example\.com($|\/))/);
      expect(new Set(events).size).toBe(events.length);
    }
    const emails = fc.sample(arbitraryOf({ type: "string", format: "email" }, resolve), { seed: 3, numRuns: 100 }) as string[];
    for (const email of emails) expect(email).toMatch(/^[A-Za-z0-9]+(\.[A-Za-z0-9]+)?@[A-Za-z0-9]+\.example\.com$/);
    // A server that lower-cases what it holds must meet upper-case letters (D17: held as sent).
    expect(emails.filter((email) => /[A-Z]/.test(email)).length).toBeGreaterThan(50);
  });

  it("generates free text with a space at each end, or a decomposed é, about a third of the time each, within its bounds", () => {
    const texts = fc.sample(arbitraryOf({ type: "string", minLength: 1, maxLength: 40 }, resolve), { seed: 3, numRuns: 300 }) as string[];
    const padded = texts.filter((t) => t.startsWith(" ") && t.endsWith(" "));
    const decomposed = texts.filter((t) => t.startsWith("e\u0301"));
    // A server that trims or normalizes what it holds must meet both (D17: held as sent).
    for (const some of [padded, decomposed]) {
      expect(some.length).toBeGreaterThan(60);
      expect(some.length).toBeLessThan(140);
    }
    for (const t of texts) expect([...t].length).toBeGreaterThanOrEqual(1);
    for (const t of texts) expect([...t].length).toBeLessThanOrEqual(40);
  });

  it("generates webhook URLs with capitals in the host about half the time, some without a path", () => {
    const urls = fc.sample(arbitraryOf({ type: "string", format: "uri" }, resolve), { seed: 3, numRuns: 200 }) as string[];
    for (const url of urls) expect(url).toMatch(/^https:\/\/(hooks\.example\.com\/|Hooks\.Example\.com($|\/))/);
    // A server that stores a URL as its parser writes it again must meet one it would write otherwise (D28).
    const rewritten = urls.filter((url) => new URL(url).href !== url);
    expect(rewritten.length).toBeGreaterThan(60);
    expect(urls.some((url) => url === "https://Hooks.Example.com")).toBe(true);
  });

  it("honours bounds, exclusive bounds, const, nullable types and anyOf", () => {
    const schema = {
      type: "object",
      required: ["i", "n", "c", "t", "a"],
      properties: {
        i: { type: "integer", minimum: 3, exclusiveMaximum: 6 },
        n: { type: "number", exclusiveMinimum: 0, maximum: 1 },
        c: { const: "fixed" },
        t: { type: ["string", "null"], maxLength: 2 },
        a: { anyOf: [{ type: "boolean" }, { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 2 }] },
      },
    };
    for (const v of fc.sample(arbitraryOf(schema, resolve), { seed: 5, numRuns: 200 }) as Record<string, any>[]) {
      expect(v.i).toBeGreaterThanOrEqual(3);
      expect(v.i).toBeLessThan(6);
      expect(Number.isInteger(v.i)).toBe(true);
      expect(v.n).toBeGreaterThan(0);
      expect(v.n).toBeLessThanOrEqual(1);
      expect(v.c).toBe("fixed");
      expect(v.t === null || (typeof v.t === "string" && [...v.t].length <= 2)).toBe(true);
      expect(typeof v.a === "boolean" || (Array.isArray(v.a) && v.a.length >= 1 && v.a.length <= 2)).toBe(true);
    }
  });

  it("merges allOf, intersecting enums and bounds, and takes integer over number", () => {
    const problem = flatten({ $ref: "#/components/schemas/ValidationProblem" }, resolve);
    expect(problem.required).toEqual(expect.arrayContaining(["type", "title", "status", "detail"]));
    expect(flatten(problem.properties.type, resolve).enum).toEqual(["urn:partner-platform:problem:validation-failed"]);
    expect(flatten(problem.properties.status, resolve)).toMatchObject({ type: "integer", enum: [422] });
    expect(flatten({ allOf: [{ minLength: 2, maxLength: 9 }, { minLength: 4, maxLength: 5 }] }, resolve)).toMatchObject({ minLength: 4, maxLength: 5 });
  });

  it("refuses keywords and formats outside its subset", () => {
    expect(() => arbitraryOf({ type: "integer", multipleOf: 5 }, resolve)).toThrow('unsupported JSON Schema keyword "multipleOf"');
    expect(() => arbitraryOf({ type: "string", format: "uuid" }, resolve)).toThrow('unsupported format "uuid"');
    expect(() => arbitraryOf({ allOf: [{ pattern: "^a" }, { pattern: "^b" }] }, resolve)).toThrow("two different patterns");
    expect(() => arbitraryOf({ $ref: "#/components/schemas/Nope" }, resolve)).toThrow("unresolved $ref");
  });
});

describe("mutationsOf", () => {
  it.each(bodies)("makes only invalid %s bodies, each failing at its pointer", (_id, body) => {
    const validate = contract.validatorAt(body.schemaPointer);
    fc.assert(
      fc.property(arbitraryOf(body.schema, resolve, { examples: true }), (value) => {
        for (const m of mutationsOf(body.schema, value, resolve)) {
          expect(validate(m.value), `${m.kind} at ${m.pointer} should be invalid: ${JSON.stringify(m.value)}`).toBe(false);
          // Where the reference server points (a missing or unknown member at itself, not at its object).
          const places = fieldErrors(validate, m.value).map((e) => e.pointer);
          expect(places, `${m.kind} at ${m.pointer}`).toContain(m.pointer);
        }
      }),
      { seed: 11, numRuns: 40 },
    );
  });

  it("covers each keyword of the webhook registration", () => {
    const body = contract.apiOperations.find((op) => op.operationId === "registerWebhook")!.body!;
    const example = body.examples["webhook-registered"];
    const kinds = mutationsOf(body.schema, example, resolve).map((m) => `${m.kind} ${m.pointer}`);
    expect(kinds).toEqual(
      expect.arrayContaining([
        "wrong-type ",
        "missing-required /url",
        "pattern /url",
        "too-long /url",
        "format /url",
        "too-few-items /events",
        "duplicate-item /events",
        "not-in-enum /events/0",
        "pattern /businessID",
        "too-short /secret",
        "too-long /secret",
        "extra-member /ulr",
      ]),
    );
  });

  it("adds a misspelt member, one in other letters and one with ~ and / in its name (each with the value of the member it stands for) to each closed object of a body, none to an open one", () => {
    const body = contract.apiOperations.find((op) => op.operationId === "createServiceRequest")!.body!;
    const example = body.examples["request-created"] as { customer: Record<string, unknown> };
    const extra = mutationsOf(body.schema, example, resolve).filter((m) => m.kind === "extra-member");
    // RFC 6901 §3: ~ is written ~0 and / ~1 in a pointer, ~ first.
    expect(extra.map((m) => m.pointer)).toEqual(["/categroyID", "/CATEGORYID", "/categoryID~0~1v2", "/customer/naem", "/customer/NAME", "/customer/name~0~1v2"]);
    expect((extra[3]!.value as typeof example).customer).toEqual({ ...example.customer, naem: example.customer.name });
    expect((extra[4]!.value as typeof example).customer).toEqual({ ...example.customer, NAME: example.customer.name });
    expect((extra[5]!.value as typeof example).customer).toEqual({ ...example.customer, "name~/v2": example.customer.name });
    // The response's customer stays open (D16): nothing to refuse there.
    expect(mutationsOf({ $ref: "#/components/schemas/Customer" }, example.customer, resolve).filter((m) => m.kind === "extra-member")).toEqual([]);
    const clash = { type: "object", properties: { ab: { type: "string" }, ba: { type: "string" } }, additionalProperties: false };
    expect(mutationsOf(clash, { ab: "x", ba: "y" }, resolve).filter((m) => m.kind === "extra-member").map((m) => m.pointer)).toEqual(["/ba_", "/AB", "/ab~0~1v2"]);
  });

  it("varies pattern faults with the value and drops variants the validator accepts", () => {
    const schema = { type: "string", pattern: "^[0-9]{1,19}$" };
    // Arabic-Indic digits: `[0-9]` is ASCII in ECMA-262.
    // Just past the bounded repetition (20 digits), a space in the middle, a space before, a ZIP+4's suffix,
    // a sign for its first digit (what Go's Atoi and Java's parseInt take).
    expect(mutationsOf(schema, "4711", resolve).filter((m) => m.kind === "pattern").map((m) => m.value)).toEqual(["!4711", "4711!", "47111111111111111111", "47 11", "", "4711\n", " 4711", "4711-1234", "+711", "-711", "٤٧١١"]);
    // An enum member with a line feed after it or a space before it: nothing is trimmed (D16).
    expect(mutationsOf({ type: "string", enum: ["lead.created"] }, "lead.created", resolve).filter((m) => m.kind === "not-in-enum").map((m) => m.value)).toEqual(
      expect.arrayContaining(["lead.created\n", " lead.created"]),
    );
    // A phone number: 16 digits, 6 (one short of the lower bound), and a 0 where E.164's country code starts.
    const phone = mutationsOf({ type: "string", pattern: "^\\+[1-9][0-9]{6,14}$" }, "+12125550143", resolve).map((m) => m.value);
    expect(phone).toEqual(expect.arrayContaining(["+1212555014333333", "+121255", "+12125 550143", "+02125550143"]));
    // Other letters break a case-sensitive pattern; a line feed after the value is refused as ECMA-262's `$` does.
    expect(mutationsOf({ type: "string", pattern: "^https://" }, "https://hooks.example.com/a", resolve).map((m) => m.value)).toContain("HTTPS://HOOKS.EXAMPLE.COM/A");
    expect(mutationsOf({ type: "string", enum: ["lead.created"] }, "lead.created", resolve).map((m) => m.value)).toContain("LEAD.CREATED");
    expect(mutationsOf({ type: "string", minLength: 16 }, "a".repeat(16), resolve).map((m) => m.value)).toContain("é".repeat(15));
    // 8 code points, 16 UTF-16 units.
    expect(mutationsOf({ type: "string", minLength: 16 }, "a".repeat(16), resolve).map((m) => m.value)).toContain("😀".repeat(8));
    expect(mutationsOf(schema, "1000123", resolve).map((m) => m.value)).toContain("100012310001231000123");
    const acceptsAll = () => false;
    expect(mutationsOf(schema, "4711", resolve, acceptsAll)).toEqual([]);
  });

  it("breaks an e-mail address as a loose pattern would not see: dots out of place, a space, a line feed after it, a domain label RFC 5321 does not have, 255 characters (D16)", () => {
    const faults = mutationsOf({ type: "string", format: "email", maxLength: 254 }, "jane.doe@example.com", resolve).filter((m) => m.kind === "format").map((m) => String(m.value));
    const long = faults.at(-1)!;
    expect(faults).toEqual([
      "not-an-email",
      "jane.doe..jane.doe@example.com",
      ".jane.doe@example.com",
      "jane.doe.@example.com",
      "jane.doe@example..com",
      "jane.doe jane.doe@example.com",
      "jane.doe@example.com\n",
      "jane.doe@example.com.",
      "jane.doe@under_score.example.com",
      "jane.doe@-example.com",
      long,
    ]);
    // 255 characters, its domain's labels 63 at most: only its length is wrong.
    expect(long).toHaveLength(255);
    expect(long.split("@")[1]!.split(".").every((label) => /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(label) && label.length <= 63)).toBe(true);
    // All but the space and the line feed are what the loose pattern takes (the broken front loose-email-pattern).
    const loose = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;
    expect(faults.filter((f) => loose.test(f))).toHaveLength(8);
  });
});
