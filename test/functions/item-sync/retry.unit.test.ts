/**
 * The item sync handler's records that are retried or wait (mocked clients, unit-harness.ts):
 * transient failures, the breaker, 429s and their Retry-After, the time budget, and what one batch
 * publishes and logs.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { ChangeMessageVisibilityBatchCommand, GetQueueUrlCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { QUEUE_URL, ScriptedProvider, item, metricNamespaces, providerError } from './helpers.js';
import { NOW, TOKEN_1, build, harness, run, sqs, stored, useHarness } from './unit-harness.js';

useHarness();

describe('retry later', () => {
  it('retries transient failures (5xx, 408, network) with jittered backoff and succeeds', async () => {
    const provider = new ScriptedProvider()
      .on('a', providerError('transient', 503), providerError('transient', 408), item('a', 1))
      .on('b', providerError('transient'), item('b', 1));
    const { result, metrics } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.callsFor('a')).toHaveLength(3);
    expect(provider.callsFor('b')).toHaveLength(2);
    // base 200 ms, doubling, half fixed and half random (random() = 0.5 here).
    expect(harness.sleeps.sort((x, y) => x - y)).toEqual([150, 150, 300]);
    expect(metrics['ItemsCreated']).toBe(2);
  });

  it('hands a record back after SYNC_FETCH_ATTEMPTS transient failures, without dead-lettering it', async () => {
    const provider = new ScriptedProvider().on('down', providerError('transient', 500)).on('up', item('up', 1));
    const { result, metrics } = await run(build(provider, { env: { SYNC_FETCH_ATTEMPTS: '4' } }), ['down', 'up']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.callsFor('down')).toHaveLength(4);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    expect(metrics).toMatchObject({ RecordsRetried: 1, ItemsCreated: 1 });
  });

  it('counts a record failing again and again once toward the breaker: its retries are not more evidence of an outage', async () => {
    const paceStore = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('poison', providerError('transient', 503));
    const { result, metrics } = await run(build(provider, { paceStore, env: { SYNC_FETCH_ATTEMPTS: '6' } }), ['poison']);

    // Six attempts, more than the failures that open the breaker (4), and it stays closed.
    expect(provider.callsFor('poison')).toHaveLength(6);
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(paceStore.state).toMatchObject({ failures: 1, breaker: { open: false } });
    expect(metrics).toMatchObject({ RecordsRetried: 1, RecordsPostponed: 0, BreakerOpen: 0 });
  });

  it('opens the breaker for every container when different records fail (first attempts); the records wait, postponed', async () => {
    const paceStore = new MemoryPaceStore();
    const provider = new ScriptedProvider()
      .on('a', providerError('transient', 503))
      .on('b', providerError('transient', 503))
      .on('c', providerError('transient', 503))
      .on('d', providerError('transient', 503));
    // The breaker's threshold at 4 (the default is 8), so that four records show it.
    const { result, metrics } = await run(build(provider, { paceStore, paceSettings: { outageFailures: 4 } }), ['a', 'b', 'c', 'd']);

    // a, b and c failed and backed off (150 ms each on this clock) and went again before d's failure,
    // the fourth counted, opened the breaker at +450 ms. Their second failures are not counted; then
    // every record sees the open breaker and waits.
    expect(provider.calls.map((call) => call.id)).toEqual(['a', 'b', 'c', 'd', 'a', 'b', 'c']);
    expect(harness.sleeps).toEqual([150, 150, 150]);
    expect(paceStore.state).toMatchObject({
      failures: 4,
      breaker: { open: true, reason: 'provider', since: NOW.getTime() + 450, nextProbeAt: NOW.getTime() + 20_450 },
    });
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: ['a', 'b', 'c', 'd'].map((body, n) => ({
        Id: `m${n}`,
        MessageBody: body,
        DelaySeconds: 5,
        MessageGroupId: 'default',
        MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
      })),
    });
    expect(metrics).toMatchObject({ RecordsPostponed: 4, RecordsRetried: 0, BreakerOpen: 1 });
  });

  it('on a 429 every request waits for the Retry-After; a record whose wait outlasts the invocation is sent again, delayed (queue URL looked up once)', async () => {
    const provider = new ScriptedProvider()
      .on('slow', providerError('rate-limited', 429, { retryAfterSeconds: 120 }))
      .on('ok', item('ok', 1));
    const handler = build(provider);
    const { result, metrics } = await run(handler, ['slow', 'ok']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.callsFor('slow')).toHaveLength(1); // the Retry-After outlasts the invocation
    expect(sqs).toReceiveCommandExactlyOnceWith(GetQueueUrlCommand, {
      QueueName: 'content-sync-queue',
      QueueOwnerAWSAccountId: '123456789012',
    });
    expect(sqs).toReceiveCommandExactlyOnceWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: [
        {
          Id: 'm0',
          MessageBody: 'slow',
          DelaySeconds: 120,
          MessageGroupId: 'default',
          MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
        },
      ],
    });
    expect(sqs).not.toHaveReceivedCommand(ChangeMessageVisibilityBatchCommand);
    expect(metrics).toMatchObject({ RecordsPostponed: 1, RecordsRetried: 0, ProviderRateLimited: 1, ItemsCreated: 1 });

    await run(handler, ['slow']); // still inside the Retry-After window: no request at all
    expect(provider.callsFor('slow')).toHaveLength(1);
    expect(sqs).toHaveReceivedCommandTimes(GetQueueUrlCommand, 1);
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 2);
  });

  it('on a short Retry-After the request is made again within the invocation, after the window', async () => {
    let answered = 0;
    const provider = new ScriptedProvider().on('a', () => (answered++ === 0 ? providerError('rate-limited', 429, { retryAfterSeconds: 2 }) : item('a', 1)));
    const { result, metrics } = await run(build(provider), ['a']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toHaveLength(2);
    expect(harness.sleeps.reduce((sum, ms) => sum + ms, 0)).toBeGreaterThanOrEqual(2_000);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ProviderRateLimited: 1, RecordsPostponed: 0 });
  });

  it.each([
    [0.5, 60],
    [59.5, 60],
    [61, 61],
    [100_000, 900],
  ])('a record waiting out a Retry-After of %s s is sent again with DelaySeconds %s (at least a minute, at most 15 min)', async (retryAfterSeconds, delay) => {
    const provider = new ScriptedProvider().on('limited', providerError('rate-limited', 429, { retryAfterSeconds }));
    const { result } = await run(build(provider), ['limited'], 1_500);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [expect.objectContaining({ Id: 'm0', DelaySeconds: delay })],
    });
  });

  it('takes the shortest rate-limit delay from SYNC_RATE_LIMIT_MIN_DELAY_SECONDS', async () => {
    const provider = new ScriptedProvider().on('limited', providerError('rate-limited', 429, { retryAfterSeconds: 2 }));
    await run(build(provider, { env: { SYNC_RATE_LIMIT_MIN_DELAY_SECONDS: '5' } }), ['limited'], 1_500);

    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [expect.objectContaining({ Id: 'm0', DelaySeconds: 5 })],
    });
  });

  it('retries a waiting record (visibility delayed) when it cannot be sent again', async () => {
    sqs.on(SendMessageBatchCommand, { QueueUrl: QUEUE_URL }).rejects(Object.assign(new Error('denied'), { name: 'AccessDenied' }));
    const provider = new ScriptedProvider().on('slow', providerError('rate-limited', 429, { retryAfterSeconds: 120 }));
    const { result, metrics } = await run(build(provider), ['slow']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(sqs).toReceiveCommandWith(ChangeMessageVisibilityBatchCommand, {
      Entries: [{ Id: 'm0', ReceiptHandle: 'rh-m1', VisibilityTimeout: 120 }],
    });
    expect(metrics).toMatchObject({ RecordsRetried: 1, RecordsPostponed: 0 });
  });

  it('still retries a waiting record when neither sending it again nor its visibility works', async () => {
    sqs.on(GetQueueUrlCommand).rejects(Object.assign(new Error('denied'), { name: 'AccessDenied' }));
    const provider = new ScriptedProvider().on('slow', providerError('rate-limited', 429, { retryAfterSeconds: 5 }));
    const { result, logs } = await run(build(provider), ['slow'], 3_000);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(logs.some((line) => line['message'] === 'could not delay the next delivery of a rate-limited record')).toBe(true);
  });

  it('keeps at most SYNC_FETCH_CONCURRENCY provider requests in flight', async () => {
    const provider = new ScriptedProvider();
    const ids = Array.from({ length: 9 }, (_, n) => `c${n}`);
    for (const id of ids) provider.on(id, item(id, 1));
    const { result } = await run(build(provider, { env: { SYNC_FETCH_CONCURRENCY: '3' } }), ids);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.maxInFlight).toBe(3);
  });
});

describe('time budget', () => {
  it('starts no provider work when the invocation has no time left, and hands every record back', async () => {
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result } = await run(build(provider, { safetyMarginMs: 1_000 }), ['a', 'b', ''], 500);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
    expect(provider.calls).toHaveLength(0);
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 1); // the bad body is still dead-lettered
  });

  it('does not back off past the deadline: a transient failure is handed back instead', async () => {
    const provider = new ScriptedProvider().on('a', providerError('transient', 502));
    // 100 ms left after the margin; the first backoff would be 150 ms.
    const { result } = await run(build(provider, { safetyMarginMs: 900 }), ['a'], 1_000);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(provider.calls).toHaveLength(1);
    expect(harness.sleeps).toEqual([]);
  });

  it('aborts a provider request still in flight at the deadline and hands the record back', async () => {
    const provider = new ScriptedProvider().on(
      'hang',
      (call: { signal: AbortSignal | undefined }) =>
        new Promise((_, reject) => {
          call.signal?.addEventListener('abort', () => reject(providerError('transient')));
        }),
    );
    const { result } = await run(build(provider, { safetyMarginMs: 0, clock: { now: () => new Date() } }), ['hang'], 50);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.calls[0]?.signal?.aborted).toBe(true);
  });
});

describe('observability', () => {
  it('publishes the thirteen counters (discovery\'s three as zeros when it is off) and the pace once per batch under ContentSync, and logs the connection and item id of every record', async () => {
    stored([{ id: 'same', revision: '1' }, { id: 'gone', revision: '1' }, { id: 'old', revision: '1' }]);
    const provider = new ScriptedProvider()
      .on('new', item('new', 1))
      .on('same', item('same', 1))
      .on('old', item('old', 2))
      .on('gone', providerError('not-found', 404))
      .on('down', providerError('transient', 503));
    // At DEBUG: every record's line (the records done first); logs.unit.test.ts has what INFO keeps.
    const { output, metrics, logs } = await run(build(provider, { env: { SYNC_FETCH_ATTEMPTS: '1', POWERTOOLS_LOG_LEVEL: 'DEBUG' } }), [
      'new',
      'same',
      'old',
      'gone',
      'down',
      '',
    ]);

    expect(metricNamespaces(output)).toEqual(['ContentSync']);
    expect(metrics).toEqual({
      ItemsFetched: 3,
      ItemsCreated: 1,
      ItemsUpdated: 1,
      ItemsUnchanged: 1,
      ItemsDeleted: 1,
      RecordsRetried: 1,
      RecordsDeadLettered: 1,
      RecordsPostponed: 0,
      ProviderRateLimited: 0,
      RecordsMovedToBackground: 0,
      ChildrenDiscovered: 0,
      ChildrenSkipped: 0,
      ListingsTruncated: 0,
      ProviderPace: 1000,
      BreakerOpen: 0,
      BreakerOpenSeconds: 0,
      PaceFallback: 0,
    });
    const recordLogs = logs.filter((line) => String(line['message']).startsWith('record '));
    expect(recordLogs.map((line) => [line['messageId'], line['connection'], line['itemId']])).toEqual([
      ['m1', 'default', 'new'],
      ['m2', 'default', 'same'],
      ['m3', 'default', 'old'],
      ['m4', 'default', 'gone'],
      ['m5', 'default', 'down'],
      ['m6', undefined, undefined],
    ]);
    expect(recordLogs.every((line) => line['service'] === 'item-sync' || line['service'] === 'content-sync-test')).toBe(true);
    expect(output).not.toContain(TOKEN_1);
  });

  it('answers with a partial failure for the whole batch if something unexpected breaks, never throwing', async () => {
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const handler = build(provider, {
      sleep: async () => undefined,
      clock: {
        now: () => {
          throw new Error('clock broke');
        },
      },
    });
    const { result } = await run(handler, ['a', 'b']);
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }] });
  });
});
