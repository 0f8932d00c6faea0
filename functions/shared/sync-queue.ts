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
 * The Number message attribute the reconciler sets on the ids it sends (the pass that sent them):
 * the item sync reads it to tell the sweep's records from users', and keeps it when it sends a
 * sweep record back to wait.
 */
export const RECONCILE_PASS_ATTRIBUTE = 'reconcilePass';
