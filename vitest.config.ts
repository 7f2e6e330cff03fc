import { defineConfig } from "vitest/config";

export default defineConfig({
  // Examples import the package by name, as users do; tests run them against src/.
  resolve: { alias: { "partner-platform": new URL("./src/index.ts", import.meta.url).pathname } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
