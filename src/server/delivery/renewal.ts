// Renewing this process's claims while it lives (spec/DECISIONS.md D41). A claim written to the
// database is a lease: one older than the lease is taken over as a dead process's. A live process's
// attempts may wait longer than that for their webhook's share of a busy origin (D40), so it renews
// them; only a process that died stops renewing. Claims held in memory (D41) have no lease.
import type { Db } from "../store.js";
import type { HeldClaims } from "./held.js";

export interface ClaimRenewal {
  start(): void;
  /** Stops renewing, once a renewal under way has ended. */
  stop(): Promise<void>;
}

export function createClaimRenewal(options: {
  db: Db;
  owner: string;
  /** Real ms of a lease. */
  leaseMs: number;
  /**
   * The attempts this process has claimed and not yet recorded: the only claims it renews. One whose
   * outcome could not be recorded is no longer held, and runs out its lease to be claimed again (D4):
   * renewing every claim of the process kept such attempts claimed, never made again, until it stopped.
   */
  held: HeldClaims;
  log: (message: string) => void;
}): ClaimRenewal {
  const { db, owner, leaseMs, held } = options;
  let renewal: NodeJS.Timeout | undefined;
  let renewing: Promise<void> | undefined;
  return {
    /**
     * Every third of a lease, the claims older than a sixth of one: renewed by half a lease at the
     * latest, or by five sixths if a renewal fails once, and a busy engine's young claims (most of
     * them) are not rewritten for nothing.
     */
    start() {
      clearInterval(renewal);
      renewal = setInterval(() => {
        const now = Date.now();
        if (held.size === 0) return;
        renewing ??= db
          .query("UPDATE attempts SET claimed_at = $1 WHERE id = ANY($4::bigint[]) AND state = 'in_flight' AND claimed_by = $2 AND claimed_at < $3", [
            now,
            owner,
            now - Math.floor(leaseMs / 6),
            [...held],
          ])
          .then(() => undefined, (error: unknown) => options.log(`renewing the claims failed (tried again in ${leaseMs / 3} ms): ${String(error)}`))
          .finally(() => (renewing = undefined));
      }, leaseMs / 3);
      renewal.unref();
    },
    async stop() {
      clearInterval(renewal);
      await renewing;
    },
  };
}
