/**
 * What the queues the item sync reads share with their senders. No imports, so the CDK app and the
 * development harness use it without loading the functions.
 */

/**
 * The sync queue's redrive policy (the reconcile queue's too): how often SQS may hand a record to
 * the sync function before the queue moves it to the dead-letter queue.
 */
export const MAX_RECEIVE_COUNT = 5;

/**
 * The Number message attribute the reconciler sets on the ids it sends (the pass that sent them);
 * the item sync keeps it when it sends such a record back to wait. A record that carries it and no
 * `lane` (sent before the attribute existed) is the background lane's too.
 */
export const RECONCILE_PASS_ATTRIBUTE = 'reconcilePass';

/**
 * The String message attribute that names a record's lane. `background` (BACKGROUND_LANE): the
 * reconciler's ids and backfills (`npm run enqueue -- --backfill`), drawn from the provider pace as
 * the sweep, which yields to users' ids; `backlog` (BACKLOG_LANE, below): the background lane too;
 * any other value, or none: users' ids. The item sync keeps it when it sends a record back to wait.
 */
export const LANE_ATTRIBUTE = 'lane';
export const BACKGROUND_LANE = 'background';
/**
 * `lane` = `backlog`: the background lane too, for a connection's ids beyond the first few of a
 * users' batch (the item sync moves them there). Drawn as the sweep under `paceScope` `client` (the
 * pace is every account's); under `connection` drawn after the account's own users' ids but not held
 * to the sweep's share (the pace is the account's own).
 */
export const BACKLOG_LANE = 'backlog';

/**
 * Every message the system sends to the sync queue and the reconcile queue carries the connection's
 * id as its MessageGroupId, so that SQS fair queues keep one connection's backlog from holding up
 * another's ids (a connection id, 1–64 of `A–Z a–z 0–9 . _ -`, is always a valid group id). The
 * dead-letter queue's messages carry it too, when their body named a valid connection.
 */
export function messageGroupIdOf(connection: string): string {
  return connection;
}
