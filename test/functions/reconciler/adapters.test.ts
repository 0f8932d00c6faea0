/**
 * The reconciler's adapters with mocked clients: the exact Scan, DescribeTable, GetItem, PutItem,
 * UpdateItem, GetQueueAttributes and SendMessageBatch inputs, and how answers and failures come out.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  ConditionalCheckFailedException,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand, SendMessageBatchCommand, SQSClient, type SendMessageBatchRequestEntry } from '@aws-sdk/client-sqs';
import { DynamoDbCursorStore, fromRow, RECONCILE_CURSOR_KEY, toRow } from '../../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { DynamoDbItemIds } from '../../../functions/reconciler/adapters/dynamodb-item-ids.js';
import { BACKGROUND_LANE, LANE_ATTRIBUTE, RECONCILE_PASS_ATTRIBUTE, SqsReconcileQueue } from '../../../functions/reconciler/adapters/sqs-reconcile-queue.js';
import {
  BACKGROUND_LANE as SYNC_READS_BACKGROUND,
  LANE_ATTRIBUTE as SYNC_READS_LANE,
  RECONCILE_PASS_ATTRIBUTE as SYNC_READS_RECONCILE_PASS,
} from '../../../functions/item-sync/adapters/sqs.js';
import { parseMessageBody } from '../../../functions/item-sync/message.js';
import type { Cursor } from '../../../functions/reconciler/ports.js';
import { TransientError } from '../../../functions/shared/errors.js';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-reconcile';
const T = Date.UTC(2026, 0, 1, 12, 0, 0);

const dynamodb = new DynamoDBClient({ region: 'eu-west-1' });
const ddb = mockClient(dynamodb);
const sqsClient = new SQSClient({ region: 'eu-west-1' });
const sqs = mockClient(sqsClient);

beforeEach(() => {
  ddb.reset();
  sqs.reset();
});

const conditionFailed = () => new ConditionalCheckFailedException({ $metadata: {}, message: 'The conditional request failed' });

describe('DynamoDbItemIds', () => {
  const ids = new DynamoDbItemIds(dynamodb, 'items');

  const key = (connection: string, id: string) => ({ connection: { S: connection }, id: { S: id } });

  it('reads a segment page by page: projection connection and id, eventually consistent, Limit, ExclusiveStartKey the whole last key', async () => {
    ddb
      .on(ScanCommand)
      .resolvesOnce({ Items: [key('acme', 'a'), key('acme', 'b')], LastEvaluatedKey: key('acme', 'b'), Count: 2, ScannedCount: 2 })
      .resolvesOnce({ Items: [key('globex', 'a')], Count: 1, ScannedCount: 1 });
    expect(await ids.page({ segment: 3, totalSegments: 8, limit: 2 })).toEqual({
      keys: [
        { connection: 'acme', id: 'a' },
        { connection: 'acme', id: 'b' },
      ],
      after: { connection: 'acme', id: 'b' },
    });
    expect(await ids.page({ segment: 3, totalSegments: 8, limit: 2, after: { connection: 'acme', id: 'b' } })).toEqual({
      keys: [{ connection: 'globex', id: 'a' }],
    });
    const scan = { TableName: 'items', Segment: 3, TotalSegments: 8, Limit: 2, ProjectionExpression: '#connection, #id', ExpressionAttributeNames: { '#connection': 'connection', '#id': 'id' } };
    expect(ddb.commandCalls(ScanCommand).map((call) => call.args[0].input)).toEqual([scan, { ...scan, ExclusiveStartKey: key('acme', 'b') }]);
  });

  it('an empty page with a LastEvaluatedKey goes on; one without a string connection and id is an error', async () => {
    ddb
      .on(ScanCommand)
      .resolvesOnce({ Items: [], LastEvaluatedKey: key('acme', 'q') })
      .resolvesOnce({ Items: [], LastEvaluatedKey: { id: { S: 'q' } } })
      .resolvesOnce({ Items: [], LastEvaluatedKey: { connection: { S: 'acme' }, id: { N: '1' } } });
    expect(await ids.page({ segment: 0, totalSegments: 1, limit: 10 })).toEqual({ keys: [], after: { connection: 'acme', id: 'q' } });
    await expect(ids.page({ segment: 0, totalSegments: 1, limit: 10 })).rejects.toThrow('LastEvaluatedKey without a string connection and id');
    await expect(ids.page({ segment: 0, totalSegments: 1, limit: 10 })).rejects.toThrow('LastEvaluatedKey without a string connection and id');
  });

  it('throws what DynamoDB throws (the tick fails before anything of the page was sent)', async () => {
    const throttled = Object.assign(new Error('Throughput exceeds the current capacity'), { name: 'ThrottlingException' });
    ddb.on(ScanCommand).rejects(throttled);
    await expect(ids.page({ segment: 0, totalSegments: 1, limit: 10 })).rejects.toBe(throttled);
  });

  it('the item count from DescribeTable', async () => {
    ddb.on(DescribeTableCommand).resolvesOnce({ Table: { ItemCount: 1234 } }).resolvesOnce({ Table: {} });
    expect(await ids.approximateCount()).toBe(1234);
    expect(await ids.approximateCount()).toBeUndefined();
    expect(ddb.commandCalls(DescribeTableCommand).map((call) => call.args[0].input)).toEqual([{ TableName: 'items' }, { TableName: 'items' }]);
  });
});

describe('DynamoDbCursorStore', () => {
  const store = new DynamoDbCursorStore(dynamodb, 'control');
  const KEY = { pk: { S: 'reconcile-cursor' } };
  const cursor: Cursor = {
    pass: 4,
    startedAt: T,
    segments: [
      { after: { connection: 'acme', id: 'id-9' }, done: false, version: 3, ids: 30 },
      { done: true, version: 7, ids: 61 },
    ],
    previous: { pass: 3, startedAt: T - 86_400_000, endedAt: T - 80_000_000, ids: 90 },
  };
  const row = {
    pass: { N: '4' },
    startedAt: { S: '2026-01-01T12:00:00.000Z' },
    segments: {
      M: {
        '0': { M: { after: { M: { connection: { S: 'acme' }, id: { S: 'id-9' } } }, done: { BOOL: false }, version: { N: '3' }, ids: { N: '30' } } },
        '1': { M: { done: { BOOL: true }, version: { N: '7' }, ids: { N: '61' } } },
      },
    },
    previous: { M: { pass: { N: '3' }, startedAt: { S: '2025-12-31T12:00:00.000Z' }, endedAt: { S: '2025-12-31T13:46:40.000Z' }, ids: { N: '90' } } },
  };

  it('the row key is reconcile-cursor', () => {
    expect(RECONCILE_CURSOR_KEY).toBe('reconcile-cursor');
  });

  it('reads the row consistently by its key, and the cursor round-trips through it', async () => {
    expect(toRow(cursor)).toEqual(row);
    expect(fromRow(row)).toEqual(cursor);
    ddb.on(GetItemCommand).resolvesOnce({ Item: { ...KEY, ...row, endedAt: { S: '2026-01-01T13:00:00.000Z' } } }).resolvesOnce({});
    expect(await store.read()).toEqual({ ...cursor, endedAt: T + 3_600_000 });
    expect(await store.read()).toBeUndefined();
    expect(ddb.commandCalls(GetItemCommand).map((call) => call.args[0].input)).toEqual([
      { TableName: 'control', Key: KEY, ConsistentRead: true },
      { TableName: 'control', Key: KEY, ConsistentRead: true },
    ]);
  });

  it('a segment written before the items table was keyed by connection (after: the id alone) starts over', () => {
    const legacy = { ...row, segments: { M: { ...row.segments.M, '0': { M: { ...row.segments.M['0'].M, after: { S: 'id-9' } } } } } };
    expect(fromRow(legacy).segments[0]).toEqual({ done: false, version: 3, ids: 30 });
    expect(fromRow(legacy).segments[1]).toEqual(cursor.segments[1]);
  });

  it('a row that is not a cursor is an error that says what to do', () => {
    expect(() => fromRow({ ...row, segments: { M: { ...row.segments.M, '0': { M: { ...row.segments.M['0'].M, after: { M: { id: { S: 'x' } } } } } } } })).toThrow(
      '(attribute segments.0.after)',
    );
    expect(() => fromRow({ ...row, pass: { S: 'x' } })).toThrow(
      "the control table's reconcile-cursor row is not a reconcile cursor (attribute pass); delete the row to start a new pass",
    );
    expect(() => fromRow({ ...row, segments: { M: {} } })).toThrow('(attribute segments)');
    expect(() => fromRow({ ...row, segments: { M: { '1': row.segments.M['1'] } } })).toThrow('(attribute segments.0)');
    expect(() => fromRow({ ...row, startedAt: { S: 'yesterday' } })).toThrow('(attribute startedAt)');
  });

  it('starts the first pass only where there is no row, a later one only over the pass read', async () => {
    ddb.on(PutItemCommand).resolves({});
    expect(await store.startPass(cursor, undefined)).toBe('written');
    expect(await store.startPass(cursor, 3)).toBe('written');
    expect(ddb.commandCalls(PutItemCommand).map((call) => call.args[0].input)).toEqual([
      { TableName: 'control', Item: { ...KEY, ...row }, ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': 'pk' } },
      {
        TableName: 'control',
        Item: { ...KEY, ...row },
        ConditionExpression: '#pass = :expected',
        ExpressionAttributeNames: { '#pass': 'pass' },
        ExpressionAttributeValues: { ':expected': { N: '3' } },
      },
    ]);
  });

  it('advances one segment on condition of the pass and that segment’s version', async () => {
    ddb.on(UpdateItemCommand).resolves({});
    expect(await store.advance(4, 1, { after: { connection: 'acme', id: 'id-99' }, done: false, version: 8, ids: 71 }, 7)).toBe('written');
    expect(await store.advance(4, 0, { done: true, version: 4, ids: 35 }, 3)).toBe('written');
    expect(ddb.commandCalls(UpdateItemCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: 'control',
        Key: KEY,
        UpdateExpression: 'SET #segments.#segment = :next',
        ConditionExpression: '#pass = :pass AND #segments.#segment.#version = :expected',
        ExpressionAttributeNames: { '#segments': 'segments', '#segment': '1', '#pass': 'pass', '#version': 'version' },
        ExpressionAttributeValues: {
          ':next': { M: { after: { M: { connection: { S: 'acme' }, id: { S: 'id-99' } } }, done: { BOOL: false }, version: { N: '8' }, ids: { N: '71' } } },
          ':pass': { N: '4' },
          ':expected': { N: '7' },
        },
      },
      {
        TableName: 'control',
        Key: KEY,
        UpdateExpression: 'SET #segments.#segment = :next',
        ConditionExpression: '#pass = :pass AND #segments.#segment.#version = :expected',
        ExpressionAttributeNames: { '#segments': 'segments', '#segment': '0', '#pass': 'pass', '#version': 'version' },
        ExpressionAttributeValues: {
          ':next': { M: { done: { BOOL: true }, version: { N: '4' }, ids: { N: '35' } } },
          ':pass': { N: '4' },
          ':expected': { N: '3' },
        },
      },
    ]);
  });

  it('ends a pass once', async () => {
    ddb.on(UpdateItemCommand).resolves({});
    expect(await store.endPass(4, T + 60_000)).toBe('written');
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input).toEqual({
      TableName: 'control',
      Key: KEY,
      UpdateExpression: 'SET #endedAt = :endedAt',
      ConditionExpression: '#pass = :pass AND attribute_not_exists(#endedAt)',
      ExpressionAttributeNames: { '#pass': 'pass', '#endedAt': 'endedAt' },
      ExpressionAttributeValues: { ':pass': { N: '4' }, ':endedAt': { S: '2026-01-01T12:01:00.000Z' } },
    });
  });

  it('a failed condition is a conflict; anything else is thrown', async () => {
    const throttled = Object.assign(new Error('Rate of requests exceeds the allowed throughput'), { name: 'ThrottlingException' });
    ddb.on(UpdateItemCommand).rejectsOnce(conditionFailed()).rejectsOnce(throttled).rejectsOnce(conditionFailed());
    ddb.on(PutItemCommand).rejectsOnce(conditionFailed());
    expect(await store.advance(4, 0, { done: true, version: 4, ids: 35 }, 3)).toBe('conflict');
    await expect(store.advance(4, 0, { done: true, version: 4, ids: 35 }, 3)).rejects.toBe(throttled);
    expect(await store.endPass(4, T)).toBe('conflict');
    expect(await store.startPass(cursor, 3)).toBe('conflict');
  });
});

describe('SqsReconcileQueue', () => {
  const noSleep = async (): Promise<void> => undefined;
  const entries = () => sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);
  const ok = (input: { Entries?: SendMessageBatchRequestEntry[] }) => ({
    Successful: (input.Entries ?? []).map((entry) => ({ Id: entry.Id, MessageId: `msg-${entry.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  });

  it('the backlog: visible + in flight + delayed, from one GetQueueAttributes', async () => {
    sqs.on(GetQueueAttributesCommand).resolves({
      Attributes: { ApproximateNumberOfMessages: '120', ApproximateNumberOfMessagesNotVisible: '30', ApproximateNumberOfMessagesDelayed: '7' },
    });
    expect(await new SqsReconcileQueue(sqsClient, QUEUE_URL).backlog()).toBe(157);
    expect(sqs.commandCalls(GetQueueAttributesCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
      },
    ]);
  });

  it('sends {"connection", "id"} bodies (the item sync reads them back) with reconcilePass and lane = background, each in its connection’s message group, ten to a SendMessageBatch', async () => {
    // The attributes the item sync reads to tell a background record from a user's id.
    expect(RECONCILE_PASS_ATTRIBUTE).toBe('reconcilePass');
    expect(SYNC_READS_RECONCILE_PASS).toBe(RECONCILE_PASS_ATTRIBUTE);
    expect([LANE_ATTRIBUTE, BACKGROUND_LANE]).toEqual(['lane', 'background']);
    expect([SYNC_READS_LANE, SYNC_READS_BACKGROUND]).toEqual([LANE_ATTRIBUTE, BACKGROUND_LANE]);
    sqs.on(SendMessageBatchCommand).callsFake(ok);
    const keys = Array.from({ length: 23 }, (_, index) => ({ connection: index % 2 ? 'acme' : 'default', id: `id-${index}` }));
    keys[5] = { connection: 'acme', id: 'fld "quoted" é/..\\' };
    const queue = new SqsReconcileQueue(sqsClient, QUEUE_URL, { concurrency: 1, sleep: noSleep });
    expect(await queue.send(keys, 12)).toEqual({ refused: [] });
    expect(entries()).toEqual([0, 10, 20].map((start) => ({
      QueueUrl: QUEUE_URL,
      Entries: keys.slice(start, start + 10).map(({ connection, id }, position) => ({
        Id: `m${position}`,
        MessageBody: JSON.stringify({ connection, id }),
        MessageGroupId: connection,
        MessageAttributes: {
          reconcilePass: { DataType: 'Number', StringValue: '12' },
          lane: { DataType: 'String', StringValue: 'background' },
        },
      })),
    })));
    expect(entries()[0]!.Entries![1]!.MessageBody).toBe('{"connection":"acme","id":"id-1"}');
    expect(parseMessageBody(entries()[0]!.Entries![5]!.MessageBody!)).toEqual({ connection: 'acme', id: 'fld "quoted" é/..\\' });
  });

  it('keeps up to `concurrency` SendMessageBatch calls in flight', async () => {
    let inFlight = 0;
    let most = 0;
    sqs.on(SendMessageBatchCommand).callsFake(async (input) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight -= 1;
      return ok(input);
    });
    const keys = Array.from({ length: 100 }, (_, index) => ({ connection: 'default', id: `id-${index}` }));
    await new SqsReconcileQueue(sqsClient, QUEUE_URL, { concurrency: 4, sleep: noSleep }).send(keys, 1);
    expect(entries()).toHaveLength(10);
    expect(most).toBe(4);
  });

  it('sends again what SQS refused for a reason that may pass; returns what it refused as the sender’s fault', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .resolvesOnce({
        Successful: [{ Id: 'm0', MessageId: 'x', MD5OfMessageBody: 'x' }],
        Failed: [
          { Id: 'm1', SenderFault: true, Code: 'InvalidMessageContents', Message: 'bad characters' },
          { Id: 'm2', SenderFault: false, Code: 'InternalError', Message: 'try again' },
        ],
      })
      .callsFake(ok);
    const queue = new SqsReconcileQueue(sqsClient, QUEUE_URL, { sleep: noSleep });
    const keys = ['a', 'b', 'c'].map((id) => ({ connection: 'acme', id }));
    expect(await queue.send(keys, 2)).toEqual({ refused: [{ connection: 'acme', id: 'b', reason: 'InvalidMessageContents: bad characters' }] });
    expect(entries().map((input) => input.Entries!.map((entry) => entry.MessageBody))).toEqual([
      ['{"connection":"acme","id":"a"}', '{"connection":"acme","id":"b"}', '{"connection":"acme","id":"c"}'],
      ['{"connection":"acme","id":"c"}'],
    ]);
  });

  it('throws a TransientError when ids could not be sent after the bounded attempts (the page is sent again later)', async () => {
    sqs.on(SendMessageBatchCommand).rejects(Object.assign(new Error('socket hang up'), { name: 'TimeoutError' }));
    const sleeps: number[] = [];
    const queue = new SqsReconcileQueue(sqsClient, QUEUE_URL, { attempts: 3, backoffMs: 100, sleep: async (ms) => void sleeps.push(ms) });
    const error = await queue.send([{ connection: 'acme', id: 'a' }, { connection: 'acme', id: 'b' }], 1).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe('2 of 2 ids could not be sent to the reconcile queue (SendMessageBatch failed: TimeoutError: socket hang up)');
    expect(entries()).toHaveLength(3);
    expect(sleeps).toEqual([100, 200]);
  });
});
