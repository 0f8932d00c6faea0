/**
 * A container's side of its leases: the tokens of its last draw, spent spaced at the rate until
 * they expire, and what it said it is about to ask for (ProviderPace.expect), so that a draw takes a
 * lease no larger than what is still wanted.
 */
import type { Grant } from './pace-types.js';

/** The tokens of one draw: the next due at `nextAt`, one every `intervalMs`, none after `expiresAt`. */
export interface Lease {
  tokens: number;
  nextAt: number;
  intervalMs: number;
  expiresAt: number;
}

/** One request's slot from `lease` at `now`: go or wait; undefined when the lease is spent or expired. */
export function spend(lease: Lease, now: number): Grant | undefined {
  if (lease.tokens < 1 || now >= lease.expiresAt) return undefined;
  if (now < lease.nextAt) return { kind: 'wait', until: lease.nextAt, why: 'pace' };
  lease.tokens -= 1;
  lease.nextAt = Math.max(now, lease.nextAt) + lease.intervalMs;
  return { kind: 'go', probe: false };
}

/** Claims of requests a container said are coming, each less the grants since. */
export class PaceDemand {
  private readonly claims: Array<{ left: number }> = [];

  /** A claim of `requests` more; the function returned takes back what is left of it. */
  claim(requests: number): () => void {
    const claim = { left: requests };
    this.claims.push(claim);
    return () => {
      const at = this.claims.indexOf(claim);
      if (at >= 0) this.claims.splice(at, 1);
    };
  }

  /** One request went: counted off the oldest claim that still wants one. */
  granted(): void {
    const claim = this.claims.find(({ left }) => left > 0);
    if (claim) claim.left -= 1;
  }

  /** Requests still wanted, as the claims say (at least the one asking); unbounded without a claim. */
  wanted(): number {
    if (this.claims.length === 0) return Number.POSITIVE_INFINITY;
    return Math.max(1, this.claims.reduce((sum, { left }) => sum + left, 0));
  }
}
