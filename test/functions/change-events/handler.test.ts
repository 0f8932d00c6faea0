/**
 * The change-events handler and its PutEvents adapter over a mocked EventBridge client
 * (aws-sdk-client-mock): the exact PutEvents entries, refused entries (FailedEntryCount and
 * per-entry ErrorCode) sent again a bounded number of times and then reported, a call that throws,
 * the batchItemFailures answer by sequence number, the connections' counters (one UpdateItem per
 * connection, mocked DynamoDB), the metrics and the configuration; the account lifecycle events of
 * the connections table's stream, told from the items table's by eventSourceARN (never a token in
 * an entry or a log line).
 */
import 'aws-sdk-client-mock-vitest/extend';
import { PassThrough } from 'node:stream';
import { ConditionalCheckFailedException, DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient, EventBridgeServiceException, PutEventsCommand, type PutEventsCommandInput } from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { EventBridgePublisher } from '../../../functions/change-events/adapters/eventbridge.js';
import { createChangeEventsHandler } from '../../../functions/change-events/app.js';
import { ENV, loadChangeEventsConfig } from '../../../functions/shared/config.js';
import { ConfigError } from '../../../functions/shared/errors.js';
import { CHANGE_EVENTS_SERVICE } from '../../../functions/shared/metric-names.js';
import { createLogger, createMetrics } from '../../../functions/shared/observability.js';
import { createContext } from '../../../dev/fakes/lambda.js';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { emfDimensionSets, sumEmfMetrics } from '../../../dev/fakes/emf.js';
import {
  ACCESS_TOKEN,
  CLIENT_ID,
  CONNECTIONS_TABLE,
  connectionRecord,
  connectionRow,
  live,
  NEW_ACCESS_TOKEN,
  record,
  REFRESH_TOKEN,
  ROTATED_REFRESH_TOKEN,
  STREAM_ARN,
  streamEvent,
  tombstone,
  type ConnectionRow,
} from './helpers.js';

const BUS_ARN = 'arn:aws:events:eu-west-1:123456789012:event-bus/ContentSyncStateful-change-events';
const T0 = '2026-11-21T10:00:00.000Z';
const T1 = '2026-11-21T10:05:00.000Z';
const NOW = new Date('2026-11-21T10:05:01.000Z');

const eventbridge = mockClient(EventBridgeClient);
const dynamodb = mockClient(DynamoDBClient);

beforeEach(() => {
  eventbridge.reset();
  dynamodb.reset();
  dynamodb.on(UpdateItemCommand).resolves({});
});

/** Accepts every entry, with event ids e1, e2... */
function acceptAll() {
  let n = 0;
  eventbridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
    FailedEntryCount: 0,
    Entries: input.Entries!.map(() => ({ EventId: `e${++n}` })),
  }));
}

/** The entries of every PutEvents call, Detail parsed. */
function sentCalls(): Array<Array<Record<string, unknown>>> {
  return eventbridge.commandCalls(PutEventsCommand).map((call) =>
    call.args[0].input.Entries!.map((entry) => ({ ...entry, Detail: JSON.parse(entry.Detail!) })),
  );
}

function setup(options: { remainingMs?: number; debug?: boolean } = {}) {
  const output = new PassThrough();
  let text = '';
  output.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  const sleeps: number[] = [];
  const handler = createChangeEventsHandler({
    config: loadChangeEventsConfig({ [ENV.eventBusName]: BUS_ARN, [ENV.connectionsTableName]: CONNECTIONS_TABLE }),
    eventbridge: new EventBridgeClient({ region: 'eu-west-1' }),
    dynamodb: new DynamoDBClient({ region: 'eu-west-1' }),
    clock: { now: () => NOW },
    logger: createLogger(CHANGE_EVENTS_SERVICE, { output, ...(options.debug ? { logLevel: 'DEBUG' as const } : {}) }),
    metrics: createMetrics(CHANGE_EVENTS_SERVICE, { output }),
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 1,
  });
  const remaining = options.remainingMs ?? 30_000;
  const context = createContext('change-events', 'eu-west-1', remaining, { remainingMs: () => remaining, awsRequestId: 'req-1' });
  return { handler, context, sleeps, output: () => text };
}

describe('change-events handler', () => {
  it('puts one event per real change on the bus: source content-sync, the detail-type, the detail as JSON', async () => {
    acceptAll();
    const { handler, context, output } = setup();
    const large = { connection: 'default', id: 'big', type: 'file', revision: '8', syncedAt: T1, itemObject: { key: 'items/default/big/8', size: 500_000, sha256: 'f'.repeat(64) } };
    const answer = await handler(
      streamEvent(
        record(undefined, live('f1', '1', T0)),
        record(live('f2', '1', T0), live('f2', '1', T1)),
        record(live('f3', '1', T0), live('f3', '2', T1)),
        record(live('f4', '2', T0), tombstone(live('f4', '2'), T1)),
        record(tombstone(live('f5', '3'), T0), live('f5', '3', T1)),
        record(live('big', '7', T0), large),
        record(live('f6', '1', T0), undefined),
      ),
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [] });
    const entry = (detailType: string, detail: Record<string, unknown>) => ({ EventBusName: BUS_ARN, Source: 'content-sync', DetailType: detailType, Detail: detail });
    expect(sentCalls()).toEqual([
      [
        entry('ItemCreated', { connection: 'default', id: 'f1', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 }),
        entry('ItemUpdated', { connection: 'default', id: 'f3', type: 'file', revision: '2', previousRevision: '1', syncedAt: T1 }),
        entry('ItemDeleted', { connection: 'default', id: 'f4', type: 'file', revision: '2', previousRevision: '2', syncedAt: T1 }),
        entry('ItemRestored', { connection: 'default', id: 'f5', type: 'file', revision: '3', previousRevision: '3', syncedAt: T1 }),
        entry('ItemUpdated', { connection: 'default', id: 'big', type: 'file', revision: '8', previousRevision: '7', syncedAt: T1, itemObject: large.itemObject }),
      ],
    ]);
    // Exactly these entry fields: no Time, Resources or TraceHeader.
    expect(Object.keys(eventbridge.commandCalls(PutEventsCommand)[0]!.args[0].input.Entries![0]!).sort()).toEqual(['Detail', 'DetailType', 'EventBusName', 'Source']);
    const metrics = sumEmfMetrics(output());
    expect(metrics).toEqual({ ChangeEventsPublished: 5, ChangeEventsFailed: 0, StreamRecordsIgnored: 2, StreamRecordsRetried: 0, LifecycleEventsPublished: 0 });
    const emf = jsonLines(output()).find((line) => typeof line !== 'string' && line['_aws']) as Record<string, any>;
    expect(emf['_aws'].CloudWatchMetrics[0].Namespace).toBe('ContentSync');
    expect(emf['service']).toBe('change-events');
  });

  it('an entry refused (FailedEntryCount, ErrorCode) is sent again alone, and published when accepted', async () => {
    eventbridge
      .on(PutEventsCommand)
      .resolvesOnce({ FailedEntryCount: 1, Entries: [{ EventId: 'e1' }, { ErrorCode: 'ThrottlingException', ErrorMessage: 'Rate exceeded' }, { EventId: 'e3' }] })
      .resolvesOnce({ FailedEntryCount: 0, Entries: [{ EventId: 'e4' }] });
    const { handler, context, sleeps, output } = setup();
    const answer = await handler(
      streamEvent(record(undefined, live('a', '1', T0)), record(undefined, live('b', '1', T0)), record(undefined, live('c', '1', T0))),
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [] });
    expect(sentCalls().map((call) => call.map((entry) => (entry['Detail'] as { id: string }).id))).toEqual([['a', 'b', 'c'], ['b']]);
    expect(sleeps).toEqual([100]);
    expect(sumEmfMetrics(output())).toMatchObject({ ChangeEventsPublished: 3, ChangeEventsFailed: 0 });
  });

  it('an entry still refused after 3 calls: its record and every later one are reported by sequence number', async () => {
    eventbridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
      FailedEntryCount: input.Entries!.filter((entry) => JSON.parse(entry.Detail!).id === 'b').length,
      Entries: input.Entries!.map((entry, i) =>
        JSON.parse(entry.Detail!).id === 'b' ? { ErrorCode: 'InternalFailure', ErrorMessage: 'Internal failure' } : { EventId: `e${i}` },
      ),
    }));
    const { handler, context, sleeps, output } = setup();
    const records = [
      record(undefined, live('a', '1', T0), { sequenceNumber: '1001' }),
      record(undefined, live('b', '1', T0), { sequenceNumber: '1002' }),
      record(undefined, live('c', '1', T0), { sequenceNumber: '1003' }),
      record(live('b', '1', T0), live('b', '2', T1), { sequenceNumber: '1004' }),
    ];
    const answer = await handler(streamEvent(...records), context);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '1002' }, { itemIdentifier: '1003' }, { itemIdentifier: '1004' }] });
    // b's second change was never sent: one call with a, b, c, then b alone twice.
    expect(sentCalls().map((call) => call.map((entry) => `${(entry['Detail'] as { id: string }).id}`))).toEqual([['a', 'b', 'c'], ['b'], ['b']]);
    expect(sleeps).toEqual([100, 200]);
    expect(sumEmfMetrics(output())).toEqual({ ChangeEventsPublished: 2, ChangeEventsFailed: 1, StreamRecordsIgnored: 0, StreamRecordsRetried: 3, LifecycleEventsPublished: 0 });
    const errors = jsonLines(output()).filter((line) => typeof line !== 'string' && line['level'] === 'ERROR') as Array<Record<string, unknown>>;
    expect(errors.map((line) => [line['message'], line['id'], line['sequenceNumber'], line['error']])).toEqual([
      ['change event not published: the record is handed back', 'b', '1002', 'InternalFailure: Internal failure'],
    ]);
  });

  it('a PutEvents call that throws (after the SDK retries) is tried again, then the records are reported', async () => {
    eventbridge.on(PutEventsCommand).rejects(new EventBridgeServiceException({ name: 'InternalException', $fault: 'server', $metadata: {}, message: 'boom' }));
    const { handler, context, output } = setup();
    const answer = await handler(streamEvent(record(undefined, live('a', '1', T0), { sequenceNumber: '2001' }), record(live('x', '1'), undefined, { sequenceNumber: '2002' })), context);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '2001' }, { itemIdentifier: '2002' }] });
    expect(eventbridge.commandCalls(PutEventsCommand)).toHaveLength(3);
    const errors = jsonLines(output()).filter((line) => typeof line !== 'string' && line['level'] === 'ERROR') as Array<Record<string, unknown>>;
    expect(errors[0]!['error']).toBe('PutEvents failed: InternalException: boom');
  });

  it('a reply without a result for an entry: that entry is not published', async () => {
    eventbridge.on(PutEventsCommand).resolvesOnce({ FailedEntryCount: 0, Entries: [{ EventId: 'e1' }] }).resolves({ FailedEntryCount: 0, Entries: [] });
    const { handler, context, output } = setup();
    const answer = await handler(streamEvent(record(undefined, live('a', '1', T0), { sequenceNumber: '3001' }), record(undefined, live('b', '1', T0), { sequenceNumber: '3002' })), context);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '3002' }] });
    expect(sentCalls().map((call) => call.map((entry) => (entry['Detail'] as { id: string }).id))).toEqual([['a', 'b'], ['b'], ['b']]);
    const errors = jsonLines(output()).filter((line) => typeof line !== 'string' && line['level'] === 'ERROR') as Array<Record<string, unknown>>;
    expect(errors[0]!['error']).toBe('PutEvents gave no result for the entry');
  });

  it('a record that cannot be mapped is reported (with the rest), not dropped', async () => {
    acceptAll();
    const { handler, context } = setup();
    const broken = record(live('a', '1', T0), live('a', '2', T1), { sequenceNumber: '4002' });
    delete broken.dynamodb!.OldImage;
    const answer = await handler(streamEvent(record(undefined, live('z', '1', T0), { sequenceNumber: '4001' }), broken), context);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '4002' }] });
    expect(sentCalls()).toHaveLength(1);
  });

  it('an invocation about to run out of time makes no call: the whole batch is handed back', async () => {
    acceptAll();
    const { handler, context } = setup({ remainingMs: 0 });
    const answer = await handler(streamEvent(record(undefined, live('a', '1', T0), { sequenceNumber: '5001' })), context);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '5001' }] });
    expect(sentCalls()).toHaveLength(0);
  });

  it('an empty event: nothing sent, nothing reported, zero metrics', async () => {
    const { handler, context, output } = setup();
    expect(await handler({ Records: [] }, context)).toEqual({ batchItemFailures: [] });
    expect(eventbridge.commandCalls(PutEventsCommand)).toHaveLength(0);
    expect(sumEmfMetrics(output())).toEqual({ ChangeEventsPublished: 0, ChangeEventsFailed: 0, StreamRecordsIgnored: 0, StreamRecordsRetried: 0, LifecycleEventsPublished: 0 });
  });
});

describe('the metrics’ dimensions', () => {
  it('service alone; with CONTENT_SYNC_STAGE, the stage beside it', async () => {
    const dimensions = async (stage: Record<string, string>) => {
      const handler = createChangeEventsHandler({
        config: loadChangeEventsConfig({ [ENV.eventBusName]: BUS_ARN, [ENV.connectionsTableName]: CONNECTIONS_TABLE, ...stage }),
        eventbridge: new EventBridgeClient({ region: 'eu-west-1' }),
        dynamodb: new DynamoDBClient({ region: 'eu-west-1' }),
      });
      const { error, output } = await captureOutput(() => handler({ Records: [] }, createContext('change-events')));
      expect(error).toBeUndefined();
      return emfDimensionSets(output);
    };
    expect(await dimensions({})).toEqual(['ContentSync: service=change-events']);
    expect(await dimensions({ [ENV.stage]: 'staging' })).toEqual(['ContentSync: service=change-events, stage=staging']);
  });
});

describe('the handler keeps the counters of the records it is done with', () => {
  const acme = { connection: 'acme' };
  const globex = { connection: 'globex' };
  const T2 = '2026-11-21T10:07:30.000Z';
  const TABLE = CONNECTIONS_TABLE;

  async function run(records: Parameters<typeof streamEvent>) {
    const { handler, context, output } = setup();
    dynamodb.resetHistory();
    return { answer: await handler(streamEvent(...records), context), output };
  }

  it('one UpdateItem per connection, none for the records handed back', async () => {
    eventbridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
      FailedEntryCount: 0,
      Entries: input.Entries!.map((entry) => (JSON.parse(entry.Detail!).id === 'bad' ? { ErrorCode: 'InternalFailure', ErrorMessage: 'no' } : { EventId: 'e' })),
    }));
    dynamodb.on(UpdateItemCommand).resolves({});
    const { answer } = await run([
      record(undefined, live('a', '1', T0, acme), { sequenceNumber: '1' }),
      record(undefined, live('g', '1', T1, globex), { sequenceNumber: '2' }),
      record(undefined, live('b', '1', T1, acme), { sequenceNumber: '3' }),
      record(undefined, live('bad', '1', T2, globex), { sequenceNumber: '4' }),
      record(undefined, live('later', '1', T2, acme), { sequenceNumber: '5' }),
    ]);

    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '4' }, { itemIdentifier: '5' }] });
    const sent = dynamodb.commandCalls(UpdateItemCommand).map((call) => call.args[0].input);
    expect(sent.map((input) => [input.Key, input.UpdateExpression, input.ExpressionAttributeValues])).toEqual([
      [{ connection: { S: 'acme' } }, 'SET #lastWriteAt = :lastWriteAt ADD #idsKnown :created', { ':lastWriteAt': { S: T1 }, ':created': { N: '2' } }],
      [{ connection: { S: 'globex' } }, 'SET #lastWriteAt = :lastWriteAt ADD #idsKnown :created', { ':lastWriteAt': { S: T1 }, ':created': { N: '1' } }],
    ]);
    expect(sent.every((input) => input.TableName === TABLE && input.ReturnValues === undefined)).toBe(true);
  });

  it('a counter that cannot be written (throttled, or the connection gone) never fails the batch', async () => {
    eventbridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({ FailedEntryCount: 0, Entries: input.Entries!.map(() => ({ EventId: 'e' })) }));
    dynamodb
      .on(UpdateItemCommand, { Key: { connection: { S: 'acme' } } })
      .rejects(Object.assign(new Error('Rate of requests exceeds the allowed throughput'), { name: 'ThrottlingException' }))
      .on(UpdateItemCommand, { Key: { connection: { S: 'globex' } } })
      .rejects(new ConditionalCheckFailedException({ $metadata: {}, message: 'The conditional request failed' }));
    const { answer, output } = await run([record(undefined, live('a', '1', T0, acme)), record(undefined, live('g', '1', T1, globex))]);

    expect(answer).toEqual({ batchItemFailures: [] });
    const lines = jsonLines(output()).filter((line): line is Record<string, unknown> => typeof line !== 'string' && !line['_aws']);
    expect(lines.filter((line) => line['level'] === 'WARN').map((line) => [line['message'], line['connection']])).toEqual([
      ["a connection's counters were not updated (idsKnown, lastWriteAt); the events are not affected", 'acme'],
    ]);
    expect(lines.find((line) => line['message'] === 'batch done')).toMatchObject({ connectionStats: { written: 0, unchanged: 1, failed: 1 } });
  });
});

describe('account lifecycle events from the connections table’s stream', () => {
  const T_PUT = '2026-11-21T09:00:00.000Z';
  const RECORD_TIME = '2026-11-21T10:10:00.000Z';
  const SECRETS = [REFRESH_TOKEN, ROTATED_REFRESH_TOKEN, ACCESS_TOKEN, NEW_ACCESS_TOKEN, CLIENT_ID];
  const row = connectionRow;
  const to = (before: ConnectionRow, status: string, extra: ConnectionRow = {}): ConnectionRow => ({ ...before, status, updatedAt: T1, ...extra });
  const put = (before: ConnectionRow): ConnectionRow => ({ ...before, status: 'active', refreshToken: ROTATED_REFRESH_TOKEN, credentialsVersion: 2, credentialsAt: T_PUT, updatedAt: T_PUT });
  const entry = (detailType: string, detail: Record<string, unknown>) => ({ EventBusName: BUS_ARN, Source: 'content-sync', DetailType: detailType, Detail: detail });
  const lines = (text: string) => jsonLines(text).filter((line): line is Record<string, unknown> => typeof line !== 'string' && !line['_aws']);

  it('one event per status change, the exact PutEvents entries; the writes that change no status announce nothing; no counters written', async () => {
    acceptAll();
    const { handler, context, output } = setup();
    const answer = await handler(
      streamEvent(
        connectionRecord(undefined, row('acme', 'active', { credentialsAt: T_PUT, updatedAt: T_PUT })),
        connectionRecord(row('globex', 'active'), to(row('globex', 'active'), 'failing', { lastFailureReason: 'HTTP 401: invalid_grant', consecutiveFailures: 1 })),
        connectionRecord(row('initech', 'failing'), to(row('initech', 'failing'), 'active', { accessToken: NEW_ACCESS_TOKEN })),
        connectionRecord(row('hooli', 'active'), to(row('hooli', 'active'), 'paused')),
        connectionRecord(row('umbrella', 'paused'), to(row('umbrella', 'paused'), 'active')),
        connectionRecord(row('wayne', 'active'), put(row('wayne', 'active'))),
        connectionRecord(row('stark', 'paused'), to(row('stark', 'paused'), 'removed', { refreshToken: undefined, accessToken: undefined })),
        connectionRecord(row('tyrell', 'removed', { refreshToken: undefined, accessToken: undefined }), undefined),
        // Nothing: the counters, a provider's rotation, lastUsedAt, a REMOVE of a row that was not removed.
        connectionRecord(row('acme', 'active'), row('acme', 'active', { idsKnown: 40, lastWriteAt: T1 })),
        connectionRecord(row('globex', 'active'), row('globex', 'active', { refreshToken: ROTATED_REFRESH_TOKEN, accessToken: NEW_ACCESS_TOKEN, credentialsVersion: 2, updatedAt: T1 })),
        connectionRecord(row('hooli', 'paused'), row('hooli', 'paused', { lastUsedAt: T1 })),
        connectionRecord(row('soylent', 'active'), undefined),
      ),
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [] });
    expect(sentCalls()).toEqual([
      [
        entry('ConnectionAdded', { connection: 'acme', status: 'active', previousStatus: null, at: T_PUT }),
        entry('ConnectionFailing', { connection: 'globex', status: 'failing', previousStatus: 'active', reason: 'HTTP 401: invalid_grant', at: T1 }),
        entry('ConnectionRecovered', { connection: 'initech', status: 'active', previousStatus: 'failing', at: T1 }),
        entry('ConnectionPaused', { connection: 'hooli', status: 'paused', previousStatus: 'active', at: T1 }),
        entry('ConnectionResumed', { connection: 'umbrella', status: 'active', previousStatus: 'paused', at: T1 }),
        entry('ConnectionCredentialsReplaced', { connection: 'wayne', status: 'active', previousStatus: 'active', at: T_PUT }),
        entry('ConnectionRemoved', { connection: 'stark', status: 'removed', previousStatus: 'paused', at: T1 }),
        entry('ConnectionErased', { connection: 'tyrell', status: null, previousStatus: 'removed', at: RECORD_TIME }),
      ],
    ]);
    expect(Object.keys(eventbridge.commandCalls(PutEventsCommand)[0]!.args[0].input.Entries![1]!).sort()).toEqual(['Detail', 'DetailType', 'EventBusName', 'Source']);
    expect(dynamodb.commandCalls(UpdateItemCommand)).toHaveLength(0);
    expect(sumEmfMetrics(output())).toEqual({
      ChangeEventsPublished: 8,
      LifecycleEventsPublished: 8,
      ChangeEventsFailed: 0,
      StreamRecordsIgnored: 4,
      StreamRecordsRetried: 0,
    });
    expect(lines(output()).find((line) => line['message'] === 'batch done')).toMatchObject({
      records: 12,
      published: 8,
      lifecycle: 8,
      connectionStats: { written: 0, unchanged: 0, failed: 0 },
    });
  });

  it('a batch of both streams: each record by its eventSourceARN, in order; counters for the items table’s records only', async () => {
    acceptAll();
    const { handler, context, output } = setup();
    const answer = await handler(
      streamEvent(
        record(undefined, live('f1', '1', T0, { connection: 'acme' })),
        connectionRecord(row('acme', 'active'), to(row('acme', 'active'), 'paused')),
        record(live('f2', '1', T0, { connection: 'acme' }), live('f2', '2', T1, { connection: 'acme' })),
      ),
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [] });
    expect(sentCalls()).toEqual([
      [
        entry('ItemCreated', { connection: 'acme', id: 'f1', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 }),
        entry('ConnectionPaused', { connection: 'acme', status: 'paused', previousStatus: 'active', at: T1 }),
        entry('ItemUpdated', { connection: 'acme', id: 'f2', type: 'file', revision: '2', previousRevision: '1', syncedAt: T1 }),
      ],
    ]);
    expect(dynamodb.commandCalls(UpdateItemCommand).map((call) => [call.args[0].input.Key, call.args[0].input.ExpressionAttributeValues])).toEqual([
      [{ connection: { S: 'acme' } }, { ':lastWriteAt': { S: T1 }, ':created': { N: '1' } }],
    ]);
    expect(sumEmfMetrics(output())).toMatchObject({ ChangeEventsPublished: 3, LifecycleEventsPublished: 1 });
  });

  it('routing is by the table in eventSourceARN: a connection’s row on another table’s stream is no lifecycle event', async () => {
    acceptAll();
    const { handler, context, output } = setup();
    // Taken as an item's row: a status change is no change of a revision, a new row has no id.
    const modified = connectionRecord(row('acme', 'active'), to(row('acme', 'active'), 'paused'), { eventSourceARN: STREAM_ARN, sequenceNumber: '7001' });
    const inserted = connectionRecord(undefined, row('acme', 'active'), { eventSourceARN: STREAM_ARN, sequenceNumber: '7002' });
    expect(await handler(streamEvent(modified, inserted), context)).toEqual({ batchItemFailures: [{ itemIdentifier: '7002' }] });
    expect(sentCalls()).toEqual([]);
    expect(sumEmfMetrics(output())).toMatchObject({ ChangeEventsPublished: 0, LifecycleEventsPublished: 0, StreamRecordsIgnored: 1, StreamRecordsRetried: 1 });
    expect(lines(output()).find((line) => line['level'] === 'ERROR')).toMatchObject({
      message: 'stream record cannot be mapped to a change event: it and the records after it are handed back',
      sequenceNumber: '7002',
      error: 'a row of connection "acme" has no text attribute "id"',
    });
  });

  it('a record that cannot be mapped (MODIFY without its old image, an unknown status) is a batch item failure, with every record after it', async () => {
    acceptAll();
    const { handler, context, output } = setup();
    const withoutOld = connectionRecord(row('globex', 'active'), to(row('globex', 'active'), 'paused'), { sequenceNumber: '6002' });
    delete withoutOld.dynamodb!.OldImage;
    const answer = await handler(
      streamEvent(
        connectionRecord(row('acme', 'active'), to(row('acme', 'active'), 'paused'), { sequenceNumber: '6001' }),
        withoutOld,
        connectionRecord(row('initech', 'active'), to(row('initech', 'active'), 'paused'), { sequenceNumber: '6003' }),
      ),
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '6002' }, { itemIdentifier: '6003' }] });
    expect(sentCalls().map((call) => call.map((e) => e['DetailType']))).toEqual([['ConnectionPaused']]);
    expect(sumEmfMetrics(output())).toEqual({ ChangeEventsPublished: 1, LifecycleEventsPublished: 1, ChangeEventsFailed: 0, StreamRecordsIgnored: 0, StreamRecordsRetried: 2 });

    eventbridge.resetHistory();
    const second = setup();
    const unknown = connectionRecord(row('acme', 'active'), to(row('acme', 'active'), 'archived'), { sequenceNumber: '6101' });
    expect(await second.handler(streamEvent(unknown), second.context)).toEqual({ batchItemFailures: [{ itemIdentifier: '6101' }] });
    expect(sentCalls()).toEqual([]);
    expect(lines(second.output()).find((line) => line['level'] === 'ERROR')?.['error']).toBe(
      'the row of connection "acme": the new image\'s status "archived" is not one of active, paused, failing, removed',
    );
  });

  it('a lifecycle entry still refused after 3 calls: its record and every later one are reported, as an item’s', async () => {
    eventbridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
      FailedEntryCount: input.Entries!.filter((e) => e.DetailType === 'ConnectionFailing').length,
      Entries: input.Entries!.map((e, i) => (e.DetailType === 'ConnectionFailing' ? { ErrorCode: 'InternalFailure', ErrorMessage: 'Internal failure' } : { EventId: `e${i}` })),
    }));
    const { handler, context, sleeps, output } = setup();
    const answer = await handler(
      streamEvent(
        connectionRecord(row('acme', 'active'), to(row('acme', 'active'), 'paused'), { sequenceNumber: '8001' }),
        connectionRecord(row('globex', 'active'), to(row('globex', 'active'), 'failing', { lastFailureReason: 'invalid_grant' }), { sequenceNumber: '8002' }),
        connectionRecord(row('initech', 'active'), to(row('initech', 'active'), 'removed'), { sequenceNumber: '8003' }),
      ),
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: '8002' }, { itemIdentifier: '8003' }] });
    expect(sentCalls().map((call) => call.map((e) => (e['Detail'] as { connection: string }).connection))).toEqual([['acme', 'globex', 'initech'], ['globex'], ['globex']]);
    expect(sleeps).toEqual([100, 200]);
    expect(sumEmfMetrics(output())).toEqual({ ChangeEventsPublished: 2, LifecycleEventsPublished: 2, ChangeEventsFailed: 1, StreamRecordsIgnored: 0, StreamRecordsRetried: 2 });
    const errors = lines(output()).filter((line) => line['level'] === 'ERROR');
    expect(errors.map((line) => [line['message'], line['connection'], line['id'], line['detailType'], line['sequenceNumber'], line['error']])).toEqual([
      ['change event not published: the record is handed back', 'globex', undefined, 'ConnectionFailing', '8002', 'InternalFailure: Internal failure'],
    ]);
  });

  it('never a token or the client id: in no PutEvents entry and no log line, DEBUG included', async () => {
    eventbridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
      FailedEntryCount: 0,
      Entries: input.Entries!.map((e, i) => (e.DetailType === 'ConnectionRemoved' ? { ErrorCode: 'InternalFailure', ErrorMessage: 'no' } : { EventId: `e${i}` })),
    }));
    const { handler, context, output } = setup({ debug: true });
    const full = (connection: string, status: string | undefined, extra: ConnectionRow = {}) =>
      row(connection, status, { leaseOwner: 'refresher-1', leaseUntil: 1, lastFailureReason: 'invalid_grant', ...extra });
    const broken = connectionRecord(full('zeta', 'active'), full('zeta', 'paused'));
    delete broken.dynamodb!.OldImage;
    const answer = await handler(
      streamEvent(
        connectionRecord(undefined, full('acme', 'active')),
        connectionRecord(full('globex', 'active'), full('globex', 'failing', { updatedAt: T1 })),
        connectionRecord(full('initech', 'active'), put(full('initech', 'active'))),
        connectionRecord(full('hooli', 'active'), full('hooli', 'active', { accessToken: NEW_ACCESS_TOKEN })),
        connectionRecord(full('soylent', 'active'), undefined),
        connectionRecord(full('tyrell', 'removed'), undefined),
        connectionRecord(full('stark', 'active'), full('stark', 'removed')),
        broken,
      ),
      context,
    );
    expect(answer.batchItemFailures).toHaveLength(2);
    const sent = JSON.stringify(eventbridge.commandCalls(PutEventsCommand).map((call) => call.args[0].input));
    const logged = output();
    expect(logged).toContain('stream record announces nothing');
    expect(logged).toContain('change event not published');
    expect(logged).toContain('stream record cannot be mapped');
    for (const secret of SECRETS) {
      expect(sent).not.toContain(secret);
      expect(logged).not.toContain(secret);
    }
    for (const call of sentCalls()) {
      for (const e of call) expect(Object.keys(e['Detail'] as object)).toEqual(expect.arrayContaining(['connection', 'status', 'previousStatus', 'at']));
      for (const e of call) expect(Object.keys(e['Detail'] as object).filter((key) => !['connection', 'status', 'previousStatus', 'reason', 'at'].includes(key))).toEqual([]);
    }
  });
});

describe('EventBridgePublisher', () => {
  it('waits base × 2^(n-1) between calls, no cap, equal jitter (half the step fixed, half random)', async () => {
    eventbridge.on(PutEventsCommand).resolves({ FailedEntryCount: 1, Entries: [{ ErrorCode: 'InternalFailure', ErrorMessage: 'Internal failure' }] });
    const event = { detailType: 'ItemCreated' as const, detail: { connection: 'default', id: 'a', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 } };
    for (const [random, expected] of [
      [0, [50, 100, 200, 400]],
      [0.5, [75, 150, 300, 600]],
    ] as const) {
      const sleeps: number[] = [];
      const publisher = new EventBridgePublisher(new EventBridgeClient({ region: 'eu-west-1' }), 'bus', {
        attempts: 5,
        sleep: async (ms) => void sleeps.push(ms),
        random: () => random,
      });
      expect(await publisher.publish([event])).toEqual([{ published: false, error: 'InternalFailure: Internal failure' }]);
      expect(sleeps).toEqual(expected);
    }
  });

  it('one outcome per event, in order; attempts are bounded by the option', async () => {
    eventbridge.on(PutEventsCommand).resolves({ FailedEntryCount: 1, Entries: [{ EventId: 'e1' }, { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' }] });
    const publisher = new EventBridgePublisher(new EventBridgeClient({ region: 'eu-west-1' }), 'bus', { attempts: 1, sleep: async () => undefined });
    const event = (id: string) => ({
      detailType: 'ItemCreated' as const,
      detail: { connection: 'default', id, type: 'file', revision: '1', previousRevision: null, syncedAt: T0 },
    });
    expect(await publisher.publish([event('a'), event('b')])).toEqual([
      { published: true },
      { published: false, error: 'MalformedDetail: Detail is malformed.' },
    ]);
    expect(eventbridge.commandCalls(PutEventsCommand)).toHaveLength(1);
    expect(eventbridge).toHaveReceivedCommandWith(PutEventsCommand, {
      Entries: [
        { EventBusName: 'bus', Source: 'content-sync', DetailType: 'ItemCreated', Detail: JSON.stringify(event('a').detail) },
        { EventBusName: 'bus', Source: 'content-sync', DetailType: 'ItemCreated', Detail: JSON.stringify(event('b').detail) },
      ],
    });
  });
});

describe('configuration', () => {
  it('EVENT_BUS_NAME (name or ARN) and CONNECTIONS_TABLE_NAME are required', () => {
    expect(ENV.eventBusName).toBe('EVENT_BUS_NAME');
    expect(ENV.connectionsTableName).toBe('CONNECTIONS_TABLE_NAME');
    expect(loadChangeEventsConfig({ EVENT_BUS_NAME: ` ${BUS_ARN} `, CONNECTIONS_TABLE_NAME: CONNECTIONS_TABLE })).toEqual({
      eventBusName: BUS_ARN,
      connectionsTableName: CONNECTIONS_TABLE,
    });
    expect(() => loadChangeEventsConfig({})).toThrow(ConfigError);
    expect(() => loadChangeEventsConfig({ EVENT_BUS_NAME: ' ', CONNECTIONS_TABLE_NAME: CONNECTIONS_TABLE })).toThrow('EVENT_BUS_NAME: is required but not set');
    expect(() => loadChangeEventsConfig({ EVENT_BUS_NAME: BUS_ARN })).toThrow('CONNECTIONS_TABLE_NAME: is required but not set');
  });
});
