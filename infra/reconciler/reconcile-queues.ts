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
import { CfnOutput, Duration, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { MAX_RECEIVE_COUNT } from '../../functions/shared/sync-queue.js';
import type { ContentSyncConfig } from '../context.js';

/** As the sync queue's (infra/stateful-stack.ts): SQS's default, stated. */
export const RECONCILE_QUEUE_RETENTION = Duration.days(4);
/** As the sync dead-letter queue's: SQS's maximum. */
export const RECONCILE_DEAD_LETTER_RETENTION = Duration.days(14);
/** AWS's guidance for Lambda event sources, as for the sync queue: visibility at least 6× the function's time-out. */
const VISIBILITY_FACTOR = 6;

export interface ReconcileQueues {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
}

export function addReconcileQueues(stack: Stack, config: ContentSyncConfig): ReconcileQueues {
  const deadLetterQueue = new sqs.Queue(stack, 'ReconcileDeadLetterQueue', {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: RECONCILE_DEAD_LETTER_RETENTION,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const queue = new sqs.Queue(stack, 'ReconcileQueue', {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    visibilityTimeout: Duration.seconds(config.syncTimeoutSeconds * VISIBILITY_FACTOR),
    retentionPeriod: RECONCILE_QUEUE_RETENTION,
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: MAX_RECEIVE_COUNT },
    removalPolicy: RemovalPolicy.RETAIN,
  });

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
