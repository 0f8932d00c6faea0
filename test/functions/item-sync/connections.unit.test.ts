/**
 * The item sync handler, connection by connection (mocked clients, a scripted access layer:
 * unit-harness.ts): each connection of a batch asked once; its gate `dead`, `wait` or `ready` giving
 * its own records their outcome and nobody else's; its token and its pace key used for its items
 * alone; a 401 asking the access layer for that connection only, never the breaker; two connections
 * holding the same item id; and no token anywhere in what the function writes.
 */
import { describe, expect, it } from 'vitest';
import { BatchGetItemCommand, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { TransientError } from '../../../functions/shared/errors.js';
import { DEFAULT_PACE_SETTINGS, initialPaceState, openBreaker } from '../../../functions/shared/provider/pace/pace-state.js';
import { DLQ_URL, QUEUE_URL, ScriptedProvider, item, providerError, type ItemCall } from './helpers.js';
import {
  NOW,
  PACE_KEY,
  PaceStores,
  TABLE,
  TOKEN_1,
  TOKEN_2,
  build,
  ddb,
  entriesTo,
  harness,
  k,
  run,
  s3,
  stored,
  useHarness,
} from './unit-harness.js';

useHarness();

/** A provider that serves `id` only to the given token, 401 to any other. */
function onlyWith(token: string, id: string, revision = 1) {
  return (call: ItemCall) => (call.token === token ? item(id, revision) : providerError('unauthorized', 401));
}

const deadLetters = () =>
  entriesTo(DLQ_URL).map((entry) => ({
    body: entry.MessageBody,
    group: entry.MessageGroupId,
    error: (entry.MessageAttributes!['error'] as { StringValue: string }).StringValue,
    sourceMessageId: (entry.MessageAttributes!['sourceMessageId'] as { StringValue: string }).StringValue,
  }));

describe('one gate per connection of a batch', () => {
  it('gives each connection its own outcome: ready ones synced with their own token, a waiting one sent again after its seconds, dead ones dead-lettered with the gate’s reason', async () => {
    harness.connections
      .add('acme', { tokens: ['at-acme-1'] })
      .add('paused-co', { gate: { kind: 'wait', reason: 'connection "paused-co" is paused', seconds: 300 } })
      .add('gone-co', { gate: { kind: 'dead', reason: 'connection "gone-co" was removed' } });
    const provider = new ScriptedProvider().on('a', onlyWith('at-acme-1', 'a')).on('d', onlyWith(TOKEN_1, 'd'));
    const bodies = [
      '{"connection":"acme","id":"a"}',
      '{"connection":"paused-co","id":"p1"}',
      '{"connection":"gone-co","id":"g"}',
      '{"connection":"nobody","id":"n"}',
      '{"connection":"paused-co","id":"p2"}',
      'd',
      '{"connection":"acme","id":"a"}',
    ];
    const { result, metrics, logs } = await run(build(provider), bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    // Asked once per connection, however many of its records the batch holds.
    expect(harness.connections.opened().sort()).toEqual(['acme', 'default', 'gone-co', 'nobody', 'paused-co']);
    expect(harness.connections.refusals()).toEqual([]);
    // Only the ready connections' items are read and fetched, each with its connection's token.
    expect(ddb.commandCalls(BatchGetItemCommand).map((call) => call.args[0].input.RequestItems![TABLE]!.Keys)).toEqual([[k('a', 'acme'), k('d')]]);
    expect(provider.calls.map((call) => [call.id, call.token])).toEqual([
      ['a', 'at-acme-1'],
      ['d', TOKEN_1],
    ]);
    expect(ddb.commandCalls(PutItemCommand).map((call) => [call.args[0].input.Item!['connection'], call.args[0].input.Item!['id']])).toEqual([
      [{ S: 'acme' }, { S: 'a' }],
      [{ S: 'default' }, { S: 'd' }],
    ]);
    expect(entriesTo(QUEUE_URL)).toEqual([
      // Each in its connection's message group (fair queues).
      { Id: 'm0', MessageBody: bodies[1], DelaySeconds: 300, MessageGroupId: 'paused-co', MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } },
      { Id: 'm1', MessageBody: bodies[4], DelaySeconds: 300, MessageGroupId: 'paused-co', MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } },
    ]);
    expect(deadLetters()).toEqual([
      { body: bodies[2], group: 'gone-co', error: 'connection "gone-co" was removed', sourceMessageId: 'm3' },
      { body: bodies[3], group: 'nobody', error: 'unknown connection "nobody"', sourceMessageId: 'm4' },
    ]);
    expect(metrics).toMatchObject({ ItemsCreated: 2, ItemsFetched: 2, RecordsPostponed: 2, RecordsDeadLettered: 2, RecordsRetried: 0 });
    expect(logs.find((line) => line['message'] === 'record postponed')).toMatchObject({
      messageId: 'm2',
      connection: 'paused-co',
      itemId: 'p1',
      reason: 'connection "paused-co" is paused',
    });
    expect(logs.find((line) => line['message'] === 'record dead-lettered')).toMatchObject({
      messageId: 'm3',
      connection: 'gone-co',
      itemId: 'g',
      reason: 'connection "gone-co" was removed',
    });
  });

  it.each([
    [0.2, 1],
    [12.4, 13],
    [3_600, 900],
  ])('a wait of %s s is a delay of %s s (at least a second, at most SQS’s 15 minutes), whatever the postponements so far', async (seconds, delay) => {
    harness.connections.add('slow', { gate: { kind: 'wait', reason: 'connection "slow": a refresh is in progress', seconds } });
    await run(build(new ScriptedProvider()), ['{"connection":"slow","id":"x"}'], 60_000, { postponements: 6 });

    expect(entriesTo(QUEUE_URL)).toEqual([
      {
        Id: 'm0',
        MessageBody: '{"connection":"slow","id":"x"}',
        DelaySeconds: delay,
        MessageGroupId: 'slow',
        MessageAttributes: { postponements: { DataType: 'Number', StringValue: '7' } },
      },
    ]);
  });

  it('a connection whose gate cannot be read (its table throttled) has its records retried; the others are synced', async () => {
    harness.connections.add('busy', { gate: new TransientError('DynamoDB GetItem failed (ThrottlingException: slow down)') });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, logs } = await run(build(provider), ['{"connection":"busy","id":"b"}', 'a']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.calls.map((call) => call.id)).toEqual(['a']);
    expect(logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({
      connection: 'busy',
      itemId: 'b',
      reason: 'DynamoDB GetItem failed (ThrottlingException: slow down)',
    });
  });

  it('a body naming an invalid connection is dead with its own reason, and no gate is asked for it', async () => {
    const bodies = ['{"connection":"acme corp","id":"a"}', '{"connection":42,"id":"a"}', '{"connection":"","id":"a"}'];
    const { result } = await run(build(new ScriptedProvider()), bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(harness.connections.opened()).toEqual([]);
    // No valid connection: no message group.
    expect(deadLetters()).toStrictEqual([
      { body: bodies[0], group: undefined, error: 'the connection id may hold only the characters A-Z a-z 0-9 . _ -', sourceMessageId: 'm1' },
      { body: bodies[1], group: undefined, error: 'the connection is number, not a string', sourceMessageId: 'm2' },
      { body: bodies[2], group: undefined, error: 'the connection id is empty', sourceMessageId: 'm3' },
    ]);
  });
});

describe('two connections holding the same item id', () => {
  it('fetches it once per connection, each with its own token, and writes two rows keyed by connection and id', async () => {
    harness.connections.add('acme', { tokens: ['at-acme-1'] }).add('globex', { tokens: ['at-globex-1'] });
    stored([{ connection: 'globex', id: 'same', revision: '1' }]);
    const provider = new ScriptedProvider().on('same', (call: ItemCall) => item('same', call.token === 'at-acme-1' ? 5 : 2));
    const { result, metrics } = await run(build(provider), ['{"connection":"acme","id":"same"}', '{"connection":"globex","id":"same"}']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.token).sort()).toEqual(['at-acme-1', 'at-globex-1']);
    expect(ddb.commandCalls(BatchGetItemCommand).map((call) => call.args[0].input.RequestItems![TABLE]!.Keys)).toEqual([
      [k('same', 'acme'), k('same', 'globex')],
    ]);
    const puts = ddb.commandCalls(PutItemCommand).map((call) => call.args[0].input);
    expect(puts.map((put) => [put.Item!['connection'], put.Item!['id'], put.Item!['revision'], put.ConditionExpression, put.ReturnValues])).toEqual([
      [{ S: 'acme' }, { S: 'same' }, { S: '5' }, 'attribute_not_exists(#id)', undefined],
      // globex's row is replaced: its old row is asked for (the object it may point to).
      [{ S: 'globex' }, { S: 'same' }, { S: '2' }, '#revision = :expected AND attribute_not_exists(#deleted)', 'ALL_OLD'],
    ]);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ItemsUpdated: 1 });
  });

  it('keeps each connection’s large items under items/<connection>/', async () => {
    harness.connections.add('acme');
    const big = (revision: number) => item('big', revision, { blob: 'é'.repeat(300 * 1024) });
    const provider = new ScriptedProvider().on('big', big(1));
    await run(build(provider), ['{"connection":"acme","id":"big"}', 'big']);

    const keys = s3.commandCalls(PutObjectCommand).map((call) => call.args[0].input.Key!);
    expect(keys.sort()).toEqual([
      expect.stringMatching(/^items\/acme\/[0-9a-f]{64}\/1\/[0-9a-f]{64}-0123456789abcdef\.json$/),
      expect.stringMatching(/^items\/default\/[0-9a-f]{64}\/1\/[0-9a-f]{64}-0123456789abcdef\.json$/),
    ]);
    // The same id: the same hash of it under both connections.
    expect(keys[0]!.split('/')[2]).toBe(keys[1]!.split('/')[2]);
  });
});

describe('a refused token (401)', () => {
  it('asks the access layer for that connection and that token alone, sends the token it gives, and never touches the breaker', async () => {
    harness.connections.add('acme', { tokens: ['at-acme-1', 'at-acme-2'] }).add('globex', { tokens: ['at-globex-1'] });
    const paceStore = new MemoryPaceStore();
    const provider = new ScriptedProvider()
      .on('a1', onlyWith('at-acme-2', 'a1'))
      .on('a2', onlyWith('at-acme-2', 'a2'))
      .on('g', onlyWith('at-globex-1', 'g'));
    const bodies = ['{"connection":"acme","id":"a1"}', '{"connection":"globex","id":"g"}', '{"connection":"acme","id":"a2"}'];
    const { result, metrics } = await run(build(provider, { paceStore, env: { SYNC_FETCH_CONCURRENCY: '1' } }), bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    // globex first (the connection with fewer ids); a1 met the refusal; a2, fetched after it, was sent the new token at once.
    expect(provider.calls.map((call) => [call.id, call.token])).toEqual([
      ['g', 'at-globex-1'],
      ['a1', 'at-acme-1'],
      ['a1', 'at-acme-2'],
      ['a2', 'at-acme-2'],
    ]);
    expect(harness.connections.refusals()).toEqual([{ connection: 'acme', rejected: 'at-acme-1' }]);
    expect(paceStore.state).toMatchObject({ failures: 0, breaker: { open: false } });
    expect(metrics).toMatchObject({ ItemsCreated: 3, BreakerOpen: 0, RecordsPostponed: 0 });
  });

  it("gives the access layer the batch's deadline, to open and after a refusal (no refresh may start that could not end before it)", async () => {
    harness.connections.add('acme', { tokens: ['at-acme-1', 'at-acme-2'] });
    const provider = new ScriptedProvider().on('a1', onlyWith('at-acme-2', 'a1'));
    await run(build(provider), ['{"connection":"acme","id":"a1"}'], 40_000);
    // 40 s left, less the 5 s safety margin.
    const deadline = NOW.getTime() + 35_000;
    expect(harness.connections.deadlines()).toEqual([
      ['open', deadline],
      ['afterRefusal', deadline],
    ]);
  });

  it('a revoked account: one request with its refused token per container; the batch\'s other records and the next batch send it no more, and wait', async () => {
    const failing = { kind: 'wait' as const, reason: 'connection "acme" is failing: the provider refused its refresh token', seconds: 300 };
    harness.connections.add('acme', { afterRefusal: failing }).add('globex');
    const provider = new ScriptedProvider().on('g', item('g', 1));
    const ids = Array.from({ length: 12 }, (_, i) => `a${i}`);
    for (const id of ids) provider.on(id, providerError('unauthorized', 401));
    // One fetch at a time: every record after the first starts once the 401 is known.
    const handler = build(provider, { env: { SYNC_FETCH_CONCURRENCY: '1' } });
    const bodies = (list: string[]) => [...list.map((id) => JSON.stringify({ connection: 'acme', id })), '{"connection":"globex","id":"g"}'];
    const first = await run(handler, bodies(ids.slice(0, 6)));
    expect(first.metrics).toMatchObject({ ItemsCreated: 1, RecordsPostponed: 6 });
    const second = await run(handler, bodies(ids.slice(6)));
    expect(second.metrics).toMatchObject({ ItemsFetched: 1, RecordsPostponed: 6 });
    // One request of acme's in all: the refused token is known to the container.
    expect(provider.calls.filter((call) => call.id.startsWith('a')).map((call) => [call.id, call.token])).toEqual([['a0', 'at-acme-1']]);
    expect(entriesTo(QUEUE_URL).filter((entry) => entry.MessageGroupId === 'acme').every((entry) => entry.DelaySeconds === 300)).toBe(true);
    expect(entriesTo(QUEUE_URL).filter((entry) => entry.MessageGroupId === 'acme')).toHaveLength(12);
  });

  it('a connection that must wait after the refusal: its records wait the gate’s seconds, the other connection’s are synced, the breaker stays closed', async () => {
    harness.connections
      .add('acme', { afterRefusal: { kind: 'wait', reason: 'connection "acme" is failing: the provider refused its refresh token', seconds: 300 } })
      .add('globex');
    const paceStore = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('a', providerError('unauthorized', 401)).on('g', item('g', 1));
    const { result, metrics, logs } = await run(build(provider, { paceStore }), ['{"connection":"acme","id":"a"}', '{"connection":"globex","id":"g"}']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.callsFor('a')).toHaveLength(1);
    expect(entriesTo(QUEUE_URL)).toEqual([
      {
        Id: 'm0',
        MessageBody: '{"connection":"acme","id":"a"}',
        DelaySeconds: 300,
        MessageGroupId: 'acme',
        MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
      },
    ]);
    expect(paceStore.state).toMatchObject({ failures: 0, breaker: { open: false } });
    expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsPostponed: 1, BreakerOpen: 0 });
    expect(logs.find((line) => line['message'] === 'record postponed')).toMatchObject({
      connection: 'acme',
      reason: 'connection "acme" is failing: the provider refused its refresh token; last answer: getItem: simulated unauthorized; HTTP 401',
    });
  });

  it('a connection removed meanwhile: its record is dead-lettered with the reason', async () => {
    harness.connections.add('acme', { afterRefusal: { kind: 'dead', reason: 'connection "acme" was removed' } });
    const provider = new ScriptedProvider().on('a', providerError('unauthorized', 401));
    await run(build(provider), ['{"connection":"acme","id":"a"}']);

    expect(deadLetters()).toEqual([{ body: '{"connection":"acme","id":"a"}', group: 'acme', error: 'connection "acme" was removed', sourceMessageId: 'm1' }]);
  });

  it('the other token refused too: the record is retried (a failure), with a reason that says so', async () => {
    const provider = new ScriptedProvider().on('a', providerError('unauthorized', 401));
    const { result, logs } = await run(build(provider), ['a']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.calls.map((call) => call.token)).toEqual([TOKEN_1, TOKEN_2]);
    expect(harness.connections.refusals()).toEqual([
      { connection: 'default', rejected: TOKEN_1 },
      { connection: 'default', rejected: TOKEN_2 },
    ]);
    expect(logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({
      reason: "the provider refused the connection's access token, also the one given after the refusal (getItem: simulated unauthorized; HTTP 401)",
    });
  });
});

describe('the provider pace of each pace key', () => {
  it('draws each connection’s requests from the pace its gate names; an open breaker of one key holds back that key’s connections only', async () => {
    harness.connections.add('acme', { paceKey: 'connection#acme' }).add('globex', { paceKey: 'connection#globex' });
    const stores = new PaceStores();
    const PACE = { ...DEFAULT_PACE_SETTINGS, maxRate: 1000 };
    const down = new MemoryPaceStore();
    await down.write(openBreaker(initialPaceState(PACE, NOW.getTime()), NOW.getTime(), 'provider', PACE), 0);
    stores.byKey.set('connection#acme', down);
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('g', item('g', 1));
    const { result, metrics } = await run(build(provider, { paceStoreFor: stores.storeFor }), [
      '{"connection":"acme","id":"a"}',
      '{"connection":"globex","id":"g"}',
    ]);

    expect(result).toEqual({ batchItemFailures: [] });
    expect([...new Set(stores.asked)].sort()).toEqual(['connection#acme', 'connection#globex']);
    expect(provider.calls.map((call) => call.id)).toEqual(['g']);
    // Globex's own row: a full bucket (2 × SYNC_PACE_LEASE_SECONDS × 1000/s = 500) less the token of its one id.
    expect(stores.byKey.get('connection#globex')!.state).toMatchObject({ tokens: 499, breaker: { open: false } });
    expect(entriesTo(QUEUE_URL).map((entry) => [entry.MessageBody, entry.DelaySeconds])).toEqual([['{"connection":"acme","id":"a"}', 5]]);
    // The container's paces together: their rates summed, the breaker open as one of them is.
    expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsPostponed: 1, ProviderPace: 2000, BreakerOpen: 1, BreakerOpenSeconds: 0 });
  });

  it("paceScope connection: the connections of one client id share its breaker; a failed request learns it open from the client id's row, and the container's other connections of that client id wait without a request", async () => {
    harness.connections
      .add('acme', { paceKey: 'connection#acme', breakerKey: 'client#c' })
      .add('globex', { paceKey: 'connection#globex', breakerKey: 'client#c' })
      .add('other', { paceKey: 'connection#other', breakerKey: 'client#d' });
    const stores = new PaceStores();
    const PACE = { ...DEFAULT_PACE_SETTINGS, maxRate: 1000 };
    const clientRow = new MemoryPaceStore();
    await clientRow.write(openBreaker({ ...initialPaceState(PACE, NOW.getTime()), failures: 8 }, NOW.getTime(), 'provider', PACE), 0);
    stores.byKey.set('client#c', clientRow);
    const provider = new ScriptedProvider().on('a', providerError('transient', 503)).on('g', item('g', 1)).on('o', item('o', 1));
    const handler = build(provider, { paceStoreFor: stores.storeFor });

    // acme's draw reads acme's row only; its request fails, and the failure, counted in the client id's row, finds the breaker open.
    const first = await run(handler, ['{"connection":"acme","id":"a"}']);
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['a']);
    expect(clientRow.state).toMatchObject({ failures: 9, breaker: { open: true } });
    expect(stores.byKey.get('connection#acme')!.state).toMatchObject({ failures: 0, breaker: { open: false } });
    expect(first.metrics).toMatchObject({ RecordsPostponed: 1, BreakerOpen: 1 });

    // A second later: globex (same client id) waits without a read of its row or a request; other (another client id) is synced.
    harness.clockMs = NOW.getTime() + 1_000;
    const second = await run(handler, ['{"connection":"globex","id":"g"}', '{"connection":"other","id":"o"}']);
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['a', 'o']);
    expect(stores.byKey.get('connection#globex')?.reads ?? 0).toBe(0);
    expect(stores.byKey.get('client#d')?.reads ?? 0).toBe(0);
    expect(entriesTo(QUEUE_URL).map((entry) => [entry.MessageBody, entry.DelaySeconds])).toEqual([
      ['{"connection":"acme","id":"a"}', 5],
      ['{"connection":"globex","id":"g"}', 5],
    ]);
    expect(second.metrics).toMatchObject({ ItemsCreated: 1, RecordsPostponed: 1, BreakerOpen: 1, BreakerOpenSeconds: 1 });
  });

  it("paceScope connection: a Retry-After in one connection's pace holds neither the batch nor the other connection; its record waits outside the invocation", async () => {
    harness.connections
      .add('acme', { paceKey: 'connection#acme', breakerKey: 'client#c' })
      .add('globex', { paceKey: 'connection#globex', breakerKey: 'client#c' });
    const stores = new PaceStores();
    const PACE = { ...DEFAULT_PACE_SETTINGS, maxRate: 1000 };
    const blocked = new MemoryPaceStore();
    await blocked.write({ ...initialPaceState(PACE, NOW.getTime()), blockedUntil: NOW.getTime() + 30_000 }, 0);
    stores.byKey.set('connection#acme', blocked);
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('g', item('g', 1));
    const { result, metrics } = await run(build(provider, { paceStoreFor: stores.storeFor }), [
      '{"connection":"acme","id":"a"}',
      '{"connection":"globex","id":"g"}',
    ]);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['g']);
    // Not held at all: the Retry-After's end is beyond the hold (CONNECTION_PACE_HOLD_MS).
    expect(harness.sleeps.reduce((sum, ms) => sum + ms, 0)).toBe(0);
    // Sent again to come back when the Retry-After ends (its pace's word: no 60 s floor of
    // rateLimitMinDelaySeconds, which is for a record the provider itself answered 429).
    expect(entriesTo(QUEUE_URL).map((entry) => [entry.MessageBody, entry.DelaySeconds])).toEqual([['{"connection":"acme","id":"a"}', 30]]);
    expect(stores.byKey.get('client#c')?.writes ?? 0).toBe(0);
    expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsPostponed: 1 });
  });

  it("without paceStoreFor, a connection's failed request is counted in its client id's row, provider-pace#client#<client id>", async () => {
    harness.connections.add('acme', { paceKey: 'connection#acme', breakerKey: 'client#c' });
    ddb.on(GetItemCommand).resolves({});
    const provider = new ScriptedProvider().on('a', providerError('transient', 503), item('a', 1));
    await run(build(provider, { paceStoreFor: undefined }), ['{"connection":"acme","id":"a"}']);

    expect(provider.calls.map((call) => call.id)).toEqual(['a', 'a']);
    const rows = ddb.commandCalls(GetItemCommand).map((call) => call.args[0].input.Key!['pk']);
    expect(rows).toEqual(expect.arrayContaining([{ S: 'provider-pace#connection#acme' }, { S: 'provider-pace#client#c' }]));
    const written = ddb
      .commandCalls(PutItemCommand)
      .map((call) => call.args[0].input)
      .filter((input) => input.TableName === 'control')
      .map((input) => [input.Item!['pk']!.S, JSON.parse(input.Item!['state']!.S!).failures]);
    // The failure counted there (1); the success of the attempt after it reads the row again to reset the
    // count (the mock holds no row: it finds none to reset). The connection's row holds no failure.
    expect(written.filter(([key]) => key === 'provider-pace#client#c')).toEqual([['provider-pace#client#c', 1]]);
    expect(rows.filter((key) => key?.S === 'provider-pace#client#c')).toHaveLength(2);
    expect(written.filter(([key]) => key === 'provider-pace#connection#acme').every(([, failures]) => failures === 0)).toBe(true);
  });

  it('without paceStoreFor, each pace key has its own control-table row, provider-pace#<pace key>', async () => {
    harness.connections.add('acme', { paceKey: 'connection#acme' });
    ddb.on(GetItemCommand).resolves({});
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('d', item('d', 1));
    const handler = build(provider, { paceStoreFor: undefined });
    await run(handler, ['{"connection":"acme","id":"a"}', 'd']);

    const rows = ddb.commandCalls(GetItemCommand).map((call) => call.args[0].input);
    expect(rows).toEqual(
      expect.arrayContaining([
        { TableName: 'control', Key: { pk: { S: `provider-pace#${PACE_KEY}` } }, ConsistentRead: true },
        { TableName: 'control', Key: { pk: { S: 'provider-pace#connection#acme' } }, ConsistentRead: true },
      ]),
    );
    const paceWrites = ddb
      .commandCalls(PutItemCommand)
      .map((call) => call.args[0].input)
      .filter((input) => input.TableName === 'control')
      .map((input) => input.Item!['pk']);
    expect(paceWrites).toEqual(expect.arrayContaining([{ S: `provider-pace#${PACE_KEY}` }, { S: 'provider-pace#connection#acme' }]));
  });
});

describe('tokens', () => {
  it('appear in no log line, metric, answer, dead letter or message sent again', async () => {
    harness.connections
      .add('acme', { tokens: ['at-acme-secret-1', 'at-acme-secret-2'], afterRefusal: { kind: 'wait', reason: 'connection "acme" is paused', seconds: 60 } })
      .add('gone', { gate: { kind: 'dead', reason: 'connection "gone" was removed' } });
    const provider = new ScriptedProvider()
      .on('a', providerError('unauthorized', 401))
      .on('d', providerError('unauthorized', 401))
      .on('x', providerError('permanent', 403));
    const { result, output } = await run(build(provider), ['{"connection":"acme","id":"a"}', 'd', 'x', '{"connection":"gone","id":"g"}']);

    const written = JSON.stringify([output, result, s3.calls().map((call) => call.args[0].input), entriesTo(DLQ_URL), entriesTo(QUEUE_URL)]);
    for (const token of [TOKEN_1, TOKEN_2, 'at-acme-secret-1', 'at-acme-secret-2']) expect(written).not.toContain(token);
    expect(JSON.stringify(ddb.calls().map((call) => call.args[0].input))).not.toContain('secret');
    // Every way out was taken: waiting, retried, dead (twice).
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm2' }] });
    expect(entriesTo(QUEUE_URL)).toHaveLength(1);
    expect(entriesTo(DLQ_URL)).toHaveLength(2);
  });
});
