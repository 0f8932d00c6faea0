/**
 * The simulated items-table stream (dev/sim/items-stream.ts) sees the rows the sync writes in
 * TransactWriteItems: a record per items-table Put or Update, with the row before (OldImage) and
 * after (NewImage) as the harness's dynalite committed them, in commit order, none for the changes
 * table's rows or a cancelled transaction, one for a transaction the SDK sent again after a lost
 * answer; with dynalite in this process and in a child process.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onCommit } from '../../../dev/fakes/dynalite-commits.js';
import { startDynalite, type Dynalite } from '../../../dev/fakes/dynalite.js';
import { DynamoMeter, instrumentDynamo } from '../../../dev/fakes/dynamo-meter.js';
import { ItemsStream, streamWrites } from '../../../dev/sim/items-stream.js';
import { emptyStreamCount } from '../../../dev/sim/meters.js';
import { VirtualClock } from '../../../dev/sim/virtual-clock.js';
import { createTables, itemRow, ITEMS, markDeleted, outbox, putRow, refusal } from '../fakes/outbox-transactions.js';

function newStream(): ItemsStream {
  const count = emptyStreamCount();
  return new ItemsStream(new VirtualClock(), count);
}

/** The stream's records not yet read, as event name, key and images. */
function records(stream: ItemsStream): Array<{ event?: string; keys?: object; old?: object; new?: object }> {
  return stream.peek(1_000).map((record) => ({
    event: record.eventName,
    keys: record.dynamodb?.Keys,
    ...(record.dynamodb?.OldImage ? { old: record.dynamodb.OldImage } : {}),
    new: record.dynamodb?.NewImage,
  }));
}

describe('the items stream, dynalite in this process', () => {
  let dynamo: Dynalite;

  beforeAll(async () => {
    dynamo = await startDynalite({ proxy: false });
    await createTables(dynamo);
  });

  afterAll(async () => {
    await dynamo?.close();
  });

  it("records a transaction's items-table row with the row it replaced, and nothing for a cancelled one", async () => {
    const stream = newStream();
    const client = dynamo.client({ maxAttempts: 1 });
    streamWrites(client, ITEMS, stream);
    try {
      await client.send(outbox(putRow(itemRow('s1', 'a', '1')), 's1', 'a', 0));
      await client.send(outbox(putRow(itemRow('s1', 'a', '2'), '1'), 's1', 'a', 1));
      expect((await refusal(client, outbox(putRow(itemRow('s1', 'a', '3'), '1'), 's1', 'a', 2)))?.name).toBe('TransactionCanceledException');
      await client.send(outbox(markDeleted('s1', 'a', '2', 'now'), 's1', 'a', 2));
      // A PutItem is recorded as before (its ALL_OLD the old image).
      await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('s1', 'a', '4'), ReturnValues: 'ALL_OLD' }));
      const keys = { connection: { S: 's1' }, id: { S: 'a' } };
      const deleted = itemRow('s1', 'a', '2', { deleted: { BOOL: true }, syncedAt: { S: 'now' } });
      expect(records(stream)).toEqual([
        { event: 'INSERT', keys, new: itemRow('s1', 'a', '1') },
        { event: 'MODIFY', keys, old: itemRow('s1', 'a', '1'), new: itemRow('s1', 'a', '2') },
        { event: 'MODIFY', keys, old: itemRow('s1', 'a', '2'), new: deleted },
        { event: 'MODIFY', keys, old: deleted, new: itemRow('s1', 'a', '4') },
      ]);
      expect(stream.count).toMatchObject({ records: 4, unmodelled: 0 });
    } finally {
      client.destroy();
    }
  });

  it('records concurrent transactions in the order they committed', async () => {
    const stream = newStream();
    const client = dynamo.client();
    streamWrites(client, ITEMS, stream);
    const committed: string[] = [];
    const stop = onCommit((commit) => {
      for (const write of commit.writes) if (write.table === ITEMS) committed.push(String(write.newImage?.['id']?.['S']));
    });
    try {
      // Each connection's writer moves its own head: 10 connections at once, 5 writes each.
      await Promise.all(
        Array.from({ length: 10 }, async (_, c) => {
          for (let head = 0; head < 5; head++) await client.send(outbox(putRow(itemRow(`s2-${c}`, `id-${c}-${head}`, '1')), `s2-${c}`, `id-${c}-${head}`, head));
        }),
      );
    } finally {
      stop();
      client.destroy();
    }
    expect(committed).toHaveLength(50);
    expect(records(stream).map((record) => (record.new as Record<string, { S: string }>)['id']!.S)).toEqual(committed);
  });

  it('records once a transaction whose answer was lost and that the SDK sent again', async () => {
    const stream = newStream();
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter, { random: () => 0, throttleRate: 0, unprocessedRate: 0, lostAckRate: 1 });
    streamWrites(client, ITEMS, stream);
    try {
      const out = await client.send(outbox(putRow(itemRow('s3', 'a', '1')), 's3', 'a', 0));
      expect(out.$metadata.attempts).toBe(2);
      expect(meter.injected.lostAcks).toBe(1);
      expect(records(stream)).toEqual([{ event: 'INSERT', keys: { connection: { S: 's3' }, id: { S: 'a' } }, new: itemRow('s3', 'a', '1') }]);
    } finally {
      client.destroy();
    }
  });
});

describe('the items stream, dynalite in a child process', () => {
  let dynamo: Dynalite | undefined;
  let client: DynamoDBClient | undefined;

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('records what the child reports it committed', async () => {
    dynamo = await startDynalite({ where: 'child', proxy: false });
    await createTables(dynamo);
    const stream = newStream();
    client = dynamo.client({ maxAttempts: 1 });
    streamWrites(client, ITEMS, stream);
    await client.send(outbox(putRow(itemRow('s4', 'a', '1')), 's4', 'a', 0));
    await client.send(outbox(putRow(itemRow('s4', 'a', '2'), '1'), 's4', 'a', 1));
    expect(records(stream)).toEqual([
      { event: 'INSERT', keys: { connection: { S: 's4' }, id: { S: 'a' } }, new: itemRow('s4', 'a', '1') },
      { event: 'MODIFY', keys: { connection: { S: 's4' }, id: { S: 'a' } }, old: itemRow('s4', 'a', '1'), new: itemRow('s4', 'a', '2') },
    ]);
  });
});
