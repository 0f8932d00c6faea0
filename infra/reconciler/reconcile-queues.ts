/**
 * The stateful half of reconciliation (docs/reconciler.md): the reconcile queue, where the
 * reconciler sends a message (connection and id) for every id the items table knows, once per
 * pass, and the item sync takes them at the provider's pace; and its own dead-letter queue. Both
 * are made as the sync queue and its dead-letter queue are (SQS-managed encryption, TLS only, the
 * same retention, redrive after MAX_RECEIVE_COUNT receives, visibility 6× the sync's time-out, the
 * same outputs: URLs, and ARNs for a redrive) and retained when the stack is deleted. Backfills
 * (`npm run enqueue -- --backfill`) are sent here too: the background lane. They exist whatever
 * freshnessHours is: with reconciliation off, what is queued (a backfill) is taken by the sync all
 * the same.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import type { Stack } from 'aws-cdk-lib';
import { addWorkQueueOutputs, addWorkQueues, type WorkQueues } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';

export type ReconcileQueues = WorkQueues;

export function addReconcileQueues(stack: Stack, config: ContentSyncConfig): ReconcileQueues {
  const queues = addWorkQueues(stack, { queue: 'ReconcileQueue', deadLetterQueue: 'ReconcileDeadLetterQueue' }, config);
  addWorkQueueOutputs(stack, queues, {
    idPrefix: 'Reconcile',
    queueName: 'Reconcile queue',
    deadLetterQueueName: 'Reconcile dead-letter queue',
    queueUrlDescription:
      'Reconcile queue, the background lane: the reconciler sends every known id here once per pass (its connection and id, attributes reconcilePass and lane), ' +
      'and npm run enqueue --backfill a backfill (--reconcile-queue-url); the item sync takes them after users\' ids',
    deadLetterQueueUrlDescription: 'Dead-letter queue of the reconcile queue: ids the sync was handed 5 times without finishing them',
  });
  return queues;
}
