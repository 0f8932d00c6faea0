/**
 * What Lambda does around the handlers, for the local run, the bench, the soak and the tests:
 * real-shaped contexts and SQS events, and an SQS event source mapping
 * with ReportBatchItemFailures (receive batches, invoke a handler, delete what succeeded, leave the
 * `batchItemFailures` to come back after their visibility time-out) over any queue: SQS through an
 * SDK client (sqsClientQueue) or the SQS model in process (in-process-aws.ts).
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
import { NUMBER_RULES, syncTimeoutSeconds } from '../../infra/context.js';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './local-aws.js';

/** An item-sync invocation as deployed with the default batch: the context a caller that gives none gets. */
const DEFAULT_TIMEOUT_MS = syncTimeoutSeconds(NUMBER_RULES.syncBatchSize.fallback) * 1000;

export type SyncHandlerFn = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | void>;

// ---- context and event ---------------------------------------------------------------------------

export interface ContextOptions {
  accountId?: string;
  awsRequestId?: string;
  logStreamName?: string;
  /** The remaining time, instead of `timeoutMs` counted down from the context's creation. */
  remainingMs?: () => number;
  /** The function's memory; default the item sync's (infra/deployment.ts). */
  memoryMb?: number;
}

/** A Lambda context whose remaining time counts down from `timeoutMs` at creation. */
export function createContext(functionName: string, region = LOCAL_REGION, timeoutMs = DEFAULT_TIMEOUT_MS, options: ContextOptions = {}): Context {
  const deadline = Date.now() + timeoutMs;
  const awsRequestId = options.awsRequestId ?? randomUUID();
  const remaining = options.remainingMs ?? (() => deadline - Date.now());
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:${options.accountId ?? LOCAL_ACCOUNT_ID}:function:${functionName}`,
    memoryLimitInMB: String(options.memoryMb ?? NUMBER_RULES.syncMemorySize.fallback),
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: options.logStreamName ?? `local/[$LATEST]${awsRequestId.replace(/-/g, '')}`,
    getRemainingTimeInMillis: () => Math.max(0, remaining()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** The SQS event Lambda builds from received messages (attribute names as Lambda spells them; the region from the ARN). */
export function sqsEvent(messages: readonly Message[], queueArn: string): SQSEvent {
  const awsRegion = queueArn.split(':')[3] ?? LOCAL_REGION;
  return { Records: messages.map((message) => sqsRecord(message, queueArn, awsRegion)) };
}

function sqsRecord(message: Message, queueArn: string, awsRegion: string): SQSRecord {
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
    awsRegion,
  };
}

// ---- the event source mapping --------------------------------------------------------------------

/** The queue side of an event source mapping. */
export interface EventSourceQueue {
  readonly arn: string;
  /**
   * Up to `max` messages; may wait a while (long polling) when none is visible: at most `waitMs`
   * when given (a batching window's rest), else the queue's long poll.
   */
  receive(max: number, waitMs?: number): Promise<Message[]>;
  /** The invocation is over: delete what succeeded; the failed messages come back after their visibility time-out. */
  settle(succeeded: readonly Message[], failed: readonly Message[]): Promise<void>;
  /** Messages still in the queue (visible, in flight or delayed). */
  remaining(): Promise<number>;
}

/** A queue reached through an SQS client (the local emulator, or SQS itself). */
export function sqsClientQueue(sqs: SQSClient, queueUrl: string, queueArn: string): EventSourceQueue {
  return {
    arn: queueArn,
    async receive(max, waitMs) {
      const received = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: max,
          // Whole seconds only: a window's rest is waited for up to the next whole second.
          WaitTimeSeconds: waitMs === undefined ? 1 : Math.min(1, Math.ceil(waitMs / 1000)),
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      return received.Messages ?? [];
    },
    async settle(succeeded) {
      for (let i = 0; i < succeeded.length; i += 10) {
        const chunk = succeeded.slice(i, i + 10);
        await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle ?? '' })) }));
      }
    },
    async remaining() {
      const output = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
        }),
      );
      const a = output.Attributes ?? {};
      return Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) + Number(a.ApproximateNumberOfMessagesDelayed ?? 0);
    },
  };
}

export interface DrainProgress {
  /** Messages the handler finished with (deleted from the queue). */
  done: number;
  /** Records handed back for a later delivery (batchItemFailures, or a whole failed invocation). */
  retried: number;
  invocations: number;
  /** Invocations that threw, or answered naming a record that was not in the batch (the whole batch failed). */
  failedInvocations: number;
  /** Messages still in the queue (visible, in flight or delayed), as of the last look. */
  remaining: number;
}

export interface DrainResult extends DrainProgress {
  /** True when the queue ended empty; false when the time limit came first. */
  drained: boolean;
  elapsedMs: number;
}

/** One invocation as the event source saw it. */
export interface InvocationOutcome {
  worker: number;
  messages: readonly Message[];
  /** Ids of the messages that go back to the queue. */
  failed: ReadonlySet<string>;
  /** It threw, or answered naming a record that was not in the batch: the whole batch goes back. */
  failedAsWhole: boolean;
  answer?: SQSBatchResponse | void;
  error?: unknown;
}

export interface EventSourceOptions {
  queue: EventSourceQueue;
  /** One handler per concurrent poller (each its own container); the same handler may appear more than once. */
  handlers: readonly SyncHandlerFn[];
  /** Records per invocation; default 10. Over 10 (up to 10,000), gathered from several receives within `batchWindowMs`. */
  batchSize?: number;
  /**
   * The batching window (MaximumBatchingWindowInSeconds): from its first message, a batch is gathered
   * until it is full or this long has passed; default 0 (one receive, at most 10 records).
   */
  batchWindowMs?: number;
  /** The context of an invocation; default createContext with the function's time-out. */
  context?: (worker: number, invocation: number) => Context;
  /** Gives up when the queue is not empty by then; default 120 s. */
  timeLimitMs?: number;
  /** Called before every receive (the soak feeds its changes from here). */
  beforeReceive?: () => void;
  /** Besides an empty queue, what must hold for the run to end (more messages may be on their way); default always. */
  finished?: () => boolean;
  onBatch?: (worker: number, messages: readonly Message[]) => void;
  onOutcome?: (outcome: InvocationOutcome) => void;
  onProgress?: (progress: DrainProgress) => void;
  /** The time the time limit is measured in (a simulation's virtual clock); default Date.now. */
  now?: () => number;
  /** Ends the run (whatever the queue holds) once this answers true; checked before every receive. */
  stop?: () => boolean;
}

/** SQS's most messages a receive, and Lambda's most records a batch from a standard queue. */
const MESSAGES_PER_RECEIVE = 10;
const MAX_BATCH_SIZE = 10_000;

/**
 * One batch as Lambda's poller gathers it: a receive (the queue's long poll); then, with a window,
 * more receives until the batch is full or the window, counted from the first message, has passed.
 */
async function gatherBatch(
  queue: EventSourceQueue,
  batchSize: number,
  windowMs: number,
  now: () => number,
  stop: (() => boolean) | undefined,
): Promise<Message[]> {
  const batch = await queue.receive(Math.min(MESSAGES_PER_RECEIVE, batchSize));
  if (batch.length === 0 || windowMs <= 0) return batch;
  const until = now() + windowMs;
  while (batch.length < batchSize && !stop?.()) {
    const left = until - now();
    if (left <= 0) break;
    batch.push(...(await queue.receive(Math.min(MESSAGES_PER_RECEIVE, batchSize - batch.length), left)));
  }
  return batch;
}

/**
 * Polls the queue like Lambda's SQS event source mapping with ReportBatchItemFailures, one poller per
 * handler, until the queue is empty (every message deleted or moved to the dead-letter queue by the
 * redrive policy) and `finished()` holds, or the time limit passes. A poller gathers its next batch
 * once its invocation has returned, as a mapping with maximum concurrency does: while every
 * invocation it may make is running, it reads no more messages.
 */
export async function runEventSource(options: EventSourceOptions): Promise<DrainResult> {
  const { queue } = options;
  const windowMs = Math.max(0, options.batchWindowMs ?? 0);
  // Without a window Lambda takes at most one receive's 10 (a batch size over 10 needs a window).
  const batchSize = Math.min(windowMs > 0 ? MAX_BATCH_SIZE : MESSAGES_PER_RECEIVE, Math.max(1, options.batchSize ?? MESSAGES_PER_RECEIVE));
  const now = options.now ?? Date.now;
  const started = now();
  const deadline = started + (options.timeLimitMs ?? 120_000);
  const progress: DrainProgress = { done: 0, retried: 0, invocations: 0, failedInvocations: 0, remaining: 0 };
  const invocationsOf = options.handlers.map(() => 0);
  let drained = false;
  const report = (): void => options.onProgress?.({ ...progress });

  const poll = async (worker: number): Promise<void> => {
    while (!drained && now() < deadline) {
      if (options.stop?.()) break;
      options.beforeReceive?.();
      const messages = await gatherBatch(queue, batchSize, windowMs, now, options.stop);
      if (messages.length === 0) {
        progress.remaining = await queue.remaining();
        report();
        if (progress.remaining === 0 && (options.finished?.() ?? true)) drained = true;
        continue;
      }
      progress.invocations += 1;
      invocationsOf[worker] = (invocationsOf[worker] ?? 0) + 1;
      options.onBatch?.(worker, messages);
      const context = options.context?.(worker, invocationsOf[worker]!) ?? createContext('content-sync-item-sync', queue.arn.split(':')[3]);
      const outcome = await invoke(options.handlers[worker]!, worker, messages, queue.arn, context);
      if (outcome.failedAsWhole) progress.failedInvocations += 1;
      const succeeded = messages.filter((m) => !outcome.failed.has(m.MessageId ?? ''));
      await queue.settle(succeeded, messages.filter((m) => outcome.failed.has(m.MessageId ?? '')));
      progress.done += succeeded.length;
      progress.retried += messages.length - succeeded.length;
      options.onOutcome?.(outcome);
      report();
    }
  };

  await Promise.all(options.handlers.map((_, worker) => poll(worker)));
  if (!drained) progress.remaining = await queue.remaining();
  report();
  return { ...progress, drained: progress.remaining === 0, elapsedMs: now() - started };
}

/** Invokes the handler; a throw, or an answer naming a record that was not in the batch, fails the whole batch (as Lambda). */
async function invoke(handler: SyncHandlerFn, worker: number, messages: readonly Message[], queueArn: string, context: Context): Promise<InvocationOutcome> {
  const all = new Set(messages.map((m) => m.MessageId ?? ''));
  try {
    const answer = await handler(sqsEvent(messages, queueArn), context);
    const identifiers = (answer?.batchItemFailures ?? []).map((failure) => failure.itemIdentifier);
    const known = identifiers.every((id) => typeof id === 'string' && id !== '' && all.has(id));
    return { worker, messages, answer, failed: known ? new Set(identifiers) : all, failedAsWhole: !known };
  } catch (error) {
    return { worker, messages, error, failed: all, failedAsWhole: true };
  }
}
