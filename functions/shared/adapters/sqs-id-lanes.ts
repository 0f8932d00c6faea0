/**
 * The IdLanes port (functions/shared/connections/operations.ts) on SQS: the users' lane is the sync
 * queue (SYNC_QUEUE_URL), the background lane the reconcile queue (RECONCILE_QUEUE_URL, each
 * message with `lane` = `background`), sent as `npm run enqueue` sends them (sqs-enqueue.ts). Ids
 * that could not be sent after its retries are an error that says how many were.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import { TransientError } from '../errors.js';
import type { IdLanes, Lane } from '../connections/operations.js';
import { enqueueMessages } from './sqs-enqueue.js';

export class SqsIdLanes implements IdLanes {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queues: { users: string; background: string },
  ) {}

  async send(connection: string, ids: readonly string[], lane: Lane): Promise<{ sent: number }> {
    const result = await enqueueMessages(
      this.sqs,
      this.queues[lane],
      ids.map((id) => ({ connection, id })),
      { lane },
    );
    if (result.failed.length > 0) {
      const first = result.failed[0]!;
      throw new TransientError(
        `${result.sent.length} of ${result.sent.length + result.failed.length} ids were sent to the ${lane} lane; the others failed (${first.code}): sending them all again is safe`,
      );
    }
    return { sent: result.sent.length };
  }
}
