// Public entry point of @partner-platform/sdk: what a partner's code needs at run time (the typed client,
// webhook signing and verification, receivers, typed event parsing), with openapi-fetch as its only dependency.
export {
  createPartnerClient,
  TokenRequestError,
  type AccessToken,
  type OAuthError,
  type PartnerClient,
  type PartnerClientOptions,
  type Problem,
  type Scope,
} from "./client.js";
export { newEventId, parseEvent, type ParseEventResult, type WebhookEvent, type EventOf } from "./events.js";
export {
  createWebhookHandler,
  readRawBody,
  readVerifiedEvent,
  sendProblem,
  verifyDelivery,
  type DeliveryHeaders,
  type ReceiveOptions,
  type ReceiveResult,
  type ReceiverProblem,
} from "./receiver.js";
export { signPayload, verifySignature, type Payload, type VerifyResult, type VerifyFailure } from "./signing.js";
export {
  describeSchemaErrors,
  eventNames,
  eventSchemaName,
  loadDeliveryRules,
  type DeliveryRules,
  type EventName,
  type SchemaError,
} from "./contract.js";
export type { paths, webhooks, components, operations } from "../../../generated/types/api.js";
