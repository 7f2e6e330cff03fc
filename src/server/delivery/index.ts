// The delivery engine and its parts (see parts.ts for the seams variants replace).
export { createDeliveryEngine, DELIVERY_DEFAULTS, type DeliveryEngine, type EngineOptions } from "./engine.js";
export type { Emit } from "./events.js";
export { composeDisableMail, type DisabledWebhook } from "./mail.js";
export * from "./parts.js";
export type { AttemptSignal } from "./deadlines.js";
export { HeldClaims } from "./held.js";
