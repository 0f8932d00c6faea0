/**
 * The eraser's handler (functions/connection-eraser/app.ts) over DynamoDB Local and s3rver, the erase
 * queue a mocked SQS: a message before its erase's safety wait has passed is sent back delayed, one
 * after it is erased, a malformed one or a failure is reported in `batchItemFailures`, an
 * invocation whose time runs short sends its erase back; one log line per message; the S3 client is
 * loaded when first needed, once.
 */
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { createEraserHandler, ERASE_SAFETY_MARGIN_MS, parseRequest } from '../../../functions/connection-eraser/app.js';
import type { EraserConfig } from '../../../functions/shared/client-config.js';
import type { EraseRequest } from '../../../functions/shared/connections/erase.js';
import { ERASER_SERVICE } from '../../../functions/shared/metric-names.js';
import { iso, NOW, PAGE_QUARTER, SEEDED, SETTLE_SECONDS, TestClock, useEraseWorld } from '../shared/connections/erase-harness.js';

const world = useEraseWorld();
const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-erase';
const AFTER = NOW + SETTLE_SECONDS * 1000;
const sqsMock = mockClient(SQSClient);

beforeEach(() => {
  sqsMock.reset();
  sqsMock.on(SendMessageCommand).resolves({ MessageId: 'sent-1' });
});

function context(remainingMs: number): Context {
  return {
    functionName: 'connection-eraser',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:connection-eraser',
    memoryLimitInMB: '256',
    awsRequestId: 'req-1',
    logGroupName: '/aws/lambda/connection-eraser',
    logStreamName: 'stream',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => remainingMs,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

function record(messageId: string, body: string): SQSRecord {
  return {
    messageId,
    receiptHandle: `handle-${messageId}`,
    body,
    attributes: { ApproximateReceiveCount: '1', SentTimestamp: String(NOW), SenderId: 'sender', ApproximateFirstReceiveTimestamp: String(NOW) },
    messageAttributes: {},
    md5OfBody: 'md5',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:content-sync-erase',
    awsRegion: 'eu-west-1',
  };
}

const bodyOf = (request: EraseRequest): string => JSON.stringify({ connection: request.connection, startedAt: request.startedAt });
const sent = () => sqsMock.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
const sentBack = (request: EraseRequest, delaySeconds: number) => ({ QueueUrl: QUEUE_URL, MessageBody: bodyOf(request), DelaySeconds: delaySeconds });

/** The handler on this test's tables and bucket, its clock at `at`; counts the loads of its S3 client. */
function eraser(options: { at?: number; config?: Partial<EraserConfig> } = {}) {
  const clock = new TestClock(options.at ?? AFTER);
  const loads = { s3: 0 };
  const handler = createEraserHandler({
    config: {
      connectionsTableName: world.connectionsTable,
      itemsTableName: world.itemsTable,
      itemsBucketName: world.bucket,
      changesTableName: world.changesTable,
      eraseQueueUrl: QUEUE_URL,
      ...options.config,
    },
    dynamodb: world.db,
    s3: async () => {
      loads.s3 += 1;
      return world.s3Client;
    },
    sqs: new SQSClient({ region: 'eu-west-1' }),
    clock,
    sleep: async () => undefined,
  });
  async function invoke(records: SQSRecord[], remainingMs = 300_000) {
    const event: SQSEvent = { Records: records };
    const { result, error, output } = await captureOutput(() => handler(event, context(remainingMs)));
    if (error) throw error;
    const lines = jsonLines(output).filter((line): line is Record<string, unknown> => typeof line !== 'string');
    return { result, lines };
  }
  return { clock, loads, invoke };
}

/** A log line's own fields (without Powertools' function context and timestamp). */
function fields(line: Record<string, unknown>): Record<string, unknown> {
  const { timestamp: _t, function_name: _n, function_arn: _a, function_memory_size: _m, function_request_id: _r, cold_start: _c, xray_trace_id: _x, sampling_rate: _s, ...rest } = line;
  return rest;
}

describe('the eraser handler', () => {
  it('a message before notBefore: sent back to the erase queue with the same body, delayed for the wait left (900 s at most); no failure, nothing deleted, no S3 client', async () => {
    await world.seed();
    const acme = await world.removeForErase('acme', NOW);
    const other = await world.removeForErase('other', NOW, 2000);
    const { invoke, loads } = eraser({ at: NOW + 30_000 });

    const run = await invoke([record('m-1', bodyOf(acme)), record('m-2', bodyOf(other))]);
    expect(run.result).toEqual({ batchItemFailures: [] });
    expect(sent()).toEqual([sentBack(acme, 120), sentBack(other, 900)]);
    expect(run.lines.map(fields)).toEqual([
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'acme', startedAt: acme.startedAt, kind: 'wait', seconds: 120 },
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'other', startedAt: other.startedAt, kind: 'wait', seconds: 1970 },
    ]);
    expect(run.lines[0]).toMatchObject({ function_name: 'connection-eraser', function_request_id: 'req-1' });
    expect(loads.s3).toBe(0);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    expect(await world.eraseOf('acme')).toMatchObject({ state: 'waiting', rowsDeleted: 0, objectsDeleted: 0 });
  });

  it("a message after notBefore: erased, one `erase` line with its connection; no failure, no message; the S3 client loaded once, when first needed", async () => {
    await world.seed();
    const acme = await world.removeForErase('acme', NOW);
    const { invoke, loads } = eraser();

    const run = await invoke([record('m-1', bodyOf(acme))]);
    expect(run.result).toEqual({ batchItemFailures: [] });
    expect(run.lines.map(fields)).toEqual([
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'acme', startedAt: acme.startedAt, kind: 'done', rowsDeleted: SEEDED.rowsDeleted, objectsDeleted: SEEDED.objectsDeleted },
    ]);
    expect(sent()).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
    expect(await world.row('acme')).toBeUndefined();
    expect(await world.store().get('other', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-other-secret-1' });
    expect(loads.s3).toBe(1);

    // The next erase of the container, and the same message delivered again.
    const other = await world.removeForErase('other', NOW);
    const next = await invoke([record('m-2', bodyOf(other)), record('m-1', bodyOf(acme))]);
    expect(next.result).toEqual({ batchItemFailures: [] });
    expect(next.lines.map((line) => [line['connection'], line['kind'], line['rowsDeleted'], line['objectsDeleted']])).toEqual([
      ['other', 'done', 3, 2],
      ['acme', 'done', 0, 0],
    ]);
    expect(await world.rows()).toEqual([]);
    expect(await world.objects()).toEqual(['items/acmeX/fil-1.json', 'legacy/kept.json']);
    expect(loads.s3).toBe(1);
  });

  it('malformed messages: each in batchItemFailures with an `erase message refused` line; the good one of the batch is erased', async () => {
    await world.seed();
    const acme = await world.removeForErase('acme', NOW);
    const { invoke } = eraser();
    const run = await invoke([
      record('m-1', 'not json {'),
      record('m-2', JSON.stringify({ connection: 'a/b', startedAt: acme.startedAt })),
      record('m-3', JSON.stringify({ connection: 'acme', startedAt: 'yesterday' })),
      record('m-4', 'null'),
      record('m-5', JSON.stringify({ connection: 'acme' })),
      record('m-6', JSON.stringify({ connection: '..', startedAt: acme.startedAt })),
      record('m-ok', bodyOf(acme)),
    ]);
    expect(run.result).toEqual({ batchItemFailures: ['m-1', 'm-2', 'm-3', 'm-4', 'm-5', 'm-6'].map((itemIdentifier) => ({ itemIdentifier })) });
    const refused = (messageId: string, reason: string) => ({ level: 'ERROR', message: 'erase message refused', service: ERASER_SERVICE, messageId, reason });
    expect(run.lines.map(fields)).toEqual([
      refused('m-1', 'the body is not JSON'),
      refused('m-2', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -'),
      refused('m-3', 'startedAt is not an ISO-8601 time'),
      refused('m-4', 'the connection is undefined, not a string'),
      refused('m-5', 'startedAt is not an ISO-8601 time'),
      refused('m-6', 'the connection id may not be made of dots only'),
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'acme', startedAt: acme.startedAt, kind: 'done', rowsDeleted: SEEDED.rowsDeleted, objectsDeleted: SEEDED.objectsDeleted },
    ]);
    expect(sent()).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
  });

  it('parseRequest: the erase a body asks for (other fields ignored), or why it is not one', () => {
    expect(parseRequest(JSON.stringify({ connection: 'acme', startedAt: iso(NOW), extra: 1 }))).toEqual({ connection: 'acme', startedAt: iso(NOW) });
    expect(parseRequest(JSON.stringify({ connection: 7, startedAt: iso(NOW) }))).toBe('the connection is number, not a string');
    expect(parseRequest(JSON.stringify({ connection: 'acme', startedAt: 7 }))).toBe('startedAt is not an ISO-8601 time');
    expect(parseRequest('')).toBe('the body is not JSON');
  });

  it('an AWS failure (the items table does not exist): in batchItemFailures with an `erase failed` line naming the call; progress kept; the next delivery finishes', async () => {
    await world.seed();
    const acme = await world.removeForErase('acme', NOW);
    const broken = eraser({ config: { itemsTableName: 'no-such-table' } });

    const run = await broken.invoke([record('m-1', bodyOf(acme))]);
    expect(run.result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-1' }] });
    expect(run.lines.map(fields)).toEqual([
      {
        level: 'ERROR',
        message: 'erase failed',
        service: ERASER_SERVICE,
        connection: 'acme',
        startedAt: acme.startedAt,
        error: { name: 'AwsCallError', message: 'DynamoDB Query on the items table no-such-table failed (ResourceNotFoundException, HTTP 400)' },
      },
    ]);
    expect(sent()).toEqual([]);
    expect(await world.eraseOf('acme')).toEqual({ state: 'running', startedAt: acme.startedAt, notBefore: iso(AFTER), rowsDeleted: 0, objectsDeleted: 0 });
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);

    const again = await eraser({ at: AFTER + 60_000 }).invoke([record('m-1', bodyOf(acme))]);
    expect(again.result).toEqual({ batchItemFailures: [] });
    expect(again.lines.map(fields)).toMatchObject([{ message: 'erase', kind: 'done', rowsDeleted: SEEDED.rowsDeleted, objectsDeleted: SEEDED.objectsDeleted }]);
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
  });

  it('the erase queue refuses the message sent back: in batchItemFailures with an `erase failed` line', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    const acme = await world.removeForErase('acme', NOW);
    sqsMock.on(SendMessageCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const run = await eraser({ at: NOW }).invoke([record('m-1', bodyOf(acme))]);
    expect(run.result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-1' }] });
    expect(run.lines.map(fields)).toEqual([
      {
        level: 'ERROR',
        message: 'erase failed',
        service: ERASER_SERVICE,
        connection: 'acme',
        startedAt: acme.startedAt,
        error: { name: 'TransientError', message: 'SQS SendMessage to the erase queue failed (ThrottlingException): ask for the erase again' },
      },
    ]);
    expect(sent()).toEqual([sentBack(acme, SETTLE_SECONDS)]);
  });

  it('time runs short after the first page: sent back with no delay, its progress kept; the next delivery finishes', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    await world.put('other', 'rt-other-secret-1');
    // Six rows of 300 KB: a 1 MB Query page holds four.
    for (let i = 0; i < 6; i++) await world.itemRow('acme', `big-${i}`, { key: `items/acme/big-${i}.json`, pad: PAGE_QUARTER });
    await world.itemRow('other', 'big-0', { key: 'items/other/big-0.json' });
    for (const key of ['items/acme/big-0.json', 'items/acme/big-5.json', 'items/other/big-0.json']) await world.putObject(key);
    const acme = await world.removeForErase('acme', NOW);
    const { invoke, loads } = eraser();

    const run = await invoke([record('m-1', bodyOf(acme))], ERASE_SAFETY_MARGIN_MS - 1);
    expect(run.result).toEqual({ batchItemFailures: [] });
    expect(run.lines.map(fields)).toEqual([
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'acme', startedAt: acme.startedAt, kind: 'unfinished', rowsDeleted: 4, objectsDeleted: 4 },
    ]);
    expect(sent()).toEqual([sentBack(acme, 0)]);
    expect(await world.eraseOf('acme')).toEqual({ state: 'running', startedAt: acme.startedAt, notBefore: iso(AFTER), rowsDeleted: 4, objectsDeleted: 4 });
    expect(await world.rows()).toEqual(['acme/big-4', 'acme/big-5', 'other/big-0']);
    // The keys the first page's rows named went before those rows (the S3 client loaded for them).
    expect(await world.objects()).toEqual(['items/acme/big-5.json', 'items/other/big-0.json']);
    expect(loads.s3).toBe(1);

    // The message sent back, delivered at once; the margin left exactly: it does not stop.
    const next = await invoke([record('m-2', bodyOf(acme))], ERASE_SAFETY_MARGIN_MS);
    expect(next.result).toEqual({ batchItemFailures: [] });
    expect(next.lines.map(fields)).toEqual([
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'acme', startedAt: acme.startedAt, kind: 'done', rowsDeleted: 6, objectsDeleted: 6 },
    ]);
    expect(sent()).toEqual([sentBack(acme, 0)]);
    expect(await world.rows()).toEqual(['other/big-0']);
    expect(await world.objects()).toEqual(['items/other/big-0.json']);
    expect(await world.row('acme')).toBeUndefined();
    expect(loads.s3).toBe(1);
  });

  it('an erase no longer the connection\'s (put again) and a connection already erased: a line each, no failure, no message, nothing deleted', async () => {
    await world.seed();
    const acme = await world.removeForErase('acme', NOW);
    await world.put('acme', 'rt-acme-secret-2', NOW + 60_000);
    const run = await eraser().invoke([record('m-1', bodyOf(acme)), record('m-2', bodyOf({ connection: 'gone', startedAt: iso(NOW) }))]);
    expect(run.result).toEqual({ batchItemFailures: [] });
    expect(run.lines.map(fields)).toEqual([
      {
        level: 'INFO',
        message: 'erase',
        service: ERASER_SERVICE,
        connection: 'acme',
        startedAt: acme.startedAt,
        kind: 'stale',
        reason: 'connection "acme" is active again: this erase is not run',
        deleted: false,
      },
      { level: 'INFO', message: 'erase', service: ERASER_SERVICE, connection: 'gone', startedAt: iso(NOW), kind: 'done', rowsDeleted: 0, objectsDeleted: 0 },
    ]);
    expect(sent()).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    expect(await world.store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-acme-secret-2' });
  });
});
