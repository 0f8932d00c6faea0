/**
 * What a users' batch keeps of one connection's ids (sync.ts, docs/fairness.md): a user's ids come a
 * few at a time and now and then in a burst; an import sent to the users' queue comes by the
 * thousand, and must go to the background lane, where it yields to every account's users. Told
 * apart by how many come and how fast: each connection has, per container, a budget of
 * USERS_BURST_IDS ids, refilled at USERS_IDS_PER_SECOND; a users' batch keeps what the budget holds,
 * and never more than the connection's pace serves within USERS_HOLD_MS (an invocation held no
 * longer than about the batching window), nor fewer than USERS_IDS_PER_CONNECTION. An active user
 * (an id every 200 ms, or 20 at once) stays within the budget, whatever the account's own crawl or
 * backfill in the background lane; an import spends it in its first batch, and from then on keeps
 * USERS_IDS_PER_SECOND a second in the users' lane. No I/O: the clock is given.
 */
import { BoundedMap } from '../shared/bounded-map.js';
import type { Clock } from '../shared/ports.js';

/** Ids of one connection a users' batch may keep at once, when its budget is full: a burst of 20 and the ids beside it. */
export const USERS_BURST_IDS = 30;
/** The budget's refill, ids a second: twice a user sending an id every 200 ms, so that a burst's ids come back within seconds. */
export const USERS_IDS_PER_SECOND = 10;
/** A connection's ids a users' batch keeps are fetched within about this long (ProviderPace.serves). */
export const USERS_HOLD_MS = 1_000;
/** The fewest ids of one connection a users' batch keeps, whatever its budget or its pace. */
export const USERS_IDS_PER_CONNECTION = 5;
/** Budgets a container keeps (the connections used least recently are dropped: a full budget again). */
export const MAX_USERS_BUDGETS = 10_000;

interface Budget {
  ids: number;
  at: number;
}

/** Each connection's budget of ids kept in users' batches, in one container. */
export class UsersBudget {
  private readonly budgets: BoundedMap<string, Budget>;

  constructor(
    private readonly clock: Clock,
    max = MAX_USERS_BUDGETS,
  ) {
    this.budgets = new BoundedMap(max);
  }

  /**
   * Of `ids` ids of `connection` in a users' batch, how many it keeps: what the connection's budget
   * holds now, at most `paceServes` (what its pace serves within USERS_HOLD_MS; none: no bound), at
   * least USERS_IDS_PER_CONNECTION, never more than `ids`. Spends them.
   */
  take(connection: string, ids: number, paceServes: number | undefined): number {
    const now = this.clock.now().getTime();
    const budget = this.budgets.use(connection) ?? { ids: USERS_BURST_IDS, at: now };
    const held = Math.min(USERS_BURST_IDS, budget.ids + (Math.max(0, now - budget.at) * USERS_IDS_PER_SECOND) / 1000);
    const allowed = Math.max(USERS_IDS_PER_CONNECTION, Math.min(Math.floor(held), paceServes ?? Number.POSITIVE_INFINITY));
    const kept = Math.min(ids, allowed);
    this.budgets.set(connection, { ids: Math.max(0, held - kept), at: Math.max(now, budget.at) });
    return kept;
  }
}
