/**
 * How every content-sync queue is made: SQS-managed encryption, TLS only, a stated retention,
 * retained when the stack is deleted, no physical name. A work queue (the sync queue, the
 * reconcile queue, the erase queue) comes with its own dead-letter queue: redrive after
 * MAX_RECEIVE_COUNT receives, visibility 6× its consumer's time-out, and its outputs (both queues'
 * URLs and ARNs).
 */
import { CfnOutput, Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { ContentSyncConfig } from '../context.js';
import { DEAD_LETTER_RETENTION_DAYS, QUEUE_RETENTION_DAYS, workQueueDeployment, type WorkQueueDeployment } from '../deployment.js';

export { VISIBILITY_FACTOR } from '../deployment.js';
/** infra/deployment.ts, DEAD_LETTER_RETENTION_DAYS. */
export const DEAD_LETTER_RETENTION = Duration.days(DEAD_LETTER_RETENTION_DAYS);
/** infra/deployment.ts, QUEUE_RETENTION_DAYS. */
export const QUEUE_RETENTION = Duration.days(QUEUE_RETENTION_DAYS);

export interface RetainedQueueProps {
  readonly retentionPeriod: Duration;
  readonly visibilityTimeout?: Duration;
  readonly deadLetterQueue?: sqs.DeadLetterQueue;
}

/** One queue: SQS-managed encryption, TLS only, retained on stack deletion. */
export function addRetainedQueue(scope: Construct, id: string, props: RetainedQueueProps): sqs.Queue {
  return new sqs.Queue(scope, id, {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    removalPolicy: RemovalPolicy.RETAIN,
    ...props,
  });
}

/** A work queue and its dead-letter queue, as the functions' stack uses them. */
export interface WorkQueueResources {
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
}

export interface WorkQueues extends WorkQueueResources {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
}

/**
 * A queue the item sync consumes and its dead-letter queue, as deployed (infra/deployment.ts,
 * workQueueDeployment: visibility 6× the sync's time-out, QUEUE_RETENTION, redrive after
 * MAX_RECEIVE_COUNT receives, DEAD_LETTER_RETENTION), under the given construct ids.
 */
export function addWorkQueues(
  scope: Construct,
  ids: { readonly queue: string; readonly deadLetterQueue: string },
  config: ContentSyncConfig,
): WorkQueues {
  return addQueueWithDeadLetterQueue(scope, ids, workQueueDeployment(config));
}

/** A queue and its dead-letter queue with the numbers of `deployed`, under the given construct ids. */
export function addQueueWithDeadLetterQueue(
  scope: Construct,
  ids: { readonly queue: string; readonly deadLetterQueue: string },
  deployed: WorkQueueDeployment,
): WorkQueues {
  const deadLetterQueue = addRetainedQueue(scope, ids.deadLetterQueue, { retentionPeriod: Duration.days(deployed.deadLetterRetentionDays) });
  const queue = addRetainedQueue(scope, ids.queue, {
    visibilityTimeout: Duration.seconds(deployed.visibilityTimeoutSeconds),
    retentionPeriod: Duration.days(deployed.retentionDays),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: deployed.maxReceiveCount },
  });
  return { queue, deadLetterQueue };
}

/** What a work queue's outputs are called and say. */
export interface WorkQueueOutputs {
  /**
   * Prefix of the output ids: `${prefix}QueueUrl`, `${prefix}QueueArn`, `${prefix}DeadLetterQueueUrl`
   * and `${prefix}DeadLetterQueueArn`.
   */
  readonly idPrefix: string;
  /** The queues as the ARN outputs name them ("Sync queue", "Dead-letter queue"). */
  readonly queueName: string;
  readonly deadLetterQueueName: string;
  /** The URL outputs' descriptions: what is sent to the queue, what its dead-letter queue holds. */
  readonly queueUrlDescription: string;
  readonly deadLetterQueueUrlDescription: string;
}

/**
 * A work queue's outputs: each queue's URL, and each queue's ARN for a redrive (aws sqs
 * start-message-move-task moves messages from the dead-letter queue, its source, to the queue, its
 * destination).
 */
export function addWorkQueueOutputs(scope: Construct, queues: WorkQueues, outputs: WorkQueueOutputs): void {
  const { idPrefix, queueName, deadLetterQueueName } = outputs;
  new CfnOutput(scope, `${idPrefix}QueueUrl`, { description: outputs.queueUrlDescription, value: queues.queue.queueUrl });
  new CfnOutput(scope, `${idPrefix}QueueArn`, {
    description: `${queueName} ARN, for aws sqs start-message-move-task --destination-arn`,
    value: queues.queue.queueArn,
  });
  new CfnOutput(scope, `${idPrefix}DeadLetterQueueUrl`, { description: outputs.deadLetterQueueUrlDescription, value: queues.deadLetterQueue.queueUrl });
  new CfnOutput(scope, `${idPrefix}DeadLetterQueueArn`, {
    description: `${deadLetterQueueName} ARN, for aws sqs start-message-move-task --source-arn`,
    value: queues.deadLetterQueue.queueArn,
  });
}
