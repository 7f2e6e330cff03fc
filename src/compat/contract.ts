// Loads "the contract" of a spec/ folder for the compatibility gate: the OpenAPI 3.1 document compiled
// from its TypeSpec on a thread of this process (no files written, no CLI spawned), its AsyncAPI document, and where each
// named element is declared, so that every change can be shown at its line in spec/.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { LineCounter, parse as parseYaml, parseDocument } from "yaml";
import { packageRoot } from "../paths.js";
import type { CompileReply, CompileRequest } from "./compile-worker.js";
import { callsTo } from "../worker-calls.js";

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

/** What compile-worker.js posts back: plain data, also what the cache keeps. */
export interface Compiled {
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

/** The TypeSpec thread (compile-worker.js), started on the first compilation and kept for the next ones. */
let compileThread: ReturnType<typeof startCompileThread> | undefined;

function startCompileThread() {
  // execArgv []: without the parent's --import tsx, whose loader would slow the compiler's loading.
  const worker = new Worker(new URL("./compile-worker.js", import.meta.url), { execArgv: [] });
  const thread = callsTo<Omit<CompileRequest, "id">, CompileReply>(worker, "the TypeSpec compiler's thread");
  // A thread that ended is replaced on the next compilation.
  worker.on("exit", () => {
    if (compileThread === thread) compileThread = undefined;
  });
  return thread;
}

/** Compiles a spec folder on the TypeSpec thread (one contract at a time, in the order asked). */
async function compileContract(specDir: string): Promise<Compiled> {
  const reply = await (compileThread ??= startCompileThread()).call({ specDir });
  if ("compiled" in reply) return reply.compiled;
  throw reply.clear ? new CompatError(reply.error) : new Error(reply.error);
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
