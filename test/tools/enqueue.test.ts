/**
 * The enqueue tool's functions and CLI, with the SQS and DynamoDB clients mocked: batching, exact
 * entries, re-sends, giving up, validation before anything is sent, standard input, table scans and
 * queries, the connection of the messages.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { Readable } from 'node:stream';
import { DynamoDBClient, QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { QueueDoesNotExist, SendMessageBatchCommand, SQSClient, type SendMessageBatchCommandInput } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  backfillMessages,
  enqueueIds,
  enqueueMessages,
  InvalidIdsError,
  NoReconcileQueueError,
  main,
  messageBody,
  readIdLines,
  scanTableKeys,
  validateId,
} from '../../tools/enqueue/enqueue.js';
import { io } from './cli-io.js';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-items';
const RECONCILE_QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-reconcile';
/** The message attribute of the background lane. */
const BACKGROUND = { lane: { DataType: 'String', StringValue: 'background' } };
const sqsMock = mockClient(SQSClient);
const dynamoMock = mockClient(DynamoDBClient);
const noSleep = async (): Promise<void> => undefined;

/** Answers every SendMessageBatch call with every entry successful (message id `msg-<entry id>`). */
function acceptAll(): void {
  sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommandInput) => ({
    Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `msg-${e.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  }));
}

function sentEntries(): SendMessageBatchCommandInput['Entries'][] {
  return sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries);
}


beforeEach(() => {
  sqsMock.reset();
  dynamoMock.reset();
});

describe('validateId', () => {
  it('accepts ids of 1 to 1,024 bytes in UTF-8 without control characters', () => {
    expect(validateId('fil-0001')).toBeUndefined();
    expect(validateId('../getToken')).toBeUndefined();
    expect(validateId('Résumé ✓ 日本語 😀')).toBeUndefined();
    expect(validateId('x'.repeat(1024))).toBeUndefined();
    expect(validateId('😀'.repeat(256))).toBeUndefined(); // 256 characters, 1,024 bytes
  });

  it('names what is wrong', () => {
    expect(validateId('')).toMatch(/empty/);
    expect(validateId('x'.repeat(1025))).toBe('the item id is 1025 bytes long in UTF-8; the limit is 1024 bytes');
    expect(validateId('é'.repeat(600))).toBe('the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes');
    expect(validateId('😀'.repeat(300))).toBe('the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes');
    expect(validateId('日'.repeat(1000))).toBe('the item id is 3000 bytes long in UTF-8; the limit is 1024 bytes');
    expect(validateId('a\tb')).toMatch(/control character \(U\+0009\) at position 1/);
    expect(validateId('a\u0085')).toMatch(/control character \(U\+0085\)/);
    expect(validateId('a\ud800')).toMatch(/well-formed Unicode/);
    expect(validateId('a\uffff')).toMatch(/U\+FFFF .*SQS cannot carry/);
  });
});

describe('enqueueIds', () => {
  it('sends 23 ids in 3 calls of 10, 10 and 3 entries, each body exactly {"id":"…"}', async () => {
    acceptAll();
    const ids = Array.from({ length: 23 }, (_, i) => `fil-${String(i + 1).padStart(4, '0')}`);
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ids, { concurrency: 1, sleep: noSleep });

    const calls = sqsMock.commandCalls(SendMessageBatchCommand);
    expect(calls).toHaveLength(3);
    expect(calls.map((c) => c.args[0].input.QueueUrl)).toEqual([QUEUE_URL, QUEUE_URL, QUEUE_URL]);
    expect(sentEntries()).toEqual([
      ids.slice(0, 10).map((id, i) => ({ Id: String(i), MessageBody: `{"id":"${id}"}`, MessageGroupId: 'default' })),
      ids.slice(10, 20).map((id, i) => ({ Id: String(10 + i), MessageBody: `{"id":"${id}"}`, MessageGroupId: 'default' })),
      ids.slice(20).map((id, i) => ({ Id: String(20 + i), MessageBody: `{"id":"${id}"}`, MessageGroupId: 'default' })),
    ]);
    expect(sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 3);
    expect(result.sent.map((s) => s.id)).toEqual(ids);
    expect(result.sent[22]).toEqual({ id: 'fil-0023', messageId: 'msg-22' });
    expect(result).toMatchObject({ failed: [], resent: 0, calls: 3, duplicates: 0, aborted: false });
  });

  it('builds bodies with JSON.stringify (quotes, backslashes and non-ASCII kept exact)', async () => {
    acceptAll();
    const ids = ['a "quoted" \\ id', 'Résumé ✓.pdf', '../getToken'];
    await enqueueIds(new SQSClient({}), QUEUE_URL, ids, { sleep: noSleep });
    const bodies = sentEntries()[0]!.map((e) => e.MessageBody!);
    expect(bodies).toEqual(ids.map((id) => JSON.stringify({ id })));
    expect(bodies.map((b) => (JSON.parse(b) as { id: string }).id)).toEqual(ids);
    expect(messageBody('x')).toBe('{"id":"x"}');
  });

  it('re-sends only the entries the queue refused for a reason that may pass', async () => {
    sqsMock
      .on(SendMessageBatchCommand)
      .resolvesOnce({
        Successful: [{ Id: '0', MessageId: 'm0', MD5OfMessageBody: 'x' }, { Id: '2', MessageId: 'm2', MD5OfMessageBody: 'x' }],
        Failed: [{ Id: '1', SenderFault: false, Code: 'InternalError', Message: 'try again' }, { Id: '3', SenderFault: false, Code: 'ServiceUnavailable' }],
      })
      .resolvesOnce({
        Successful: [{ Id: '1', MessageId: 'm1', MD5OfMessageBody: 'x' }],
        Failed: [{ Id: '3', SenderFault: false, Code: 'InternalError' }],
      })
      .resolvesOnce({ Successful: [{ Id: '3', MessageId: 'm3', MD5OfMessageBody: 'x' }], Failed: [] });
    const progress: number[] = [];
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ['a', 'b', 'c', 'd'], {
      sleep: noSleep,
      onProgress: (p) => progress.push(p.sent),
    });

    expect(sentEntries()).toEqual([
      [
        { Id: '0', MessageBody: '{"id":"a"}', MessageGroupId: 'default' },
        { Id: '1', MessageBody: '{"id":"b"}', MessageGroupId: 'default' },
        { Id: '2', MessageBody: '{"id":"c"}', MessageGroupId: 'default' },
        { Id: '3', MessageBody: '{"id":"d"}', MessageGroupId: 'default' },
      ],
      [
        { Id: '1', MessageBody: '{"id":"b"}', MessageGroupId: 'default' },
        { Id: '3', MessageBody: '{"id":"d"}', MessageGroupId: 'default' },
      ],
      [{ Id: '3', MessageBody: '{"id":"d"}', MessageGroupId: 'default' }],
    ]);
    expect(result.sent.map((s) => s.id).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(result.failed).toEqual([]);
    expect(result.resent).toBe(3);
    expect(progress.at(-1)).toBe(4);
  });

  it('does not re-send entries refused as the sender\'s fault, and reports them', async () => {
    sqsMock.on(SendMessageBatchCommand).resolves({
      Successful: [{ Id: '0', MessageId: 'm0', MD5OfMessageBody: 'x' }],
      Failed: [{ Id: '1', SenderFault: true, Code: 'InvalidMessageContents', Message: 'Invalid characters found.' }],
    });
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ['a', 'b'], { sleep: noSleep });
    expect(sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 1);
    expect(result.failed).toEqual([{ id: 'b', code: 'InvalidMessageContents', message: 'Invalid characters found.', senderFault: true }]);
  });

  it('gives up after the bounded number of attempts, with backoff between them', async () => {
    sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommandInput) => ({
      Successful: (input.Entries ?? []).filter((e) => e.Id !== '1').map((e) => ({ Id: e.Id, MessageId: `m${e.Id}`, MD5OfMessageBody: 'x' })),
      Failed: (input.Entries ?? []).filter((e) => e.Id === '1').map((e) => ({ Id: e.Id, SenderFault: false, Code: 'InternalError', Message: 'boom' })),
    }));
    const sleeps: number[] = [];
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ['a', 'b', 'c'], {
      maxAttempts: 4,
      backoffMs: 100,
      sleep: async (ms) => void sleeps.push(ms),
    });
    expect(sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 4);
    expect(sleeps).toHaveLength(3);
    sleeps.forEach((ms, i) => expect(ms).toBeLessThanOrEqual(100 * 2 ** i));
    expect(result.sent.map((s) => s.id)).toEqual(['a', 'c']);
    expect(result.failed).toEqual([{ id: 'b', code: 'InternalError', message: 'boom (gave up after 4 attempts)', senderFault: false }]);
  });

  it('waits base × 2^(n-1), capped at 5 s, with full jitter (anywhere from nothing to the step)', async () => {
    sqsMock.on(SendMessageBatchCommand).resolves({ Failed: [{ Id: '0', SenderFault: false, Code: 'InternalError', Message: 'boom' }] });
    for (const [backoffMs, random, expected] of [
      [100, 0.5, [50, 100, 200]],
      [2_000, 0.5, [1000, 2000, 2500]],
      [2_000, 0, [0, 0, 0]],
    ] as const) {
      const sleeps: number[] = [];
      await enqueueIds(new SQSClient({}), QUEUE_URL, ['a'], { maxAttempts: 4, backoffMs, random: () => random, sleep: async (ms) => void sleeps.push(ms) });
      expect(sleeps).toEqual(expected);
    }
  });

  it('re-sends a whole batch after a call that failed in a way that may pass', async () => {
    const networkError = Object.assign(new Error('socket hang up'), { name: 'TimeoutError' });
    sqsMock
      .on(SendMessageBatchCommand)
      .rejectsOnce(networkError)
      .resolves({ Successful: [{ Id: '0', MessageId: 'm0', MD5OfMessageBody: 'x' }], Failed: [] });
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ['a'], { sleep: noSleep });
    expect(sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 2);
    expect(result).toMatchObject({ sent: [{ id: 'a', messageId: 'm0' }], failed: [], resent: 1 });
  });

  it('stops at an error every further call would repeat (no such queue)', async () => {
    sqsMock
      .on(SendMessageBatchCommand)
      .rejects(new QueueDoesNotExist({ message: 'The specified queue does not exist.', $metadata: {} }));
    const ids = Array.from({ length: 35 }, (_, i) => `id-${i}`);
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ids, { concurrency: 1, sleep: noSleep });
    expect(sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 1);
    expect(result.aborted).toBe(true);
    expect(result.sent).toEqual([]);
    expect(result.failed).toHaveLength(35);
    expect(result.failed[0]).toMatchObject({ id: 'id-0', code: 'QueueDoesNotExist' });
  });

  it('validates every id before sending anything, naming each bad one', async () => {
    acceptAll();
    const ids = [...Array.from({ length: 15 }, (_, i) => `ok-${i}`), 'bad\u0007id', '', 'fine'];
    const error = await enqueueIds(new SQSClient({}), QUEUE_URL, ids).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidIdsError);
    expect((error as InvalidIdsError).invalid).toEqual([
      { index: 15, id: 'bad\u0007id', reason: expect.stringMatching(/control character \(U\+0007\)/) },
      { index: 16, id: '', reason: 'the item id is empty' },
    ]);
    expect((error as Error).message).toContain('#16 "bad\\u0007id"');
    expect((error as Error).message).toContain('nothing sent');
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });

  it('sends a repeated id once', async () => {
    acceptAll();
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ['a', 'b', 'a'], { sleep: noSleep });
    expect(sentEntries()).toEqual([[{ Id: '0', MessageBody: '{"id":"a"}', MessageGroupId: 'default' }, { Id: '1', MessageBody: '{"id":"b"}', MessageGroupId: 'default' }]]);
    expect(result.duplicates).toBe(1);
  });
});

describe('readIdLines', () => {
  it('reads one id per line, trimming whitespace and CRs, skipping blank lines', async () => {
    const ids = await readIdLines(Readable.from(['fil-0001\r\n  fil-0002  \n', '\n\nRésumé ✓.pdf\nlast-without-newline']));
    expect(ids).toEqual(['fil-0001', 'fil-0002', 'Résumé ✓.pdf', 'last-without-newline']);
  });
});

describe('scanTableKeys', () => {
  const key = (connection: string, id: string) => ({ connection: { S: connection }, id: { S: id } });
  const names = { '#connection': 'connection', '#id': 'id' };

  it('scans every row through every page, projecting only the key (connection and id)', async () => {
    dynamoMock
      .on(ScanCommand)
      .resolvesOnce({ Items: [key('acme', 'a'), key('acme', 'b')], LastEvaluatedKey: key('acme', 'b') })
      .resolvesOnce({ Items: [key('default', 'a')], LastEvaluatedKey: key('default', 'a') })
      .resolvesOnce({ Items: [key('globex', 'd')] });
    const progress: number[] = [];
    const keys = await scanTableKeys(new DynamoDBClient({}), 'items', { onProgress: (n) => progress.push(n) });

    expect(keys).toEqual([
      { connection: 'acme', id: 'a' },
      { connection: 'acme', id: 'b' },
      { connection: 'default', id: 'a' },
      { connection: 'globex', id: 'd' },
    ]);
    expect(progress).toEqual([2, 3, 4]);
    const scan = { TableName: 'items', ProjectionExpression: '#connection, #id', ExpressionAttributeNames: names };
    expect(dynamoMock.commandCalls(ScanCommand).map((c) => c.args[0].input)).toEqual([
      scan,
      { ...scan, ExclusiveStartKey: key('acme', 'b') },
      { ...scan, ExclusiveStartKey: key('default', 'a') },
    ]);
    expect(dynamoMock).not.toReceiveCommand(QueryCommand);
  });

  it('with a connection: a Query on the partition key, through every page', async () => {
    dynamoMock
      .on(QueryCommand)
      .resolvesOnce({ Items: [key('acme', 'a')], LastEvaluatedKey: key('acme', 'a') })
      .resolvesOnce({ Items: [key('acme', 'b')] });
    const keys = await scanTableKeys(new DynamoDBClient({}), 'items', { connection: 'acme', pageSize: 1 });

    expect(keys).toEqual([
      { connection: 'acme', id: 'a' },
      { connection: 'acme', id: 'b' },
    ]);
    const query = {
      TableName: 'items',
      ProjectionExpression: '#connection, #id',
      Limit: 1,
      KeyConditionExpression: '#connection = :connection',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: { ':connection': { S: 'acme' } },
    };
    expect(dynamoMock.commandCalls(QueryCommand).map((c) => c.args[0].input)).toEqual([query, { ...query, ExclusiveStartKey: key('acme', 'a') }]);
    expect(dynamoMock).not.toReceiveCommand(ScanCommand);
  });
});

describe('messages of a connection', () => {
  it('with a connection, every body is exactly {"connection":"…","id":"…"}', async () => {
    acceptAll();
    const result = await enqueueIds(new SQSClient({}), QUEUE_URL, ['a', 'b "q"'], { connection: 'acme', sleep: noSleep });
    expect(sentEntries()).toEqual([
      [
        { Id: '0', MessageBody: '{"connection":"acme","id":"a"}', MessageGroupId: 'acme' },
        { Id: '1', MessageBody: '{"connection":"acme","id":"b \\"q\\""}', MessageGroupId: 'acme' },
      ],
    ]);
    expect(result.sent).toEqual([
      { connection: 'acme', id: 'a', messageId: 'msg-0' },
      { connection: 'acme', id: 'b "q"', messageId: 'msg-1' },
    ]);
    expect(messageBody('x', 'acme')).toBe('{"connection":"acme","id":"x"}');
  });

  it('the same id of two connections is two messages; the same id of one connection, one', async () => {
    acceptAll();
    const result = await enqueueMessages(
      new SQSClient({}),
      QUEUE_URL,
      [{ connection: 'acme', id: 'a' }, { connection: 'globex', id: 'a' }, { connection: 'acme', id: 'a' }, { id: 'a' }],
      { sleep: noSleep },
    );
    expect(sentEntries()[0]!.map((entry) => entry.MessageBody)).toEqual(['{"connection":"acme","id":"a"}', '{"connection":"globex","id":"a"}', '{"id":"a"}']);
    expect(result.duplicates).toBe(1);
  });

  it('validates the connection with the ids, before anything is sent', async () => {
    acceptAll();
    const error = await enqueueMessages(new SQSClient({}), QUEUE_URL, [{ connection: 'acme', id: 'a' }, { connection: 'bad one', id: 'b' }]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidIdsError);
    expect((error as InvalidIdsError).invalid).toEqual([
      { index: 1, connection: 'bad one', id: 'b', reason: 'the connection id may hold only the characters A-Z a-z 0-9 . _ -' },
    ]);
    expect((error as Error).message).toContain('#2 bad one "b": the connection id may hold only');
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });
});

describe('a backfill (the background lane)', () => {
  it('sends every message to the reconcile queue with lane = background, in its connection’s message group', async () => {
    acceptAll();
    const result = await backfillMessages(new SQSClient({}), RECONCILE_QUEUE_URL, [{ connection: 'acme', id: 'a' }, { connection: 'acme', id: 'b' }, { id: 'c' }], {
      sleep: noSleep,
    });
    expect(sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: RECONCILE_QUEUE_URL,
        Entries: [
          { Id: '0', MessageBody: '{"connection":"acme","id":"a"}', MessageGroupId: 'acme', MessageAttributes: BACKGROUND },
          { Id: '1', MessageBody: '{"connection":"acme","id":"b"}', MessageGroupId: 'acme', MessageAttributes: BACKGROUND },
          { Id: '2', MessageBody: '{"id":"c"}', MessageGroupId: 'default', MessageAttributes: BACKGROUND },
        ],
      },
    ]);
    expect(result).toMatchObject({ failed: [], calls: 1 });
  });

  it('fails naming freshnessHours when the deployment has no reconcile queue, sending nothing', async () => {
    acceptAll();
    const error = await backfillMessages(new SQSClient({}), undefined, [{ connection: 'acme', id: 'a' }]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoReconcileQueueError);
    expect((error as Error).message).toBe(
      'a backfill goes to the reconcile queue, and this deployment has none (freshnessHours is 0); send the ids to the sync queue instead, without --backfill',
    );
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });
});

describe('the CLI', () => {
  const deps = { sqs: new SQSClient({}), dynamodb: new DynamoDBClient({}), enqueue: { sleep: noSleep } };

  it('sends the ids given as arguments and prints each', async () => {
    acceptAll();
    const cli = io();
    const status = await main(['--queue-url', QUEUE_URL, 'fil-0001', 'fil-0002'], cli, deps);
    expect(status).toBe(0);
    expect(cli.out()).toBe('sent "fil-0001" msg-0\nsent "fil-0002" msg-1\n');
    expect(cli.err()).toMatch(/Sent 2 of 2 ids from arguments to .*content-sync-items in 1 SendMessageBatch call/);
  });

  it('reads ids from standard input when none are given', async () => {
    acceptAll();
    const cli = io('a\nb\n\n c \n');
    expect(await main(['--queue-url', QUEUE_URL], cli, deps)).toBe(0);
    expect(sentEntries()).toEqual([
      [
        { Id: '0', MessageBody: '{"id":"a"}', MessageGroupId: 'default' },
        { Id: '1', MessageBody: '{"id":"b"}', MessageGroupId: 'default' },
        { Id: '2', MessageBody: '{"id":"c"}', MessageGroupId: 'default' },
      ],
    ]);
    expect(cli.err()).toContain('from standard input');
  });

  it('exits 1 naming a bad id, having sent nothing', async () => {
    acceptAll();
    const cli = io(`good\n${'x'.repeat(1025)}\nalso-good\n`);
    expect(await main(['--queue-url', QUEUE_URL], cli, deps)).toBe(1);
    expect(cli.err()).toMatch(/1 invalid id, nothing sent:\n {2}#2 "x{120}"… \(1025 characters\): the item id is 1025 bytes long in UTF-8; the limit is 1024 bytes/);
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });

  it('exits 1 for an id of 600 characters that is 1,200 bytes in UTF-8, having sent nothing', async () => {
    acceptAll();
    const cli = io(`good\n${'é'.repeat(600)}\n`);
    expect(await main(['--queue-url', QUEUE_URL, '--connection', 'acme'], cli, deps)).toBe(1);
    expect(cli.err()).toContain(`1 invalid id, nothing sent:\n  #2 acme ${JSON.stringify('é'.repeat(120))}… (600 characters): the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes`);
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });

  it('exits 1 and lists what could not be sent', async () => {
    sqsMock.on(SendMessageBatchCommand).resolves({
      Successful: [{ Id: '0', MessageId: 'm0', MD5OfMessageBody: 'x' }],
      Failed: [{ Id: '1', SenderFault: true, Code: 'InvalidMessageContents', Message: 'no' }],
    });
    const cli = io();
    expect(await main(['--queue-url', QUEUE_URL, 'a', 'b'], cli, deps)).toBe(1);
    expect(cli.out()).toBe('sent "a" m0\n');
    expect(cli.err()).toContain('not sent "b": InvalidMessageContents no (refused, not re-sent)');
    expect(cli.err()).toContain('1 id was not sent');
  });

  it('--resync-table scans the table and enqueues every row with its connection, with progress', async () => {
    acceptAll();
    const row = (i: number) => ({ connection: { S: i % 2 ? 'acme' : 'default' }, id: { S: `id-${i}` } });
    dynamoMock
      .on(ScanCommand)
      .resolvesOnce({ Items: Array.from({ length: 12 }, (_, i) => row(i)), LastEvaluatedKey: row(11) })
      .resolvesOnce({ Items: [row(12)] });
    const cli = io();
    expect(await main(['--queue-url', QUEUE_URL, '--resync-table', 'content-sync-items'], cli, deps)).toBe(0);
    expect(dynamoMock.commandCalls(ScanCommand)[0]!.args[0].input.TableName).toBe('content-sync-items');
    expect(sentEntries().map((e) => e!.length)).toEqual([10, 3]);
    expect(sentEntries()[0]!.slice(0, 2)).toEqual([
      { Id: '0', MessageBody: '{"connection":"default","id":"id-0"}', MessageGroupId: 'default' },
      { Id: '1', MessageBody: '{"connection":"acme","id":"id-1"}', MessageGroupId: 'acme' },
    ]);
    expect(cli.out().trim().split('\n')).toHaveLength(13);
    expect(cli.out()).toContain('sent acme "id-1" msg-1\n');
    expect(cli.err()).toContain('scanned content-sync-items: 13 ids');
    expect(cli.err()).toContain('Sent 13 of 13 ids from table content-sync-items');
  });

  it('--resync-table with --connection queries that connection\'s rows only', async () => {
    acceptAll();
    dynamoMock.on(QueryCommand).resolves({ Items: [{ connection: { S: 'acme' }, id: { S: 'a' } }, { connection: { S: 'acme' }, id: { S: 'b' } }] });
    const cli = io();
    expect(await main(['--queue-url', QUEUE_URL, '--resync-table', 'content-sync-items', '--connection', 'acme'], cli, deps)).toBe(0);
    expect(dynamoMock).not.toReceiveCommand(ScanCommand);
    expect(dynamoMock).toReceiveCommandWith(QueryCommand, {
      TableName: 'content-sync-items',
      KeyConditionExpression: '#connection = :connection',
      ExpressionAttributeValues: { ':connection': { S: 'acme' } },
    });
    expect(sentEntries()).toEqual([
      [
        { Id: '0', MessageBody: '{"connection":"acme","id":"a"}', MessageGroupId: 'acme' },
        { Id: '1', MessageBody: '{"connection":"acme","id":"b"}', MessageGroupId: 'acme' },
      ],
    ]);
    expect(cli.err()).toContain('queried content-sync-items (connection acme): 2 ids');
  });

  it('--connection gives the ids of the arguments or of standard input that connection', async () => {
    acceptAll();
    const cli = io('x\n');
    expect(await main(['--queue-url', QUEUE_URL, '--connection', 'acme'], cli, deps)).toBe(0);
    expect(sentEntries()).toEqual([[{ Id: '0', MessageBody: '{"connection":"acme","id":"x"}', MessageGroupId: 'acme' }]]);
    expect(cli.out()).toBe('sent acme "x" msg-0\n');
    expect(cli.err()).toContain('from standard input (connection acme)');

    sqsMock.resetHistory();
    expect(await main(['--queue-url', QUEUE_URL, '--connection', 'default', 'y'], io(), deps)).toBe(0);
    expect(sentEntries()).toEqual([[{ Id: '0', MessageBody: '{"connection":"default","id":"y"}', MessageGroupId: 'default' }]]);
  });

  it('a bad --connection is a usage error (status 2) naming why, before anything is read or sent', async () => {
    for (const [connection, reason] of [
      ['acme corp', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -'],
      ['c'.repeat(65), 'the connection id is 65 characters long; the limit is 64'],
      ['', 'the connection id is empty'],
    ] as const) {
      const cli = io('a\n');
      expect(await main(['--queue-url', QUEUE_URL, '--connection', connection, '--resync-table', 't'], cli, deps)).toBe(2);
      expect(cli.err()).toContain(`enqueue: --connection: ${reason}`);
    }
    expect(dynamoMock.calls()).toHaveLength(0);
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });

  it('--backfill sends the ids (arguments or standard input) to --reconcile-queue-url in the background lane, and says so', async () => {
    acceptAll();
    const cli = io('x\ny\n');
    expect(await main(['--reconcile-queue-url', RECONCILE_QUEUE_URL, '--backfill', '--connection', 'acme'], cli, deps)).toBe(0);
    expect(sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: RECONCILE_QUEUE_URL,
        Entries: [
          { Id: '0', MessageBody: '{"connection":"acme","id":"x"}', MessageGroupId: 'acme', MessageAttributes: BACKGROUND },
          { Id: '1', MessageBody: '{"connection":"acme","id":"y"}', MessageGroupId: 'acme', MessageAttributes: BACKGROUND },
        ],
      },
    ]);
    expect(cli.out()).toBe('sent acme "x" msg-0\nsent acme "y" msg-1\n');
    expect(cli.err()).toContain(`Sent 2 of 2 ids from standard input (connection acme) to ${RECONCILE_QUEUE_URL} (a backfill, in the background lane)`);

    sqsMock.resetHistory();
    expect(await main(['--backfill', '--reconcile-queue-url', RECONCILE_QUEUE_URL, 'z'], io(), deps)).toBe(0);
    expect(sentEntries()).toEqual([[{ Id: '0', MessageBody: '{"id":"z"}', MessageGroupId: 'default', MessageAttributes: BACKGROUND }]]);
  });

  it('--backfill with --resync-table sends the rows of the table to the reconcile queue in the background lane', async () => {
    acceptAll();
    dynamoMock.on(QueryCommand).resolves({ Items: [{ connection: { S: 'acme' }, id: { S: 'a' } }] });
    const cli = io();
    expect(await main(['--reconcile-queue-url', RECONCILE_QUEUE_URL, '--backfill', '--resync-table', 'content-sync-items', '--connection', 'acme'], cli, deps)).toBe(0);
    expect(sqsMock).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: RECONCILE_QUEUE_URL,
      Entries: [{ Id: '0', MessageBody: '{"connection":"acme","id":"a"}', MessageGroupId: 'acme', MessageAttributes: BACKGROUND }],
    });
  });

  it('--backfill goes with --reconcile-queue-url only: anything else is a usage error naming the reconcile queue’s output', async () => {
    acceptAll();
    const cases: Array<[string[], string]> = [
      [['--backfill', 'a'], "enqueue: --backfill needs --reconcile-queue-url: the stateful stack's output ReconcileQueueUrl"],
      [
        ['--backfill', '--queue-url', QUEUE_URL, 'a'],
        "enqueue: a backfill goes to the reconcile queue: give --reconcile-queue-url (the stateful stack's output ReconcileQueueUrl) instead of --queue-url",
      ],
      [['--reconcile-queue-url', RECONCILE_QUEUE_URL, 'a'], "enqueue: --reconcile-queue-url goes with --backfill; users' ids go to the sync queue (--queue-url)"],
      [['--backfill', '--reconcile-queue-url', 'nope', 'a'], 'enqueue: --reconcile-queue-url must be a queue URL'],
    ];
    for (const [argv, message] of cases) {
      const cli = io();
      expect(await main(argv, cli, deps)).toBe(2);
      expect(cli.err()).toContain(message);
    }
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });

  it('--dry-run validates without sending', async () => {
    acceptAll();
    const cli = io();
    expect(await main(['--queue-url', QUEUE_URL, '--dry-run', 'a', 'b'], cli, deps)).toBe(0);
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
    expect(cli.err()).toContain('Dry run: 2 valid ids');
  });

  it('answers usage errors with status 2', async () => {
    for (const argv of [[], ['a'], ['--queue-url', 'not-a-url', 'a'], ['--queue-url', QUEUE_URL, '--resync-table', 't', 'a'], ['--bogus']]) {
      const cli = io();
      expect(await main(argv, cli, deps)).toBe(2);
      expect(cli.err()).toMatch(/^enqueue: /);
    }
    const help = io();
    expect(await main(['--help'], help, deps)).toBe(0);
    expect(help.out()).toContain('--resync-table');
    expect(help.out()).toContain('--connection <id>');
    expect(help.out()).toContain('--backfill');
    expect(help.out()).toContain('--reconcile-queue-url <url>');
    expect(sqsMock).not.toReceiveCommand(SendMessageBatchCommand);
  });
});
