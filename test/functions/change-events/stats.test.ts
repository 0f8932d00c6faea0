/**
 * Each connection's counters in the connections table (functions/change-events/stats.ts and
 * adapters/dynamodb-connection-stats.ts): the updates of a batch (ItemCreated counted, the latest
 * syncedAt), the exact UpdateItem commands (aws-sdk-client-mock on one client), and their
 * conditions against DynamoDB Local (only a newer lastWriteAt, never a row created). The handler's use of
 * them is in handler.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  ConditionalCheckFailedException,
  
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDbConnectionStats } from '../../../functions/change-events/adapters/dynamodb-connection-stats.js';
import type { ConnectionStats, ConnectionStatsUpdate } from '../../../functions/change-events/ports.js';
import { keepConnectionStats, statsOf } from '../../../functions/change-events/stats.js';
import type { Log } from '../../../functions/shared/ports.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { live, record, tombstone } from './helpers.js';

const TABLE = 'content-sync-connections';
const T0 = '2026-11-21T10:00:00.000Z';
const T1 = '2026-11-21T10:05:00.000Z';
const T2 = '2026-11-21T10:07:30.000Z';
const acme = { connection: 'acme' };
const globex = { connection: 'globex' };
const conditionFailed = () => new ConditionalCheckFailedException({ $metadata: {}, message: 'The conditional request failed' });

describe('statsOf: what a batch changes of each connection', () => {
  it('counts ItemCreated per connection and takes the latest syncedAt of every row write, in the order the connections first appear', () => {
    const records = [
      record(undefined, live('a', '1', T0, acme)),
      record(undefined, live('g', '1', T1, globex)),
      record(live('a', '1', T0, acme), live('a', '2', T2, acme)), // ItemUpdated: a write, not a new id
      record(undefined, live('b', '1', T1, acme)),
      record(live('g', '1', T1, globex), live('g', '1', T2, globex)), // no event (same revision), still a write
      record(live('d', '1', T0), tombstone(live('d', '1'), T1)), // ItemDeleted: the id is still held
      record(live('x', '1', T0, acme), undefined), // REMOVE: nothing
    ];
    expect(statsOf(records)).toEqual([
      { connection: 'acme', created: 2, lastWriteAt: T2 },
      { connection: 'globex', created: 1, lastWriteAt: T2 },
      { connection: 'default', created: 0, lastWriteAt: T1 },
    ]);
  });

  it('a restored row is not a new id; a batch of REMOVEs or of rows without a connection changes nothing', () => {
    expect(statsOf([record(tombstone(live('r', '1', T0, acme)), live('r', '1', T1, acme))])).toEqual([{ connection: 'acme', created: 0, lastWriteAt: T1 }]);
    expect(statsOf([record(live('x', '1', T0, acme), undefined), record(undefined, { ...live('n', '1', T0), connection: undefined })])).toEqual([]);
  });
});

describe('keepConnectionStats', () => {
  it('applies one update per connection; a failure is a warning naming the connection, never thrown', async () => {
    const applied: ConnectionStatsUpdate[] = [];
    const stats: ConnectionStats = {
      async record(update) {
        applied.push(update);
        if (update.connection === 'globex') throw Object.assign(new Error('Rate of requests exceeds the allowed throughput'), { name: 'ThrottlingException' });
        return update.connection === 'acme' ? 'written' : 'unchanged';
      },
    };
    const warnings: Array<[string, Record<string, unknown>]> = [];
    const log: Log = { debug() {}, info() {}, warn: (message, attributes = {}) => void warnings.push([message, attributes]), error() {} };
    const records = [record(undefined, live('a', '1', T0, acme)), record(undefined, live('g', '1', T1, globex)), record(undefined, live('d', '1', T1))];
    expect(await keepConnectionStats(records, { stats, log })).toEqual({ written: 1, unchanged: 1, failed: 1 });
    expect(applied.map((update) => update.connection).sort()).toEqual(['acme', 'default', 'globex']);
    expect(warnings).toEqual([
      [
        "a connection's counters were not updated (idsKnown, lastWriteAt); the events are not affected",
        { connection: 'globex', created: 1, lastWriteAt: T1, error: 'ThrottlingException: Rate of requests exceeds the allowed throughput' },
      ],
    ]);
  });
});

describe('DynamoDbConnectionStats: the commands', () => {
  const client = new DynamoDBClient({ region: 'eu-west-1' });
  const mock = mockClient(client);
  const stats = new DynamoDbConnectionStats(client, TABLE);
  const updates = () => mock.commandCalls(UpdateItemCommand).map((call) => call.args[0].input);
  const both = {
    TableName: TABLE,
    Key: { connection: { S: 'acme' } },
    UpdateExpression: 'SET #lastWriteAt = :lastWriteAt ADD #idsKnown :created',
    ConditionExpression: 'attribute_exists(#connection) AND (attribute_not_exists(#lastWriteAt) OR #lastWriteAt < :lastWriteAt)',
    ExpressionAttributeNames: { '#connection': 'connection', '#lastWriteAt': 'lastWriteAt', '#idsKnown': 'idsKnown' },
    ExpressionAttributeValues: { ':lastWriteAt': { S: T1 }, ':created': { N: '3' } },
  };
  const countOnly = {
    TableName: TABLE,
    Key: { connection: { S: 'acme' } },
    UpdateExpression: 'ADD #idsKnown :created',
    ConditionExpression: 'attribute_exists(#connection)',
    ExpressionAttributeNames: { '#connection': 'connection', '#idsKnown': 'idsKnown' },
    ExpressionAttributeValues: { ':created': { N: '3' } },
  };

  beforeEach(() => mock.reset());

  it('one UpdateItem: lastWriteAt if newer and the count, only on an existing row, nothing of the row returned', async () => {
    mock.on(UpdateItemCommand).resolves({});
    expect(await stats.record({ connection: 'acme', created: 3, lastWriteAt: T1 })).toBe('written');
    expect(updates()).toEqual([both]);
  });

  it('no creation: lastWriteAt alone', async () => {
    mock.on(UpdateItemCommand).resolves({});
    expect(await stats.record({ connection: 'acme', created: 0, lastWriteAt: T1 })).toBe('written');
    expect(updates()).toEqual([
      {
        TableName: TABLE,
        Key: { connection: { S: 'acme' } },
        UpdateExpression: 'SET #lastWriteAt = :lastWriteAt',
        ConditionExpression: 'attribute_exists(#connection) AND (attribute_not_exists(#lastWriteAt) OR #lastWriteAt < :lastWriteAt)',
        ExpressionAttributeNames: { '#connection': 'connection', '#lastWriteAt': 'lastWriteAt' },
        ExpressionAttributeValues: { ':lastWriteAt': { S: T1 } },
      },
    ]);
  });

  it('the stored last write is not older: the count is added alone; a row that is gone is left gone', async () => {
    mock.on(UpdateItemCommand).rejectsOnce(conditionFailed()).resolves({});
    expect(await stats.record({ connection: 'acme', created: 3, lastWriteAt: T1 })).toBe('written');
    expect(updates()).toEqual([both, countOnly]);

    mock.reset();
    mock.on(UpdateItemCommand).rejects(conditionFailed());
    expect(await stats.record({ connection: 'acme', created: 3, lastWriteAt: T1 })).toBe('unchanged');
    expect(updates()).toEqual([both, countOnly]);

    mock.reset();
    mock.on(UpdateItemCommand).rejects(conditionFailed());
    expect(await stats.record({ connection: 'acme', created: 0, lastWriteAt: T1 })).toBe('unchanged');
    expect(updates()).toHaveLength(1);
  });

  it('throws anything but a failed condition', async () => {
    const throttled = Object.assign(new Error('slow down'), { name: 'ThrottlingException' });
    mock.on(UpdateItemCommand).rejects(throttled);
    await expect(stats.record({ connection: 'acme', created: 1, lastWriteAt: T1 })).rejects.toBe(throttled);
  });
});

describe('DynamoDbConnectionStats against DynamoDB Local', () => {
  let dynamo: LocalDynamoDb;
  let client: DynamoDBClient;
  let stats: DynamoDbConnectionStats;
  const row = async (connection: string) =>
    (await client.send(new GetItemCommand({ TableName: TABLE, Key: { connection: { S: connection } }, ConsistentRead: true }))).Item;

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    client = dynamo.client();
    await dynamo.createConnectionsTable(TABLE);
    stats = new DynamoDbConnectionStats(client, TABLE);
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('keeps the count and the latest write; an older write only adds to the count; a missing connection is not created', async () => {
    await client.send(new PutItemCommand({ TableName: TABLE, Item: { connection: { S: 'acme' }, status: { S: 'active' } } }));

    expect(await stats.record({ connection: 'acme', created: 2, lastWriteAt: T1 })).toBe('written');
    expect(await row('acme')).toEqual({ connection: { S: 'acme' }, status: { S: 'active' }, idsKnown: { N: '2' }, lastWriteAt: { S: T1 } });

    // An older batch (another container's, counted late): the count grows, the last write stays.
    expect(await stats.record({ connection: 'acme', created: 1, lastWriteAt: T0 })).toBe('written');
    expect(await row('acme')).toMatchObject({ idsKnown: { N: '3' }, lastWriteAt: { S: T1 } });
    expect(await stats.record({ connection: 'acme', created: 0, lastWriteAt: T1 })).toBe('unchanged');

    expect(await stats.record({ connection: 'acme', created: 0, lastWriteAt: T2 })).toBe('written');
    expect(await row('acme')).toMatchObject({ idsKnown: { N: '3' }, lastWriteAt: { S: T2 } });

    expect(await stats.record({ connection: 'removed', created: 4, lastWriteAt: T2 })).toBe('unchanged');
    expect(await row('removed')).toBeUndefined();
  });
});
