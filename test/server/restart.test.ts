// Durability: a restart in the middle of a retry schedule resumes it at the right times, with no
// attempt lost or repeated.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { createPartnerClient } from "../../src/client/index.js";
import { loadConfig, startServer, type RunningServer } from "../../src/server/index.js";
import { loadDeliveryRules } from "../../src/spec.js";
import { postgresBinDir, startTestPostgres, type TestPostgres } from "../../scripts/postgres.js";

const hasPostgres = postgresBinDir() !== undefined;
if (!hasPostgres && process.env.CI) throw new Error("CI needs PostgreSQL: scripts/install-system-deps.sh installs it");
if (!hasPostgres) console.warn("PostgreSQL storage tests skipped: PostgreSQL is not installed (scripts/install-system-deps.sh)");

const client = loadConfig().clients[0]!;
const [firstWait, secondWait] = loadDeliveryRules().retryWaitsSeconds as [number, number];

const backends = [
  { name: "embedded (PGlite)", postgres: false },
  ...(hasPostgres ? [{ name: "PostgreSQL", postgres: true }] : []),
];

describe.each(backends)("restart in the middle of a retry schedule, $name storage", ({ postgres }) => {
  let receiver: Receiver;
  let dataDir: string;
  let server: TestPostgres | undefined;
  let storage: { dataDir?: string; databaseUrl?: string };
  beforeAll(async () => {
    receiver = await startReceiver();
    dataDir = await mkdtemp(path.join(tmpdir(), "reference-db-"));
    server = postgres ? await startTestPostgres() : undefined;
    storage = server ? { databaseUrl: await server.createDatabase("restart") } : { dataDir };
  });
  afterAll(async () => {
    await receiver.close();
    server?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  const start = (clockStart?: number) =>
    startServer({ ...storage, clock: { mode: "virtual", start: clockStart }, conformance: true, allowPrivateWebhooks: true, webhookCa: receiver.pki.caCert, log: () => undefined });
  const advance = (server: RunningServer, seconds: number) =>
    fetch(`${server.url}/conformance/clock/advance`, { method: "POST", body: JSON.stringify({ seconds }), headers: { "content-type": "application/json" } }).then((r) => r.json());

  it("resumes the schedule from the database", async () => {
    receiver.script("restart", [], answers.status(500));
    const first = await start();
    const api = createPartnerClient({ baseUrl: first.url, authUrl: first.url, clientId: client.clientId, clientSecret: client.clientSecret, scopes: ["webhooks::write"] });
    const { response } = await api.POST("/api/v2/webhooks", {
      body: { url: receiver.url("restart"), events: ["review.created"], businessID: "4711", secret: "0123456789abcdef" },
    });
    expect(response.status).toBe(201);
    await fetch(`${first.url}/conformance/events`, { method: "POST", body: JSON.stringify({ event: "review.created", businessID: "4711" }), headers: { "content-type": "application/json" } });
    await advance(first, 0);
    await advance(first, firstWait);
    expect(receiver.at("restart")).toHaveLength(2);
    const stoppedAt = first.clock.now();
    await first.close();

    const second = await start(stoppedAt);
    try {
      await advance(second, secondWait - 1);
      expect(receiver.at("restart")).toHaveLength(2);
      await advance(second, 1);
      expect(receiver.at("restart")).toHaveLength(3);
      const ids = receiver.at("restart").map((d) => (JSON.parse(d.body.toString()) as { id: string }).id);
      expect(new Set(ids).size).toBe(1);
    } finally {
      await second.close();
    }
  });
});
