/**
 * The work queues as deployed (infra/deployment.ts workQueueDeployment, eraseQueueDeployment): the
 * sync queue, the reconcile queue and the erase queue, each with its visibility time-out, retention and redrive policy to its own
 * dead-letter queue, in the SQS model.
 */
import type { WorkQueueDeployment } from '../../infra/deployment.js';
import type { SqsModel } from '../fakes/sqs-model.js';
import type { LocalNames } from './names.js';

const DAY_SECONDS = 86_400;

export interface WorkQueue {
  readonly name: string;
  readonly url: string;
  readonly arn: string;
  readonly deadLetterName: string;
  readonly deadLetterUrl: string;
}

export interface WorkQueues {
  readonly sync: WorkQueue;
  /** Undefined when there is no reconciler and discovery is off (nothing sends to it). */
  readonly reconcile: WorkQueue | undefined;
  /** The client API's erases, taken by the eraser. */
  readonly erase: WorkQueue;
}

export function createWorkQueues(
  sqs: SqsModel,
  names: LocalNames,
  deployment: WorkQueueDeployment,
  withReconcile: boolean,
  eraseDeployment: WorkQueueDeployment = deployment,
): WorkQueues {
  const pair = (name: string, deadLetterName: string, deployment: WorkQueueDeployment): WorkQueue => {
    const deadLetterUrl = sqs.createQueue(deadLetterName, { MessageRetentionPeriod: String(deployment.deadLetterRetentionDays * DAY_SECONDS) });
    const url = sqs.createQueue(name, {
      VisibilityTimeout: String(deployment.visibilityTimeoutSeconds),
      MessageRetentionPeriod: String(deployment.retentionDays * DAY_SECONDS),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: sqs.queue(deadLetterName).arn, maxReceiveCount: deployment.maxReceiveCount }),
    });
    return { name, url, arn: sqs.queue(name).arn, deadLetterName, deadLetterUrl };
  };
  return {
    sync: pair(names.syncQueue, names.syncDeadLetterQueue, deployment),
    reconcile: withReconcile ? pair(names.reconcileQueue, names.reconcileDeadLetterQueue, deployment) : undefined,
    erase: pair(names.eraseQueue, names.eraseDeadLetterQueue, eraseDeployment),
  };
}
