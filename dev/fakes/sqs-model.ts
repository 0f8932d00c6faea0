/**
 * SQS as the harness models it, in memory: one model behind the HTTP emulator (aws-emulator.ts via
 * sqs-api.ts), the in-process SDK clients of the bench and the soak, and the soak's event source
 * (in-process-aws.ts).
 *
 * Standard queues with what the sync relies on: at-least-once delivery (and injected duplicate
 * copies), visibility time-outs, delays, ChangeMessageVisibility, receive counts, long polling,
 * message attributes with SQS's MD5 digests, and the redrive policy, which moves a message already
 * received `maxReceiveCount` times to its dead-letter queue on its next receive, as SQS does.
 *
 * Time comes from an injected clock (clock.ts): SQS seconds are 1,000 of its milliseconds, so a
 * scaled clock makes a 360 s visibility time-out last 360 ms of wall time.
 *
 * One thing SQS does not do: a receive can `hold` its messages, which then stay in flight until the
 * holder deletes or releases them, however long that takes. The soak's event source holds what it
 * hands to a handler, since its handlers run in real time while its SQS time is scaled.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { systemClock, type Clock } from './clock.js';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './local-aws.js';
import { isObject, ServiceError } from './service-error.js';

/** SQS's largest message (1 MiB since August 2025; the SDK does not check). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/** SQS's longest visibility time-out, in seconds. */
export const MAX_VISIBILITY_SECONDS = 43_200;

export interface MessageAttributeValue {
  DataType: string;
  StringValue?: string;
  /** Base64, as the JSON protocol carries it. */
  BinaryValue?: string;
}

export interface StoredMessage {
  messageId: string;
  body: string;
  md5OfBody: string;
  messageAttributes: Record<string, MessageAttributeValue>;
  md5OfMessageAttributes?: string;
  sentAt: number;
  /** Time from which the message can be received (delay, visibility time-out). */
  visibleAt: number;
  receiveCount: number;
  firstReceivedAt?: number;
  /** The receipt handle of the latest receive; only it can delete the message or change its visibility. */
  receiptHandle?: string;
  /** Set when the redrive policy moved the message here: the queue it came from. */
  deadLetterQueueSourceArn?: string;
}

export interface QueueStats {
  /** Messages sent to the queue (duplicate copies and redriven messages not included). */
  sent: number;
  duplicatesInjected: number;
  receives: number;
  /** Deliveries of a message that had been received before. */
  redeliveries: number;
  deleted: number;
  /** Messages moved to the dead-letter queue by the redrive policy. */
  redriven: number;
  visibilityChanges: number;
  /** Messages delivered again before the visibility a ChangeMessageVisibility gave them ran out (stays 0). */
  deliveredBeforeRetryAfter: number;
}

export interface Queue {
  readonly name: string;
  readonly url: string;
  readonly arn: string;
  readonly attributes: Readonly<Record<string, string>>;
  readonly createdAt: number;
  readonly stats: Readonly<QueueStats>;
}

export interface QueueCounts {
  visible: number;
  inFlight: number;
  delayed: number;
  total: number;
}

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
}

export interface ReceiveOptions {
  max: number;
  /** Default: the queue's VisibilityTimeout. */
  visibilityTimeoutSeconds?: number;
  /** Keep the messages in flight until deleted or released (see above). */
  hold?: boolean;
}

const QUEUE_DEFAULTS: Record<string, string> = {
  VisibilityTimeout: '30',
  DelaySeconds: '0',
  MaximumMessageSize: String(MAX_MESSAGE_BYTES),
  MessageRetentionPeriod: '345600',
  ReceiveMessageWaitTimeSeconds: '0',
};

const SETTABLE_QUEUE_ATTRIBUTES = new Set([
  ...Object.keys(QUEUE_DEFAULTS),
  'RedrivePolicy',
  'RedriveAllowPolicy',
  'Policy',
  'SqsManagedSseEnabled',
  'KmsMasterKeyId',
  'KmsDataKeyReusePeriodSeconds',
]);

/** Characters SQS accepts in a message: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF. */
const INVALID_MESSAGE_CHARACTER = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

export function md5Hex(data: string | Buffer): string {
  return createHash('md5').update(data).digest('hex');
}

/** SQS's digest of message attributes: names sorted, each as length-prefixed name, type, transport byte, value. */
export function md5OfMessageAttributes(attributes: Record<string, MessageAttributeValue>): string | undefined {
  const names = Object.keys(attributes).sort();
  if (names.length === 0) return undefined;
  const parts: Buffer[] = [];
  const lengthPrefixed = (data: Buffer): void => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    parts.push(length, data);
  };
  for (const name of names) {
    const value = attributes[name]!;
    lengthPrefixed(Buffer.from(name, 'utf8'));
    lengthPrefixed(Buffer.from(value.DataType, 'utf8'));
    if (value.BinaryValue !== undefined) {
      parts.push(Buffer.from([2]));
      lengthPrefixed(Buffer.from(value.BinaryValue, 'base64'));
    } else {
      parts.push(Buffer.from([1]));
      lengthPrefixed(Buffer.from(value.StringValue ?? '', 'utf8'));
    }
  }
  return md5Hex(Buffer.concat(parts));
}

/** A message as stored: its place in the queue and whether it is still there, besides what SQS shows. */
interface Entry extends StoredMessage {
  /** Lower is delivered first among visible messages; a duplicate copy goes between two sends. */
  order: number;
  held: boolean;
  gone: boolean;
  /** End of the visibility a ChangeMessageVisibility gave during the latest receive. */
  postponedUntil?: number;
}

class QueueState implements Queue {
  readonly attributes: Record<string, string> = { ...QUEUE_DEFAULTS };
  readonly stats: QueueStats = {
    sent: 0,
    duplicatesInjected: 0,
    receives: 0,
    redeliveries: 0,
    deleted: 0,
    redriven: 0,
    visibilityChanges: 0,
    deliveredBeforeRetryAfter: 0,
  };
  redrive: { targetArn: string; maxReceiveCount: number } | undefined;
  /** Sorted by order; entries that left (deleted, redriven) are dropped now and then (`removed`). */
  entries: Entry[] = [];
  live = 0;
  removed = 0;
  nextOrder = 1;
  readonly byHandle = new Map<string, Entry>();
  readonly waiters = new Set<() => void>();

  constructor(
    readonly name: string,
    readonly url: string,
    readonly arn: string,
    readonly createdAt: number,
  ) {}
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
    checkMessage(queue, input.body, attributes);
    const now = this.clock.now();
    const delay = input.delaySeconds ?? Number(queue.attributes.DelaySeconds ?? 0);
    const md5OfAttributes = md5OfMessageAttributes(attributes);
    const entry: Entry = {
      messageId: randomUUID(),
      body: input.body,
      md5OfBody: md5Hex(Buffer.from(input.body, 'utf8')),
      messageAttributes: attributes,
      ...(md5OfAttributes ? { md5OfMessageAttributes: md5OfAttributes } : {}),
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

  /** Receives up to `max` visible messages now, moving over-received ones to the dead-letter queue first. */
  receiveNow(queueRef: string | Queue, options: ReceiveOptions): StoredMessage[] {
    const queue = this.state(queueRef);
    const now = this.clock.now();
    const visibility = options.visibilityTimeoutSeconds ?? Number(queue.attributes.VisibilityTimeout);
    const redriveTarget = queue.redrive ? this.byArn(queue.redrive.targetArn) : undefined;
    const target = redriveTarget === queue ? undefined : redriveTarget;
    const out: StoredMessage[] = [];
    for (const entry of queue.entries) {
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
    const entries = queue.entries;
    if (entries.length === 0 || entries[entries.length - 1]!.order <= entry.order) {
      entries.push(entry);
    } else {
      // Binary search for the first entry with a greater order.
      let lo = 0;
      let hi = entries.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (entries[mid]!.order <= entry.order) lo = mid + 1;
        else hi = mid;
      }
      entries.splice(lo, 0, entry);
    }
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

function publicCopy(message: StoredMessage): StoredMessage {
  const { order: _order, held: _held, gone: _gone, postponedUntil: _postponed, ...rest } = message as Entry;
  return structuredClone(rest);
}

function parseRedrivePolicy(value: string): { targetArn: string; maxReceiveCount: number } {
  let policy: unknown;
  try {
    policy = JSON.parse(value);
  } catch {
    throw new ServiceError('InvalidAttributeValue', 'Invalid value for the parameter RedrivePolicy.', 400, 'InvalidAttributeValue');
  }
  const max = isObject(policy) ? Number(policy.maxReceiveCount) : NaN;
  if (!isObject(policy) || typeof policy.deadLetterTargetArn !== 'string' || !(max >= 1 && max <= 1000)) {
    throw new ServiceError(
      'InvalidAttributeValue',
      'Value for parameter RedrivePolicy is invalid. Reason: Redrive policy is not a valid JSON map with deadLetterTargetArn and maxReceiveCount (1 to 1000).',
      400,
      'InvalidAttributeValue',
    );
  }
  return { targetArn: policy.deadLetterTargetArn, maxReceiveCount: max };
}

function checkMessage(queue: QueueState, body: string, attributes: Record<string, MessageAttributeValue>): void {
  if (body.length === 0) {
    throw new ServiceError('MissingParameter', 'The request must contain the parameter MessageBody.', 400, 'MissingParameter');
  }
  if (INVALID_MESSAGE_CHARACTER.test(body)) {
    throw new ServiceError(
      'InvalidMessageContents',
      'Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF',
      400,
      'InvalidMessageContents',
    );
  }
  const size =
    Buffer.byteLength(body, 'utf8') +
    Object.entries(attributes).reduce(
      (sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value.DataType) + Buffer.byteLength(value.StringValue ?? value.BinaryValue ?? ''),
      0,
    );
  const limit = Number(queue.attributes.MaximumMessageSize ?? MAX_MESSAGE_BYTES);
  if (size > limit) {
    throw new ServiceError('InvalidParameterValue', `One or more parameters are invalid. Reason: Message must be shorter than ${limit} bytes.`, 400, 'InvalidParameterValue');
  }
}

function checkHandle(receiptHandle: string): void {
  const parts = Buffer.from(receiptHandle, 'base64url').toString('utf8').split(':');
  if (parts.length !== 4 || parts.some((part) => part === '')) {
    throw new ServiceError('ReceiptHandleIsInvalid', `The input receipt handle "${receiptHandle}" is not a valid receipt handle.`, 400, 'ReceiptHandleIsInvalid');
  }
}

/** SQS's system attributes of a message, by name. */
export function systemAttributes(message: StoredMessage, accountId: string): Record<string, string> {
  return {
    SenderId: accountId,
    SentTimestamp: String(message.sentAt),
    ApproximateReceiveCount: String(message.receiveCount),
    ApproximateFirstReceiveTimestamp: String(message.firstReceivedAt ?? message.sentAt),
    ...(message.deadLetterQueueSourceArn ? { DeadLetterQueueSourceArn: message.deadLetterQueueSourceArn } : {}),
  };
}
