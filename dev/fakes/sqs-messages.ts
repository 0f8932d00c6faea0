/**
 * SQS messages as the harness's model stores them (sqs-model.ts), and SQS's rules for them: which
 * messages and receipt handles it refuses, the MD5 digests it answers, the system attributes it
 * shows.
 */
import { createHash } from 'node:crypto';
import { ServiceError } from './service-error.js';
import { MESSAGE_GROUP_ID_PATTERN } from './sqs-fair.js';

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
  /** The sender's MessageGroupId: its tenant in a fair queue (sqs-fair.ts). */
  messageGroupId?: string;
}

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

/** Throws the ServiceError SQS answers for a message it refuses (`maximumBytes`: the queue's MaximumMessageSize). */
export function checkMessage(body: string, attributes: Record<string, MessageAttributeValue>, maximumBytes: number): void {
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
  const limit = maximumBytes;
  if (size > limit) {
    throw new ServiceError('InvalidParameterValue', `One or more parameters are invalid. Reason: Message must be shorter than ${limit} bytes.`, 400, 'InvalidParameterValue');
  }
}

/** Throws the ServiceError SQS answers for a MessageGroupId that is not one (1–128 letters, digits or punctuation). */
export function checkMessageGroupId(value: unknown): void {
  if (typeof value !== 'string' || !MESSAGE_GROUP_ID_PATTERN.test(value)) {
    throw new ServiceError(
      'InvalidParameterValue',
      `Value ${JSON.stringify(value)} for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length.`,
      400,
      'InvalidParameterValue',
    );
  }
}

/** Throws the ServiceError SQS answers for a receipt handle that is not one. */
export function checkHandle(receiptHandle: string): void {
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
    ...(message.messageGroupId !== undefined ? { MessageGroupId: message.messageGroupId } : {}),
  };
}
