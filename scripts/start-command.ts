// The command `npm start` runs (package.json), as file and arguments for spawn(), so tests and benchmarks
// start the mock exactly as a user does, without npm in between.
import { readFileSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");

export function startCommand(...extraArgs: string[]): { file: string; args: string[]; cwd: string } {
  const { scripts } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { scripts: { start: string } };
  const [program, ...args] = scripts.start.split(" ");
  // Plain node: the tsx CLI relays a Ctrl-C to its child and, if the child is slow to acknowledge it
  // (within 30 ms), kills it and exits with 130.
  if (program !== "node") throw new Error(`npm start should run node directly, not ${program}`);
  return { file: process.execPath, args: [...args, ...extraArgs], cwd: root };
}
