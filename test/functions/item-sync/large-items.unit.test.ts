/**
 * The item sync handler with items too large for a row (mocked clients, unit-harness.ts): the object
 * first, the row pointing to it after, the objects of replaced rows deleted, and what a write whose
 * answer was lost leaves.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DynamoDBServiceException,
  PutItemCommand,
  ProvisionedThroughputExceededException,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { DeleteObjectCommand, PutObjectCommand, S3ServiceException } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { itemJson, itemObjectKey } from '../../../functions/item-sync/item-writer.js';
import { parseJson } from '../../../functions/shared/json.js';
import { ConfigError } from '../../../functions/shared/errors.js';
import { ScriptedProvider, item, lambdaContext, logLines, metricsIn, providerError, sqsEvent } from './helpers.js';
import { BUCKET, NOW, SUFFIX, TABLE, build, ddb, k, run, s3, sqs, stored, useHarness } from './unit-harness.js';

useHarness();

describe('items too large for a row', () => {
  /** A file whose row would be over 400 KB: 300 Ki two-byte characters. */
  const largeItem = (id: string, revision: unknown) => item(id, revision, { blob: 'é'.repeat(300 * 1024) });
  const OLD_KEY = `items/${'0'.repeat(64)}/1/${'1'.repeat(64)}-fedcba9876543210.json`;
  const conditionFailed = () => new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });

  /** The object the sync writes for `value`: its bytes, their SHA-256 and its key. */
  function objectOf(value: Record<string, unknown>, id: string, revision: string) {
    const body = Buffer.from(itemJson(value), 'utf8');
    const sha256 = createHash('sha256').update(body).digest('hex');
    return { body, sha256, key: itemObjectKey('default', id, revision, sha256, SUFFIX) };
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
    expect(key).toMatch(/^items\/default\/[0-9a-f]{64}\/1\/[0-9a-f]{64}-0123456789abcdef\.json$/);
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
    // The estimate already said "too large": the inline row was never sent. The row's one PutItem,
    // the whole command (a new row: nothing replaced, no ReturnValues).
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Item: {
        connection: { S: 'default' },
        id: { S: 'huge' },
        type: { S: 'file' },
        revision: { S: '1' },
        itemObject: { M: { key: { S: key }, size: { N: String(body.byteLength) }, sha256: { S: sha256 } } },
        syncedAt: { S: NOW.toISOString() },
      },
      ConditionExpression: 'attribute_not_exists(#id)',
      ExpressionAttributeNames: { '#id': 'id' },
    });
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
      .resolvesOnce({ Responses: { [TABLE]: [{ ...k('race'), revision: { S: '2' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
      .resolves({ Responses: { [TABLE]: [{ ...k('race'), revision: { S: '2' } }] } });
    const order = recordWrites((call) => (call === 1 ? conditionFailed() : {}));
    const big = largeItem('race', 2);
    const { result, metrics, logs } = await run(build(new ScriptedProvider().on('race', big)), ['race']);

    const { key } = objectOf(big, 'race', '2');
    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
      RequestItems: {
        [TABLE]: {
          Keys: [k('race')],
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
      .resolvesOnce({ Responses: { [TABLE]: [{ ...k('mine'), revision: { S: '1' }, itemObject: { M: { key: { S: key } } } }] } })
      .resolves({ Responses: { [TABLE]: [{ ...k('mine'), revision: { S: '1' } }] } });
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
    stored([{ id: 'shrunk', revision: '1', objectKey: OLD_KEY }]);
    // DynamoDB answers the row the write replaced (ALL_OLD): it pointed to OLD_KEY.
    const order = recordWrites(() => ({ Attributes: { ...k('shrunk'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } } }));
    const { result, metrics } = await run(build(new ScriptedProvider().on('shrunk', item('shrunk', 2))), ['shrunk']);

    expect(result.batchItemFailures).toEqual([]);
    // The condition is on the revision compared alone; the replaced object is the one of the old row
    // DynamoDB returns.
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Item: expect.objectContaining({ item: expect.anything(), revision: { S: '2' } }),
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
      ExpressionAttributeValues: { ':expected': { S: '1' } },
      ReturnValues: 'ALL_OLD',
    });
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input.Item).not.toHaveProperty('itemObject');
    expect(order).toEqual(['PutItem item', `DeleteObject ${OLD_KEY}`]);
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
    expect(s3).not.toHaveReceivedCommand(PutObjectCommand);
    expect(metrics).toMatchObject({ ItemsUpdated: 1 });
  });

  it('a newer large revision: new object, row, then the replaced object deleted', async () => {
    // The row read before the write (eventually consistent) showed no object; the row the write
    // replaced, as DynamoDB returns it, pointed to OLD_KEY: that is the object deleted.
    stored([{ id: 'grew', revision: '1' }]);
    const order = recordWrites(() => ({ Attributes: { ...k('grew'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } } }));
    const big = largeItem('grew', 2);
    const { result } = await run(build(new ScriptedProvider().on('grew', big)), ['grew']);

    const { key } = objectOf(big, 'grew', '2');
    expect(result.batchItemFailures).toEqual([]);
    expect(order).toEqual([`PutObject ${key}`, 'PutItem itemObject', `DeleteObject ${OLD_KEY}`]);
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Item: expect.objectContaining({ itemObject: { M: expect.objectContaining({ key: { S: key } }) }, revision: { S: '2' } }),
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
      ExpressionAttributeValues: { ':expected': { S: '1' } },
      ReturnValues: 'ALL_OLD',
    });
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
    stored([{ id: 'stuck', revision: '1', objectKey: OLD_KEY }]);
    ddb.on(PutItemCommand).resolves({ Attributes: { ...k('stuck'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } } });
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
      Responses: { [TABLE]: [{ ...k(id), revision: { S: revision }, syncedAt: { S: NOW.toISOString() }, ...extra }] },
    });
    const networkError = () => Object.assign(new Error('socket hang up'), { name: 'TimeoutError', code: 'ECONNRESET', $metadata: { attempts: 3 } });

    it('going back inline: the replaced row’s object (known from the row read before) is deleted, and the record counts as updated', async () => {
      ddb
        .on(BatchGetItemCommand)
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('lost'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves(rowAsWritten('lost', '2'));
      // The SDK's second send meets the condition its own first send broke.
      const order = recordWrites(() => conditionFailed());
      const { result, metrics, logs } = await run(build(new ScriptedProvider().on('lost', item('lost', 2)), { env: { POWERTOOLS_LOG_LEVEL: 'DEBUG' } }), ['lost']);

      expect(result.batchItemFailures).toEqual([]);
      expect(order).toEqual(['PutItem item', `DeleteObject ${OLD_KEY}`]);
      expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: OLD_KEY });
      expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
        RequestItems: { [TABLE]: expect.objectContaining({ Keys: [k('lost')], ConsistentRead: true }) },
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
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('lost'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
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
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('grew'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
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
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('gone'), revision: { S: '9' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
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
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('twin'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        .resolves({ Responses: { [TABLE]: [{ ...k('twin'), revision: { S: '2' }, syncedAt: { S: '2026-11-21T09:59:59.999Z' } }] } });
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
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('raced'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
        // Another writer replaced this write's inline row (it read that row: it knows no object to delete).
        .resolves({ Responses: { [TABLE]: [{ ...k('raced'), revision: { S: '3' }, syncedAt: { S: '2026-11-21T10:00:00.500Z' } }] } });
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
        .resolvesOnce({ Responses: { [TABLE]: [{ ...k('dark'), revision: { S: '1' }, itemObject: { M: { key: { S: OLD_KEY } } } }] } })
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
