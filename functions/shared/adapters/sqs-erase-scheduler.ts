/**
 * The EraseScheduler port (functions/shared/connections/erase.ts) on SQS: one message
 * `{"connection", "startedAt"}` on the erase queue (ERASE_QUEUE_URL), delayed until the safety wait
 * has passed (SQS delays a message 900 s at most: a longer wait is waited out by the eraser, which
 * sends the message back).
 */
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { EraseRequest, EraseScheduler } from '../connections/erase.js';
import { awsErrorOf, TransientError } from '../errors.js';

/** The longest delay SQS gives a message. */
export const MAX_DELAY_SECONDS = 900;

export class SqsEraseScheduler implements EraseScheduler {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async schedule(request: EraseRequest, delaySeconds: number): Promise<void> {
    try {
      await this.send(request, delaySeconds);
    } catch (error) {
      // The erase is written in the row already: asking again sends the message again, safely.
      throw new TransientError(`SQS SendMessage to the erase queue failed (${awsErrorOf(error).summary}): ask for the erase again`);
    }
  }

  private async send(request: EraseRequest, delaySeconds: number): Promise<void> {
    await this.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.queueUrl,
        MessageBody: JSON.stringify({ connection: request.connection, startedAt: request.startedAt }),
        DelaySeconds: Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil(delaySeconds))),
      }),
    );
  }
}
