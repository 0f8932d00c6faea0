/**
 * The stateful half of the changes writer (docs/changes.md): the queue where the items table's
 * stream event source puts the shard and sequence range of records that left the stream (24 hours)
 * before the writer numbered them. Retained: it is what an operator reads to mend a feed.
 *
 * Added to the given stack (the stateful stack) under its own id, so its logical id does not
 * depend on where this code lives.
 */
import { CfnOutput, Validations, type Stack } from 'aws-cdk-lib';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { addRetainedQueue, DEAD_LETTER_RETENTION } from '../constructs/queues.js';

export interface ChangesWriterResources {
  /** The stream event source's on-failure destination (batches' shard and sequence ranges). */
  readonly failureQueue: sqs.Queue;
}

export function addChangesWriterResources(stack: Stack): ChangesWriterResources {
  const failureQueue = addRetainedQueue(stack, 'ChangesWriterFailureQueue', { retentionPeriod: DEAD_LETTER_RETENTION });
  Validations.of(failureQueue).acknowledge({
    id: 'AwsSolutions-SQS3',
    reason:
      'This queue is itself the end of the line: the on-failure destination of the changes writer\'s stream event source (a dead-letter queue in all but the SQS redrive sense). Its messages are read by an operator, never consumed by a function.',
  });
  new CfnOutput(stack, 'ChangesWriterFailureQueueUrl', {
    description: 'Stream ranges that left the items table stream before the changes writer numbered them (shard and sequence numbers): mend the feed (docs/changes.md)',
    value: failureQueue.queueUrl,
  });
  return { failureQueue };
}
