// Public entry point of the partner-platform package.
export {
  createPartnerClient,
  TokenRequestError,
  type PartnerClient,
  type PartnerClientOptions,
  type Problem,
  type Scope,
} from "./client/index.js";
export { newEventId, parseEvent, type ParseEventResult, type WebhookEvent, type EventOf } from "./events/index.js";
export {
  createWebhookHandler,
  readVerifiedEvent,
  verifyDelivery,
  type ReceiveOptions,
  type ReceiveResult,
  type ReceiverProblem,
} from "./receiver.js";
export { buildEnvelope, deliver, type DeliverOptions, type DeliveryOutcome, type EnvelopeOptions } from "./sender.js";
export { signPayload, verifySignature, type Payload, type VerifyResult, type VerifyFailure } from "./signing.js";
export { loadDeliveryRules, eventNames, type DeliveryRules, type EventName } from "./spec.js";
export type { paths, webhooks, components, operations } from "../generated/types/api.js";
