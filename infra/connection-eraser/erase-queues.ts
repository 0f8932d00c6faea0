/**
 * The stateful half of the erase (docs/connections.md, "Erase"): the erase queue, where
 * `{"connection": "<connection id>", "startedAt": "<ISO-8601>"}` messages ask the eraser to erase
 * one removed connection's data (sent by the client API's `DELETE /connections/{connection}?erase=true`,
 * delayed until the safety wait has passed, and by the eraser itself for the rest of a run cut
 * short), and its dead-letter queue, where a message ends after MAX_RECEIVE_COUNT failed runs.
 * Made as every work queue is (infra/constructs/queues.ts, from infra/deployment.ts
 * eraseQueueDeployment: visibility 6× the eraser's time-out), with their outputs: URLs, and ARNs
 * for a redrive.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import type { Stack } from 'aws-cdk-lib';
import { addQueueWithDeadLetterQueue, addWorkQueueOutputs, type WorkQueues } from '../constructs/queues.js';
import { eraseQueueDeployment } from '../deployment.js';

export type EraseQueues = WorkQueues;

export function addEraseQueues(stack: Stack): EraseQueues {
  const deployed = eraseQueueDeployment();
  const queues = addQueueWithDeadLetterQueue(stack, { queue: 'EraseQueue', deadLetterQueue: 'EraseDeadLetterQueue' }, deployed);
  addWorkQueueOutputs(stack, queues, {
    idPrefix: 'Erase',
    queueName: 'Erase queue',
    deadLetterQueueName: 'Erase dead-letter queue',
    queueUrlDescription:
      'Erase queue: {"connection": "<connection id>", "startedAt": "<ISO-8601>"} messages ask the eraser to erase a removed connection\'s data ' +
      '(sent by the client API on DELETE /connections/{connection}?erase=true, and by the eraser for the rest of a run)',
    deadLetterQueueUrlDescription: `Dead-letter queue of the erase queue: erases that failed ${deployed.maxReceiveCount} runs in a row (the eraser logs say why); redrive once fixed`,
  });
  return queues;
}
