/**
 * A pace's hold (ProviderPaceOptions.maxHoldMs: a connection's pace under `paceScope` `connection`,
 * one among the others of a batch), as arithmetic: how many of a batch's requests the pace admits,
 * and when a request sent away comes back. No I/O; provider-pace.ts keeps one ReturnBook per
 * container.
 */

/** Who draws: users' ids, the sweep (yields to users, within its share), or a users' backlog (yields to users, the whole rate). */
export type PaceClass = 'users' | 'sweep' | 'backlog';

export function paceClass(sweep: boolean, backlog: boolean): PaceClass {
  return sweep ? (backlog ? 'backlog' : 'sweep') : 'users';
}

/** Requests a second `cls` may take at `rate`: the sweep's share of it for the sweep, at least `minRate`. */
export function classRate(rate: number, cls: PaceClass, userShare: number, minRate: number): number {
  return Math.max(rate * (cls === 'sweep' ? 1 - userShare : 1), minRate);
}

/** Of `requests`, how many `rate` serves within `holdMs`: at least one. */
export function admittedWithin(requests: number, rate: number, holdMs: number): number {
  return Math.min(requests, Math.max(1, Math.ceil((rate * holdMs) / 1000)));
}

/**
 * The returns booked for requests sent away, per class: each at least `minMs` from now, and one slot
 * of the rate after the one booked before it, so that a connection's requests sent away together
 * come back spread at its pace's rate, not all at once to wait their hold out again.
 */
export class ReturnBook {
  private readonly last: Record<PaceClass, number> = { users: 0, sweep: 0, backlog: 0 };

  /** The epoch ms the request should come back at. */
  book(cls: PaceClass, now: number, minMs: number, rate: number): number {
    const at = Math.max(now + minMs, this.last[cls] + 1000 / rate);
    this.last[cls] = at;
    return at;
  }
}
