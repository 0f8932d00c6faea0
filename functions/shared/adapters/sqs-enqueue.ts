/**
 * Sending item ids to the sync queue, or as a backfill to the reconcile queue, what the client API
 * (`POST /connections/{connection}/items`), `npm run enqueue` (tools/enqueue), the local run and the
 * simulations use: every id (and connection) validated before anything is sent (a bad one is an
 * error naming it, and nothing is sent); messages `{"connection":"…","id":"…"}` for an id of a
 * named connection, `{"id":"…"}` for an id of the connection `default` given without one, each with
 * its connection as its MessageGroupId (fair queues), and for a backfill the message attribute
 * `lane` = `background`; sent with SendMessageBatch, at most 10 a call; entries the queue refuses
 * for a reason that may pass re-sent (bounded, with backoff); refusals that are the sender's fault
 * reported, not re-sent.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import { messageBody, sendableIdProblem as validateId } from '../../item-sync/message.js';
import { connectionIdProblem, DEFAULT_CONNECTION } from '../connections/connection.js';
import { sendMessageBatch, type EntryFailure } from './sqs-batch.js';
import { forEachLimited } from '../limited.js';
import { BACKGROUND_LANE, LANE_ATTRIBUTE, messageGroupIdOf } from '../sync-queue.js';
import { backoffDelayMs, sleepMs, type Backoff } from '../backoff.js';

const MAX_BATCH_ENTRIES = 10;
export const DEFAULT_MAX_ATTEMPTS = 5;
const DEFAULT_CONCURRENCY = 4;
/** Whole batches given up in a row after which the rest is not tried (every call is failing). */
const ABORT_AFTER_GIVEN_UP_BATCHES = 3;

// ---- validation ---------------------------------------------------------------------------------

/** The id rule of a message sent (functions/item-sync/message.ts: the sync's own rule, and nothing SQS cannot carry). */
export { sendableIdProblem as validateId, messageBody } from '../../item-sync/message.js';

/**
 * One message to send: an item id, and the connection it belongs to. Without `connection` the body
 * is `{"id"}` (the connection `default`); with it, `{"connection", "id"}`.
 */
export interface EnqueueMessage {
  connection?: string;
  id: string;
}

export interface InvalidId {
  /** Position in the input, from 0. */
  index: number;
  id: string;
  /** The connection named with the id, when one was. */
  connection?: string;
  reason: string;
}

/** One or more ids are invalid; nothing was sent. */
export class InvalidIdsError extends Error {
  override readonly name = 'InvalidIdsError';
  constructor(readonly invalid: InvalidId[]) {
    const shown = invalid.slice(0, 10).map((bad) => `  #${bad.index + 1} ${quoteMessage(bad)}: ${bad.reason}`);
    const more = invalid.length > shown.length ? [`  ... and ${invalid.length - shown.length} more`] : [];
    super(`${invalid.length} invalid id${invalid.length === 1 ? '' : 's'}, nothing sent:\n${[...shown, ...more].join('\n')}`);
  }
}

/** An id for display: JSON-quoted (so spaces and odd characters are visible), cut at 120 characters. */
export function quoteId(id: string): string {
  const chars = [...id];
  return chars.length > 120 ? `${JSON.stringify(chars.slice(0, 120).join(''))}… (${chars.length} characters)` : JSON.stringify(id);
}

/** A message for display: the quoted id, after its connection when it names one (`acme "fil-1"`). */
export function quoteMessage(message: EnqueueMessage): string {
  return message.connection === undefined ? quoteId(message.id) : `${message.connection} ${quoteId(message.id)}`;
}

export function findInvalidIds(ids: readonly string[]): InvalidId[] {
  return findInvalidMessages(ids.map((id) => ({ id })));
}

/** The messages whose id, or connection, is not valid (the connection's reason first: connection.ts). */
export function findInvalidMessages(messages: readonly EnqueueMessage[]): InvalidId[] {
  const invalid: InvalidId[] = [];
  messages.forEach(({ connection, id }, index) => {
    const reason =
      (connection !== undefined ? connectionIdProblem(connection) : undefined) ?? (typeof id === 'string' ? validateId(id) : 'not a string');
    if (reason !== undefined) invalid.push({ index, id, ...(connection !== undefined ? { connection } : {}), reason });
  });
  return invalid;
}


// ---- sending ------------------------------------------------------------------------------------

export interface SentId {
  id: string;
  /** The connection the message named, when it named one. */
  connection?: string;
  messageId: string;
}

export interface FailedId {
  id: string;
  /** The connection the message named, when it named one. */
  connection?: string;
  /** The queue's error code (`InvalidMessageContents`, `InternalError`...) or the thrown error's name. */
  code: string;
  message: string;
  /** True when the queue said the request was at fault (not re-sent). */
  senderFault: boolean;
}

export interface EnqueueProgress {
  total: number;
  sent: number;
  failed: number;
  /** Entries being re-sent after a refusal, so far. */
  resent: number;
}

/**
 * `users` (the default): users' ids, for the sync queue. `background`: a backfill, for the reconcile
 * queue: each message carries `lane` = `background`, so the item sync draws it from the provider
 * pace as the sweep (users' ids first).
 */
export type Lane = 'users' | 'background';

export interface EnqueueOptions {
  /** The lane the messages are sent in; default `users`. */
  lane?: Lane;
  onProgress?: (progress: EnqueueProgress) => void;
  /** Attempts per entry (first send included) for refusals that may pass; default 5. */
  maxAttempts?: number;
  /** Base of the exponential backoff between attempts, in ms; default 200 (capped at 5 s, full jitter). */
  backoffMs?: number;
  /** SendMessageBatch calls in flight at once; default 4. */
  concurrency?: number;
  /** Skips duplicate messages (the same id of the same connection; the first occurrence is sent); default true. */
  dedupe?: boolean;
  sleep?: (ms: number) => Promise<void>;
  /** [0, 1), for the backoff jitter; default Math.random. */
  random?: () => number;
}

export interface EnqueueResult {
  sent: SentId[];
  failed: FailedId[];
  /** Entries re-sent after a refusal that may pass. */
  resent: number;
  /** SendMessageBatch calls made. */
  calls: number;
  /** Duplicate ids skipped. */
  duplicates: number;
  /** True when sending stopped early on an error no other call could get past (no such queue, access denied). */
  aborted: boolean;
}

/** Errors after which every further call would fail the same way: stop instead of repeating them. */
function isFatal(error: unknown): boolean {
  const e = error as { name?: string; $fault?: string; $metadata?: { httpStatusCode?: number } };
  if (e?.name === 'CredentialsProviderError' || e?.name === 'TokenProviderError') return true;
  if (typeof e?.name === 'string' && /Region is missing/i.test(String((error as Error).message))) return true;
  if (e?.$fault === 'client') {
    // Throttling is the client's "fault" too, but it passes.
    return !/Throttl|RequestThrottled|TooManyRequests|OverLimit/i.test(e.name ?? '');
  }
  return false;
}

/**
 * Sends `{"id": …}` for every id to the queue, or `{"connection": …, "id": …}` when `connection` is
 * given (every id is then that connection's): enqueueMessages.
 */
export async function enqueueIds(
  sqs: SQSClient,
  queueUrl: string,
  ids: readonly string[],
  options: EnqueueOptions & { connection?: string } = {},
): Promise<EnqueueResult> {
  const { connection, ...rest } = options;
  return enqueueMessages(sqs, queueUrl, ids.map((id) => (connection === undefined ? { id } : { connection, id })), rest);
}

/** A backfill needs the reconcile queue, and the deployment has none. */
export class NoReconcileQueueError extends Error {
  override readonly name = 'NoReconcileQueueError';
  constructor() {
    super('a backfill goes to the reconcile queue, and this deployment has none (freshnessHours is 0); send the ids to the sync queue instead, without --backfill');
  }
}

/**
 * A backfill: every message to the reconcile queue (`reconcileQueueUrl`; undefined when the
 * deployment has none: NoReconcileQueueError, naming freshnessHours) in the background lane
 * (`lane` = `background`), so that the item sync takes it with the reconcile queue's own
 * containers and draws it from the pace as the sweep, after users' ids. Otherwise as enqueueMessages.
 */
export async function backfillMessages(
  sqs: SQSClient,
  reconcileQueueUrl: string | undefined,
  messages: readonly EnqueueMessage[],
  options: Omit<EnqueueOptions, 'lane'> = {},
): Promise<EnqueueResult> {
  if (reconcileQueueUrl === undefined) throw new NoReconcileQueueError();
  return enqueueMessages(sqs, reconcileQueueUrl, messages, { ...options, lane: 'background' });
}

/**
 * Sends every message to the queue with SendMessageBatch (at most 10 entries a call), each with its
 * connection (`default` when it names none) as its MessageGroupId, and `lane` = `background` when
 * `options.lane` says so. Validates
 * every id and connection first and throws InvalidIdsError, sending nothing, if any is invalid.
 * Entries refused with `SenderFault: false` (or in a call that failed in a way that may pass) are
 * re-sent up to `maxAttempts` times with backoff; the rest end in `failed`.
 */
export async function enqueueMessages(
  sqs: SQSClient,
  queueUrl: string,
  messages: readonly EnqueueMessage[],
  options: EnqueueOptions = {},
): Promise<EnqueueResult> {
  const invalid = findInvalidMessages(messages);
  if (invalid.length > 0) throw new InvalidIdsError(invalid);

  const unique = options.dedupe === false ? [...messages] : [...new Map(messages.map((m) => [messageBody(m.id, m.connection), m])).values()];
  const run = new EnqueueRun(sqs, queueUrl, unique, options, messages.length - unique.length);
  const concurrency = Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY);
  await forEachLimited(batchesOf(unique.length, MAX_BATCH_ENTRIES), concurrency, (batch) => run.sendBatch(batch));
  run.report();
  return run.result;
}

/** Positions 0..count-1 in groups of at most `size`. */
function batchesOf(count: number, size: number): number[][] {
  const batches: number[][] = [];
  for (let start = 0; start < count; start += size) {
    batches.push(Array.from({ length: Math.min(size, count - start) }, (_, i) => start + i));
  }
  return batches;
}

/** One enqueueMessages call: the result so far, and the sending of one batch of messages (by position in `messages`). */
class EnqueueRun {
  readonly result: EnqueueResult;
  private readonly maxAttempts: number;
  private readonly backoff: Backoff;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  /** Batches in a row that were given up entirely (the queue unreachable, say): after a few, stop. */
  private givenUpInARow = 0;

  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
    private readonly messages: readonly EnqueueMessage[],
    private readonly options: EnqueueOptions,
    duplicates: number,
  ) {
    this.maxAttempts = Math.max(1, options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    this.backoff = { baseMs: options.backoffMs ?? 200, capMs: 5_000, jitter: 'full' };
    this.sleep = options.sleep ?? sleepMs;
    this.random = options.random ?? Math.random;
    this.result = { sent: [], failed: [], resent: 0, calls: 0, duplicates, aborted: false };
  }

  report(): void {
    const { sent, failed, resent } = this.result;
    this.options.onProgress?.({ total: this.messages.length, sent: sent.length, failed: failed.length, resent });
  }

  async sendBatch(indexes: number[]): Promise<void> {
    const failedBefore = this.result.failed.length;
    await this.send(indexes);
    const givenUp = this.result.failed.length - failedBefore === indexes.length && !this.result.aborted;
    this.givenUpInARow = givenUp ? this.givenUpInARow + 1 : 0;
    if (this.givenUpInARow >= ABORT_AFTER_GIVEN_UP_BATCHES) this.result.aborted = true;
  }

  private async send(indexes: number[]): Promise<void> {
    const { result } = this;
    const { calls } = await sendMessageBatch(this.sqs, this.queueUrl, indexes, {
      // The entry Id is the message's position in the input: unique within a call, and maps back to it.
      entry: (index) => {
        const { id, connection } = this.messages[index]!;
        return {
          Id: String(index),
          MessageBody: messageBody(id, connection),
          MessageGroupId: messageGroupIdOf(connection ?? DEFAULT_CONNECTION),
          ...(this.options.lane === 'background' ? { MessageAttributes: { [LANE_ATTRIBUTE]: { DataType: 'String', StringValue: BACKGROUND_LANE } } } : {}),
        };
      },
      attempts: this.maxAttempts,
      delayMs: (attempt) => backoffDelayMs(attempt, this.backoff, this.random),
      sleep: this.sleep,
      onCallError: (error) => {
        if (!isFatal(error)) return 'retry';
        result.aborted = true;
        return 'give-up';
      },
      shouldStop: () => result.aborted,
      onSent: (index, messageId) => void result.sent.push({ ...this.keyAt(index), messageId: messageId ?? '' }),
      onFailed: (index, failure, gaveUpAfter) => void result.failed.push(this.failedId(index, failure, gaveUpAfter)),
      onResend: (count) => {
        result.resent += count;
        this.report();
      },
      onAttemptDone: () => this.report(),
    });
    result.calls += calls;
  }

  /** The id (and connection, when the message names one) of the message at `index`. */
  private keyAt(index: number): { id: string; connection?: string } {
    const { id, connection } = this.messages[index]!;
    return connection === undefined ? { id } : { id, connection };
  }

  private failedId(index: number, failure: EntryFailure, gaveUpAfter: number | undefined): FailedId {
    const key = this.keyAt(index);
    const gaveUp = gaveUpAfter === undefined ? '' : ` (gave up after ${gaveUpAfter} attempts)`;
    switch (failure.kind) {
      case 'refused':
        return { ...key, code: failure.code ?? 'Unknown', message: `${failure.message ?? ''}${gaveUp}`, senderFault: failure.senderFault };
      case 'unanswered':
        return { ...key, code: 'NoResult', message: `the reply did not mention this entry${gaveUp}`, senderFault: false };
      case 'call-failed': {
        const error = failure.error as Error;
        // A call is given up at once only when no other call could get past its error.
        return { ...key, code: error?.name ?? 'Error', message: `${error?.message ?? String(failure.error)}${gaveUp}`, senderFault: gaveUpAfter === undefined };
      }
      case 'stopped':
        return { ...key, code: 'NotSent', message: 'sending stopped after an earlier error', senderFault: false };
    }
  }
}

