/**
 * The harness's DynamoDB (dev/fakes/local-dynamo.ts) on the run's DynamoDB Local: each user a
 * namespace of its own; the tables as the stateful stack defines them (the items table's stream,
 * the changes table's time to live); the proxy's faults as AWS words them; on disk, a table kept
 * across a restart.
 */
import {
  DescribeTableCommand,
  DynamoDBClient,
  DescribeTimeToLiveCommand,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SDK_LOGGER_MIDDLEWARE } from '../../../dev/fakes/local-aws.js';
import { REASON_MESSAGES, startLocalDynamo } from '../../../dev/fakes/local-dynamo.js';
import { CHANGES_TABLE_TTL_ATTRIBUTE } from '../../../infra/storage/changes-table.js';

const row = (connection: string, id: string, extra: Record<string, AttributeValue> = {}): Record<string, AttributeValue> => ({
  connection: { S: connection },
  id: { S: id },
  ...extra,
});
const put = (table: string, item: Record<string, AttributeValue>): TransactWriteItemsCommand =>
  new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: table, Item: item } }] });

describe('namespaces on the run’s server', () => {
  it('give two users tables of the same name that never meet; close drops a user’s tables', async () => {
    const [a, b] = await Promise.all([startLocalDynamo({ proxy: false }), startLocalDynamo({ proxy: false })]);
    try {
      expect(new URL(a.endpoint).port).toBe(new URL(b.endpoint).port);
      expect(a.credentials.accessKeyId).not.toBe(b.credentials.accessKeyId);
      await a.createItemsTable('items');
      await b.createItemsTable('items');
      await a.client().send(new PutItemCommand({ TableName: 'items', Item: row('acme', 'fil-1') }));
      expect(await a.scan('items')).toEqual([row('acme', 'fil-1')]);
      expect(await b.scan('items')).toEqual([]);
      // The same namespace again (the same access key) reaches the same tables.
      const again = await startLocalDynamo({ proxy: false, namespace: a.credentials.accessKeyId.slice(2) });
      expect(await again.client().send(new ListTablesCommand({}))).toMatchObject({ TableNames: ['items'] });
      await a.close();
      expect(await again.client().send(new ListTablesCommand({}))).toMatchObject({ TableNames: [] });
      await again.close();
    } finally {
      await b.close();
    }
  });
});

describe('clients', () => {
  it('carry no SDK logger middleware (the SDK would copy every request and answer for it), and work', async () => {
    const dynamo = await startLocalDynamo({ proxy: false });
    try {
      const client = dynamo.client();
      const stack = client.middlewareStack.identify();
      expect(stack.some((entry) => entry.startsWith('serializerMiddleware'))).toBe(true);
      expect(stack.filter((entry) => entry.startsWith(SDK_LOGGER_MIDDLEWARE))).toEqual([]);
      // A client as the SDK makes it, as the deployed functions use it, has one.
      expect(new DynamoDBClient({}).middlewareStack.identify().filter((entry) => entry.startsWith(SDK_LOGGER_MIDDLEWARE))).toHaveLength(1);
      await dynamo.createConnectionsTable('connections');
      expect((await client.send(new ListTablesCommand({}))).TableNames).toContain('connections');
      client.destroy();
    } finally {
      await dynamo.close();
    }
  });
});

describe('tables', () => {
  it('are created as the stateful stack defines them: the items and connections tables’ streams, the changes table’s time to live when asked', async () => {
    const dynamo = await startLocalDynamo({ proxy: false });
    try {
      await dynamo.createItemsTable('items');
      await dynamo.createChangesTable('changes', { timeToLive: true });
      await dynamo.createChangesTable('changes'); // unless it exists
      await dynamo.createChangesTable('changes-no-ttl');
      const items = await dynamo.client().send(new DescribeTableCommand({ TableName: 'items' }));
      expect(items.Table).toMatchObject({
        KeySchema: [
          { AttributeName: 'connection', KeyType: 'HASH' },
          { AttributeName: 'id', KeyType: 'RANGE' },
        ],
        StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
      });
      expect(items.Table?.LatestStreamArn).toMatch(/^arn:aws:dynamodb:/);
      await dynamo.createConnectionsTable('connections');
      const connections = await dynamo.client().send(new DescribeTableCommand({ TableName: 'connections' }));
      expect(connections.Table?.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' });
      const ttl = await dynamo.client().send(new DescribeTimeToLiveCommand({ TableName: 'changes' }));
      expect(ttl.TimeToLiveDescription).toEqual({ AttributeName: CHANGES_TABLE_TTL_ATTRIBUTE, TimeToLiveStatus: 'ENABLED' });
      const none = await dynamo.client().send(new DescribeTimeToLiveCommand({ TableName: 'changes-no-ttl' }));
      expect(none.TimeToLiveDescription).toEqual({ TimeToLiveStatus: 'DISABLED' });
      // A table kept without it (an earlier run's) gets it when asked.
      await dynamo.createChangesTable('changes-no-ttl', { timeToLive: true });
      const later = await dynamo.client().send(new DescribeTimeToLiveCommand({ TableName: 'changes-no-ttl' }));
      expect(later.TimeToLiveDescription?.TimeToLiveStatus).toBe('ENABLED');
    } finally {
      await dynamo.close();
    }
  });
});

describe('the proxy', () => {
  it('cancels a transaction with its reasons on the actions named, applying nothing; its size refusal is worded as DynamoDB’s own', async () => {
    const dynamo = await startLocalDynamo();
    try {
      await dynamo.createItemsTable('items');
      const client = dynamo.client({ maxAttempts: 1 });
      // DynamoDB's own refusal of a Put over 400 KB (before the transaction runs), for the wording.
      const own = await client.send(put('items', row('acme', 'big', { body: { S: 'x'.repeat(401 * 1024) } }))).catch((error: unknown) => error);
      expect(own).toMatchObject({ name: 'ValidationException', message: REASON_MESSAGES.ValidationError });

      dynamo.cancel({ times: 1, code: 'ValidationError', actions: [1] });
      const twoRows = new TransactWriteItemsCommand({
        TransactItems: [{ Put: { TableName: 'items', Item: row('acme', 'a') } }, { Put: { TableName: 'items', Item: row('acme', 'b') } }],
      });
      const cancelled = await client.send(twoRows).catch((error: unknown) => error);
      expect(cancelled).toBeInstanceOf(TransactionCanceledException);
      expect((cancelled as TransactionCanceledException).CancellationReasons).toEqual([
        { Code: 'None' },
        { Code: 'ValidationError', Message: REASON_MESSAGES.ValidationError },
      ]);
      expect(await dynamo.scan('items')).toEqual([]);
      expect(dynamo.cancelled).toBe(1);
      // The next one goes through.
      await client.send(twoRows);
      expect((await dynamo.scan('items')).map((r) => r['id']?.S)).toEqual(['a', 'b']);
      expect(dynamo.operations.filter((operation) => operation === 'TransactWriteItems')).toHaveLength(3);
    } finally {
      await dynamo.close();
    }
  });

  it('throttles the operation named (the SDK tries again) and answers a write TransactionConflictException', async () => {
    const dynamo = await startLocalDynamo();
    try {
      await dynamo.createItemsTable('items');
      dynamo.throttle({ operation: 'PutItem', times: 2, error: 'ThrottlingException' });
      const sent = dynamo.operations.length;
      await dynamo.client().send(new PutItemCommand({ TableName: 'items', Item: row('acme', 'a') }));
      expect(dynamo.operations.slice(sent)).toEqual(['PutItem', 'PutItem', 'PutItem']);
      expect(dynamo.throttled).toBe(2);
      dynamo.throttle({ operation: 'PutItem', times: 1, error: 'TransactionConflictException' });
      const conflict = await dynamo.client({ maxAttempts: 1 }).send(new PutItemCommand({ TableName: 'items', Item: row('acme', 'b') })).catch((error: unknown) => error);
      expect(conflict).toMatchObject({ name: 'TransactionConflictException' });
    } finally {
      await dynamo.close();
    }
  });
});

describe('on disk (the local run)', () => {
  const folder = mkdtempSync(join(tmpdir(), 'local-dynamo-disk-'));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it('keeps a table and its rows across a restart, in one namespace', async () => {
    const first = await startLocalDynamo({ path: folder, proxy: false, namespace: 'diskrun' });
    await first.createItemsTable('items');
    await first.client().send(put('items', row('acme', 'kept')));
    await first.close();
    const second = await startLocalDynamo({ path: folder, proxy: false, namespace: 'diskrun' });
    try {
      expect(new URL(second.endpoint).port).not.toBe(process.env.CONTENT_SYNC_TEST_DYNAMODB_ENDPOINT?.split(':').pop());
      const got = await second.client().send(new GetItemCommand({ TableName: 'items', Key: row('acme', 'kept'), ConsistentRead: true }));
      expect(got.Item).toEqual(row('acme', 'kept'));
    } finally {
      await second.close();
    }
  });
});
