// Public entry point of the partner-platform (tools) package: the whole library API of
// @partner-platform/sdk, and what only the tools have (sending events as a server does).
export * from "@partner-platform/sdk";
export { buildEnvelope, deliver, type DeliverOptions, type DeliveryOutcome, type EnvelopeOptions } from "./sender.js";
