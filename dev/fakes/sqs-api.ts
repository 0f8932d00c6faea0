/**
 * SQS's JSON protocol (awsJson1_0, `X-Amz-Target: AmazonSQS.<Operation>`) over the SQS model: the
 * operations the functions, the enqueue tool and the harness use, with SQS's parameter checks and
 * its reply shapes (MD5 digests included). The HTTP emulator and the in-process clients both answer
 * through `handleSqs`.
 *
 * CreateQueue, GetQueueUrl, ListQueues, GetQueueAttributes, SetQueueAttributes, PurgeQueue,
 * SendMessage, SendMessageBatch, ReceiveMessage (long polling), DeleteMessage, DeleteMessageBatch,
 * ChangeMessageVisibility, ChangeMessageVisibilityBatch. Standard queues only, fair queues among
 * them: SendMessage and SendMessageBatch take a MessageGroupId (the message's tenant), checked as
 * SQS checks it (1–128 letters, digits or punctuation; a batch entry with a bad one is refused alone).
 */
import { isObject, ServiceError } from './service-error.js';
import { checkMessageGroupId } from './sqs-messages.js';
import {
  MAX_MESSAGE_BYTES,
  MAX_VISIBILITY_SECONDS,
  md5OfMessageAttributes,
  systemAttributes,
  type Fault,
  type MessageAttributeValue,
  type Queue,
  type SqsModel,
  type StoredMessage,
} from './sqs-model.js';

const MAX_BATCH_ENTRIES = 10;

type Input = Record<string, unknown>;

export function handleSqs(model: SqsModel, operation: string, input: Input): Promise<unknown> | unknown {
  switch (operation) {
    case 'CreateQueue':
      return createQueue(model, input);
    case 'GetQueueUrl':
      return { QueueUrl: model.queue(requireString(input, 'QueueName')).url };
    case 'ListQueues': {
      const prefix = typeof input.QueueNamePrefix === 'string' ? input.QueueNamePrefix : '';
      return { QueueUrls: model.listQueues(prefix).map((queue) => queue.url) };
    }
    case 'GetQueueAttributes':
      return getQueueAttributes(model, input);
    case 'SetQueueAttributes':
      model.setAttributes(requireString(input, 'QueueUrl'), isObject(input.Attributes) ? (input.Attributes as Record<string, string>) : {});
      return {};
    case 'PurgeQueue':
      model.purge(requireString(input, 'QueueUrl'));
      return {};
    case 'SendMessage':
      return sendMessage(model, input);
    case 'SendMessageBatch':
      return sendMessageBatch(model, input);
    case 'ReceiveMessage':
      return receiveMessage(model, input);
    case 'DeleteMessage':
      model.deleteMessage(requireString(input, 'QueueUrl'), requireString(input, 'ReceiptHandle'));
      return {};
    case 'DeleteMessageBatch':
      return batch(model, input, (queue, entry) => model.deleteMessage(queue, requireString(entry, 'ReceiptHandle')));
    case 'ChangeMessageVisibility': {
      const queue = model.queue(requireString(input, 'QueueUrl'));
      const timeout = optionalInteger(input, 'VisibilityTimeout', 0, MAX_VISIBILITY_SECONDS);
      if (timeout === undefined) throw new ServiceError('MissingParameter', 'The request must contain the parameter VisibilityTimeout.');
      changeVisibility(model, queue, undefined, requireString(input, 'ReceiptHandle'), timeout);
      return {};
    }
    case 'ChangeMessageVisibilityBatch':
      return batch(model, input, (queue, entry) => {
        const timeout = optionalInteger(entry, 'VisibilityTimeout', 0, MAX_VISIBILITY_SECONDS) ?? 0;
        changeVisibility(model, queue, String(entry.Id), requireString(entry, 'ReceiptHandle'), timeout);
      });
    default:
      throw new ServiceError('UnsupportedOperation', `The emulator does not support AmazonSQS.${operation}.`, 400, 'AWS.SimpleQueueService.UnsupportedOperation');
  }
}

/** A stored message as ReceiveMessage returns it, with the system and message attributes asked for. */
export function renderMessage(model: SqsModel, message: StoredMessage, systemNames: readonly string[], attributeNames: readonly string[]): Record<string, unknown> {
  const all = systemNames.includes('All');
  const system: Record<string, string> = {};
  for (const [name, value] of Object.entries(systemAttributes(message, model.accountId))) {
    if (all || systemNames.includes(name)) system[name] = value;
  }
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(message.messageAttributes)) {
    const wanted = attributeNames.some(
      (pattern) => pattern === 'All' || pattern === '.*' || pattern === name || (pattern.endsWith('.*') && name.startsWith(pattern.slice(0, -1))),
    );
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

// ---- operations ----

function createQueue(model: SqsModel, input: Input): unknown {
  const name = requireString(input, 'QueueName');
  if (name.endsWith('.fifo')) {
    throw new ServiceError('UnsupportedOperation', 'The emulator supports standard queues only.', 400, 'AWS.SimpleQueueService.UnsupportedOperation');
  }
  const attributes = isObject(input.Attributes) ? (input.Attributes as Record<string, string>) : {};
  return { QueueUrl: model.createQueue(name, attributes) };
}

function getQueueAttributes(model: SqsModel, input: Input): unknown {
  const queue = model.queue(requireString(input, 'QueueUrl'));
  const wanted = Array.isArray(input.AttributeNames) ? (input.AttributeNames as string[]) : [];
  const counts = model.counts(queue);
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

/** Checks and stores one message (after the injected refusals); returns the reply fields. */
function store(model: SqsModel, queue: Queue, entry: Input, id: string | undefined): { MessageId: string; MD5OfMessageBody: string; MD5OfMessageAttributes?: string } {
  const body = entry.MessageBody;
  if (typeof body !== 'string' || body.length === 0) {
    throw new ServiceError('MissingParameter', 'The request must contain the parameter MessageBody.', 400, 'MissingParameter');
  }
  const attributes = messageAttributes(entry.MessageAttributes);
  const delaySeconds = optionalInteger(entry, 'DelaySeconds', 0, 900);
  const group = entry.MessageGroupId;
  if (group !== undefined && group !== null) checkMessageGroupId(group);
  refuseIf(model.sendFault?.({ queueName: queue.name, ...(id !== undefined ? { id } : {}), body }));
  const message = model.send(queue, {
    body,
    attributes,
    ...(delaySeconds !== undefined ? { delaySeconds } : {}),
    ...(typeof group === 'string' ? { messageGroupId: group } : {}),
  });
  return {
    MessageId: message.messageId,
    MD5OfMessageBody: message.md5OfBody,
    ...(message.md5OfMessageAttributes ? { MD5OfMessageAttributes: message.md5OfMessageAttributes } : {}),
  };
}

function sendMessage(model: SqsModel, input: Input): unknown {
  return store(model, model.queue(requireString(input, 'QueueUrl')), input, undefined);
}

function sendMessageBatch(model: SqsModel, input: Input): unknown {
  const queue = model.queue(requireString(input, 'QueueUrl'));
  const entries = batchEntries(input);
  const total = entries.reduce((sum, e) => sum + Buffer.byteLength(String(e.MessageBody ?? ''), 'utf8'), 0);
  if (total > MAX_MESSAGE_BYTES) {
    throw new ServiceError('BatchRequestTooLong', `Batch requests cannot be longer than ${MAX_MESSAGE_BYTES} bytes.`, 400, 'AWS.SimpleQueueService.BatchRequestTooLong');
  }
  return eachEntry(entries, (entry) => store(model, queue, entry, entry.Id as string));
}

async function receiveMessage(model: SqsModel, input: Input): Promise<unknown> {
  const queue = model.queue(requireString(input, 'QueueUrl'));
  const max = optionalInteger(input, 'MaxNumberOfMessages', 1, 10) ?? 1;
  const visibility = optionalInteger(input, 'VisibilityTimeout', 0, MAX_VISIBILITY_SECONDS);
  const wait = optionalInteger(input, 'WaitTimeSeconds', 0, 20) ?? Number(queue.attributes.ReceiveMessageWaitTimeSeconds ?? 0);
  const systemNames = [
    ...(Array.isArray(input.MessageSystemAttributeNames) ? (input.MessageSystemAttributeNames as string[]) : []),
    ...(Array.isArray(input.AttributeNames) ? (input.AttributeNames as string[]) : []),
  ];
  const attributeNames = Array.isArray(input.MessageAttributeNames) ? (input.MessageAttributeNames as string[]) : [];
  const received = await model.receive(queue, { max, waitSeconds: wait, ...(visibility !== undefined ? { visibilityTimeoutSeconds: visibility } : {}) });
  return { Messages: received.map((message) => renderMessage(model, message, systemNames, attributeNames)) };
}

function changeVisibility(model: SqsModel, queue: Queue, id: string | undefined, receiptHandle: string, seconds: number): void {
  model.inFlight(queue, receiptHandle);
  refuseIf(model.visibilityFault?.({ queueName: queue.name, ...(id !== undefined ? { id } : {}) }));
  model.changeVisibility(queue, receiptHandle, seconds);
}

// ---- parameters ----

function refuseIf(fault: Fault | undefined): void {
  if (fault) throw new ServiceError(fault.code, fault.message, fault.senderFault ? 400 : 500, fault.code);
}

function messageAttributes(raw: unknown): Record<string, MessageAttributeValue> {
  if (raw === undefined || raw === null) return {};
  if (!isObject(raw)) throw new ServiceError('InvalidParameterValue', 'MessageAttributes must be a map.', 400, 'InvalidParameterValue');
  const out: Record<string, MessageAttributeValue> = {};
  const entries = Object.entries(raw);
  if (entries.length > 10) {
    throw new ServiceError('InvalidParameterValue', `Number of message attributes [${entries.length}] exceeds the allowed maximum [10].`, 400, 'InvalidParameterValue');
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

function batchEntries(input: Input): Input[] {
  const entries = input.Entries;
  if (!Array.isArray(entries) || entries.length === 0) {
    throw new ServiceError('EmptyBatchRequest', 'There should be at least one SendMessageBatchRequestEntry in the request.', 400, 'AWS.SimpleQueueService.EmptyBatchRequest');
  }
  if (entries.length > MAX_BATCH_ENTRIES) {
    throw new ServiceError(
      'TooManyEntriesInBatchRequest',
      `Maximum number of entries per request are ${MAX_BATCH_ENTRIES}. You have sent ${entries.length}.`,
      400,
      'AWS.SimpleQueueService.TooManyEntriesInBatchRequest',
    );
  }
  const seen = new Set<string>();
  for (const entry of entries) {
    const id = isObject(entry) ? entry.Id : undefined;
    if (typeof id !== 'string' || !/^[A-Za-z0-9_-]{1,80}$/.test(id)) {
      throw new ServiceError(
        'InvalidBatchEntryId',
        'A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.',
        400,
        'AWS.SimpleQueueService.InvalidBatchEntryId',
      );
    }
    if (seen.has(id)) throw new ServiceError('BatchEntryIdsNotDistinct', `Id ${id} repeated.`, 400, 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct');
    seen.add(id);
  }
  return entries as Input[];
}

/** Applies `apply` to each entry; an entry that fails is reported in `Failed`, the others in `Successful`. */
function eachEntry(entries: Input[], apply: (entry: Input) => object | void): { Successful: unknown[]; Failed: unknown[] } {
  const Successful: unknown[] = [];
  const Failed: unknown[] = [];
  for (const entry of entries) {
    try {
      Successful.push({ Id: entry.Id, ...(apply(entry) ?? {}) });
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      Failed.push({ Id: entry.Id, SenderFault: error.senderFault, Code: error.queryCode ?? error.type, Message: error.message });
    }
  }
  return { Successful, Failed };
}

function batch(model: SqsModel, input: Input, apply: (queue: Queue, entry: Input) => void): unknown {
  const queue = model.queue(requireString(input, 'QueueUrl'));
  return eachEntry(batchEntries(input), (entry) => apply(queue, entry));
}

function requireString(input: Input, key: string): string {
  const value = input[key];
  if (typeof value !== 'string' || value === '') {
    throw new ServiceError('MissingParameter', `The request must contain the parameter ${key}.`, 400, 'MissingParameter');
  }
  return value;
}

function optionalInteger(input: Input, key: string, min: number, max: number): number | undefined {
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
