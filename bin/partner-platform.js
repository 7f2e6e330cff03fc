#!/usr/bin/env node
// The `partner-platform` command. From the installed package it runs the CLI built at pack time
// (dist/); in a checkout of the repository, which has the TypeScript sources and no build step after
// `npm ci`, it runs the sources through tsx, with tsconfig.json's paths (@partner-platform/sdk → packages/sdk/src).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const source = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
  await import(source.href);
} else {
  await import("../dist/src/cli/main.js");
}
