// Dredd, the contract tester teams point at an OpenAPI 3.0 file, run as a user runs it against the
// reference server (`partner-platform serve`): it loads the 3.0 document (every parameter has an example)
// and every transaction it can send passes, the media types included (D36). Its hooks
// (dredd-hooks.cjs) do only what Dredd cannot: an OAuth token, a form-encoded body, error requests.
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { packageRoot, specPaths } from "../../src/paths.js";

const run = promisify(execFile);

describe("Dredd against the reference server", () => {
  it("passes every transaction it sends, and sends one per operation's success", async () => {
    const server = spawn(process.execPath, ["--import", "tsx", path.join(packageRoot, "src/cli/main.ts"), "serve", "--port", "0", "--log-level", "silent"], {
      cwd: packageRoot,
    });
    try {
      let out = "";
      server.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
      const origin = await new Promise<string>((resolve, reject) => {
        server.stdout.on("data", () => {
          const m = /token endpoint \(auth_url\): (http:\/\/\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        server.once("exit", (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
      });
      const dredd = path.join(packageRoot, "node_modules/dredd/bin/dredd");
      const hooks = path.join(import.meta.dirname, "dredd-hooks.cjs");
      const result = await run(process.execPath, [dredd, specPaths.openapi30, origin, `--hookfiles=${hooks}`, "--loglevel=warning", "--color=false"], {
        cwd: packageRoot,
      }).catch((error: { code: number; stdout: string; stderr: string }) => error);
      const output = `${result.stdout}\n${result.stderr}`;
      const verdicts = [...output.matchAll(/^(pass|fail|skip): (\w+ \(\d+\) \S+)/gm)].map((m) => `${m[1]}: ${m[2]!.split("?")[0]}`);
      expect(verdicts.filter((v) => !v.startsWith("skip")), output).toEqual([
        "pass: GET (200) /api/v2/businesses/search",
        "pass: GET (401) /api/v2/businesses/search",
        "pass: POST (201) /api/v2/webhooks",
        "pass: POST (401) /api/v2/webhooks",
        "pass: POST (201) /api/v4/requests",
        "pass: POST (401) /api/v4/requests",
        "pass: POST (200) /oauth2/token",
      ]);
      expect(output).toMatch(/complete: 7 passing, 0 failing, 0 errors, 20 skipped, 27 total/);
      expect("code" in result ? result.code : 0).toBe(0);
    } finally {
      server.kill("SIGINT");
      if (server.exitCode === null) await once(server, "exit");
    }
  }, 120_000);
});
