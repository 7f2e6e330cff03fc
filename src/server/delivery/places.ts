// The server's places in flight (spec/DECISIONS.md D40, D44): how much the next claim may take and of
// which webhooks, and when a claimed attempt may start (its webhook's share of its origin's connections,
// share.ts). Claims come in batches and leave out the webhooks that have enough claimed already; the end
// of an attempt that makes room, or lets such a webhook take more, calls `onRoom` (the engine claims).
import { memoized, type ClaimedAttempt } from "./parts.js";
import { originShares } from "./share.js";

/** What the next claim may take (DeliveryParts.claim's `limit` and `spread`). */
export interface ClaimBounds {
  /** The webhooks it leaves out: they have enough claimed. */
  busy: string[];
  /** At most this many of each webhook. */
  perWebhook: number;
  /** At most this many in all (below 1: none now, the places are held by webhooks claimed for earlier). */
  limit: number;
}

export interface Places {
  /** Room for a batch of claims (a claim per ended attempt would cost a statement each). */
  roomForClaim(): boolean;
  /** Attempts claimed and not yet ended (counted from `started` to `ended`). */
  readonly underWay: number;
  started(): void;
  ended(): void;
  nextClaim(): ClaimBounds;
  /** The webhooks that may have more due after a claim: those it left out, and those it took a full share of. */
  mayHaveMore(bounds: ClaimBounds, claimed: ClaimedAttempt[]): string[];
  /** Whether a claim now would leave the webhook out (see nextClaim). */
  isBusy(webhookId: string): boolean;
  /** Makes `attempt` once its webhook's share of the URL's origin and a free connection admit it (D40). */
  admit<T>(webhookId: string, url: string, attempt: () => Promise<T>): Promise<T>;
}

export function createPlaces(options: {
  maxInFlight: number;
  connectionsPerOrigin: number;
  maxInFlightPerWebhook: number;
  /** Room was made for a claim, or a webhook left out of claims can take more. */
  onRoom: () => void;
}): Places {
  const { maxInFlight, onRoom } = options;
  // Room for at least this many before claiming again (or all of it when maxInFlight is small).
  const claimBatch = Math.max(1, Math.min(64, Math.floor(maxInFlight / 4)));
  let underWay = 0;
  /**
   * Attempts are made as their webhook's share of its origin's connections admits them (D40, share.ts).
   * A webhook is claimed for again once its claimed attempts fall to 2× its share, at most 4× the
   * per-webhook maximum at a time: a webhook that hangs holds a bounded part of the claims, and a
   * busy one costs a claim statement per 4× its maximum of deliveries (the embedded store's claims
   * cost far more than their rows), not one per delivery.
   */
  const shares = originShares({ connectionsPerOrigin: options.connectionsPerOrigin, maxPerWebhook: options.maxInFlightPerWebhook });
  const webhooks = new Map<string, { claimed: number; busy: boolean }>();
  const claimPerWebhook = 4 * options.maxInFlightPerWebhook;
  const claimBound = (webhookId: string) => 2 * shares.shareOf(webhookId);
  const originOf = memoized((url: string) => new URL(url).origin);
  /**
   * The server's places in flight are shared by the webhooks holding claims as an origin's connections
   * are (D44): with n of them each holds at most floor(maxInFlight / (n + 1)), and a claim leaves
   * floor(maxInFlight / (n + 2)) places free, so webhooks that hang on different hosts never hold them
   * all and the next webhook is claimed for at once. A claim takes at most half a webhook's places.
   */
  const placesEach = (n: number) => Math.max(1, Math.floor(maxInFlight / (n + 1)));
  const placesKeptFree = (n: number) => Math.floor(maxInFlight / (n + 2));
  const claimPerWebhookNow = () => Math.min(claimPerWebhook, Math.ceil(placesEach(webhooks.size) / 2));
  /**
   * A webhook with more than twice its share claimed already (D40), or whose places (D44) the next
   * claim could overfill: claims leave it out until it can take more. Asking marks it, so that the end
   * of one of its attempts calls onRoom once it can.
   */
  const isBusy = (webhookId: string) => {
    const own = webhooks.get(webhookId);
    if (own === undefined) return false;
    return (own.busy = own.claimed > claimBound(webhookId) || own.claimed + claimPerWebhookNow() > placesEach(webhooks.size));
  };

  return {
    roomForClaim: () => maxInFlight - underWay >= claimBatch,
    get underWay() {
      return underWay;
    },
    started() {
      underWay++;
    },
    ended() {
      underWay--;
      if (maxInFlight - underWay === claimBatch) onRoom();
    },
    nextClaim() {
      const busy = [...webhooks.keys()].filter(isBusy);
      return { busy, perWebhook: claimPerWebhookNow(), limit: maxInFlight - underWay - placesKeptFree(webhooks.size) };
    },
    mayHaveMore(bounds, claimed) {
      const counts = new Map<string, number>();
      for (const a of claimed) counts.set(a.webhookId, (counts.get(a.webhookId) ?? 0) + 1);
      return [...bounds.busy, ...[...counts].filter(([, n]) => n >= bounds.perWebhook).map(([id]) => id)];
    },
    isBusy,
    async admit(webhookId, url, attempt) {
      let own = webhooks.get(webhookId);
      if (!own) webhooks.set(webhookId, (own = { claimed: 0, busy: false }));
      own.claimed++;
      const slot = own;
      try {
        return await shares.run(originOf(url), webhookId, attempt);
      } finally {
        if (--slot.claimed === 0) webhooks.delete(webhookId);
        // Left out of claims while it had enough claimed: claimed for again now.
        if (slot.busy && !isBusy(webhookId)) onRoom();
      }
    },
  };
}
