/**
 * The local AWS emulator, driven by the real SDK v3 clients (their MD5 checks on): SQS send,
 * receive, delete, visibility, redrive; and the enqueue tool against it.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  MessageNotInflight,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
  TooManyEntriesInBatchRequest,
  BatchEntryIdsNotDistinct,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AwsEmulator } from '../../../dev/fakes/aws-emulator.js';
import { ManualClock } from '../../../dev/fakes/clock.js';
import { md5Hex, md5OfMessageAttributes } from '../../../dev/fakes/sqs-model.js';
import { enqueueIds } from '../../../tools/enqueue/enqueue.js';

let emulator: AwsEmulator;
let sqs: SQSClient;
let queueUrl: string;
let dlqUrl: string;
let n = 0;

beforeAll(async () => {
  // SQS time stands still here: a visibility time-out, a delay or a long poll's wait can only end
  // when a test says so, never because the machine was slow.
  emulator = await AwsEmulator.start({ region: 'eu-west-1', clock: new ManualClock(Date.now()) });
  const config = { endpoint: emulator.endpoint, region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } };
  sqs = new SQSClient(config);
});

afterAll(async () => {
  sqs.destroy();
  await emulator.close();
});

beforeEach(async () => {
  n += 1;
  dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `dlq-${n}` }))).QueueUrl!;
  const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
  queueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: `main-${n}`,
        Attributes: { VisibilityTimeout: '30', RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 3 }) },
      }),
    )
  ).QueueUrl!;
  emulator.sqs.sendFault = undefined;
});

const receive = (visibility?: number, max = 10) =>
  sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: max,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
      ...(visibility !== undefined ? { VisibilityTimeout: visibility } : {}),
    }),
  );

describe('SQS', () => {
  it('creates queues with URLs on its own endpoint and finds them by name', async () => {
    expect(queueUrl).toBe(`${emulator.endpoint}/000000000000/main-${n}`);
    expect((await sqs.send(new GetQueueUrlCommand({ QueueName: `main-${n}` }))).QueueUrl).toBe(queueUrl);
    await expect(sqs.send(new GetQueueUrlCommand({ QueueName: 'nope' }))).rejects.toBeInstanceOf(QueueDoesNotExist);
  });

  it('sends, receives and deletes, with the MD5 digests the client checks', async () => {
    const body = '{"id":"Résumé ✓ 😀"}';
    const sent = await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: body,
        MessageAttributes: { error: { DataType: 'String', StringValue: 'why' } },
      }),
    );
    expect(sent.MD5OfMessageBody).toBe(md5Hex(Buffer.from(body, 'utf8')));
    expect(sent.MD5OfMessageAttributes).toBe(md5OfMessageAttributes({ error: { DataType: 'String', StringValue: 'why' } }));

    const batch = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [
          { Id: 'a', MessageBody: '{"id":"a"}' },
          { Id: 'b', MessageBody: '{"id":"b"}' },
        ],
      }),
    );
    expect(batch.Successful?.map((s) => s.Id)).toEqual(['a', 'b']);
    expect(batch.Failed ?? []).toEqual([]);

    const { Messages = [] } = await receive();
    expect(Messages.map((m) => m.Body)).toEqual([body, '{"id":"a"}', '{"id":"b"}']);
    expect(Messages[0]).toMatchObject({
      MessageId: sent.MessageId,
      MD5OfBody: md5Hex(Buffer.from(body, 'utf8')),
      Attributes: { ApproximateReceiveCount: '1', SenderId: '000000000000' },
      MessageAttributes: { error: { DataType: 'String', StringValue: 'why' } },
    });
    expect(Number(Messages[0]!.Attributes!.SentTimestamp)).toBeGreaterThan(0);

    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: Messages[0]!.ReceiptHandle! }));
    const deleted = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Messages.slice(1).map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
    expect(deleted.Successful?.map((s) => s.Id)).toEqual(['d0', 'd1']);
    expect(emulator.sqs.counts(queueUrl).total).toBe(0);
  });

  it('refuses a batch entry SQS cannot carry as the sender\'s fault, and enforces batch rules', async () => {
    const result = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [
          { Id: 'ok', MessageBody: 'fine' },
          { Id: 'bad', MessageBody: 'bell \u0007' },
        ],
      }),
    );
    expect(result.Successful?.map((s) => s.Id)).toEqual(['ok']);
    expect(result.Failed).toEqual([expect.objectContaining({ Id: 'bad', SenderFault: true, Code: 'InvalidMessageContents' })]);

    const eleven = Array.from({ length: 11 }, (_, i) => ({ Id: `e${i}`, MessageBody: 'x' }));
    await expect(sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: eleven }))).rejects.toBeInstanceOf(TooManyEntriesInBatchRequest);
    await expect(
      sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: [{ Id: 'x', MessageBody: '1' }, { Id: 'x', MessageBody: '2' }] })),
    ).rejects.toBeInstanceOf(BatchEntryIdsNotDistinct);
  });

  it('hides a received message for its visibility time-out; ChangeMessageVisibility brings it back', async () => {
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'm' }));
    const first = (await receive()).Messages!;
    expect(first).toHaveLength(1);
    expect((await receive()).Messages ?? []).toHaveLength(0);
    const attributes = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }));
    expect(attributes.Attributes).toMatchObject({ ApproximateNumberOfMessages: '0', ApproximateNumberOfMessagesNotVisible: '1', VisibilityTimeout: '30' });

    await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: first[0]!.ReceiptHandle!, VisibilityTimeout: 0 }));
    const second = (await receive()).Messages!;
    expect(second[0]!.MessageId).toBe(first[0]!.MessageId);
    expect(second[0]!.Attributes!.ApproximateReceiveCount).toBe('2');
    expect(second[0]!.ReceiptHandle).not.toBe(first[0]!.ReceiptHandle);

    // As SQS: only the latest receipt handle deletes; an old one succeeds without deleting.
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: first[0]!.ReceiptHandle! }));
    expect(emulator.sqs.counts(queueUrl).total).toBe(1);
    // A message not in flight cannot have its visibility changed.
    await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: second[0]!.ReceiptHandle!, VisibilityTimeout: 0 }));
    await expect(
      sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: second[0]!.ReceiptHandle!, VisibilityTimeout: 5 })),
    ).rejects.toBeInstanceOf(MessageNotInflight);
  });

  it('ChangeMessageVisibilityBatch postpones messages (the sync handler\'s Retry-After)', async () => {
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'm' }));
    const [message] = (await receive(0)).Messages!;
    const [again] = (await receive(30)).Messages!;
    expect(again!.MessageId).toBe(message!.MessageId);
    // A receipt handle of a message that is visible again (visibility 0) is not in flight.
    const stale = await sqs.send(
      new ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries: [{ Id: 's', ReceiptHandle: message!.ReceiptHandle!, VisibilityTimeout: 60 }] }),
    );
    expect(stale.Failed).toEqual([expect.objectContaining({ Id: 's', SenderFault: true })]);
    const result = await sqs.send(
      new ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries: [{ Id: 'p', ReceiptHandle: again!.ReceiptHandle!, VisibilityTimeout: 60 }] }),
    );
    expect(result.Successful?.map((s) => s.Id)).toEqual(['p']);
    expect(emulator.sqs.counts(queueUrl)).toMatchObject({ visible: 0, inFlight: 1 });
  });

  it('moves a message received more than maxReceiveCount times to the dead-letter queue', async () => {
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: '{"id":"never-works"}' }));
    for (let i = 1; i <= 3; i++) {
      const { Messages = [] } = await receive(0);
      expect(Messages[0]!.Attributes!.ApproximateReceiveCount).toBe(String(i));
    }
    expect((await receive(0)).Messages ?? []).toHaveLength(0);
    expect(emulator.sqs.counts(queueUrl).total).toBe(0);
    const dead = (
      await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, MessageSystemAttributeNames: ['All'] }))
    ).Messages!;
    expect(dead.map((m) => m.Body)).toEqual(['{"id":"never-works"}']);
    expect(dead[0]!.Attributes!.ApproximateReceiveCount).toBe('4');
  });

  it('long-polls: a receive waiting for messages returns as soon as one is sent', async () => {
    // SQS's longest wait, on a clock that stands still: only the message can end it.
    const waiting = sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, WaitTimeSeconds: 20 }));
    setTimeout(() => void sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'late' })), 150);
    const { Messages = [] } = await waiting;
    expect(Messages.map((m) => m.Body)).toEqual(['late']);
  });

  it('delays a message sent with DelaySeconds', async () => {
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'later', DelaySeconds: 60 }));
    expect((await receive()).Messages ?? []).toHaveLength(0);
    expect(emulator.sqs.counts(queueUrl)).toMatchObject({ delayed: 1, total: 1 });
  });

  it('lets the enqueue tool re-send entries it refuses (real client, injected refusals)', async () => {
    let refusals = 3;
    emulator.sqs.sendFault = ({ id }) =>
      id === '4' && refusals-- > 0 ? { code: 'InternalError', message: 'try again', senderFault: false } : undefined;
    const ids = Array.from({ length: 12 }, (_, i) => `fil-${i}`);
    const result = await enqueueIds(sqs, queueUrl, ids, { sleep: async () => undefined });
    expect(result.failed).toEqual([]);
    expect(result.resent).toBe(3);
    expect(result.sent).toHaveLength(12);
    expect(emulator.sqs.peek(queueUrl).map((m) => m.body).sort()).toEqual(ids.map((id) => JSON.stringify({ id })).sort());
  });
});

describe('requests', () => {
  it('records operations without payloads, and rejects unknown targets', async () => {
    const response = await fetch(emulator.endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-amz-json-1.1', 'X-Amz-Target': 'Nope.Nothing' },
      body: '{}',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ __type: 'UnknownOperationException' });
    expect(emulator.requests.some((r) => r.service === 'sqs' && r.operation === 'SendMessageBatch' && r.status === 200)).toBe(true);
  });
});
