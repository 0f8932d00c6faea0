/**
 * The harness of the item sync's integration tests (*.integration.test.ts): the real handler (real
 * HTTP provider client, real DynamoDB and S3 adapters) against the provider simulator, DynamoDB Local (the
 * items table keyed by connection and id) and s3rver, with SQS mocked (aws-sdk-client-mock), so the
 * exact dead-letter and visibility commands can be asserted, and the connections' access layer
 * played by SimulatorAccess (each connection's token issued by the simulator). Every run's output
 * and every DLQ message is kept, and checked at the end of each file for the tokens handed out.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { SQSClient, SendMessageBatchCommand, GetQueueUrlCommand, ChangeMessageVisibilityBatchCommand } from '@aws-sdk/client-sqs';
import { GetItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSBatchResponse } from 'aws-lambda';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { createSyncHandler, type SyncHandlerDeps } from '../../../functions/item-sync/app.js';
import { fromAttributeValue } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';
import type { ConnectionAccess, ConnectionGate } from '../../../functions/shared/connections/ports.js';
import { HttpProviderClient } from '../../../functions/shared/provider/provider-client.js';
import type { ProviderClient } from '../../../functions/shared/ports.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
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
  /** The changes written so far (every row of the changes table but the heads), by connection, then number. */
  changes(): Promise<Array<Record<string, unknown>>>;
  /** The access layer: `default` holds a token from the start. */
  access: SimulatorAccess;
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
  // The changes table of this items table: each change is written with its row (as deployed).
  const changes = `changes-${tableCounter}`;
  const client = ctx.dynamo.client();
  await createItemsTable(client, table);
  await ctx.dynamo.createChangesTable(changes);
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
        CHANGES_TABLE_NAME: changes,
        CHANGES_RETENTION_DAYS: '35',
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
      return (await ctx.dynamo.scan(changes))
        .map(toRow)
        .filter((row) => Number(row['seq']) !== 0)
        .sort((a, b) => (a['connection'] === b['connection'] ? Number(a['seq']) - Number(b['seq']) : String(a['connection']) < String(b['connection']) ? -1 : 1));
    },
  };
}

/** The writes of an items-table row: a plain PutItem or UpdateItem, or TransactWriteItems (a row with its change). */
export const writes = (operations: string[]) => operations.filter((op) => op === 'PutItem' || op === 'UpdateItem' || op === 'TransactWriteItems');
export const failed = (result: SQSBatchResponse) => result.batchItemFailures.map((failure) => failure.itemIdentifier);

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
export function losingFirstAnswer(client: DynamoDBClient, operation: 'PutItem' | 'UpdateItem' | 'TransactWriteItems'): DynamoDBClient {
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
