/**
 * The item sync handler with every AWS client mocked (aws-sdk-client-mock) and a scripted provider:
 * one test per outcome docs/item-sync.md names ("How each message ends"), asserting the exact commands sent.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DynamoDBClient,
  DynamoDBServiceException,
  PutItemCommand,
  ProvisionedThroughputExceededException,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  ChangeMessageVisibilityBatchCommand,
  GetQueueUrlCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DeleteObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { closeBreaker, DEFAULT_PACE_SETTINGS, initialPaceState, openBreaker, type PaceState } from '../../../functions/shared/provider/pace/pace-state.js';
import { createSyncHandler, type SyncHandlerDeps } from '../../../functions/item-sync/app.js';
import { itemJson, itemObjectKey } from '../../../functions/item-sync/item-writer.js';
import { parseJson } from '../../../functions/shared/json.js';
import { loadSyncConfig, type SyncConfig } from '../../../functions/shared/config.js';
import { ConfigError } from '../../../functions/shared/errors.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import {
  DLQ_URL,
  QUEUE_URL,
  ScriptedProvider,
  item,
  lambdaContext,
  logLines,
  metricNamespaces,
  metricsIn,
  providerError,
  sqsEvent,
} from './helpers.js';

const TABLE = 'content-sync-items';
const BUCKET = 'content-sync-items-bucket';
/** The random part of every object key in these tests. */
const SUFFIX = '0123456789abcdef';
const TOKEN_SECRET = 'content-sync/access-token';
const TOKEN_1 = 'at-unit-secret-token-0001';
const TOKEN_2 = 'at-unit-secret-token-0002';
const NOW = new Date('2026-11-21T10:00:00.000Z');

const ddb = mockClient(DynamoDBClient);
const sqs = mockClient(SQSClient);
const secrets = mockClient(SecretsManagerClient);
const s3 = mockClient(S3Client);

function config(overrides: Record<string, string> = {}): SyncConfig {
  return loadSyncConfig({
    PROVIDER_BASE_URL: 'https://provider.example.com/api/v2',
    ACCESS_TOKEN_SECRET_ID: TOKEN_SECRET,
    ITEMS_TABLE_NAME: TABLE,
    ITEMS_BUCKET_NAME: BUCKET,
    REVISION_FIELD: 'revision',
    DEAD_LETTER_QUEUE_URL: DLQ_URL,
    CONTROL_TABLE_NAME: 'control',
    PROVIDER_REQUESTS_PER_SECOND: '1000',
    ...overrides,
  });
}

function tokenSecret(...tokens: string[]) {
  let chain = secrets.on(GetSecretValueCommand, { SecretId: TOKEN_SECRET });
  for (const token of tokens) {
    chain = chain.resolvesOnce({ SecretString: JSON.stringify({ accessToken: token, refreshedAt: NOW.toISOString() }) });
  }
  chain.resolves({ SecretString: JSON.stringify({ accessToken: tokens.at(-1), refreshedAt: NOW.toISOString() }) });
}

/** Stored rows as BatchGetItem answers them (projection: id, revision, deleted, itemObject). */
function stored(rows: Array<{ id: string; revision: string; deleted?: boolean; objectKey?: string }>) {
  ddb.on(BatchGetItemCommand).resolves({
    Responses: {
      [TABLE]: rows.map((row) => ({
        id: { S: row.id },
        revision: { S: row.revision },
        ...(row.deleted ? { deleted: { BOOL: true } } : {}),
        ...(row.objectKey !== undefined ? { itemObject: { M: { key: { S: row.objectKey } } } } : {}),
      })),
    },
  });
}

let clockMs = NOW.getTime();
let sleeps: number[] = [];

function build(provider: ScriptedProvider, overrides: Partial<SyncHandlerDeps> & { env?: Record<string, string> } = {}) {
  const { env, ...deps } = overrides;
  return createSyncHandler({
    config: config(env),
    dynamodb: new DynamoDBClient({ region: 'eu-west-1' }),
    sqs: new SQSClient({ region: 'eu-west-1' }),
    secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
    s3: new S3Client({ region: 'eu-west-1' }),
    objectKeySuffix: () => SUFFIX,
    provider,
    clock: { now: () => new Date(clockMs) },
    random: () => 0.5,
    sleep: async (ms) => {
      sleeps.push(ms);
      clockMs += ms;
    },
    paceStore: new MemoryPaceStore(),
    ...deps,
  });
}

async function run(handler: ReturnType<typeof build>, bodies: string[], remainingMs = 60_000, attributes: { postponements?: number } = {}) {
  const event = sqsEvent(bodies);
  if (attributes.postponements !== undefined) {
    for (const record of event.Records) {
      record.messageAttributes = {
        postponements: { dataType: 'Number', stringValue: String(attributes.postponements), stringListValues: [], binaryListValues: [] },
      };
    }
  }
  const { result, error, output } = await captureOutput(() => handler(event, lambdaContext(remainingMs)));
  if (error) throw error;
  return { result: result!, output, metrics: metricsIn(output), logs: logLines(output) };
}

const marshalled = (value: Record<string, unknown>) => expect.objectContaining(value);

beforeEach(() => {
  ddb.reset();
  sqs.reset();
  secrets.reset();
  s3.reset();
  clockMs = NOW.getTime();
  sleeps = [];
  tokenSecret(TOKEN_1);
  stored([]);
  ddb.on(PutItemCommand).resolves({});
  ddb.on(UpdateItemCommand).resolves({});
  s3.on(PutObjectCommand).resolves({});
  s3.on(DeleteObjectCommand).resolves({});
  sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `dlq-${entry.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  }));
  sqs.on(GetQueueUrlCommand).resolves({ QueueUrl: QUEUE_URL });
  sqs.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [], Failed: [] });
});

describe('parsing and the stored revisions', () => {
  it('takes {"id"} and bare ids, reads the whole batch in one BatchGetItem and stores new items as the contract row', async () => {
    const provider = new ScriptedProvider()
      .on('a', item('a', 3, { nested: { list: [1, 'x', null, { deep: true }] }, empty: '', nothing: null }))
      .on('b', item('b', 'rev-7'));
    const { result, metrics } = await run(build(provider), ['{"id": "a"}', '  b \n']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 1);
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: {
        [TABLE]: {
          Keys: [{ id: { S: 'a' } }, { id: { S: 'b' } }],
          // The object key too: a write replacing the row deletes it (also when its answer is lost).
          ProjectionExpression: '#id, #revision, #deleted, #itemObject',
          ExpressionAttributeNames: { '#id': 'id', '#revision': 'revision', '#deleted': 'deleted', '#itemObject': 'itemObject' },
        },
      },
    });
    expect(ddb).toReceiveCommandWith(PutItemCommand, {
      TableName: TABLE,
      Item: {
        id: { S: 'a' },
        type: { S: 'file' },
        revision: { S: '3' },
        syncedAt: { S: NOW.toISOString() },
        item: {
          M: {
            id: { S: 'a' },
            type: { S: 'file' },
            name: { S: 'a.txt' },
            revision: { N: '3' },
            nested: { M: { list: { L: [{ N: '1' }, { S: 'x' }, { NULL: true }, { M: { deep: { BOOL: true } } }] } } },
            empty: { S: '' },
            nothing: { NULL: true },
          },
        },
      },
      ConditionExpression: 'attribute_not_exists(#id)',
      ExpressionAttributeNames: { '#id': 'id' },
    });
    expect(ddb).toReceiveCommandWith(PutItemCommand, { Item: marshalled({ id: { S: 'b' }, revision: { S: 'rev-7' } }) });
    expect(provider.calls.map((call) => [call.id, call.token])).toEqual([
      ['a', TOKEN_1],
      ['b', TOKEN_1],
    ]);
    expect(metrics).toMatchObject({
      ItemsFetched: 2,
      ItemsCreated: 2,
      ItemsUpdated: 0,
      ItemsUnchanged: 0,
      ItemsDeleted: 0,
      RecordsRetried: 0,
      RecordsDeadLettered: 0,
    });
  });

  it('fetches an id once however many records carry it, and every record shares the outcome', async () => {
    const provider = new ScriptedProvider().on('dup', item('dup', 1));
    const { result } = await run(build(provider), ['{"id":"dup"}', 'dup', ' dup ', '{"id":"dup","extra":1}']);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.calls).toHaveLength(1);
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: { [TABLE]: expect.objectContaining({ Keys: [{ id: { S: 'dup' } }] }) },
    });
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
  });

  it('reads UnprocessedKeys again until DynamoDB has answered for every id', async () => {
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({
        Responses: { [TABLE]: [{ id: { S: 'a' }, revision: { S: '1' } }] },
        UnprocessedKeys: { [TABLE]: { Keys: [{ id: { S: 'b' } }] } },
      })
      .resolves({ Responses: { [TABLE]: [{ id: { S: 'b' }, revision: { S: '1' } }] } });
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const { result, metrics } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 2);
    expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
      RequestItems: { [TABLE]: expect.objectContaining({ Keys: [{ id: { S: 'b' } }] }) },
    });
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(metrics['ItemsUnchanged']).toBe(2);
  });

  it('retries the whole batch when UnprocessedKeys never clear (throttled reads)', async () => {
    ddb.on(BatchGetItemCommand).resolves({ Responses: { [TABLE]: [] }, UnprocessedKeys: { [TABLE]: { Keys: [{ id: { S: 'a' } }] } } });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, metrics } = await run(build(provider), ['a']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.calls).toHaveLength(0);
    expect(metrics['RecordsRetried']).toBe(1);
  });
});

describe('compare and write', () => {
  it('writes nothing for an unchanged revision (numbers compare as their JSON text)', async () => {
    stored([{ id: 'a', revision: '42' }, { id: 'b', revision: 'r1' }]);
    const provider = new ScriptedProvider().on('a', item('a', 42)).on('b', item('b', 'r1'));
    const { result, metrics } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(ddb).not.toHaveReceivedCommand(UpdateItemCommand);
    expect(metrics).toMatchObject({ ItemsFetched: 2, ItemsUnchanged: 2, ItemsCreated: 0, ItemsUpdated: 0 });
  });

  it('updates a changed revision, conditional on the stored revision it compared with', async () => {
    stored([{ id: 'a', revision: '1' }]);
    const provider = new ScriptedProvider().on('a', item('a', 2));
    const { metrics } = await run(build(provider), ['a']);

    expect(ddb).toReceiveCommandWith(PutItemCommand, {
      TableName: TABLE,
      Item: marshalled({ revision: { S: '2' } }),
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
      ExpressionAttributeValues: { ':expected': { S: '1' } },
    });
    expect(metrics['ItemsUpdated']).toBe(1);
  });

  it('reads the revision at a dot path (REVISION_FIELD=meta.rev)', async () => {
    stored([{ id: 'a', revision: '1' }]);
    const provider = new ScriptedProvider().on('a', { id: 'a', type: 'folder', meta: { rev: 5 }, revision: 1 });
    await run(build(provider, { env: { REVISION_FIELD: 'meta.rev' } }), ['a']);

    expect(ddb).toReceiveCommandWith(PutItemCommand, {
      Item: marshalled({ type: { S: 'folder' }, revision: { S: '5' } }),
      ExpressionAttributeValues: { ':expected': { S: '1' } },
    });
  });

  it('marks a stored row deleted on 404, keeping its copy, conditional on its revision', async () => {
    stored([{ id: 'gone', revision: '9' }]);
    const provider = new ScriptedProvider().on('gone', providerError('not-found', 404));
    const { result, metrics } = await run(build(provider), ['gone']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).toReceiveCommandExactlyOnceWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: { id: { S: 'gone' } },
      UpdateExpression: 'SET #deleted = :true, #syncedAt = :syncedAt',
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted', '#syncedAt': 'syncedAt' },
      ExpressionAttributeValues: { ':expected': { S: '9' }, ':true': { BOOL: true }, ':syncedAt': { S: NOW.toISOString() } },
    });
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(metrics['ItemsDeleted']).toBe(1);
  });

  it('writes nothing for a 404 on an unknown id or on a row already deleted', async () => {
    stored([{ id: 'tomb', revision: '3', deleted: true }]);
    const provider = new ScriptedProvider().on('never', providerError('not-found', 404)).on('tomb', providerError('not-found', 404));
    const { result, metrics } = await run(build(provider), ['never', 'tomb']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(ddb).not.toHaveReceivedCommand(UpdateItemCommand);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    expect(metrics['ItemsDeleted']).toBe(0);
  });

  it('brings a deleted item back (same revision included), conditional on the tombstone', async () => {
    stored([{ id: 'back', revision: '3', deleted: true }]);
    const provider = new ScriptedProvider().on('back', item('back', 3));
    const { metrics } = await run(build(provider), ['back']);

    expect(ddb).toReceiveCommandWith(PutItemCommand, {
      Item: expect.not.objectContaining({ deleted: expect.anything() }),
      ConditionExpression: '#revision = :expected AND #deleted = :true',
      ExpressionAttributeValues: { ':expected': { S: '3' }, ':true': { BOOL: true } },
    });
    expect(metrics['ItemsUpdated']).toBe(1);
  });

  it('after a lost write race reads the row again (consistently), fetches again and re-decides', async () => {
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'race' }, revision: { S: '1' } }] } })
      .resolves({ Responses: { [TABLE]: [{ id: { S: 'race' }, revision: { S: '3' } }] } });
    ddb.on(PutItemCommand).rejectsOnce(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const provider = new ScriptedProvider().on('race', item('race', 2), item('race', 3));
    const { result, metrics } = await run(build(provider), ['race']);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.calls).toHaveLength(2);
    expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
      RequestItems: {
        [TABLE]: expect.objectContaining({ Keys: [{ id: { S: 'race' } }], ConsistentRead: true }),
      },
    });
    // The second fetch found the revision another writer stored: nothing more to write.
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(metrics['ItemsUnchanged']).toBe(1);
  });

  it('gives a write race up as retry-later after a bounded number of rounds', async () => {
    stored([{ id: 'hot', revision: '1' }]);
    ddb.on(PutItemCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const provider = new ScriptedProvider().on('hot', item('hot', 2));
    const { result, logs } = await run(build(provider), ['hot']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 3);
    expect(provider.calls).toHaveLength(3);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    expect(logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({
      itemId: 'hot',
      reason: expect.stringContaining('conditional write lost 3 times'),
    });
  });

  it('retries a record whose write was throttled beyond the SDK retries', async () => {
    ddb.on(PutItemCommand).rejects(
      new ProvisionedThroughputExceededException({ message: 'Rate of requests exceeds the allowed throughput', $metadata: {} }),
    );
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const { result } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
  });
});

describe('items too large for a row', () => {
  /** A file whose row would be over 400 KB: 300 Ki two-byte characters. */
  const largeItem = (id: string, revision: unknown) => item(id, revision, { blob: 'é'.repeat(300 * 1024) });
  const OLD_KEY = `items/${'0'.repeat(64)}/1/${'1'.repeat(64)}-fedcba9876543210.json`;
  const conditionFailed = () => new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });

  /** The object the sync writes for `value`: its bytes, their SHA-256 and its key. */
  function objectOf(value: Record<string, unknown>, id: string, revision: string) {
    const body = Buffer.from(itemJson(value), 'utf8');
    const sha256 = createHash('sha256').update(body).digest('hex');
    return { body, sha256, key: itemObjectKey(id, revision, sha256, SUFFIX) };
  }

  /** The writes to S3 and the table, in the order they are sent; PutItem answers `putItem()` (or throws it). */
  function recordWrites(putItem: (call: number) => unknown = () => ({})): string[] {
    const order: string[] = [];
    let calls = 0;
    s3.on(PutObjectCommand).callsFake((input: { Key: string }) => {
      order.push(`PutObject ${input.Key}`);
      return {};
    });
    s3.on(DeleteObjectCommand).callsFake((input: { Key: string }) => {
      order.push(`DeleteObject ${input.Key}`);
      return {};
    });
    ddb.on(PutItemCommand).callsFake((input: { Item: Record<string, unknown> }) => {
      order.push(`PutItem ${'itemObject' in input.Item ? 'itemObject' : 'item'}`);
      const answer = putItem(++calls);
      if (answer instanceof Error) throw answer;
      return answer;
    });
    return order;
  }

  it('stores the item whole in the bucket first (SHA-256 checked by S3), then the row with itemObject in place of item', async () => {
    const big = largeItem('huge', 1);
    const order = recordWrites();
    const { result, metrics } = await run(build(new ScriptedProvider().on('huge', big)), ['huge']);

    const { body, sha256, key } = objectOf(big, 'huge', '1');
    expect(result.batchItemFailures).toEqual([]);
    expect(key).toMatch(/^items\/[0-9a-f]{64}\/1\/[0-9a-f]{64}-0123456789abcdef\.json$/);
    expect(s3).toReceiveCommandExactlyOnceWith(PutObjectCommand, {
      Bucket: BUCKET,
      Key: key,
      Body: body,
      ContentLength: body.byteLength,
      ContentType: 'application/json',
      ChecksumSHA256: Buffer.from(sha256, 'hex').toString('base64'),
    });
    // The object holds the item as the provider returned it (the same JSON value).
    expect(parseJson(body.toString('utf8'))).toEqual(big);
    expect(body.byteLength).toBeGreaterThan(600 * 1024);
    // The estimate already said "too large": the inline row was never sent.
    expect(ddb).toReceiveCommandExactlyOnceWith(PutItemCommand, {
      TableName: TABLE,
      Item: {
        id: { S: 'huge' },
        type: { S: 'file' },
        revision: { S: '1' },
        itemObject: { M: { key: { S: key }, size: { N: String(body.byteLength) }, sha256: { S: sha256 } } },
        syncedAt: { S: NOW.toISOString() },
      },
      ConditionExpression: 'attribute_not_exists(#id)',
      ExpressionAttributeNames: { '#id': 'id' },
    });
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input.Item).not.toHaveProperty('item');
    expect(order).toEqual([`PutObject ${key}`, 'PutItem itemObject']);
    expect(s3).not.toHaveReceivedCommand(DeleteObjectCommand);
    expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsDeadLettered: 0 });
  });

  it('goes to the bucket when DynamoDB refuses the inline row for its size although the estimate let it through', async () => {
    const order = recordWrites((call) =>
      call === 1
        ? new DynamoDBServiceException({
            name: 'ValidationException',
            $fault: 'client',
            $metadata: { httpStatusCode: 400 },
            message: 'Item size has exceeded the maximum allowed size',
          })
        : {},
    );
    const value = item('mid', 1);
    const { result, metrics } = await run(build(new ScriptedProvider().on('mid', value)), ['mid']);

    const { key } = objectOf(value, 'mid', '1');
    expect(result.batchItemFailures).toEqual([]);
    expect(order).toEqual(['PutItem item', `PutObject ${key}`, 'PutItem itemObject']);
    expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsDeadLettered: 0 });
  });

  it('deletes its new object when the row write lost a race and the row points elsewhere', async () => {
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({ Responses: { [TABLE]: [] } })
      // The row read back after the lost write: another writer's.
      .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'race' }, revision: { S: '2' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
      .resolves({ Responses: { [TABLE]: [{ id: { S: 'race' }, revision: { S: '2' } }] } });
    const order = recordWrites((call) => (call === 1 ? conditionFailed() : {}));
    const big = largeItem('race', 2);
    const { result, metrics, logs } = await run(build(new ScriptedProvider().on('race', big)), ['race']);

    const { key } = objectOf(big, 'race', '2');
    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
      RequestItems: {
        [TABLE]: {
          Keys: [{ id: { S: 'race' } }],
          ProjectionExpression: '#id, #revision, #deleted, #itemObject, #syncedAt',
          ExpressionAttributeNames: { '#id': 'id', '#revision': 'revision', '#deleted': 'deleted', '#itemObject': 'itemObject', '#syncedAt': 'syncedAt' },
          ConsistentRead: true,
        },
      },
    });
    expect(order).toEqual([`PutObject ${key}`, 'PutItem itemObject', `DeleteObject ${key}`]);
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: key });
    // Then as any lost race: read again, fetch again, the same revision is stored: nothing more to write.
    expect(metrics).toMatchObject({ ItemsUnchanged: 1, ItemsCreated: 0 });
    expect(logs.find((line) => line['message'] === 'item object deleted')).toMatchObject({
      itemId: 'race',
      objectKey: key,
      reason: 'the row write lost a race; the row points elsewhere',
    });
  });

  it('keeps its object when the lost write was its own (the row points to it: the answer was lost and the SDK sent it again)', async () => {
    const big = largeItem('mine', 1);
    const { key } = objectOf(big, 'mine', '1');
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({ Responses: { [TABLE]: [] } })
      .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'mine' }, revision: { S: '1' }, itemObject: { M: { key: { S: key } } } }] } })
      .resolves({ Responses: { [TABLE]: [{ id: { S: 'mine' }, revision: { S: '1' } }] } });
    const order = recordWrites((call) => (call === 1 ? conditionFailed() : {}));
    const { result, metrics, logs } = await run(build(new ScriptedProvider().on('mine', big)), ['mine']);

    expect(result.batchItemFailures).toEqual([]);
    expect(order).toEqual([`PutObject ${key}`, 'PutItem itemObject']);
    expect(s3).not.toHaveReceivedCommand(DeleteObjectCommand);
    // Counted as what happened: the row was created (no second round: no further read or fetch).
    expect(metrics).toMatchObject({ ItemsCreated: 1, ItemsUnchanged: 0 });
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 2);
    expect(logs.find((line) => String(line['message']).startsWith('item object kept'))).toMatchObject({ itemId: 'mine', objectKey: key });
  });

  it('keeps its object, and logs it, when the row write failed and the row is still the one expected (the write may yet land)', async () => {
    ddb.on(BatchGetItemCommand).resolves({ Responses: { [TABLE]: [] } });
    recordWrites(() => new ProvisionedThroughputExceededException({ message: 'Rate of requests exceeds the allowed throughput', $metadata: {} }));
    const big = largeItem('busy', 1);
    const { result, logs } = await run(build(new ScriptedProvider().on('busy', big)), ['busy']);

    const { key } = objectOf(big, 'busy', '1');
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(s3).not.toHaveReceivedCommand(DeleteObjectCommand);
    expect(logs.find((line) => line['message'] === 'item object left in the bucket')).toMatchObject({
      itemId: 'busy',
      objectKey: key,
      reason: expect.stringMatching(/^the row write failed \(.*\), and the row is still the one the write expected/),
    });
  });

  it('going back inline: writes the row with item, then deletes the object the replaced row pointed to', async () => {
    stored([{ id: 'shrunk', revision: '1' }]);
    const order = recordWrites(() => ({ Attributes: { id: { S: 'shrunk' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } } }));
    const { result, metrics } = await run(build(new ScriptedProvider().on('shrunk', item('shrunk', 2))), ['shrunk']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).toReceiveCommandExactlyOnceWith(PutItemCommand, {
      Item: expect.objectContaining({ item: expect.anything(), revision: { S: '2' } }),
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ReturnValues: 'ALL_OLD',
    });
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input.Item).not.toHaveProperty('itemObject');
    expect(order).toEqual(['PutItem item', `DeleteObject ${OLD_KEY}`]);
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
    expect(s3).not.toHaveReceivedCommand(PutObjectCommand);
    expect(metrics).toMatchObject({ ItemsUpdated: 1 });
  });

  it('a newer large revision: new object, row, then the replaced object deleted', async () => {
    stored([{ id: 'grew', revision: '1' }]);
    const order = recordWrites(() => ({ Attributes: { id: { S: 'grew' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } } }));
    const big = largeItem('grew', 2);
    const { result } = await run(build(new ScriptedProvider().on('grew', big)), ['grew']);

    const { key } = objectOf(big, 'grew', '2');
    expect(result.batchItemFailures).toEqual([]);
    expect(order).toEqual([`PutObject ${key}`, 'PutItem itemObject', `DeleteObject ${OLD_KEY}`]);
    expect(ddb).toReceiveCommandWith(PutItemCommand, { ReturnValues: 'ALL_OLD', ExpressionAttributeValues: { ':expected': { S: '1' } } });
  });

  it('a tombstone keeps its object (the last copy is kept): no S3 request', async () => {
    stored([{ id: 'gone', revision: '3' }]);
    const { metrics } = await run(build(new ScriptedProvider().on('gone', providerError('not-found', 404))), ['gone']);

    expect(metrics['ItemsDeleted']).toBe(1);
    expect(s3.calls()).toHaveLength(0);
  });

  it('retries a record whose upload failed, with nothing written to the table and the key cleared', async () => {
    s3.on(PutObjectCommand).rejects(
      new S3ServiceException({ name: 'SlowDown', $fault: 'server', $metadata: { httpStatusCode: 503 }, message: 'Please reduce your request rate.' }),
    );
    const big = largeItem('slow', 1);
    const { result, logs } = await run(build(new ScriptedProvider().on('slow', big)), ['slow']);

    const { key } = objectOf(big, 'slow', '1');
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: key });
    expect(logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({
      itemId: 'slow',
      reason: 'S3 PutObject failed (SlowDown: Please reduce your request rate.)',
    });
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
  });

  it('an upload that failed, whose clean-up delete failed too, is logged as such, never as an object left in the bucket', async () => {
    s3.on(PutObjectCommand).rejects(
      new S3ServiceException({ name: 'SlowDown', $fault: 'server', $metadata: { httpStatusCode: 503 }, message: 'Please reduce your request rate.' }),
    );
    s3.on(DeleteObjectCommand).rejects(new S3ServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: { httpStatusCode: 403 }, message: 'Access Denied' }));
    const big = largeItem('slow', 1);
    const { result, logs } = await run(build(new ScriptedProvider().on('slow', big)), ['slow']);

    const { key } = objectOf(big, 'slow', '1');
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(logs.find((line) => line['message'] === 'item object left in the bucket')).toBeUndefined();
    expect(logs.find((line) => line['message'] === 'item object upload failed')).toMatchObject({
      level: 'WARN',
      itemId: 'slow',
      objectKey: key,
      reason:
        'its upload failed (TransientError: S3 PutObject failed (SlowDown: Please reduce your request rate.)), and deleting whatever of it may have arrived failed too (TransientError: S3 DeleteObject failed (AccessDenied: Access Denied))',
    });
  });

  it('an S3 endpoint that does not resolve (ENOTFOUND) fails the invocation with the reason: no delete, no object "left", nothing carried out', async () => {
    s3.on(PutObjectCommand).callsFake(() =>
      Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${BUCKET}.localhost`), { code: 'ENOTFOUND', $metadata: { attempts: 3 } })),
    );
    const provider = new ScriptedProvider().on('far', largeItem('far', 1)).on('near', item('near', 1));
    const handler = build(provider, { env: { AWS_ENDPOINT_URL_S3: 'http://localhost:4566' } });
    const { result, error, output } = await captureOutput(() => handler(sqsEvent(['far', 'near', '']), lambdaContext()));

    const reason = `AWS_ENDPOINT_URL_S3: the items bucket cannot be reached at http://localhost:4566: S3 PutObject failed (Error: getaddrinfo ENOTFOUND ${BUCKET}.localhost); check the endpoint`;
    expect(result).toBeUndefined();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(reason);
    expect(s3).toHaveReceivedCommandTimes(PutObjectCommand, 1);
    expect(s3).not.toHaveReceivedCommand(DeleteObjectCommand);
    expect(ddb.commandCalls(PutItemCommand).filter((call) => 'itemObject' in call.args[0].input.Item!)).toEqual([]);
    // Every record comes back with the failed invocation: not even the bad body is dead-lettered.
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    const logs = logLines(output);
    expect(logs.find((line) => line['message'] === 'item object left in the bucket')).toBeUndefined();
    expect(logs.find((line) => line['level'] === 'ERROR')).toMatchObject({
      message: 'batch failed: the configuration is wrong; the invocation fails and every record will be retried',
      error: { name: 'ConfigError', message: reason },
    });
    expect(metricsIn(output)).toMatchObject({ RecordsRetried: 3 });
  });

  it('a replaced object that cannot be deleted is left behind, logged with its key; the record is done', async () => {
    stored([{ id: 'stuck', revision: '1' }]);
    ddb.on(PutItemCommand).resolves({ Attributes: { id: { S: 'stuck' }, itemObject: { M: { key: { S: OLD_KEY } } } } });
    s3.on(DeleteObjectCommand).rejects(new S3ServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: { httpStatusCode: 403 }, message: 'Access Denied' }));
    const { result, metrics, logs } = await run(build(new ScriptedProvider().on('stuck', item('stuck', 2))), ['stuck']);

    expect(result.batchItemFailures).toEqual([]);
    expect(metrics).toMatchObject({ ItemsUpdated: 1 });
    expect(logs.find((line) => line['message'] === 'item object left in the bucket')).toMatchObject({
      itemId: 'stuck',
      objectKey: OLD_KEY,
      reason: 'the row pointing to it was replaced, but deleting it failed (TransientError: S3 DeleteObject failed (AccessDenied: Access Denied))',
    });
  });

  describe('a write DynamoDB applied whose answer was lost (the SDK sent it again and met its own write)', () => {
    /** The row as the lost write left it: what the strongly consistent read after the failed write finds. */
    const rowAsWritten = (id: string, revision: string, extra: Record<string, unknown> = {}) => ({
      Responses: { [TABLE]: [{ id: { S: id }, revision: { S: revision }, syncedAt: { S: NOW.toISOString() }, ...extra }] },
    });
    const networkError = () => Object.assign(new Error('socket hang up'), { name: 'TimeoutError', code: 'ECONNRESET', $metadata: { attempts: 3 } });

    it('going back inline: the replaced row’s object (known from the row read before) is deleted, and the record counts as updated', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'lost' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves(rowAsWritten('lost', '2'));
      // The SDK's second send meets the condition its own first send broke.
      const order = recordWrites(() => conditionFailed());
      const { result, metrics, logs } = await run(build(new ScriptedProvider().on('lost', item('lost', 2))), ['lost']);

      expect(result.batchItemFailures).toEqual([]);
      expect(order).toEqual(['PutItem item', `DeleteObject ${OLD_KEY}`]);
      expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
      expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
        RequestItems: { [TABLE]: expect.objectContaining({ Keys: [{ id: { S: 'lost' } }], ConsistentRead: true }) },
      });
      // No second round: the row is this write's own, done.
      expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 2);
      expect(metrics).toMatchObject({ ItemsFetched: 1, ItemsUpdated: 1, ItemsUnchanged: 0, RecordsRetried: 0 });
      expect(logs.find((line) => line['message'] === 'row written after all (the answer to the write was lost)')).toMatchObject({ itemId: 'lost', revision: '2' });
      expect(logs.find((line) => line['message'] === 'item object deleted')).toMatchObject({
        itemId: 'lost',
        objectKey: OLD_KEY,
        reason: 'the row pointing to it was replaced (the answer to that write was lost)',
      });
      expect(logs.find((line) => line['message'] === 'record done')).toMatchObject({ itemId: 'lost', result: 'updated' });
    });

    it('also when the failure outlasted the SDK’s retries: the row tells, the record is done, not retried', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'lost' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves(rowAsWritten('lost', '2'));
      recordWrites(() => networkError());
      const { result, metrics } = await run(build(new ScriptedProvider().on('lost', item('lost', 2))), ['lost']);

      expect(result.batchItemFailures).toEqual([]);
      expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
      expect(metrics).toMatchObject({ ItemsUpdated: 1, RecordsRetried: 0 });
    });

    it('a newer large revision: its own object is kept, the replaced one deleted, the record counts as updated', async () => {
      const big = largeItem('grew', 2);
      const { key } = objectOf(big, 'grew', '2');
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'grew' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves(rowAsWritten('grew', '2', { itemObject: { M: { key: { S: key } } } }));
      const order = recordWrites(() => conditionFailed());
      const { result, metrics, logs } = await run(build(new ScriptedProvider().on('grew', big)), ['grew']);

      expect(result.batchItemFailures).toEqual([]);
      expect(order).toEqual([`PutObject ${key}`, 'PutItem itemObject', `DeleteObject ${OLD_KEY}`]);
      expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
      expect(metrics).toMatchObject({ ItemsUpdated: 1, ItemsUnchanged: 0 });
      expect(logs.find((line) => String(line['message']).startsWith('item object kept'))).toMatchObject({ itemId: 'grew', objectKey: key });
    });

    it('a tombstone: counted as deleted; its object stays (the last copy is kept)', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'gone' }, revision: { S: '9' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves(rowAsWritten('gone', '9', { deleted: { BOOL: true }, itemObject: { M: { key: { S: OLD_KEY } } } }));
      ddb.on(UpdateItemCommand).rejects(conditionFailed());
      const { result, metrics } = await run(build(new ScriptedProvider().on('gone', providerError('not-found', 404))), ['gone']);

      expect(result.batchItemFailures).toEqual([]);
      expect(ddb).toHaveReceivedCommandTimes(UpdateItemCommand, 1);
      expect(metrics).toMatchObject({ ItemsDeleted: 1, ItemsUnchanged: 0 });
      expect(s3.calls()).toHaveLength(0);
    });

    it('a row another invocation wrote (same revision, its own syncedAt) is not taken for this write’s: a lost race, re-decided', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'twin' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves({ Responses: { [TABLE]: [{ id: { S: 'twin' }, revision: { S: '2' }, syncedAt: { S: '2026-11-21T09:59:59.999Z' } }] } });
      recordWrites(() => conditionFailed());
      const { result, metrics } = await run(build(new ScriptedProvider().on('twin', item('twin', 2))), ['twin']);

      expect(result.batchItemFailures).toEqual([]);
      // The other writer replaced the row (and deletes the object it replaced itself): no row points
      // to that object any more, so this writer's delete of it is a harmless second one.
      expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
      expect(metrics).toMatchObject({ ItemsUnchanged: 1, ItemsUpdated: 0 });
    });

    it('this write applied, its answer lost, and its row replaced by another writer before the read-back: the object of the row it replaced is deleted', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'raced' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        // Another writer replaced this write's inline row (it read that row: it knows no object to delete).
        .resolves({ Responses: { [TABLE]: [{ id: { S: 'raced' }, revision: { S: '3' }, syncedAt: { S: '2026-11-21T10:00:00.500Z' } }] } });
      // The SDK's second send meets the condition: the row is no longer the one it expected.
      recordWrites(() => conditionFailed());
      const provider = new ScriptedProvider().on('raced', item('raced', 2), item('raced', 3));
      const { result, metrics, logs } = await run(build(provider), ['raced']);

      // A lost race as far as this write can tell: read again, fetch again, revision 3 is stored.
      expect(result.batchItemFailures).toEqual([]);
      expect(metrics).toMatchObject({ ItemsUnchanged: 1, ItemsUpdated: 0 });
      expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
      expect(logs.find((line) => line['message'] === 'item object deleted')).toMatchObject({
        itemId: 'raced',
        objectKey: OLD_KEY,
        reason: 'the row pointing to it was replaced',
      });
    });

    it('the row cannot be read back: the object of the row the write expected to replace is logged as left, with its key', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ id: { S: 'dark' }, revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .rejects(Object.assign(new Error('Service unavailable'), { name: 'ServiceUnavailable', $metadata: { httpStatusCode: 503 } }));
      recordWrites(() => networkError());
      const { result, logs } = await run(build(new ScriptedProvider().on('dark', item('dark', 2))), ['dark']);

      expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
      expect(s3).not.toHaveReceivedCommand(DeleteObjectCommand);
      expect(logs.find((line) => line['message'] === 'item object left in the bucket')).toMatchObject({
        itemId: 'dark',
        objectKey: OLD_KEY,
        reason:
          'a write that may have replaced the row pointing to it did not answer, and reading the row back failed (TransientError: DynamoDB BatchGetItem failed (ServiceUnavailable: Service unavailable)); if the row no longer points to it, nothing will',
      });
    });
  });
});

describe('dead letters', () => {
  const bad = [
    '',
    '{"id": ""}',
    '{"id": 5}',
    '{"name": "x"}',
    '{not json',
    '{"id": null}',
    'tab\there',
    '{"id": "nul\\u0000"}',
    '{"id": "\\ud800"}',
    'x'.repeat(1025),
  ];

  it('sends every bad body to the DLQ with the original body, error and sourceMessageId, and nothing else happens', async () => {
    const provider = new ScriptedProvider().on('ok', item('ok', 1));
    const bodies = [...bad, 'ok'];
    const { result, metrics } = await run(build(provider), bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['ok']);
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: { [TABLE]: expect.objectContaining({ Keys: [{ id: { S: 'ok' } }] }) },
    });
    const sent = sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => call.args[0].input.Entries ?? []);
    expect(sent.map((entry) => entry.MessageBody)).toEqual(bad);
    for (const [index, entry] of sent.entries()) {
      expect(entry.MessageAttributes?.['sourceMessageId']).toEqual({ DataType: 'String', StringValue: `m${index + 1}` });
      expect(entry.MessageAttributes?.['error']?.DataType).toBe('String');
      expect(entry.MessageAttributes?.['error']?.StringValue).toMatch(/\w+ \w+/);
    }
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 1);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, { QueueUrl: DLQ_URL });
    const reasons = sent.map((entry) => entry.MessageAttributes?.['error']?.StringValue);
    expect(reasons).toEqual([
      'the item id is empty',
      'the item id is empty',
      'the message body\'s "id" is a number, not a string',
      'the message body has no "id"; expected {"id": "<item id>"}',
      'the message body starts with "{" but is not valid JSON; expected {"id": "<item id>"}',
      'the message body\'s "id" is null, not a string',
      'the item id contains a control character (U+0009) at position 3',
      'the item id contains a control character (U+0000) at position 3',
      'the item id is not well-formed Unicode (a lone surrogate)',
      'the item id is 1025 characters long; the limit is 1024',
    ]);
    expect(metrics).toMatchObject({ RecordsDeadLettered: bad.length, ItemsCreated: 1, RecordsRetried: 0 });
  });

  it.each([
    ['a 400', providerError('permanent', 400), /the provider cannot serve this item as asked \(.*HTTP 400/],
    ['a 403', providerError('permanent', 403), /HTTP 403/],
    ['a 200 that is not JSON', providerError('malformed', 200), /the provider's answer is not an item/],
    ['a 200 array', [1, 2], /200 answer is an array, not an item object/],
    ['another id', item('someone-else', 1), /another item \(id "someone-else"\)/],
    ['no revision', { id: 'x', type: 'file' }, /no value at the revision field "revision"/],
    ['an empty revision', item('x', ''), /an empty string at the revision field/],
    ['a boolean revision', item('x', true), /a boolean at the revision field/],
    ['an unknown type', { id: 'x', type: 'symlink', revision: 1 }, /type "symlink"; expected "file" or "folder"/],
  ])('dead-letters %s with a reason that says why', async (_name, answer, reason) => {
    const provider = new ScriptedProvider().on('x', answer);
    const { result, metrics } = await run(build(provider), ['{"id":"x"}']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: DLQ_URL,
      Entries: [
        {
          Id: 'm0',
          MessageBody: '{"id":"x"}',
          MessageAttributes: {
            error: { DataType: 'String', StringValue: expect.stringMatching(reason) },
            sourceMessageId: { DataType: 'String', StringValue: 'm1' },
          },
        },
      ],
    });
    expect(metrics['RecordsDeadLettered']).toBe(1);
  });

  it('dead-letters an item DynamoDB refuses as too large even as a row pointing to its object (ValidationException on both writes)', async () => {
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({
        name: 'ValidationException',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: 'Item size has exceeded the maximum allowed size',
      }),
    );
    const provider = new ScriptedProvider().on('big', item('big', 1));
    await run(build(provider), ['big']);

    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [
        expect.objectContaining({
          MessageAttributes: expect.objectContaining({
            error: { DataType: 'String', StringValue: expect.stringMatching(/^item too large to store \(\d+ bytes; DynamoDB's limit is 400 KB\)$/) },
          }),
        }),
      ],
    });
    // The inline row, then the row pointing to the object; the object, pointed to by nothing, is gone.
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 2);
    expect(s3).toHaveReceivedCommandTimes(PutObjectCommand, 1);
    const key = s3.commandCalls(PutObjectCommand)[0]!.args[0].input.Key;
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: key });
  });

  it('retries (never drops) a record the DLQ did not accept', async () => {
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [{ Id: 'm1', MessageId: 'x', MD5OfMessageBody: 'x' }],
      Failed: [{ Id: 'm0', SenderFault: false, Code: 'InternalError', Message: 'try again' }],
    });
    const { result, metrics } = await run(build(new ScriptedProvider()), ['', '{"id": 1}']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(metrics).toMatchObject({ RecordsDeadLettered: 1, RecordsRetried: 1 });
  });

  it('retries every dead record when SendMessageBatch fails as a whole', async () => {
    sqs.on(SendMessageBatchCommand).rejects(new Error('socket hang up'));
    const { result } = await run(build(new ScriptedProvider()), ['', '{"id": 1}']);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
  });

  it('sends dead letters in batches of at most 10', async () => {
    const bodies = Array.from({ length: 23 }, () => '');
    await run(build(new ScriptedProvider()), bodies);

    const sizes = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries!.length);
    expect(sizes).toEqual([10, 10, 3]);
  });
});

describe('retry later', () => {
  it('retries transient failures (5xx, 408, network) with jittered backoff and succeeds', async () => {
    const provider = new ScriptedProvider()
      .on('a', providerError('transient', 503), providerError('transient', 408), item('a', 1))
      .on('b', providerError('transient'), item('b', 1));
    const { result, metrics } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.callsFor('a')).toHaveLength(3);
    expect(provider.callsFor('b')).toHaveLength(2);
    // base 200 ms, doubling, half fixed and half random (random() = 0.5 here).
    expect(sleeps.sort((x, y) => x - y)).toEqual([150, 150, 300]);
    expect(metrics['ItemsCreated']).toBe(2);
  });

  it('hands a record back after SYNC_FETCH_ATTEMPTS transient failures, without dead-lettering it', async () => {
    const provider = new ScriptedProvider().on('down', providerError('transient', 500)).on('up', item('up', 1));
    const { result, metrics } = await run(build(provider, { env: { SYNC_FETCH_ATTEMPTS: '4' } }), ['down', 'up']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.callsFor('down')).toHaveLength(4);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    expect(metrics).toMatchObject({ RecordsRetried: 1, ItemsCreated: 1 });
  });

  it('counts a record failing again and again once toward the breaker: its retries are not more evidence of an outage', async () => {
    const paceStore = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('poison', providerError('transient', 503));
    const { result, metrics } = await run(build(provider, { paceStore, env: { SYNC_FETCH_ATTEMPTS: '6' } }), ['poison']);

    // Six attempts, more than the failures that open the breaker (4), and it stays closed.
    expect(provider.callsFor('poison')).toHaveLength(6);
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(paceStore.state).toMatchObject({ failures: 1, breaker: { open: false } });
    expect(metrics).toMatchObject({ RecordsRetried: 1, RecordsPostponed: 0, BreakerOpen: 0 });
  });

  it('opens the breaker for every container when different records fail (first attempts); the records wait, postponed', async () => {
    const paceStore = new MemoryPaceStore();
    const provider = new ScriptedProvider()
      .on('a', providerError('transient', 503))
      .on('b', providerError('transient', 503))
      .on('c', providerError('transient', 503))
      .on('d', providerError('transient', 503));
    // The breaker's threshold at 4 (the default is 8), so that four records show it.
    const { result, metrics } = await run(build(provider, { paceStore, paceSettings: { outageFailures: 4 } }), ['a', 'b', 'c', 'd']);

    // a, b and c failed and backed off (150 ms each on this clock) and went again before d's failure,
    // the fourth counted, opened the breaker at +450 ms. Their second failures are not counted; then
    // every record sees the open breaker and waits.
    expect(provider.calls.map((call) => call.id)).toEqual(['a', 'b', 'c', 'd', 'a', 'b', 'c']);
    expect(sleeps).toEqual([150, 150, 150]);
    expect(paceStore.state).toMatchObject({
      failures: 4,
      breaker: { open: true, reason: 'provider', since: NOW.getTime() + 450, nextProbeAt: NOW.getTime() + 20_450 },
    });
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: ['a', 'b', 'c', 'd'].map((body, n) => ({
        Id: `m${n}`,
        MessageBody: body,
        DelaySeconds: 5,
        MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
      })),
    });
    expect(metrics).toMatchObject({ RecordsPostponed: 4, RecordsRetried: 0, BreakerOpen: 1 });
  });

  it('on a 401 reads the secret afresh once and retries with the new token', async () => {
    tokenSecret(TOKEN_1, TOKEN_2);
    const provider = new ScriptedProvider()
      .on('a', (call: { token: string }) => (call.token === TOKEN_2 ? item('a', 1) : providerError('unauthorized', 401)))
      .on('b', (call: { token: string }) => (call.token === TOKEN_2 ? item('b', 1) : providerError('unauthorized', 401)));
    const { result, output } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    // One read for the batch, one fresh read after the 401s (shared by both records).
    expect(secrets).toHaveReceivedCommandTimes(GetSecretValueCommand, 2);
    expect(provider.calls.map((call) => call.token)).toEqual([TOKEN_1, TOKEN_1, TOKEN_2, TOKEN_2]);
    expect(output).not.toContain(TOKEN_1);
    expect(output).not.toContain(TOKEN_2);
  });

  it('postpones a record (breaker open: token) when the fresh token is refused too, or the secret still holds the refused one', async () => {
    tokenSecret(TOKEN_1, TOKEN_2);
    const provider = new ScriptedProvider().on('a', providerError('unauthorized', 401));
    const first = await run(build(provider), ['a']);

    // Waiting is not failing: sent again with a delay (the outage schedule's first step), reported done.
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.token)).toEqual([TOKEN_1, TOKEN_2]);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: [
        {
          Id: 'm0',
          MessageBody: 'a',
          DelaySeconds: 5,
          MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
        },
      ],
    });
    expect(first.metrics).toMatchObject({ RecordsPostponed: 1, RecordsRetried: 0, BreakerOpen: 1 });

    secrets.reset();
    sqs.resetHistory();
    tokenSecret(TOKEN_1);
    const same = new ScriptedProvider().on('a', providerError('unauthorized', 401));
    const second = await run(build(same), ['a']);
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(same.calls).toHaveLength(1); // the secret holds the refused token: no pointless second call
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 1);
    expect(sqs).not.toReceiveCommandWith(SendMessageBatchCommand, { QueueUrl: DLQ_URL });
  });

  it('while the breaker is open for the token, a record waits without a provider request until the secret changes', async () => {
    tokenSecret(TOKEN_1);
    const provider = new ScriptedProvider().on('a', (call: { token: string }) =>
      call.token === TOKEN_2 ? item('a', 1) : providerError('unauthorized', 401),
    );
    const handler = build(provider, { env: { ACCESS_TOKEN_CACHE_SECONDS: '0' } });
    await run(handler, ['a']); // opens the breaker (token)
    expect(provider.calls).toHaveLength(1);

    const waiting = await run(handler, ['a'], 60_000, { postponements: 1 });
    expect(provider.calls).toHaveLength(1); // no probe is due yet: nobody calls the provider
    expect(waiting.result).toEqual({ batchItemFailures: [] });
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [expect.objectContaining({ DelaySeconds: 10, MessageAttributes: { postponements: { DataType: 'Number', StringValue: '2' } } })],
    });

    clockMs += 20_000; // the next probe is due (probeIntervalMs); the secret still holds the refused token: no request
    await run(handler, ['a']);
    expect(provider.calls).toHaveLength(1);

    secrets.reset();
    tokenSecret(TOKEN_2); // the refresher wrote a new token
    clockMs += 20_000; // the probe after that one is due
    const recovered = await run(handler, ['a']);
    expect(provider.calls.map((call) => call.token)).toEqual([TOKEN_1, TOKEN_2]);
    expect(recovered.metrics).toMatchObject({ ItemsCreated: 1, BreakerOpen: 0 });
  });

  it('caches the token per container for ACCESS_TOKEN_CACHE_SECONDS, not per record or per invocation', async () => {
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const handler = build(provider, { env: { ACCESS_TOKEN_CACHE_SECONDS: '60' } });
    await run(handler, ['a', 'b']);
    clockMs += 30_000;
    await run(handler, ['a']);
    expect(secrets).toHaveReceivedCommandTimes(GetSecretValueCommand, 1);

    clockMs += 31_000;
    await run(handler, ['b']);
    expect(secrets).toHaveReceivedCommandTimes(GetSecretValueCommand, 2);
  });

  it('retries every record when the token secret cannot be read', async () => {
    secrets.reset();
    secrets.on(GetSecretValueCommand).rejects(Object.assign(new Error('denied'), { name: 'AccessDeniedException' }));
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, logs } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
    expect(provider.calls).toHaveLength(0);
    expect(logs.some((line) => String(line['reason']).includes('reading the access token failed'))).toBe(true);
  });

  it('on a 429 every request waits for the Retry-After; a record whose wait outlasts the invocation is sent again, delayed (queue URL looked up once)', async () => {
    const provider = new ScriptedProvider()
      .on('slow', providerError('rate-limited', 429, { retryAfterSeconds: 120 }))
      .on('ok', item('ok', 1));
    const handler = build(provider);
    const { result, metrics } = await run(handler, ['slow', 'ok']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.callsFor('slow')).toHaveLength(1); // the Retry-After outlasts the invocation
    expect(sqs).toReceiveCommandExactlyOnceWith(GetQueueUrlCommand, {
      QueueName: 'content-sync-queue',
      QueueOwnerAWSAccountId: '123456789012',
    });
    expect(sqs).toReceiveCommandExactlyOnceWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: [
        {
          Id: 'm0',
          MessageBody: 'slow',
          DelaySeconds: 120,
          MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } },
        },
      ],
    });
    expect(sqs).not.toHaveReceivedCommand(ChangeMessageVisibilityBatchCommand);
    expect(metrics).toMatchObject({ RecordsPostponed: 1, RecordsRetried: 0, ProviderRateLimited: 1, ItemsCreated: 1 });

    await run(handler, ['slow']); // still inside the Retry-After window: no request at all
    expect(provider.callsFor('slow')).toHaveLength(1);
    expect(sqs).toHaveReceivedCommandTimes(GetQueueUrlCommand, 1);
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 2);
  });

  it('on a short Retry-After the request is made again within the invocation, after the window', async () => {
    let answered = 0;
    const provider = new ScriptedProvider().on('a', () => (answered++ === 0 ? providerError('rate-limited', 429, { retryAfterSeconds: 2 }) : item('a', 1)));
    const { result, metrics } = await run(build(provider), ['a']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toHaveLength(2);
    expect(sleeps.reduce((sum, ms) => sum + ms, 0)).toBeGreaterThanOrEqual(2_000);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ProviderRateLimited: 1, RecordsPostponed: 0 });
  });

  it.each([
    [0.5, 60],
    [59.5, 60],
    [61, 61],
    [100_000, 900],
  ])('a record waiting out a Retry-After of %s s is sent again with DelaySeconds %s (at least a minute, at most 15 min)', async (retryAfterSeconds, delay) => {
    const provider = new ScriptedProvider().on('limited', providerError('rate-limited', 429, { retryAfterSeconds }));
    const { result } = await run(build(provider), ['limited'], 1_500);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [expect.objectContaining({ Id: 'm0', DelaySeconds: delay })],
    });
  });

  it('takes the shortest rate-limit delay from SYNC_RATE_LIMIT_MIN_DELAY_SECONDS', async () => {
    const provider = new ScriptedProvider().on('limited', providerError('rate-limited', 429, { retryAfterSeconds: 2 }));
    await run(build(provider, { env: { SYNC_RATE_LIMIT_MIN_DELAY_SECONDS: '5' } }), ['limited'], 1_500);

    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [expect.objectContaining({ Id: 'm0', DelaySeconds: 5 })],
    });
  });

  it('retries a waiting record (visibility delayed) when it cannot be sent again', async () => {
    sqs.on(SendMessageBatchCommand, { QueueUrl: QUEUE_URL }).rejects(Object.assign(new Error('denied'), { name: 'AccessDenied' }));
    const provider = new ScriptedProvider().on('slow', providerError('rate-limited', 429, { retryAfterSeconds: 120 }));
    const { result, metrics } = await run(build(provider), ['slow']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(sqs).toReceiveCommandWith(ChangeMessageVisibilityBatchCommand, {
      Entries: [{ Id: 'm0', ReceiptHandle: 'rh-m1', VisibilityTimeout: 120 }],
    });
    expect(metrics).toMatchObject({ RecordsRetried: 1, RecordsPostponed: 0 });
  });

  it('still retries a waiting record when neither sending it again nor its visibility works', async () => {
    sqs.on(GetQueueUrlCommand).rejects(Object.assign(new Error('denied'), { name: 'AccessDenied' }));
    const provider = new ScriptedProvider().on('slow', providerError('rate-limited', 429, { retryAfterSeconds: 5 }));
    const { result, logs } = await run(build(provider), ['slow'], 3_000);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(logs.some((line) => line['message'] === 'could not delay the next delivery of a rate-limited record')).toBe(true);
  });

  it('keeps at most SYNC_FETCH_CONCURRENCY provider requests in flight', async () => {
    const provider = new ScriptedProvider();
    const ids = Array.from({ length: 9 }, (_, n) => `c${n}`);
    for (const id of ids) provider.on(id, item(id, 1));
    const { result } = await run(build(provider, { env: { SYNC_FETCH_CONCURRENCY: '3' } }), ids);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.maxInFlight).toBe(3);
  });
});

describe('time budget', () => {
  it('starts no provider work when the invocation has no time left, and hands every record back', async () => {
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result } = await run(build(provider, { safetyMarginMs: 1_000 }), ['a', 'b', ''], 500);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
    expect(provider.calls).toHaveLength(0);
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 1); // the bad body is still dead-lettered
  });

  it('does not back off past the deadline: a transient failure is handed back instead', async () => {
    const provider = new ScriptedProvider().on('a', providerError('transient', 502));
    // 100 ms left after the margin; the first backoff would be 150 ms.
    const { result } = await run(build(provider, { safetyMarginMs: 900 }), ['a'], 1_000);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(provider.calls).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('aborts a provider request still in flight at the deadline and hands the record back', async () => {
    const provider = new ScriptedProvider().on(
      'hang',
      (call: { signal: AbortSignal | undefined }) =>
        new Promise((_, reject) => {
          call.signal?.addEventListener('abort', () => reject(providerError('transient')));
        }),
    );
    const { result } = await run(build(provider, { safetyMarginMs: 0, clock: { now: () => new Date() } }), ['hang'], 50);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.calls[0]?.signal?.aborted).toBe(true);
  });
});

describe('observability', () => {
  it('publishes the nine counters and the pace once per batch under ContentSync, and logs the item id of every record', async () => {
    stored([{ id: 'same', revision: '1' }, { id: 'gone', revision: '1' }, { id: 'old', revision: '1' }]);
    const provider = new ScriptedProvider()
      .on('new', item('new', 1))
      .on('same', item('same', 1))
      .on('old', item('old', 2))
      .on('gone', providerError('not-found', 404))
      .on('down', providerError('transient', 503));
    const { output, metrics, logs } = await run(build(provider, { env: { SYNC_FETCH_ATTEMPTS: '1' } }), [
      'new',
      'same',
      'old',
      'gone',
      'down',
      '',
    ]);

    expect(metricNamespaces(output)).toEqual(['ContentSync']);
    expect(metrics).toEqual({
      ItemsFetched: 3,
      ItemsCreated: 1,
      ItemsUpdated: 1,
      ItemsUnchanged: 1,
      ItemsDeleted: 1,
      RecordsRetried: 1,
      RecordsDeadLettered: 1,
      RecordsPostponed: 0,
      ProviderRateLimited: 0,
      ProviderPace: 1000,
      BreakerOpen: 0,
      BreakerOpenSeconds: 0,
      PaceFallback: 0,
    });
    const recordLogs = logs.filter((line) => String(line['message']).startsWith('record '));
    expect(recordLogs.map((line) => [line['messageId'], line['itemId']])).toEqual([
      ['m1', 'new'],
      ['m2', 'same'],
      ['m3', 'old'],
      ['m4', 'gone'],
      ['m5', 'down'],
      ['m6', undefined],
    ]);
    expect(recordLogs.every((line) => line['service'] === 'item-sync' || line['service'] === 'content-sync-test')).toBe(true);
    expect(output).not.toContain(TOKEN_1);
  });

  it('answers with a partial failure for the whole batch if something unexpected breaks, never throwing', async () => {
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const handler = build(provider, {
      sleep: async () => undefined,
      clock: {
        now: () => {
          throw new Error('clock broke');
        },
      },
    });
    const { result } = await run(handler, ['a', 'b']);
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }] });
  });
});

/** The pace settings the handler runs with here (PROVIDER_REQUESTS_PER_SECOND=1000). */
const PACE = { ...DEFAULT_PACE_SETTINGS, maxRate: 1000 };

/** Runs a batch whose records all carry the given message attributes (Number), e.g. `reconcilePass`. */
async function runWithAttributes(handler: ReturnType<typeof build>, bodies: string[], attributes: Record<string, string>, remainingMs = 60_000) {
  const event = sqsEvent(bodies);
  for (const record of event.Records) {
    record.messageAttributes = Object.fromEntries(
      Object.entries(attributes).map(([name, value]) => [name, { dataType: 'Number', stringValue: value, stringListValues: [], binaryListValues: [] }]),
    );
  }
  const { result, error, output } = await captureOutput(() => handler(event, lambdaContext(remainingMs)));
  if (error) throw error;
  return { result: result!, metrics: metricsIn(output) };
}

/** A pace row at NOW with the given changes (the settings above; both buckets full unless changed). */
async function paceRow(changes: Partial<PaceState> = {}): Promise<MemoryPaceStore> {
  const paceStore = new MemoryPaceStore();
  await paceStore.write({ ...initialPaceState(PACE, NOW.getTime()), ...changes }, 0);
  return paceStore;
}

describe('the sweep (records the reconciler sent, message attribute reconcilePass)', () => {
  it('asks the pace as the sweep: the lease is drawn from the sweep’s bucket as well as the shared one', async () => {
    const sweepStore = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const swept = await runWithAttributes(build(provider, { paceStore: sweepStore }), ['a'], { reconcilePass: '3' });
    expect(swept.result).toEqual({ batchItemFailures: [] });
    expect(swept.metrics).toMatchObject({ ItemsCreated: 1 });
    // A full bucket at 1000/s holds 200; a lease is 10 (SYNC_FETCH_CONCURRENCY).
    expect(sweepStore.state).toMatchObject({ tokens: 190, sweepTokens: 190 });

    const userStore = new MemoryPaceStore();
    await run(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: userStore }), ['a']);
    expect(userStore.state).toMatchObject({ tokens: 190, sweepTokens: 200 });

    // Pass 0 is a pass.
    const firstPass = new MemoryPaceStore();
    await runWithAttributes(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: firstPass }), ['a'], { reconcilePass: '0' });
    expect(firstPass.state).toMatchObject({ tokens: 190, sweepTokens: 190 });
  });

  it.each([
    // 100 ms at 1000/s refill the users' bucket to full (200) and the sweep's by the rest of the rate; a lease is 10.
    ['unset (20)', {}, 70],
    ['0', { PROVIDER_USERS_RESERVED_PERCENT: '0' }, 90],
    ['50', { PROVIDER_USERS_RESERVED_PERCENT: '50' }, 40],
    ['75', { PROVIDER_USERS_RESERVED_PERCENT: '75' }, 15],
  ])('PROVIDER_USERS_RESERVED_PERCENT %s: the sweep’s bucket refills at the rest of the rate, users’ ids draw as before', async (_name, env, sweepTokens) => {
    const sweepStore = await paceRow({ sweepTokens: 0, at: NOW.getTime() - 100 });
    await runWithAttributes(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: sweepStore, env }), ['a'], { reconcilePass: '1' });
    expect(sweepStore.state!.tokens).toBe(190);
    expect(sweepStore.state!.sweepTokens).toBeCloseTo(sweepTokens, 9);

    // Users' ids take from the shared bucket only, whatever the sweep's share.
    const userStore = await paceRow({ sweepTokens: 0 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    await run(build(provider, { paceStore: userStore, env }), ['a']);
    expect(provider.calls).toHaveLength(1);
    expect(userStore.state).toMatchObject({ tokens: 190, sweepTokens: 0 });
  });

  it('waits while users are in debt (never borrows), where users’ ids go into debt at once', async () => {
    const sweepStore = await paceRow({ tokens: -50 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    // The jitter that spreads sweep containers (0–20 ms): half of it here.
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.5);
    try {
      await runWithAttributes(build(provider, { paceStore: sweepStore }), ['a'], { reconcilePass: '3' });
    } finally {
      random.mockRestore();
    }
    // A lease (10) needs 60 tokens at 1000/s: 60 ms, and 10 ms of jitter; that wait is not written.
    expect(sleeps).toEqual([70]);
    expect(provider.calls).toHaveLength(1);
    expect(sweepStore.writes).toBe(2);
    expect(sweepStore.state).toMatchObject({ tokens: 10, sweepTokens: 190, at: NOW.getTime() + 70 });

    sleeps = [];
    clockMs = NOW.getTime();
    const userStore = await paceRow({ tokens: -50 });
    await run(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: userStore }), ['a']);
    // A lease of 10 into debt (-60): its first token is due at +51 ms.
    expect(sleeps).toEqual([51]);
    expect(userStore.state).toMatchObject({ tokens: -60, sweepTokens: 200 });
  });

  it('sends a sweep record that gets no slot in this invocation again with postponements and reconcilePass', async () => {
    // Users at the largest debt (500 tokens at 1000/s): the sweep's next try is after the invocation's last useful slot.
    const paceStore = await paceRow({ tokens: -500 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, metrics } = await runWithAttributes(build(provider, { paceStore }), ['a'], { postponements: '1', reconcilePass: '4' }, 2_000);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toHaveLength(0);
    expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          {
            Id: 'm0',
            MessageBody: 'a',
            DelaySeconds: 1,
            MessageAttributes: {
              postponements: { DataType: 'Number', StringValue: '2' },
              reconcilePass: { DataType: 'Number', StringValue: '4' },
            },
          },
        ],
      },
    ]);
    expect(metrics).toMatchObject({ RecordsPostponed: 1, RecordsRetried: 0, ItemsCreated: 0 });
  });

  it.each([['abc'], ['-1'], ['1.5'], ['9007199254740993'], ['Infinity'], ['1e400']])(
    'ignores a malformed reconcilePass (%s): the batch is users’ ids, and the attribute is not sent on',
    async (value) => {
      const paceStore = new MemoryPaceStore();
      const provider = new ScriptedProvider().on('a', item('a', 1));
      await runWithAttributes(build(provider, { paceStore }), ['a'], { reconcilePass: value });
      expect(provider.calls).toHaveLength(1);
      expect(paceStore.state).toMatchObject({ tokens: 190, sweepTokens: 200 });

      // Postponed (the breaker opened meanwhile): sent again without reconcilePass.
      const opened = await paceRow();
      await opened.write(openBreaker(opened.state!, NOW.getTime(), 'provider', PACE), 1);
      sqs.resetHistory();
      await runWithAttributes(build(new ScriptedProvider(), { paceStore: opened }), ['b'], { reconcilePass: value });
      expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries)).toEqual([
        [{ Id: 'm0', MessageBody: 'b', DelaySeconds: 5, MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } }],
      ]);
    },
  );
});

describe('an open breaker, no probe due in this container', () => {
  it('postpones a batch without reading the items table or calling the provider; 2 s after its last read it reads the row again', async () => {
    const paceStore = await paceRow();
    await paceStore.write(openBreaker(paceStore.state!, NOW.getTime(), 'provider', PACE), 1);
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const handler = build(provider, { paceStore });
    const batchGets = () => ddb.commandCalls(BatchGetItemCommand).length;
    const sent = () => sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);

    // The first batch learns of the breaker from the row (after its read of the items table).
    const first = await run(handler, ['a']);
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(batchGets()).toBe(1);
    expect(provider.calls).toHaveLength(0);
    expect(first.metrics).toMatchObject({ RecordsPostponed: 1, BreakerOpen: 1 });

    // A second later: no read, no request; every record waits by the outage schedule (its third postponement: 20 s).
    clockMs = NOW.getTime() + 1_000;
    sqs.resetHistory();
    const reads = paceStore.reads;
    const second = await runWithAttributes(handler, ['a', 'b'], { postponements: '2', reconcilePass: '7' });
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(batchGets()).toBe(1);
    expect(provider.calls).toHaveLength(0);
    expect(paceStore.reads).toBe(reads);
    const waiting = { postponements: { DataType: 'Number', StringValue: '3' }, reconcilePass: { DataType: 'Number', StringValue: '7' } };
    expect(sent()).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          { Id: 'm0', MessageBody: 'a', DelaySeconds: 20, MessageAttributes: waiting },
          { Id: 'm1', MessageBody: 'b', DelaySeconds: 20, MessageAttributes: waiting },
        ],
      },
    ]);
    expect(second.metrics).toMatchObject({ RecordsPostponed: 2, RecordsRetried: 0, BreakerOpen: 1, BreakerOpenSeconds: 1 });

    // Another container's probe succeeds: the row is closed.
    const row = (await paceStore.read())!;
    await paceStore.write(closeBreaker(row.state as PaceState, NOW.getTime() + 1_500), row.version);

    // Until 2 s after it read the row, this container still trusts what it knows.
    clockMs = NOW.getTime() + 1_999;
    sqs.resetHistory();
    const third = await run(handler, ['a']);
    expect(batchGets()).toBe(1);
    expect(provider.calls).toHaveLength(0);
    expect(sent()).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [{ Id: 'm0', MessageBody: 'a', DelaySeconds: 5, MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } }],
      },
    ]);
    expect(third.metrics).toMatchObject({ RecordsPostponed: 1, BreakerOpen: 1 });

    // Then it reads the row again, finds the breaker closed and syncs as usual.
    clockMs = NOW.getTime() + 2_000;
    sqs.resetHistory();
    const fourth = await run(handler, ['a', 'b']);
    expect(fourth.result).toEqual({ batchItemFailures: [] });
    expect(batchGets()).toBe(2);
    expect(provider.calls.map((call) => call.id)).toEqual(['a', 'b']);
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 2);
    expect(sent()).toEqual([]);
    expect(fourth.metrics).toMatchObject({ ItemsCreated: 2, RecordsPostponed: 0, BreakerOpen: 0 });
  });

  it('still reads and calls the provider when this container’s probe is due', async () => {
    const paceStore = await paceRow();
    await paceStore.write(openBreaker(paceStore.state!, NOW.getTime() - 20_000, 'provider', PACE), 1);
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, metrics } = await run(build(provider, { paceStore }), ['a']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 1);
    expect(provider.calls).toHaveLength(1);
    expect(paceStore.state?.breaker).toEqual({ open: false });
    expect(metrics).toMatchObject({ ItemsCreated: 1, BreakerOpen: 0 });
  });
});
