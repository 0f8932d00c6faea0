/**
 * The harness's DynamoDB (dev/fakes/dynalite.ts) has TransactWriteItems as strict as DynamoDB's
 * (dev/fakes/dynalite-transactions.ts), through a real DynamoDBClient: all the actions or none, one
 * cancellation reason per action (the existing row with ALL_OLD), DynamoDB's refusals and
 * messages, ClientRequestToken idempotency, transactions racing on one head; in this process, in a
 * child process, on disk; the proxy's injected cancellations; every commit told with its rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { onCommit, type CommittedTransaction } from '../../../dev/fakes/dynalite-commits.js';
import { startDynalite, type Dynalite, type LocalDynamo } from '../../../dev/fakes/dynalite.js';
import { PARTITION_KEY_TOO_LARGE, SORT_KEY_TOO_LARGE } from '../../../dev/fakes/dynalite-key-sizes.js';
import { MULTIPLE_OPERATIONS, ONE_ACTION_EACH, TRANSACTION_TOO_LARGE } from '../../../dev/fakes/dynalite-transact-write.js';
import { IN_PROGRESS_MESSAGE, TOKEN_WINDOW_MS } from '../../../dev/fakes/dynalite-transactions.js';
import {
  cancelledMessage,
  CHANGES,
  CONDITION_FAILED,
  createTables,
  getRow,
  headKey,
  itemRow,
  ITEMS,
  markDeleted,
  moveHead,
  NONE,
  outbox,
  putChange,
  putRow,
  refusal,
  type Row,
} from './outbox-transactions.js';

/** A row of about `kb` KB. */
function bigRow(connection: string, id: string, kb: number): Row {
  return itemRow(connection, id, '1', { item: { S: 'x'.repeat(kb * 1024) } });
}

/** The part of the dynalite store a test holds back. */
interface StoreOfTest {
  db: { batch(ops: unknown[], cb: (error?: Error | null) => void): void };
}

/** The store of the dynalite last started in this process (as dynalite-transactions.ts takes it). */
function lastStore(): StoreOfTest {
  const db = createRequire(import.meta.url)('dynalite/db') as Record<symbol, { made?: StoreOfTest } | undefined>;
  return db[Symbol.for('content-sync.dynalite-store-capture')]!.made!;
}

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 2));
}

function validation(message: string | RegExp): object {
  return { name: 'ValidationException', message: typeof message === 'string' ? message : expect.stringMatching(message), status: 400 };
}

describe('TransactWriteItems in this process', () => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let store: StoreOfTest;

  beforeAll(async () => {
    dynamo = await startDynalite();
    store = lastStore();
    await createTables(dynamo);
    client = dynamo.client({ maxAttempts: 1 });
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('commits every action: the row, its change and the head (if_not_exists keeps the first epoch)', async () => {
    const out = await client.send(outbox(putRow(itemRow('c1', 'a', '1')), 'c1', 'a', 0));
    expect(out.$metadata.httpStatusCode).toBe(200);
    expect(out.ConsumedCapacity).toBeUndefined();
    expect(await getRow(client, ITEMS, { connection: { S: 'c1' }, id: { S: 'a' } })).toEqual(itemRow('c1', 'a', '1'));
    expect(await getRow(client, CHANGES, { connection: { S: 'c1' }, seq: { N: '1' } })).toMatchObject({ id: { S: 'a' } });
    expect(await getRow(client, CHANGES, headKey('c1'))).toEqual({ ...headKey('c1'), head: { N: '1' }, epoch: { S: 'epoch-1' } });

    await client.send(new TransactWriteItemsCommand({ TransactItems: [putRow(itemRow('c1', 'a', '2'), '1'), putChange('c1', 2, 'a'), moveHead('c1', 1, 'epoch-2')] }));
    expect(await getRow(client, ITEMS, { connection: { S: 'c1' }, id: { S: 'a' } })).toEqual(itemRow('c1', 'a', '2'));
    expect(await getRow(client, CHANGES, headKey('c1'))).toEqual({ ...headKey('c1'), head: { N: '2' }, epoch: { S: 'epoch-1' } });
    expect(dynamo.operations.filter((operation) => operation === 'TransactWriteItems')).toHaveLength(2);
  });

  it('applies nothing when a condition fails: one reason per action in order, the existing row with ALL_OLD', async () => {
    await client.send(outbox(putRow(itemRow('c2', 'a', '1')), 'c2', 'a', 0));
    // The row exists (its Put asks no ALL_OLD), the change is new, the head is at 1, not 0 (ALL_OLD).
    const refused = await refusal(client, outbox(putRow(itemRow('c2', 'a', '9')), 'c2', 'a', 0));
    const head = { ...headKey('c2'), head: { N: '1' }, epoch: { S: 'epoch-1' } };
    expect(refused).toEqual({
      name: 'TransactionCanceledException',
      message: cancelledMessage('ConditionalCheckFailed', 'ConditionalCheckFailed', 'ConditionalCheckFailed'),
      status: 400,
      reasons: [CONDITION_FAILED, CONDITION_FAILED, { ...CONDITION_FAILED, Item: head }],
    });
    // Only the row's condition fails: the other two would pass, and are not applied either.
    const rowOnly = await refusal(client, outbox(putRow(itemRow('c2', 'a', '9'), '0'), 'c2', 'a', 1));
    expect(rowOnly).toEqual({ name: 'TransactionCanceledException', message: cancelledMessage('ConditionalCheckFailed', 'None', 'None'), status: 400, reasons: [CONDITION_FAILED, NONE, NONE] });
    expect(await getRow(client, ITEMS, { connection: { S: 'c2' }, id: { S: 'a' } })).toEqual(itemRow('c2', 'a', '1'));
    expect(await getRow(client, CHANGES, { connection: { S: 'c2' }, seq: { N: '2' } })).toBeUndefined();
    expect(await getRow(client, CHANGES, headKey('c2'))).toEqual(head);
    // ALL_OLD on a row that does not exist: no Item.
    const noHead = await refusal(client, outbox(putRow(itemRow('c3', 'a', '1')), 'c3', 'a', 4));
    expect(noHead?.reasons).toEqual([NONE, NONE, CONDITION_FAILED]);
    expect(await getRow(client, ITEMS, { connection: { S: 'c3' }, id: { S: 'a' } })).toBeUndefined();
  });

  it('surfaces as the SDK surfaces AWS cancellations: a TransactionCanceledException with CancellationReasons', async () => {
    await client.send(outbox(putRow(itemRow('c4', 'a', '1')), 'c4', 'a', 0));
    const error = await client.send(outbox(putRow(itemRow('c4', 'b', '1')), 'c4', 'b', 0)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransactionCanceledException);
    const cancelled = error as TransactionCanceledException;
    expect(cancelled.name).toBe('TransactionCanceledException');
    expect(cancelled.$fault).toBe('client');
    expect(cancelled.message).toBe(cancelledMessage('None', 'ConditionalCheckFailed', 'ConditionalCheckFailed'));
    expect(cancelled.CancellationReasons?.[2]?.Item?.['head']).toEqual({ N: '1' });
  });

  it('marks a row deleted with an Update, on its condition', async () => {
    await client.send(outbox(putRow(itemRow('c5', 'a', '3')), 'c5', 'a', 0));
    expect((await refusal(client, outbox(markDeleted('c5', 'a', '2', 'then'), 'c5', 'a', 1)))?.reasons).toEqual([CONDITION_FAILED, NONE, NONE]);
    await client.send(outbox(markDeleted('c5', 'a', '3', 'now'), 'c5', 'a', 1));
    expect(await getRow(client, ITEMS, { connection: { S: 'c5' }, id: { S: 'a' } })).toEqual(itemRow('c5', 'a', '3', { deleted: { BOOL: true }, syncedAt: { S: 'now' } }));
    expect((await refusal(client, outbox(markDeleted('c5', 'a', '3', 'again'), 'c5', 'a', 2)))?.reasons).toEqual([CONDITION_FAILED, NONE, NONE]);
  });

  it('takes Delete and ConditionCheck actions; a ConditionCheck writes nothing', async () => {
    await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('c6', 'gone', '1') }));
    await client.send(new PutItemCommand({ TableName: ITEMS, Item: itemRow('c6', 'checked', '5') }));
    const check = (revision: string): TransactWriteItem => ({
      ConditionCheck: {
        TableName: ITEMS,
        Key: { connection: { S: 'c6' }, id: { S: 'checked' } },
        ConditionExpression: '#revision = :r',
        ExpressionAttributeNames: { '#revision': 'revision' },
        ExpressionAttributeValues: { ':r': { S: revision } },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    });
    const remove: TransactWriteItem = {
      Delete: { TableName: ITEMS, Key: { connection: { S: 'c6' }, id: { S: 'gone' } }, ConditionExpression: 'attribute_exists(#id)', ExpressionAttributeNames: { '#id': 'id' } },
    };
    expect((await refusal(client, new TransactWriteItemsCommand({ TransactItems: [check('4'), remove] })))?.reasons).toEqual([
      { ...CONDITION_FAILED, Item: itemRow('c6', 'checked', '5') },
      NONE,
    ]);
    expect(await getRow(client, ITEMS, { connection: { S: 'c6' }, id: { S: 'gone' } })).toEqual(itemRow('c6', 'gone', '1'));
    await client.send(new TransactWriteItemsCommand({ TransactItems: [check('5'), remove] }));
    expect(await getRow(client, ITEMS, { connection: { S: 'c6' }, id: { S: 'gone' } })).toBeUndefined();
    expect(await getRow(client, ITEMS, { connection: { S: 'c6' }, id: { S: 'checked' } })).toEqual(itemRow('c6', 'checked', '5'));
    expect((await refusal(client, new TransactWriteItemsCommand({ TransactItems: [remove] })))?.reasons).toEqual([CONDITION_FAILED]);
  });

  it('refuses two actions on one item, 101 actions and none, writing nothing', async () => {
    const twice = new TransactWriteItemsCommand({
      TransactItems: [putRow(itemRow('c7', 'a', '1')), { ConditionCheck: { TableName: ITEMS, Key: { connection: { S: 'c7' }, id: { S: 'a' } }, ConditionExpression: 'attribute_not_exists(id)' } }],
    });
    expect(await refusal(client, twice)).toEqual(validation(MULTIPLE_OPERATIONS));
    const many = new TransactWriteItemsCommand({ TransactItems: Array.from({ length: 101 }, (_, i) => putRow(itemRow('c7', `id-${i}`, '1'))) });
    expect(await refusal(client, many)).toEqual(
      validation(/^1 validation error detected: Value '\[.+\]' at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100$/s),
    );
    expect(await refusal(client, new TransactWriteItemsCommand({ TransactItems: [] }))).toEqual(
      validation("1 validation error detected: Value '[]' at 'transactItems' failed to satisfy constraint: Member must have length greater than or equal to 1"),
    );
    // 100 are fine.
    await client.send(new TransactWriteItemsCommand({ TransactItems: Array.from({ length: 100 }, (_, i) => putRow(itemRow('c8', `id-${i}`, '1'))) }));
    expect((await dynamo.scan(ITEMS)).filter((row) => row['connection']?.S === 'c8')).toHaveLength(100);
    expect((await dynamo.scan(ITEMS)).filter((row) => row['connection']?.S === 'c7')).toHaveLength(0);
  });

  it('refuses over 4 MB of items in all, and a Put item over 400 KB, writing nothing', async () => {
    const puts = (n: number, kb: number): TransactWriteItem[] => Array.from({ length: n }, (_, i) => ({ Put: { TableName: ITEMS, Item: bigRow('c9', `big-${i}`, kb) } }));
    expect(await refusal(client, new TransactWriteItemsCommand({ TransactItems: puts(11, 390) }))).toEqual(validation(TRANSACTION_TOO_LARGE));
    expect(await refusal(client, new TransactWriteItemsCommand({ TransactItems: puts(1, 401) }))).toEqual(validation('Item size has exceeded the maximum allowed size'));
    expect((await dynamo.scan(ITEMS)).filter((row) => row['connection']?.S === 'c9')).toHaveLength(0);
    await client.send(new TransactWriteItemsCommand({ TransactItems: puts(10, 390) }));
    expect((await dynamo.scan(ITEMS)).filter((row) => row['connection']?.S === 'c9')).toHaveLength(10);
  });

  it('refuses a key too large in UTF-8 bytes in any action, before running', async () => {
    // 600 `é`: 1,200 bytes in UTF-8, 600 UTF-16 code units (what dynalite alone would take).
    const longId = 'é'.repeat(600);
    const longConnection = 'é'.repeat(1025);
    expect(await refusal(client, outbox(putRow(itemRow('c10', longId, '1')), 'c10', 'a', 0))).toEqual(validation(SORT_KEY_TOO_LARGE));
    expect(await refusal(client, outbox(markDeleted('c10', longId, '1', 'now'), 'c10', 'a', 0))).toEqual(validation(SORT_KEY_TOO_LARGE));
    expect(await refusal(client, outbox(putRow(itemRow('c10', 'a', '1')), longConnection, 'a', 0))).toEqual(validation(PARTITION_KEY_TOO_LARGE));
    expect(await getRow(client, CHANGES, headKey('c10'))).toBeUndefined();
    // 1,024 bytes is fine.
    await client.send(outbox(putRow(itemRow('c10', 'é'.repeat(512), '1')), 'c10', 'a', 0));
  });

  it("refuses what DynamoDB refuses before running, as it words it; cancels on what it finds running (ValidationError)", async () => {
    const key = { connection: { S: 'c11' }, id: { S: 'a' } };
    const refuse = (items: TransactWriteItem[]) => refusal(client, new TransactWriteItemsCommand({ TransactItems: items }));
    // dynalite's parser words the details of a syntax error its own way (AWS: `token: "<EOF>", near: "("`).
    expect(await refuse([{ ConditionCheck: { TableName: ITEMS, Key: key, ConditionExpression: 'attribute_not_exists(' } }])).toEqual(
      validation(/^Invalid ConditionExpression: Syntax error; /),
    );
    expect(
      await refuse([{ ConditionCheck: { TableName: ITEMS, Key: key, ConditionExpression: 'attribute_not_exists(id)', ExpressionAttributeValues: { ':v': { S: 'x' } } } }]),
    ).toEqual(validation('Value provided in ExpressionAttributeValues unused in expressions: keys: {:v}'));
    expect(await refuse([{}])).toEqual(validation(ONE_ACTION_EACH));
    expect(await refuse([{ Put: { TableName: 'no-such-table', Item: key } }])).toEqual({ name: 'ResourceNotFoundException', message: 'Requested resource not found', status: 400 });
    expect(await refuse([{ Put: { TableName: ITEMS, Item: { ...key, id: { S: '' } } } }])).toEqual(
      validation('One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: id'),
    );
    expect(await refuse([{ Update: { TableName: ITEMS, Key: key, UpdateExpression: 'SET id = :v', ExpressionAttributeValues: { ':v': { S: 'b' } } } }])).toEqual(
      validation('One or more parameter values were invalid: Cannot update attribute id. This attribute is part of the key'),
    );
    // What DynamoDB only finds out running: a key not of the schema, an update that cannot apply or grows the row too large.
    const wrongType = await refuse([{ Put: { TableName: ITEMS, Item: { connection: { S: 'c11' }, id: { N: '5' } } } }, putRow(itemRow('c11', 'b', '1'))]);
    expect(wrongType).toEqual({
      name: 'TransactionCanceledException',
      message: cancelledMessage('ValidationError', 'None'),
      status: 400,
      reasons: [{ Code: 'ValidationError', Message: 'One or more parameter values were invalid: Type mismatch for key id expected: S actual: N' }, NONE],
    });
    expect((await refuse([{ Delete: { TableName: ITEMS, Key: { connection: { S: 'c11' } } } }]))?.reasons).toEqual([
      { Code: 'ValidationError', Message: 'The provided key element does not match the schema' },
    ]);
    const missing = await refuse([{ Update: { TableName: ITEMS, Key: key, UpdateExpression: 'SET #a = #b', ExpressionAttributeNames: { '#a': 'a', '#b': 'b' } } }]);
    expect(missing?.reasons).toEqual([{ Code: 'ValidationError', Message: 'The provided expression refers to an attribute that does not exist in the item' }]);
    const grown = await refuse([
      { Update: { TableName: ITEMS, Key: key, UpdateExpression: 'SET #a = :a', ExpressionAttributeNames: { '#a': 'a' }, ExpressionAttributeValues: { ':a': { S: 'x'.repeat(401 * 1024) } } } },
    ]);
    expect(grown?.reasons).toEqual([{ Code: 'ValidationError', Message: 'Item size to update has exceeded the maximum allowed size' }]);
    expect(await getRow(client, ITEMS, { connection: { S: 'c11' }, id: { S: 'b' } })).toBeUndefined();
  });

  it('answers ConsumedCapacity when asked: 2 write units per KB by table', async () => {
    const out = await client.send(outbox(putRow(bigRow('c12', 'a', 3)), 'c12', 'a', 0, { ReturnConsumedCapacity: 'INDEXES' }));
    expect(out.ConsumedCapacity).toEqual([
      { TableName: ITEMS, CapacityUnits: 8, WriteCapacityUnits: 8, Table: { CapacityUnits: 8, WriteCapacityUnits: 8 } },
      { TableName: CHANGES, CapacityUnits: 4, WriteCapacityUnits: 4, Table: { CapacityUnits: 4, WriteCapacityUnits: 4 } },
    ]);
  });

  describe('ClientRequestToken', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('answers the same request with the same token again without applying it again', async () => {
      const token = 'token-same-request';
      const send = () => client.send(outbox(putRow(itemRow('t1', 'a', '1')), 't1', 'a', 0, { ClientRequestToken: token, ReturnConsumedCapacity: 'TOTAL' }));
      expect((await send()).ConsumedCapacity?.map((c) => c.WriteCapacityUnits)).toEqual([2, 4]);
      // Sent again (as the SDK does after a lost answer): a success, reading the rows, applying nothing.
      const again = await send();
      expect(again.ConsumedCapacity).toEqual([
        { TableName: ITEMS, CapacityUnits: 2, ReadCapacityUnits: 2 },
        { TableName: CHANGES, CapacityUnits: 4, ReadCapacityUnits: 4 },
      ]);
      expect(await getRow(client, CHANGES, headKey('t1'))).toMatchObject({ head: { N: '1' } });
      // Without the token, the same request is a new one: its conditions fail.
      expect((await refusal(client, outbox(putRow(itemRow('t1', 'a', '1')), 't1', 'a', 0)))?.name).toBe('TransactionCanceledException');
    });

    it('refuses another request with a used token (IdempotentParameterMismatchException), for 10 minutes', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      const token = 'token-other-request';
      await client.send(outbox(putRow(itemRow('t2', 'a', '1')), 't2', 'a', 0, { ClientRequestToken: token }));
      const other = outbox(putRow(itemRow('t2', 'b', '1')), 't2', 'b', 1, { ClientRequestToken: token });
      expect(await refusal(client, other)).toMatchObject({ name: 'IdempotentParameterMismatchException', status: 400 });
      // Asking for ConsumedCapacity makes another request too.
      expect((await refusal(client, outbox(putRow(itemRow('t2', 'a', '1')), 't2', 'a', 0, { ClientRequestToken: token, ReturnConsumedCapacity: 'TOTAL' })))?.name).toBe(
        'IdempotentParameterMismatchException',
      );
      vi.setSystemTime(Date.now() + TOKEN_WINDOW_MS + 1);
      await client.send(other);
      expect(await getRow(client, CHANGES, headKey('t2'))).toMatchObject({ head: { N: '2' } });
    });

    it('runs a cancelled request again with its token; leaves the token free after a ValidationException', async () => {
      const token = 'token-cancelled';
      await client.send(new PutItemCommand({ TableName: CHANGES, Item: { ...headKey('t3'), head: { N: '5' } } }));
      const send = () => client.send(outbox(putRow(itemRow('t3', 'a', '1')), 't3', 'a', 5, { ClientRequestToken: token }));
      expect((await refusal(client, outbox(putRow(itemRow('t3', 'a', '1')), 't3', 'a', 5, { ClientRequestToken: token, TransactItems: [] })))?.name).toBe(
        'ValidationException',
      );
      await client.send(new PutItemCommand({ TableName: CHANGES, Item: { ...headKey('t3'), head: { N: '6' } } }));
      expect((await send().catch((e: unknown) => e)) as Error).toBeInstanceOf(TransactionCanceledException);
      await client.send(new PutItemCommand({ TableName: CHANGES, Item: { ...headKey('t3'), head: { N: '5' } } }));
      await send();
      expect(await getRow(client, ITEMS, { connection: { S: 't3' }, id: { S: 'a' } })).toEqual(itemRow('t3', 'a', '1'));
      expect((await refusal(client, outbox(putRow(itemRow('t3', 'x', '1')), 't3', 'x', 6, { ClientRequestToken: token })))?.name).toBe(
        'IdempotentParameterMismatchException',
      );
    });

    it('refuses the same request while it runs (TransactionInProgressException), which the SDK tries again', async () => {
      const token = 'token-in-progress';
      const command = () => outbox(putRow(itemRow('t4', 'a', '1')), 't4', 'a', 0, { ClientRequestToken: token });
      // The first one's writes held back until the second has come.
      const batch = store.db.batch;
      let held = false;
      let letGo = (): void => undefined;
      store.db.batch = (ops, cb) => {
        store.db.batch = batch;
        held = true;
        letGo = () => batch(ops, cb);
      };
      const first = client.send(command());
      await until(() => held);
      expect(await refusal(client, command())).toMatchObject({ name: 'TransactionInProgressException', message: IN_PROGRESS_MESSAGE, status: 400 });
      const retrying = dynamo.client();
      try {
        const sent = dynamo.operations.length;
        const second = retrying.send(command());
        await until(() => dynamo.operations.length > sent);
        letGo();
        expect((await first).$metadata.httpStatusCode).toBe(200);
        // Tried again, it is answered as the first was, and not applied again.
        expect((await second).$metadata.attempts).toBeGreaterThan(1);
      } finally {
        retrying.destroy();
      }
      expect(await getRow(client, CHANGES, headKey('t4'))).toMatchObject({ head: { N: '1' } });
    });
  });

  it('serializes transactions racing on one head: exactly one wins, the other fails on the head with the winner in ALL_OLD', async () => {
    for (let round = 0; round < 20; round++) {
      const connection = `race-${round}`;
      const results = await Promise.allSettled([
        client.send(outbox(putRow(itemRow(connection, 'a', '1')), connection, 'a', 0, { ClientRequestToken: `${connection}-a` })),
        client.send(outbox(putRow(itemRow(connection, 'b', '1')), connection, 'b', 0, { ClientRequestToken: `${connection}-b` })),
      ]);
      expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
      const lost = results.find((result) => result.status === 'rejected') as PromiseRejectedResult;
      const reasons = (lost.reason as TransactionCanceledException).CancellationReasons!;
      expect(reasons[0]).toEqual(NONE);
      expect(reasons[2]).toMatchObject({ ...CONDITION_FAILED, Item: { head: { N: '1' } } });
      const rows = await Promise.all(['a', 'b'].map((id) => getRow(client, ITEMS, { connection: { S: connection }, id: { S: id } })));
      expect(rows.filter((row) => row !== undefined)).toHaveLength(1);
    }
  });

  it('shares the rows’ locks with UpdateItem, and lets a reader see all of a transaction or none of it', async () => {
    const key = (id: string) => ({ connection: { S: 'locks' }, id: { S: id } });
    const bump = (id: string): TransactWriteItem => ({
      Update: { TableName: ITEMS, Key: key(id), UpdateExpression: 'ADD #n :one', ExpressionAttributeNames: { '#n': 'n' }, ExpressionAttributeValues: { ':one': { N: '1' } } },
    });
    const query = new QueryCommand({
      TableName: ITEMS,
      KeyConditionExpression: '#c = :c',
      ExpressionAttributeNames: { '#c': 'connection' },
      ExpressionAttributeValues: { ':c': { S: 'locks' } },
      ConsistentRead: true,
    });
    const seen: Array<Record<string, string>> = [];
    const read = async (): Promise<void> => {
      const rows = (await client.send(query)).Items ?? [];
      seen.push(Object.fromEntries(rows.map((row) => [row['id']!.S!, row['n']!.N!])));
    };
    await Promise.all([
      // a: moved by transactions and by UpdateItem (the same lock); x and y: only together.
      ...Array.from({ length: 30 }, () => client.send(new TransactWriteItemsCommand({ TransactItems: [bump('a'), bump('x'), bump('y')] }))),
      ...Array.from({ length: 30 }, () => client.send(new UpdateItemCommand({ ...bump('a').Update!, TableName: ITEMS }))),
      ...Array.from({ length: 30 }, read),
    ]);
    const rows = (await dynamo.scan(ITEMS)).filter((row) => row['connection']?.S === 'locks');
    expect(rows.map((row) => [row['id']?.S, row['n']?.N])).toEqual([
      ['a', '60'],
      ['x', '30'],
      ['y', '30'],
    ]);
    for (const rowsRead of seen) expect(rowsRead['x']).toBe(rowsRead['y']);
  });

  it('tells every commit in commit order, with the rows each write replaced and wrote', async () => {
    const told: CommittedTransaction[] = [];
    const stop = onCommit((commit) => told.push(commit));
    try {
      await client.send(outbox(putRow(itemRow('told', 'a', '1')), 'told', 'a', 0, { ClientRequestToken: 'told-1' }));
      await client.send(outbox(markDeleted('told', 'a', '1', 'now'), 'told', 'a', 1, { ClientRequestToken: 'told-2' }));
      await refusal(client, outbox(markDeleted('told', 'a', '1', 'now'), 'told', 'a', 2));
    } finally {
      stop();
    }
    expect(told.map((commit) => commit.token)).toEqual(['told-1', 'told-2']);
    expect(told[1]!.writes).toEqual([
      { table: ITEMS, keyNames: ['connection', 'id'], oldImage: itemRow('told', 'a', '1'), newImage: itemRow('told', 'a', '1', { deleted: { BOOL: true }, syncedAt: { S: 'now' } }) },
      { table: CHANGES, keyNames: ['connection', 'seq'], newImage: { connection: { S: 'told' }, seq: { N: '2' }, id: { S: 'a' }, change: { S: 'created' } } },
      { table: CHANGES, keyNames: ['connection', 'seq'], oldImage: { ...headKey('told'), head: { N: '1' }, epoch: { S: 'epoch-1' } }, newImage: { ...headKey('told'), head: { N: '2' }, epoch: { S: 'epoch-1' } } },
    ]);
  });
});

describe('the proxy', () => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;

  beforeAll(async () => {
    dynamo = await startDynalite();
    await createTables(dynamo);
    client = dynamo.client();
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('cancels transactions with TransactionConflict reasons (on the actions named), applying nothing', async () => {
    dynamo.cancel({ times: 1, actions: [2] });
    const conflict = { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' };
    expect(await refusal(client, outbox(putRow(itemRow('p1', 'a', '1')), 'p1', 'a', 0))).toEqual({
      name: 'TransactionCanceledException',
      message: cancelledMessage('None', 'None', 'TransactionConflict'),
      status: 400,
      reasons: [NONE, NONE, conflict],
    });
    dynamo.cancel({ times: 1 });
    expect((await refusal(client, outbox(putRow(itemRow('p1', 'a', '1')), 'p1', 'a', 0)))?.reasons).toEqual([conflict, conflict, conflict]);
    dynamo.cancel({ times: 1, code: 'ThrottlingError', actions: [0] });
    const throttled = await refusal(client, outbox(putRow(itemRow('p1', 'a', '1')), 'p1', 'a', 0));
    expect(throttled?.reasons?.map((reason) => reason.Code)).toEqual(['ThrottlingError', 'None', 'None']);
    expect(dynamo.cancelled).toBe(3);
    expect(await getRow(client, ITEMS, { connection: { S: 'p1' }, id: { S: 'a' } })).toBeUndefined();
    await client.send(outbox(putRow(itemRow('p1', 'a', '1')), 'p1', 'a', 0));
    expect(await getRow(client, CHANGES, headKey('p1'))).toMatchObject({ head: { N: '1' } });
  });

  it('throttles transactions (the SDK tries them again) and answers a write TransactionConflictException', async () => {
    dynamo.throttle({ operation: 'TransactWriteItems', times: 2, error: 'ThrottlingException' });
    await client.send(outbox(putRow(itemRow('p2', 'a', '1')), 'p2', 'a', 0));
    expect(dynamo.operations.filter((operation) => operation === 'TransactWriteItems').length).toBeGreaterThanOrEqual(3);
    expect(await getRow(client, CHANGES, headKey('p2'))).toMatchObject({ head: { N: '1' } });
    dynamo.throttle({ operation: 'PutItem', times: 1, error: 'TransactionConflictException' });
    expect(await refusal(dynamo.client({ maxAttempts: 1 }), new PutItemCommand({ TableName: ITEMS, Item: itemRow('p2', 'a', '2') }))).toMatchObject({
      name: 'TransactionConflictException',
      status: 400,
    });
  });
});

describe('TransactWriteItems in a child process', () => {
  let dynamo: Dynalite | undefined;
  let client: DynamoDBClient | undefined;

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('commits, cancels with its reasons, answers a token again, serializes a race', async () => {
    dynamo = await startDynalite({ where: 'child', proxy: false });
    await createTables(dynamo);
    client = dynamo.client({ maxAttempts: 1 });
    await client.send(outbox(putRow(itemRow('k1', 'a', '1')), 'k1', 'a', 0, { ClientRequestToken: 'child-token' }));
    await client.send(outbox(putRow(itemRow('k1', 'a', '1')), 'k1', 'a', 0, { ClientRequestToken: 'child-token' }));
    expect(await getRow(client, CHANGES, headKey('k1'))).toMatchObject({ head: { N: '1' } });
    expect((await refusal(client, outbox(putRow(itemRow('k1', 'a', '1')), 'k1', 'a', 0)))?.reasons).toEqual([
      CONDITION_FAILED,
      CONDITION_FAILED,
      { ...CONDITION_FAILED, Item: { ...headKey('k1'), head: { N: '1' }, epoch: { S: 'epoch-1' } } },
    ]);
    expect(await refusal(client, outbox(putRow(itemRow('k1', 'é'.repeat(600), '1')), 'k1', 'a', 1))).toEqual(validation(SORT_KEY_TOO_LARGE));
    const race = await Promise.allSettled([
      client.send(outbox(putRow(itemRow('k2', 'a', '1')), 'k2', 'a', 0)),
      client.send(outbox(putRow(itemRow('k2', 'b', '1')), 'k2', 'b', 0)),
    ]);
    expect(race.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
  });
});

describe('TransactWriteItems on disk (LevelDB, the local run)', () => {
  const folder = mkdtempSync(join(tmpdir(), 'dynalite-transactions-'));

  afterAll(() => {
    rmSync(folder, { recursive: true, force: true });
  });

  it('stores a transaction that is there after a restart', async () => {
    const first = await startDynalite({ path: folder, proxy: false });
    const client = first.client({ maxAttempts: 1 });
    try {
      await createTables(first);
      await client.send(outbox(putRow(itemRow('d1', 'a', '1')), 'd1', 'a', 0));
    } finally {
      client.destroy();
      await first.close();
    }
    const second = await startDynalite({ path: folder, proxy: false, where: 'child' });
    const again = second.client({ maxAttempts: 1 });
    try {
      expect(await getRow(again, ITEMS, { connection: { S: 'd1' }, id: { S: 'a' } })).toEqual(itemRow('d1', 'a', '1'));
      expect(await getRow(again, CHANGES, headKey('d1'))).toMatchObject({ head: { N: '1' } });
      expect((await refusal(again, outbox(putRow(itemRow('d1', 'b', '1')), 'd1', 'b', 0)))?.reasons?.[2]?.Code).toBe('ConditionalCheckFailed');
    } finally {
      again.destroy();
      await second.close();
    }
  });
});
