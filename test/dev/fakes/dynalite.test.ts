/**
 * The harness's DynamoDB (dev/fakes/dynalite.ts) counts key sizes as DynamoDB does, in UTF-8 bytes:
 * a sort key up to 1,024 bytes, a partition key up to 2,048, in every request that takes a key, with
 * DynamoDB's ValidationException and message; in this process and in a child process.
 */
import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDynalite, type Dynalite } from '../../../dev/fakes/dynalite.js';
import { PARTITION_KEY_TOO_LARGE, SORT_KEY_TOO_LARGE } from '../../../dev/fakes/dynalite-key-sizes.js';

const TABLE = 'items-table';
/** 1,024 bytes in UTF-8 (512 characters). */
const ID_1024_BYTES = 'é'.repeat(512);
/** 1,200 bytes in UTF-8, 600 UTF-16 code units: what dynalite alone accepts. */
const ID_1200_BYTES = 'é'.repeat(600);
/** 2,048 bytes in UTF-8 (1,024 characters). */
const CONNECTION_2048_BYTES = 'é'.repeat(1024);
/** 2,050 bytes in UTF-8 (1,025 characters). */
const CONNECTION_2050_BYTES = 'é'.repeat(1025);

const key = (connection: string, id: string): Record<string, AttributeValue> => ({ connection: { S: connection }, id: { S: id } });
const row = (connection: string, id: string): Record<string, AttributeValue> => ({ ...key(connection, id), revision: { S: '1' } });

/** The error a command ends with: its name, message and HTTP status (undefined when it succeeded). */
async function refusal(client: DynamoDBClient, command: object): Promise<{ name: string; message: string; status?: number } | undefined> {
  try {
    // Any command; the cast only picks one of send's overloads.
    await client.send(command as PutItemCommand);
    return undefined;
  } catch (error) {
    const e = error as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
  }
}

const SORT_KEY_REFUSED = { name: 'ValidationException', message: SORT_KEY_TOO_LARGE, status: 400 };
const PARTITION_KEY_REFUSED = { name: 'ValidationException', message: PARTITION_KEY_TOO_LARGE, status: 400 };


/** A query of one connection's rows, from `start` when given. */
function queryOf(connection: string, start: { ExclusiveStartKey?: Record<string, AttributeValue> } = {}): QueryCommand {
  return new QueryCommand({
    TableName: TABLE,
    KeyConditionExpression: '#c = :c',
    ExpressionAttributeNames: { '#c': 'connection' },
    ExpressionAttributeValues: { ':c': { S: connection } },
    ...start,
  });
}
describe('dynalite in this process', () => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;

  beforeAll(async () => {
    dynamo = await startDynalite({ proxy: false });
    await dynamo.createItemsTable(TABLE);
    client = dynamo.client({ maxAttempts: 1 });
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('uses AWS messages word for word', () => {
    expect(SORT_KEY_TOO_LARGE).toBe('One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes');
    expect(PARTITION_KEY_TOO_LARGE).toBe('One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes');
  });

  it('takes a sort key of exactly 1,024 bytes and a partition key of exactly 2,048 bytes, and reads them back', async () => {
    await client.send(new PutItemCommand({ TableName: TABLE, Item: row('acme', ID_1024_BYTES) }));
    await client.send(new PutItemCommand({ TableName: TABLE, Item: row(CONNECTION_2048_BYTES, 'a') }));
    expect((await client.send(new GetItemCommand({ TableName: TABLE, Key: key('acme', ID_1024_BYTES) }))).Item).toEqual(row('acme', ID_1024_BYTES));
    expect((await client.send(new GetItemCommand({ TableName: TABLE, Key: key(CONNECTION_2048_BYTES, 'a') }))).Item).toEqual(row(CONNECTION_2048_BYTES, 'a'));
    const query = await client.send(queryOf(CONNECTION_2048_BYTES));
    expect(query.Items).toEqual([row(CONNECTION_2048_BYTES, 'a')]);
  });

  it('refuses a sort key over 1,024 bytes in UTF-8 in every request that takes a key, writing nothing', async () => {
    const big = key('acme', ID_1200_BYTES);
    expect(await refusal(client, new PutItemCommand({ TableName: TABLE, Item: row('acme', ID_1200_BYTES) }))).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new PutItemCommand({ TableName: TABLE, Item: row('acme', 'x'.repeat(1025)) }))).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new PutItemCommand({ TableName: TABLE, Item: row('acme', '😀'.repeat(300)) }))).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new PutItemCommand({ TableName: TABLE, Item: row('acme', '日'.repeat(1000)) }))).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new GetItemCommand({ TableName: TABLE, Key: big }))).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new DeleteItemCommand({ TableName: TABLE, Key: big }))).toEqual(SORT_KEY_REFUSED);
    expect(
      await refusal(
        client,
        new UpdateItemCommand({ TableName: TABLE, Key: big, UpdateExpression: 'SET #r = :r', ExpressionAttributeNames: { '#r': 'revision' }, ExpressionAttributeValues: { ':r': { S: '2' } } }),
      ),
    ).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: [key('acme', 'a'), big] } } }))).toEqual(SORT_KEY_REFUSED);
    expect(await refusal(client, new BatchWriteItemCommand({ RequestItems: { [TABLE]: [{ PutRequest: { Item: row('acme', ID_1200_BYTES) } }] } }))).toEqual(
      SORT_KEY_REFUSED,
    );
    expect(await refusal(client, new BatchWriteItemCommand({ RequestItems: { [TABLE]: [{ DeleteRequest: { Key: big } }] } }))).toEqual(SORT_KEY_REFUSED);
    // A bad starting key: dynalite puts "The provided starting key is invalid: " before the reason.
    const startKey = { ExclusiveStartKey: big };
    const startKeyRefused = { name: 'ValidationException', message: expect.stringContaining(SORT_KEY_TOO_LARGE), status: 400 };
    expect(await refusal(client, new ScanCommand({ TableName: TABLE, ...startKey }))).toEqual(startKeyRefused);
    expect(await refusal(client, queryOf('acme', startKey))).toEqual(startKeyRefused);
    expect((await dynamo.scan(TABLE)).map((stored) => stored['id']?.S)).not.toContain(ID_1200_BYTES);
  });

  it('refuses a partition key over 2,048 bytes in UTF-8: in a write, a read and a query key condition', async () => {
    expect(await refusal(client, new PutItemCommand({ TableName: TABLE, Item: row(CONNECTION_2050_BYTES, 'a') }))).toEqual(PARTITION_KEY_REFUSED);
    expect(await refusal(client, new GetItemCommand({ TableName: TABLE, Key: key(CONNECTION_2050_BYTES, 'a') }))).toEqual(PARTITION_KEY_REFUSED);
    expect(await refusal(client, queryOf(CONNECTION_2050_BYTES))).toEqual(PARTITION_KEY_REFUSED);
  });
});

describe('dynalite in a child process', () => {
  let dynamo: Dynalite | undefined;

  afterAll(async () => {
    await dynamo?.close();
  });

  it('counts key sizes in bytes too', async () => {
    dynamo = await startDynalite({ where: 'child', proxy: false });
    await dynamo.createItemsTable(TABLE);
    const client = dynamo.client({ maxAttempts: 1 });
    try {
      await client.send(new PutItemCommand({ TableName: TABLE, Item: row('acme', ID_1024_BYTES) }));
      expect(await refusal(client, new PutItemCommand({ TableName: TABLE, Item: row('acme', ID_1200_BYTES) }))).toEqual(SORT_KEY_REFUSED);
      expect((await dynamo.scan(TABLE)).map((stored) => stored['id']?.S)).toEqual([ID_1024_BYTES]);
    } finally {
      client.destroy();
    }
  });
});
