// Recipes of the README use fixed ports: a test that runs one says plainly when a port is taken, rather
// than failing somewhere inside.
import { createServer } from "node:net";
import { expect } from "vitest";

export async function expectFree(port: number): Promise<void> {
  const probe = createServer();
  const error = await new Promise<Error | undefined>((resolve) => {
    probe.once("error", resolve);
    probe.listen(port, "127.0.0.1", () => resolve(undefined));
  });
  if (!error) await new Promise((resolve) => probe.close(resolve));
  expect(error, `port ${port}, which a README recipe uses, is taken`).toBeUndefined();
}
