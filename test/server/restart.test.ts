// Durability: a restart in the middle of a retry schedule resumes it at the right times, with no
// attempt lost or repeated; an attempt cut off by the stop is made again (at-least-once).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { loadDeliveryRules } from "@partner-platform/sdk";
import { control, envelope, register, storageBackends } from "./helpers.js";

const [firstWait, secondWait] = loadDeliveryRules().retryWaitsSeconds as [number, number];

describe.each(storageBackends())("restart, $name storage", ({ postgres }) => {
  let receiver: Receiver;
  let dataDir: string;
  let pg: TestPostgres | undefined;
  let storage: { dataDir?: string; databaseUrl?: string };
  beforeAll(async () => {
    receiver = await startReceiver();
    dataDir = await mkdtemp(path.join(tmpdir(), "reference-db-"));
    pg = postgres ? await startTestPostgres() : undefined;
  });
  afterAll(async () => {
    await receiver.close();
    pg?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** Fresh storage per test: a data directory, or a database of the throwaway server. */
  async function freshStorage(name: string) {
    storage = pg ? { databaseUrl: await pg.createDatabase(name) } : { dataDir: path.join(dataDir, name) };
  }

  // A long real attempt timeout: an attempt in flight when the test stops the server is still in flight.
  const start = (clockStart?: number) =>
    startServer({
      ...storage,
      clock: { mode: "virtual", start: clockStart },
      conformance: true,
      allowPrivateWebhooks: true,
      webhookCa: receiver.pki.caCert,
      virtualAttemptTimeoutMs: 60_000,
      log: () => undefined,
    });

  it("resumes the schedule from the database", async () => {
    await freshStorage("resume");
    receiver.script("restart", [], answers.status(500));
    const first = await start();
    await register(first, receiver.url("restart"), ["review.created"]);
    await control(first).trigger("review.created", "4711");
    await control(first).advance(0);
    await control(first).advance(firstWait);
    expect(receiver.at("restart")).toHaveLength(2);
    const stoppedAt = first.clock.now();
    await first.close();

    const second: RunningServer = await start(stoppedAt);
    try {
      await control(second).advance(secondWait - 1);
      expect(receiver.at("restart")).toHaveLength(2);
      await control(second).advance(1);
      expect(receiver.at("restart")).toHaveLength(3);
      expect(new Set(receiver.at("restart").map((d) => envelope(d.body).id)).size).toBe(1);
    } finally {
      await second.close();
    }
  });

  it("makes an attempt that a stop cut off again after the restart, and nothing else", async () => {
    await freshStorage("in-flight");
    receiver.script("cut-off", [answers.hang], answers.ok);
    const first = await start();
    await register(first, receiver.url("cut-off"), ["payment.received"]);
    await control(first).trigger("payment.received", "4711");
    const advancing = control(first).advance(0).catch(() => undefined);
    await receiver.waitFor((d) => d.some((x) => x.endpoint === "cut-off"), 10_000, "the attempt that hangs");
    const stoppedAt = first.clock.now();
    await first.close();
    await advancing;

    const second = await start(stoppedAt);
    try {
      await control(second).advance(0);
      expect(receiver.at("cut-off")).toHaveLength(2);
      await control(second).advance(2 * 24 * 3600);
      expect(receiver.at("cut-off")).toHaveLength(2);
      expect(new Set(receiver.at("cut-off").map((d) => envelope(d.body).id)).size).toBe(1);
    } finally {
      await second.close();
    }
  });
});
