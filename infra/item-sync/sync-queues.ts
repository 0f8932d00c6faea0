/**
 * The stateful half of the item sync: the sync queue, where `{"connection": "<connection id>", "id":
 * "<item id>"}` messages are sent for the item sync to fetch, and its dead-letter queue, where records that can never succeed end
 * (sent there by the sync with message attributes `error` and `sourceMessageId`, or by SQS after
 * MAX_RECEIVE_COUNT receives). Made as every work queue is (infra/constructs/queues.ts, from
 * infra/deployment.ts workQueueDeployment), with their outputs: URLs, and ARNs for a redrive.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import type { Stack } from 'aws-cdk-lib';
import { addWorkQueueOutputs, addWorkQueues, type WorkQueues } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';

export type SyncQueues = WorkQueues;

export function addSyncQueues(stack: Stack, config: ContentSyncConfig): SyncQueues {
  const queues = addWorkQueues(stack, { queue: 'SyncQueue', deadLetterQueue: 'DeadLetterQueue' }, config);
  addWorkQueueOutputs(stack, queues, {
    idPrefix: '',
    queueName: 'Sync queue',
    deadLetterQueueName: 'Dead-letter queue',
    queueUrlDescription: 'Sync queue: send {"connection": "<connection id>", "id": "<item id>"} messages here ({"id"} alone: the connection default)',
    deadLetterQueueUrlDescription: 'Dead-letter queue: records that can never succeed, with message attributes error and sourceMessageId',
  });
  return queues;
}
