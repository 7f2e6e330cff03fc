import { defineConfig } from "vitest/config";

/**
 * The proofs that every check can fail certify each variant in full: most of the test run, and mostly
 * waiting (a virtual clock's advances, attempt timeouts, lock-outs). Their files run as several projects
 * side by side, a share of the variants each (test/share.ts). Every other file runs after them, one at a
 * time, with the variants judged in real time (a scaled clock's bands): not beside a busy machine.
 */
const proofFiles = ["test/conformance/server-variants.test.ts", "test/conformance/api.test.ts"];
const shares = 3;

export default defineConfig({
  // Examples import the packages by name, as users do; tests run them against the sources (as tsconfig.json's paths).
  resolve: {
    alias: {
      "partner-platform": new URL("./src/index.ts", import.meta.url).pathname,
      "@partner-platform/sdk": new URL("./packages/sdk/src/index.ts", import.meta.url).pathname,
    },
  },
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      ...Array.from({ length: shares }, (_, i) => ({
        extends: true as const,
        test: {
          name: `proofs ${i + 1}/${shares}`,
          include: proofFiles,
          provide: { share: { index: i + 1, of: shares } },
          maxWorkers: shares,
          sequence: { groupOrder: 0 },
        },
      })),
      {
        extends: true as const,
        test: {
          name: "one at a time",
          // server-variants.test.ts again, for its variants on a scaled clock.
          include: ["test/**/*.test.ts"],
          exclude: ["test/conformance/api.test.ts"],
          provide: { share: { realTime: true } },
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
