/**
 * A small in-memory emulator of the two AWS services the functions use besides DynamoDB, for the
 * local run and tests (no npm package emulates them for SDK v3). One HTTP
 * server on 127.0.0.1 (ephemeral port) speaks the JSON protocols the SDK v3 clients use:
 *
 * - Secrets Manager (awsJson1_1, `X-Amz-Target: secretsmanager.<Operation>`): CreateSecret,
 *   GetSecretValue, PutSecretValue, DescribeSecret, DeleteSecret (immediate).
 * - SQS (awsJson1_0, `X-Amz-Target: AmazonSQS.<Operation>`): CreateQueue, GetQueueUrl, ListQueues,
 *   GetQueueAttributes, SetQueueAttributes, PurgeQueue, SendMessage, SendMessageBatch, ReceiveMessage
 *   (long polling), DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility,
 *   ChangeMessageVisibilityBatch. Standard queues only, with visibility time-outs, delays, receive
 *   counts and a redrive policy that moves a message to its dead-letter queue when it is received
 *   more than `maxReceiveCount` times, as SQS does. Replies carry the MD5 digests the SDK checks.
 *
 * Requests are not authenticated (signatures are ignored). Errors use the `__type` form the SDK
 * parses (plus SQS's `x-amzn-query-error` header). Imports node built-ins only.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOnLoopback } from './loopback.js';

export const EMULATOR_ACCOUNT_ID = '000000000000';

/** SQS's largest message (1 MiB since August 2025; the SDK does not check). */
const MAX_MESSAGE_BYTES = 1024 * 1024;
const MAX_BATCH_ENTRIES = 10;
const MAX_REQUEST_BYTES = 8 * 1024 * 1024;

export interface EmulatorOptions {
  /** Region used in ARNs; default AWS_REGION or us-east-1. */
  region?: string;
}

/** Thrown inside an operation; becomes a 400 (or `status`) JSON error reply. */
class ServiceError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
    /** SQS only: the `x-amzn-query-error` code (`AWS.SimpleQueueService.NonExistentQueue`). */
    readonly queryCode?: string,
  ) {
    super(message);
  }
}

// ---- SQS ----------------------------------------------------------------------------------------

export interface MessageAttributeValue {
  DataType: string;
  StringValue?: string;
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
  /** ARN of the queue the message was first sent to (kept across a redrive). */
  sourceQueueArn: string;
}

export interface QueueState {
  name: string;
  url: string;
  arn: string;
  attributes: Record<string, string>;
  messages: StoredMessage[];
  createdAt: number;
}

/** Which entries of a SendMessageBatch to refuse; lets tests exercise re-sends against the real client. */
export type SendFaultRule = (entry: { queueName: string; id: string; body: string }) =>
  | { code: string; message: string; senderFault: boolean }
  | undefined;

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

/** Characters SQS accepts in a message: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF. */
const INVALID_MESSAGE_CHARACTER = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function requireString(input: Record<string, unknown>, key: string, type = 'MissingParameter'): string {
  const value = input[key];
  if (typeof value !== 'string' || value === '') {
    throw new ServiceError(type, `The request must contain the parameter ${key}.`, 400, 'MissingParameter');
  }
  return value;
}

function optionalInteger(input: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const value = input[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ServiceError(
      'InvalidParameterValue',
      `Value ${JSON.stringify(value)} for parameter ${key} is invalid. Reason: must be between ${min} and ${max}.`,
      400,
      'InvalidParameterValue',
    );
  }
  return value;
}

class SqsEmulator {
  readonly queues = new Map<string, QueueState>();
  sendFault: SendFaultRule | undefined;
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly region: string,
    private readonly origin: () => string,
  ) {}

  // ---- admin API (in process, no HTTP) ----

  /** Creates (or returns) a queue; attributes as in CreateQueue. Returns its URL. */
  createQueue(name: string, attributes: Record<string, string> = {}): string {
    const existing = this.queues.get(name);
    if (existing) return existing.url;
    if (!/^[A-Za-z0-9_-]{1,80}$/.test(name)) {
      throw new ServiceError('InvalidParameterValue', `Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length`, 400, 'InvalidParameterValue');
    }
    const queue: QueueState = {
      name,
      url: `${this.origin()}/${EMULATOR_ACCOUNT_ID}/${name}`,
      arn: `arn:aws:sqs:${this.region}:${EMULATOR_ACCOUNT_ID}:${name}`,
      attributes: { ...QUEUE_DEFAULTS },
      messages: [],
      createdAt: Date.now(),
    };
    this.setAttributes(queue, attributes);
    this.queues.set(name, queue);
    return queue.url;
  }

  /** The queue named by a URL (any host: only the last path segment counts), a name, or an ARN. */
  queue(urlOrName: string): QueueState {
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
      throw new ServiceError(
        'QueueDoesNotExist',
        'The specified queue does not exist.',
        400,
        'AWS.SimpleQueueService.NonExistentQueue',
      );
    }
    return queue;
  }

  /** Every message of a queue as stored (visible, in flight or delayed), without changing anything. */
  peek(urlOrName: string): StoredMessage[] {
    return this.queue(urlOrName).messages.map((m) => structuredClone(m));
  }

  /** Visible, in flight and delayed message counts. */
  counts(urlOrName: string): { visible: number; inFlight: number; delayed: number; total: number } {
    const queue = this.queue(urlOrName);
    const now = Date.now();
    let visible = 0;
    let inFlight = 0;
    let delayed = 0;
    for (const m of queue.messages) {
      if (m.visibleAt <= now) visible += 1;
      else if (m.receiveCount > 0) inFlight += 1;
      else delayed += 1;
    }
    return { visible, inFlight, delayed, total: queue.messages.length };
  }

  close(): void {
    this.closed = true;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  // ---- operations ----

  handle(operation: string, input: Record<string, unknown>): Promise<unknown> | unknown {
    switch (operation) {
      case 'CreateQueue':
        return this.opCreateQueue(input);
      case 'GetQueueUrl':
        return { QueueUrl: this.queue(requireString(input, 'QueueName')).url };
      case 'ListQueues': {
        const prefix = typeof input.QueueNamePrefix === 'string' ? input.QueueNamePrefix : '';
        return { QueueUrls: [...this.queues.values()].filter((q) => q.name.startsWith(prefix)).map((q) => q.url) };
      }
      case 'GetQueueAttributes':
        return this.opGetQueueAttributes(input);
      case 'SetQueueAttributes': {
        const queue = this.queue(requireString(input, 'QueueUrl'));
        this.setAttributes(queue, isObject(input.Attributes) ? (input.Attributes as Record<string, string>) : {});
        return {};
      }
      case 'PurgeQueue':
        this.queue(requireString(input, 'QueueUrl')).messages.length = 0;
        return {};
      case 'SendMessage':
        return this.opSendMessage(input);
      case 'SendMessageBatch':
        return this.opSendMessageBatch(input);
      case 'ReceiveMessage':
        return this.opReceiveMessage(input);
      case 'DeleteMessage':
        this.deleteMessage(this.queue(requireString(input, 'QueueUrl')), requireString(input, 'ReceiptHandle'));
        return {};
      case 'DeleteMessageBatch':
        return this.batch(input, (queue, entry) => {
          this.deleteMessage(queue, requireString(entry, 'ReceiptHandle'));
        });
      case 'ChangeMessageVisibility': {
        const queue = this.queue(requireString(input, 'QueueUrl'));
        const timeout = optionalInteger(input, 'VisibilityTimeout', 0, 43_200);
        if (timeout === undefined) throw new ServiceError('MissingParameter', 'The request must contain the parameter VisibilityTimeout.');
        this.changeVisibility(queue, requireString(input, 'ReceiptHandle'), timeout);
        return {};
      }
      case 'ChangeMessageVisibilityBatch':
        return this.batch(input, (queue, entry) => {
          const timeout = optionalInteger(entry, 'VisibilityTimeout', 0, 43_200) ?? 0;
          this.changeVisibility(queue, requireString(entry, 'ReceiptHandle'), timeout);
        });
      default:
        throw new ServiceError('UnsupportedOperation', `The emulator does not support AmazonSQS.${operation}.`, 400, 'AWS.SimpleQueueService.UnsupportedOperation');
    }
  }

  private setAttributes(queue: QueueState, attributes: Record<string, string>): void {
    for (const [key, value] of Object.entries(attributes)) {
      if (!SETTABLE_QUEUE_ATTRIBUTES.has(key)) {
        throw new ServiceError('InvalidAttributeName', `Unknown Attribute ${key}.`, 400, 'InvalidAttributeName');
      }
      if (key === 'RedrivePolicy') {
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
      } else if (key === 'VisibilityTimeout' || key === 'DelaySeconds' || key === 'ReceiveMessageWaitTimeSeconds') {
        const max = key === 'VisibilityTimeout' ? 43_200 : key === 'DelaySeconds' ? 900 : 20;
        if (!/^\d+$/.test(value) || Number(value) > max) {
          throw new ServiceError('InvalidAttributeValue', `Invalid value for the parameter ${key}.`, 400, 'InvalidAttributeValue');
        }
      }
      queue.attributes[key] = String(value);
    }
  }

  private opCreateQueue(input: Record<string, unknown>): unknown {
    const name = requireString(input, 'QueueName');
    if (name.endsWith('.fifo')) {
      throw new ServiceError('UnsupportedOperation', 'The emulator supports standard queues only.', 400, 'AWS.SimpleQueueService.UnsupportedOperation');
    }
    const attributes = isObject(input.Attributes) ? (input.Attributes as Record<string, string>) : {};
    return { QueueUrl: this.createQueue(name, attributes) };
  }

  private opGetQueueAttributes(input: Record<string, unknown>): unknown {
    const queue = this.queue(requireString(input, 'QueueUrl'));
    const wanted = Array.isArray(input.AttributeNames) ? (input.AttributeNames as string[]) : [];
    const counts = this.counts(queue.name);
    const all: Record<string, string> = {
      ...queue.attributes,
      QueueArn: queue.arn,
      ApproximateNumberOfMessages: String(counts.visible),
      ApproximateNumberOfMessagesNotVisible: String(counts.inFlight),
      ApproximateNumberOfMessagesDelayed: String(counts.delayed),
      CreatedTimestamp: String(Math.floor(queue.createdAt / 1000)),
      LastModifiedTimestamp: String(Math.floor(queue.createdAt / 1000)),
    };
    const names = wanted.includes('All') ? Object.keys(all) : wanted;
    const attributes: Record<string, string> = {};
    for (const name of names) if (all[name] !== undefined) attributes[name] = all[name]!;
    return { Attributes: attributes };
  }

  /** Validates and stores one message; returns the reply fields or throws a ServiceError. */
  private store(queue: QueueState, entry: Record<string, unknown>): { MessageId: string; MD5OfMessageBody: string; MD5OfMessageAttributes?: string } {
    const body = entry.MessageBody;
    if (typeof body !== 'string' || body.length === 0) {
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
    const attributes = this.messageAttributes(entry.MessageAttributes);
    const size = Buffer.byteLength(body, 'utf8') + Object.entries(attributes).reduce(
      (sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value.DataType) + Buffer.byteLength(value.StringValue ?? value.BinaryValue ?? ''),
      0,
    );
    if (size > Number(queue.attributes.MaximumMessageSize ?? MAX_MESSAGE_BYTES)) {
      throw new ServiceError('InvalidParameterValue', `One or more parameters are invalid. Reason: Message must be shorter than ${queue.attributes.MaximumMessageSize} bytes.`, 400, 'InvalidParameterValue');
    }
    const delay = optionalInteger(entry, 'DelaySeconds', 0, 900) ?? Number(queue.attributes.DelaySeconds ?? 0);
    const now = Date.now();
    const message: StoredMessage = {
      messageId: randomUUID(),
      body,
      md5OfBody: md5Hex(Buffer.from(body, 'utf8')),
      messageAttributes: attributes,
      sentAt: now,
      visibleAt: now + delay * 1000,
      receiveCount: 0,
      sourceQueueArn: queue.arn,
    };
    const attributesMd5 = md5OfMessageAttributes(attributes);
    if (attributesMd5) message.md5OfMessageAttributes = attributesMd5;
    queue.messages.push(message);
    this.wake();
    return {
      MessageId: message.messageId,
      MD5OfMessageBody: message.md5OfBody,
      ...(attributesMd5 ? { MD5OfMessageAttributes: attributesMd5 } : {}),
    };
  }

  private messageAttributes(raw: unknown): Record<string, MessageAttributeValue> {
    if (raw === undefined || raw === null) return {};
    if (!isObject(raw)) throw new ServiceError('InvalidParameterValue', 'MessageAttributes must be a map.', 400, 'InvalidParameterValue');
    const out: Record<string, MessageAttributeValue> = {};
    const entries = Object.entries(raw);
    if (entries.length > 10) {
      throw new ServiceError('InvalidParameterValue', 'Number of message attributes [' + entries.length + '] exceeds the allowed maximum [10].', 400, 'InvalidParameterValue');
    }
    for (const [name, value] of entries) {
      if (!isObject(value) || typeof value.DataType !== 'string') {
        throw new ServiceError('InvalidParameterValue', `The message attribute '${name}' must contain a non-empty attribute type.`, 400, 'InvalidParameterValue');
      }
      const attribute: MessageAttributeValue = { DataType: value.DataType };
      if (typeof value.StringValue === 'string') attribute.StringValue = value.StringValue;
      else if (typeof value.BinaryValue === 'string') attribute.BinaryValue = value.BinaryValue;
      else throw new ServiceError('InvalidParameterValue', `The message attribute '${name}' must contain a non-empty message attribute value.`, 400, 'InvalidParameterValue');
      out[name] = attribute;
    }
    return out;
  }

  private opSendMessage(input: Record<string, unknown>): unknown {
    const queue = this.queue(requireString(input, 'QueueUrl'));
    return this.store(queue, input);
  }

  private opSendMessageBatch(input: Record<string, unknown>): unknown {
    const queue = this.queue(requireString(input, 'QueueUrl'));
    const entries = this.batchEntries(input);
    const total = entries.reduce((sum, e) => sum + Buffer.byteLength(String(e.MessageBody ?? ''), 'utf8'), 0);
    if (total > MAX_MESSAGE_BYTES) {
      throw new ServiceError('BatchRequestTooLong', `Batch requests cannot be longer than ${MAX_MESSAGE_BYTES} bytes.`, 400, 'AWS.SimpleQueueService.BatchRequestTooLong');
    }
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const entry of entries) {
      const id = entry.Id as string;
      const fault = this.sendFault?.({ queueName: queue.name, id, body: String(entry.MessageBody ?? '') });
      if (fault) {
        Failed.push({ Id: id, SenderFault: fault.senderFault, Code: fault.code, Message: fault.message });
        continue;
      }
      try {
        Successful.push({ Id: id, ...this.store(queue, entry) });
      } catch (error) {
        if (!(error instanceof ServiceError)) throw error;
        Failed.push({ Id: id, SenderFault: true, Code: error.queryCode ?? error.type, Message: error.message });
      }
    }
    return { Successful, Failed };
  }

  private batchEntries(input: Record<string, unknown>): Record<string, unknown>[] {
    const entries = input.Entries;
    if (!Array.isArray(entries) || entries.length === 0) {
      throw new ServiceError('EmptyBatchRequest', 'There should be at least one SendMessageBatchRequestEntry in the request.', 400, 'AWS.SimpleQueueService.EmptyBatchRequest');
    }
    if (entries.length > MAX_BATCH_ENTRIES) {
      throw new ServiceError('TooManyEntriesInBatchRequest', `Maximum number of entries per request are ${MAX_BATCH_ENTRIES}. You have sent ${entries.length}.`, 400, 'AWS.SimpleQueueService.TooManyEntriesInBatchRequest');
    }
    const seen = new Set<string>();
    for (const entry of entries) {
      const id = isObject(entry) ? entry.Id : undefined;
      if (typeof id !== 'string' || !/^[A-Za-z0-9_-]{1,80}$/.test(id)) {
        throw new ServiceError('InvalidBatchEntryId', 'A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.', 400, 'AWS.SimpleQueueService.InvalidBatchEntryId');
      }
      if (seen.has(id)) {
        throw new ServiceError('BatchEntryIdsNotDistinct', `Id ${id} repeated.`, 400, 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct');
      }
      seen.add(id);
    }
    return entries as Record<string, unknown>[];
  }

  private batch(
    input: Record<string, unknown>,
    apply: (queue: QueueState, entry: Record<string, unknown>) => void,
  ): unknown {
    const queue = this.queue(requireString(input, 'QueueUrl'));
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const entry of this.batchEntries(input)) {
      try {
        apply(queue, entry);
        Successful.push({ Id: entry.Id });
      } catch (error) {
        if (!(error instanceof ServiceError)) throw error;
        Failed.push({ Id: entry.Id, SenderFault: true, Code: error.queryCode ?? error.type, Message: error.message });
      }
    }
    return { Successful, Failed };
  }

  private async opReceiveMessage(input: Record<string, unknown>): Promise<unknown> {
    const queue = this.queue(requireString(input, 'QueueUrl'));
    const max = optionalInteger(input, 'MaxNumberOfMessages', 1, 10) ?? 1;
    const visibility = optionalInteger(input, 'VisibilityTimeout', 0, 43_200) ?? Number(queue.attributes.VisibilityTimeout);
    const wait = optionalInteger(input, 'WaitTimeSeconds', 0, 20) ?? Number(queue.attributes.ReceiveMessageWaitTimeSeconds ?? 0);
    const systemNames = [
      ...(Array.isArray(input.MessageSystemAttributeNames) ? (input.MessageSystemAttributeNames as string[]) : []),
      ...(Array.isArray(input.AttributeNames) ? (input.AttributeNames as string[]) : []),
    ];
    const attributeNames = Array.isArray(input.MessageAttributeNames) ? (input.MessageAttributeNames as string[]) : [];

    const deadline = Date.now() + wait * 1000;
    let received = this.take(queue, max, visibility);
    while (received.length === 0 && Date.now() < deadline && !this.closed) {
      await this.sleepUntilWoken(Math.min(100, deadline - Date.now()));
      received = this.take(queue, max, visibility);
    }
    return { Messages: received.map((m) => this.render(m, systemNames, attributeNames)) };
  }

  /** Receives up to `max` visible messages, moving over-received ones to the dead-letter queue first. */
  private take(queue: QueueState, max: number, visibility: number): StoredMessage[] {
    const now = Date.now();
    const redrive = queue.attributes.RedrivePolicy ? (JSON.parse(queue.attributes.RedrivePolicy) as { deadLetterTargetArn: string; maxReceiveCount: number | string }) : undefined;
    const out: StoredMessage[] = [];
    for (let i = 0; i < queue.messages.length && out.length < max; ) {
      const message = queue.messages[i]!;
      if (message.visibleAt > now) {
        i += 1;
        continue;
      }
      if (redrive && message.receiveCount >= Number(redrive.maxReceiveCount)) {
        const target = [...this.queues.values()].find((q) => q.arn === redrive.deadLetterTargetArn);
        if (target) {
          queue.messages.splice(i, 1);
          message.visibleAt = now;
          delete message.receiptHandle;
          // SQS keeps the receive count and the original sent time across a redrive.
          target.messages.push(message);
          continue;
        }
      }
      message.receiveCount += 1;
      message.firstReceivedAt ??= now;
      message.visibleAt = now + visibility * 1000;
      message.receiptHandle = Buffer.from(`${queue.name}:${message.messageId}:${randomBytes(8).toString('hex')}`).toString('base64url');
      out.push(message);
      i += 1;
    }
    return out;
  }

  private render(message: StoredMessage, systemNames: string[], attributeNames: string[]): Record<string, unknown> {
    const all = systemNames.includes('All');
    const system: Record<string, string> = {};
    const available: Record<string, string> = {
      SenderId: EMULATOR_ACCOUNT_ID,
      SentTimestamp: String(message.sentAt),
      ApproximateReceiveCount: String(message.receiveCount),
      ApproximateFirstReceiveTimestamp: String(message.firstReceivedAt ?? Date.now()),
    };
    for (const [name, value] of Object.entries(available)) {
      if (all || systemNames.includes(name)) system[name] = value;
    }
    const attributes: Record<string, MessageAttributeValue> = {};
    for (const [name, value] of Object.entries(message.messageAttributes)) {
      const wanted = attributeNames.some((pattern) => pattern === 'All' || pattern === '.*' || pattern === name || (pattern.endsWith('.*') && name.startsWith(pattern.slice(0, -1))));
      if (wanted) attributes[name] = value;
    }
    const out: Record<string, unknown> = {
      MessageId: message.messageId,
      ReceiptHandle: message.receiptHandle,
      MD5OfBody: message.md5OfBody,
      Body: message.body,
    };
    if (Object.keys(system).length) out.Attributes = system;
    if (Object.keys(attributes).length) {
      out.MessageAttributes = attributes;
      out.MD5OfMessageAttributes = md5OfMessageAttributes(attributes);
    }
    return out;
  }

  /** The message a receipt handle belongs to, if the handle is the latest one issued for it. */
  private byHandle(queue: QueueState, handle: string): { message?: StoredMessage; index: number } {
    let decoded: string;
    try {
      decoded = Buffer.from(handle, 'base64url').toString('utf8');
    } catch {
      decoded = '';
    }
    const [queueName, messageId, nonce] = decoded.split(':');
    if (!queueName || !messageId || !nonce) {
      throw new ServiceError('ReceiptHandleIsInvalid', `The input receipt handle "${handle}" is not a valid receipt handle.`, 400, 'ReceiptHandleIsInvalid');
    }
    const index = queue.messages.findIndex((m) => m.messageId === messageId);
    const message = index >= 0 ? queue.messages[index] : undefined;
    return message && message.receiptHandle === handle ? { message, index } : { index: -1 };
  }

  /** As SQS: an old handle or an already deleted message succeeds without deleting anything. */
  private deleteMessage(queue: QueueState, handle: string): void {
    const { message, index } = this.byHandle(queue, handle);
    if (message) queue.messages.splice(index, 1);
  }

  private changeVisibility(queue: QueueState, handle: string, timeout: number): void {
    const { message } = this.byHandle(queue, handle);
    const now = Date.now();
    if (!message || message.visibleAt <= now) {
      throw new ServiceError('MessageNotInflight', 'The message referred to is not in flight.', 400, 'AWS.SimpleQueueService.MessageNotInflight');
    }
    message.visibleAt = now + timeout * 1000;
    if (timeout === 0) this.wake();
  }

  private wake(): void {
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  private sleepUntilWoken(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(1, ms));
      this.waiters.add(done);
    });
  }
}

// ---- Secrets Manager ----------------------------------------------------------------------------

interface SecretVersion {
  versionId: string;
  secretString?: string;
  secretBinary?: string;
  stages: string[];
  createdAt: number;
}

interface SecretState {
  name: string;
  arn: string;
  description?: string;
  createdAt: number;
  versions: SecretVersion[];
}

class SecretsEmulator {
  readonly secrets = new Map<string, SecretState>();

  constructor(private readonly region: string) {}

  /** Creates a secret (admin API); a value is optional, as in CreateSecret. */
  create(name: string, secretString?: string): string {
    return (this.handle('CreateSecret', { Name: name, ...(secretString !== undefined ? { SecretString: secretString } : {}) }) as { ARN: string }).ARN;
  }

  /** The current string value, or undefined (admin API). */
  current(secretId: string): string | undefined {
    return this.find(secretId).versions.find((v) => v.stages.includes('AWSCURRENT'))?.secretString;
  }

  handle(operation: string, input: Record<string, unknown>): unknown {
    switch (operation) {
      case 'CreateSecret': {
        const name = requireSecretString(input, 'Name');
        if (this.secrets.has(name)) {
          throw new ServiceError('ResourceExistsException', `The operation failed because the secret ${name} already exists.`);
        }
        const secret: SecretState = {
          name,
          arn: `arn:aws:secretsmanager:${this.region}:${EMULATOR_ACCOUNT_ID}:secret:${name}-${randomBytes(3).toString('hex')}`,
          createdAt: Date.now(),
          versions: [],
          ...(typeof input.Description === 'string' ? { description: input.Description } : {}),
        };
        this.secrets.set(name, secret);
        const version = this.putVersion(secret, input);
        return { ARN: secret.arn, Name: secret.name, ...(version ? { VersionId: version.versionId } : {}) };
      }
      case 'GetSecretValue': {
        const secret = this.find(requireSecretString(input, 'SecretId'));
        const stage = typeof input.VersionStage === 'string' ? input.VersionStage : 'AWSCURRENT';
        const version = typeof input.VersionId === 'string'
          ? secret.versions.find((v) => v.versionId === input.VersionId)
          : secret.versions.find((v) => v.stages.includes(stage));
        if (!version) {
          throw new ServiceError('ResourceNotFoundException', `Secrets Manager can't find the specified secret value for staging label: ${stage}`);
        }
        return {
          ARN: secret.arn,
          Name: secret.name,
          VersionId: version.versionId,
          VersionStages: [...version.stages],
          CreatedDate: version.createdAt / 1000,
          ...(version.secretString !== undefined ? { SecretString: version.secretString } : {}),
          ...(version.secretBinary !== undefined ? { SecretBinary: version.secretBinary } : {}),
        };
      }
      case 'PutSecretValue': {
        const secret = this.find(requireSecretString(input, 'SecretId'));
        if (input.SecretString === undefined && input.SecretBinary === undefined) {
          throw new ServiceError('InvalidParameterException', 'You must provide either SecretString or SecretBinary.');
        }
        const version = this.putVersion(secret, input)!;
        return { ARN: secret.arn, Name: secret.name, VersionId: version.versionId, VersionStages: [...version.stages] };
      }
      case 'DescribeSecret': {
        const secret = this.find(requireSecretString(input, 'SecretId'));
        const versions: Record<string, string[]> = {};
        for (const v of secret.versions) if (v.stages.length) versions[v.versionId] = [...v.stages];
        return {
          ARN: secret.arn,
          Name: secret.name,
          CreatedDate: secret.createdAt / 1000,
          VersionIdsToStages: versions,
          ...(secret.description !== undefined ? { Description: secret.description } : {}),
        };
      }
      case 'DeleteSecret': {
        const secret = this.find(requireSecretString(input, 'SecretId'));
        this.secrets.delete(secret.name);
        return { ARN: secret.arn, Name: secret.name, DeletionDate: Date.now() / 1000 };
      }
      default:
        throw new ServiceError('InvalidRequestException', `The emulator does not support secretsmanager.${operation}.`);
    }
  }

  private find(secretId: string): SecretState {
    const secret = this.secrets.get(secretId) ?? [...this.secrets.values()].find((s) => s.arn === secretId);
    if (!secret) throw new ServiceError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
    return secret;
  }

  private putVersion(secret: SecretState, input: Record<string, unknown>): SecretVersion | undefined {
    const secretString = input.SecretString;
    const secretBinary = input.SecretBinary;
    if (secretString === undefined && secretBinary === undefined) return undefined;
    if (secretString !== undefined && typeof secretString !== 'string') {
      throw new ServiceError('InvalidParameterException', 'SecretString must be a string.');
    }
    const versionId = typeof input.ClientRequestToken === 'string' ? input.ClientRequestToken : randomUUID();
    const existing = secret.versions.find((v) => v.versionId === versionId);
    if (existing) {
      if (existing.secretString !== secretString) {
        throw new ServiceError('ResourceExistsException', 'You can\'t modify an existing version, you can only create new versions.');
      }
      return existing; // idempotent retry of the same request
    }
    for (const v of secret.versions) {
      if (v.stages.includes('AWSPREVIOUS')) v.stages = v.stages.filter((s) => s !== 'AWSPREVIOUS');
      if (v.stages.includes('AWSCURRENT')) v.stages = [...v.stages.filter((s) => s !== 'AWSCURRENT'), 'AWSPREVIOUS'];
    }
    secret.versions = secret.versions.filter((v) => v.stages.length > 0);
    const version: SecretVersion = {
      versionId,
      stages: ['AWSCURRENT'],
      createdAt: Date.now(),
      ...(typeof secretString === 'string' ? { secretString } : {}),
      ...(typeof secretBinary === 'string' ? { secretBinary } : {}),
    };
    secret.versions.push(version);
    return version;
  }
}

function requireSecretString(input: Record<string, unknown>, key: string): string {
  const value = input[key];
  if (typeof value !== 'string' || value === '') {
    throw new ServiceError('InvalidParameterException', `You must specify ${key}.`);
  }
  return value;
}

// ---- HTTP ---------------------------------------------------------------------------------------

export interface RecordedAwsRequest {
  service: 'sqs' | 'secretsmanager' | 'unknown';
  operation: string;
  status: number;
}

export class AwsEmulator {
  readonly endpoint: string;
  readonly region: string;
  readonly sqs: SqsEmulator;
  readonly secrets: SecretsEmulator;
  /** Operation names and statuses, in arrival order (no payloads: they may hold secret values). */
  readonly requests: RecordedAwsRequest[] = [];

  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: Server,
    port: number,
    region: string,
  ) {
    this.endpoint = `http://127.0.0.1:${port}`;
    this.region = region;
    this.sqs = new SqsEmulator(region, () => this.endpoint);
    this.secrets = new SecretsEmulator(region);
  }

  static async start(options: EmulatorOptions = {}): Promise<AwsEmulator> {
    const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
    const server = createServer();
    server.keepAliveTimeout = 30_000;
    const emulator = new AwsEmulator(server, await listenOnLoopback(server), region);
    server.on('request', (req, res) => void emulator.onRequest(req, res));
    return emulator;
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.sqs.close();
      this.server.close(() => resolve());
      // Every connection, long polls included (not only idle ones).
      this.server.closeAllConnections();
    });
    return this.closing;
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.on('error', () => undefined);
    const target = String(req.headers['x-amz-target'] ?? '');
    const dot = target.indexOf('.');
    const prefix = dot < 0 ? '' : target.slice(0, dot);
    const operation = dot < 0 ? '' : target.slice(dot + 1);
    const service = prefix === 'AmazonSQS' ? 'sqs' : prefix === 'secretsmanager' ? 'secretsmanager' : 'unknown';
    const contentType = service === 'sqs' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1';
    const record: RecordedAwsRequest = { service, operation, status: 0 };
    this.requests.push(record);
    try {
      if (req.method !== 'POST') throw new ServiceError('UnsupportedOperation', `The emulator only accepts POST, got ${req.method}.`, 405);
      const text = await readBody(req);
      let input: unknown = {};
      if (text.trim() !== '') {
        try {
          input = JSON.parse(text);
        } catch {
          throw new ServiceError('SerializationException', 'The request body is not JSON.');
        }
      }
      if (!isObject(input)) throw new ServiceError('SerializationException', 'The request body is not a JSON object.');
      let output: unknown;
      if (service === 'sqs') output = await this.sqs.handle(operation, input);
      else if (service === 'secretsmanager') output = this.secrets.handle(operation, input);
      else throw new ServiceError('UnknownOperationException', `Unknown X-Amz-Target "${target}".`);
      this.reply(res, record, 200, contentType, output);
    } catch (error) {
      if (error instanceof ServiceError) {
        const namespace = service === 'sqs' ? 'com.amazonaws.sqs#' : '';
        const headers: Record<string, string> = { 'x-amzn-ErrorType': error.type };
        if (service === 'sqs' && error.queryCode) headers['x-amzn-query-error'] = `${error.queryCode};Sender`;
        this.reply(res, record, error.status, contentType, { __type: `${namespace}${error.type}`, message: error.message }, headers);
      } else {
        this.reply(res, record, 500, contentType, { __type: 'InternalFailure', message: `emulator error: ${String(error)}` });
      }
    }
  }

  private reply(
    res: ServerResponse,
    record: RecordedAwsRequest,
    status: number,
    contentType: string,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    if (res.headersSent || res.destroyed) return;
    const buffer = Buffer.from(JSON.stringify(body ?? {}), 'utf8');
    record.status = status;
    res.writeHead(status, {
      'Content-Type': contentType,
      'Content-Length': buffer.length,
      'x-amzn-RequestId': randomUUID(),
      ...headers,
    });
    res.end(buffer);
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) {
        reject(new ServiceError('RequestEntityTooLarge', 'The request is too large.', 413));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
