/**
 * The reconcile queue (RECONCILE_QUEUE_URL) as the ReconcileQueue port: its backlog from
 * GetQueueAttributes (visible + in flight + delayed), and the keys of a page as SendMessageBatch
 * calls of 10, a few in flight at once. Each message is `{"connection": "<connection>", "id":
 * "<id>"}` (the item sync's message body) with the Number attribute `reconcilePass` (the pass) and
 * the String attribute `lane` = `background`, which tells the item sync that the record is the
 * background lane's (the pace's sweep), and the connection as its MessageGroupId (fair queues: a
 * backfill of one connection on the same queue does not hold up the others' ids).
 *
 * An entry SQS refuses for a reason that may pass (or a call that fails) is sent again, a bounded
 * number of times; what still is not sent makes `send` throw, so the page is not advanced past and
 * a later tick sends it again. An entry refused as the sender's fault can never be sent: it is
 * returned as refused, and the page is advanced past it (the core logs it).
 */
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { resendPolicy, sendMessageBatch, type EntryFailure, type ResendOptions, type ResendPolicy } from '../../shared/adapters/sqs-batch.js';
import { TransientError } from '../../shared/errors.js';
import { BACKGROUND_LANE, LANE_ATTRIBUTE, messageGroupIdOf, RECONCILE_PASS_ATTRIBUTE } from '../../shared/sync-queue.js';
import type { ItemKey, ReconcileQueue, SendResult } from '../ports.js';

/** The message attributes: the pass number (Number) and the lane (String): the ones the item sync reads. */
export { BACKGROUND_LANE, LANE_ATTRIBUTE, RECONCILE_PASS_ATTRIBUTE };

/** SQS's limit of entries per SendMessageBatch. */
const BATCH_ENTRIES = 10;

export const BACKLOG_ATTRIBUTES = [
  'ApproximateNumberOfMessages',
  'ApproximateNumberOfMessagesNotVisible',
  'ApproximateNumberOfMessagesDelayed',
] as const;

export interface SqsReconcileQueueOptions extends ResendOptions {
  /** SendMessageBatch calls in flight at once; default 10. */
  concurrency?: number;
}

export class SqsReconcileQueue implements ReconcileQueue {
  private readonly concurrency: number;
  private readonly resend: ResendPolicy;

  constructor(
    private readonly client: SQSClient,
    readonly queueUrl: string,
    options: SqsReconcileQueueOptions = {},
  ) {
    this.concurrency = Math.max(1, options.concurrency ?? 10);
    this.resend = resendPolicy(options);
  }

  async backlog(): Promise<number> {
    const output = await this.client.send(new GetQueueAttributesCommand({ QueueUrl: this.queueUrl, AttributeNames: [...BACKLOG_ATTRIBUTES] }));
    let total = 0;
    for (const name of BACKLOG_ATTRIBUTES) {
      const value = Number(output.Attributes?.[name] ?? 0);
      if (Number.isFinite(value) && value > 0) total += value;
    }
    return total;
  }

  async send(keys: readonly ItemKey[], pass: number): Promise<SendResult> {
    const refused: SendResult['refused'] = [];
    const unsent: Array<ItemKey & { reason: string }> = [];
    const chunks: ItemKey[][] = [];
    for (let start = 0; start < keys.length; start += BATCH_ENTRIES) chunks.push(keys.slice(start, start + BATCH_ENTRIES));
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < chunks.length) {
        const chunk = chunks[next++]!;
        await sendMessageBatch(this.client, this.queueUrl, chunk, {
          entry: ({ connection, id }, position) => ({
            Id: `m${position}`,
            MessageBody: JSON.stringify({ connection, id }),
            MessageGroupId: messageGroupIdOf(connection),
            MessageAttributes: {
              [RECONCILE_PASS_ATTRIBUTE]: { DataType: 'Number', StringValue: String(pass) },
              [LANE_ATTRIBUTE]: { DataType: 'String', StringValue: BACKGROUND_LANE },
            },
          }),
          ...this.resend,
          onCallError: () => 'retry',
          onSent: () => undefined,
          onFailed: ({ connection, id }, failure) => {
            if (failure.kind === 'refused' && failure.senderFault) refused.push({ connection, id, reason: describe(failure) });
            else unsent.push({ connection, id, reason: describe(failure) });
          },
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, chunks.length) }, worker));
    if (unsent.length > 0) {
      throw new TransientError(`${unsent.length} of ${keys.length} ids could not be sent to the reconcile queue (${unsent[0]!.reason})`);
    }
    return { refused };
  }
}

function describe(failure: EntryFailure): string {
  switch (failure.kind) {
    case 'refused':
      return `${failure.code ?? 'refused'}: ${failure.message ?? ''}`.trim();
    case 'unanswered':
      return 'SendMessageBatch did not answer for the entry';
    case 'call-failed': {
      const error = failure.error as { name?: string; message?: string };
      return `SendMessageBatch failed: ${error?.name ?? 'Error'}: ${error?.message ?? String(failure.error)}`;
    }
    case 'stopped':
      return 'not sent';
  }
}
