/**
 * The stateful half of the change events (docs/change-events.md): the bus
 * every real change of an items-table row is announced on, and the queue where the stream's event
 * source puts what it could not hand to the change-events function after its bounded retries. Both
 * are retained when the stack is deleted: consumers' rules and archives hang on the bus, and the
 * failure queue is what an operator reads after an incident.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { Aws, CfnOutput, RemovalPolicy, Validations, type Stack } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { addRetainedQueue, DEAD_LETTER_RETENTION } from '../constructs/queues.js';

/** SQS's maximum: the failure queue is read after an incident, like the dead-letter queue. */
export const CHANGE_EVENTS_FAILURE_RETENTION = DEAD_LETTER_RETENTION;

export interface ChangeEventResources {
  readonly bus: events.EventBus;
  /** The stream event source's on-failure destination (batches' shard and sequence ranges). */
  readonly failureQueue: sqs.Queue;
}

export function addChangeEventResources(stack: Stack): ChangeEventResources {
  // EventBridge requires a name; it is derived from the stack's, never written out here.
  const bus = new events.EventBus(stack, 'ChangeEventBus', {
    eventBusName: `${Aws.STACK_NAME}-change-events`,
    description: 'content-sync change events (source content-sync): ItemCreated, ItemUpdated, ItemDeleted, ItemRestored',
  });
  bus.applyRemovalPolicy(RemovalPolicy.RETAIN);

  const failureQueue = addRetainedQueue(stack, 'ChangeEventsFailureQueue', { retentionPeriod: CHANGE_EVENTS_FAILURE_RETENTION });
  Validations.of(failureQueue).acknowledge({
    id: 'AwsSolutions-SQS3',
    reason:
      'This queue is itself the end of the line: the on-failure destination of the items-table stream event source (a dead-letter queue in all but the SQS redrive sense). Its messages are read by an operator, never consumed by a function.',
  });

  new CfnOutput(stack, 'ChangeEventBusName', {
    description: 'EventBridge bus of the change events (source content-sync): put your rules here (docs/change-events.md)',
    value: bus.eventBusName,
  });
  new CfnOutput(stack, 'ChangeEventBusArn', {
    description: 'EventBridge bus ARN of the change events, for rules and IAM policies',
    value: bus.eventBusArn,
  });
  new CfnOutput(stack, 'ChangeEventsFailureQueueUrl', {
    description: 'Stream batches the change-events function could not publish after its retries (shard and sequence numbers)',
    value: failureQueue.queueUrl,
  });
  return { bus, failureQueue };
}
