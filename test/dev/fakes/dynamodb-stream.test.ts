/**
 * A table's stream as the harness reads it (dev/fakes/dynamodb-stream.ts): DynamoDB Local's own
 * stream, in the shape Lambda hands a function. A record per items-table write that changed the
 * row (the sync's TransactWriteItems Put and Update, a PutItem), with the row before (OldImage) and
 * after (NewImage), in commit order per connection; none for the changes table's rows, a cancelled
 * transaction, or a transaction the SDK sent again after a lost answer (DynamoDB applies it once).
 * A reader starts at the oldest record or after what the stream holds (`skipToLatest`), keeps to
 * its table's stream (the connections table's is its own), and knows when it has read everything
 * the stream held at a time (`readThroughSince`). The reader's clock stamps the records.
 */
import { DeleteItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamTableName } from '../../../functions/change-events/sources.js';
import { DynamoMeter, instrumentDynamo } from '../../../dev/fakes/dynamo-meter.js';
import { TableStream, untracked, type LambdaStreamRecord } from '../../../dev/fakes/dynamodb-stream.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { createTables, itemRow, ITEMS, markDeleted, outbox, putRow, refusal, shapes } from './outbox-transactions.js';

const CONNECTIONS = 'connections-table';

describe('a table stream', () => {
  let dynamo: LocalDynamoDb;
  const readers: TableStream[] = [];
  /** The readers' clock: the tests move it themselves. */
  let now = 1_700_000_000_000;

  /** A reader of `table`'s stream from where it is now (what earlier tests wrote left behind). */
  async function newReader(table = ITEMS): Promise<TableStream> {
    const reader = new TableStream(dynamo, table, untracked, () => now);
    readers.push(reader);
    await reader.skipToLatest();
    return reader;
  }

  /** Every record the stream holds now (read until a read comes back empty). */
  async function readAll(reader: TableStream): Promise<LambdaStreamRecord[]> {
    const records: LambdaStreamRecord[] = [];
    for (;;) {
      const read = await reader.read(1_000);
      if (read.records.length === 0) return records;
      records.push(...read.records);
    }
  }

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    await createTables(dynamo);
    await dynamo.createConnectionsTable(CONNECTIONS);
  });

  afterAll(async () => {
    for (const reader of readers) reader.close();
    await dynamo?.close();
  });

  it("reads a transaction's items-table row with the row it replaced, nothing for a cancelled one, in Lambda's shape", async () => {
    const reader = await newReader();
    const client = dynamo.client({ maxAttempts: 1 });
    try {
      await client.send(outbox(putRow(itemRow('s1', 'a', '1')), 's1', 'a', 0));
      await client.send(outbox(putRow(itemRow('s1', 'a', '2'), '1'), 's1', 'a', 1));
      expect((await refusal(client, outbox(putRow(itemRow('s1', 'a', '3'), '1'), 's1', 'a', 2)))?.name).toBe('TransactionCanceledException');
      await client.send(outbox(markDeleted('s1', 'a', '2', 'now'), 's1', 'a', 2));
      await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s1', 'a', '4') }));
      // The same row again changes nothing: DynamoDB writes no record.
      await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s1', 'a', '4') }));
    } finally {
      client.destroy();
    }
    now += 7_000;
    const records = await readAll(reader);
    const keys = { connection: { S: 's1' }, id: { S: 'a' } };
    const deleted = itemRow('s1', 'a', '2', { deleted: { BOOL: true }, syncedAt: { S: 'now' } });
    expect(shapes(records)).toEqual([
      { event: 'INSERT', keys, new: itemRow('s1', 'a', '1') },
      { event: 'MODIFY', keys, old: itemRow('s1', 'a', '1'), new: itemRow('s1', 'a', '2') },
      { event: 'MODIFY', keys, old: itemRow('s1', 'a', '2'), new: deleted },
      { event: 'MODIFY', keys, old: deleted, new: itemRow('s1', 'a', '4') },
    ]);
    for (const record of records) {
      expect(record).toMatchObject({ eventSource: 'aws:dynamodb', dynamodb: { StreamViewType: 'NEW_AND_OLD_IMAGES', ApproximateCreationDateTime: Math.floor(now / 1000) } });
      expect(streamTableName(record.eventSourceARN)).toBe(ITEMS);
      expect(record.dynamodb.SizeBytes).toBeGreaterThan(0);
    }
    const sequences = records.map((record) => BigInt(record.dynamodb.SequenceNumber!));
    expect(sequences).toEqual([...sequences].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });

  it("reads concurrent writers' transactions in each connection's commit order", async () => {
    const reader = await newReader();
    const client = dynamo.client();
    try {
      // Each connection's writer moves its own head: 10 connections at once, 5 writes each.
      await Promise.all(
        Array.from({ length: 10 }, async (_, c) => {
          for (let head = 0; head < 5; head++) await client.send(outbox(putRow(itemRow(`s2-${c}`, `id-${c}-${head}`, '1')), `s2-${c}`, `id-${c}-${head}`, head));
        }),
      );
    } finally {
      client.destroy();
    }
    const records = await readAll(reader);
    expect(records).toHaveLength(50);
    for (let c = 0; c < 10; c++) {
      const ids = records.filter((record) => record.dynamodb.Keys?.['connection']?.S === `s2-${c}`).map((record) => record.dynamodb.NewImage?.['id']?.S);
      expect(ids).toEqual([0, 1, 2, 3, 4].map((head) => `id-${c}-${head}`));
    }
  });

  it('reads once a transaction whose answer was lost and that the SDK sent again', async () => {
    const reader = await newReader();
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter, { random: () => 0, throttleRate: 0, unprocessedRate: 0, lostAckRate: 1 });
    try {
      const out = await client.send(outbox(putRow(itemRow('s3', 'a', '1')), 's3', 'a', 0));
      expect(out.$metadata.attempts).toBe(2);
      expect(meter.injected.lostAcks).toBe(1);
    } finally {
      client.destroy();
    }
    expect(shapes(await readAll(reader))).toEqual([{ event: 'INSERT', keys: { connection: { S: 's3' }, id: { S: 'a' } }, new: itemRow('s3', 'a', '1') }]);
  });

  it("reads the connections table's own stream, a removed row with its old image, and none of the items table's records", async () => {
    const reader = await newReader(CONNECTIONS);
    const client = dynamo.client();
    const row = { connection: { S: 'c1' }, status: { S: 'active' } };
    try {
      await client.send(new PutItemCommand({ TableName: CONNECTIONS, Item: row }));
      await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('c1', 'a', '1') }));
      await client.send(new DeleteItemCommand({ TableName: CONNECTIONS, Key: { connection: { S: 'c1' } } }));
    } finally {
      client.destroy();
    }
    const records = await readAll(reader);
    expect(records.map((record) => ({ event: record.eventName, old: record.dynamodb.OldImage, new: record.dynamodb.NewImage }))).toEqual([
      { event: 'INSERT', old: undefined, new: row },
      { event: 'REMOVE', old: row, new: undefined },
    ]);
    for (const record of records) expect(streamTableName(record.eventSourceARN)).toBe(CONNECTIONS);
  });

  it('starts at the oldest record unless told to skip what the stream holds', async () => {
    const table = 'trim-horizon-table';
    await dynamo.createItemsTable(table);
    const client = dynamo.client();
    try {
      await client.send(new PutItemCommand({ TableName: table, Item: itemRow('s5', 'before', '1') }));
      const fromOldest = new TableStream(dynamo, table, untracked, () => now);
      readers.push(fromOldest);
      const fromLatest = await newReader(table);
      await client.send(new PutItemCommand({ TableName: table, Item: itemRow('s5', 'after', '1') }));
      const ids = async (reader: TableStream) => (await readAll(reader)).map((record) => record.dynamodb.Keys?.['id']?.S);
      expect(await ids(fromOldest)).toEqual(['before', 'after']);
      expect(await ids(fromLatest)).toEqual(['after']);
    } finally {
      client.destroy();
    }
  });

  it('has read the stream through since a time once a read that began then found nothing', async () => {
    const reader = await newReader();
    // No read yet: it cannot know.
    expect(reader.readThroughSince(now)).toBe(false);
    await reader.read(1_000);
    expect(reader.readThroughSince(now)).toBe(true);
    // A later time needs a later read.
    now += 1;
    expect(reader.readThroughSince(now)).toBe(false);
    const client = dynamo.client();
    try {
      await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s6', 'a', '1') }));
    } finally {
      client.destroy();
    }
    const since = now;
    now += 1;
    // The read that brings the record is not the end of it; the next, empty, one is.
    expect((await reader.read(1_000)).records).toHaveLength(1);
    expect(reader.readThroughSince(since)).toBe(false);
    expect((await reader.read(1_000)).records).toHaveLength(0);
    expect(reader.readThroughSince(since)).toBe(true);
  });
});
