// Loads "the contract" of a spec/ folder for the compatibility gate: the OpenAPI 3.1 document compiled
// in-process from its TypeSpec (no files written, no CLI spawned), its AsyncAPI document, and where each
// named element is declared, so that every change can be shown at its line in spec/.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { LineCounter, parse as parseYaml, parseDocument } from "yaml";
import { packageRoot } from "../paths.js";

export type Json = Record<string, any>;

/** A place in spec/: the file relative to the folder that holds spec/, and a 1-based line. */
export interface SpecLocation {
  file: string;
  line: number;
}

export interface Contract {
  specDir: string;
  /** The OpenAPI 3.1 document TypeSpec emits for spec/main.tsp (without the generator's additions). */
  openapi: Json;
  asyncapi: Json;
  /** `info.version` of main.tsp. */
  version: string;
  /** Event name → the component schema of its envelope (from the AsyncAPI payload `$ref`). */
  events: Map<string, string>;
  /** TypeSpec declarations by name: `Model`, `Model.property`, `Enum.member`, `op:name`, `op:name.param`. */
  declarations: Map<string, SpecLocation>;
  /** `#deprecated` messages by the same keys. */
  deprecations: Map<string, string>;
  /** The line of a JSON pointer (segments) in asyncapi.yaml. */
  asyncapiLine(pointer: (string | number)[]): SpecLocation | undefined;
}

export class CompatError extends Error {}

/** The spec folder of a directory: itself when it holds main.tsp, else its spec/ folder. */
export function specDirOf(dir: string): string {
  if (existsSync(path.join(dir, "main.tsp"))) return dir;
  if (existsSync(path.join(dir, "spec", "main.tsp"))) return path.join(dir, "spec");
  throw new CompatError(`${dir}: no main.tsp there or in its spec/ folder`);
}

async function typespec(): Promise<{ compiler: typeof import("@typespec/compiler"); openapi3: typeof import("@typespec/openapi3") }> {
  try {
    return { compiler: await import("@typespec/compiler"), openapi3: await import("@typespec/openapi3") };
  } catch {
    throw new CompatError("compat compiles TypeSpec: install @typespec/compiler and @typespec/openapi3 (a checkout of the spec has them: npm ci)");
  }
}

interface Compiled {
  openapi: Json;
  declarations: [string, SpecLocation][];
  deprecations: [string, string][];
}

/** The TypeSpec versions a compiled contract depends on, beside its sources. */
function toolVersions(): string {
  const version = (name: string) => {
    try {
      return (JSON.parse(readFileSync(path.join(packageRoot, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;
    } catch {
      return "?";
    }
  };
  return `compat-2 ${version("@typespec/compiler")} ${version("@typespec/openapi3")}`;
}

/** SHA-256 of what the compilation reads: the TypeSpec sources and their configuration (paths and contents). */
function typespecHash(specDir: string): string {
  const hash = createHash("sha256");
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  for (const file of walk(specDir).filter((f) => /\.tsp$|tspconfig\.yaml$/.test(f)).sort()) {
    hash.update(path.relative(specDir, file).split(path.sep).join("/")).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex");
}

/**
 * Loads the contract of a spec folder. Compiling TypeSpec takes seconds (most of it loading the compiler),
 * so a compiled contract is kept under node_modules/.cache by the hash of its TypeSpec sources and the
 * TypeSpec versions: the base of a gate, the same on every run, is compiled once. asyncapi.yaml is read
 * on every load.
 */
export async function loadContract(specDir: string, options: { cache?: boolean } = {}): Promise<Contract> {
  const cacheDir = path.join(packageRoot, "node_modules", ".cache", "partner-platform-compat", "contracts");
  const cacheFile = path.join(cacheDir, `${typespecHash(specDir).slice(0, 32)}-${Buffer.from(toolVersions()).toString("hex").slice(0, 40)}.json`);
  let compiled: Compiled | undefined;
  const useCache = options.cache ?? process.env.PARTNER_PLATFORM_COMPAT_CACHE !== "off";
  if (useCache && existsSync(cacheFile)) {
    try {
      compiled = JSON.parse(readFileSync(cacheFile, "utf8")) as Compiled;
    } catch {
      compiled = undefined;
    }
  }
  if (!compiled) {
    compiled = await compileContract(specDir);
    if (useCache) {
      mkdirSync(cacheDir, { recursive: true });
      // Written whole, then renamed: a run that stops half-way leaves no broken entry.
      writeFileSync(`${cacheFile}.${process.pid}`, JSON.stringify(compiled));
      renameSync(`${cacheFile}.${process.pid}`, cacheFile);
    }
  }
  return assemble(specDir, compiled);
}

async function compileContract(specDir: string): Promise<Compiled> {
  const { compiler, openapi3 } = await typespec();
  const main = path.join(specDir, "main.tsp");
  // noEmit: only the in-memory OpenAPI document is needed, which getOpenAPI3 builds from the program.
  const program = await compiler.compile(compiler.NodeHost, main, { noEmit: true });
  const errors = program.diagnostics.filter((d) => d.severity === "error");
  if (errors.length > 0) {
    const text = errors.slice(0, 5).map((d) => compiler.formatDiagnostic(d, { pretty: false, pathRelativeTo: path.dirname(specDir) }).split("\n")[0]);
    throw new CompatError(`${path.relative(process.cwd(), main) || main} does not compile: ${text.join("; ")}`);
  }
  const [record] = await openapi3.getOpenAPI3(program, { "openapi-versions": ["3.1.0"] } as never);
  const openapi = structuredClone((record as { document: Json } | undefined)?.document) as Json | undefined;
  if (!openapi) throw new CompatError(`${main}: no @service to compare`);

  const root = path.dirname(specDir);
  const declarations = new Map<string, SpecLocation>();
  const deprecations = new Map<string, string>();
  const record2 = (key: string, type: Parameters<typeof compiler.getSourceLocation>[0]) => {
    const loc = compiler.getSourceLocation(type);
    if (!loc?.file?.path || loc.isSynthetic) return;
    const { line } = loc.file.getLineAndCharacterOfPosition(loc.pos);
    // Declarations inside the spec folder only: library types stay out.
    if (!path.resolve(loc.file.path).startsWith(path.resolve(specDir))) return;
    declarations.set(key, { file: path.relative(root, loc.file.path), line: line + 1 });
    const deprecated = compiler.getDeprecationDetails(program, type as never);
    if (deprecated) deprecations.set(key, deprecated.message);
  };
  const visit = (ns: import("@typespec/compiler").Namespace): void => {
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

function assemble(specDir: string, compiled: Compiled): Contract {
  const root = path.dirname(specDir);
  const { openapi } = compiled;

  const asyncapiFile = path.join(specDir, "asyncapi.yaml");
  const asyncapiText = readFileSync(asyncapiFile, "utf8");
  const asyncapi = parseYaml(asyncapiText) as Json;
  const lineCounter = new LineCounter();
  const asyncapiDoc = parseDocument(asyncapiText, { lineCounter });
  const events = new Map<string, string>();
  for (const message of Object.values((asyncapi.components?.messages ?? {}) as Record<string, Json>)) {
    const ref = message.payload?.$ref as string | undefined;
    if (typeof message.name === "string" && ref) events.set(message.name, path.basename(ref, ".json"));
  }
  return {
    specDir,
    openapi,
    asyncapi,
    version: String((openapi.info as Json | undefined)?.version ?? "0.0.0"),
    events,
    declarations: new Map(compiled.declarations),
    deprecations: new Map(compiled.deprecations),
    asyncapiLine(pointer) {
      // The deepest node that still exists (a removed key is shown at its parent).
      for (let n = pointer.length; n >= 0; n--) {
        const node = asyncapiDoc.getIn(pointer.slice(0, n), true) as { range?: [number, number, number] } | undefined;
        const pair = n > 0 ? findKeyRange(asyncapiDoc, pointer.slice(0, n)) : undefined;
        const offset = pair ?? node?.range?.[0];
        if (offset !== undefined) return { file: path.relative(root, asyncapiFile), line: lineCounter.linePos(offset).line };
      }
      return undefined;
    },
  };
}

/** The offset of the key of a map entry, so a location points at `key:` rather than its value. */
function findKeyRange(doc: ReturnType<typeof parseDocument>, pointer: (string | number)[]): number | undefined {
  const parent = doc.getIn(pointer.slice(0, -1), true) as { items?: { key?: { value?: unknown; range?: [number, number, number] }; range?: [number, number, number] }[] } | undefined;
  const last = pointer[pointer.length - 1];
  const items = parent?.items;
  if (!items) return undefined;
  if (typeof last === "number") return (items[last] as { range?: [number, number, number] } | undefined)?.range?.[0];
  return items.find((item) => item.key?.value === last)?.key?.range?.[0];
}
