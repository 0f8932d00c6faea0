/**
 * The items table's stream as the simulations read it (dev/sim/items-stream.ts): DynamoDB Local's
 * own stream, in the shape Lambda hands a function. A record per items-table write that changed the
 * row (the sync's TransactWriteItems Put and Update, a PutItem), with the row before (OldImage) and
 * after (NewImage), in commit order per connection; none for the changes table's rows, a cancelled
 * transaction, or a transaction the SDK sent again after a lost answer (DynamoDB applies it once).
 * The event source (`pollStream`) hands the function batches of up to the deployed size, takes a
 * failed batch again from its first failed record, and can lose a batch; every read counted.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangeEventsHandler } from '../../../functions/change-events/app.js';
import type { StreamRecord } from '../../../functions/change-events/ports.js';
import { streamTableName } from '../../../functions/change-events/sources.js';
import { CHANGE_EVENTS_BATCH_SIZE } from '../../../infra/deployment.js';
import { DynamoMeter, instrumentDynamo } from '../../../dev/fakes/dynamo-meter.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import type { BuiltFunction } from '../../../dev/system/functions.js';
import { ItemsStream, pollStream, type LambdaStreamRecord } from '../../../dev/sim/items-stream.js';
import { emptyStreamCount, type InvocationCount } from '../../../dev/sim/meters.js';
import { VirtualClock } from '../../../dev/sim/virtual-clock.js';
import { createTables, itemRow, ITEMS, markDeleted, outbox, putRow, refusal } from '../fakes/outbox-transactions.js';

/** The records as event name, keys and images. */
function shapes(records: readonly LambdaStreamRecord[]): Array<{ event?: string; keys?: object; old?: object; new?: object }> {
  return records.map((record) => ({
    event: record.eventName,
    keys: record.dynamodb.Keys,
    ...(record.dynamodb.OldImage ? { old: record.dynamodb.OldImage } : {}),
    new: record.dynamodb.NewImage,
  }));
}

describe('the items stream', () => {
  let dynamo: LocalDynamoDb;
  const streams: ItemsStream[] = [];

  /** A reader of the items table's stream from where it is now (what earlier tests wrote left behind). */
  async function newStream(clock = new VirtualClock()): Promise<ItemsStream> {
    const stream = new ItemsStream({ dynamo, tableName: ITEMS, clock, count: emptyStreamCount() });
    streams.push(stream);
    await stream.skipToLatest();
    return stream;
  }

  /** Every record the stream holds now (read until a read comes back empty). */
  async function readAll(stream: ItemsStream): Promise<LambdaStreamRecord[]> {
    for (;;) {
      const before = stream.size;
      const records = await stream.take(before + 1_000);
      if (records.length === before) return records;
    }
  }

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    await createTables(dynamo);
  });

  afterAll(async () => {
    for (const stream of streams) stream.close();
    await dynamo?.close();
  });

  it("reads a transaction's items-table row with the row it replaced, nothing for a cancelled one, in Lambda's shape", async () => {
    const clock = new VirtualClock();
    const stream = await newStream(clock);
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
    await clock.run(clock.ms() + 7_000);
    const records = await readAll(stream);
    const keys = { connection: { S: 's1' }, id: { S: 'a' } };
    const deleted = itemRow('s1', 'a', '2', { deleted: { BOOL: true }, syncedAt: { S: 'now' } });
    expect(shapes(records)).toEqual([
      { event: 'INSERT', keys, new: itemRow('s1', 'a', '1') },
      { event: 'MODIFY', keys, old: itemRow('s1', 'a', '1'), new: itemRow('s1', 'a', '2') },
      { event: 'MODIFY', keys, old: itemRow('s1', 'a', '2'), new: deleted },
      { event: 'MODIFY', keys, old: deleted, new: itemRow('s1', 'a', '4') },
    ]);
    for (const record of records) {
      expect(record).toMatchObject({ eventSource: 'aws:dynamodb', dynamodb: { StreamViewType: 'NEW_AND_OLD_IMAGES', ApproximateCreationDateTime: Math.floor(clock.ms() / 1000) } });
      expect(streamTableName(record.eventSourceARN)).toBe(ITEMS);
      expect(record.dynamodb.SizeBytes).toBeGreaterThan(0);
    }
    const sequences = records.map((record) => BigInt(record.dynamodb.SequenceNumber!));
    expect(sequences).toEqual([...sequences].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    expect(stream.count).toMatchObject({ records: 4 });
    expect(stream.count.getRecords).toBeGreaterThanOrEqual(2);
    expect(stream.count.emptyGetRecords).toBe(1);
  });

  it("reads concurrent writers' transactions in each connection's commit order", async () => {
    const stream = await newStream();
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
    const records = await readAll(stream);
    expect(records).toHaveLength(50);
    for (let c = 0; c < 10; c++) {
      const ids = records.filter((record) => record.dynamodb.Keys?.['connection']?.S === `s2-${c}`).map((record) => record.dynamodb.NewImage?.['id']?.S);
      expect(ids).toEqual([0, 1, 2, 3, 4].map((head) => `id-${c}-${head}`));
    }
  });

  it('reads once a transaction whose answer was lost and that the SDK sent again', async () => {
    const stream = await newStream();
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter, { random: () => 0, throttleRate: 0, unprocessedRate: 0, lostAckRate: 1 });
    try {
      const out = await client.send(outbox(putRow(itemRow('s3', 'a', '1')), 's3', 'a', 0));
      expect(out.$metadata.attempts).toBe(2);
      expect(meter.injected.lostAcks).toBe(1);
    } finally {
      client.destroy();
    }
    expect(shapes(await readAll(stream))).toEqual([{ event: 'INSERT', keys: { connection: { S: 's3' }, id: { S: 'a' } }, new: itemRow('s3', 'a', '1') }]);
  });

  it('hands the function batches of the deployed size, loses a batch, takes a failed batch again from its first failed record', async () => {
    const clock = new VirtualClock();
    const stream = await newStream(clock);
    const client: DynamoDBClient = dynamo.client();
    const ids = Array.from({ length: 250 }, (_, i) => `r${String(i).padStart(3, '0')}`);
    try {
      for (const id of ids) await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s4', id, '1') }));
    } finally {
      client.destroy();
    }
    const calls: string[][] = [];
    const handler = (async (event: { Records: StreamRecord[] }) => {
      const batch = event.Records.map((record) => record.dynamodb?.NewImage?.['id']?.S ?? '');
      calls.push(batch);
      // The first invocation fails from its 61st record on.
      return { batchItemFailures: calls.length === 1 ? [{ itemIdentifier: event.Records[60]!.dynamodb!.SequenceNumber! }] : [] };
    }) as unknown as ChangeEventsHandler;
    const fn: BuiltFunction<ChangeEventsHandler> = { name: 'change-events', handler, memoryMb: 256, timeoutMs: 60_000, environment: {} };
    const invocations: InvocationCount = { invocations: 0, durationMs: 0, memoryMb: 256 };
    const lost: string[][] = [];
    let stopped = false;
    const polling = pollStream({
      stream,
      fn,
      context: () => ({}) as Context,
      clock,
      invocations,
      stopped: () => stopped,
      // The first batch is lost.
      lose: (records) => lost.length === 0 && lost.push(records.map((record) => record.dynamodb?.NewImage?.['id']?.S ?? '')) > 0,
    });
    await clock.run(clock.ms() + 2_000);
    stopped = true;
    await clock.run(clock.ms() + 1_000);
    await polling;

    expect(CHANGE_EVENTS_BATCH_SIZE).toBe(100);
    expect(lost).toEqual([ids.slice(0, 100)]);
    expect(calls).toEqual([ids.slice(100, 200), ids.slice(160, 250)]);
    expect(invocations.invocations).toBe(2);
    expect(stream.size).toBe(0);
    const count = stream.count;
    expect(count).toMatchObject({ records: 250, lostBatches: 1, lostRecords: 100, retried: 40 });
    // Three reads brought records (100, 100, the last 50 to top up the 40 left); every other read came back empty.
    expect(count.getRecords - count.emptyGetRecords).toBe(3);
    expect(count.emptyGetRecords).toBeGreaterThan(0);
  });
});
