// What the generated documents show tools and readers tells the truth (issue 12, items 7 and 8; D35, D36):
// each declared response header's example agrees with the body it comes with, the success example comes
// first, YAML 1.1 readers (PyYAML, Dredd) read the same values, and the 3.0 document says where the
// webhooks are.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { specPaths } from "../../src/paths.js";
import { verifySignature } from "@partner-platform/sdk";

type Json = Record<string, any>;

/** The member of a 201's body whose value ends its `Location` (D35). */
const createdId: Record<string, string> = { "/api/v2/webhooks": "webhookID", "/api/v4/requests": "requestID" };

/** Each header's agreement with one body example of its response; a header with no rule here fails. */
const agreement: Record<string, (header: unknown, body: Json, at: { route: string; op: Json }) => void> = {
  "Retry-After": (header, body) => {
    expect(String(header)).toBe(/retry after (\d+) seconds/.exec(body.detail)?.[1]);
  },
  Location: (header, body, { route }) => {
    const member = createdId[route];
    expect(member, `no rule says which member of ${route}'s body Location names`).toBeDefined();
    expect(header).toBe(`${route}/${body[member!]}`);
  },
  "WWW-Authenticate": (header, body, { op }) => {
    if (body.type === "urn:partner-platform:problem:insufficient-scope") {
      const scopes = Object.values(op.security[0] as Json).flat() as string[];
      expect(header).toBe(`Bearer error="insufficient_scope", scope="${scopes.join(" ")}"`);
      expect(body.detail).toContain(scopes[0]);
    } else if (body.type === "urn:partner-platform:problem:unauthenticated") {
      expect(String(header)).toMatch(/^Bearer\b/);
      // The challenge's description is the problem's detail (RFC 6750 section 3).
      const description = /error_description="([^"]*)"/.exec(String(header))?.[1];
      if (description) expect(body.detail).toBe(`${description}.`);
    } else {
      // The token endpoint's invalid_client (RFC 6749 section 5.2): a challenge for the Basic scheme.
      expect(body.error).toBe("invalid_client");
      expect(header).toBe('Basic realm="partner-platform"');
    }
  },
  "Cache-Control": (header) => {
    expect(header).toBe("no-store");
  },
};

function operationsOf(openapi: Json) {
  return Object.entries(openapi.paths as Json).flatMap(([route, item]) =>
    Object.entries(item as Json).map(([method, op]) => ({ route, method, op: op as Json, where: `${method.toUpperCase()} ${route}` })),
  );
}

const mediaExamples = (holder: Json | undefined): Json[] =>
  Object.values((holder?.content ?? {}) as Json).map((media) => (media.examples ?? {}) as Json);

describe.each([
  ["generated/openapi/openapi.yaml", specPaths.openapi],
  ["generated/openapi/openapi-3.0.yaml", specPaths.openapi30],
])("%s", (_name, file) => {
  const text = readFileSync(file, "utf8");
  const openapi = parseYaml(text) as Json;
  const operations = operationsOf(openapi);

  it("gives every response header an example that agrees with each body example of its response", () => {
    let compared = 0;
    for (const { route, op, where } of operations) {
      for (const [status, response] of Object.entries(op.responses as Json)) {
        for (const [name, header] of Object.entries(((response as Json).headers ?? {}) as Json)) {
          const rule = agreement[name];
          expect(rule, `${where} ${status}: no rule compares ${name} with its body`).toBeDefined();
          const bodies = mediaExamples(response as Json).flatMap((examples) => Object.entries(examples));
          // An optional header (403 WWW-Authenticate) goes with the examples that send it: those it agrees with.
          const sent = (header as Json).required ? bodies : bodies.filter(([, e]) => (e.value as Json).type !== "urn:partner-platform:problem:business-forbidden");
          expect(sent.length, `${where} ${status} ${name}: no body example to compare with`).toBeGreaterThan(0);
          for (const [exampleName, example] of sent) {
            try {
              rule!((header as Json).example, example.value as Json, { route, op });
            } catch (error) {
              throw new Error(`${where} ${status} ${name}: example ${exampleName}: ${(error as Error).message}`);
            }
            compared++;
          }
        }
      }
    }
    expect(compared).toBeGreaterThanOrEqual(15);
  });

  it("lists the success example first, in the request and among the answers", () => {
    for (const { op, where } of operations) {
      const successes = new Set(
        Object.entries(op.responses as Json)
          .filter(([status]) => status.startsWith("2"))
          .flatMap(([, response]) => mediaExamples(response as Json).flatMap((examples) => Object.keys(examples))),
      );
      expect(successes.size, `${where} has no success example`).toBeGreaterThan(0);
      for (const examples of mediaExamples(op.requestBody)) {
        expect(successes, `${where}: the request's first example`).toContain(Object.keys(examples)[0]);
      }
    }
  });

  it("compares Location with the created resource (so the rule above is not vacuous)", () => {
    const created = operations.find((o) => o.route === "/api/v2/webhooks")!.op.responses["201"];
    const body = Object.values(mediaExamples(created)[0]!)[0].value as Json;
    expect(() => agreement.Location!("/api/v2/webhooks/300002", body, { route: "/api/v2/webhooks", op: {} })).toThrow();
    expect(() => agreement["Retry-After"]!(1, { detail: "Rate limit exceeded; retry after 30 seconds." }, { route: "", op: {} })).toThrow();
  });

  it("reads the same to a YAML 1.1 reader (PyYAML, Dredd): date-times stay strings", () => {
    expect(parseYaml(text, { version: "1.1" })).toEqual(openapi);
    expect(text).toMatch(/createdAt: "2026-11-22T14:0\d:00Z"/);
  });

  it("gives every parameter an example (Dredd refuses a required URI parameter without one)", () => {
    const parameters = operations.flatMap(({ op, where }) => ((op.parameters ?? []) as Json[]).map((p) => ({ where: `${where} ${p.name}`, p })));
    expect(parameters.map(({ where }) => where)).toContain("GET /api/v2/businesses/search category_id");
    for (const { where, p } of parameters) expect(p.example, where).toBeDefined();
  });
});

describe("the webhooks of the OpenAPI 3.1 document", () => {
  it("give the signature header a real signature of the event's example, with the registration example's secret", () => {
    const openapi = parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json;
    const secret = Object.values(openapi.paths["/api/v2/webhooks"].post.requestBody.content["application/json"].examples as Json)[0].value.secret as string;
    const webhooks = Object.entries(openapi.webhooks as Json);
    expect(webhooks).toHaveLength(8);
    for (const [event, item] of webhooks) {
      const op = (item as Json).post as Json;
      const schema = (op.requestBody.content["application/json"].schema.$ref as string).split("/").pop()!;
      const body = JSON.stringify(openapi.components.schemas[schema].examples[0]);
      const [signature] = op.parameters as Json[];
      expect(verifySignature(body, signature!.example, secret), event).toEqual({ valid: true });
      expect(verifySignature(body, signature!.example, `${secret}x`).valid, event).toBe(false);
    }
  });
});

describe("the OpenAPI 3.0 document", () => {
  it("says where the webhooks are, which OpenAPI 3.0 cannot hold", () => {
    const openapi30 = parseYaml(readFileSync(specPaths.openapi30, "utf8")) as Json;
    const openapi31 = parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json;
    const events = Object.keys(openapi31.webhooks as Json);
    expect(events).toHaveLength(8);
    expect(openapi30.webhooks).toBeUndefined();
    expect(openapi30["x-webhooks-elsewhere"]).toEqual({ openapi: "openapi.yaml#/webhooks", asyncapi: "../../spec/asyncapi.yaml", events });
    for (const event of events) expect(openapi30.info.description).toContain(`\`${event}\``);
    expect(openapi30.info.description).toContain("spec/asyncapi.yaml");
  });
});
