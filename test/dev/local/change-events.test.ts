/**
 * The change-events function in the local run (dev/local/change-events.ts), on both tables' real
 * streams through Lambda's DynamoDB event source mapping (dev/system/event-sources.ts), on the wall
 * clock: every write of a connection's row is announced, in order (not a diff of two reads), the
 * items table's rows are announced and counted into their connection's row (`idsKnown`,
 * `lastWriteAt`), and `readThrough` resolves once what was written before has reached the
 * function. The event source hands the function batches, takes a batch again from the first record
 * it reports failed, splits a batch whose invocation throws, and gives a batch up after the
 * deployed retries.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StreamRecord } from '../../../functions/change-events/ports.js';
import { CHANGE_EVENTS_RETRY_ATTEMPTS } from '../../../infra/deployment.js';
import { describeLifecycleEvent, startChangeEvents } from '../../../dev/local/change-events.js';
import { inProcessAws } from '../../../dev/system/aws.js';
import { startStreamEventSource } from '../../../dev/system/event-sources.js';
import type { BuiltFunction, ChangeEventsHandler } from '../../../dev/system/functions.js';
import { localNames } from '../../../dev/system/names.js';
import { quietObservability } from '../../../dev/system/observability.js';
import { startStorage, type Storage } from '../../../dev/system/storage.js';
import { buildSystem, type LocalSystem } from '../../../dev/system/system.js';

type Row = Record<string, AttributeValue>;

function connectionRow(connection: string, status: string, extra: Row = {}): Row {
  return { connection: { S: connection }, status: { S: status }, updatedAt: { S: new Date().toISOString() }, ...extra };
}

function itemRow(connection: string, id: string, revision: string, syncedAt: string): Row {
  return { connection: { S: connection }, id: { S: id }, type: { S: 'file' }, revision: { S: revision }, syncedAt: { S: syncedAt } };
}

describe('the change-events function in the local run', () => {
  let storage: Storage;
  let system: LocalSystem;

  beforeAll(async () => {
    const names = localNames('change-events-local');
    storage = await startStorage(names);
    system = buildSystem({ names, aws: inProcessAws(), storage });
  });

  afterAll(async () => {
    await system?.close();
  });

  async function put(table: string, item: Row): Promise<void> {
    const client = storage.dynamo.client();
    try {
      await client.send(new PutItemCommand({ TableName: table, Item: item }));
    } finally {
      client.destroy();
    }
  }

  it("announces every write of a connection's row in order and keeps its counters from the items table's stream", async () => {
    const changeEvents = await startChangeEvents(system, () => quietObservability(), true);
    const { connectionsTable, itemsTable } = system.names;
    try {
      // Two status changes between two looks: both are announced.
      await put(connectionsTable, connectionRow('c1', 'active'));
      await put(connectionsTable, connectionRow('c1', 'failing', { lastFailureReason: { S: 'getToken: HTTP 401' } }));
      await put(connectionsTable, connectionRow('c1', 'active'));
      await put(itemsTable, itemRow('c1', 'a', '1', '2026-12-06T10:00:00.000Z'));
      await put(itemsTable, itemRow('c1', 'b', '1', '2026-12-06T10:00:01.000Z'));
      await put(itemsTable, itemRow('c1', 'a', '2', '2026-12-06T10:00:02.000Z'));
      await changeEvents.readThrough();

      expect(changeEvents.lifecycle().map(describeLifecycleEvent)).toEqual([
        'ConnectionAdded c1 (none → active)',
        'ConnectionFailing c1 (active → failing): getToken: HTTP 401',
        'ConnectionRecovered c1 (failing → active)',
      ]);
      expect(changeEvents.entries.filter((entry) => !entry.event.detailType.startsWith('Connection')).map((entry) => entry.event.detailType)).toEqual([
        'ItemCreated',
        'ItemCreated',
        'ItemUpdated',
      ]);
      for (const entry of changeEvents.entries) expect(entry.eventBusName).toBe(system.names.eventBus);
      const client = storage.dynamo.client();
      try {
        const row = (await client.send(new GetItemCommand({ TableName: connectionsTable, Key: { connection: { S: 'c1' } }, ConsistentRead: true }))).Item;
        expect(row?.['idsKnown']).toEqual({ N: '2' });
        expect(row?.['lastWriteAt']).toEqual({ S: '2026-12-06T10:00:02.000Z' });
        // The counters' write announces nothing; the removal and the erase do.
        await client.send(new PutItemCommand({ TableName: connectionsTable, Item: { ...row!, status: { S: 'removed' }, updatedAt: { S: new Date().toISOString() } } }));
        await client.send(new DeleteItemCommand({ TableName: connectionsTable, Key: { connection: { S: 'c1' } } }));
      } finally {
        client.destroy();
      }
      await changeEvents.readThrough();
      expect(changeEvents.lifecycle().slice(3).map(describeLifecycleEvent)).toEqual(['ConnectionRemoved c1 (active → removed)', 'ConnectionErased c1 (removed → none)']);
      expect(changeEvents.problems()).toEqual([]);
      const [items, connections] = changeEvents.sources;
      expect(items!.counts).toMatchObject({ records: 3, discarded: 0 });
      // Three status writes, the counters' write(s), the removal, the erase.
      expect(connections!.counts.records).toBeGreaterThanOrEqual(6);
    } finally {
      await changeEvents.stop();
    }
    await expect(changeEvents.sources[0]!.readThrough()).rejects.toThrow(/stopped/);
  });

  it('takes a batch again from its first failed record, splits one whose invocation throws, and gives a batch up after the deployed retries', async () => {
    // A system of its own: its items table's stream holds only this test's records.
    const names = localNames('change-events-retries');
    const ownStorage = await startStorage(names);
    const own = buildSystem({ names, aws: inProcessAws(), storage: ownStorage });
    const itemsTable = names.itemsTable;
    const calls: string[][] = [];
    const idOf = (record: StreamRecord): string => record.dynamodb?.NewImage?.['id']?.S ?? '';
    let r1Failed = false;
    const handler = (async (event: { Records: StreamRecord[] }) => {
      const ids = event.Records.map(idOf);
      calls.push(ids);
      const sequenceOf = (id: string) => event.Records.find((record) => idOf(record) === id)!.dynamodb!.SequenceNumber!;
      // A batch holding r3 and more throws; r1 is reported failed once; r5 every time.
      if (ids.includes('r3') && ids.length > 1) throw new Error('boom');
      if (ids.includes('r1') && !r1Failed) {
        r1Failed = true;
        return { batchItemFailures: [{ itemIdentifier: sequenceOf('r1') }] };
      }
      return { batchItemFailures: ids.includes('r5') ? [{ itemIdentifier: sequenceOf('r5') }] : [] };
    }) as unknown as ChangeEventsHandler;
    const fn: BuiltFunction<ChangeEventsHandler> = { name: 'change-events', handler, memoryMb: 256, timeoutMs: 30_000, environment: {} };
    // Written before the event source starts: one batch of all seven.
    const client = ownStorage.dynamo.client();
    try {
      for (const id of ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6']) await client.send(new PutItemCommand({ TableName: itemsTable, Item: itemRow('c2', id, '1', '2026-12-06T11:00:00.000Z') }));
    } finally {
      client.destroy();
    }
    const source = await startStreamEventSource(own, 'items', { fn, startingPosition: 'TRIM_HORIZON' });
    try {
      await source.readThrough();
    } finally {
      await source.stop();
      await own.close();
    }
    expect(calls).toEqual([
      // The whole batch threw: split in two, and the half holding r3 again.
      ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6'],
      ['r0', 'r1', 'r2', 'r3'],
      // r1 reported failed: r0 is done, the batch is taken again from r1.
      ['r0', 'r1'],
      ['r1', 'r2'],
      // A batch done: the deployed size again, split again down to r3 alone.
      ['r3', 'r4', 'r5', 'r6'],
      ['r3', 'r4'],
      ['r3'],
      // r5 fails every time: its batch is tried again the deployed number of times, then given up.
      ['r4', 'r5', 'r6'],
      ...Array.from({ length: CHANGE_EVENTS_RETRY_ATTEMPTS }, () => ['r5', 'r6']),
    ]);
    expect(source.discarded).toEqual([expect.objectContaining({ table: itemsTable, records: 2, reason: 'the function reported 1 failed record' })]);
    expect(source.counts).toMatchObject({ records: 7, invocations: calls.length, discarded: 2 });
  });
});
