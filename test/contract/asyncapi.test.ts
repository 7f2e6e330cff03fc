import { readFileSync } from "node:fs";
import { Parser, fromFile } from "@asyncapi/parser";
import { beforeAll, describe, expect, it } from "vitest";
import { specPaths } from "../../src/paths.js";
import { eventNames, eventSchemaName, loadDeliveryRules } from "@partner-platform/sdk";
import path from "node:path";

type ParsedDocument = NonNullable<Awaited<ReturnType<ReturnType<typeof fromFile>["parse"]>>["document"]>;

describe("spec/asyncapi.yaml", () => {
  let document: ParsedDocument;
  let diagnostics: { severity: number; message: string; path: (string | number)[] }[];

  beforeAll(async () => {
    const result = await fromFile(new Parser(), specPaths.asyncapi).parse();
    diagnostics = result.diagnostics as typeof diagnostics;
    document = result.document!;
  });

  it("parses and validates with no errors or warnings", () => {
    // Severity 0 is an error, 1 a warning (spectral's scale).
    const serious = diagnostics.filter((d) => d.severity <= 1).map((d) => `${d.path.join(".")}: ${d.message}`);
    expect(serious).toEqual([]);
    expect(document).toBeDefined();
  });

  it("has one send operation per event, each an HTTP POST", () => {
    const operations = document.operations().all();
    const names = operations.map((op) => op.messages().all()[0]?.name());
    expect(names).toEqual([...eventNames]);
    for (const op of operations) {
      expect(op.action()).toBe("send");
      expect(op.bindings().get("http")?.value()).toMatchObject({ method: loadDeliveryRules().method });
    }
  });

  it("signs every message with the header x-delivery names, as 64 lowercase hex digits", () => {
    const { signatureHeader } = loadDeliveryRules();
    for (const message of document.messages().all()) {
      const headers = message.headers()?.json() as { properties: Record<string, { pattern: string }> };
      expect(headers.properties[signatureHeader]?.pattern).toBe("^[0-9a-f]{64}$");
    }
  });

  it("takes each payload from the JSON Schema that TypeSpec emits, not a copy", () => {
    for (const message of document.messages().all()) {
      const file = path.join(specPaths.jsonSchemaDir, `${eventSchemaName(message.name()! as never)}.json`);
      const emitted = JSON.parse(readFileSync(file, "utf8")) as { $id: string };
      expect(message.payload()?.json()).toMatchObject({ $id: emitted.$id });
    }
  });

  it("states the delivery rules of spec/DECISIONS.md D6 and D7", () => {
    expect(loadDeliveryRules()).toMatchObject({
      method: "POST",
      contentType: "application/json",
      signatureHeader: "X-Service-Signature",
      retryWaitsSeconds: [60, 300, 1800, 7200, 86400],
      disableAfterConsecutiveFailures: 5,
      attemptTimeoutSeconds: 10,
      leadExpirySeconds: 604800,
    });
  });
});
