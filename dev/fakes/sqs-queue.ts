/**
 * One queue of the SQS model (sqs-model.ts): its attributes and their defaults, its counters, and
 * its messages as stored (their order, whether held or gone; by tenant too, for fair queues), with
 * the redrive policy parsed.
 */
import { isObject, ServiceError } from './service-error.js';
import { FairIndex } from './sqs-fair.js';
import { MAX_MESSAGE_BYTES, type StoredMessage } from './sqs-messages.js';

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

export const QUEUE_DEFAULTS: Record<string, string> = {
  VisibilityTimeout: '30',
  DelaySeconds: '0',
  MaximumMessageSize: String(MAX_MESSAGE_BYTES),
  MessageRetentionPeriod: '345600',
  ReceiveMessageWaitTimeSeconds: '0',
};

export const SETTABLE_QUEUE_ATTRIBUTES = new Set([
  ...Object.keys(QUEUE_DEFAULTS),
  'RedrivePolicy',
  'RedriveAllowPolicy',
  'Policy',
  'SqsManagedSseEnabled',
  'KmsMasterKeyId',
  'KmsDataKeyReusePeriodSeconds',
]);

/** A message as stored: its place in the queue and whether it is still there, besides what SQS shows. */
export interface Entry extends StoredMessage {
  /** Lower is delivered first among visible messages; a duplicate copy goes between two sends. */
  order: number;
  held: boolean;
  gone: boolean;
  /** End of the visibility a ChangeMessageVisibility gave during the latest receive. */
  postponedUntil?: number;
}

export class QueueState implements Queue {
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
  /** Its messages by tenant (MessageGroupId) and those in flight: fair queues (sqs-fair.ts). */
  readonly fair = new FairIndex<Entry>();

  constructor(
    readonly name: string,
    readonly url: string,
    readonly arn: string,
    readonly createdAt: number,
  ) {}
}

export function publicCopy(message: StoredMessage): StoredMessage {
  const { order: _order, held: _held, gone: _gone, postponedUntil: _postponed, ...rest } = message as Entry;
  return structuredClone(rest);
}

export function parseRedrivePolicy(value: string): { targetArn: string; maxReceiveCount: number } {
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

