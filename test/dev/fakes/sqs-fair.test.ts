/**
 * Fair queues in the SQS model (dev/fakes/sqs-fair.ts): a tenant (MessageGroupId) holding more than
 * 10% of the queue's in-flight messages and at least 30 of its own is noisy, and a receive returns
 * the quiet tenants' messages first; messages without a group are tenants of their own.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../dev/fakes/clock.js';
import { handleSqs } from '../../../dev/fakes/sqs-api.js';
import { NOISY_MIN_IN_FLIGHT, NOISY_SHARE } from '../../../dev/fakes/sqs-fair.js';
import { SqsModel, type StoredMessage } from '../../../dev/fakes/sqs-model.js';

function model() {
  const clock = new ManualClock(1_000);
  const sqs = new SqsModel({ clock });
  const deadUrl = sqs.createQueue('dead');
  const url = sqs.createQueue('q', {
    VisibilityTimeout: '30',
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: sqs.queue('dead').arn, maxReceiveCount: 2 }),
  });
  /** Sends `count` messages of `group` (none: without a group), bodies `<group>-<n>`. */
  const send = (group: string | undefined, count: number, from = 0): void => {
    for (let n = from; n < from + count; n += 1) sqs.send('q', { body: `${group ?? 'none'}-${n}`, ...(group !== undefined ? { messageGroupId: group } : {}) });
  };
  /** Receives as the event source does (held until deleted or released), `max` at a time, until `count` are in flight. */
  const take = (count: number): StoredMessage[] => {
    const taken: StoredMessage[] = [];
    while (taken.length < count) {
      const batch = sqs.receiveNow('q', { max: Math.min(10, count - taken.length), hold: true });
      if (batch.length === 0) break;
      taken.push(...batch);
    }
    return taken;
  };
  const bodies = (messages: readonly StoredMessage[]): string[] => messages.map((message) => message.body);
  return { sqs, url, deadUrl, clock, send, take, bodies };
}

describe('SqsModel, fair queues', () => {
  it('uses the documented thresholds: more than 10% of the messages in flight, and at least 30 of its own', () => {
    expect(NOISY_SHARE).toBe(0.1);
    expect(NOISY_MIN_IN_FLIGHT).toBe(30);
  });

  it('returns a quiet tenant’s message before a noisy tenant’s older ones', () => {
    const { send, take, bodies } = model();
    send('A', 100);
    send('B', 1);
    expect(bodies(take(30))).toEqual(Array.from({ length: 30 }, (_, n) => `A-${n}`));
    // A holds 30 of the 30 in flight: noisy. B's message, sent after all of A's, comes first.
    expect(bodies(take(3))).toEqual(['B-0', 'A-30', 'A-31']);
  });

  it('keeps queue order while the big tenant has fewer than 30 in flight', () => {
    const { send, take, bodies } = model();
    send('A', 100);
    send('B', 1);
    take(29);
    expect(bodies(take(2))).toEqual(['A-29', 'A-30']);
    // Now 31 of A's are in flight: noisy.
    expect(bodies(take(2))).toEqual(['B-0', 'A-31']);
  });

  it('keeps queue order while the big tenant holds no more than 10% of the messages in flight', () => {
    const { send, take, bodies } = model();
    send(undefined, 270);
    send('A', 100);
    send('B', 1);
    take(270 + 30);
    // A: 30 of 300 in flight, exactly 10%: not noisy.
    expect(bodies(take(1))).toEqual(['A-30']);
    // 31 of 301: noisy.
    expect(bodies(take(1))).toEqual(['B-0']);
  });

  it('treats every message without a group as a tenant of its own: never noisy, and before a noisy tenant’s', () => {
    const { send, take, bodies } = model();
    send(undefined, 50);
    send('A', 60);
    send(undefined, 2, 50);
    expect(bodies(take(40))).toEqual(Array.from({ length: 40 }, (_, n) => `none-${n}`));
    // 40 without a group in flight: still queue order.
    expect(bodies(take(12))).toEqual([...Array.from({ length: 10 }, (_, n) => `none-${40 + n}`), 'A-0', 'A-1']);
    expect(bodies(take(28))).toEqual(Array.from({ length: 28 }, (_, n) => `A-${2 + n}`));
    // A has 30 in flight (of 80): noisy; the two later messages without a group come first.
    expect(bodies(take(3))).toEqual(['none-50', 'none-51', 'A-30']);
  });

  it('merges the quiet tenants in queue order, then gives the noisy tenant with the fewest in flight first', () => {
    const { sqs, send, take, bodies } = model();
    send('A', 60);
    send('C', 40);
    take(100); // A 60 and C 40 in flight: both noisy
    send('A', 5, 60);
    send('C', 5, 40);
    sqs.send('q', { body: 'B-0', messageGroupId: 'B' });
    sqs.send('q', { body: 'D-0', messageGroupId: 'D' });
    sqs.send('q', { body: 'B-1', messageGroupId: 'B' });
    expect(bodies(take(7))).toEqual(['B-0', 'D-0', 'B-1', 'C-40', 'C-41', 'C-42', 'C-43']);
  });

  it('counts a message in flight until it is deleted or visible again', () => {
    const { sqs, clock, send, take, bodies } = model();
    send('A', 100);
    send('B', 2);
    const inFlight = take(30);
    sqs.deleteMessage('q', inFlight[0]!.receiptHandle!);
    // 29 of A's left in flight: quiet again, queue order.
    expect(bodies(take(1))).toEqual(['A-30']);
    // 30 in flight again: noisy.
    expect(bodies(take(1))).toEqual(['B-0']);
    for (const message of inFlight.slice(1)) sqs.release('q', message.receiptHandle!);
    // Released but not visible yet (their visibility time-out runs): still in flight.
    expect(bodies(take(1))).toEqual(['B-1']);
    clock.advance(30_000);
    // Visible again: one of A's is in flight; A's oldest come back first.
    expect(bodies(take(2))).toEqual(['A-1', 'A-2']);
  });

  it('still moves a message received too often to the dead-letter queue, with its group', () => {
    const { sqs, clock, send, take, bodies } = model();
    send('A', 40);
    const first = take(40);
    for (const message of first) sqs.release('q', message.receiptHandle!);
    clock.advance(30_000);
    take(40).forEach((message) => sqs.release('q', message.receiptHandle!));
    clock.advance(30_000);
    send('B', 1);
    const [held] = take(1); // B's message: A has none in flight now
    expect(held!.body).toBe('B-0');
    expect(bodies(take(10))).toEqual([]);
    expect(sqs.size('dead')).toBe(40);
    expect(sqs.peek('dead')[0]).toMatchObject({ body: 'A-0', messageGroupId: 'A' });
  });

  it('keeps its order after many messages left the queue (the tenants’ lists dropping them)', () => {
    const { sqs, send, take, bodies } = model();
    send('A', 700);
    send(undefined, 300);
    // 500 of A's received and deleted, out of order within each batch.
    for (let round = 0; round < 50; round += 1) for (const message of take(10).reverse()) sqs.deleteMessage('q', message.receiptHandle!);
    send('B', 1);
    expect(bodies(take(30))).toEqual(Array.from({ length: 30 }, (_, n) => `A-${500 + n}`));
    // A noisy (30 in flight): the quiet tenants' in queue order, those without a group first.
    expect(bodies(take(2))).toEqual(['none-0', 'none-1']);
    for (const message of take(20)) sqs.deleteMessage('q', message.receiptHandle!);
    expect(bodies(take(3))).toEqual(['none-22', 'none-23', 'none-24']);
  });

  it('delivers as before when no message has a group', () => {
    const { sqs, take, bodies } = model();
    for (let n = 0; n < 60; n += 1) sqs.send('q', { body: `m-${n}` });
    expect(bodies(take(45))).toEqual(Array.from({ length: 45 }, (_, n) => `m-${n}`));
    expect(bodies(take(15))).toEqual(Array.from({ length: 15 }, (_, n) => `m-${45 + n}`));
  });
});

describe('the SQS API, MessageGroupId', () => {
  it('takes it on SendMessage and SendMessageBatch and shows it as the MessageGroupId system attribute', async () => {
    const { sqs, url } = model();
    await handleSqs(sqs, 'SendMessage', { QueueUrl: url, MessageBody: 'one', MessageGroupId: 'acme' });
    await handleSqs(sqs, 'SendMessageBatch', { QueueUrl: url, Entries: [{ Id: 'm0', MessageBody: 'two', MessageGroupId: "a.b_c-D!~'" }, { Id: 'm1', MessageBody: 'three' }] });
    expect(sqs.peek('q').map((message) => [message.body, message.messageGroupId])).toEqual([
      ['one', 'acme'],
      ['two', "a.b_c-D!~'"],
      ['three', undefined],
    ]);
    const received = (await handleSqs(sqs, 'ReceiveMessage', { QueueUrl: url, MaxNumberOfMessages: 3, MessageSystemAttributeNames: ['MessageGroupId'] })) as {
      Messages: Array<{ Body: string; Attributes?: Record<string, string> }>;
    };
    expect(received.Messages.map((message) => [message.Body, message.Attributes])).toEqual([
      ['one', { MessageGroupId: 'acme' }],
      ['two', { MessageGroupId: "a.b_c-D!~'" }],
      ['three', undefined],
    ]);
  });

  it.each([[''], ['x'.repeat(129)], ['with space'], ['é'], [42]])('refuses a MessageGroupId that SQS refuses (%j)', async (group) => {
    const { sqs, url } = model();
    expect(() => handleSqs(sqs, 'SendMessage', { QueueUrl: url, MessageBody: 'one', MessageGroupId: group })).toThrow(
      expect.objectContaining({ type: 'InvalidParameterValue', senderFault: true }),
    );
    const result = (await handleSqs(sqs, 'SendMessageBatch', {
      QueueUrl: url,
      Entries: [
        { Id: 'm0', MessageBody: 'bad', MessageGroupId: group },
        { Id: 'm1', MessageBody: 'good', MessageGroupId: 'x'.repeat(128) },
      ],
    })) as { Successful: Array<{ Id: string }>; Failed: Array<Record<string, unknown>> };
    expect(result.Successful.map((entry) => entry.Id)).toEqual(['m1']);
    expect(result.Failed).toEqual([expect.objectContaining({ Id: 'm0', SenderFault: true, Code: 'InvalidParameterValue' })]);
    expect(sqs.peek('q').map((message) => message.body)).toEqual(['good']);
    expect(() => sqs.send('q', { body: 'direct', messageGroupId: group as string })).toThrow(expect.objectContaining({ type: 'InvalidParameterValue' }));
  });
});
