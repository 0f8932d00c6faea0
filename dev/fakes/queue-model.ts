/**
 * An SQS standard queue as the soak needs it, in process: at-least-once delivery with receive
 * counts, visibility time-outs, ChangeMessageVisibility, injected duplicate copies, and the redrive
 * policy (a message received `maxReceiveCount` times is moved to the dead-letter queue on its next
 * receive, as SQS does). The dead-letter queue is a list here, fed both by the redrive and by the
 * sync function's own SendMessageBatch (records that can never succeed).
 *
 * Time: SQS seconds are scaled to `msPerSecond` real milliseconds (visibility time-outs, delays,
 * the Retry-After a handler applies with ChangeMessageVisibility), so that a 360 s visibility
 * time-out costs 360 ms of wall time at the default scale of 1 ms per second. Handlers themselves
 * run in real time.
 *
 * Unlike SQS, a message stays invisible while its invocation runs, however long that takes (the
 * stacks set the visibility time-out to 6× the function time-out, so SQS would behave the same).
 */
import type { SqsBackend, SqsEntryResult, SqsSendEntry } from './aws-fakes.js';

export interface MessageCopy {
  /** Unique per copy. A duplicate is a second copy with the same messageId (as SQS delivers it). */
  copy: number;
  messageId: string;
  body: string;
  sentAt: number;
  /** Position in the queue: lower is delivered first among visible copies. */
  order: number;
  receiveCount: number;
  visibleAt: number;
  state: 'pending' | 'in-flight' | 'deleted' | 'dead-lettered';
  receiptHandle?: string;
  firstReceivedAt?: number;
  lastReceivedAt?: number;
  /** The Retry-After the handler asked for (ChangeMessageVisibility) during the latest receive, in SQS seconds. */
  postponedSeconds?: number;
  postponedAt?: number;
}

export interface DeadLetterEntry {
  /** `redrive`: moved by the queue after maxReceiveCount; `handler`: sent by the sync function. */
  source: 'redrive' | 'handler';
  body: string;
  /** The original message's id (the `sourceMessageId` attribute, or the redriven message's own id). */
  sourceMessageId: string;
  /** Why: the `error` attribute, or "maxReceiveCount exceeded". */
  reason: string;
  attributes: Record<string, string>;
  at: number;
}

export interface QueueModelOptions {
  name: string;
  deadLetterQueueName: string;
  region?: string;
  accountId?: string;
  maxReceiveCount: number;
  visibilityTimeoutSeconds: number;
  msPerSecond: number;
  now?: () => number;
  /** Fault injection on the handler's SQS calls: [0,1) random source and rates. */
  random?: () => number;
  /** Fraction of dead-letter SendMessageBatch entries refused (SQS answers them in `Failed`). */
  deadLetterSendFailureRate?: number;
  /** Fraction of ChangeMessageVisibility entries refused. */
  visibilityFailureRate?: number;
}

export interface QueueStats {
  sent: number;
  duplicatesInjected: number;
  receives: number;
  /** Deliveries of a copy that had been received before. */
  redeliveries: number;
  deleted: number;
  redriven: number;
  visibilityChanges: number;
  visibilityChangeFailuresInjected: number;
  deadLetterSendFailuresInjected: number;
  /** Postponed copies delivered again before the delay they were given (must stay 0). */
  deliveredBeforeRetryAfter: number;
}

export class QueueModel implements SqsBackend {
  readonly url: string;
  readonly arn: string;
  readonly deadLetterQueueUrl: string;
  readonly deadLetterQueueArn: string;
  readonly deadLetters: DeadLetterEntry[] = [];
  readonly stats: QueueStats = {
    sent: 0,
    duplicatesInjected: 0,
    receives: 0,
    redeliveries: 0,
    deleted: 0,
    redriven: 0,
    visibilityChanges: 0,
    visibilityChangeFailuresInjected: 0,
    deadLetterSendFailuresInjected: 0,
    deliveredBeforeRetryAfter: 0,
  };

  /** Copies not yet deleted or dead-lettered, sorted by `order`. */
  private pending: MessageCopy[] = [];
  private readonly byReceipt = new Map<string, MessageCopy>();
  private readonly now: () => number;
  private readonly random: () => number;
  private nextCopy = 1;
  private nextOrder = 1;
  private nextMessage = 1;
  private inFlight = 0;
  private removedSinceCompaction = 0;

  constructor(private readonly options: QueueModelOptions) {
    const region = options.region ?? 'eu-west-1';
    const account = options.accountId ?? '000000000000';
    this.url = `https://sqs.${region}.amazonaws.com/${account}/${options.name}`;
    this.arn = `arn:aws:sqs:${region}:${account}:${options.name}`;
    this.deadLetterQueueUrl = `https://sqs.${region}.amazonaws.com/${account}/${options.deadLetterQueueName}`;
    this.deadLetterQueueArn = `arn:aws:sqs:${region}:${account}:${options.deadLetterQueueName}`;
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  /** SQS seconds → real milliseconds. */
  scaled(seconds: number): number {
    return seconds * this.options.msPerSecond;
  }

  // ---- producer side ---------------------------------------------------------------------------

  /** Sends a message; returns its first copy. */
  send(body: string, options: { delaySeconds?: number } = {}): MessageCopy {
    this.stats.sent += 1;
    const messageId = messageIdOf(this.nextMessage++);
    return this.insert({
      copy: this.nextCopy++,
      messageId,
      body,
      sentAt: this.now(),
      order: this.nextOrder++,
      receiveCount: 0,
      visibleAt: this.now() + this.scaled(options.delaySeconds ?? 0),
      state: 'pending',
    });
  }

  /**
   * A second copy of a message (same id and body), as SQS's at-least-once delivery produces:
   * `positionsLater` behind the original in the queue and visible after `delaySeconds`.
   */
  duplicate(original: MessageCopy, positionsLater: number, delaySeconds = 0): MessageCopy {
    this.stats.duplicatesInjected += 1;
    return this.insert({
      copy: this.nextCopy++,
      messageId: original.messageId,
      body: original.body,
      sentAt: original.sentAt,
      order: original.order + positionsLater + 0.5,
      receiveCount: 0,
      visibleAt: this.now() + this.scaled(delaySeconds),
      state: 'pending',
    });
  }

  // ---- consumer side (the Lambda event source mapping) -----------------------------------------

  /** Up to `max` visible copies, marked in flight; copies received maxReceiveCount times are redriven instead. */
  receive(max: number): MessageCopy[] {
    const now = this.now();
    const batch: MessageCopy[] = [];
    for (const copy of this.pending) {
      if (batch.length >= max) break;
      if (copy.state !== 'pending' || copy.visibleAt > now) continue;
      if (copy.receiveCount >= this.options.maxReceiveCount) {
        this.redrive(copy);
        continue;
      }
      if (copy.postponedSeconds !== undefined && copy.postponedAt !== undefined) {
        if (now < copy.postponedAt + this.scaled(copy.postponedSeconds)) this.stats.deliveredBeforeRetryAfter += 1;
      }
      copy.postponedSeconds = undefined;
      copy.postponedAt = undefined;
      if (copy.receiveCount > 0) this.stats.redeliveries += 1;
      copy.receiveCount += 1;
      copy.state = 'in-flight';
      copy.firstReceivedAt ??= now;
      copy.lastReceivedAt = now;
      copy.visibleAt = now + this.scaled(this.options.visibilityTimeoutSeconds);
      if (copy.receiptHandle) this.byReceipt.delete(copy.receiptHandle);
      copy.receiptHandle = `rh-${copy.copy}-${copy.receiveCount}-${Math.floor(this.random() * 1e9).toString(36)}`;
      this.byReceipt.set(copy.receiptHandle, copy);
      this.inFlight += 1;
      this.stats.receives += 1;
      batch.push(copy);
    }
    this.compact();
    return batch;
  }

  /** The invocation is over: delete the copy (success) or leave it to become visible again. */
  settle(copy: MessageCopy, success: boolean): void {
    if (copy.state !== 'in-flight') return;
    this.inFlight -= 1;
    if (copy.receiptHandle) this.byReceipt.delete(copy.receiptHandle);
    copy.receiptHandle = undefined;
    if (success) {
      copy.state = 'deleted';
      this.stats.deleted += 1;
      this.removedSinceCompaction += 1;
    } else {
      copy.state = 'pending';
    }
  }

  /** Copies waiting (visible or not) plus copies in flight. */
  get outstanding(): number {
    return this.pending.length - this.removedSinceCompaction;
  }

  get inFlightCount(): number {
    return this.inFlight;
  }

  /** When the next invisible pending copy becomes visible (real ms), if any. */
  nextVisibleAt(): number | undefined {
    let next: number | undefined;
    for (const copy of this.pending) {
      if (copy.state === 'pending' && (next === undefined || copy.visibleAt < next)) next = copy.visibleAt;
    }
    return next;
  }

  hasVisible(): boolean {
    const now = this.now();
    return this.pending.some((copy) => copy.state === 'pending' && copy.visibleAt <= now);
  }

  // ---- the handler's SQS calls (SqsBackend) ------------------------------------------------------

  queueUrl(queueName: string): string | undefined {
    if (queueName === this.options.name) return this.url;
    if (queueName === this.options.deadLetterQueueName) return this.deadLetterQueueUrl;
    return undefined;
  }

  sendMessages(queueUrl: string, entries: SqsSendEntry[]): SqsEntryResult[] {
    if (queueUrl !== this.deadLetterQueueUrl) {
      return entries.map((entry) => ({
        Id: entry.Id,
        error: { Code: 'AWS.SimpleQueueService.NonExistentQueue', Message: `the soak only accepts sends to the dead-letter queue, not ${queueUrl}`, SenderFault: true },
      }));
    }
    const rate = this.options.deadLetterSendFailureRate ?? 0;
    return entries.map((entry) => {
      if (rate > 0 && this.random() < rate) {
        this.stats.deadLetterSendFailuresInjected += 1;
        return { Id: entry.Id, error: { Code: 'InternalError', Message: 'We encountered an internal error. Please try again. (injected)', SenderFault: false } };
      }
      const attributes: Record<string, string> = {};
      for (const [name, value] of Object.entries(entry.MessageAttributes ?? {})) attributes[name] = value.StringValue ?? '';
      this.deadLetters.push({
        source: 'handler',
        body: entry.MessageBody,
        sourceMessageId: attributes['sourceMessageId'] ?? '',
        reason: attributes['error'] ?? '',
        attributes,
        at: this.now(),
      });
      return { Id: entry.Id, MessageId: messageIdOf(0x7fffffff - this.deadLetters.length) };
    });
  }

  changeVisibility(queueUrl: string, entries: Array<{ Id: string; ReceiptHandle: string; VisibilityTimeout: number }>): SqsEntryResult[] {
    const rate = this.options.visibilityFailureRate ?? 0;
    return entries.map((entry) => {
      if (queueUrl !== this.url) {
        return { Id: entry.Id, error: { Code: 'AWS.SimpleQueueService.NonExistentQueue', Message: `no queue ${queueUrl}`, SenderFault: true } };
      }
      const copy = this.byReceipt.get(entry.ReceiptHandle);
      if (!copy || copy.state !== 'in-flight') {
        return { Id: entry.Id, error: { Code: 'ReceiptHandleIsInvalid', Message: 'The receipt handle is not valid (or the message is not in flight).', SenderFault: true } };
      }
      const seconds = Number(entry.VisibilityTimeout);
      if (!Number.isInteger(seconds) || seconds < 0 || seconds > 43_200) {
        return { Id: entry.Id, error: { Code: 'InvalidParameterValue', Message: `VisibilityTimeout ${entry.VisibilityTimeout} is out of range`, SenderFault: true } };
      }
      if (rate > 0 && this.random() < rate) {
        this.stats.visibilityChangeFailuresInjected += 1;
        return { Id: entry.Id, error: { Code: 'InternalError', Message: 'We encountered an internal error. (injected)', SenderFault: false } };
      }
      this.stats.visibilityChanges += 1;
      copy.visibleAt = this.now() + this.scaled(seconds);
      copy.postponedSeconds = seconds;
      copy.postponedAt = this.now();
      return { Id: entry.Id };
    });
  }

  // ---- internals -------------------------------------------------------------------------------

  private insert(copy: MessageCopy): MessageCopy {
    // Binary search for the first copy with a greater order.
    let lo = 0;
    let hi = this.pending.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.pending[mid]!.order <= copy.order) lo = mid + 1;
      else hi = mid;
    }
    this.pending.splice(lo, 0, copy);
    return copy;
  }

  private redrive(copy: MessageCopy): void {
    copy.state = 'dead-lettered';
    this.stats.redriven += 1;
    this.removedSinceCompaction += 1;
    this.deadLetters.push({
      source: 'redrive',
      body: copy.body,
      sourceMessageId: copy.messageId,
      reason: 'maxReceiveCount exceeded',
      attributes: {},
      at: this.now(),
    });
  }

  private compact(): void {
    if (this.removedSinceCompaction < 256 && this.removedSinceCompaction * 4 < this.pending.length) return;
    this.pending = this.pending.filter((copy) => copy.state === 'pending' || copy.state === 'in-flight');
    this.removedSinceCompaction = 0;
  }
}

/** A UUID-shaped message id, deterministic per sequence number. */
function messageIdOf(n: number): string {
  const hex = n.toString(16).padStart(12, '0');
  return `5e0a0000-0000-4000-8000-${hex}`;
}
