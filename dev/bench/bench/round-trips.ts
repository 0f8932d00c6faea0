/**
 * Round trips measured in the bench's own run: DynamoDB (DynamoDB Local) calls as the sync makes them
 * (rows of the connection `default`, keyed by connection and id), and a provider fetch.
 */
import { BatchGetItemCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ProviderSimulator } from '../../simulator/provider-simulator.js';
import { median, round } from '../support/stats.js';

/**
 * DynamoDB round trips measured in the run: BatchGetItem by number of keys, one conditional PutItem,
 * and a wave of k conditional PutItems sent at once (until the last answer) by k.
 */
export interface DynamoRtt {
  batchGetItem: Record<string, number>;
  putItem: number;
  putItemWave: Record<string, number>;
}
export async function measureDynamoRtt(client: DynamoDBClient, tableName: string, sizes: number[], concurrency: number): Promise<DynamoRtt> {
  const rows = Math.max(...sizes, concurrency);
  const ids = Array.from({ length: rows }, (_, i) => `rtt-${String(i).padStart(4, '0')}`);
  const item = (id: string, revision: number) => ({
    connection: { S: 'default' },
    id: { S: id },
    type: { S: 'file' },
    revision: { S: String(revision) },
    item: { M: { id: { S: id }, type: { S: 'file' }, name: { S: 'report-final-v2.docx' }, size: { N: '123456' }, revision: { N: String(revision) } } },
    syncedAt: { S: new Date().toISOString() },
  });
  const revisions = new Map<string, number>();
  for (const id of ids) {
    await client.send(new PutItemCommand({ TableName: tableName, Item: item(id, 1) }));
    revisions.set(id, 1);
  }
  // A conditional PutItem as the sync sends it for a changed item (the condition holds).
  const putOne = async (id: string): Promise<void> => {
    const current = revisions.get(id)!;
    revisions.set(id, current + 1);
    await client.send(
      new PutItemCommand({
        TableName: tableName,
        Item: item(id, current + 1),
        ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
        ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
        ExpressionAttributeValues: { ':expected': { S: String(current) } },
        ReturnValues: 'ALL_OLD',
      }),
    );
  };
  const timeIt = async (fn: () => Promise<unknown>): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < 25; i += 1) {
      const started = performance.now();
      await fn();
      times.push(performance.now() - started);
    }
    return round(median(times.slice(5)), 2);
  };
  let next = 0;
  const putItem = await timeIt(() => putOne(ids[next++ % ids.length]!));
  const putItemWave: Record<string, number> = { '1': putItem };
  for (const atOnce of new Set(sizes.map((size) => Math.min(concurrency, size)))) {
    if (atOnce > 1) putItemWave[String(atOnce)] = await timeIt(() => Promise.all(ids.slice(0, atOnce).map(putOne)));
  }
  const batchGetItem: Record<string, number> = {};
  for (const size of sizes) {
    batchGetItem[String(size)] = await timeIt(() =>
      client.send(
        new BatchGetItemCommand({
          RequestItems: {
            [tableName]: {
              Keys: ids.slice(0, Math.min(size, 100)).map((id) => ({ connection: { S: 'default' }, id: { S: id } })),
              ProjectionExpression: '#connection, #id, #revision, #deleted, #itemObject, #syncedAt, #childrenPending',
              ExpressionAttributeNames: {
                '#connection': 'connection',
                '#id': 'id',
                '#revision': 'revision',
                '#deleted': 'deleted',
                '#itemObject': 'itemObject',
                '#syncedAt': 'syncedAt',
                '#childrenPending': 'childrenPending',
              },
            },
          },
        }),
      ),
    );
  }
  return { batchGetItem, putItem, putItemWave };
}

export async function measureProviderRtt(sim: ProviderSimulator): Promise<number> {
  const token = sim.issueAccessToken();
  const id = sim.itemIds()[0]!;
  const times: number[] = [];
  for (let i = 0; i < 25; i += 1) {
    const started = performance.now();
    const response = await fetch(`${sim.baseUrl}/items/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${token}` } });
    await response.arrayBuffer();
    times.push(performance.now() - started);
  }
  sim.resetRequests();
  return median(times.slice(5));
}
