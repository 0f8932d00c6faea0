/**
 * The stateful half of reconciliation (docs/reconciler.md): the reconcile queue, where the
 * reconciler sends `{"id": "<id>"}` for every id the items table knows, once per pass, and the
 * item sync takes them at the provider's pace; and its own dead-letter queue. Both are made as
 * the sync queue and its dead-letter queue are (SQS-managed encryption, TLS only, the same
 * retention, redrive after MAX_RECEIVE_COUNT receives, visibility 6× the sync's time-out) and
 * retained when the stack is deleted. They exist whatever freshnessHours is: with reconciliation
 * off, what is still queued is taken by the sync all the same.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, type Stack } from 'aws-cdk-lib';
import { addWorkQueues, type WorkQueues } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';

export type ReconcileQueues = WorkQueues;

export function addReconcileQueues(stack: Stack, config: ContentSyncConfig): ReconcileQueues {
  const { queue, deadLetterQueue } = addWorkQueues(
    stack,
    { queue: 'ReconcileQueue', deadLetterQueue: 'ReconcileDeadLetterQueue' },
    config.syncTimeoutSeconds,
  );

  new CfnOutput(stack, 'ReconcileQueueUrl', {
    description: 'Reconcile queue: the reconciler sends every known id here once per pass ({"id": "<item id>"}, attribute reconcilePass); the item sync takes them',
    value: queue.queueUrl,
  });
  new CfnOutput(stack, 'ReconcileQueueArn', {
    description: 'Reconcile queue ARN, for aws sqs start-message-move-task --destination-arn',
    value: queue.queueArn,
  });
  new CfnOutput(stack, 'ReconcileDeadLetterQueueUrl', {
    description: 'Dead-letter queue of the reconcile queue: ids the sync was handed 5 times without finishing them',
    value: deadLetterQueue.queueUrl,
  });
  new CfnOutput(stack, 'ReconcileDeadLetterQueueArn', {
    description: 'Reconcile dead-letter queue ARN, for aws sqs start-message-move-task --source-arn',
    value: deadLetterQueue.queueArn,
  });
  return { queue, deadLetterQueue };
}
