/** The SQS model behaves as SQS does where the soak and the emulator rely on it, on an injected clock. */
import { describe, expect, it } from 'vitest';
import { deadLetterEntries } from '../../../dev/bench/soak/checks.js';
import { ManualClock, scaledClock } from '../../../dev/fakes/clock.js';
import { handleSqs } from '../../../dev/fakes/sqs-api.js';
import { SqsModel, type StoredMessage } from '../../../dev/fakes/sqs-model.js';

/** Queue `sync` (visibility 30 s, redrive to `dead` after 3 receives); one SQS second lasts 10 ms of the test's clock. */
function model() {
  const clock = new ManualClock(1_000);
  const sqs = new SqsModel({ clock: scaledClock(100, clock) });
  const deadUrl = sqs.createQueue('dead');
  const url = sqs.createQueue('sync', {
    VisibilityTimeout: '30',
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: sqs.queue('dead').arn, maxReceiveCount: 3 }),
  });
  const receive = (max = 10): StoredMessage[] => sqs.receiveNow('sync', { max, hold: true });
  /** The end of an invocation, as the soak's event source does it. */
  const settle = (message: StoredMessage, success: boolean): void =>
    success ? sqs.deleteMessage('sync', message.receiptHandle!) : sqs.release('sync', message.receiptHandle!);
  return { sqs, url, deadUrl, clock, receive, settle, advance: (ms: number) => clock.advance(ms) };
}

describe('SqsModel', () => {
  it('delivers in order, hides a delivered message and deletes it on success', () => {
    const { sqs, receive, settle } = model();
    sqs.send('sync', { body: '{"id":"a"}' });
    sqs.send('sync', { body: '{"id":"b"}' });
    const batch = receive();
    expect(batch.map((message) => message.body)).toEqual(['{"id":"a"}', '{"id":"b"}']);
    expect(receive()).toEqual([]);
    for (const message of batch) settle(message, true);
    expect(sqs.size('sync')).toBe(0);
    expect(sqs.queue('sync').stats.deleted).toBe(2);
  });

  it('makes a failed message visible again after the (scaled) visibility time-out, counting the redelivery', () => {
    const { sqs, receive, settle, advance } = model();
    sqs.send('sync', { body: 'a' });
    const [message] = receive();
    settle(message!, false);
    advance(299);
    expect(receive()).toEqual([]);
    advance(1);
    const again = receive();
    expect(again).toHaveLength(1);
    expect(again[0]!.receiveCount).toBe(2);
    expect(sqs.queue('sync').stats.redeliveries).toBe(1);
  });

  it('keeps a held message in flight past its visibility time-out until it is released', () => {
    const { sqs, receive, settle, advance } = model();
    sqs.send('sync', { body: 'a' });
    const [message] = receive();
    advance(1_000);
    expect(receive()).toEqual([]);
    expect(sqs.counts('sync')).toMatchObject({ visible: 0, inFlight: 1 });
    settle(message!, false);
    expect(receive()).toHaveLength(1);
  });

  it('moves a message received maxReceiveCount times to the dead-letter queue on its next receive', () => {
    const { sqs, receive, settle, advance } = model();
    const sent = sqs.send('sync', { body: 'doomed' });
    for (let i = 0; i < 3; i += 1) {
      const [message] = receive();
      expect(message?.messageId).toBe(sent.messageId);
      settle(message!, false);
      advance(300);
    }
    expect(receive()).toEqual([]);
    expect(deadLetterEntries(sqs.peek('dead'))).toEqual([
      expect.objectContaining({ source: 'redrive', sourceMessageId: sent.messageId, reason: 'maxReceiveCount exceeded', body: 'doomed' }),
    ]);
    expect(sqs.peek('dead')[0]).toMatchObject({ receiveCount: 3, deadLetterQueueSourceArn: sqs.queue('sync').arn });
    expect(sqs.size('sync')).toBe(0);
    expect(sqs.queue('sync').stats.redriven).toBe(1);
  });

  it('applies ChangeMessageVisibility to the receipt handle of an in-flight message only, and tracks early deliveries', async () => {
    const { sqs, url, receive, settle, advance } = model();
    sqs.send('sync', { body: 'a' });
    const [message] = receive();
    const handle = message!.receiptHandle!;
    const change = () => handleSqs(sqs, 'ChangeMessageVisibilityBatch', { QueueUrl: url, Entries: [{ Id: 'm0', ReceiptHandle: handle, VisibilityTimeout: 2 }] });
    const ok = (await change()) as { Successful: unknown[]; Failed: unknown[] };
    expect(ok.Successful).toEqual([{ Id: 'm0' }]);
    settle(message!, false);
    advance(19);
    expect(receive()).toEqual([]);
    advance(1);
    expect(receive()).toHaveLength(1);
    expect(sqs.queue('sync').stats.deliveredBeforeRetryAfter).toBe(0);
    const stale = (await change()) as { Failed: Array<{ Code: string }> };
    expect(stale.Failed[0]?.Code).toBe('ReceiptHandleIsInvalid');
  });

  it('gives a duplicate copy the same message id and its own receipt handle', () => {
    const { sqs, receive } = model();
    const original = sqs.send('sync', { body: 'a' });
    sqs.send('sync', { body: 'b' });
    sqs.duplicate('sync', original, 1);
    const batch = receive();
    expect(batch.map((message) => message.body)).toEqual(['a', 'b', 'a']);
    expect(batch[2]!.messageId).toBe(original.messageId);
    expect(batch[2]!.receiptHandle).not.toBe(batch[0]!.receiptHandle);
    expect(sqs.queue('sync').stats.duplicatesInjected).toBe(1);
  });

  it('takes dead letters sent to the dead-letter queue URL with their attributes, sends again to the source queue, and refuses unknown queues', async () => {
    const { sqs, url, deadUrl } = model();
    const results = (await handleSqs(sqs, 'SendMessageBatch', {
      QueueUrl: deadUrl,
      Entries: [
        {
          Id: 'm0',
          MessageBody: 'bad',
          MessageAttributes: { error: { DataType: 'String', StringValue: 'why' }, sourceMessageId: { DataType: 'String', StringValue: 'src-1' } },
        },
      ],
    })) as { Successful: unknown[] };
    expect(results.Successful[0]).toMatchObject({ Id: 'm0' });
    expect(deadLetterEntries(sqs.peek('dead'))[0]).toMatchObject({ source: 'handler', body: 'bad', reason: 'why', sourceMessageId: 'src-1' });
    // A waiting record sent again to its own queue, with a delay: a new message.
    await handleSqs(sqs, 'SendMessageBatch', { QueueUrl: url, Entries: [{ Id: 'm0', MessageBody: 'x', DelaySeconds: 5 }] });
    expect(sqs.counts('sync')).toMatchObject({ delayed: 1, total: 1 });
    expect(() => handleSqs(sqs, 'SendMessageBatch', { QueueUrl: `${url}-nope`, Entries: [{ Id: 'm0', MessageBody: 'x' }] })).toThrow(
      expect.objectContaining({ type: 'QueueDoesNotExist' }),
    );
  });

  it('refuses the sends a fault rule names (the sync must retry those records)', async () => {
    const { sqs, deadUrl } = model();
    sqs.sendFault = ({ queueName }) => (queueName === 'dead' ? { code: 'InternalError', message: 'injected', senderFault: false } : undefined);
    const result = (await handleSqs(sqs, 'SendMessageBatch', { QueueUrl: deadUrl, Entries: [{ Id: 'm0', MessageBody: 'bad' }] })) as {
      Failed: Array<Record<string, unknown>>;
    };
    expect(result.Failed[0]).toMatchObject({ Code: 'InternalError', SenderFault: false });
    expect(deadLetterEntries(sqs.peek('dead'))).toEqual([]);
  });

  it('long-polls on its clock: a receive waiting for messages returns when one is sent, or when its wait is over', async () => {
    // On a clock that stands still, only the message can end the wait.
    const sqs = new SqsModel({ clock: new ManualClock() });
    sqs.createQueue('q');
    const waiting = sqs.receive('q', { max: 1, waitSeconds: 5 });
    setTimeout(() => sqs.send('q', { body: 'late' }), 20);
    expect((await waiting).map((message) => message.body)).toEqual(['late']);

    const clock = new ManualClock();
    const manual = new SqsModel({ clock });
    manual.createQueue('q');
    let answered: StoredMessage[] | undefined;
    void manual.receive('q', { max: 1, waitSeconds: 20 }).then((messages) => (answered = messages));
    clock.advance(19_999);
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBeUndefined();
    clock.advance(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toEqual([]);
  });
});
