// A webhook's share of its origin's connections (spec/DECISIONS.md D40). The webhooks with attempts
// waiting or under way at one origin (host:port) share its connections max-min fairly, with one share
// always held back for the next webhook to arrive: with n of them, each makes at most floor(C / (n + 1))
// attempts at once (never more than the per-webhook maximum, never fewer than 1), and an attempt is made
// only while the origin has a connection free for it. A connection that comes free goes to the waiting
// webhook with the fewest attempts under way. So webhooks that hang hold at most their shares, and a
// neighbour that arrives later finds its own share free at once (no attempt of theirs needs to end first).

export interface OriginShares {
  /** Runs `attempt` once its webhook's share of `origin` and a free connection admit it. */
  run<T>(origin: string, webhookId: string, attempt: () => Promise<T>): Promise<T>;
  /** The attempts a webhook may make at once now (the per-webhook maximum when it has none waiting or under way). */
  shareOf(webhookId: string): number;
}

interface Webhook {
  underWay: number;
  waiting: (() => void)[];
}

interface Origin {
  underWay: number;
  /** In order of arrival: ties go to the webhook that came first. */
  webhooks: Map<string, Webhook>;
  admitting: boolean;
}

export function originShares({ connectionsPerOrigin, maxPerWebhook }: { connectionsPerOrigin: number; maxPerWebhook: number }): OriginShares {
  const origins = new Map<string, Origin>();
  const originOf = new Map<string, Origin>();

  const share = (o: Origin): number => {
    const n = o.webhooks.size;
    return n <= 1 ? maxPerWebhook : Math.max(1, Math.min(maxPerWebhook, Math.floor(connectionsPerOrigin / (n + 1))));
  };

  function admit(o: Origin): void {
    o.admitting = false;
    const limit = share(o);
    while (o.underWay < connectionsPerOrigin) {
      // Max-min: the waiting webhook below its share with the fewest attempts under way.
      let next: Webhook | undefined;
      for (const w of o.webhooks.values()) {
        if (w.waiting.length > 0 && w.underWay < limit && (!next || w.underWay < next.underWay)) next = w;
      }
      if (!next) return;
      next.underWay++;
      o.underWay++;
      next.waiting.shift()!();
    }
  }

  return {
    async run(origin, webhookId, attempt) {
      let o = origins.get(origin);
      if (!o) origins.set(origin, (o = { underWay: 0, webhooks: new Map(), admitting: false }));
      let w = o.webhooks.get(webhookId);
      if (!w) {
        o.webhooks.set(webhookId, (w = { underWay: 0, waiting: [] }));
        originOf.set(webhookId, o);
      }
      const here = o;
      const own = w;
      await new Promise<void>((resolve) => {
        own.waiting.push(resolve);
        // Admitted a microtask later: a claim's attempts all arrive first, so the shares count every
        // webhook of the claim, and the first to arrive does not take the share of all.
        if (!here.admitting) {
          here.admitting = true;
          queueMicrotask(() => admit(here));
        }
      });
      try {
        return await attempt();
      } finally {
        own.underWay--;
        here.underWay--;
        if (own.underWay === 0 && own.waiting.length === 0) {
          here.webhooks.delete(webhookId);
          originOf.delete(webhookId);
          if (here.webhooks.size === 0) origins.delete(origin);
        }
        admit(here);
      }
    },
    shareOf(webhookId) {
      const o = originOf.get(webhookId);
      return o ? share(o) : maxPerWebhook;
    },
  };
}
