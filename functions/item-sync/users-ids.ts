/**
 * What a users' batch keeps of one connection's ids (sync.ts, docs/fairness.md). A user's ids come a
 * few at a time and now and then in a burst; an import sent to the users' queue comes by the
 * thousand, fills the batches it is in, and must go to the background lane, where it yields to
 * every account's users. Told apart by how many of one connection's ids one batch holds: up to
 * USERS_BURST_IDS are a user's, kept whole, but never more than the connection's pace serves within
 * USERS_HOLD_MS (an invocation held no longer than about the batching window); more are an import's,
 * of which the batch keeps USERS_IDS_PER_CONNECTION. Never fewer than that: a slow pace still
 * serves a user's first ids. No I/O, no state.
 */

/** The most ids of one connection a users' batch takes for a user's (an id every 200 ms and a burst of 20 fit). */
export const USERS_BURST_IDS = 30;
/** A connection's ids a users' batch keeps are fetched within about this long (ProviderPace.serves). */
export const USERS_HOLD_MS = 1_000;
/** The ids of one connection a users' batch always keeps, and all it keeps of an import. */
export const USERS_IDS_PER_CONNECTION = 5;

/**
 * Of `ids` ids of one connection in a users' batch, how many it keeps: all of a user's (at most
 * USERS_BURST_IDS), within what its pace serves in USERS_HOLD_MS (`paceServes`; none: no bound);
 * USERS_IDS_PER_CONNECTION of an import's; never more than `ids`.
 */
export function usersIdsKept(ids: number, paceServes: number | undefined): number {
  const allowed = ids > USERS_BURST_IDS ? USERS_IDS_PER_CONNECTION : Math.max(USERS_IDS_PER_CONNECTION, Math.min(ids, paceServes ?? ids));
  return Math.min(ids, allowed);
}
