/**
 * The harness of the item sync handler's unit tests (*.unit.test.ts): every AWS client mocked
 * (aws-sdk-client-mock), a scripted provider, a scripted connections' access layer (FakeConnections)
 * and port-level pace stores, one per pace key. Each test file calls `useHarness()` once; the mocks
 * are that file's own (vitest loads this module per file).
 *
 * The sync writes each row with one single-item write: a conditional PutItem, or an UpdateItem for
 * a tombstone (functions/item-sync/adapters/dynamodb-item-store.ts); the tests script and assert
 * those commands. It writes no change: the changes feed is written by the changes writer from the
 * items table's stream (functions/changes-writer), so a TransactWriteItems here is refused (the
 * record fails, and the test with it).
 */
import { beforeEach, expect } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  BatchGetItemCommand,
  DynamoDBClient,
  PutItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { ChangeMessageVisibilityBatchCommand, GetQueueUrlCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { createSyncHandler, type SyncHandlerDeps } from '../../../functions/item-sync/app.js';
import { loadSyncConfig, type SyncConfig } from '../../../functions/shared/config.js';
import type { AccessOptions, ConnectionAccess, ConnectionGate } from '../../../functions/shared/connections/ports.js';
import { DLQ_URL, QUEUE_URL, ScriptedProvider, lambdaContext, logLines, metricsIn, sqsEvent } from './helpers.js';

export const TABLE = 'content-sync-items';
export const BUCKET = 'content-sync-items-bucket';
/** The random part of every object key in these tests. */
export const SUFFIX = '0123456789abcdef';
export const TOKEN_1 = 'at-unit-secret-token-0001';
export const TOKEN_2 = 'at-unit-secret-token-0002';
export const NOW = new Date('2026-11-21T10:00:00.000Z');
/** The pace key of the connections of the client id `client-1` (the access layer's, PACE_SCOPE=client). */
export const PACE_KEY = 'client#client-1';

export const ddb = mockClient(DynamoDBClient);
export const sqs = mockClient(SQSClient);
export const s3 = mockClient(S3Client);

export function config(overrides: Record<string, string> = {}): SyncConfig {
  return loadSyncConfig({
    PROVIDER_BASE_URL: 'https://provider.example.com/api/v2',
    CONNECTIONS_TABLE_NAME: 'content-sync-connections',
    CONNECTIONS_KEY_ARN: 'arn:aws:kms:eu-west-1:000000000000:key/00000000-0000-4000-8000-000000000000',
    ITEMS_TABLE_NAME: TABLE,
    ITEMS_BUCKET_NAME: BUCKET,
    REVISION_FIELD: 'revision',
    DEAD_LETTER_QUEUE_URL: DLQ_URL,
    CONTROL_TABLE_NAME: 'control',
    PROVIDER_REQUESTS_PER_SECOND: '1000',
    ...overrides,
  });
}

/** An items-table key as DynamoDB takes it (the connection `default` unless given). */
export function k(id: string, connection = 'default'): { connection: { S: string }; id: { S: string } } {
  return { connection: { S: connection }, id: { S: id } };
}

/** Stored rows as BatchGetItem answers them (projection: connection, id, revision, deleted, itemObject). */
export function stored(rows: Array<{ id: string; connection?: string; revision: string; deleted?: boolean; objectKey?: string }>): void {
  ddb.on(BatchGetItemCommand).resolves({
    Responses: {
      [TABLE]: rows.map((row) => ({
        ...k(row.id, row.connection),
        revision: { S: row.revision },
        ...(row.deleted ? { deleted: { BOOL: true } } : {}),
        ...(row.objectKey !== undefined ? { itemObject: { M: { key: { S: row.objectKey } } } } : {}),
      })),
    },
  });
}

interface FakeConnection {
  /** The tokens the connection's access token goes through: a refusal of the current one moves to the next (the last stays). */
  tokens: string[];
  current: number;
  paceKey: string;
  /** The breaker key its ready gate names (the client id's pace key under paceScope connection); none: the pace's own. */
  breakerKey?: string;
  /** What open() answers instead of `ready` (dead, wait), or a failure it throws. */
  gate?: ConnectionGate | Error;
  /** What afterRefusal() answers instead of the next token. */
  afterRefusal?: ConnectionGate;
}

/**
 * The connections' access layer as the sync sees it: `default` is ready with TOKEN_1 (then
 * TOKEN_2 after a refusal), on the pace key PACE_KEY; other connections are added by the tests; an
 * unknown one is dead with the access layer's reason. Every question is remembered (`calls`).
 */
export class FakeConnections implements ConnectionAccess {
  readonly calls: Array<{ op: 'open' | 'afterRefusal'; connection: string; rejected?: string; deadline?: number }> = [];
  private readonly connections = new Map<string, FakeConnection>();
  private readonly refused = new Map<string, string>();

  constructor() {
    this.add('default', { tokens: [TOKEN_1, TOKEN_2] });
  }

  add(
    connection: string,
    options: { tokens?: string[]; paceKey?: string; breakerKey?: string; gate?: ConnectionGate | Error; afterRefusal?: ConnectionGate } = {},
  ): this {
    const { tokens = [`at-${connection}-1`, `at-${connection}-2`], paceKey = PACE_KEY, breakerKey, gate, afterRefusal } = options;
    this.connections.set(connection, {
      tokens,
      current: 0,
      paceKey,
      ...(breakerKey !== undefined ? { breakerKey } : {}),
      ...(gate !== undefined ? { gate } : {}),
      ...(afterRefusal !== undefined ? { afterRefusal } : {}),
    });
    return this;
  }

  opened(): string[] {
    return this.calls.filter((call) => call.op === 'open').map((call) => call.connection);
  }

  refusals(): Array<{ connection: string; rejected: string }> {
    return this.calls.filter((call) => call.op === 'afterRefusal').map(({ connection, rejected }) => ({ connection, rejected: rejected! }));
  }

  /** The deadline each question was asked with (undefined: none), in order. */
  deadlines(): Array<[op: string, deadline: number | undefined]> {
    return this.calls.map((call) => [call.op, call.deadline]);
  }

  async open(connection: string, options: AccessOptions = {}): Promise<ConnectionGate> {
    this.calls.push({ op: 'open', connection, ...(options.deadline !== undefined ? { deadline: options.deadline } : {}) });
    const known = this.connections.get(connection);
    if (!known) return { kind: 'dead', reason: `unknown connection "${connection}"` };
    if (known.gate instanceof Error) throw known.gate;
    return known.gate ?? this.ready(connection, known);
  }

  /** As the access layer does: the last token refused of each connection is known refused. */
  knownRefused(connection: string, token: string): boolean {
    return this.refused.get(connection) === token;
  }

  async afterRefusal(connection: string, rejected: string, options: AccessOptions = {}): Promise<ConnectionGate> {
    this.calls.push({ op: 'afterRefusal', connection, rejected, ...(options.deadline !== undefined ? { deadline: options.deadline } : {}) });
    this.refused.set(connection, rejected);
    const known = this.connections.get(connection);
    if (!known) return { kind: 'dead', reason: `unknown connection "${connection}"` };
    if (known.afterRefusal) return known.afterRefusal;
    if (known.tokens[known.current] === rejected) known.current = Math.min(known.current + 1, known.tokens.length - 1);
    return this.ready(connection, known);
  }

  private ready(connection: string, known: FakeConnection): ConnectionGate {
    return {
      kind: 'ready',
      connection,
      token: known.tokens[known.current]!,
      paceKey: known.paceKey,
      ...(known.breakerKey !== undefined ? { breakerKey: known.breakerKey } : {}),
    };
  }
}

/** The pace stores by pace key, made on first use (the handler's `paceStoreFor`). */
export class PaceStores {
  readonly byKey = new Map<string, MemoryPaceStore>();
  readonly asked: string[] = [];
  readonly storeFor = (paceKey: string): MemoryPaceStore => {
    this.asked.push(paceKey);
    let store = this.byKey.get(paceKey);
    if (!store) this.byKey.set(paceKey, (store = new MemoryPaceStore()));
    return store;
  };
}

export const harness = {
  clockMs: NOW.getTime(),
  sleeps: [] as number[],
  connections: new FakeConnections(),
};

export type BuildOverrides = Partial<SyncHandlerDeps> & {
  env?: Record<string, string>;
  /** One store for every pace key (tests of one pace). */
  paceStore?: MemoryPaceStore;
};

export function build(provider: ScriptedProvider, overrides: BuildOverrides = {}): ReturnType<typeof createSyncHandler> {
  const { env, paceStore, ...deps } = overrides;
  const fallbackStore = paceStore ?? new MemoryPaceStore();
  return createSyncHandler({
    config: config(env),
    dynamodb: new DynamoDBClient({ region: 'eu-west-1' }),
    sqs: new SQSClient({ region: 'eu-west-1' }),
    connections: harness.connections,
    s3: new S3Client({ region: 'eu-west-1' }),
    objectKeySuffix: () => SUFFIX,
    provider,
    clock: { now: () => new Date(harness.clockMs) },
    random: () => 0.5,
    sleep: async (ms) => {
      harness.sleeps.push(ms);
      harness.clockMs += ms;
    },
    paceStoreFor: () => fallbackStore,
    ...deps,
  });
}

/** Runs a batch whose records all carry the given message attributes (Number), e.g. `postponements`, `reconcilePass`. */
export async function run(handler: ReturnType<typeof build>, bodies: string[], remainingMs = 60_000, attributes: Record<string, number | string> = {}) {
  const event = sqsEvent(bodies);
  if (Object.keys(attributes).length > 0) {
    for (const record of event.Records) {
      record.messageAttributes = Object.fromEntries(
        Object.entries(attributes).map(([name, value]) => [name, { dataType: 'Number', stringValue: String(value), stringListValues: [], binaryListValues: [] }]),
      );
    }
  }
  const { result, error, output } = await captureOutput(() => handler(event, lambdaContext(remainingMs)));
  if (error) throw error;
  return { result: result!, output, metrics: metricsIn(output), logs: logLines(output) };
}

/** Runs a batch whose records carry their own message attributes (String or Number), e.g. a batch that mixes lanes. */
export async function runRecords(
  handler: ReturnType<typeof build>,
  records: Array<{ body: string; attributes?: Record<string, { type: 'String' | 'Number'; value: string }> }>,
  remainingMs = 60_000,
) {
  const event = sqsEvent(records.map((record) => record.body));
  for (const [index, record] of event.Records.entries()) {
    record.messageAttributes = Object.fromEntries(
      Object.entries(records[index]!.attributes ?? {}).map(([name, { type, value }]) => [
        name,
        { dataType: type, stringValue: value, stringListValues: [], binaryListValues: [] },
      ]),
    );
  }
  const { result, error, output } = await captureOutput(() => handler(event, lambdaContext(remainingMs)));
  if (error) throw error;
  return { result: result!, output, metrics: metricsIn(output), logs: logLines(output) };
}

export const marshalled = (value: Record<string, unknown>) => expect.objectContaining(value);

/** Entries sent to a queue (SendMessageBatch), flattened. */
export function entriesTo(queueUrl: string): Array<{ MessageBody?: string; DelaySeconds?: number; MessageGroupId?: string; MessageAttributes?: Record<string, unknown> }> {
  return sqs
    .commandCalls(SendMessageBatchCommand)
    .filter((call) => call.args[0].input.QueueUrl === queueUrl)
    .flatMap((call) => call.args[0].input.Entries ?? []);
}

/** Registers the per-test reset of the mocks, the clock and the connections. */
export function useHarness(): void {
  beforeEach(() => {
    ddb.reset();
    sqs.reset();
    s3.reset();
    harness.clockMs = NOW.getTime();
    harness.sleeps = [];
    harness.connections = new FakeConnections();
    stored([]);
    ddb.on(PutItemCommand).resolves({});
    ddb.on(UpdateItemCommand).resolves({});
    // The sync sends no transaction (see the header): one would fail its record.
    ddb.on(TransactWriteItemsCommand).rejects(new Error('the item sync sends no TransactWriteItems: each row is one PutItem or UpdateItem'));
    s3.on(PutObjectCommand).resolves({});
    s3.on(DeleteObjectCommand).resolves({});
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
      Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `dlq-${entry.Id}`, MD5OfMessageBody: 'x' })),
      Failed: [],
    }));
    sqs.on(GetQueueUrlCommand).resolves({ QueueUrl: QUEUE_URL });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [], Failed: [] });
  });
}
