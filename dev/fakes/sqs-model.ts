/**
 * SQS as the harness models it, in memory: one model behind the HTTP emulator (aws-emulator.ts via
 * sqs-api.ts), the in-process SDK clients of the bench and the soak, and the soak's event source
 * (in-process-aws.ts).
 *
 * Standard queues with what the sync relies on: at-least-once delivery (and injected duplicate
 * copies), visibility time-outs, delays, ChangeMessageVisibility, receive counts, long polling,
 * message attributes with SQS's MD5 digests, the redrive policy, which moves a message already
 * received `maxReceiveCount` times to its dead-letter queue on its next receive, as SQS does, and
 * fair queues: a message's MessageGroupId is its tenant, and a receive returns quiet tenants'
 * messages before a noisy tenant's (sqs-fair.ts). A queue without groups delivers in queue order.
 *
 * Time comes from an injected clock (clock.ts): SQS seconds are 1,000 of its milliseconds, so a
 * scaled clock makes a 360 s visibility time-out last 360 ms of wall time.
 *
 * One thing SQS does not do: a receive can `hold` its messages, which then stay in flight until the
 * holder deletes or releases them, however long that takes. The soak's event source holds what it
 * hands to a handler, since its handlers run in real time while its SQS time is scaled.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { systemClock, type Clock } from './clock.js';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './local-aws.js';
import { ServiceError } from './service-error.js';
import {
  checkHandle,
  checkMessage,
  checkMessageGroupId,
  MAX_MESSAGE_BYTES,
  MAX_VISIBILITY_SECONDS,
  md5Hex,
  md5OfMessageAttributes,
  type MessageAttributeValue,
  type StoredMessage,
} from './sqs-messages.js';

import { insertInOrder } from './sqs-fair.js';
import { parseRedrivePolicy, publicCopy, QueueState, SETTABLE_QUEUE_ATTRIBUTES, type Entry, type Queue, type QueueCounts } from './sqs-queue.js';

export type { Queue, QueueCounts, QueueStats } from './sqs-queue.js';
export { MAX_MESSAGE_BYTES, MAX_VISIBILITY_SECONDS, md5Hex, md5OfMessageAttributes, systemAttributes, type MessageAttributeValue, type StoredMessage } from './sqs-messages.js';


export interface Fault {
  code: string;
  message: string;
  senderFault: boolean;
}

/** Which sends to refuse (a SendMessageBatch entry, or a SendMessage when `id` is undefined). */
export type SendFaultRule = (entry: { queueName: string; id?: string; body: string }) => Fault | undefined;
/** Which ChangeMessageVisibility requests (of messages in flight) to refuse. */
export type VisibilityFaultRule = (entry: { queueName: string; id?: string }) => Fault | undefined;

export interface SqsModelOptions {
  region?: string;
  accountId?: string;
  /** Scheme and host of the queue URLs; default `https://sqs.<region>.amazonaws.com`. */
  origin?: () => string;
  clock?: Clock;
}

export interface SendInput {
  body: string;
  attributes?: Record<string, MessageAttributeValue>;
  delaySeconds?: number;
  /** The message's tenant in a fair queue (1–128 letters, digits or punctuation). */
  messageGroupId?: string;
}

export interface ReceiveOptions {
  max: number;
  /** Default: the queue's VisibilityTimeout. */
  visibilityTimeoutSeconds?: number;
  /** Keep the messages in flight until deleted or released (see above). */
  hold?: boolean;
}

export class SqsModel {
  readonly region: string;
  readonly accountId: string;
  readonly clock: Clock;
  /** Refusals to inject into sends made through the API (not into `send`). */
  sendFault: SendFaultRule | undefined;
  /** Refusals to inject into ChangeMessageVisibility calls made through the API. */
  visibilityFault: VisibilityFaultRule | undefined;

  private readonly queues = new Map<string, QueueState>();
  private readonly origin: () => string;
  private handles = 0;
  private closed = false;

  constructor(options: SqsModelOptions = {}) {
    this.region = options.region ?? LOCAL_REGION;
    this.accountId = options.accountId ?? LOCAL_ACCOUNT_ID;
    this.clock = options.clock ?? systemClock;
    this.origin = options.origin ?? (() => `https://sqs.${this.region}.amazonaws.com`);
  }

  // ---- queues ----

  /** Creates (or returns) a queue; attributes as in CreateQueue. Returns its URL. */
  createQueue(name: string, attributes: Record<string, string> = {}): string {
    const existing = this.queues.get(name);
    if (existing) return existing.url;
    if (!/^[A-Za-z0-9_-]{1,80}$/.test(name)) {
      throw new ServiceError('InvalidParameterValue', `Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length`, 400, 'InvalidParameterValue');
    }
    const queue = new QueueState(
      name,
      `${this.origin()}/${this.accountId}/${name}`,
      `arn:aws:sqs:${this.region}:${this.accountId}:${name}`,
      this.clock.now(),
    );
    this.setAttributes(queue, attributes);
    this.queues.set(name, queue);
    return queue.url;
  }

  /** The queue named by a URL (any host: only the last path segment counts), a name, or an ARN. */
  queue(urlOrName: string): Queue {
    return this.state(urlOrName);
  }

  listQueues(prefix = ''): Queue[] {
    return [...this.queues.values()].filter((queue) => queue.name.startsWith(prefix));
  }

  setAttributes(queueRef: string | Queue, attributes: Record<string, string>): void {
    const queue = this.state(queueRef);
    for (const [key, value] of Object.entries(attributes)) {
      if (!SETTABLE_QUEUE_ATTRIBUTES.has(key)) {
        throw new ServiceError('InvalidAttributeName', `Unknown Attribute ${key}.`, 400, 'InvalidAttributeName');
      }
      if (key === 'RedrivePolicy') queue.redrive = parseRedrivePolicy(value);
      else if (key === 'VisibilityTimeout' || key === 'DelaySeconds' || key === 'ReceiveMessageWaitTimeSeconds') {
        const max = key === 'VisibilityTimeout' ? MAX_VISIBILITY_SECONDS : key === 'DelaySeconds' ? 900 : 20;
        if (!/^\d+$/.test(value) || Number(value) > max) {
          throw new ServiceError('InvalidAttributeValue', `Invalid value for the parameter ${key}.`, 400, 'InvalidAttributeValue');
        }
      }
      queue.attributes[key] = String(value);
    }
  }

  purge(queueRef: string | Queue): void {
    const queue = this.state(queueRef);
    queue.entries = [];
    queue.fair.clear();
    queue.byHandle.clear();
    queue.live = 0;
    queue.removed = 0;
    this.notify(queue);
  }

  /** Visible, in flight and delayed message counts. */
  counts(queueRef: string | Queue): QueueCounts {
    const queue = this.state(queueRef);
    const now = this.clock.now();
    const counts: QueueCounts = { visible: 0, inFlight: 0, delayed: 0, total: queue.live };
    for (const entry of queue.entries) {
      if (entry.gone) continue;
      if (entry.held) counts.inFlight += 1;
      else if (entry.visibleAt <= now) counts.visible += 1;
      else if (entry.receiveCount > 0) counts.inFlight += 1;
      else counts.delayed += 1;
    }
    return counts;
  }

  /** Messages in the queue: visible, in flight and delayed. */
  size(queueRef: string | Queue): number {
    return this.state(queueRef).live;
  }

  /** Every message of a queue as stored (visible, in flight or delayed), in queue order, without changing anything. */
  peek(queueRef: string | Queue): StoredMessage[] {
    return this.state(queueRef).entries.filter((entry) => !entry.gone).map(publicCopy);
  }

  /** Ends every long poll; receives then return at once. */
  close(): void {
    this.closed = true;
    for (const queue of this.queues.values()) this.notify(queue);
  }

  // ---- messages ----

  /** Stores a message; throws a ServiceError for one SQS would refuse. */
  send(queueRef: string | Queue, input: SendInput): StoredMessage {
    const queue = this.state(queueRef);
    const attributes = input.attributes ?? {};
    checkMessage(input.body, attributes, Number(queue.attributes.MaximumMessageSize ?? MAX_MESSAGE_BYTES));
    if (input.messageGroupId !== undefined) checkMessageGroupId(input.messageGroupId);
    const now = this.clock.now();
    const delay = input.delaySeconds ?? Number(queue.attributes.DelaySeconds ?? 0);
    const md5OfAttributes = md5OfMessageAttributes(attributes);
    const entry: Entry = {
      messageId: randomUUID(),
      body: input.body,
      md5OfBody: md5Hex(Buffer.from(input.body, 'utf8')),
      messageAttributes: attributes,
      ...(md5OfAttributes ? { md5OfMessageAttributes: md5OfAttributes } : {}),
      ...(input.messageGroupId !== undefined ? { messageGroupId: input.messageGroupId } : {}),
      sentAt: now,
      visibleAt: now + delay * 1000,
      receiveCount: 0,
      order: queue.nextOrder++,
      held: false,
      gone: false,
    };
    queue.stats.sent += 1;
    this.insert(queue, entry);
    return entry;
  }

  /**
   * A second copy of a message (same id and body), as SQS's at-least-once delivery produces:
   * `positionsLater` sends behind the original and visible after `delaySeconds`.
   */
  duplicate(queueRef: string | Queue, original: StoredMessage, positionsLater: number, delaySeconds = 0): StoredMessage {
    const queue = this.state(queueRef);
    const source = original as Partial<Entry>;
    const entry: Entry = {
      ...publicCopy(original),
      receiveCount: 0,
      visibleAt: this.clock.now() + delaySeconds * 1000,
      order: (source.order ?? queue.nextOrder) + positionsLater + 0.5,
      held: false,
      gone: false,
    };
    delete entry.receiptHandle;
    delete entry.firstReceivedAt;
    queue.stats.duplicatesInjected += 1;
    this.insert(queue, entry);
    return entry;
  }

  /**
   * Receives up to `max` visible messages now, moving over-received ones to the dead-letter queue
   * first: in queue order, or, while some tenant is noisy, quiet tenants' messages first (sqs-fair.ts).
   */
  receiveNow(queueRef: string | Queue, options: ReceiveOptions): StoredMessage[] {
    const queue = this.state(queueRef);
    const now = this.clock.now();
    const visibility = options.visibilityTimeoutSeconds ?? Number(queue.attributes.VisibilityTimeout);
    const redriveTarget = queue.redrive ? this.byArn(queue.redrive.targetArn) : undefined;
    const target = redriveTarget === queue ? undefined : redriveTarget;
    const out: StoredMessage[] = [];
    const noisy = queue.fair.noisy(now);
    for (const entry of noisy.size === 0 ? queue.entries : queue.fair.fairOrder(now, noisy)) {
      if (out.length >= options.max) break;
      if (entry.gone || entry.held || entry.visibleAt > now) continue;
      if (target && entry.receiveCount >= queue.redrive!.maxReceiveCount) {
        this.redrive(queue, entry, target);
        continue;
      }
      this.deliver(queue, entry, now, visibility, options.hold === true);
      out.push(entry);
    }
    this.compact(queue);
    return out;
  }

  /** As receiveNow, but waits up to `waitSeconds` (long polling) for a message to become visible. */
  async receive(queueRef: string | Queue, options: ReceiveOptions & { waitSeconds?: number }): Promise<StoredMessage[]> {
    const queue = this.state(queueRef);
    const deadline = this.clock.now() + (options.waitSeconds ?? 0) * 1000;
    for (;;) {
      const received = this.receiveNow(queue, options);
      const now = this.clock.now();
      if (received.length > 0 || now >= deadline || this.closed) return received;
      await this.waitForChange(queue, Math.min(deadline, this.nextVisibleAt(queue) ?? Infinity) - now);
    }
  }

  /** As SQS: an old handle, or one of a message already deleted, succeeds without deleting anything. */
  deleteMessage(queueRef: string | Queue, receiptHandle: string): void {
    const queue = this.state(queueRef);
    checkHandle(receiptHandle);
    const entry = queue.byHandle.get(receiptHandle);
    if (!entry) return;
    this.remove(queue, entry);
    queue.stats.deleted += 1;
    this.notify(queue);
  }

  /** The message a receipt handle gives, if it is in flight; throws the error SQS answers otherwise. */
  inFlight(queueRef: string | Queue, receiptHandle: string): StoredMessage {
    const queue = this.state(queueRef);
    checkHandle(receiptHandle);
    const entry = queue.byHandle.get(receiptHandle);
    if (!entry) {
      throw new ServiceError('ReceiptHandleIsInvalid', 'The receipt handle has expired (the message was received again or deleted).', 400, 'ReceiptHandleIsInvalid');
    }
    if (!entry.held && entry.visibleAt <= this.clock.now()) {
      throw new ServiceError('MessageNotInflight', 'The message referred to is not in flight.', 400, 'AWS.SimpleQueueService.MessageNotInflight');
    }
    return entry;
  }

  changeVisibility(queueRef: string | Queue, receiptHandle: string, seconds: number): void {
    const queue = this.state(queueRef);
    const entry = this.inFlight(queue, receiptHandle) as Entry;
    entry.visibleAt = this.clock.now() + seconds * 1000;
    entry.postponedUntil = entry.visibleAt;
    queue.stats.visibilityChanges += 1;
    this.notify(queue);
  }

  /** Ends the hold of a received message: it is visible again once its visibility time-out has passed. */
  release(queueRef: string | Queue, receiptHandle: string): void {
    const queue = this.state(queueRef);
    const entry = queue.byHandle.get(receiptHandle);
    if (!entry?.held) return;
    entry.held = false;
    this.notify(queue);
  }

  // ---- internals ----

  private state(ref: string | Queue): QueueState {
    if (ref instanceof QueueState) return ref;
    const urlOrName = typeof ref === 'string' ? ref : ref.name;
    let name = urlOrName;
    if (/^https?:\/\//.test(urlOrName)) {
      try {
        name = new URL(urlOrName).pathname.split('/').filter(Boolean).pop() ?? '';
      } catch {
        throw new ServiceError('InvalidAddress', `The address ${urlOrName} is not valid for this endpoint.`, 404, 'InvalidAddress');
      }
    } else if (urlOrName.startsWith('arn:')) {
      name = urlOrName.split(':').pop() ?? '';
    }
    const queue = this.queues.get(name);
    if (!queue) {
      throw new ServiceError('QueueDoesNotExist', 'The specified queue does not exist.', 400, 'AWS.SimpleQueueService.NonExistentQueue');
    }
    return queue;
  }

  private byArn(arn: string): QueueState | undefined {
    return [...this.queues.values()].find((queue) => queue.arn === arn);
  }

  private insert(queue: QueueState, entry: Entry): void {
    insertInOrder(queue.entries, entry);
    queue.fair.add(entry);
    queue.live += 1;
    this.notify(queue);
  }

  private deliver(queue: QueueState, entry: Entry, now: number, visibilitySeconds: number, hold: boolean): void {
    if (entry.postponedUntil !== undefined && now < entry.postponedUntil) queue.stats.deliveredBeforeRetryAfter += 1;
    delete entry.postponedUntil;
    if (entry.receiveCount > 0) queue.stats.redeliveries += 1;
    entry.receiveCount += 1;
    entry.firstReceivedAt ??= now;
    entry.visibleAt = now + visibilitySeconds * 1000;
    entry.held = hold;
    if (entry.receiptHandle) queue.byHandle.delete(entry.receiptHandle);
    this.handles += 1;
    entry.receiptHandle = Buffer.from(`${queue.name}:${entry.messageId}:${this.handles}:${randomBytes(4).toString('hex')}`).toString('base64url');
    queue.byHandle.set(entry.receiptHandle, entry);
    queue.fair.delivered(entry);
    queue.stats.receives += 1;
  }

  /** SQS keeps the id, the body, the receive count and the sent time across a redrive. */
  private redrive(queue: QueueState, entry: Entry, target: QueueState): void {
    this.remove(queue, entry);
    queue.stats.redriven += 1;
    const moved: Entry = { ...publicCopy(entry), visibleAt: this.clock.now(), order: target.nextOrder++, held: false, gone: false };
    delete moved.receiptHandle;
    moved.deadLetterQueueSourceArn = queue.arn;
    this.insert(target, moved);
  }

  private remove(queue: QueueState, entry: Entry): void {
    entry.gone = true;
    entry.held = false;
    if (entry.receiptHandle) queue.byHandle.delete(entry.receiptHandle);
    queue.fair.removed(entry);
    queue.live -= 1;
    queue.removed += 1;
  }

  private compact(queue: QueueState): void {
    if (queue.removed < 256 && queue.removed * 4 < queue.entries.length) return;
    queue.entries = queue.entries.filter((entry) => !entry.gone);
    queue.removed = 0;
  }

  /** When the next message that waits for its time (delay, visibility) becomes visible. */
  private nextVisibleAt(queue: QueueState): number | undefined {
    let next: number | undefined;
    for (const entry of queue.entries) {
      if (!entry.gone && !entry.held && (next === undefined || entry.visibleAt < next)) next = entry.visibleAt;
    }
    return next;
  }

  private waitForChange(queue: QueueState, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        timer.cancel();
        queue.waiters.delete(done);
        resolve();
      };
      const timer = this.clock.setTimer(ms, done);
      queue.waiters.add(done);
    });
  }

  /** Wakes the long polls of a queue: something in it changed. */
  private notify(queue: QueueState): void {
    const waiters = [...queue.waiters];
    queue.waiters.clear();
    for (const wake of waiters) wake();
  }
}

