/**
 * The DynamoDB, S3 and SQS adapters' own rules: marshalling, size, both row shapes, object puts and
 * deletes, chunking, attribute text, queue URLs.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { ChangeMessageVisibilityBatchCommand, GetQueueUrlCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DynamoDBClient,
  DynamoDBServiceException,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { DeleteObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { DynamoDbItemStore, MAX_ITEM_BYTES } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { estimateItemSize, fromAttributeValue, toAttributeValue } from '../../../functions/item-sync/adapters/attribute-values.js';
import { SqsDeadLetterSink, SqsMessageVisibility, attributeText, parseQueueArn } from '../../../functions/item-sync/adapters/sqs.js';
import { createS3ItemObjectStore, S3ItemObjectStore, s3ClientConfig } from '../../../functions/item-sync/adapters/s3-item-object-store.js';
import { LazyItemObjectStore } from '../../../functions/item-sync/adapters/lazy-item-object-store.js';
import type { ItemObjectStore, StoredRevision } from '../../../functions/item-sync/ports.js';
import { ConfigError, PermanentError, TransientError } from '../../../functions/shared/errors.js';

const sqs = mockClient(SQSClient);
const ddb = mockClient(DynamoDBClient);
const s3 = mockClient(S3Client);

beforeEach(() => {
  sqs.reset();
  ddb.reset();
  s3.reset();
});

describe('marshalling', () => {
  it('round-trips every JSON value, numbers exactly', () => {
    const value = {
      s: 'x',
      empty: '',
      n: [0, -1, 1.5, 1e21, 9007199254740991, -0.000001],
      b: [true, false],
      z: null,
      m: { nested: { deeper: [[], {}] } },
      u: 'Zoë 日本 🎉',
    };
    expect(fromAttributeValue(toAttributeValue(value))).toEqual(value);
    expect(toAttributeValue(1e21)).toEqual({ N: '1e+21' });
    expect(toAttributeValue(0.1)).toEqual({ N: '0.1' });
  });

  it('refuses nesting deeper than DynamoDB allows', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(() => toAttributeValue(deep)).toThrow(PermanentError);
  });

  it('estimates the size as DynamoDB counts it (UTF-8 bytes of names and strings)', () => {
    expect(estimateItemSize({ id: { S: 'abc' } })).toBe(5);
    expect(estimateItemSize({ é: { S: 'é' } })).toBe(4);
    expect(estimateItemSize({ n: { N: '12345' } })).toBe(1 + 4);
    expect(estimateItemSize({ m: { M: { k: { BOOL: true } } } })).toBe(1 + 3 + 1 + 1 + 1);
  });
});

describe('DynamoDbItemStore', () => {
  it('turns throttling that survived the SDK retries into a TransientError', async () => {
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({ name: 'ThrottlingException', $fault: 'client', $metadata: {}, message: 'slow down' }),
    );
    const store = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');
    const row = { connection: 'acme', id: 'a', type: 'file' as const, revision: '1', item: { id: 'a' }, syncedAt: 'now' };
    await expect(store.put(row, { exists: false })).rejects.toThrow(TransientError);
  });

  it('reads UnprocessedKeys again after base × 2^round (capped at 1 s, equal jitter), and gives up after the last round', async () => {
    const key = { connection: { S: 'acme' }, id: { S: 'a' } };
    const unprocessed = { Responses: { items: [] }, UnprocessedKeys: { items: { Keys: [key] } } };
    const chain = ddb.on(BatchGetItemCommand);
    for (let i = 0; i < 7; i++) chain.resolvesOnce(unprocessed);
    chain.resolves({ Responses: { items: [{ ...key, revision: { S: '4' } }] } });
    const waits: number[] = [];
    const options = { sleep: async (ms: number) => void waits.push(ms), random: () => 0.5 };
    const store = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items', options);
    expect(await store.getRevisions([{ connection: 'acme', id: 'a' }])).toEqual(new Map([['acme', new Map([['a', { revision: '4', deleted: false }]])]]));
    // Every round asks for exactly the keys left unprocessed.
    for (const call of ddb.commandCalls(BatchGetItemCommand)) expect(call.args[0].input.RequestItems!['items']!.Keys).toEqual([key]);
    expect(waits).toEqual([75, 150, 300, 600, 750, 750, 750]);

    ddb.reset();
    ddb.on(BatchGetItemCommand).resolves(unprocessed);
    waits.length = 0;
    const lowest = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items', { ...options, random: () => 0, unprocessedRounds: 4 });
    await expect(lowest.getRevisions([{ connection: 'acme', id: 'a' }])).rejects.toThrow(TransientError);
    expect(waits).toEqual([50, 100, 200]);
  });

  it('keeps a ValidationException about its own expressions retryable (a bug must not dead-letter everything)', async () => {
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({
        name: 'ValidationException',
        $fault: 'client',
        $metadata: {},
        message: 'Invalid ConditionExpression: Syntax error',
      }),
    );
    const store = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');
    const row = { connection: 'acme', id: 'a', type: 'file' as const, revision: '1', item: { id: 'a' }, syncedAt: 'now' };
    await expect(store.put(row, { exists: false })).rejects.toThrow(TransientError);
  });

  const refusal = (message: string) => new DynamoDBServiceException({ name: 'ValidationException', $fault: 'client', $metadata: {}, message });
  const SORT_KEY = 'One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes';
  const PARTITION_KEY = 'One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes';

  it.each([
    ['a sort key over its limit', SORT_KEY],
    ['a partition key over its limit', PARTITION_KEY],
    ['a number out of range', 'Number overflow. Attempting to store a number with magnitude larger than supported range'],
  ])('dead-letters any other ValidationException about the row (%s) quoting DynamoDB, never as too large', async (_name, message) => {
    ddb.on(PutItemCommand).rejects(refusal(message));
    const store = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');
    const inline = { connection: 'acme', id: 'a', type: 'file' as const, revision: '1', item: { id: 'a' }, syncedAt: 'now' };
    const pointer = { ...inline, item: undefined, itemObject: { key: 'items/k.json', size: 614_400, sha256: 'ab'.repeat(32) } };
    const reason = `DynamoDB refused the item's PutItem as invalid (ValidationException: ${message})`;
    // Not "too-large": the item would not go to the items bucket.
    await expect(store.put(inline, { exists: false })).rejects.toThrow(new PermanentError(reason));
    await expect(store.put(pointer, { exists: false })).rejects.toThrow(new PermanentError(reason));
  });

  it('dead-letters a key over its limit in a read or a tombstone with DynamoDB\'s words', async () => {
    ddb.on(BatchGetItemCommand).rejects(refusal(SORT_KEY));
    ddb.on(UpdateItemCommand).rejects(refusal(SORT_KEY));
    const store = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');
    await expect(store.getRevisions([{ connection: 'acme', id: 'a' }])).rejects.toThrow(
      new PermanentError(`DynamoDB refused the item's BatchGetItem as invalid (ValidationException: ${SORT_KEY})`),
    );
    await expect(store.markDeleted({ connection: 'acme', id: 'a' }, '1', 'now')).rejects.toThrow(
      new PermanentError(`DynamoDB refused the item's UpdateItem as invalid (ValidationException: ${SORT_KEY})`),
    );
  });

  it('takes only the item size refusal for "too large to store"', async () => {
    const store = new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');
    ddb.on(UpdateItemCommand).rejects(refusal('Item size to update has exceeded the maximum allowed size'));
    await expect(store.markDeleted({ connection: 'acme', id: 'a' }, '1', 'now')).rejects.toThrow(
      new PermanentError("item too large to store (over 400 KB; DynamoDB's limit is 400 KB)"),
    );
  });
});

describe('DynamoDbItemStore: the key (connection, id)', () => {
  const store = () => new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');

  it('reads the stored revisions of keys of several connections in one BatchGetItem, each key once, by connection then id', async () => {
    ddb.on(BatchGetItemCommand).resolves({
      Responses: {
        items: [
          { connection: { S: 'acme' }, id: { S: 'same' }, revision: { S: '1' }, syncedAt: { S: '2026-11-21T10:00:00.000Z' }, childrenPending: { BOOL: true } },
          { connection: { S: 'globex' }, id: { S: 'same' }, revision: { S: '7' }, deleted: { BOOL: true } },
          { connection: { S: 'globex' }, id: { S: 'big' }, revision: { S: '2' }, itemObject: { M: { key: { S: 'items/globex/k.json' } } } },
        ],
      },
    });
    const keys = [
      { connection: 'acme', id: 'same' },
      { connection: 'globex', id: 'same' },
      { connection: 'acme', id: 'same' },
      { connection: 'globex', id: 'big' },
      { connection: 'acme', id: 'none' },
    ];
    expect(await store().getRevisions(keys)).toEqual(
      new Map<string, Map<string, StoredRevision>>([
        ['acme', new Map([['same', { revision: '1', deleted: false, syncedAt: '2026-11-21T10:00:00.000Z', childrenPending: true }]])],
        [
          'globex',
          new Map<string, StoredRevision>([
            ['same', { revision: '7', deleted: true }],
            ['big', { revision: '2', deleted: false, objectKey: 'items/globex/k.json' }],
          ]),
        ],
      ]),
    );
    expect(ddb.commandCalls(BatchGetItemCommand).map((call) => call.args[0].input)).toEqual([
      {
        RequestItems: {
          items: {
            Keys: [
              { connection: { S: 'acme' }, id: { S: 'same' } },
              { connection: { S: 'globex' }, id: { S: 'same' } },
              { connection: { S: 'globex' }, id: { S: 'big' } },
              { connection: { S: 'acme' }, id: { S: 'none' } },
            ],
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
      },
    ]);
  });

  it('reads at most 100 keys a call', async () => {
    ddb.on(BatchGetItemCommand).resolves({ Responses: { items: [] } });
    const keys = Array.from({ length: 150 }, (_, i) => ({ connection: i % 2 ? 'acme' : 'globex', id: `id-${i}` }));
    expect(await store().getRevisions(keys)).toEqual(new Map());
    expect(ddb.commandCalls(BatchGetItemCommand).map((call) => call.args[0].input.RequestItems!['items']!.Keys!.length)).toEqual([100, 50]);
  });

  it('marks a row deleted by its key (removing a folder\'s childrenPending), on condition that it still holds the revision compared and is live', async () => {
    ddb.on(UpdateItemCommand).resolves({});
    expect(await store().markDeleted({ connection: 'acme', id: 'a' }, '3', '2026-11-21T10:00:00.000Z')).toBe('written');
    expect(ddb.commandCalls(UpdateItemCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: 'items',
        Key: { connection: { S: 'acme' }, id: { S: 'a' } },
        UpdateExpression: 'SET #deleted = :true, #syncedAt = :syncedAt REMOVE #childrenPending',
        ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
        ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted', '#syncedAt': 'syncedAt', '#childrenPending': 'childrenPending' },
        ExpressionAttributeValues: { ':expected': { S: '3' }, ':true': { BOOL: true }, ':syncedAt': { S: '2026-11-21T10:00:00.000Z' } },
      },
    ]);
    ddb.on(UpdateItemCommand).rejects(new ConditionalCheckFailedException({ $metadata: {}, message: 'The conditional request failed' }));
    expect(await store().markDeleted({ connection: 'acme', id: 'a' }, '3', '2026-11-21T10:00:00.000Z')).toBe('conflict');
  });

  it('writes a folder with childrenPending (BOOL true) when asked, and removes it on condition that the row still is the version written', async () => {
    ddb.on(PutItemCommand).resolves({});
    const row = { connection: 'acme', id: 'F', type: 'folder' as const, revision: '4', item: { id: 'F' }, syncedAt: '2026-11-21T10:00:00.000Z', childrenPending: true as const };
    expect(await store().put(row, { exists: false })).toEqual({ result: 'written' });
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input.Item).toEqual({
      connection: { S: 'acme' },
      id: { S: 'F' },
      type: { S: 'folder' },
      revision: { S: '4' },
      item: { M: { id: { S: 'F' } } },
      syncedAt: { S: '2026-11-21T10:00:00.000Z' },
      childrenPending: { BOOL: true },
    });
    ddb.on(UpdateItemCommand).resolvesOnce({}).rejects(new ConditionalCheckFailedException({ $metadata: {}, message: 'The conditional request failed' }));
    const written = { revision: '4', syncedAt: '2026-11-21T10:00:00.000Z' };
    expect(await store().clearChildrenPending({ connection: 'acme', id: 'F' }, written)).toBe('written');
    expect(await store().clearChildrenPending({ connection: 'acme', id: 'F' }, written)).toBe('conflict');
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input).toEqual({
      TableName: 'items',
      Key: { connection: { S: 'acme' }, id: { S: 'F' } },
      UpdateExpression: 'REMOVE #childrenPending',
      ConditionExpression: '#revision = :revision AND #syncedAt = :syncedAt AND attribute_exists(#childrenPending)',
      ExpressionAttributeNames: { '#revision': 'revision', '#syncedAt': 'syncedAt', '#childrenPending': 'childrenPending' },
      ExpressionAttributeValues: { ':revision': { S: '4' }, ':syncedAt': { S: '2026-11-21T10:00:00.000Z' } },
    });
  });

  it("reads a folder's stored copy strongly consistent, with its childrenPending (what discovery needs before the row is replaced)", async () => {
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({
        Responses: {
          items: [{ type: { S: 'folder' }, revision: { S: '4' }, itemObject: { M: { key: { S: 'items/acme/F.json' } } }, childrenPending: { BOOL: true } }],
        },
      })
      .resolvesOnce({ Responses: { items: [{ type: { S: 'folder' }, revision: { S: '5' }, item: { M: { id: { S: 'F' } } } }] } });
    expect(await store().getItem({ connection: 'acme', id: 'F' })).toEqual({ type: 'folder', revision: '4', deleted: false, objectKey: 'items/acme/F.json', childrenPending: true });
    expect(await store().getItem({ connection: 'acme', id: 'F' })).toEqual({ type: 'folder', revision: '5', deleted: false, item: { id: 'F' } });
    expect(ddb.commandCalls(BatchGetItemCommand)[0]!.args[0].input).toEqual({
      RequestItems: {
        items: {
          Keys: [{ connection: { S: 'acme' }, id: { S: 'F' } }],
          ProjectionExpression: '#type, #revision, #deleted, #item, #itemObject, #childrenPending',
          ExpressionAttributeNames: { '#type': 'type', '#revision': 'revision', '#deleted': 'deleted', '#item': 'item', '#itemObject': 'itemObject', '#childrenPending': 'childrenPending' },
          ConsistentRead: true,
        },
      },
    });
  });

  it('writes a new row with both key attributes, on condition that there is none', async () => {
    ddb.on(PutItemCommand).resolves({});
    const row = { connection: 'globex', id: 'a', type: 'folder' as const, revision: '1', item: { id: 'a', n: 1 }, syncedAt: '2026-11-21T10:00:00.000Z' };
    expect(await store().put(row, { exists: false })).toEqual({ result: 'written' });
    expect(ddb.commandCalls(PutItemCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: 'items',
        Item: {
          connection: { S: 'globex' },
          id: { S: 'a' },
          type: { S: 'folder' },
          revision: { S: '1' },
          item: { M: { id: { S: 'a' }, n: { N: '1' } } },
          syncedAt: { S: '2026-11-21T10:00:00.000Z' },
        },
        ConditionExpression: 'attribute_not_exists(#id)',
        ExpressionAttributeNames: { '#id': 'id' },
      },
    ]);
  });
});

describe('DynamoDbItemStore: the two row shapes', () => {
  const store = () => new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items');
  const base = { connection: 'acme', id: 'a', type: 'file' as const, revision: '2', syncedAt: '2026-11-21T10:00:00.000Z' };
  const pointer = { key: 'items/k.json', size: 614_400, sha256: 'ab'.repeat(32) };

  it('answers too-large for an inline row its estimate puts over 400 KB, without a request', async () => {
    const result = await store().put({ ...base, item: { id: 'a', blob: 'x'.repeat(410 * 1024) } }, { exists: false });
    expect(result).toEqual({ result: 'too-large', bytes: expect.any(Number) });
    expect((result as { bytes: number }).bytes).toBeGreaterThan(MAX_ITEM_BYTES);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
  });

  it('answers too-large when DynamoDB refuses an inline row for its size', async () => {
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({ name: 'ValidationException', $fault: 'client', $metadata: {}, message: 'Item size has exceeded the maximum allowed size' }),
    );
    expect(await store().put({ ...base, item: { id: 'a' } }, { exists: false })).toEqual({ result: 'too-large', bytes: expect.any(Number) });
  });

  it('writes a row with itemObject {key, size, sha256} and no item; the pointer row refused for its size is a PermanentError', async () => {
    ddb.on(PutItemCommand).resolvesOnce({});
    expect(await store().put({ ...base, itemObject: pointer }, { exists: false })).toEqual({ result: 'written' });
    expect(ddb).toReceiveCommandWith(PutItemCommand, {
      TableName: 'items',
      Item: {
        connection: { S: 'acme' },
        id: { S: 'a' },
        type: { S: 'file' },
        revision: { S: '2' },
        itemObject: { M: { key: { S: 'items/k.json' }, size: { N: '614400' }, sha256: { S: 'ab'.repeat(32) } } },
        syncedAt: { S: '2026-11-21T10:00:00.000Z' },
      },
    });
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({ name: 'ValidationException', $fault: 'client', $metadata: {}, message: 'Item size has exceeded the maximum allowed size' }),
    );
    await expect(store().put({ ...base, itemObject: pointer }, { exists: false })).rejects.toThrow(PermanentError);
  });

  it('asks for the replaced row (ALL_OLD) on an update only, and answers its object key', async () => {
    ddb.on(PutItemCommand).resolves({ Attributes: { id: { S: 'a' }, itemObject: { M: { key: { S: 'items/old.json' } } } } });
    expect(await store().put({ ...base, item: { id: 'a' } }, { exists: true, revision: '1', deleted: false })).toEqual({
      result: 'written',
      replacedObjectKey: 'items/old.json',
    });
    expect(ddb).toReceiveCommandWith(PutItemCommand, { ReturnValues: 'ALL_OLD' });
    ddb.reset();
    ddb.on(PutItemCommand).resolves({});
    expect(await store().put({ ...base, item: { id: 'a' } }, { exists: false })).toEqual({ result: 'written' });
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input).not.toHaveProperty('ReturnValues');
  });

  it('reads a row state strongly consistently, object key and syncedAt included', async () => {
    ddb.on(BatchGetItemCommand).resolves({
      Responses: {
        items: [
          {
            connection: { S: 'acme' },
            id: { S: 'a' },
            revision: { S: '2' },
            deleted: { BOOL: true },
            itemObject: { M: { key: { S: 'items/k.json' } } },
            syncedAt: { S: '2026-11-21T10:00:00.000Z' },
          },
        ],
      },
    });
    const key = { connection: 'acme', id: 'a' };
    expect(await store().rowState(key)).toEqual({ revision: '2', deleted: true, objectKey: 'items/k.json', syncedAt: '2026-11-21T10:00:00.000Z' });
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: {
        items: {
          Keys: [{ connection: { S: 'acme' }, id: { S: 'a' } }],
          ProjectionExpression: '#id, #revision, #deleted, #itemObject, #syncedAt',
          ExpressionAttributeNames: { '#id': 'id', '#revision': 'revision', '#deleted': 'deleted', '#itemObject': 'itemObject', '#syncedAt': 'syncedAt' },
          ConsistentRead: true,
        },
      },
    });
    ddb.on(BatchGetItemCommand).resolves({ Responses: { items: [] } });
    expect(await store().rowState(key)).toBeUndefined();
    ddb.on(BatchGetItemCommand).resolves({ Responses: { items: [] }, UnprocessedKeys: { items: { Keys: [{ connection: { S: 'acme' }, id: { S: 'a' } }] } } });
    await expect(store().rowState(key)).rejects.toThrow(TransientError);
  });
});

describe('S3ItemObjectStore', () => {
  const objects = () => new S3ItemObjectStore(new S3Client({ region: 'eu-west-1' }), 'bucket-1');

  it('puts the object with its SHA-256 (base64, as S3 checks it) and deletes by key', async () => {
    s3.on(PutObjectCommand).resolves({});
    s3.on(DeleteObjectCommand).resolves({});
    const body = Buffer.from('{"id":"a"}');
    const sha256 = createHash('sha256').update(body).digest('hex');
    await objects().put('items/a.json', body, sha256);
    await objects().delete('items/a.json');
    expect(s3).toReceiveCommandExactlyOnceWith(PutObjectCommand, {
      Bucket: 'bucket-1',
      Key: 'items/a.json',
      Body: body,
      ContentLength: 10,
      ContentType: 'application/json',
      ChecksumSHA256: createHash('sha256').update(body).digest('base64'),
    });
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: 'bucket-1', Key: 'items/a.json' });
  });

  it('turns every failure into a TransientError naming the operation', async () => {
    s3.on(PutObjectCommand).rejects(new S3ServiceException({ name: 'BadDigest', $fault: 'client', $metadata: {}, message: 'The SHA256 you specified did not match' }));
    s3.on(DeleteObjectCommand).rejects(new Error('socket hang up'));
    await expect(objects().put('k', Buffer.from('x'), '00')).rejects.toThrow(
      new TransientError('S3 PutObject failed (BadDigest: The SHA256 you specified did not match)'),
    );
    await expect(objects().delete('k')).rejects.toThrow(new TransientError('S3 DeleteObject failed (Error: socket hang up)'));
  });

  it('createS3ItemObjectStore uses the client given, or one of its own', () => {
    const client = new S3Client({ region: 'eu-west-1' });
    expect(createS3ItemObjectStore('b', client)).toMatchObject({ bucketName: 'b', client });
    expect(createS3ItemObjectStore('b')).toMatchObject({ bucketName: 'b', client: expect.any(S3Client) });
  });

  it('addresses a configured endpoint path-style (a local endpoint serves no <bucket>.<host> names); AWS itself as the SDK does', async () => {
    const clientOf = (store: S3ItemObjectStore) => (store as unknown as { client: S3Client }).client;
    const local = clientOf(createS3ItemObjectStore('b', undefined, { url: 'http://localhost:4566', variable: 'AWS_ENDPOINT_URL_S3' }));
    expect(local.config.forcePathStyle).toBe(true);
    expect(await local.config.endpoint!()).toMatchObject({ protocol: 'http:', hostname: 'localhost', port: 4566 });
    expect(clientOf(createS3ItemObjectStore('b')).config.forcePathStyle).toBe(false);
    expect(s3ClientConfig(undefined)).toEqual({});
  });

  it('a configured endpoint whose host does not resolve (ENOTFOUND) is a ConfigError naming its variable; without one, a TransientError', async () => {
    const notFound = () => Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.localhost'), { code: 'ENOTFOUND', $metadata: { attempts: 3 } });
    s3.on(PutObjectCommand).callsFake(() => Promise.reject(notFound()));
    s3.on(DeleteObjectCommand).callsFake(() => Promise.reject(Object.assign(new Error('wrapped'), { cause: notFound() })));
    const endpoint = { url: 'http://nowhere.localhost:4566/', variable: 'AWS_ENDPOINT_URL_S3' };
    const configured = new S3ItemObjectStore(new S3Client({ region: 'eu-west-1' }), 'bucket-1', endpoint);
    const putError = await configured.put('k', Buffer.from('x'), '00').catch((e: unknown) => e);
    expect(putError).toBeInstanceOf(ConfigError);
    expect(putError).toMatchObject({
      key: 'AWS_ENDPOINT_URL_S3',
      message:
        'AWS_ENDPOINT_URL_S3: the items bucket cannot be reached at http://nowhere.localhost:4566: S3 PutObject failed (Error: getaddrinfo ENOTFOUND nowhere.localhost); check the endpoint',
    });
    await expect(configured.delete('k')).rejects.toBeInstanceOf(ConfigError);
    await expect(objects().put('k', Buffer.from('x'), '00')).rejects.toThrow(
      new TransientError('S3 PutObject failed (Error: getaddrinfo ENOTFOUND nowhere.localhost)'),
    );
  });
});

describe('LazyItemObjectStore', () => {
  it('loads the store once, on first use; a failed load is retried next time as a TransientError', async () => {
    const calls: string[] = [];
    const loaded: ItemObjectStore = {
      put: async (key) => void calls.push(`put ${key}`),
      delete: async (key) => void calls.push(`delete ${key}`),
      get: async (key) => {
        calls.push(`get ${key}`);
        return Buffer.from('{}');
      },
    };
    let loads = 0;
    const lazy = new LazyItemObjectStore(async () => {
      loads += 1;
      if (loads === 1) throw new Error('module not found');
      return loaded;
    });
    await expect(lazy.put('k1', Buffer.from('x'), '00')).rejects.toThrow(
      new TransientError("the items bucket's adapter could not be loaded (module not found)"),
    );
    await lazy.put('k1', Buffer.from('x'), '00');
    await lazy.delete('k2');
    expect(await lazy.get('k3')).toEqual(Buffer.from('{}'));
    expect(loads).toBe(2);
    expect(calls).toEqual(['put k1', 'delete k2', 'get k3']);
  });
});

describe('SQS adapters', () => {
  it('parses a queue ARN', () => {
    expect(parseQueueArn('arn:aws-cn:sqs:cn-north-1:123456789012:q-1')).toEqual({
      region: 'cn-north-1',
      account: '123456789012',
      name: 'q-1',
    });
    expect(() => parseQueueArn('arn:aws:sns:eu-west-1:1:t')).toThrow('not an SQS queue ARN');
  });

  it('makes any reason a valid, bounded message attribute', () => {
    expect(attributeText('a\u0000b\u0007c\ud800', 100)).toBe('a\\u0000b\\u0007c\\ud800');
    expect(attributeText('tab\tok 🎉', 100)).toBe('tab\tok 🎉');
    expect([...attributeText('x'.repeat(5000), 1000)]).toHaveLength(1000);
  });

  it('sends dead letters in chunks of at most 10 entries and about 256 KiB, reporting the ones SQS failed', async () => {
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string; MessageBody: string }> }) => ({
      Successful: input.Entries.filter((e) => e.MessageBody !== 'poison').map((e) => ({ Id: e.Id, MessageId: 'x', MD5OfMessageBody: 'x' })),
      Failed: input.Entries.filter((e) => e.MessageBody === 'poison').map((e) => ({ Id: e.Id, SenderFault: true, Code: 'InvalidMessageContents', Message: 'bad' })),
    }));
    const sink = new SqsDeadLetterSink(new SQSClient({ region: 'eu-west-1' }), 'https://dlq');
    const big = 'b'.repeat(100 * 1024);
    const letters = [
      ...Array.from({ length: 12 }, (_, n) => ({ body: `small-${n}`, reason: 'why', sourceMessageId: `s${n}` })),
      { body: big, reason: 'why', sourceMessageId: 'big1' },
      { body: big, reason: 'why', sourceMessageId: 'big2' },
      { body: big, reason: 'why', sourceMessageId: 'big3' },
      { body: 'poison', reason: 'why', sourceMessageId: 'p' },
    ];

    const failed = await sink.send(letters);

    const sizes = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries!.length);
    expect(sizes).toEqual([10, 4, 2]);
    expect(failed).toEqual([{ sourceMessageId: 'p', error: 'InvalidMessageContents: bad' }]);
  });

  it('sends a dead letter in its connection’s message group when its body named one, without a group otherwise', async () => {
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
      Successful: input.Entries.map((e) => ({ Id: e.Id, MessageId: 'x', MD5OfMessageBody: 'x' })),
    }));
    const sink = new SqsDeadLetterSink(new SQSClient({ region: 'eu-west-1' }), 'https://dlq');
    expect(await sink.send([{ body: '{"connection":"acme","id":"a"}', reason: 'r1', sourceMessageId: 's1', connection: 'acme' }, { body: '{bad', reason: 'r2', sourceMessageId: 's2' }])).toEqual([]);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: 'https://dlq',
      Entries: [
        {
          Id: 'm0',
          MessageBody: '{"connection":"acme","id":"a"}',
          MessageGroupId: 'acme',
          MessageAttributes: { error: { DataType: 'String', StringValue: 'r1' }, sourceMessageId: { DataType: 'String', StringValue: 's1' } },
        },
        {
          Id: 'm1',
          MessageBody: '{bad',
          MessageAttributes: { error: { DataType: 'String', StringValue: 'r2' }, sourceMessageId: { DataType: 'String', StringValue: 's2' } },
        },
      ],
    });
  });

  it('re-sends dead letters SQS refused for a reason that may pass, the same entry again, a bounded number of times', async () => {
    let call = 0;
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string; MessageBody: string }> }) => {
      call += 1;
      const refuse = (body: string) => body === 'always' || (body === 'once' && call === 1);
      return {
        Successful: input.Entries.filter((e) => !refuse(e.MessageBody)).map((e) => ({ Id: e.Id, MessageId: 'x', MD5OfMessageBody: 'x' })),
        Failed: input.Entries.filter((e) => refuse(e.MessageBody)).map((e) => ({ Id: e.Id, SenderFault: false, Code: 'InternalError', Message: 'try again' })),
      };
    });
    const waits: number[] = [];
    const sink = new SqsDeadLetterSink(new SQSClient({ region: 'eu-west-1' }), 'https://dlq', {
      sleep: async (ms) => void waits.push(ms),
    });

    const failed = await sink.send([
      { body: 'fine', reason: 'r1', sourceMessageId: 's1' },
      { body: 'once', reason: 'r2', sourceMessageId: 's2' },
      { body: 'always', reason: 'r3', sourceMessageId: 's3' },
    ]);

    const sent = sqs.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input.Entries!.map((e) => e.MessageBody));
    expect(sent).toEqual([['fine', 'once', 'always'], ['once', 'always'], ['always']]);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: 'https://dlq',
      Entries: [
        {
          Id: 'm0',
          MessageBody: 'always',
          MessageAttributes: {
            error: { DataType: 'String', StringValue: 'r3' },
            sourceMessageId: { DataType: 'String', StringValue: 's3' },
          },
        },
      ],
    });
    expect(waits).toEqual([100, 200]);
    expect(failed).toEqual([{ sourceMessageId: 's3', error: 'InternalError: try again' }]);
  });

  it('looks a queue URL up once per ARN and reports entries SQS failed to change', async () => {
    sqs.on(GetQueueUrlCommand).resolves({ QueueUrl: 'http://localhost:4566/000000000000/q' });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({
      Successful: [{ Id: 'm0' }],
      Failed: [{ Id: 'm1', SenderFault: true, Code: 'ReceiptHandleIsInvalid', Message: 'expired' }],
    });
    const visibility = new SqsMessageVisibility(new SQSClient({ region: 'eu-west-1' }));
    const arn = 'arn:aws:sqs:eu-west-1:000000000000:q';
    const failed = await visibility.postpone([
      { messageId: 'a', receiptHandle: 'rh-a', queueArn: arn, delaySeconds: 10 },
      { messageId: 'b', receiptHandle: 'rh-b', queueArn: arn, delaySeconds: 20 },
    ]);
    await visibility.postpone([{ messageId: 'c', receiptHandle: 'rh-c', queueArn: arn, delaySeconds: 5 }]);

    expect(failed).toEqual([{ messageId: 'b', error: 'ReceiptHandleIsInvalid: expired' }]);
    expect(sqs).toHaveReceivedCommandTimes(GetQueueUrlCommand, 1);
    expect(sqs).toReceiveNthCommandWith(ChangeMessageVisibilityBatchCommand, 1, {
      QueueUrl: 'http://localhost:4566/000000000000/q',
      Entries: [
        { Id: 'm0', ReceiptHandle: 'rh-a', VisibilityTimeout: 10 },
        { Id: 'm1', ReceiptHandle: 'rh-b', VisibilityTimeout: 20 },
      ],
    });
  });
});
