// Proof of the compatibility gate (issue 12, item 4): every mutation of test/compat/mutations.json is
// applied to a copy of spec/, the gate compares it with spec/ as it is, and the test fails when the
// changes found break a different set of consumers than the catalogue says, or the verdict differs.
// TypeSpec is compiled in-process (the compiler loads once); compiled contracts are cached by content.
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gate, loadContract, scratchDir, type Contract } from "../../src/compat/index.js";
import { packageRoot } from "../../src/paths.js";

interface Edit {
  file: string;
  find: string;
  replace: string;
  all?: boolean;
  regex?: boolean;
}
interface Mutation {
  name: string;
  edits: Edit[];
  /** Edits to the base instead of spec/ as it is (to show what a deprecation allows later). */
  base?: Edit[];
  breaks: string[];
  allowed: boolean;
  kinds?: string[];
  /** How many changes the gate reports, where that is the point (one change is not reported per use). */
  count?: number;
  deprecation?: boolean;
}

const mutations = JSON.parse(readFileSync(path.join(import.meta.dirname, "mutations.json"), "utf8")) as Mutation[];
// Removal dates in the catalogue are 2020 (passed) and 2099 (far off): any day in between gives the same verdicts.
const TODAY = "2026-06-01";
const scratch: string[] = [];

/** A copy of spec/ with the edits applied; an edit that finds nothing fails (the catalogue went stale). */
function mutatedSpec(edits: Edit[]): string {
  const dir = scratchDir();
  scratch.push(dir);
  const spec = path.join(dir, "spec");
  cpSync(path.join(packageRoot, "spec"), spec, { recursive: true });
  for (const edit of edits) {
    const file = path.join(spec, edit.file);
    const text = readFileSync(file, "utf8");
    const pattern = edit.regex ? new RegExp(edit.find, "g") : undefined;
    const count = pattern ? (text.match(pattern) ?? []).length : text.split(edit.find).length - 1;
    if (count === 0 || (!edit.all && count > 1)) throw new Error(`${edit.file}: ${JSON.stringify(edit.find)} found ${count} times`);
    const next = pattern ? text.replace(pattern, edit.replace) : edit.all ? text.split(edit.find).join(edit.replace) : text.replace(edit.find, () => edit.replace);
    writeFileSync(file, next);
  }
  return spec;
}

let base: Contract;
beforeAll(async () => {
  base = await loadContract(path.join(packageRoot, "spec"));
}, 120_000);
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe("compatibility gate on the mutation catalogue", () => {
  it("has at least 30 mutations with distinct names", () => {
    expect(mutations.length).toBeGreaterThanOrEqual(30);
    expect(new Set(mutations.map((m) => m.name)).size).toBe(mutations.length);
  });

  it("finds no change between spec/ and an unchanged copy", async () => {
    const report = gate(base, await loadContract(mutatedSpec([])), "spec", TODAY);
    expect(report.verdicts).toEqual([]);
    expect(report.passed).toBe(true);
  });

  it.each(mutations.map((m) => [m.name, m] as const))("%s", async (_name, m) => {
    const from = m.base ? await loadContract(mutatedSpec(m.base)) : base;
    const head = await loadContract(mutatedSpec(m.edits));
    const report = gate(from, head, "spec", TODAY);
    const shown = report.verdicts.map((v) => `[${v.breaks.join(",") || (v.deprecation ? "deprecation" : "compatible")}] ${v.kind} ${v.message} ${v.allowed ? "" : "NOT ALLOWED"}`).join("\n");
    expect(report.verdicts.length, "no change found").toBeGreaterThan(0);
    const breaks = [...new Set(report.verdicts.flatMap((v) => v.breaks))].sort();
    expect(breaks, shown).toEqual([...m.breaks].sort());
    expect(report.passed, shown).toBe(m.allowed);
    for (const kind of m.kinds ?? []) expect(report.verdicts.map((v) => v.kind), shown).toContain(kind);
    if (m.count !== undefined) expect(report.verdicts.length, shown).toBe(m.count);
    expect(report.verdicts.some((v) => v.deprecation), shown).toBe(!!m.deprecation);
    // Every change is shown where it is in spec/.
    for (const v of report.verdicts) expect(v.location?.file, `${v.message} has no location`).toMatch(/^spec\//);
  });
});
