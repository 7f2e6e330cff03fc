import { defineConfig } from "vitest/config";

export default defineConfig({
  // Examples import the packages by name, as users do; tests run them against the sources (as tsconfig.json's paths).
  resolve: {
    alias: {
      "partner-platform": new URL("./src/index.ts", import.meta.url).pathname,
      "@partner-platform/sdk": new URL("./packages/sdk/src/index.ts", import.meta.url).pathname,
    },
  },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
