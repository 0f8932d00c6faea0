/** The soak's SQS model behaves as SQS does where the soak relies on it. */
import { describe, expect, it } from 'vitest';
import { QueueModel } from '../../../dev/fakes/queue-model.js';

function model(overrides: Partial<ConstructorParameters<typeof QueueModel>[0]> = {}) {
  let now = 1_000;
  const queue = new QueueModel({
    name: 'sync',
    deadLetterQueueName: 'dead',
    maxReceiveCount: 3,
    visibilityTimeoutSeconds: 30,
    msPerSecond: 10,
    now: () => now,
    random: () => 0.5,
    ...overrides,
  });
  return { queue, advance: (ms: number) => (now += ms) };
}

describe('QueueModel', () => {
  it('delivers in order, hides a delivered message and deletes it on success', () => {
    const { queue } = model();
    queue.send('{"id":"a"}');
    queue.send('{"id":"b"}');
    const batch = queue.receive(10);
    expect(batch.map((copy) => copy.body)).toEqual(['{"id":"a"}', '{"id":"b"}']);
    expect(queue.receive(10)).toEqual([]);
    for (const copy of batch) queue.settle(copy, true);
    expect(queue.outstanding).toBe(0);
    expect(queue.stats.deleted).toBe(2);
  });

  it('makes a failed message visible again after the (scaled) visibility time-out, counting the redelivery', () => {
    const { queue, advance } = model();
    queue.send('a');
    const [copy] = queue.receive(10);
    queue.settle(copy!, false);
    advance(299);
    expect(queue.receive(10)).toEqual([]);
    advance(1);
    const again = queue.receive(10);
    expect(again).toHaveLength(1);
    expect(again[0]!.receiveCount).toBe(2);
    expect(queue.stats.redeliveries).toBe(1);
  });

  it('moves a message received maxReceiveCount times to the dead-letter queue on its next receive', () => {
    const { queue, advance } = model();
    const sent = queue.send('doomed');
    for (let i = 0; i < 3; i += 1) {
      const [copy] = queue.receive(10);
      expect(copy?.messageId).toBe(sent.messageId);
      queue.settle(copy!, false);
      advance(300);
    }
    expect(queue.receive(10)).toEqual([]);
    expect(queue.deadLetters).toEqual([
      expect.objectContaining({ source: 'redrive', sourceMessageId: sent.messageId, reason: 'maxReceiveCount exceeded', body: 'doomed' }),
    ]);
    expect(queue.outstanding).toBe(0);
  });

  it('applies ChangeMessageVisibility to the receipt handle of an in-flight copy only, and tracks early deliveries', () => {
    const { queue, advance } = model();
    queue.send('a');
    const [copy] = queue.receive(10);
    const handle = copy!.receiptHandle!;
    const [ok] = queue.changeVisibility(queue.url, [{ Id: 'm0', ReceiptHandle: handle, VisibilityTimeout: 2 }]);
    expect(ok).toEqual({ Id: 'm0' });
    queue.settle(copy!, false);
    advance(19);
    expect(queue.receive(10)).toEqual([]);
    advance(1);
    expect(queue.receive(10)).toHaveLength(1);
    expect(queue.stats.deliveredBeforeRetryAfter).toBe(0);
    const [stale] = queue.changeVisibility(queue.url, [{ Id: 'm0', ReceiptHandle: handle, VisibilityTimeout: 2 }]);
    expect(stale?.error?.Code).toBe('ReceiptHandleIsInvalid');
  });

  it('gives a duplicate copy the same message id and its own receipt handle', () => {
    const { queue } = model();
    const original = queue.send('a');
    queue.send('b');
    queue.duplicate(original, 1);
    const batch = queue.receive(10);
    expect(batch.map((copy) => copy.body)).toEqual(['a', 'b', 'a']);
    expect(batch[2]!.messageId).toBe(original.messageId);
    expect(batch[2]!.receiptHandle).not.toBe(batch[0]!.receiptHandle);
    expect(queue.stats.duplicatesInjected).toBe(1);
  });

  it('takes dead letters sent to the dead-letter queue URL with their attributes, and refuses other queues', () => {
    const { queue } = model();
    const results = queue.sendMessages(queue.deadLetterQueueUrl, [
      {
        Id: 'm0',
        MessageBody: 'bad',
        MessageAttributes: { error: { DataType: 'String', StringValue: 'why' }, sourceMessageId: { DataType: 'String', StringValue: 'src-1' } },
      },
    ]);
    expect(results[0]).toMatchObject({ Id: 'm0' });
    expect(queue.deadLetters[0]).toMatchObject({ source: 'handler', body: 'bad', reason: 'why', sourceMessageId: 'src-1' });
    expect(queue.sendMessages(queue.url, [{ Id: 'm0', MessageBody: 'x' }])[0]?.error).toBeDefined();
  });

  it('refuses a share of dead-letter sends when told to (the sync must retry those records)', () => {
    const { queue } = model({ deadLetterSendFailureRate: 1 });
    const [result] = queue.sendMessages(queue.deadLetterQueueUrl, [{ Id: 'm0', MessageBody: 'bad' }]);
    expect(result?.error).toMatchObject({ Code: 'InternalError', SenderFault: false });
    expect(queue.deadLetters).toEqual([]);
  });
});
