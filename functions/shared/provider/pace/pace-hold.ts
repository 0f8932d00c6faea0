/**
 * A pace's hold (ProviderPaceOptions.maxHoldMs: a connection's pace under `paceScope` `connection`,
 * one among the others of a batch), as arithmetic: how many of a batch's requests the pace admits,
 * and when a request sent away comes back. No I/O; provider-pace.ts keeps one ReturnBook per
 * container.
 */
import type { PaceSettings } from './pace-state.js';

/** Who draws: users' ids, the sweep (yields to users, within its share), or a users' backlog (yields to users, the whole rate). */
export type PaceClass = 'users' | 'sweep' | 'backlog';

export function paceClass(sweep: boolean, backlog: boolean): PaceClass {
  return sweep ? (backlog ? 'backlog' : 'sweep') : 'users';
}

/** Requests a second `cls` may take at `rate`: the sweep's share of it for the sweep, at least `minRate`. */
export function classRate(rate: number, cls: PaceClass, settings: Pick<PaceSettings, 'userShare' | 'minRate'>): number {
  return Math.max(rate * (cls === 'sweep' ? 1 - settings.userShare : 1), settings.minRate);
}

/**
 * Of `requests`, how many `rate` serves within `holdMs`, at least one; none while a Retry-After
 * known to end `blockedForMs` from now outlasts the hold.
 */
export function admitted(requests: number, rate: number, holdMs: number, blockedForMs: number): number {
  if (blockedForMs > holdMs) return 0;
  return Math.min(requests, Math.max(1, Math.ceil((rate * holdMs) / 1000)));
}

/** The furthest a return is booked: SQS's longest DelaySeconds (900 s). */
export const RETURN_HORIZON_MS = 900_000;

/**
 * The returns booked for requests sent away, per class: each at least `minMs` from now, and one slot
 * of the rate after the one booked before it, so that a connection's requests sent away together
 * come back spread at its pace's rate, not all at once to wait their hold out again. Past the
 * horizon (more than 15 minutes of the rate already booked), a return is spread at random over it
 * and books nothing: it will be sent away again, rather than every later one coming back at 900 s.
 */
export class ReturnBook {
  private readonly last: Record<PaceClass, number> = { users: 0, sweep: 0, backlog: 0 };

  constructor(private readonly random: () => number) {}

  /** The epoch ms the request should come back at. */
  book(cls: PaceClass, now: number, minMs: number, rate: number): number {
    const at = Math.max(now + minMs, this.last[cls] + 1000 / rate);
    if (at > now + RETURN_HORIZON_MS) return now + Math.min(minMs, RETURN_HORIZON_MS) + this.random() * Math.max(0, RETURN_HORIZON_MS - minMs);
    this.last[cls] = at;
    return at;
  }
}
