/**
 * What Lambda does around the handlers, for the local run: real-shaped invocation events and
 * contexts, and an SQS event source mapping (receive batches, invoke the handler, delete what
 * succeeded, leave the `batchItemFailures` to come back after their visibility time-out).
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';

export const LOCAL_ACCOUNT_ID = '000000000000';

/** A Lambda context whose remaining time counts down from `timeoutMs` at creation. */
export function createContext(functionName: string, region: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  const awsRequestId = randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:${LOCAL_ACCOUNT_ID}:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `local/[$LATEST]${awsRequestId.replace(/-/g, '')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** The SQS event Lambda builds from received messages (attribute names as Lambda spells them). */
export function sqsEvent(messages: readonly Message[], queueArn: string, region: string): SQSEvent {
  return {
    Records: messages.map((message): SQSRecord => {
      const attributes: Record<string, string> = {};
      for (const [name, value] of Object.entries(message.Attributes ?? {})) if (value !== undefined) attributes[name] = value;
      const messageAttributes: SQSMessageAttributes = {};
      for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
        messageAttributes[name] = {
          dataType: value.DataType ?? 'String',
          ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
          ...(value.BinaryValue !== undefined ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') } : {}),
          stringListValues: [],
          binaryListValues: [],
        };
      }
      return {
        messageId: message.MessageId ?? '',
        receiptHandle: message.ReceiptHandle ?? '',
        body: message.Body ?? '',
        attributes: attributes as unknown as SQSRecord['attributes'],
        messageAttributes,
        md5OfBody: message.MD5OfBody ?? '',
        ...(message.MD5OfMessageAttributes ? { md5OfMessageAttributes: message.MD5OfMessageAttributes } : {}),
        eventSource: 'aws:sqs',
        eventSourceARN: queueArn,
        awsRegion: region,
      };
    }),
  };
}

export type SyncHandlerFn = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | void>;

export interface DrainProgress {
  /** Messages the handler finished with (deleted from the queue). */
  done: number;
  /** Records handed back for a later delivery (batchItemFailures, or a whole failed invocation). */
  retried: number;
  invocations: number;
  /** Messages still in the queue (visible, in flight or delayed), as of the last look. */
  remaining: number;
}

export interface DrainOptions {
  sqs: SQSClient;
  queueUrl: string;
  queueArn: string;
  region: string;
  handler: SyncHandlerFn;
  /** Records per invocation (1..10); default 10. */
  batchSize?: number;
  /** Invocations at once (the event source's maximum concurrency); default 5. */
  concurrency?: number;
  /** The function's time-out, for the context; default 60 s (the deployed one for batches of 10). */
  functionTimeoutMs?: number;
  functionName?: string;
  /** Gives up when the queue is not empty by then; default 120 s. */
  timeLimitMs?: number;
  onProgress?: (progress: DrainProgress) => void;
  /** Invocations that threw, with their errors (the whole batch goes back to the queue). */
  onInvocationError?: (error: unknown) => void;
}

export interface DrainResult extends DrainProgress {
  /** True when the queue ended empty; false when the time limit came first. */
  drained: boolean;
  elapsedMs: number;
}

async function queueSize(sqs: SQSClient, queueUrl: string): Promise<number> {
  const output = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
    }),
  );
  const a = output.Attributes ?? {};
  return (
    Number(a.ApproximateNumberOfMessages ?? 0) +
    Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
    Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
  );
}

/**
 * Polls the queue like Lambda's SQS event source mapping with ReportBatchItemFailures, until the
 * queue is empty (every message deleted or moved to the dead-letter queue by the redrive policy) or
 * the time limit passes.
 */
export async function drainQueue(options: DrainOptions): Promise<DrainResult> {
  const { sqs, queueUrl, handler } = options;
  const batchSize = Math.min(10, Math.max(1, options.batchSize ?? 10));
  const concurrency = Math.max(1, options.concurrency ?? 5);
  const timeoutMs = options.functionTimeoutMs ?? 60_000;
  const functionName = options.functionName ?? 'content-sync-item-sync-local';
  const started = Date.now();
  const deadline = started + (options.timeLimitMs ?? 120_000);
  const progress: DrainProgress = { done: 0, retried: 0, invocations: 0, remaining: 0 };
  let drained = false;
  const report = (): void => options.onProgress?.({ ...progress });

  const worker = async (): Promise<void> => {
    while (!drained && Date.now() < deadline) {
      const received = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: batchSize,
          WaitTimeSeconds: 1,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      const messages = received.Messages ?? [];
      if (messages.length === 0) {
        progress.remaining = await queueSize(sqs, queueUrl);
        report();
        if (progress.remaining === 0) drained = true;
        continue;
      }
      progress.invocations += 1;
      let failedIds: Set<string>;
      try {
        const response = await handler(sqsEvent(messages, options.queueArn, options.region), createContext(functionName, options.region, timeoutMs));
        const identifiers = (response?.batchItemFailures ?? []).map((f) => f.itemIdentifier);
        const known = new Set(messages.map((m) => m.MessageId));
        // Lambda treats an answer naming a record it did not send (or an empty id) as a failure of the whole batch.
        failedIds = identifiers.every((id) => typeof id === 'string' && known.has(id))
          ? new Set(identifiers)
          : new Set(messages.map((m) => m.MessageId ?? ''));
      } catch (error) {
        options.onInvocationError?.(error);
        failedIds = new Set(messages.map((m) => m.MessageId ?? ''));
      }
      const succeeded = messages.filter((m) => !failedIds.has(m.MessageId ?? ''));
      if (succeeded.length > 0) {
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: succeeded.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? '' })),
          }),
        );
      }
      progress.done += succeeded.length;
      progress.retried += messages.length - succeeded.length;
      report();
    }
  };

  await Promise.all(Array.from({ length: concurrency }, worker));
  if (!drained) progress.remaining = await queueSize(sqs, queueUrl);
  report();
  return { ...progress, drained: progress.remaining === 0, elapsedMs: Date.now() - started };
}
