/**
 * The changes log's writer, on a mocked DynamoDB client: the exact TransactWriteItems it sends (the
 * row's write, the change, the head), what it does with each cancellation reason (a moved head, a
 * lost row condition, a TransactionConflict, throttling), and that one container writes one
 * connection's rows one at a time. The whole path against the harness's DynamoDB is in
 * test/functions/client-api/changes.test.ts.
 */
import { DynamoDBClient, GetItemCommand, TransactionCanceledException, TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { CHANGE_ATTEMPTS, ChangeOutbox, HEAD_ATTEMPTS, type OutboxChange } from '../../../functions/item-sync/adapters/change-outbox.js';
import { DynamoDbItemStore } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import type { ItemRow } from '../../../functions/item-sync/ports.js';
import { PermanentError, TransientError } from '../../../functions/shared/errors.js';

const ddb = mockClient(DynamoDBClient);
beforeEach(() => ddb.reset());

const TABLE = { tableName: 'changes', retentionDays: 35 };
const SYNCED_AT = '2026-11-27T10:00:00.000Z';
const EXPIRES = String(Date.parse(SYNCED_AT) / 1000 + 35 * 86_400);
const rowWrite: TransactWriteItem = { Put: { TableName: 'items', Item: { connection: { S: 'acme' }, id: { S: 'a' } }, ConditionExpression: 'attribute_not_exists(#id)', ExpressionAttributeNames: { '#id': 'id' } } };
const change: OutboxChange = { connection: 'acme', id: 'a', change: 'created', type: 'file', revision: '1', previousRevision: null, syncedAt: SYNCED_AT };

function outbox(sleeps: number[] = []): ChangeOutbox {
  return new ChangeOutbox(new DynamoDBClient({ region: 'eu-west-1' }), TABLE, { sleep: async (ms) => void sleeps.push(ms), random: () => 0.5, newEpoch: () => 'EPOCH' });
}

function cancelled(codes: string[], items: Record<number, Record<string, unknown>> = {}): TransactionCanceledException {
  return new TransactionCanceledException({
    message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`,
    $metadata: { httpStatusCode: 400 },
    CancellationReasons: codes.map((Code, i) => ({ Code, ...(items[i] ? { Item: items[i] as never } : {}) })),
  });
}

const headItem = (head: number) => ({ connection: { S: 'acme' }, seq: { N: '0' }, head: { N: String(head) }, epoch: { S: 'E1' } });

function transactions(): TransactWriteItem[][] {
  return ddb.commandCalls(TransactWriteItemsCommand).map((call) => call.args[0].input.TransactItems ?? []);
}

describe('ChangeOutbox.commit', () => {
  it("reads the head once (consistent), then commits the row, change n + 1 and the head n → n + 1 in one transaction; the next write uses the head it left", async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(41) });
    ddb.on(TransactWriteItemsCommand).resolves({});
    const writer = outbox();

    expect(await writer.commit(rowWrite, change)).toBe('written');
    expect(await writer.commit(rowWrite, { ...change, id: 'b', change: 'updated', previousRevision: '0' })).toBe('written');

    expect(ddb.commandCalls(GetItemCommand).map((call) => call.args[0].input)).toEqual([
      { TableName: 'changes', Key: { connection: { S: 'acme' }, seq: { N: '0' } }, ConsistentRead: true },
    ]);
    const [first, second] = transactions();
    expect(first).toEqual([
      rowWrite,
      {
        Put: {
          TableName: 'changes',
          Item: {
            connection: { S: 'acme' },
            seq: { N: '42' },
            change: { S: 'created' },
            id: { S: 'a' },
            type: { S: 'file' },
            revision: { S: '1' },
            syncedAt: { S: SYNCED_AT },
            expiresAt: { N: EXPIRES },
          },
          ConditionExpression: 'attribute_not_exists(#seq)',
          ExpressionAttributeNames: { '#seq': 'seq' },
        },
      },
      {
        Update: {
          TableName: 'changes',
          Key: { connection: { S: 'acme' }, seq: { N: '0' } },
          UpdateExpression: 'SET #head = :next, #epoch = if_not_exists(#epoch, :epoch)',
          ConditionExpression: '#head = :head',
          ExpressionAttributeNames: { '#head': 'head', '#epoch': 'epoch' },
          ExpressionAttributeValues: { ':next': { N: '42' }, ':epoch': { S: 'EPOCH' }, ':head': { N: '41' } },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        },
      },
    ]);
    expect(second?.[1]?.Put?.Item).toMatchObject({ seq: { N: '43' }, id: { S: 'b' }, change: { S: 'updated' }, previousRevision: { S: '0' } });
    expect(second?.[2]?.Update?.ExpressionAttributeValues).toEqual({ ':next': { N: '43' }, ':epoch': { S: 'EPOCH' }, ':head': { N: '42' } });
  });

  it('a connection without a log: change 1, the head created on condition that it is absent', async () => {
    ddb.on(GetItemCommand).resolves({});
    ddb.on(TransactWriteItemsCommand).resolves({});
    expect(await outbox().commit(rowWrite, { ...change, type: undefined })).toBe('written');
    const [only] = transactions();
    expect(only?.[1]?.Put?.Item).not.toHaveProperty('type');
    expect(only?.[1]?.Put?.Item?.['seq']).toEqual({ N: '1' });
    expect(only?.[2]?.Update).toMatchObject({ ConditionExpression: 'attribute_not_exists(#head)', ExpressionAttributeValues: { ':next': { N: '1' }, ':epoch': { S: 'EPOCH' } } });
  });

  it("another container moved the head: tried again at once with the head its cancellation reason holds, no wait, no second read", async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    ddb.on(TransactWriteItemsCommand).rejectsOnce(cancelled(['None', 'None', 'ConditionalCheckFailed'], { 2: headItem(9) })).resolves({});
    const sleeps: number[] = [];
    expect(await outbox(sleeps).commit(rowWrite, change)).toBe('written');
    expect(transactions().map((items) => items[1]?.Put?.Item?.['seq'])).toEqual([{ N: '6' }, { N: '10' }]);
    expect(ddb.commandCalls(GetItemCommand)).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it("the head was deleted (an erase): its reason holds no item, and the write starts a new log at 1", async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    ddb.on(TransactWriteItemsCommand).rejectsOnce(cancelled(['None', 'None', 'ConditionalCheckFailed'])).resolves({});
    expect(await outbox().commit(rowWrite, change)).toBe('written');
    expect(transactions()[1]?.[2]?.Update?.ConditionExpression).toBe('attribute_not_exists(#head)');
  });

  it("the row's condition failed: 'conflict', nothing tried again; a moved head it learnt is kept for the next write", async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    ddb.on(TransactWriteItemsCommand).rejectsOnce(cancelled(['ConditionalCheckFailed', 'None', 'ConditionalCheckFailed'], { 2: headItem(7) })).resolves({});
    const writer = outbox();
    expect(await writer.commit(rowWrite, change)).toBe('conflict');
    expect(transactions()).toHaveLength(1);
    expect(await writer.commit(rowWrite, change)).toBe('written');
    expect(transactions()[1]?.[1]?.Put?.Item?.['seq']).toEqual({ N: '8' });
  });

  it(`racing containers: after the first loss each try waits a random time that grows with each loss; ${HEAD_ATTEMPTS} losses in a row are a TransientError`, async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    let head = 5;
    ddb.on(TransactWriteItemsCommand).callsFake(() => {
      head += 1;
      throw cancelled(['None', 'None', 'ConditionalCheckFailed'], { 2: headItem(head) });
    });
    const sleeps: number[] = [];
    const writer = new ChangeOutbox(new DynamoDBClient({ region: 'eu-west-1' }), TABLE, { sleep: async (ms) => void sleeps.push(ms), random: () => 0.999, newEpoch: () => 'EPOCH' });
    const error = await writer.commit(rowWrite, change).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe(`DynamoDB TransactWriteItems of a row and its change was cancelled ${HEAD_ATTEMPTS} times (last: None, None, ConditionalCheckFailed)`);
    expect(transactions()).toHaveLength(HEAD_ATTEMPTS);
    // Each try asked for the head the last loss reported.
    expect(transactions().at(-1)?.[2]?.Update?.ExpressionAttributeValues?.[':head']).toEqual({ N: String(5 + HEAD_ATTEMPTS - 1) });
    // No wait after the first loss; then 5, 10, 20… ms at most (here just under), up to 250 ms.
    expect(sleeps.slice(0, 7)).toEqual([9, 19, 39, 79, 159, 249, 249]);
    expect(sleeps).toHaveLength(HEAD_ATTEMPTS - 2);
  });

  it('a change numbered above the head it knew: reads the head again', async () => {
    ddb.on(GetItemCommand).resolvesOnce({ Item: headItem(5) }).resolves({ Item: headItem(6) });
    ddb.on(TransactWriteItemsCommand).rejectsOnce(cancelled(['None', 'ConditionalCheckFailed', 'None'])).resolves({});
    expect(await outbox().commit(rowWrite, change)).toBe('written');
    expect(ddb.commandCalls(GetItemCommand)).toHaveLength(2);
    expect(transactions()[1]?.[1]?.Put?.Item?.['seq']).toEqual({ N: '7' });
  });

  it('TransactionConflict and throttling: tried again after a backoff', async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    ddb.on(TransactWriteItemsCommand)
      .rejectsOnce(cancelled(['None', 'None', 'TransactionConflict']))
      .rejectsOnce(cancelled(['ThrottlingError', 'None', 'None']))
      .resolves({});
    const sleeps: number[] = [];
    expect(await outbox(sleeps).commit(rowWrite, change)).toBe('written');
    expect(transactions()).toHaveLength(3);
    expect(sleeps).toHaveLength(2);
    expect(sleeps[1]!).toBeGreaterThan(sleeps[0]!);
  });

  it(`gives up after ${CHANGE_ATTEMPTS} attempts with a TransientError naming the reasons`, async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    ddb.on(TransactWriteItemsCommand).rejects(cancelled(['None', 'None', 'TransactionConflict']));
    const error = await outbox().commit(rowWrite, change).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe(`DynamoDB TransactWriteItems of a row and its change was cancelled ${CHANGE_ATTEMPTS} times (last: None, None, TransactionConflict)`);
    expect(transactions()).toHaveLength(CHANGE_ATTEMPTS);
  });

  it('a reason no later attempt can mend (an item collection over its size) is thrown as DynamoDB answered it', async () => {
    ddb.on(GetItemCommand).resolves({ Item: headItem(5) });
    const refused = cancelled(['ItemCollectionSizeLimitExceeded', 'None', 'None']);
    ddb.on(TransactWriteItemsCommand).rejects(refused);
    await expect(outbox().commit(rowWrite, change)).rejects.toBe(refused);
    expect(transactions()).toHaveLength(1);
  });

  it("one container writes one connection's rows one at a time (its own writes never race for the head); other connections go on", async () => {
    ddb.on(GetItemCommand).resolves({});
    const started: string[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    ddb.on(TransactWriteItemsCommand).callsFake(async (input: { TransactItems: TransactWriteItem[] }) => {
      const item = input.TransactItems[1]?.Put?.Item;
      started.push(`${item?.['connection']?.S}#${item?.['seq']?.N}`);
      if (started.length === 1) await gate;
      return {};
    });
    const writer = outbox();
    const first = writer.commit(rowWrite, change);
    const second = writer.commit(rowWrite, { ...change, id: 'b' });
    const other = writer.commit(rowWrite, { ...change, connection: 'other' });
    await other;
    expect(started).toEqual(['acme#1', 'other#1']);
    release();
    expect(await Promise.all([first, second])).toEqual(['written', 'written']);
    expect(started).toEqual(['acme#1', 'other#1', 'acme#2']);
  });
});

describe('DynamoDbItemStore with the changes table', () => {
  const store = () =>
    new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items', { changes: { ...TABLE, load: () => import('../../../functions/item-sync/adapters/change-outbox.js') }, newEpoch: () => 'EPOCH', sleep: async () => undefined, random: () => 0 });
  const row: ItemRow = { connection: 'acme', id: 'a', type: 'file', revision: '8', item: { id: 'a' }, syncedAt: SYNCED_AT };

  it("put over a live row with an object: the row's condition names the object key compared; the replaced key is that one", async () => {
    ddb.on(GetItemCommand).resolves({});
    ddb.on(TransactWriteItemsCommand).resolves({});
    expect(await store().put(row, { exists: true, revision: '7', deleted: false, objectKey: 'items/acme/old.json' })).toEqual({ result: 'written', replacedObjectKey: 'items/acme/old.json' });
    const [items] = transactions();
    expect(items?.[0]?.Put).toMatchObject({
      TableName: 'items',
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted) AND #itemObject.#objectKey = :objectKey',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted', '#itemObject': 'itemObject', '#objectKey': 'key' },
      ExpressionAttributeValues: { ':expected': { S: '7' }, ':objectKey': { S: 'items/acme/old.json' } },
    });
    expect(items?.[1]?.Put?.Item).toMatchObject({ change: { S: 'updated' }, revision: { S: '8' }, previousRevision: { S: '7' } });
  });

  it('put over a tombstone is a restore; a new row a creation (its condition: no object either)', async () => {
    ddb.on(GetItemCommand).resolves({});
    ddb.on(TransactWriteItemsCommand).resolves({});
    await store().put(row, { exists: true, revision: '8', deleted: true });
    await store().put(row, { exists: false });
    const [restore, create] = transactions();
    expect(restore?.[1]?.Put?.Item).toMatchObject({ change: { S: 'restored' }, revision: { S: '8' }, previousRevision: { S: '8' } });
    expect(restore?.[0]?.Put?.ConditionExpression).toBe('#revision = :expected AND #deleted = :true AND attribute_not_exists(#itemObject)');
    expect(create?.[1]?.Put?.Item).toMatchObject({ change: { S: 'created' } });
    expect(create?.[1]?.Put?.Item).not.toHaveProperty('previousRevision');
    expect(create?.[0]?.Put?.ConditionExpression).toBe('attribute_not_exists(#id) AND attribute_not_exists(#itemObject)');
  });

  it("markDeleted: the tombstone's Update and a 'deleted' change with the row's type; a lost condition is 'conflict'", async () => {
    ddb.on(GetItemCommand).resolves({});
    ddb.on(TransactWriteItemsCommand).resolvesOnce({}).rejects(cancelled(['ConditionalCheckFailed', 'None', 'None']));
    expect(await store().markDeleted({ connection: 'acme', id: 'a' }, '7', SYNCED_AT, 'folder')).toBe('written');
    expect(await store().markDeleted({ connection: 'acme', id: 'a' }, '7', SYNCED_AT, 'folder')).toBe('conflict');
    const [items] = transactions();
    expect(items?.[0]?.Update).toMatchObject({ TableName: 'items', UpdateExpression: 'SET #deleted = :true, #syncedAt = :syncedAt' });
    expect(items?.[1]?.Put?.Item).toMatchObject({ change: { S: 'deleted' }, type: { S: 'folder' }, revision: { S: '7' }, previousRevision: { S: '7' } });
  });

  it("a transaction cancelled as invalid (a ValidationError reason) can never succeed: a PermanentError with DynamoDB's reason, to be dead-lettered", async () => {
    ddb.on(GetItemCommand).resolves({});
    const refused = cancelled(['ValidationError', 'None', 'None']);
    refused.CancellationReasons![0]!.Message = 'One or more parameter values were invalid: Type mismatch for key id';
    ddb.on(TransactWriteItemsCommand).rejects(refused);
    const error = await store().put(row, { exists: false }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe("DynamoDB refused the item's TransactWriteItems as invalid (ValidationError: One or more parameter values were invalid: Type mismatch for key id)");
  });

  it("a transaction cancelled for the row's size (its reason a ValidationError, DynamoDB's size message) is 'too-large', as a PutItem refused for it: the item goes to the bucket", async () => {
    ddb.on(GetItemCommand).resolves({});
    const refused = cancelled(['ValidationError', 'None', 'None']);
    refused.CancellationReasons![0]!.Message = 'Item size has exceeded the maximum allowed size';
    ddb.on(TransactWriteItemsCommand).rejects(refused);
    expect(await store().put(row, { exists: false })).toEqual({ result: 'too-large', bytes: expect.any(Number) });
    expect(transactions()).toHaveLength(1);
    // The same message on the change's row is no size of the item's: dead-lettered with its reason.
    ddb.reset();
    ddb.on(GetItemCommand).resolves({});
    const other = cancelled(['None', 'ValidationError', 'None']);
    other.CancellationReasons![1]!.Message = 'Item size has exceeded the maximum allowed size';
    ddb.on(TransactWriteItemsCommand).rejects(other);
    const error = await store().put(row, { exists: false }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe("DynamoDB refused the item's TransactWriteItems as invalid (ValidationError: Item size has exceeded the maximum allowed size)");
  });

  it('a put that changes nothing the contract names (the same revision, live over live) is a plain PutItem: no change', async () => {
    ddb.on(GetItemCommand).resolves({});
    ddb.on(TransactWriteItemsCommand).resolves({});
    const { PutItemCommand } = await import('@aws-sdk/client-dynamodb');
    ddb.on(PutItemCommand).resolves({});
    expect(await store().put(row, { exists: true, revision: '8', deleted: false })).toEqual({ result: 'written' });
    expect(transactions()).toEqual([]);
    expect(ddb.commandCalls(PutItemCommand)).toHaveLength(1);
  });
});
