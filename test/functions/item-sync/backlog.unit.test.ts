/**
 * A connection's backlog on the users' queue (sync.ts): a users' batch syncs of one connection what
 * a user sends at once (users-ids.ts: up to USERS_BURST_IDS, within what its pace serves in
 * USERS_HOLD_MS; USERS_IDS_PER_CONNECTION of an import's batch), and sends the rest to the background lane (the
 * reconcile queue, lane `backlog`, the connection's message group), their records done; a
 * connection that must wait and a background batch keep all their ids; an id that could not be sent is synced where it is; without
 * the background lane (RECONCILE_QUEUE_URL unset) nothing moves. The fetches take the connections
 * in turn, the one with the fewest ids first.
 */
import { describe, expect, it } from 'vitest';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { CONNECTION_PACE_HOLD_MS } from '../../../functions/item-sync/app.js';
import { fairOrder } from '../../../functions/item-sync/sync.js';
import { USERS_BURST_IDS, USERS_HOLD_MS, USERS_IDS_PER_CONNECTION } from '../../../functions/item-sync/users-ids.js';
import { DEFAULT_PACE_SETTINGS, initialPaceState } from '../../../functions/shared/provider/pace/pace-state.js';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { item, QUEUE_URL, RECONCILE_URL, ScriptedProvider } from './helpers.js';
import { build, entriesTo, harness, NOW, PaceStores, run, runRecords, sqs, useHarness } from './unit-harness.js';

useHarness();

const body = (connection: string, id: string): string => JSON.stringify({ connection, id });
/** The pace's rate in these tests (PROVIDER_REQUESTS_PER_SECOND), and the ids of one connection a users' batch keeps at it. */
const RATE = 8;
const KEPT = (RATE * USERS_HOLD_MS) / 1000;
/** The background lane given, the pace at RATE. */
const LANE_ENV = { RECONCILE_QUEUE_URL: RECONCILE_URL, PROVIDER_REQUESTS_PER_SECOND: String(RATE) };
const ids = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** A provider that serves every id asked for. */
function servingAll(all: readonly string[]): ScriptedProvider {
  const provider = new ScriptedProvider();
  for (const id of all) provider.on(id, item(id, 1));
  return provider;
}

describe('a backlog in a users\' batch', () => {
  it(`syncs the first ${KEPT} ids of a connection (what its pace of ${RATE}/s serves within ${USERS_HOLD_MS} ms) and sends the others to the background lane, their records done`, async () => {
    harness.connections.add('acme').add('globex');
    const backlog = ids('a', KEPT + 5);
    const provider = servingAll([...backlog, 'g0']);
    const handler = build(provider, { env: LANE_ENV });
    const { result, metrics } = await run(handler, [...backlog.map((id) => body('acme', id)), body('globex', 'g0')]);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id).sort()).toEqual([...backlog.slice(0, KEPT), 'g0'].sort());
    expect(entriesTo(RECONCILE_URL)).toEqual(
      backlog.slice(KEPT).map((id, index) => ({
        Id: `m${index}`,
        MessageBody: body('acme', id),
        MessageGroupId: 'acme',
        MessageAttributes: { lane: { DataType: 'String', StringValue: 'backlog' } },
      })),
    );
    expect(metrics).toMatchObject({ ItemsCreated: KEPT + 1, RecordsMovedToBackground: 5, RecordsPostponed: 0, RecordsRetried: 0 });
  });

  it('counts ids, not records: duplicates of an id are one, and move together', async () => {
    harness.connections.add('acme');
    const backlog = ids('a', KEPT + 1);
    const provider = servingAll(backlog);
    const handler = build(provider, { env: LANE_ENV });
    const last = backlog.at(-1)!;
    const { result, metrics } = await run(handler, [...backlog.map((id) => body('acme', id)), body('acme', last), body('acme', 'a0')]);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(entriesTo(RECONCILE_URL).map((entry) => entry.MessageBody)).toEqual([body('acme', last)]);
    expect(metrics).toMatchObject({ RecordsMovedToBackground: 2, ItemsCreated: KEPT });
  });

  it(`never keeps fewer than ${USERS_IDS_PER_CONNECTION} ids of a connection, however slow its pace`, async () => {
    harness.connections.add('acme');
    const backlog = ids('a', USERS_IDS_PER_CONNECTION + 2);
    const provider = servingAll(backlog);
    const { metrics } = await run(build(provider, { env: { ...LANE_ENV, PROVIDER_REQUESTS_PER_SECOND: '2' } }), backlog.map((id) => body('acme', id)));
    expect(provider.calls.map((call) => call.id).sort()).toEqual(backlog.slice(0, USERS_IDS_PER_CONNECTION).sort());
    expect(entriesTo(RECONCILE_URL).map((entry) => entry.MessageBody)).toEqual(backlog.slice(USERS_IDS_PER_CONNECTION).map((id) => body('acme', id)));
    expect(metrics).toMatchObject({ ItemsCreated: USERS_IDS_PER_CONNECTION, RecordsMovedToBackground: 2 });
  });

  it("an active user's burst of 20 at a pace of 200/s is synced where it is, none moved", async () => {
    harness.connections.add('acme');
    const burst = ids('a', 20);
    const provider = servingAll(burst);
    const { metrics } = await run(build(provider, { env: { ...LANE_ENV, PROVIDER_REQUESTS_PER_SECOND: '200' } }), burst.map((id) => body('acme', id)));
    expect(provider.calls.map((call) => call.id).sort()).toEqual([...burst].sort());
    expect(entriesTo(RECONCILE_URL)).toEqual([]);
    expect(metrics).toMatchObject({ ItemsCreated: 20, RecordsMovedToBackground: 0 });
  });

  it(`an import's batch (more than ${USERS_BURST_IDS} ids of one connection) keeps ${USERS_IDS_PER_CONNECTION}, whatever its pace`, async () => {
    harness.connections.add('acme');
    const backlog = ids('a', USERS_BURST_IDS + 1);
    const provider = servingAll(backlog);
    const { metrics } = await run(build(provider, { env: { ...LANE_ENV, PROVIDER_REQUESTS_PER_SECOND: '1000' } }), backlog.map((id) => body('acme', id)));
    expect(provider.calls.map((call) => call.id).sort()).toEqual(backlog.slice(0, USERS_IDS_PER_CONNECTION).sort());
    expect(metrics).toMatchObject({ ItemsCreated: USERS_IDS_PER_CONNECTION, RecordsMovedToBackground: USERS_BURST_IDS + 1 - USERS_IDS_PER_CONNECTION });
  });

  it(`a connection with ${KEPT} ids or fewer, a background batch, or no background lane: nothing moves`, async () => {
    harness.connections.add('acme');
    const few = ids('a', KEPT);
    await run(build(servingAll(few), { env: LANE_ENV }), few.map((id) => body('acme', id)));
    const many = ids('b', KEPT + 3);
    const background = await runRecords(
      build(servingAll(many), { env: LANE_ENV }),
      many.map((id) => ({ body: body('acme', id), attributes: { lane: { type: 'String', value: 'background' } } })),
    );
    expect(background.metrics).toMatchObject({ ItemsCreated: many.length, RecordsMovedToBackground: 0 });
    const none = await run(build(servingAll(many), { env: { PROVIDER_REQUESTS_PER_SECOND: String(RATE) } }), many.map((id) => body('acme', id)));
    expect(none.metrics).toMatchObject({ ItemsCreated: many.length, RecordsMovedToBackground: 0 });
    expect(entriesTo(RECONCILE_URL)).toEqual([]);
  });

  it('a connection that must wait (paused, failing) keeps its records in their queue: none moves', async () => {
    harness.connections.add('acme', { gate: { kind: 'wait', reason: 'connection "acme" is paused', seconds: 300 } });
    const backlog = ids('a', KEPT + 4);
    const { result, metrics } = await run(build(servingAll(backlog), { env: LANE_ENV }), backlog.map((id) => body('acme', id)));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ RecordsMovedToBackground: 0, RecordsPostponed: backlog.length });
    expect(entriesTo(RECONCILE_URL)).toEqual([]);
  });

  it('an id the background lane refused is synced where it is', async () => {
    harness.connections.add('acme');
    const backlog = ids('a', KEPT + 2);
    sqs.on(SendMessageBatchCommand, { QueueUrl: RECONCILE_URL }).resolves({
      Successful: [{ Id: 'm0', MessageId: 'x', MD5OfMessageBody: '' }],
      Failed: [{ Id: 'm1', SenderFault: true, Code: 'InvalidParameterValue', Message: 'refused' }],
    });
    const provider = servingAll(backlog);
    const { result, metrics, logs } = await run(build(provider, { env: LANE_ENV }), backlog.map((id) => body('acme', id)));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ RecordsMovedToBackground: 1, ItemsCreated: KEPT + 1 });
    expect(provider.calls.map((call) => call.id)).toContain(backlog.at(-1));
    expect(logs.find((line) => line['message'] === 'ids of a backlog could not be sent to the background lane; they are synced here')).toMatchObject({
      connection: 'acme',
      ids: 1,
    });
  });
});

describe('a backlog in the background lane (`lane` = `backlog`)', () => {
  const backlogRecords = (connection: string, list: readonly string[]) =>
    list.map((id) => ({ body: body(connection, id), attributes: { lane: { type: 'String' as const, value: 'backlog' } } }));

  /** One connection's pace row (paceScope connection: its breaker the client id's), full, at 100 requests/s. */
  async function connectionPace(stores: PaceStores): Promise<MemoryPaceStore> {
    harness.connections.add('acme', { paceKey: 'connection#acme', breakerKey: 'client#c' });
    const store = new MemoryPaceStore();
    await store.write(initialPaceState({ ...DEFAULT_PACE_SETTINGS, maxRate: 100 }, NOW.getTime()), 0);
    stores.byKey.set('connection#acme', store);
    return store;
  }

  it("paceScope connection: drawn as the sweep but not from the sweep's share (its bucket untouched)", async () => {
    const stores = new PaceStores();
    const store = await connectionPace(stores);
    const sweepBefore = store.state!.sweepTokens!;
    const list = ids('a', 3);
    const { result, metrics } = await runRecords(build(servingAll(list), { env: { PACE_SCOPE: 'connection' }, paceStoreFor: stores.storeFor }), backlogRecords('acme', list));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsCreated: 3, RecordsMovedToBackground: 0 });
    expect(store.state!.sweepTokens).toBe(sweepBefore);
    expect(store.state!.tokens).toBeLessThan(initialPaceState({ ...DEFAULT_PACE_SETTINGS, maxRate: 100 }, NOW.getTime()).tokens);
    expect(store.state!.sweepDrawnAt).toBe(NOW.getTime());
  });

  it("paceScope client: drawn as the sweep, from the sweep's share", async () => {
    const stores = new PaceStores();
    const store = await connectionPace(stores);
    const sweepBefore = store.state!.sweepTokens!;
    const list = ids('a', 3);
    await runRecords(build(servingAll(list), { paceStoreFor: stores.storeFor }), backlogRecords('acme', list));
    expect(store.state!.sweepTokens).toBeLessThan(sweepBefore);
  });

  it(`a pace with a hold takes what it serves within ${CONNECTION_PACE_HOLD_MS / 1000} s; the others go back at once, spread one slot of its rate apart, their lane kept`, async () => {
    const stores = new PaceStores();
    harness.connections.add('acme', { paceKey: 'connection#acme', breakerKey: 'client#c' });
    const store = new MemoryPaceStore();
    // 2 requests a second, known: the hold admits 2 of the batch's 6 ids.
    await store.write(initialPaceState({ ...DEFAULT_PACE_SETTINGS, maxRate: 2 }, NOW.getTime()), 0);
    stores.byKey.set('connection#acme', store);
    const list = ids('a', 6);
    const provider = servingAll(list);
    const handler = build(provider, { env: { PACE_SCOPE: 'connection' }, paceStoreFor: stores.storeFor, paceSettings: { maxRate: 2 } });
    const { result, metrics } = await runRecords(handler, backlogRecords('acme', list));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['a0', 'a1']);
    expect(metrics).toMatchObject({ ItemsCreated: 2, RecordsPostponed: 4 });
    // To its own queue (this event's), back after the hold, then one slot (0.5 s) apart: 1, 1.5, 2, 2.5 s → SQS's whole seconds.
    expect(entriesTo(QUEUE_URL).map((entry) => [entry.MessageBody, entry.DelaySeconds, (entry.MessageAttributes?.['lane'] as { StringValue?: string } | undefined)?.StringValue])).toEqual([
      [body('acme', 'a2'), 1, 'backlog'],
      [body('acme', 'a3'), 2, 'backlog'],
      [body('acme', 'a4'), 2, 'backlog'],
      [body('acme', 'a5'), 3, 'backlog'],
    ]);
    expect(entriesTo(RECONCILE_URL)).toEqual([]);
  });
});

describe('fairOrder', () => {
  it('takes the connections in turn, one id each, the one with the fewest ids first', () => {
    const key = (connection: string, id: string) => ({ connection, id });
    const big = ['1', '2', '3', '4'].map((id) => key('big', id));
    const quiet = [key('quiet', 'q')];
    const two = [key('two', 'x'), key('two', 'y')];
    expect(fairOrder([big, quiet, two]).map(({ connection, id }) => `${connection}/${id}`)).toEqual([
      'quiet/q',
      'two/x',
      'big/1',
      'two/y',
      'big/2',
      'big/3',
      'big/4',
    ]);
    expect(fairOrder([])).toEqual([]);
  });
});
