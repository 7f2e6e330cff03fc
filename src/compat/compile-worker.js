// @ts-check
// The compatibility gate's TypeSpec thread (contract.ts, compileContract): compiles a spec folder's
// main.tsp in memory and posts back its OpenAPI 3.1 document and where each named element is declared.
// Plain JavaScript on purpose: in a checkout the CLI runs through tsx, whose loader hooks add 1–1.5 s to
// loading the TypeSpec compiler's hundreds of modules; this thread starts without them (execArgv: []).
// The compiler loads once per thread and compiles the requests one after another.
import path from "node:path";
import { parentPort } from "node:worker_threads";

/** @typedef {import("./contract.js").Compiled} Compiled */
/** @typedef {import("./contract.js").SpecLocation} SpecLocation */
/** @typedef {{ id: number, specDir: string }} CompileRequest */
/** @typedef {{ id: number, compiled: Compiled } | { id: number, error: string, clear: boolean }} CompileReply */

/** Thrown for what the user fixes (a spec that does not compile, TypeSpec missing): shown as one line. */
class ClearError extends Error {}

/** @type {Promise<{ compiler: typeof import("@typespec/compiler"), openapi3: typeof import("@typespec/openapi3") }> | undefined} */
let loading;
const typespec = () =>
  (loading ??= Promise.all([import("@typespec/compiler"), import("@typespec/openapi3")]).then(
    ([compiler, openapi3]) => ({ compiler, openapi3 }),
    () => {
      throw new ClearError("compat compiles TypeSpec: install @typespec/compiler and @typespec/openapi3 (a checkout of the spec has them: npm ci)");
    },
  ));

/**
 * @param {string} specDir
 * @returns {Promise<Compiled>}
 */
async function compile(specDir) {
  const { compiler, openapi3 } = await typespec();
  const main = path.join(specDir, "main.tsp");
  // noEmit: only the in-memory OpenAPI document is needed, which getOpenAPI3 builds from the program.
  const program = await compiler.compile(compiler.NodeHost, main, { noEmit: true });
  const errors = program.diagnostics.filter((d) => d.severity === "error");
  if (errors.length > 0) {
    const text = errors.slice(0, 5).map((d) => compiler.formatDiagnostic(d, { pretty: false, pathRelativeTo: path.dirname(specDir) }).split("\n")[0]);
    throw new ClearError(`${path.relative(process.cwd(), main) || main} does not compile: ${text.join("; ")}`);
  }
  const [record] = await openapi3.getOpenAPI3(program, /** @type {never} */ ({ "openapi-versions": ["3.1.0"] }));
  const openapi = record && "document" in record ? /** @type {Compiled["openapi"]} */ (record.document) : undefined;
  if (!openapi) throw new ClearError(`${main}: no @service to compare`);

  const root = path.dirname(specDir);
  /** @type {Map<string, SpecLocation>} */
  const declarations = new Map();
  /** @type {Map<string, string>} */
  const deprecations = new Map();
  /** @type {(key: string, type: import("@typespec/compiler").Type) => void} */
  const record2 = (key, type) => {
    const loc = compiler.getSourceLocation(type);
    if (!loc?.file?.path || loc.isSynthetic) return;
    const { line } = loc.file.getLineAndCharacterOfPosition(loc.pos);
    // Declarations inside the spec folder only: library types stay out.
    if (!path.resolve(loc.file.path).startsWith(path.resolve(specDir))) return;
    declarations.set(key, { file: path.relative(root, loc.file.path), line: line + 1 });
    const deprecated = compiler.getDeprecationDetails(program, type);
    if (deprecated) deprecations.set(key, deprecated.message);
  };
  /** @type {(ns: import("@typespec/compiler").Namespace) => void} */
  const visit = (ns) => {
    record2(ns.name, ns);
    for (const m of ns.models.values()) {
      record2(m.name, m);
      for (const p of m.properties.values()) record2(`${m.name}.${p.name}`, p);
    }
    for (const s of ns.scalars.values()) record2(s.name, s);
    for (const e of ns.enums.values()) {
      record2(e.name, e);
      for (const member of e.members.values()) record2(`${e.name}.${member.name}`, member);
    }
    for (const u of ns.unions.values()) if (u.name) record2(u.name, u);
    for (const o of ns.operations.values()) {
      record2(`op:${o.name}`, o);
      for (const p of o.parameters.properties.values()) record2(`op:${o.name}.${p.name}`, p);
    }
    for (const child of ns.namespaces.values()) visit(child);
  };
  for (const ns of program.getGlobalNamespaceType().namespaces.values()) {
    if (ns.name !== "TypeSpec") visit(ns);
  }
  return { openapi, declarations: [...declarations], deprecations: [...deprecations] };
}

const port = /** @type {import("node:worker_threads").MessagePort} */ (parentPort);
/** @type {Promise<unknown>} */
let queue = Promise.resolve();
port.on("message", (/** @type {CompileRequest} */ { id, specDir }) => {
  queue = queue.then(async () => {
    /** @type {CompileReply} */
    let reply;
    try {
      reply = { id, compiled: await compile(specDir) };
    } catch (error) {
      reply = { id, error: error instanceof Error ? error.message : String(error), clear: error instanceof ClearError };
    }
    port.postMessage(reply);
  });
});
