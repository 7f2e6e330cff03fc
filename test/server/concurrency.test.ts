// A hanging receiver does not delay deliveries to others (real time: no clock tricks).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers, startReceiver, type Receiver } from "../../conformance/harness/receiver.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { register } from "./helpers.js";

describe("delivery concurrency", () => {
  let receiver: Receiver;
  let server: RunningServer;
  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startServer({ clock: { mode: "real" }, conformance: true, allowPrivateWebhooks: true, webhookCa: receiver.pki.caCert, log: () => undefined });
  });
  afterAll(async () => {
    await server.close();
    await receiver.close();
  });

  it("delivers to a healthy webhook while another one hangs", async () => {
    for (const endpoint of ["hangs", "healthy"]) await register(server, receiver.url(endpoint), ["review.created"]);
    receiver.script("hangs", [answers.hang]);
    await server.engine.emit("review.created", "4711", { reviewID: "1", businessID: "4711", rating: 5, reviewer: { name: "A" }, createdAt: "2026-11-22T14:00:00Z" });
    await receiver.waitFor((d) => d.some((x) => x.endpoint === "hangs"), 5000, "the hanging attempt");
    // Another event while the first attempt still hangs: the attempt timeout (10 s) is twice the time
    // allowed below, so a blocked engine cannot pass.
    await server.engine.emit("review.created", "4711", { reviewID: "2", businessID: "4711", rating: 4, reviewer: { name: "B" }, createdAt: "2026-11-22T14:00:01Z" });
    await receiver.waitFor((d) => d.filter((x) => x.endpoint === "healthy").length === 2, 5000, "both deliveries to the healthy webhook");
    expect(receiver.at("healthy")).toHaveLength(2);
  });
});
