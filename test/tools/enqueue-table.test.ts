/**
 * The enqueue tool's table read (`--resync-table`) against DynamoDB Local, on the items table keyed by
 * connection and id: it reads both row shapes (the item inline, or itemObject for an item in the
 * items bucket) and tombstones of either, across pages, with each row's connection; with a
 * connection, that connection's rows only (a Query).
 */
import { PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../dev/fakes/local-dynamo.js';
import { scanTableKeys } from '../../tools/enqueue/enqueue.js';
import { ensureItemsTable } from '../../dev/fakes/items-table.js';

const TABLE = 'items-both-shapes';
let dynamo: LocalDynamoDb;

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  const client = dynamo.client();
  await ensureItemsTable(client, TABLE);
  const base = (connection: string, id: string): Record<string, AttributeValue> => ({
    connection: { S: connection },
    id: { S: id },
    type: { S: 'file' },
    revision: { S: '1' },
    syncedAt: { S: '2026-11-23T10:00:00.000Z' },
  });
  const pointer: AttributeValue = { M: { key: { S: 'items/acme/k.json' }, size: { N: '614400' }, sha256: { S: 'ab'.repeat(32) } } };
  const rows: Array<Record<string, AttributeValue>> = [
    { ...base('acme', 'inline'), item: { M: { id: { S: 'inline' }, type: { S: 'file' }, revision: { N: '1' } } } },
    { ...base('acme', 'in-bucket'), itemObject: pointer },
    { ...base('acme', 'gone-inline'), item: { M: { id: { S: 'gone-inline' } } }, deleted: { BOOL: true } },
    { ...base('acme', 'gone-in-bucket'), itemObject: pointer, deleted: { BOOL: true } },
    { ...base('default', 'inline'), item: { M: { id: { S: 'inline' } } } },
    { ...base('globex', 'other'), item: { M: { id: { S: 'other' } } } },
  ];
  for (const row of rows) await client.send(new PutItemCommand({ TableName: TABLE, Item: row }));
  client.destroy();
});

afterAll(async () => {
  await dynamo?.close();
});

const label = (key: { connection: string; id: string }) => `${key.connection}/${key.id}`;

describe('scanTableKeys against the items table', () => {
  it('returns the key of every row of every connection: inline, in the items bucket, and tombstones of both', async () => {
    const client = dynamo.client();
    const keys = await scanTableKeys(client, TABLE, { pageSize: 1 });
    expect(keys.map(label).sort()).toEqual(['acme/gone-in-bucket', 'acme/gone-inline', 'acme/in-bucket', 'acme/inline', 'default/inline', 'globex/other']);
    client.destroy();
  });

  it('with a connection, its rows only', async () => {
    const client = dynamo.client();
    const progress: number[] = [];
    const keys = await scanTableKeys(client, TABLE, { connection: 'acme', pageSize: 3, onProgress: (n) => progress.push(n) });
    expect(keys.map(label).sort()).toEqual(['acme/gone-in-bucket', 'acme/gone-inline', 'acme/in-bucket', 'acme/inline']);
    expect(progress.at(-1)).toBe(4);
    expect(await scanTableKeys(client, TABLE, { connection: 'nobody' })).toEqual([]);
    client.destroy();
  });
});
