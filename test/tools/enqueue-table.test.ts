/**
 * The enqueue tool's table scan (`--resync-table`) against dynalite: it reads both row shapes of the
 * items table (the item inline, or itemObject for an item in the items bucket) and tombstones of
 * either, across pages.
 */
import { PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDynalite, type Dynalite } from '../../dev/fakes/dynalite.js';
import { scanTableIds } from '../../tools/enqueue/enqueue.js';

let dynamo: Dynalite;

beforeAll(async () => {
  dynamo = await startDynalite({ proxy: false });
});

afterAll(async () => {
  await dynamo?.close();
});

describe('scanTableIds against the items table', () => {
  it('returns the id of every row: inline, in the items bucket, and tombstones of both', async () => {
    await dynamo.createItemsTable('items-both-shapes');
    const client = dynamo.client();
    const base = (id: string): Record<string, AttributeValue> => ({ id: { S: id }, type: { S: 'file' }, revision: { S: '1' }, syncedAt: { S: '2026-11-23T10:00:00.000Z' } });
    const pointer: AttributeValue = { M: { key: { S: 'items/k.json' }, size: { N: '614400' }, sha256: { S: 'ab'.repeat(32) } } };
    const rows: Array<Record<string, AttributeValue>> = [
      { ...base('inline'), item: { M: { id: { S: 'inline' }, type: { S: 'file' }, revision: { N: '1' } } } },
      { ...base('in-bucket'), itemObject: pointer },
      { ...base('gone-inline'), item: { M: { id: { S: 'gone-inline' } } }, deleted: { BOOL: true } },
      { ...base('gone-in-bucket'), itemObject: pointer, deleted: { BOOL: true } },
    ];
    for (const row of rows) await client.send(new PutItemCommand({ TableName: 'items-both-shapes', Item: row }));

    const ids = await scanTableIds(client, 'items-both-shapes', { pageSize: 1 });

    expect(ids.sort()).toEqual(['gone-in-bucket', 'gone-inline', 'in-bucket', 'inline']);
    client.destroy();
  });
});
