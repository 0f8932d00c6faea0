/**
 * The items table's stream as the simulations' event source reads it (dev/sim/items-stream.ts), on
 * the virtual clock; the reading itself is tested in test/dev/fakes/dynamodb-stream.test.ts. The
 * event source's side holds what it read until done, every read counted; `pollStream` hands the
 * function batches of up to the deployed size, takes a failed batch again from its first failed
 * record, and can lose a batch.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangeEventsHandler } from '../../../functions/change-events/app.js';
import type { StreamRecord } from '../../../functions/change-events/ports.js';
import { CHANGE_EVENTS_BATCH_SIZE } from '../../../infra/deployment.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import type { BuiltFunction } from '../../../dev/system/functions.js';
import { ItemsStream, pollStream, type LambdaStreamRecord } from '../../../dev/sim/items-stream.js';
import { DYNAMO_LATENCY_MS } from '../../../dev/fakes/dynamo-latency.js';
import { emptyStreamCount, tableWrites, trackedDynamo, type InvocationCount } from '../../../dev/sim/meters.js';
import { VirtualClock } from '../../../dev/sim/virtual-clock.js';
import { createTables, itemRow, ITEMS, shapes } from '../fakes/outbox-transactions.js';

describe('the items stream', () => {
  let dynamo: LocalDynamoDb;
  const streams: ItemsStream[] = [];

  /** A reader of the items table's stream from where it is now (what earlier tests wrote left behind). */
  async function newStream(clock = new VirtualClock()): Promise<ItemsStream> {
    const stream = new ItemsStream({ dynamo, tableName: ITEMS, clock, count: emptyStreamCount() });
    streams.push(stream);
    // The stream's calls wait AWS's round trip in virtual time.
    await clock.during(stream.skipToLatest());
    return stream;
  }

  /** Every record the stream holds now (read until a read comes back empty). */
  async function readAll(stream: ItemsStream, clock: VirtualClock): Promise<LambdaStreamRecord[]> {
    for (;;) {
      const before = stream.size;
      const records = await clock.during(stream.take(before + 1_000));
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

  it('counts its reads and records, and holds what it read until done', async () => {
    const clock = new VirtualClock();
    const stream = await newStream(clock);
    const client = dynamo.client();
    try {
      for (const revision of ['1', '2', '3', '4']) await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s1', 'a', revision) }));
    } finally {
      client.destroy();
    }
    await clock.run(clock.ms() + 7_000);
    const readFrom = clock.ms();
    const records = await readAll(stream, clock);
    // Each call waited AWS's round trip in virtual time: the shard was empty when the reader started,
    // so its first read took the shard's iterator (GetShardIterator), then the GetRecords.
    expect(clock.ms() - readFrom).toBe(DYNAMO_LATENCY_MS.GetShardIterator + stream.count.getRecords * DYNAMO_LATENCY_MS.GetRecords);
    expect(shapes(records).map((shape) => shape.event)).toEqual(['INSERT', 'MODIFY', 'MODIFY', 'MODIFY']);
    // Stamped with the virtual time it read them.
    for (const record of records) expect(record.dynamodb.ApproximateCreationDateTime).toBe(Math.floor(clock.ms() / 1000));
    expect(stream.size).toBe(4);
    expect(stream.count).toMatchObject({ records: 4 });
    expect(stream.count.getRecords).toBeGreaterThanOrEqual(2);
    expect(stream.count.emptyGetRecords).toBe(1);
    expect(stream.readThroughSince(clock.ms())).toBe(false);
    stream.done(4);
    expect(stream.size).toBe(0);
  });

  it('knows an idle stream is empty without asking once every shard came back empty with no write since, and reads again after a write', async () => {
    const clock = new VirtualClock();
    let writes = 0;
    const stream = new ItemsStream({ dynamo, tableName: ITEMS, clock, count: emptyStreamCount(), writes: () => writes });
    streams.push(stream);
    await clock.during(stream.skipToLatest());
    const client = dynamo.client();
    const put = (id: string) => client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s5', id, '1') }));
    try {
      await put('before');
      writes += 1;
      expect(shapes(await readAll(stream, clock)).map((shape) => shape.event)).toEqual(['INSERT']);
      stream.done(1);
      // Every shard read empty since the last write the counter knows of: DynamoDB Local is not asked,
      // so a write the counter does not know of is not seen; the read is counted all the same, and
      // waits a GetRecords' round trip.
      await put('unannounced');
      const counted = { ...stream.count };
      const from = clock.ms();
      expect(await clock.during(stream.take(100))).toEqual([]);
      expect(clock.ms() - from).toBe(DYNAMO_LATENCY_MS.GetRecords);
      expect(stream.count).toMatchObject({ getRecords: counted.getRecords + 1, emptyGetRecords: counted.emptyGetRecords + 1, records: counted.records });
      expect(stream.readThroughSince(from)).toBe(true);
      // Once the counter moves, the stream is read again: the record it had not seen.
      writes += 1;
      const records = await readAll(stream, clock);
      expect(records.map((record) => record.dynamodb.NewImage?.['id']?.S)).toEqual(['unannounced']);
    } finally {
      client.destroy();
    }
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
      batchSize: CHANGE_EVENTS_BATCH_SIZE,
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
  it('reads a write sent before its answer has come: the table\'s write count moves as the request is sent', async () => {
    const clock = new VirtualClock();
    const stream = new ItemsStream({ dynamo, tableName: ITEMS, clock, count: emptyStreamCount(), writes: () => tableWrites(dynamo, ITEMS) });
    streams.push(stream);
    await clock.during(stream.skipToLatest());
    // Read through: the reader knows the stream empty, with the count as it is.
    await clock.during(stream.take(10));
    const client = trackedDynamo(dynamo, { clock, counts: {}, itemsTable: ITEMS, itemCount: () => undefined });
    const before = tableWrites(dynamo, ITEMS);
    const t0 = clock.ms();
    let read: LambdaStreamRecord[] | undefined;
    // The PutItem is sent at 3 ms and answered at 6; the read is made at 4, before the answer.
    clock.at(t0, () => void client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s9', 'w', '1') })));
    clock.at(t0 + DYNAMO_LATENCY_MS.PutItem / 2 + 1, () => {
      expect(tableWrites(dynamo, ITEMS)).toBe(before + 1);
      void stream.take(10).then((records) => void (read = records));
    });
    await clock.run(Number.MAX_SAFE_INTEGER, () => read !== undefined);
    client.destroy();
    expect(shapes(read!).map((shape) => shape.event)).toEqual(['INSERT']);
    expect(stream.count.getRecords).toBeGreaterThan(0);
  });
});
