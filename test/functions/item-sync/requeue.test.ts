/**
 * SqsMessageRequeue (functions/item-sync/adapters/sqs.ts): a waiting record is sent again to its own
 * queue, body unchanged, with DelaySeconds and the `postponements` attribute; the exact
 * SendMessageBatch calls, chunking, re-sends of what may pass, and what is reported failed.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  GetQueueUrlCommand,
  QueueDoesNotExist,
  SendMessageBatchCommand,
  SQSClient,
  type SendMessageBatchCommandInput,
} from '@aws-sdk/client-sqs';
import {
  BACKGROUND_LANE,
  LANE_ATTRIBUTE,
  POSTPONEMENTS_ATTRIBUTE,
  QueueUrls,
  RECONCILE_PASS_ATTRIBUTE,
  SqsMessageRequeue,
} from '../../../functions/item-sync/adapters/sqs.js';
import type { RequeueRequest } from '../../../functions/item-sync/ports.js';
import { QUEUE_ARN, QUEUE_URL } from './helpers.js';

const OTHER_ARN = 'arn:aws:sqs:eu-west-1:210987654321:other-queue';
const OTHER_URL = 'https://sqs.eu-west-1.amazonaws.com/210987654321/other-queue';

const sqs = mockClient(SQSClient);

let waits: number[];

beforeEach(() => {
  sqs.reset();
  waits = [];
  sqs.on(GetQueueUrlCommand, { QueueName: 'content-sync-queue', QueueOwnerAWSAccountId: '123456789012' }).resolves({ QueueUrl: QUEUE_URL });
  sqs.on(GetQueueUrlCommand, { QueueName: 'other-queue', QueueOwnerAWSAccountId: '210987654321' }).resolves({ QueueUrl: OTHER_URL });
});

function requeue(client = new SQSClient({ region: 'eu-west-1' })): SqsMessageRequeue {
  return new SqsMessageRequeue(client, new QueueUrls(client), { sleep: async (ms) => void waits.push(ms) });
}

function request(n: number, overrides: Partial<RequeueRequest> = {}): RequeueRequest {
  return { messageId: `msg-${n}`, body: `{"id":"item-${n}"}`, queueArn: QUEUE_ARN, delaySeconds: 15, postponements: 1, ...overrides };
}

/** Accepts every entry whose body `refuse` does not name; refuses those with the given fault. */
function answer(refuse: (body: string, call: number) => { senderFault: boolean; code: string } | undefined): void {
  let call = 0;
  sqs.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommandInput) => {
    call += 1;
    const entries = input.Entries ?? [];
    const refused = entries.map((entry) => ({ entry, why: refuse(entry.MessageBody!, call) }));
    return {
      Successful: refused.filter((r) => !r.why).map((r) => ({ Id: r.entry.Id, MessageId: `new-${r.entry.Id}`, MD5OfMessageBody: 'x' })),
      Failed: refused
        .filter((r) => r.why)
        .map((r) => ({ Id: r.entry.Id, SenderFault: r.why!.senderFault, Code: r.why!.code, Message: 'refused' })),
    };
  });
}

function sentBodies(): string[][] {
  return sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries!.map((entry) => entry.MessageBody!));
}

describe('SqsMessageRequeue', () => {
  it('sends the body unchanged to the queue it came from, with DelaySeconds and postponements (Number)', async () => {
    answer(() => undefined);
    const body = '{"id":"Zoë/日本 🎉","note":"  spaced  "}';
    const requeuer = requeue();

    const failed = await requeuer.requeue([
      { messageId: 'a', body, queueArn: QUEUE_ARN, delaySeconds: 17, postponements: 3 },
      { messageId: 'b', body: 'plain', queueArn: QUEUE_ARN, delaySeconds: 900, postponements: 1 },
    ]);
    await requeuer.requeue([{ messageId: 'c', body: 'again', queueArn: QUEUE_ARN, delaySeconds: 1, postponements: 12 }]);

    expect(failed).toEqual([]);
    expect(POSTPONEMENTS_ATTRIBUTE).toBe('postponements');
    expect(sqs).toHaveReceivedCommandTimes(GetQueueUrlCommand, 1);
    expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          {
            Id: 'm0',
            MessageBody: body,
            DelaySeconds: 17,
            MessageAttributes: { postponements: { DataType: 'Number', StringValue: '3' } },
          },
          {
            Id: 'm1',
            MessageBody: 'plain',
            DelaySeconds: 900,
            MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
          },
        ],
      },
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          {
            Id: 'm0',
            MessageBody: 'again',
            DelaySeconds: 1,
            MessageAttributes: { postponements: { DataType: 'Number', StringValue: '12' } },
          },
        ],
      },
    ]);
  });

  it('sends in chunks of at most 10 entries, in order, Ids unique within each call', async () => {
    answer(() => undefined);
    const requests = Array.from({ length: 23 }, (_, n) => request(n));

    expect(await requeue().requeue(requests)).toEqual([]);

    const calls = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);
    expect(calls.map((input) => input.Entries!.length)).toEqual([10, 10, 3]);
    expect(calls.flatMap((input) => input.Entries!.map((entry) => entry.MessageBody))).toEqual(requests.map((r) => r.body));
    expect(calls[1]!.Entries!.map((entry) => entry.Id)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9']);
    expect(sqs).toHaveReceivedCommandTimes(GetQueueUrlCommand, 1);
  });

  it('sends each record to its own queue', async () => {
    answer(() => undefined);
    expect(await requeue().requeue([request(1), request(2, { queueArn: OTHER_ARN }), request(3)])).toEqual([]);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: [expect.objectContaining({ Id: 'm0', MessageBody: '{"id":"item-1"}' }), expect.objectContaining({ Id: 'm1', MessageBody: '{"id":"item-3"}' })],
    });
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: OTHER_URL,
      Entries: [expect.objectContaining({ Id: 'm0', MessageBody: '{"id":"item-2"}' })],
    });
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 2);
  });

  it('sends entries refused for a reason that may pass (SenderFault false) again, the same entry, a bounded number of times', async () => {
    answer((body, call) =>
      body === '{"id":"item-2"}' || (body === '{"id":"item-1"}' && call === 1) ? { senderFault: false, code: 'InternalError' } : undefined,
    );

    const failed = await requeue().requeue([request(0), request(1, { postponements: 4, delaySeconds: 60 }), request(2)]);

    expect(sentBodies()).toEqual([
      ['{"id":"item-0"}', '{"id":"item-1"}', '{"id":"item-2"}'],
      ['{"id":"item-1"}', '{"id":"item-2"}'],
      ['{"id":"item-2"}'],
    ]);
    expect(sqs).toReceiveNthCommandWith(SendMessageBatchCommand, 2, {
      QueueUrl: QUEUE_URL,
      Entries: [
        {
          Id: 'm0',
          MessageBody: '{"id":"item-1"}',
          DelaySeconds: 60,
          MessageAttributes: { postponements: { DataType: 'Number', StringValue: '4' } },
        },
        {
          Id: 'm1',
          MessageBody: '{"id":"item-2"}',
          DelaySeconds: 15,
          MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
        },
      ],
    });
    expect(waits).toEqual([100, 200]);
    expect(failed).toEqual([{ messageId: 'msg-2', error: 'InternalError: refused' }]);
  });

  it('reports entries refused as the sender’s fault (SenderFault true) failed at once, without sending them again', async () => {
    answer((body) => (body === '{"id":"item-1"}' ? { senderFault: true, code: 'InvalidParameterValue' } : undefined));

    const failed = await requeue().requeue([request(0), request(1), request(2)]);

    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 1);
    expect(waits).toEqual([]);
    expect(failed).toEqual([{ messageId: 'msg-1', error: 'InvalidParameterValue: refused' }]);
  });

  it('reports every entry of a call that throws failed (the SDK retried it already), and goes on with the next chunk', async () => {
    const error = Object.assign(new Error('socket hang up'), { name: 'TimeoutError' });
    sqs
      .on(SendMessageBatchCommand)
      .rejectsOnce(error)
      .callsFake((input: SendMessageBatchCommandInput) => ({
        Successful: input.Entries!.map((entry) => ({ Id: entry.Id, MessageId: 'x', MD5OfMessageBody: 'x' })),
        Failed: [],
      }));

    const failed = await requeue().requeue(Array.from({ length: 12 }, (_, n) => request(n)));

    expect(failed).toEqual(
      Array.from({ length: 10 }, (_, n) => ({ messageId: `msg-${n}`, error: 'SendMessageBatch failed: TimeoutError: socket hang up' })),
    );
    expect(sentBodies().map((bodies) => bodies.length)).toEqual([10, 2]);
    expect(waits).toEqual([]);
  });

  it('reports the records of a queue whose URL cannot be found failed, and sends the others', async () => {
    answer(() => undefined);
    sqs
      .on(GetQueueUrlCommand, { QueueName: 'other-queue', QueueOwnerAWSAccountId: '210987654321' })
      .rejects(new QueueDoesNotExist({ $metadata: {}, message: 'The specified queue does not exist.' }));

    const failed = await requeue().requeue([request(1, { queueArn: OTHER_ARN }), request(2)]);

    expect(failed).toEqual([
      {
        messageId: 'msg-1',
        error: `finding the queue URL of ${OTHER_ARN} failed: QueueDoesNotExist: The specified queue does not exist.`,
      },
    ]);
    expect(sentBodies()).toEqual([['{"id":"item-2"}']]);
  });
});

describe('SqsMessageRequeue, a sweep record (reconcilePass)', () => {
  it('sends reconcilePass (Number) on next to postponements, pass 0 included; a record without it gets none', async () => {
    answer(() => undefined);

    const failed = await requeue().requeue([
      request(1, { reconcilePass: 7, postponements: 3, delaySeconds: 20 }),
      request(2),
      request(3, { reconcilePass: 0 }),
    ]);

    expect(failed).toEqual([]);
    expect(RECONCILE_PASS_ATTRIBUTE).toBe('reconcilePass');
    expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          {
            Id: 'm0',
            MessageBody: '{"id":"item-1"}',
            DelaySeconds: 20,
            MessageAttributes: {
              postponements: { DataType: 'Number', StringValue: '3' },
              reconcilePass: { DataType: 'Number', StringValue: '7' },
            },
          },
          {
            Id: 'm1',
            MessageBody: '{"id":"item-2"}',
            DelaySeconds: 15,
            MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
          },
          {
            Id: 'm2',
            MessageBody: '{"id":"item-3"}',
            DelaySeconds: 15,
            MessageAttributes: {
              postponements: { DataType: 'Number', StringValue: '1' },
              reconcilePass: { DataType: 'Number', StringValue: '0' },
            },
          },
        ],
      },
    ]);
  });
});

describe('SqsMessageRequeue, lanes and message groups', () => {
  it('keeps a background record in its lane (lane = background) and sends every record in its connection’s message group', async () => {
    answer(() => undefined);

    const failed = await requeue().requeue([
      request(1, { body: '{"connection":"acme","id":"item-1"}', connection: 'acme', background: true }),
      request(2, { body: '{"connection":"acme","id":"item-2"}', connection: 'acme', background: true, reconcilePass: 3 }),
      request(3, { connection: 'default' }),
      request(4),
    ]);

    expect(failed).toEqual([]);
    expect([LANE_ATTRIBUTE, BACKGROUND_LANE]).toEqual(['lane', 'background']);
    const postponed = { postponements: { DataType: 'Number', StringValue: '1' } };
    const lane = { lane: { DataType: 'String', StringValue: 'background' } };
    expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          { Id: 'm0', MessageBody: '{"connection":"acme","id":"item-1"}', DelaySeconds: 15, MessageGroupId: 'acme', MessageAttributes: { ...postponed, ...lane } },
          {
            Id: 'm1',
            MessageBody: '{"connection":"acme","id":"item-2"}',
            DelaySeconds: 15,
            MessageGroupId: 'acme',
            MessageAttributes: { ...postponed, reconcilePass: { DataType: 'Number', StringValue: '3' }, ...lane },
          },
          { Id: 'm2', MessageBody: '{"id":"item-3"}', DelaySeconds: 15, MessageGroupId: 'default', MessageAttributes: postponed },
          // A request that names no connection (none could be read): no group.
          { Id: 'm3', MessageBody: '{"id":"item-4"}', DelaySeconds: 15, MessageAttributes: postponed },
        ],
      },
    ]);
  });
});
