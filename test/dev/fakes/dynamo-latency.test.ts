/**
 * AWS's DynamoDB latency as the harness injects it (dev/fakes/dynamo-latency.ts): the model's figure
 * of each operation, scaled by its factor or overridden, and the middleware that waits half of it
 * before the request and half after the answer, through the sleep it is given. The clients here
 * answer from a request handler in process (no server), and the sleep records what it is asked:
 * nothing waits for real.
 */
import { Readable } from 'node:stream';
import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  TransactGetItemsCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, DynamoDBStreamsClient, GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-dynamodb-streams';
import { describe, expect, it } from 'vitest';
import {
  addDynamoLatency,
  DYNAMO_LATENCY_MS,
  dynamoLatency,
  OTHER_OPERATION_MS,
  withDynamoLatency,
  type DynamoOperation,
  type LatencyParts,
} from '../../../dev/fakes/dynamo-latency.js';
import type { LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { VirtualClock } from '../../../dev/sim/virtual-clock.js';
import { initialPaceState, DEFAULT_PACE_SETTINGS } from '../../../functions/shared/provider/pace/pace-state.js';

const KEY = { pk: { S: 'k' } };
const TABLE = 'table';

/** Each command of the model's operations, as a client sends it. */
const COMMANDS: Record<Exclude<DynamoOperation, 'GetRecords' | 'GetShardIterator' | 'DescribeStream'>, () => object> = {
  GetItem: () => new GetItemCommand({ TableName: TABLE, Key: KEY }),
  BatchGetItem: () => new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: [KEY] } } }),
  Query: () => new QueryCommand({ TableName: TABLE, KeyConditionExpression: 'pk = :k', ExpressionAttributeValues: { ':k': { S: 'k' } } }),
  Scan: () => new ScanCommand({ TableName: TABLE }),
  PutItem: () => new PutItemCommand({ TableName: TABLE, Item: KEY }),
  UpdateItem: () => new UpdateItemCommand({ TableName: TABLE, Key: KEY, UpdateExpression: 'SET a = :a', ExpressionAttributeValues: { ':a': { S: 'a' } } }),
  DeleteItem: () => new DeleteItemCommand({ TableName: TABLE, Key: KEY }),
  BatchWriteItem: () => new BatchWriteItemCommand({ RequestItems: { [TABLE]: [{ PutRequest: { Item: KEY } }] } }),
  TransactWriteItems: () =>
    new TransactWriteItemsCommand({
      TransactItems: [{ Put: { TableName: TABLE, Item: KEY } }, { ConditionCheck: { TableName: TABLE, Key: KEY, ConditionExpression: 'attribute_exists(pk)' } }],
    }),
  TransactGetItems: () => new TransactGetItemsCommand({ TransactItems: [{ Get: { TableName: TABLE, Key: KEY } }] }),
  DescribeTable: () => new DescribeTableCommand({ TableName: TABLE }),
  ListTables: () => new ListTablesCommand({}),
};

/** What happened, in order: each sleep's ms, and each request that reached the server (`request <operation>`). */
type Log = Array<number | string>;

/** Answers every request in process (200 `{}`, or DynamoDB's error when `fail`), logging it. */
function requestHandler(log: Log, fail = false) {
  return {
    handle: async (request: { headers: Record<string, string> }) => {
      log.push(`request ${String(request.headers['x-amz-target']).split('.').pop()}`);
      const body = fail ? JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException', message: 'The conditional request failed' }) : '{}';
      return {
        response: {
          statusCode: fail ? 400 : 200,
          headers: { 'content-type': 'application/x-amz-json-1.0' },
          body: Readable.from([Buffer.from(body)]),
        },
      };
    },
    updateHttpClientConfig: () => undefined,
    httpHandlerConfigs: () => ({}),
  };
}

const CONFIG = { region: 'eu-west-1', endpoint: 'http://127.0.0.1:1', credentials: { accessKeyId: 'a', secretAccessKey: 's' }, maxAttempts: 1 };

function dynamoClient(log: Log, fail = false): DynamoDBClient {
  return new DynamoDBClient({ ...CONFIG, requestHandler: requestHandler(log, fail) as never });
}

/** A sleep that only records how long it was asked for. */
function recordingSleep(log: Log): LatencyParts['sleep'] {
  return async (ms) => void log.push(ms);
}

describe('the latency model', () => {
  it('gives each operation its figure, and any other the documented default', () => {
    const model = dynamoLatency();
    for (const [operation, ms] of Object.entries(DYNAMO_LATENCY_MS)) expect(model.ms(operation)).toBe(ms);
    expect(model.ms('UpdateTimeToLive')).toBe(OTHER_OPERATION_MS);
    expect(model.ms('')).toBe(OTHER_OPERATION_MS);
    // An inherited name is not an operation of the model.
    expect(model.ms('toString')).toBe(OTHER_OPERATION_MS);
  });

  it('keeps within "single-digit milliseconds" for reads and writes, a transaction two rounds of its kind', () => {
    for (const operation of ['GetItem', 'BatchGetItem', 'Query', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem'] as const) {
      expect(DYNAMO_LATENCY_MS[operation]).toBeLessThan(10);
    }
    expect(DYNAMO_LATENCY_MS.TransactWriteItems).toBe(2 * DYNAMO_LATENCY_MS.PutItem);
    expect(DYNAMO_LATENCY_MS.TransactGetItems).toBe(2 * DYNAMO_LATENCY_MS.GetItem);
  });

  it('scales every figure by its factor (0 turns it off) and takes overrides before the factor', () => {
    expect(dynamoLatency({ factor: 2 }).ms('PutItem')).toBe(2 * DYNAMO_LATENCY_MS.PutItem);
    expect(dynamoLatency({ factor: 2 }).ms('CreateTable')).toBe(2 * OTHER_OPERATION_MS);
    expect(dynamoLatency({ factor: 0 }).ms('TransactWriteItems')).toBe(0);
    const overridden = dynamoLatency({ factor: 3, overrides: { GetItem: 1, CreateTable: 100 } });
    expect(overridden.ms('GetItem')).toBe(3);
    expect(overridden.ms('CreateTable')).toBe(300);
    expect(overridden.ms('PutItem')).toBe(3 * DYNAMO_LATENCY_MS.PutItem);
  });

  it('refuses a factor or a figure that is not a number of at least 0', () => {
    expect(() => dynamoLatency({ factor: -1 })).toThrow(/factor must be a number of at least 0, got -1/);
    expect(() => dynamoLatency({ factor: Number.NaN })).toThrow(/factor/);
    expect(() => dynamoLatency({ overrides: { GetItem: -2 } })).toThrow(/latency of GetItem must be/);
  });
});

describe('the middleware', () => {
  it.each(Object.keys(COMMANDS) as Array<keyof typeof COMMANDS>)('sleeps half of %s before its request and half after its answer', async (operation) => {
    const log: Log = [];
    const client = addDynamoLatency(dynamoClient(log), { latency: dynamoLatency(), sleep: recordingSleep(log) });
    await client.send(COMMANDS[operation]() as never);
    const half = DYNAMO_LATENCY_MS[operation] / 2;
    expect(log).toEqual([half, `request ${operation}`, half]);
  });

  it('does the same on the DynamoDB Streams client', async () => {
    const log: Log = [];
    const client = addDynamoLatency(new DynamoDBStreamsClient({ ...CONFIG, requestHandler: requestHandler(log) as never }), {
      latency: dynamoLatency(),
      sleep: recordingSleep(log),
    });
    await client.send(new DescribeStreamCommand({ StreamArn: 'arn:aws:dynamodb:eu-west-1:1:table/t/stream/s' }));
    await client.send(new GetShardIteratorCommand({ StreamArn: 'arn:aws:dynamodb:eu-west-1:1:table/t/stream/s', ShardId: 's', ShardIteratorType: 'TRIM_HORIZON' }));
    await client.send(new GetRecordsCommand({ ShardIterator: 'i' }));
    const { DescribeStream, GetShardIterator, GetRecords } = DYNAMO_LATENCY_MS;
    expect(log).toEqual([
      DescribeStream / 2,
      'request DescribeStream',
      DescribeStream / 2,
      GetShardIterator / 2,
      'request GetShardIterator',
      GetShardIterator / 2,
      GetRecords / 2,
      'request GetRecords',
      GetRecords / 2,
    ]);
  });

  it('scales with the factor, and sleeps not at all at 0', async () => {
    const log: Log = [];
    const doubled = addDynamoLatency(dynamoClient(log), { latency: dynamoLatency({ factor: 2 }), sleep: recordingSleep(log) });
    await doubled.send(COMMANDS.TransactWriteItems() as never);
    expect(log).toEqual([DYNAMO_LATENCY_MS.TransactWriteItems, 'request TransactWriteItems', DYNAMO_LATENCY_MS.TransactWriteItems]);
    log.length = 0;
    const off = addDynamoLatency(dynamoClient(log), { latency: dynamoLatency({ factor: 0 }), sleep: recordingSleep(log) });
    await off.send(COMMANDS.PutItem() as never);
    expect(log).toEqual(['request PutItem']);
  });

  it('gives an operation the model does not name the documented default, no more', async () => {
    const log: Log = [];
    const client = addDynamoLatency(dynamoClient(log), { latency: dynamoLatency(), sleep: recordingSleep(log) });
    await client.send(new UpdateTimeToLiveCommand({ TableName: TABLE, TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true } }));
    expect(log).toEqual([OTHER_OPERATION_MS / 2, 'request UpdateTimeToLive', OTHER_OPERATION_MS / 2]);
  });

  it('waits the second half after an error answer too, and the caller gets the error', async () => {
    const log: Log = [];
    const client = addDynamoLatency(dynamoClient(log, true), { latency: dynamoLatency(), sleep: recordingSleep(log) });
    await expect(client.send(COMMANDS.PutItem() as never)).rejects.toBeInstanceOf(ConditionalCheckFailedException);
    expect(log).toEqual([DYNAMO_LATENCY_MS.PutItem / 2, 'request PutItem', DYNAMO_LATENCY_MS.PutItem / 2]);
  });

  it('on a virtual clock: the call takes the model in virtual time, the request sent half-way, and none while the server answers', async () => {
    const clock = new VirtualClock();
    const t0 = clock.ms();
    const log: Log = [];
    const sentAt: number[] = [];
    const client = new DynamoDBClient({
      ...CONFIG,
      requestHandler: {
        ...requestHandler(log),
        // A server that takes real time to answer: virtual time must not move meanwhile.
        handle: async (request: { headers: Record<string, string> }) => {
          sentAt.push(clock.ms() - t0);
          await new Promise((resolve) => setImmediate(resolve));
          return requestHandler(log).handle(request);
        },
      } as never,
    });
    addDynamoLatency(client, { latency: dynamoLatency(), sleep: clock.sleep, track: (work) => clock.track(work) });
    let endedAt: number | undefined;
    const call = client.send(COMMANDS.TransactWriteItems() as never).then(() => void (endedAt = clock.ms() - t0));
    await clock.run(Number.MAX_SAFE_INTEGER, () => endedAt !== undefined);
    await call;
    expect(sentAt).toEqual([DYNAMO_LATENCY_MS.TransactWriteItems / 2]);
    expect(endedAt).toBe(DYNAMO_LATENCY_MS.TransactWriteItems);
  });

  it('pipelined on a virtual clock: each call sent half-way and answered at its round trip, a call made meanwhile sent after the answer, and its answer read whole before the next request', async () => {
    const clock = new VirtualClock();
    const t0 = clock.ms();
    const log: Log = [];
    const sentAt: number[] = [];
    // A server that takes real time to answer, whose answers are streams.
    const client = new DynamoDBClient({
      ...CONFIG,
      requestHandler: {
        handle: async (request: { headers: Record<string, string> }) => {
          const operation = String(request.headers['x-amz-target']).split('.').pop();
          log.push(`server takes ${operation}`);
          sentAt.push(clock.ms() - t0);
          for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
          const answered = await requestHandler([]).handle(request);
          const body = answered.response.body;
          body.on('end', () => log.push(`server answered ${operation}`));
          return answered;
        },
      } as never,
    });
    addDynamoLatency(client, { latency: dynamoLatency(), sleep: clock.sleep, pipeline: clock });
    const ended: Record<string, number> = {};
    const calls: Array<Promise<unknown>> = [];
    clock.at(t0, () => calls.push(client.send(COMMANDS.PutItem() as never).then(() => void (ended['PutItem'] = clock.ms() - t0))));
    // Made once the PutItem is sent (3 ms) and before its answer time (6 ms).
    clock.at(t0 + 1, () => calls.push(client.send(COMMANDS.GetItem() as never).then(() => void (ended['GetItem'] = clock.ms() - t0))));
    await clock.run(Number.MAX_SAFE_INTEGER, () => Object.keys(ended).length === 2);
    await Promise.all(calls);
    // The GetItem, sent at 1 + 2 = 3 ms, reached the server after the PutItem's answer was read whole
    // (the clock had run on meanwhile, to the GetItem's own answer time).
    expect(log).toEqual(['server takes PutItem', 'server answered PutItem', 'server takes GetItem', 'server answered GetItem']);
    expect(sentAt).toEqual([DYNAMO_LATENCY_MS.PutItem / 2, 1 + DYNAMO_LATENCY_MS.GetItem]);
    expect(ended).toEqual({ PutItem: DYNAMO_LATENCY_MS.PutItem, GetItem: 1 + DYNAMO_LATENCY_MS.GetItem });
  });
});

describe('withDynamoLatency', () => {
  it("applies the model to every client a LocalDynamoDb's client() makes, and leaves the rest of it as it was", async () => {
    const log: Log = [];
    const made: DynamoDBClient[] = [];
    const dynamo = {
      endpoint: 'http://127.0.0.1:1',
      client: () => {
        const client = dynamoClient(log);
        made.push(client);
        return client;
      },
      close: async () => void log.push('closed'),
    } as unknown as LocalDynamoDb;
    const wrapped = withDynamoLatency(dynamo, dynamoLatency({ factor: 2 }), recordingSleep(log));
    await wrapped.client().send(COMMANDS.GetItem() as never);
    expect(log).toEqual([DYNAMO_LATENCY_MS.GetItem, 'request GetItem', DYNAMO_LATENCY_MS.GetItem]);
    expect(made).toHaveLength(1);
    // The original's own clients take none.
    log.length = 0;
    await dynamo.client().send(COMMANDS.GetItem() as never);
    expect(log).toEqual(['request GetItem']);
    expect(wrapped.endpoint).toBe(dynamo.endpoint);
    await wrapped.close();
    expect(log).toContain('closed');
  });
});

describe('the in-memory pace row (MemoryPaceStore) with latency', () => {
  it("reads and writes half-way through the adapter's GetItem and PutItem round trips", async () => {
    const log: Log = [];
    const store = new MemoryPaceStore({
      latency: {
        latency: dynamoLatency(),
        sleep: async (ms) => void log.push(`${ms} ms: ${store.reads} reads, ${store.writes} writes`),
      },
    });
    expect(await store.read()).toBeUndefined();
    expect(await store.write(initialPaceState(DEFAULT_PACE_SETTINGS, 0), 0)).toBe('written');
    const read = DYNAMO_LATENCY_MS.GetItem / 2;
    const write = DYNAMO_LATENCY_MS.PutItem / 2;
    expect(log).toEqual([`${read} ms: 0 reads, 0 writes`, `${read} ms: 1 reads, 0 writes`, `${write} ms: 1 reads, 0 writes`, `${write} ms: 1 reads, 1 writes`]);
  });

  it('takes no time without it', async () => {
    const store = new MemoryPaceStore();
    expect(await store.write(initialPaceState(DEFAULT_PACE_SETTINGS, 0), 0)).toBe('written');
    expect(await store.write(initialPaceState(DEFAULT_PACE_SETTINGS, 0), 0)).toBe('conflict');
  });
});
