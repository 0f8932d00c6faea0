/**
 * The harness of the item sync's integration tests (*.integration.test.ts): the real handler (real
 * HTTP provider client, real DynamoDB and S3 adapters) against the provider simulator, DynamoDB Local (the
 * items table keyed by connection and id) and s3rver, with SQS mocked (aws-sdk-client-mock), so the
 * exact dead-letter and visibility commands can be asserted, and the connections' access layer
 * played by SimulatorAccess (each connection's token issued by the simulator). Every run's output
 * and every DLQ message is kept, and checked at the end of each file for the tokens handed out.
 *
 * The sync writes each row with one single-item write (PutItem, or UpdateItem for a tombstone) and
 * no change: the changes feed is written by the changes writer from the items table's stream
 * (functions/changes-writer). `changes()` reads that stream (DynamoDB Local's own, the table created
 * with it as the stateful stack defines it) and reads each record as the changes writer does.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { SQSClient, SendMessageBatchCommand, GetQueueUrlCommand, ChangeMessageVisibilityBatchCommand } from '@aws-sdk/client-sqs';
import { GetItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSBatchResponse } from 'aws-lambda';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { streamedChangeOf } from '../../../functions/changes-writer/app.js';
import { createSyncHandler, type SyncHandlerDeps } from '../../../functions/item-sync/app.js';
import { fromAttributeValue } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';
import type { ConnectionAccess, ConnectionGate } from '../../../functions/shared/connections/ports.js';
import { HttpProviderClient } from '../../../functions/shared/provider/provider-client.js';
import type { ProviderClient } from '../../../functions/shared/ports.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { TableStream, untracked, type LambdaStreamRecord } from '../../../dev/fakes/dynamodb-stream.js';
import { startLocalDynamo, type LocalDynamo } from '../../../dev/fakes/local-dynamo.js';
import { startS3, type LocalS3 } from '../../../dev/fakes/s3.js';
import { ProviderSimulator, type SimulatorItem } from '../../../dev/simulator/provider-simulator.js';
import { DLQ_URL, QUEUE_URL, RECONCILE_URL, lambdaContext, metricsIn, sqsEvent } from './helpers.js';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';
import { HANG_GUARD_MS } from '../../support/hang-guard.js';

export const sqs = mockClient(SQSClient);

/** The local services, started once per test file (useIntegrationHarness). */
export const ctx = {} as { dynamo: LocalDynamo; s3: LocalS3; s3Client: ReturnType<LocalS3['client']> };
let tableCounter = 0;
export const simulators: ProviderSimulator[] = [];
/** Every access token handed out and everything printed or sent: checked together at the end (expectNoTokenLeft). */
export const tokens = new Set<string>();
export const everything: string[] = [];

/**
 * The connections' access layer over the simulator: each connection's current token (issued by the
 * simulator); after a refusal, a newer token if there is one, else the connection waits (as a
 * connection whose refresh was refused does). An unknown connection is dead.
 */
export class SimulatorAccess implements ConnectionAccess {
  readonly tokens = new Map<string, string>();
  readonly refusals: Array<{ connection: string; rejected: string }> = [];

  constructor(private readonly sim: ProviderSimulator) {}

  /** Gives the connection a new valid token (the old ones keep working unless revoked). */
  issue(connection: string): string {
    const token = this.sim.issueAccessToken();
    tokens.add(token);
    this.tokens.set(connection, token);
    return token;
  }

  async open(connection: string): Promise<ConnectionGate> {
    const token = this.tokens.get(connection);
    if (token === undefined) return { kind: 'dead', reason: `unknown connection "${connection}"` };
    return { kind: 'ready', connection, token, paceKey: 'client#sim-client' };
  }

  /** As the access layer does: a token afterRefusal was asked about is not sent again. */
  knownRefused(connection: string, token: string): boolean {
    return this.refusals.some((refusal) => refusal.connection === connection && refusal.rejected === token);
  }

  async afterRefusal(connection: string, rejected: string): Promise<ConnectionGate> {
    this.refusals.push({ connection, rejected });
    const gate = await this.open(connection);
    if (gate.kind === 'ready' && gate.token === rejected) {
      return { kind: 'wait', reason: `connection "${connection}" is failing: the provider refused its refresh token`, seconds: 300 };
    }
    return gate;
  }
}

/** The items table as the stateful stack defines it: partition key `connection`, sort key `id`. */
export async function createItemsTable(client: DynamoDBClient, table: string): Promise<void> {
  await ensureItemsTable(client, table);
}

export async function getRow(client: DynamoDBClient, table: string, id: string, connection = 'default'): Promise<Record<string, AttributeValue> | undefined> {
  const output = await client.send(new GetItemCommand({ TableName: table, Key: { connection: { S: connection }, id: { S: id } }, ConsistentRead: true }));
  return output.Item;
}

export interface Env {
  sim: ProviderSimulator;
  table: string;
  /** The items bucket of this table. */
  bucket: string;
  /** Every key in the bucket, with its size. */
  objects(): Promise<Map<string, number>>;
  /** A fresh handler: a new "container" (own token cache), same table. */
  handler(overrides?: Partial<SyncHandlerDeps>, env?: Record<string, string>): ReturnType<typeof createSyncHandler>;
  run(bodies: string[], options?: { handler?: ReturnType<typeof createSyncHandler>; remainingMs?: number }): Promise<Run>;
  rows(): Promise<Array<Record<string, unknown>>>;
  row(id: string, connection?: string): Promise<Record<string, unknown> | undefined>;
  /**
   * The changes the table's writes made so far, in the order they were applied: every record of the
   * items table's stream, read as the changes writer reads it (its `streamedChangeOf`); a record
   * that makes no change is `change: 'none'`. The changes writer numbers these (all but `none`).
   */
  changes(): Promise<StreamChange[]>;
  /** Every record of the items table's stream so far, as Lambda hands them to its readers, in the order the writes were applied. */
  records(): Promise<LambdaStreamRecord[]>;
  /** The access layer: `default` holds a token from the start. */
  access: SimulatorAccess;
}

/** A stream record's change as the changes writer reads it, without the record's own position. */
export interface StreamChange {
  connection: string | undefined;
  id: string | undefined;
  change: string;
  type?: string | undefined;
  revision?: string;
  previousRevision?: string | null;
}

export interface Run {
  result: SQSBatchResponse;
  metrics: Record<string, number>;
  output: string;
  /** DynamoDB operations of this run. */
  operations: string[];
}

export function toRow(row: Record<string, AttributeValue>): Record<string, unknown> {
  return fromAttributeValue({ M: row }) as Record<string, unknown>;
}

/** Entries sent again to the sync queue (waiting records). */
export function requeued(): Array<{ MessageBody: string; DelaySeconds?: number }> {
  return sqs
    .commandCalls(SendMessageBatchCommand)
    .filter((call) => call.args[0].input.QueueUrl === QUEUE_URL)
    .flatMap((call) => (call.args[0].input.Entries ?? []) as Array<{ MessageBody: string; DelaySeconds?: number }>);
}

/** Dead letters sent (to the mocked DLQ) so far, flattened. */
export function deadLetters(): Array<{ body: string; error: string; sourceMessageId: string }> {
  return sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => {
    // Dead letters go to the DLQ; the only other SendMessageBatch calls send waiting records to their
    // own queue, and a folder's children to the reconcile queue (discovery).
    expect([DLQ_URL, QUEUE_URL, RECONCILE_URL]).toContain(call.args[0].input.QueueUrl);
    if (call.args[0].input.QueueUrl !== DLQ_URL) return [];
    return (call.args[0].input.Entries ?? []).map((entry) => ({
      body: entry.MessageBody!,
      error: entry.MessageAttributes!['error']!.StringValue!,
      sourceMessageId: entry.MessageAttributes!['sourceMessageId']!.StringValue!,
    }));
  });
}

/** Two fresh containers sync the same ids at once, under one capture (captures nest, never interleave). */
export async function twoContainersAtOnce(env: Env, ids: string[]) {
  const [one, two] = [env.handler(), env.handler()];
  const { result, output } = await captureOutput(() =>
    Promise.all([one(sqsEvent(ids), lambdaContext()), two(sqsEvent(ids), lambdaContext())]),
  );
  everything.push(output);
  return { result, output, total: metricsIn(output) };
}

export async function setup(options: { items?: SimulatorItem[]; revisionField?: string } = {}): Promise<Env> {
  const sim = await ProviderSimulator.start({
    items: options.items ?? [],
    revisionField: options.revisionField ?? 'revision',
    seed: 1000 + tableCounter, // distinct tokens per simulator
  });
  simulators.push(sim);
  const table = `items-${++tableCounter}`;
  const bucket = `items-bucket-${tableCounter}`;
  const client = ctx.dynamo.client();
  await createItemsTable(client, table);
  await ctx.s3.createBucket(bucket);
  const access = new SimulatorAccess(sim);
  access.issue('default');

  const handler = (overrides: Partial<SyncHandlerDeps> = {}, env: Record<string, string> = {}) => {
    // One container: its own pace (one pace key here).
    const paceStore = new MemoryPaceStore();
    return createSyncHandler({
      config: loadSyncConfig({
        PROVIDER_BASE_URL: sim.baseUrl,
        CONNECTIONS_TABLE_NAME: 'connections',
        CONNECTIONS_KEY_ARN: 'arn:aws:kms:eu-west-1:000000000000:key/00000000-0000-4000-8000-000000000000',
        ITEMS_TABLE_NAME: table,
        ITEMS_BUCKET_NAME: bucket,
        REVISION_FIELD: options.revisionField ?? 'revision',
        DEAD_LETTER_QUEUE_URL: DLQ_URL,
        // The longest the configuration allows: a request to the simulator that a loaded machine
        // slows down is not timed out (a request that hangs ends at the invocation's deadline).
        PROVIDER_TIMEOUT_MS: '120000',
        CONTROL_TABLE_NAME: 'control',
        PROVIDER_REQUESTS_PER_SECOND: '1000',
        ...env,
      }),
      paceStoreFor: () => paceStore,
      dynamodb: client,
      sqs: new SQSClient({ region: 'eu-west-1' }),
      connections: access,
      s3: ctx.s3Client,
      // Real waits, only shorter: the backoff logic runs as in production.
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 5))),
      ...overrides,
    });
  };
  const defaultHandler = handler();

  return {
    sim,
    table,
    bucket,
    objects: () => ctx.s3.listObjects(bucket),
    handler,
    access,
    async run(bodies, runOptions = {}) {
      const before = ctx.dynamo.operations.length;
      const { result, error, output } = await captureOutput(() =>
        (runOptions.handler ?? defaultHandler)(sqsEvent(bodies), lambdaContext(runOptions.remainingMs ?? 60_000)),
      );
      everything.push(output, JSON.stringify(result ?? null), String(error ?? ''));
      if (error) throw error;
      return { result: result!, metrics: metricsIn(output), output, operations: ctx.dynamo.operations.slice(before) };
    },
    async rows() {
      return (await ctx.dynamo.scan(table)).map(toRow);
    },
    async row(id, connection) {
      const row = await getRow(client, table, id, connection);
      return row ? toRow(row) : undefined;
    },
    async changes() {
      return (await streamRecords(table)).map(changeOfRecord);
    },
    records() {
      return streamRecords(table);
    },
  };
}

/**
 * The writes of an items-table row: a PutItem or an UpdateItem (and a TransactWriteItems, which the
 * sync no longer sends: an exact list of the writes shows one).
 */
export const writes = (operations: string[]) => operations.filter((op) => op === 'PutItem' || op === 'UpdateItem' || op === 'TransactWriteItems');
export const failed = (result: SQSBatchResponse) => result.batchItemFailures.map((failure) => failure.itemIdentifier);

/** Every record of the table's stream so far, from its first, in the order DynamoDB applied the writes. */
async function streamRecords(table: string): Promise<LambdaStreamRecord[]> {
  const stream = new TableStream(ctx.dynamo, table, untracked, Date.now);
  const records: LambdaStreamRecord[] = [];
  try {
    // Read until two reads in a row find nothing (the first describes the stream).
    for (let empty = 0; empty < 2; ) {
      const read = await stream.read(1000);
      if (read.records.length === 0) empty += 1;
      else empty = 0;
      records.push(...read.records);
    }
  } finally {
    stream.close();
  }
  const position = (record: LambdaStreamRecord): bigint => BigInt(record.dynamodb.SequenceNumber ?? '0');
  return records.sort((a, b) => (position(a) < position(b) ? -1 : position(a) > position(b) ? 1 : 0));
}

/** A record's change as the changes writer reads it; a record it could not read fails the test. */
function changeOfRecord(record: LambdaStreamRecord): StreamChange {
  const change = streamedChangeOf(record, (reason) => {
    throw new Error(`the changes writer cannot read a record of the items stream: ${reason}`);
  });
  const keys = record.dynamodb.Keys;
  if (change === undefined) return { connection: keys?.['connection']?.S, id: keys?.['id']?.S, change: 'none' };
  const { connection, id, change: kind, type, revision, previousRevision } = change;
  return { connection, id, change: kind, type, revision, previousRevision };
}

/**
 * A provider client over the simulator at `baseUrl` whose first getItem, once fetched, is held
 * until `release()` (a container slow to write what it fetched); `fetchedOnce` resolves then.
 */
export function heldAfterFirstFetch(baseUrl: string, maxResponseBytes: number): { provider: ProviderClient; fetchedOnce: Promise<void>; release: () => void } {
  const real = new HttpProviderClient({ baseUrl, timeoutMs: HANG_GUARD_MS, maxResponseBytes });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let fetched!: () => void;
  const fetchedOnce = new Promise<void>((resolve) => (fetched = resolve));
  let held = false;
  const provider: ProviderClient = {
    getToken: (credentials) => real.getToken(credentials),
    async getItem(id, token, options) {
      const body = await real.getItem(id, token, options);
      if (!held) {
        held = true;
        fetched();
        await gate;
      }
      return body;
    },
  };
  return { provider, fetchedOnce, release };
}

/**
 * The client with the answer to its first `operation` lost: DynamoDB applies the write, then the
 * client sees a dropped connection (below the SDK's retry middleware, which sends it again).
 */
export function losingFirstAnswer(client: DynamoDBClient, operation: 'PutItem' | 'UpdateItem'): DynamoDBClient {
  let lost = false;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (!lost && context.commandName === `${operation}Command`) {
        lost = true;
        throw Object.assign(new Error('socket hang up (the answer was lost)'), { name: 'TimeoutError', code: 'ECONNRESET', $metadata: {} });
      }
      return result;
    },
    { step: 'deserialize', priority: 'high', name: 'loseFirstAnswer' },
  );
  return client;
}

/**
 * The client with its first PutItem of an inline row (`item`) padded past DynamoDB's 400 KB on its
 * way out, after the store's size estimate let the row through: DynamoDB Local refuses it for its
 * size, as DynamoDB refuses a row its own measure puts over the limit. `padded` counts the rows padded.
 */
export function paddingFirstInlineRow(client: DynamoDBClient): { client: DynamoDBClient; padded: () => number } {
  let padded = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Item?: Record<string, AttributeValue> };
      if (padded === 0 && context.commandName === 'PutItemCommand' && input.Item?.['item'] !== undefined) {
        padded += 1;
        return next({ ...args, input: { ...input, Item: { ...input.Item, padding: { S: 'p'.repeat(400 * 1024) } } } });
      }
      return next(args);
    },
    { step: 'initialize', name: 'padFirstInlineRow' },
  );
  return { client, padded: () => padded };
}

/** Registers the start and stop of the local services and the per-test reset of the SQS mock. */
export function useIntegrationHarness(): void {
  beforeAll(async () => {
    ctx.dynamo = await startLocalDynamo();
    ctx.s3 = await startS3();
    ctx.s3Client = ctx.s3.client();
  });

  beforeEach(() => {
    sqs.reset();
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
      Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `dlq-${entry.Id}`, MD5OfMessageBody: 'x' })),
      Failed: [],
    }));
    sqs.on(GetQueueUrlCommand).resolves({ QueueUrl: QUEUE_URL });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [], Failed: [] });
  });

  afterEach(() => {
    for (const letter of deadLetters()) everything.push(JSON.stringify(letter));
  });

  afterAll(async () => {
    await Promise.all(simulators.map((sim) => sim.close()));
    await ctx.dynamo?.close();
    ctx.s3Client?.destroy();
    await ctx.s3?.close();
  });
}

/** The last test of a file: no token handed out appears in anything the runs printed, answered or sent. */
export function expectNoTokenLeft(): void {
  describe('secrets', () => {
    it('no token ever appears in a log line, a metric, a response or a dead letter', () => {
      expect(tokens.size).toBeGreaterThan(2);
      const text = everything.join('\n');
      expect(text.length).toBeGreaterThan(5_000);
      for (const token of tokens) expect(text).not.toContain(token);
    });
  });
}
