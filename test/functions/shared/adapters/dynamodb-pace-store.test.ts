/**
 * The pace row in the control table (functions/shared/adapters/dynamodb-pace-store.ts) against
 * DynamoDB Local on 127.0.0.1: the row's exact attributes, the version that every write raises, the
 * conditional write that refuses a stale version; and the exact commands, with the client mocked.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  ConditionalCheckFailedException,
  
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { startLocalDynamo, type LocalDynamo } from '../../../../dev/fakes/local-dynamo.js';
import { MemoryPaceStore } from '../../../../dev/fakes/memory-pace-store.js';
import { CONTROL_TABLE_KEY, DynamoDbPaceStore, paceRowKey } from '../../../../functions/shared/adapters/dynamodb-pace-store.js';
import { DEFAULT_PACE_SETTINGS, initialPaceState, openBreaker, type PaceState } from '../../../../functions/shared/provider/pace/pace-state.js';
import { ProviderPace } from '../../../../functions/shared/provider/pace/provider-pace.js';
import type { Log } from '../../../../functions/shared/ports.js';

const CONTROL_TABLE = 'content-sync-control';
const T = Date.UTC(2026, 0, 1, 12);
const SETTINGS = { ...DEFAULT_PACE_SETTINGS, maxRate: 50 };
const PACE_KEY = 'client#my-client-id';
const KEY = { [CONTROL_TABLE_KEY]: { S: paceRowKey(PACE_KEY) } };

describe('DynamoDbPaceStore against DynamoDB Local', () => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let store: DynamoDbPaceStore;

  beforeAll(async () => {
    dynamo = await startLocalDynamo();
    client = dynamo.client();
    await dynamo.createControlTable(CONTROL_TABLE);
    store = new DynamoDbPaceStore(client, CONTROL_TABLE, PACE_KEY);
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  beforeEach(async () => {
    await client.send(new DeleteItemCommand({ TableName: CONTROL_TABLE, Key: KEY }));
  });

  async function row(): Promise<Record<string, AttributeValue> | undefined> {
    return (await client.send(new GetItemCommand({ TableName: CONTROL_TABLE, Key: KEY, ConsistentRead: true }))).Item;
  }

  it('reads a missing row as undefined', async () => {
    expect(await store.read()).toBeUndefined();
  });

  it('creates the row as version 1, holding exactly pk, state (JSON) and version', async () => {
    const state = initialPaceState(SETTINGS, T);
    expect(await store.write(state, 0)).toBe('written');
    expect(await row()).toEqual({
      pk: { S: 'provider-pace#client#my-client-id' },
      state: { S: JSON.stringify(state) },
      version: { N: '1' },
    });
    expect(await store.read()).toEqual({ state, version: 1 });
  });

  it('keeps one row per pace key: another key reads and writes its own', async () => {
    const other = new DynamoDbPaceStore(client, CONTROL_TABLE, 'connection#acme');
    await store.write(initialPaceState(SETTINGS, T), 0);
    expect(await other.read()).toBeUndefined();
    const otherState = { ...initialPaceState(SETTINGS, T), tokens: 1 };
    expect(await other.write(otherState, 0)).toBe('written');
    expect(await other.read()).toEqual({ state: otherState, version: 1 });
    expect(await store.read()).toEqual({ state: initialPaceState(SETTINGS, T), version: 1 });
    const otherKey = { pk: { S: 'provider-pace#connection#acme' } };
    expect((await client.send(new GetItemCommand({ TableName: CONTROL_TABLE, Key: otherKey, ConsistentRead: true }))).Item).toEqual({
      ...otherKey,
      state: { S: JSON.stringify(otherState) },
      version: { N: '1' },
    });
    await client.send(new DeleteItemCommand({ TableName: CONTROL_TABLE, Key: otherKey }));
  });

  it('raises the version with every write and refuses a stale version as a conflict', async () => {
    const first = initialPaceState(SETTINGS, T);
    const second: PaceState = { ...first, tokens: 3, at: T + 100 };
    const third = openBreaker(second, T + 200, 'provider', SETTINGS);
    expect(await store.write(first, 0)).toBe('written');
    expect(await store.write(second, 1)).toBe('written');
    expect(await store.write(third, 2)).toBe('written');
    expect(await store.read()).toEqual({ state: third, version: 3 });

    expect(await store.write(first, 2)).toBe('conflict');
    expect(await store.write(first, 4)).toBe('conflict');
    expect(await store.write(first, 0)).toBe('conflict'); // the row exists
    expect(await store.read()).toEqual({ state: third, version: 3 });
  });

  it('lets one of two writers of the same version win', async () => {
    await store.write(initialPaceState(SETTINGS, T), 0);
    const results = await Promise.all([
      store.write({ ...initialPaceState(SETTINGS, T), tokens: 1 }, 1),
      store.write({ ...initialPaceState(SETTINGS, T), tokens: 2 }, 1),
    ]);
    expect([...results].sort()).toEqual(['conflict', 'written']);
    const stored = await store.read();
    expect(stored?.version).toBe(2);
    expect((stored?.state as PaceState).tokens).toBe(results[0] === 'written' ? 1 : 2);
  });

  it('reads a row whose state is not JSON as state undefined, with its version', async () => {
    await client.send(new PutItemCommand({ TableName: CONTROL_TABLE, Item: { ...KEY, state: { S: '{"rate": 5,' }, version: { N: '3' } } }));
    expect(await store.read()).toEqual({ state: undefined, version: 3 });
    await client.send(new PutItemCommand({ TableName: CONTROL_TABLE, Item: { ...KEY, version: { N: '4' } } }));
    expect(await store.read()).toEqual({ state: undefined, version: 4 });
  });

  it('throws on a row without a valid version (the pace then falls back)', async () => {
    await client.send(new PutItemCommand({ TableName: CONTROL_TABLE, Item: { ...KEY, state: { S: '{}' }, version: { N: '0' } } }));
    await expect(store.read()).rejects.toThrow('the pace row has no valid version');
    await client.send(new PutItemCommand({ TableName: CONTROL_TABLE, Item: { ...KEY, state: { S: '{}' } } }));
    await expect(store.read()).rejects.toThrow('the pace row has no valid version');
  });

  it('throws what is not a conflict (a missing table)', async () => {
    const missing = new DynamoDbPaceStore(client, 'no-such-table', PACE_KEY);
    await expect(missing.read()).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
    await expect(missing.write(initialPaceState(SETTINGS, T), 0)).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
  });

  it('serves the pace: a bad row is started afresh over, at the next version', async () => {
    await client.send(new PutItemCommand({ TableName: CONTROL_TABLE, Item: { ...KEY, state: { S: 'not json' }, version: { N: '7' } } }));
    const warnings: string[] = [];
    const log: Log = { debug: () => undefined, info: () => undefined, warn: (message) => void warnings.push(message), error: () => undefined };
    const pace = new ProviderPace(store, { now: () => new Date(T) }, log, { settings: SETTINGS, fallbackRate: 1, concurrency: 10 });

    expect(await pace.acquire()).toEqual({ kind: 'go', probe: false });
    expect(warnings).toEqual(['the pace row is not a pace state; starting afresh']);
    // A full bucket of 10 at 50/s, a lease of 5 drawn.
    expect(await store.read()).toEqual({ state: { ...initialPaceState(SETTINGS, T), tokens: 5 }, version: 8 });
  });
});

describe('DynamoDbPaceStore commands', () => {
  const client = new DynamoDBClient({ region: 'eu-west-1' });
  const mock = mockClient(client);
  const store = new DynamoDbPaceStore(client, 'control', 'client#my-client-id');
  const state = initialPaceState(SETTINGS, T);

  beforeEach(() => mock.reset());

  it('reads the row consistently, by its key', async () => {
    mock.on(GetItemCommand).resolves({ Item: { ...KEY, state: { S: JSON.stringify(state) }, version: { N: '12' } } });
    expect(await store.read()).toEqual({ state, version: 12 });
    expect(mock.commandCalls(GetItemCommand).map((call) => call.args[0].input)).toEqual([
      { TableName: 'control', Key: { pk: { S: 'provider-pace#client#my-client-id' } }, ConsistentRead: true },
    ]);
  });

  it('creates the row only where none exists, and replaces it only at the version read', async () => {
    mock.on(PutItemCommand).resolves({});
    expect(await store.write(state, 0)).toBe('written');
    expect(await store.write(state, 4)).toBe('written');
    const item = { pk: { S: 'provider-pace#client#my-client-id' }, state: { S: JSON.stringify(state) } };
    expect(mock.commandCalls(PutItemCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: 'control',
        Item: { ...item, version: { N: '1' } },
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': 'pk' },
      },
      {
        TableName: 'control',
        Item: { ...item, version: { N: '5' } },
        ConditionExpression: '#version = :expected',
        ExpressionAttributeNames: { '#version': 'version' },
        ExpressionAttributeValues: { ':expected': { N: '4' } },
      },
    ]);
  });

  it('answers conflict to a failed condition and throws anything else', async () => {
    const throttled = Object.assign(new Error('Rate of requests exceeds the allowed throughput'), { name: 'ThrottlingException' });
    mock
      .on(PutItemCommand)
      .rejectsOnce(new ConditionalCheckFailedException({ $metadata: {}, message: 'The conditional request failed' }))
      .rejectsOnce(throttled);
    expect(await store.write(state, 4)).toBe('conflict');
    await expect(store.write(state, 4)).rejects.toBe(throttled);
  });
});

// The port-level fake keeps the adapter's semantics: the same sequence gives the same answers.
describe('MemoryPaceStore (the fake of this adapter)', () => {
  it('answers as the adapter does', async () => {
    const fake = new MemoryPaceStore();
    const state = initialPaceState(SETTINGS, T);
    expect(await fake.read()).toBeUndefined();
    expect(await fake.write(state, 0)).toBe('written');
    expect(await fake.write(state, 0)).toBe('conflict');
    expect(await fake.write(state, 2)).toBe('conflict');
    expect(await fake.write(state, 1)).toBe('written');
    expect(await fake.read()).toEqual({ state, version: 2 });
  });
});
