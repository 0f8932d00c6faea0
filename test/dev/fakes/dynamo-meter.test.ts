/**
 * The bench's and the soak's DynamoDB meter (dev/fakes/dynamo-meter.ts) on DynamoDB Local.
 *
 * The item sync's writes, each one single-item write (functions/item-sync/adapters/dynamodb-item-store.ts):
 * the conditional PutItem of a row (ReturnValues ALL_OLD when it replaces one) and the UpdateItem of
 * a tombstone. The meter records the row each stored, once; when it loses a write's answer, it notes
 * the object of the row the PutItem replaced (its ALL_OLD answer: the soak counts them), and the
 * SDK's second send fails its condition (the write's own row is no longer the one it expects): a
 * conditional failure, nothing stored again.
 *
 * TransactWriteItems, which the meter reads too (the sync sent its rows in them with their changes
 * before the changes writer: outbox-transactions.ts): the items-table rows a transaction stored (its
 * Put items, a markDeleted Update; not the change and head rows), a cancellation on a condition as a
 * conditional failure, and a lost acknowledgement that the SDK sends again with the same
 * ClientRequestToken, applied and recorded once (the replay is answered without a second apply).
 * It injects TransactionConflict cancellations when asked.
 */
import { PutItemCommand, UpdateItemCommand, type DynamoDBClient, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoMeter, instrumentDynamo, type DynamoChaos } from '../../../dev/fakes/dynamo-meter.js';
import { startLocalDynamo, type LocalDynamoDb, type LocalDynamo } from '../../../dev/fakes/local-dynamo.js';
import { CHANGES, createTables, getRow, headKey, itemRow, ITEMS, markDeleted, outbox, putRow, refusal } from './outbox-transactions.js';

/** Every successful write's answer lost (a draw of 0 is under any rate); nothing else injected. */
const LOSE_EVERY_ANSWER: DynamoChaos = { random: () => 0, throttleRate: 0, unprocessedRate: 0, lostAckRate: 1 };

describe('the DynamoDB meter', () => {
  let dynamo: LocalDynamo;
  let plain: DynamoDBClient;

  beforeAll(async () => {
    dynamo = await startLocalDynamo();
    await createTables(dynamo);
    plain = dynamo.client();
  });

  afterAll(async () => {
    plain?.destroy();
    await dynamo?.close();
  });

  it("records the item sync's PutItem once; a lost answer names the replaced row's object (ALL_OLD), and the SDK's second send fails its condition", async () => {
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter, LOSE_EVERY_ANSWER);
    try {
      // The row it replaces points to an object: the PutItem's ALL_OLD answer names it.
      await plain.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('m5', 'a', '1', { itemObject: { M: { key: { S: 'objects/a-1' } } } }) }));
      const sentBefore = dynamo.operations.length;
      const put = new PutItemCommand({ ...putRow(itemRow('m5', 'a', '2'), '1').Put!, ReturnValues: 'ALL_OLD' });
      expect(await refusal(client, put)).toMatchObject({ name: 'ConditionalCheckFailedException', status: 400 });
      expect(dynamo.operations.slice(sentBefore)).toEqual(['PutItem', 'PutItem']);
      expect(meter.requests).toEqual({ PutItem: 2 });
      expect(meter.injected.lostAcks).toBe(1);
      expect(meter.lostAckReplacedObjectKeys).toEqual(['objects/a-1']);
      expect(meter.conditionalFailures).toEqual({ PutItem: 1 });
      expect(meter.writes).toEqual([{ id: 'a', state: 'live:2', operation: 'PutItem' }]);
      expect(await getRow(plain, ITEMS, { connection: { S: 'm5' }, id: { S: 'a' } })).toEqual(itemRow('m5', 'a', '2'));
      // No transaction: the meter remembers none.
      expect(meter.transactions.size).toBe(0);

      // The tombstone's UpdateItem, its answer lost too: recorded once with the row as written (the
      // meter asks for it, ReturnValues ALL_NEW, before the request is built), its second send a
      // conditional failure; it replaces no object (a tombstone keeps its object).
      expect(await refusal(client, new UpdateItemCommand(markDeleted('m5', 'a', '2', 'now').Update! as never))).toMatchObject({
        name: 'ConditionalCheckFailedException',
      });
      expect(meter.writes).toEqual([
        { id: 'a', state: 'live:2', operation: 'PutItem' },
        { id: 'a', state: 'deleted:2', operation: 'UpdateItem' },
      ]);
      expect(meter.injected.lostAcks).toBe(2);
      expect(meter.conditionalFailures).toEqual({ PutItem: 1, UpdateItem: 1 });
      expect(meter.lostAckReplacedObjectKeys).toEqual(['objects/a-1']);
      expect(await getRow(plain, ITEMS, { connection: { S: 'm5' }, id: { S: 'a' } })).toMatchObject({ revision: { S: '2' }, deleted: { BOOL: true }, syncedAt: { S: 'now' } });
    } finally {
      client.destroy();
    }
  });

  it('records the items-table row a transaction stored, once, and the SDK sends a lost answer again without a second apply', async () => {
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter, LOSE_EVERY_ANSWER);
    try {
      // The row it replaces points to an object: the meter notes its key, as for a PutItem's lost answer.
      await plain.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('m1', 'a', '1', { itemObject: { M: { key: { S: 'objects/a-1' } } } }) }));
      const sentBefore = dynamo.operations.length;
      const out = await client.send(outbox(comparingObject(putRow(itemRow('m1', 'a', '2'), '1'), 'objects/a-1'), 'm1', 'a', 0));
      expect(out.$metadata.attempts).toBe(2);
      expect(dynamo.operations.slice(sentBefore)).toEqual(['TransactWriteItems', 'TransactWriteItems']);
      expect(meter.requests).toEqual({ TransactWriteItems: 2 });
      expect(meter.injected.lostAcks).toBe(1);
      expect(meter.lostAckReplacedObjectKeys).toEqual(['objects/a-1']);
      // The change row has an `id` too: only the items-table row is a write of the item.
      expect(meter.writes).toEqual([{ id: 'a', state: 'live:2', operation: 'TransactWriteItems' }]);
      expect(await getRow(plain, CHANGES, headKey('m1'))).toMatchObject({ head: { N: '1' } });
      expect(await getRow(plain, CHANGES, { connection: { S: 'm1' }, seq: { N: '2' } })).toBeUndefined();

      await client.send(outbox(markDeleted('m1', 'a', '2', 'now'), 'm1', 'a', 1));
      expect(meter.writes.map((write) => write.state)).toEqual(['live:2', 'deleted:2']);
      expect(meter.injected.lostAcks).toBe(2);
    } finally {
      client.destroy();
    }
  });

  it('counts a cancellation on a condition as a conditional failure, and records nothing', async () => {
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter);
    try {
      await client.send(outbox(putRow(itemRow('m2', 'a', '1')), 'm2', 'a', 0));
      expect((await refusal(client, outbox(putRow(itemRow('m2', 'b', '1')), 'm2', 'b', 0)))?.name).toBe('TransactionCanceledException');
      expect(meter.conditionalFailures).toEqual({ TransactWriteItems: 1 });
      expect(meter.writes).toEqual([{ id: 'a', state: 'live:1', operation: 'TransactWriteItems' }]);
      expect(meter.transactions.size).toBe(1);
      meter.reset();
      expect(meter.transactions.size).toBe(0);
    } finally {
      client.destroy();
    }
  });
});

describe('the DynamoDB meter injecting conflicts', () => {
  let dynamo: LocalDynamoDb;

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    await createTables(dynamo);
  });

  afterAll(async () => {
    await dynamo?.close();
  });

  it('cancels a transaction with a TransactionConflict reason on one action, before it reaches the table', async () => {
    const meter = new DynamoMeter();
    // Draws: 0 for the conflict (under the rate), 0.9 for the action (the last of 3).
    const draws = [0, 0.9];
    const chaos: DynamoChaos = { random: () => draws.shift() ?? 1, throttleRate: 0, unprocessedRate: 0, lostAckRate: 0, conflictRate: 0.5 };
    const client = instrumentDynamo(dynamo.client({ maxAttempts: 1 }), meter, chaos);
    try {
      expect(await refusal(client, outbox(putRow(itemRow('m4', 'a', '1')), 'm4', 'a', 0))).toMatchObject({
        name: 'TransactionCanceledException',
        status: 400,
        reasons: [{ Code: 'None' }, { Code: 'None' }, { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' }],
      });
      expect(meter.injected.conflicts).toBe(1);
      expect(meter.requests).toEqual({});
      expect(await getRow(client, ITEMS, { connection: { S: 'm4' }, id: { S: 'a' } })).toBeUndefined();
      // The next draw (1) is over the rate: the transaction goes through.
      await client.send(outbox(putRow(itemRow('m4', 'a', '1')), 'm4', 'a', 0));
      expect(meter.writes).toEqual([{ id: 'a', state: 'live:1', operation: 'TransactWriteItems' }]);
    } finally {
      client.destroy();
    }
  });
});

describe('the DynamoDB meter across lost answers', () => {
  let dynamo: LocalDynamoDb;

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    await createTables(dynamo);
  });

  afterAll(async () => {
    await dynamo?.close();
  });

  it('records each committed transaction once, and DynamoDB applies each once', async () => {
    const meter = new DynamoMeter();
    const client = instrumentDynamo(dynamo.client(), meter, LOSE_EVERY_ANSWER);
    try {
      await client.send(outbox(putRow(itemRow('m3', 'a', '1')), 'm3', 'a', 0));
      await client.send(outbox(putRow(itemRow('m3', 'b', '1')), 'm3', 'b', 1));
      expect(meter.requests).toEqual({ TransactWriteItems: 4 });
      expect(meter.injected.lostAcks).toBe(2);
      // Nothing names an object the rows replaced (there were none).
      expect(meter.lostAckReplacedObjectKeys).toEqual([]);
      expect(meter.writes).toEqual([
        { id: 'a', state: 'live:1', operation: 'TransactWriteItems' },
        { id: 'b', state: 'live:1', operation: 'TransactWriteItems' },
      ]);
      expect(meter.transactions.size).toBe(2);
      expect(await getRow(client, CHANGES, headKey('m3'))).toMatchObject({ head: { N: '2' } });
    } finally {
      client.destroy();
    }
  });
});

/**
 * A Put whose condition also compares the object key of the row it replaces (as the sync's outbox
 * did, a transaction returning no old row): the meter names that object when it loses the answer.
 */
function comparingObject(write: TransactWriteItem, objectKey: string): TransactWriteItem {
  const put = write.Put!;
  return {
    Put: {
      ...put,
      ConditionExpression: `${put.ConditionExpression} AND #itemObject.#objectKey = :objectKey`,
      ExpressionAttributeNames: { ...put.ExpressionAttributeNames, '#itemObject': 'itemObject', '#objectKey': 'key' },
      ExpressionAttributeValues: { ...put.ExpressionAttributeValues, ':objectKey': { S: objectKey } },
    },
  };
}
