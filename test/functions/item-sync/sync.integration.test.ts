/**
 * The real item sync handler (real HTTP provider client, real DynamoDB and S3 adapters) against the
 * provider simulator, dynalite and s3rver, with Secrets Manager and SQS mocked (aws-sdk-client-mock), so the exact
 * dead-letter and visibility commands can be asserted (the local run uses the HTTP emulator in
 * dev/fakes/aws-emulator.ts instead, the bench and the soak the same SQS and Secrets Manager models in
 * process). Every
 * run's output and every DLQ message is kept, and checked at the end for the tokens handed out.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { SQSClient, SendMessageBatchCommand, GetQueueUrlCommand, ChangeMessageVisibilityBatchCommand } from '@aws-sdk/client-sqs';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSBatchResponse } from 'aws-lambda';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import { createSyncHandler, type SyncHandlerDeps } from '../../../functions/item-sync/app.js';
import { fromAttributeValue } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';
import { HttpProviderClient } from '../../../functions/shared/provider/provider-client.js';
import type { ProviderClient } from '../../../functions/shared/ports.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { startDynalite, type LocalDynamo } from '../../../dev/fakes/dynalite.js';
import { itemObjectOf, readItemObject, S3_LOCAL_CREDENTIALS, startS3, type LocalS3 } from '../../../dev/fakes/s3.js';
import { generateItemTree } from '../../../dev/simulator/item-tree.js';
import { ProviderSimulator, type SimulatorItem } from '../../../dev/simulator/provider-simulator.js';
import { DLQ_URL, QUEUE_URL, lambdaContext, logLines, metricsIn, sqsEvent } from './helpers.js';

const TOKEN_SECRET = 'content-sync/access-token';

const sqs = mockClient(SQSClient);
const secrets = mockClient(SecretsManagerClient);

let dynamo: LocalDynamo;
let s3: LocalS3;
let tableCounter = 0;
const simulators: ProviderSimulator[] = [];
/** Every access token handed out and everything printed or sent: checked together at the end. */
const tokens = new Set<string>();
const everything: string[] = [];

/** What the token secret holds now (the mocked GetSecretValue reads it on every call). */
let secretToken = '';

interface Env {
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
  row(id: string): Promise<Record<string, unknown> | undefined>;
  /** Gives the secret a new valid token (the old ones keep working unless revoked). */
  rotateToken(): string;
}

interface Run {
  result: SQSBatchResponse;
  metrics: Record<string, number>;
  output: string;
  /** DynamoDB operations of this run. */
  operations: string[];
}

function toRow(row: Record<string, AttributeValue>): Record<string, unknown> {
  return fromAttributeValue({ M: row }) as Record<string, unknown>;
}

/** Dead letters sent (to the mocked DLQ) so far, flattened. */
/** Entries sent again to the sync queue (waiting records). */
function requeued(): Array<{ MessageBody: string; DelaySeconds?: number }> {
  return sqs
    .commandCalls(SendMessageBatchCommand)
    .filter((call) => call.args[0].input.QueueUrl === QUEUE_URL)
    .flatMap((call) => (call.args[0].input.Entries ?? []) as Array<{ MessageBody: string; DelaySeconds?: number }>);
}

function deadLetters(): Array<{ body: string; error: string; sourceMessageId: string }> {
  return sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => {
    // Dead letters go to the DLQ; the only other SendMessageBatch sends waiting records to their own queue.
    expect([DLQ_URL, QUEUE_URL]).toContain(call.args[0].input.QueueUrl);
    if (call.args[0].input.QueueUrl !== DLQ_URL) return [];
    return (call.args[0].input.Entries ?? []).map((entry) => ({
      body: entry.MessageBody!,
      error: entry.MessageAttributes!['error']!.StringValue!,
      sourceMessageId: entry.MessageAttributes!['sourceMessageId']!.StringValue!,
    }));
  });
}

/** Two fresh containers sync the same ids at once, under one capture (captures nest, never interleave). */
async function twoContainersAtOnce(env: Env, ids: string[]) {
  const [one, two] = [env.handler(), env.handler()];
  const { result, output } = await captureOutput(() =>
    Promise.all([one(sqsEvent(ids), lambdaContext()), two(sqsEvent(ids), lambdaContext())]),
  );
  everything.push(output);
  return { result, output, total: metricsIn(output) };
}

async function setup(options: { items?: SimulatorItem[]; revisionField?: string } = {}): Promise<Env> {
  const sim = await ProviderSimulator.start({
    items: options.items ?? [],
    revisionField: options.revisionField ?? 'revision',
    seed: 1000 + tableCounter, // distinct tokens per simulator
  });
  simulators.push(sim);
  const table = `items-${++tableCounter}`;
  const bucket = `items-bucket-${tableCounter}`;
  await dynamo.createItemsTable(table);
  await s3.createBucket(bucket);
  const client = dynamo.client();

  const rotateToken = (): string => {
    secretToken = sim.issueAccessToken();
    tokens.add(secretToken);
    return secretToken;
  };
  rotateToken();

  const handler = (overrides: Partial<SyncHandlerDeps> = {}, env: Record<string, string> = {}) =>
    createSyncHandler({
      config: loadSyncConfig({
        PROVIDER_BASE_URL: sim.baseUrl,
        ACCESS_TOKEN_SECRET_ID: TOKEN_SECRET,
        ITEMS_TABLE_NAME: table,
        ITEMS_BUCKET_NAME: bucket,
        REVISION_FIELD: options.revisionField ?? 'revision',
        DEAD_LETTER_QUEUE_URL: DLQ_URL,
        PROVIDER_TIMEOUT_MS: '5000',
        CONTROL_TABLE_NAME: 'control',
        PROVIDER_REQUESTS_PER_SECOND: '1000',
        ...env,
      }),
      paceStore: new MemoryPaceStore(),
      dynamodb: client,
      sqs: new SQSClient({ region: 'eu-west-1' }),
      secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
      s3: s3Client,
      // Real waits, only shorter: the backoff logic runs as in production.
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 5))),
      ...overrides,
    });
  const defaultHandler = handler();

  return {
    sim,
    table,
    bucket,
    objects: () => s3.listObjects(bucket),
    handler,
    rotateToken,
    async run(bodies, runOptions = {}) {
      const before = dynamo.operations.length;
      const { result, error, output } = await captureOutput(() =>
        (runOptions.handler ?? defaultHandler)(sqsEvent(bodies), lambdaContext(runOptions.remainingMs ?? 60_000)),
      );
      everything.push(output, JSON.stringify(result ?? null), String(error ?? ''));
      if (error) throw error;
      return { result: result!, metrics: metricsIn(output), output, operations: dynamo.operations.slice(before) };
    },
    async rows() {
      return (await dynamo.scan(table)).map(toRow);
    },
    async row(id) {
      const row = await dynamo.getRow(table, id);
      return row ? toRow(row) : undefined;
    },
  };
}

const writes = (operations: string[]) => operations.filter((op) => op === 'PutItem' || op === 'UpdateItem');
const failed = (result: SQSBatchResponse) => result.batchItemFailures.map((failure) => failure.itemIdentifier);

/**
 * A provider client over the simulator at `baseUrl` whose first getItem, once fetched, is held
 * until `release()` (a container slow to write what it fetched); `fetchedOnce` resolves then.
 */
function heldAfterFirstFetch(baseUrl: string, maxResponseBytes: number): { provider: ProviderClient; fetchedOnce: Promise<void>; release: () => void } {
  const real = new HttpProviderClient({ baseUrl, timeoutMs: 5000, maxResponseBytes });
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
function losingFirstAnswer(client: DynamoDBClient, operation: 'PutItem' | 'UpdateItem'): DynamoDBClient {
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

let s3Client: ReturnType<LocalS3['client']>;

beforeAll(async () => {
  dynamo = await startDynalite();
  s3 = await startS3();
  s3Client = s3.client();
});

beforeEach(() => {
  sqs.reset();
  secrets.reset();
  secrets.on(GetSecretValueCommand, { SecretId: TOKEN_SECRET }).callsFake(() => ({
    SecretString: JSON.stringify({ accessToken: secretToken, refreshedAt: new Date().toISOString() }),
  }));
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
  await dynamo?.close();
  s3Client?.destroy();
  await s3?.close();
});

/** An item with every kind of JSON value the provider may send. */
const RICH: SimulatorItem = {
  id: 'rich-é-文件',
  type: 'file',
  revision: 12,
  name: 'Résumé ✓ 日本語 🎉.pdf',
  empty: '',
  nothing: null,
  flags: [true, false],
  size: 0,
  ratio: -0.125,
  large: 9007199254740991,
  tags: [],
  owner: { id: 'usr-002', name: 'Zoë Ångström', address: { city: 'Москва', zip: '' } },
  versions: [{ number: 1, comment: '' }, { number: 2, comment: null, nested: [[1, [2, [3]]]] }],
};

describe('item sync against the provider simulator and dynalite', () => {
  it('stores a new batch whole: every field, nested values, unicode, empty strings and null', async () => {
    const tree = generateItemTree({ count: 9, seed: 7 });
    const env = await setup({ items: [...tree, RICH] });
    const ids = [...tree.map((i) => i.id), RICH.id];

    const { result, metrics } = await env.run(ids.map((id) => JSON.stringify({ id })));

    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsFetched: 10, ItemsCreated: 10, RecordsRetried: 0, RecordsDeadLettered: 0 });
    const rows = await env.rows();
    expect(rows).toHaveLength(10);
    for (const row of rows) {
      const source = env.sim.getItem(row['id'] as string)!;
      expect(row['item']).toEqual(source);
      expect(row['type']).toBe(source.type);
      expect(row['revision']).toBe(String(source['revision']));
      expect(row['syncedAt']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Object.keys(row).sort()).toEqual(['id', 'item', 'revision', 'syncedAt', 'type']);
    }
    // The revision attribute is text (S), the item's own revision stays a number (N).
    const raw = await dynamo.getRow(env.table, RICH.id);
    expect(raw?.['revision']).toEqual({ S: '12' });
    expect((raw?.['item']?.M ?? {})['revision']).toEqual({ N: '12' });
    expect((raw?.['item']?.M ?? {})['empty']).toEqual({ S: '' });
    expect((raw?.['item']?.M ?? {})['nothing']).toEqual({ NULL: true });
  });

  it('writes nothing when the same batch comes again, and updates exactly the items whose revision changed', async () => {
    const tree = generateItemTree({ count: 8, seed: 3, revisionField: 'meta.rev' });
    const env = await setup({ items: tree, revisionField: 'meta.rev' });
    const bodies = tree.map((i) => i.id);
    await env.run(bodies);
    const first = await env.rows();

    const again = await env.run(bodies);
    expect(again.result.batchItemFailures).toEqual([]);
    expect(writes(again.operations)).toEqual([]);
    expect(again.metrics).toMatchObject({ ItemsFetched: 8, ItemsUnchanged: 8, ItemsCreated: 0, ItemsUpdated: 0 });
    expect(await env.rows()).toEqual(first);

    const changed = [tree[2]!.id, tree[5]!.id];
    for (const id of changed) env.sim.bumpRevision(id);
    const third = await env.run(bodies);
    expect(third.result.batchItemFailures).toEqual([]);
    expect(writes(third.operations)).toEqual(['PutItem', 'PutItem']);
    expect(third.metrics).toMatchObject({ ItemsUpdated: 2, ItemsUnchanged: 6 });
    const after = await env.rows();
    for (const row of after) {
      const id = row['id'] as string;
      const before = first.find((r) => r['id'] === id)!;
      if (changed.includes(id)) {
        const expected = (env.sim.getItem(id)!['meta'] as { rev: number }).rev;
        expect(row['revision']).toBe(String(expected));
        expect(row['revision']).not.toBe(before['revision']);
        expect(row['item']).toEqual(env.sim.getItem(id));
      } else {
        expect(row).toEqual(before);
      }
    }
  });

  it('tells apart revisions beyond 2^53 and stores numbers exactly as the provider wrote them', async () => {
    const env = await setup();
    const answer = (revision: string) =>
      env.sim.addFault({
        endpoint: 'items',
        itemId: 'big',
        times: 1,
        fault: { kind: 'body', rawBody: `{"id":"big","type":"file","revision":${revision},"size":1.50,"ns":-0}` },
      });

    answer('12345678901234567891');
    await env.run(['big']);
    answer('12345678901234567892'); // the same double as ...891: JSON.parse would call it unchanged
    const second = await env.run(['big']);
    answer('12345678901234567892');
    const third = await env.run(['big']);

    expect(second.metrics).toMatchObject({ ItemsUpdated: 1, ItemsUnchanged: 0 });
    expect(writes(second.operations)).toEqual(['PutItem']);
    expect(third.metrics).toMatchObject({ ItemsUpdated: 0, ItemsUnchanged: 1 });
    expect(writes(third.operations)).toEqual([]);
    const row = (await env.row('big'))!;
    expect(row['revision']).toBe('12345678901234567892');
    expect(String((row['item'] as Record<string, unknown>)['revision'])).toBe('12345678901234567892');
  });

  it('dead-letters bad bodies and stores the rest of the batch', async () => {
    const env = await setup({ items: [{ id: 'good-1', type: 'file', revision: 1 }, { id: 'good-2', type: 'folder', revision: 'r1' }] });
    const bodies = ['{"id":"good-1"}', '{"id": 42}', '{oops', 'bad\u0007id', 'good-2', 'z'.repeat(1025)];

    const { result, metrics } = await env.run(bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['good-1', 'good-2']);
    expect(deadLetters().map((letter) => [letter.sourceMessageId, letter.body])).toEqual([
      ['m2', '{"id": 42}'],
      ['m3', '{oops'],
      ['m4', 'bad\u0007id'],
      ['m6', 'z'.repeat(1025)],
    ]);
    for (const letter of deadLetters()) expect(letter.error).toMatch(/^the (message body|item id)/);
    expect(metrics).toMatchObject({ RecordsDeadLettered: 4, ItemsCreated: 2 });
    expect(env.sim.requests.map((request) => request.itemId)).toEqual(['good-1', 'good-2']);
  });

  it('a 5xx outage for some items fails only their records', async () => {
    const env = await setup({ items: ['a', 'b', 'c', 'd'].map((id) => ({ id, type: 'file' as const, revision: 1 })) });
    env.sim.addFault({ endpoint: 'items', itemId: 'b', fault: { kind: 'status', status: 503 } });
    env.sim.addFault({ endpoint: 'items', itemId: 'd', fault: { kind: 'status', status: 500 } });

    const { result, metrics } = await env.run(['a', 'b', 'c', 'd', '{"id":"b"}']);

    expect(failed(result)).toEqual(['m2', 'm4', 'm5']);
    expect((await env.rows()).map((row) => row['id'])).toEqual(['a', 'c']);
    expect(deadLetters()).toEqual([]);
    // Three attempts each (SYNC_FETCH_ATTEMPTS default), one fetch for the two "b" records.
    expect(env.sim.requests.filter((r) => r.itemId === 'b')).toHaveLength(3);
    expect(env.sim.requests.filter((r) => r.itemId === 'd')).toHaveLength(3);
    expect(metrics).toMatchObject({ RecordsRetried: 3, ItemsCreated: 2 });
  });

  it('a short 5xx burst, a dropped connection and a 408 are absorbed within the invocation', async () => {
    const env = await setup({ items: ['a', 'b', 'c'].map((id) => ({ id, type: 'file' as const, revision: 1 })) });
    env.sim.addFault({ endpoint: 'items', itemId: 'a', times: 2, fault: { kind: 'status', status: 502 } });
    env.sim.addFault({ endpoint: 'items', itemId: 'b', times: 1, fault: { kind: 'drop' } });
    env.sim.addFault({ endpoint: 'items', itemId: 'c', times: 1, fault: { kind: 'status', status: 408 } });

    const { result } = await env.run(['a', 'b', 'c']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['a', 'b', 'c']);
    expect(env.sim.requests.filter((r) => r.itemId === 'a').map((r) => r.status)).toEqual([502, 502, 200]);
  });

  it('sends tricky ids as one percent-encoded segment under /items/ and nowhere else', async () => {
    const ids = ['../getToken', 'a/b?c#d', '..', '%2e%2e', 'ünï cödé'];
    const env = await setup({ items: ids.filter((id) => id !== '..').map((id) => ({ id, type: 'file' as const, revision: 1 })) });

    const { result } = await env.run(ids.map((id) => JSON.stringify({ id })));

    expect(result.batchItemFailures).toEqual([]);
    expect(env.sim.requests.map((r) => r.rawUrl).sort()).toEqual(
      [
        '/api/v2/items/..%2FgetToken',
        '/api/v2/items/a%2Fb%3Fc%23d',
        '/api/v2/items/%252e%252e',
        '/api/v2/items/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9',
      ].sort(),
    );
    expect(env.sim.requests.every((r) => r.endpoint === 'items')).toBe(true);
    expect((await env.rows()).map((row) => row['id']).sort()).toEqual(['%2e%2e', '../getToken', 'a/b?c#d', 'ünï cödé'].sort());
    // ".." cannot be one path segment: dead, never sent.
    expect(deadLetters().map((letter) => letter.body)).toEqual(['{"id":".."}']);
  });

  it('recovers from a 401 once the secret holds a new token; postpones (breaker open) while it does not', async () => {
    const env = await setup({ items: [{ id: 'a', type: 'file', revision: 1 }, { id: 'b', type: 'file', revision: 1 }] });
    let now = Date.now();
    const handler = env.handler({
      clock: { now: () => new Date(now) },
      sleep: (ms) => {
        now += ms;
        return new Promise((resolve) => setTimeout(resolve, Math.min(ms, 5)));
      },
    }); // one container throughout, on a clock this test moves
    await env.run(['a'], { handler });

    // The provider revokes the token; the refresher has not run yet.
    env.sim.revokeAccessTokens();
    env.sim.bumpRevision('a');
    const stale = await env.run(['a', 'b'], { handler });
    expect(failed(stale.result)).toEqual([]);
    expect(stale.metrics).toMatchObject({ RecordsPostponed: 2, BreakerOpen: 1 });
    expect(requeued().map((entry) => entry.MessageBody).sort()).toEqual(['a', 'b']);
    expect(deadLetters()).toEqual([]);

    // The refresher stores a new token; at the next probe (20 s) one record goes through and closes the breaker.
    env.rotateToken();
    now += 21_000;
    const requestsBefore = env.sim.requests.length;
    const probe = await env.run(['a', 'b'], { handler });
    expect(failed(probe.result)).toEqual([]);
    expect(probe.metrics).toMatchObject({ ItemsUpdated: 1, RecordsPostponed: 1, BreakerOpen: 0 });
    expect(env.sim.requests.slice(requestsBefore).map((r) => r.status)).toEqual([200]);

    const after = await env.run(['b'], { handler });
    expect(after.result).toEqual({ batchItemFailures: [] });
    expect((await env.row('a'))?.['revision']).toBe('2');
    expect((await env.row('b'))?.['revision']).toBe('1');
  });

  it('tombstones a stored item on 404, keeping its last copy; an unknown id writes nothing', async () => {
    const env = await setup({ items: [{ id: 'doomed', type: 'folder', revision: 4, name: 'Old' }] });
    await env.run(['doomed']);
    const before = await env.row('doomed');
    env.sim.deleteItem('doomed');

    const { result, metrics, operations } = await env.run(['doomed', 'never-existed']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsDeleted: 1 });
    expect(writes(operations)).toEqual(['UpdateItem']);
    const after = await env.row('doomed');
    expect(after).toMatchObject({ deleted: true, revision: '4', item: before?.['item'] });
    expect(after?.['syncedAt']).not.toBe(undefined);
    expect(await env.row('never-existed')).toBeUndefined();

    // Again: already a tombstone, nothing written. Then the item comes back.
    expect(writes((await env.run(['doomed'])).operations)).toEqual([]);
    env.sim.setItem({ id: 'doomed', type: 'folder', revision: 4, name: 'Restored' });
    await env.run(['doomed']);
    const restored = await env.row('doomed');
    expect(restored).not.toHaveProperty('deleted');
    expect(restored?.['item']).toMatchObject({ name: 'Restored' });
  });

  it('fetches an id once for duplicate records in a batch', async () => {
    const env = await setup({ items: [{ id: 'dup', type: 'file', revision: 1 }] });

    const { result } = await env.run(['dup', '{"id":"dup"}', '  dup  ']);

    expect(result.batchItemFailures).toEqual([]);
    expect(env.sim.requests).toHaveLength(1);
    expect(await env.rows()).toHaveLength(1);
  });

  it('dead-letters an id mismatch, a missing revision, an unknown type, an HTML 200 and a 400; stores a 600 KB item (in the items bucket)', async () => {
    const env = await setup();
    env.sim.setItem({ id: 'other', type: 'file', revision: 1 }, 'mismatch');
    env.sim.setItem({ id: 'norev', type: 'file' });
    env.sim.setItem({ id: 'weird', type: 'symlink' as 'file', revision: 1 });
    env.sim.setItem({ id: 'html', type: 'file', revision: 1 });
    env.sim.addFault({ itemId: 'html', fault: { kind: 'body', rawBody: '<html><body>Maintenance</body></html>', contentType: 'text/html' } });
    env.sim.addFault({ itemId: 'bad', fault: { kind: 'status', status: 400 } });
    env.sim.setItem({ id: 'huge', type: 'file', revision: 1, content: 'x'.repeat(600 * 1024) });
    env.sim.setItem({ id: 'fine', type: 'file', revision: 1 });

    const ids = ['mismatch', 'norev', 'weird', 'html', 'bad', 'huge', 'fine'];
    const { result, metrics } = await env.run(ids);

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['fine', 'huge']);
    expect((await env.row('huge'))?.['itemObject']).toBeDefined();
    const reasons = Object.fromEntries(deadLetters().map((letter) => [letter.body, letter.error]));
    expect(reasons).toEqual({
      mismatch: 'the provider answered with another item (id "other") than the one asked for',
      norev: 'the provider\'s item has no value at the revision field "revision"; expected a number or a non-empty string',
      weird: 'the provider\'s item has type "symlink"; expected "file" or "folder"',
      html: expect.stringMatching(/^the provider's answer is not an item \(getItem: the 200 body is not JSON; HTTP 200\)$/),
      bad: expect.stringMatching(/^the provider cannot serve this item as asked \(.*HTTP 400.*\)$/),
    });
    expect(metrics).toMatchObject({ RecordsDeadLettered: 5, ItemsCreated: 2, RecordsRetried: 0 });
    // Each was asked once: none of these is worth a retry.
    expect(env.sim.requests).toHaveLength(7);
  });

  it('ends a race between two handler instances on one id with the newest revision stored', async () => {
    const env = await setup({ items: [{ id: 'race', type: 'file', revision: 1, body: 'v1' }] });
    await env.run(['race']);

    // Container A fetches revision 2 but is slow to write it (held after the fetch)...
    env.sim.setItem({ id: 'race', type: 'file', revision: 2, body: 'v2' });
    const slow = heldAfterFirstFetch(env.sim.baseUrl, 1 << 20);
    const a = env.run(['race'], { handler: env.handler({ provider: slow.provider }) });
    await slow.fetchedOnce;

    // ...while container B fetches revision 3 and stores it.
    env.sim.setItem({ id: 'race', type: 'file', revision: 3, body: 'v3' });
    const b = await env.run(['race'], { handler: env.handler() });
    expect(b.metrics).toMatchObject({ ItemsUpdated: 1 });
    expect((await env.row('race'))?.['revision']).toBe('3');

    // A's write of revision 2 must lose: it reads the row again, fetches again, finds 3 stored.
    slow.release();
    const resultA = await a;
    expect(resultA.result).toEqual({ batchItemFailures: [] });
    expect(resultA.metrics).toMatchObject({ ItemsFetched: 2, ItemsUnchanged: 1, ItemsUpdated: 0 });
    const row = await env.row('race');
    expect(row).toMatchObject({ revision: '3', item: { body: 'v3', revision: 3 } });
  });

  it('two containers syncing the same new ids at once create each row once, without an error', async () => {
    const items = Array.from({ length: 6 }, (_, n) => ({ id: `p${n}`, type: 'file' as const, revision: 1 }));
    const env = await setup({ items });
    const ids = items.map((i) => i.id);
    const { result, total } = await twoContainersAtOnce(env, ids);

    expect(result).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(total['ItemsCreated']).toBe(6); // the loser of each race re-read, re-fetched and found it unchanged
    expect((total['ItemsCreated'] ?? 0) + (total['ItemsUnchanged'] ?? 0)).toBe(12);
    expect((await env.rows()).map((row) => row['id'])).toEqual(ids);
  });

  it('absorbs DynamoDB throttling (reads and writes)', async () => {
    const env = await setup({ items: ['t1', 't2', 't3'].map((id) => ({ id, type: 'file' as const, revision: 1 })) });
    dynamo.throttle({ operation: 'BatchGetItem', times: 1, error: 'ThrottlingException' });
    dynamo.throttle({ operation: 'PutItem', times: 2, error: 'ProvisionedThroughputExceededException' });
    const throttledBefore = dynamo.throttled;

    const { result, metrics } = await env.run(['t1', 't2', 't3']);

    expect(dynamo.throttled - throttledBefore).toBe(3);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsCreated: 3, RecordsRetried: 0 });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['t1', 't2', 't3']);
  });

  it('sends a rate-limited record again, delayed by its Retry-After, without a second request', async () => {
    const env = await setup({ items: [{ id: 'limited', type: 'file', revision: 1 }] });
    env.sim.addFault({ itemId: 'limited', fault: { kind: 'status', status: 429, headers: { 'Retry-After': '90' } } });

    const { result, metrics } = await env.run(['limited']);

    expect(failed(result)).toEqual([]);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: [{ Id: 'm0', MessageBody: 'limited', DelaySeconds: 90, MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } }],
    });
    expect(sqs).not.toHaveReceivedCommand(ChangeMessageVisibilityBatchCommand);
    expect(metrics).toMatchObject({ RecordsPostponed: 1, ProviderRateLimited: 1 });
    expect(env.sim.requests).toHaveLength(1);
  });

  it('hands back a record whose request hangs past the time the invocation has', async () => {
    const env = await setup({ items: [{ id: 'stuck', type: 'file', revision: 1 }, { id: 'quick', type: 'file', revision: 1 }] });
    env.sim.addFault({ itemId: 'stuck', fault: { kind: 'hang' } });

    // 1.6 s left, 1.2 s kept back: 400 ms of provider work at most.
    const { result } = await env.run(['stuck', 'quick'], { handler: env.handler({ safetyMarginMs: 1_200 }), remainingMs: 1_600 });

    expect(failed(result)).toEqual(['m1']);
    expect((await env.rows()).map((row) => row['id'])).toEqual(['quick']);
  });
});

/** The object a row points to, read back from the bucket and checked against the pointer (size and SHA-256). */
async function objectOf(env: Env, row: Record<string, unknown> | undefined) {
  const pointer = row ? itemObjectOf(row) : undefined;
  if (!pointer) throw new Error(`the row ${JSON.stringify(row?.['id'])} has no itemObject`);
  return { pointer, read: await readItemObject(s3Client, env.bucket, pointer) };
}

/** Every row's object exists, and the bucket holds no other: no pointer to nothing, no orphan. */
async function expectObjectsAgreeWithRows(env: Env): Promise<string[]> {
  const keys = [...(await env.objects()).keys()].sort();
  const pointed = (await env.rows()).map((row) => itemObjectOf(row)?.key).filter((key): key is string => key !== undefined).sort();
  expect(keys).toEqual(pointed);
  return keys;
}

describe('items too large for a row, against s3rver', () => {
  it('a 600 KB item is stored whole in the bucket and its row points to it; a newer large revision replaces the object; a small one goes back inline and the object is gone', async () => {
    const big = (revision: number, size: number): SimulatorItem => ({ id: 'big', type: 'file', revision, content: 'x'.repeat(size), meta: { n: 12345678901234567891n.toString() } });
    const env = await setup({ items: [big(1, 600 * 1024)] });

    const first = await env.run(['big']);
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(first.metrics).toMatchObject({ ItemsCreated: 1, RecordsDeadLettered: 0 });
    const row1 = await env.row('big');
    expect(row1).toMatchObject({ id: 'big', type: 'file', revision: '1', syncedAt: expect.any(String) });
    expect(row1).not.toHaveProperty('item');
    const { pointer: p1, read: r1 } = await objectOf(env, row1);
    expect(r1).toEqual({ kind: 'found', item: env.sim.getItem('big') });
    expect(p1.size).toBeGreaterThan(600 * 1024);
    expect(p1.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(await env.objects()).toEqual(new Map([[p1.key, p1.size]]));
    // The object first, then the row: one PutItem, nothing before it in the table but the read.
    expect(first.operations).toEqual(['BatchGetItem', 'PutItem']);

    env.sim.setItem(big(2, 700 * 1024));
    expect((await env.run(['big'])).metrics).toMatchObject({ ItemsUpdated: 1 });
    const { pointer: p2, read: r2 } = await objectOf(env, await env.row('big'));
    expect(r2).toEqual({ kind: 'found', item: env.sim.getItem('big') });
    expect(p2.key).not.toBe(p1.key);
    expect(await env.objects()).toEqual(new Map([[p2.key, p2.size]]));

    env.sim.setItem({ id: 'big', type: 'file', revision: 3, content: 'small again' });
    expect((await env.run(['big'])).metrics).toMatchObject({ ItemsUpdated: 1 });
    const row3 = await env.row('big');
    expect(row3).toMatchObject({ revision: '3', item: { id: 'big', type: 'file', revision: 3, content: 'small again' } });
    expect(row3).not.toHaveProperty('itemObject');
    expect(await env.objects()).toEqual(new Map());
  });

  it('with AWS_ENDPOINT_URL_S3=http://localhost:PORT and no client given, a large item is stored (the bucket addressed path-style)', async () => {
    const env = await setup({ items: [{ id: 'far', type: 'file', revision: 1, content: 'f'.repeat(600 * 1024) }] });
    const endpoint = s3.endpoint.replace('//127.0.0.1:', '//localhost:');
    expect(endpoint).toMatch(/^http:\/\/localhost:\d+$/);
    // The adapter's own client: region and credentials from the environment, as in Lambda (s3rver knows one key).
    vi.stubEnv('AWS_ACCESS_KEY_ID', S3_LOCAL_CREDENTIALS.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', S3_LOCAL_CREDENTIALS.secretAccessKey);
    try {
      const handler = env.handler({ s3: undefined }, { AWS_ENDPOINT_URL_S3: endpoint });
      const { result, metrics, output } = await env.run(['far'], { handler });

      expect(result).toEqual({ batchItemFailures: [] });
      expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsRetried: 0 });
      const { read } = await objectOf(env, await env.row('far'));
      expect(read).toEqual({ kind: 'found', item: env.sim.getItem('far') });
      expect(await expectObjectsAgreeWithRows(env)).toHaveLength(1);
      expect(output).not.toContain('ENOTFOUND');
      expect(output).not.toContain('item object left in the bucket');
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('a row DynamoDB refuses for its size although the estimate let it through goes to the bucket', async () => {
    const small = await startDynalite({ maxItemSizeKb: 64 });
    try {
      const sim = await ProviderSimulator.start({ items: [{ id: 'mid', type: 'file', revision: 1, content: 'y'.repeat(100 * 1024) }] });
      simulators.push(sim);
      await small.createItemsTable('items-small');
      await s3.createBucket('items-small-bucket');
      secretToken = sim.issueAccessToken();
      tokens.add(secretToken);
      const handler = createSyncHandler({
        config: loadSyncConfig({
          PROVIDER_BASE_URL: sim.baseUrl,
          ACCESS_TOKEN_SECRET_ID: TOKEN_SECRET,
          ITEMS_TABLE_NAME: 'items-small',
          ITEMS_BUCKET_NAME: 'items-small-bucket',
          REVISION_FIELD: 'revision',
          DEAD_LETTER_QUEUE_URL: DLQ_URL,
          CONTROL_TABLE_NAME: 'control',
          PROVIDER_REQUESTS_PER_SECOND: '1000',
        }),
        paceStore: new MemoryPaceStore(),
        dynamodb: small.client(),
        sqs: new SQSClient({ region: 'eu-west-1' }),
        secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
        s3: s3Client,
      });
      const { result, output } = await captureOutput(() => handler(sqsEvent(['mid']), lambdaContext()));
      everything.push(output);

      expect(result).toEqual({ batchItemFailures: [] });
      // The inline row (refused by DynamoDB), then the row pointing to the object.
      expect(small.operations.filter((op) => op === 'PutItem')).toHaveLength(2);
      expect(deadLetters()).toEqual([]);
      const row = toRow((await small.getRow('items-small', 'mid'))!);
      const pointer = itemObjectOf(row)!;
      expect(await readItemObject(s3Client, 'items-small-bucket', pointer)).toEqual({ kind: 'found', item: sim.getItem('mid') });
      expect([...(await s3.listObjects('items-small-bucket')).keys()]).toEqual([pointer.key]);
    } finally {
      await small.close();
    }
  });

  it('two handler instances racing on a large item leave the newest revision, no orphan and no pointer to nothing', async () => {
    const large = (revision: number): SimulatorItem => ({ id: 'race', type: 'file', revision, body: `v${revision}`, content: 'z'.repeat(500 * 1024) });
    const env = await setup({ items: [large(1)] });
    await env.run(['race']);

    // Container A fetches revision 2 but is slow to write it (held after the fetch)...
    env.sim.setItem(large(2));
    const slow = heldAfterFirstFetch(env.sim.baseUrl, 1 << 22);
    const a = env.run(['race'], { handler: env.handler({ provider: slow.provider }) });
    await slow.fetchedOnce;

    // ...while container B fetches revision 3 and stores it (its object replaces revision 1's).
    env.sim.setItem(large(3));
    expect((await env.run(['race'], { handler: env.handler() })).metrics).toMatchObject({ ItemsUpdated: 1 });

    // A's object is written, its row write loses: A deletes its object, reads again, finds 3 stored.
    slow.release();
    const resultA = await a;
    expect(resultA.result).toEqual({ batchItemFailures: [] });
    expect(resultA.metrics).toMatchObject({ ItemsFetched: 2, ItemsUnchanged: 1, ItemsUpdated: 0 });
    expect(resultA.output).toContain('"message":"item object deleted"');
    const { read } = await objectOf(env, await env.row('race'));
    expect(read).toEqual({ kind: 'found', item: large(3) });
    expect(await expectObjectsAgreeWithRows(env)).toHaveLength(1);
  });

  it('two containers creating the same new large items at once: each row points to an object, and no other object is left', async () => {
    const items = Array.from({ length: 4 }, (_, n): SimulatorItem => ({ id: `L${n}`, type: 'file', revision: 1, content: `${n}`.repeat(450 * 1024) }));
    const env = await setup({ items });
    const ids = items.map((i) => i.id);
    const { result, output, total } = await twoContainersAtOnce(env, ids);

    expect(result).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(total['ItemsCreated']).toBe(4);
    expect((total['ItemsCreated'] ?? 0) + (total['ItemsUnchanged'] ?? 0)).toBe(8);
    for (const id of ids) expect((await objectOf(env, await env.row(id))).read).toEqual({ kind: 'found', item: env.sim.getItem(id) });
    expect(await expectObjectsAgreeWithRows(env)).toHaveLength(4);
    expect(output).not.toContain('item object left in the bucket');
    // Both read "no row", both wrote an object: each loser deleted its own.
    const count = (message: string) => output.split(`"message":"${message}"`).length - 1;
    expect(count('item object deleted')).toBeGreaterThan(0);
    expect(count('item too large for a row; storing it in the items bucket') - count('item object deleted')).toBe(4);
  });

  it('a write DynamoDB applied whose answer was lost (the SDK sends it again and meets its own write): the replaced object is deleted, the record counts as the change', async () => {
    const env = await setup({ items: [{ id: 'lost', type: 'file', revision: 1, content: 'q'.repeat(600 * 1024) }] });
    expect((await env.run(['lost'])).metrics).toMatchObject({ ItemsCreated: 1 });
    const { pointer: replaced } = await objectOf(env, await env.row('lost'));

    // Going back inline: the PutItem is applied, its answer lost; the SDK's second send fails its condition.
    env.sim.setItem({ id: 'lost', type: 'file', revision: 2, content: 'small again' });
    const put = await env.run(['lost'], { handler: env.handler({ dynamodb: losingFirstAnswer(dynamo.client(), 'PutItem') }) });
    expect(put.result).toEqual({ batchItemFailures: [] });
    expect(put.operations).toEqual(['BatchGetItem', 'PutItem', 'PutItem', 'BatchGetItem']);
    expect(put.metrics).toMatchObject({ ItemsFetched: 1, ItemsUpdated: 1, ItemsUnchanged: 0, RecordsRetried: 0 });
    expect(await env.row('lost')).toMatchObject({ revision: '2', item: { content: 'small again' } });
    expect(logLines(put.output).find((line) => line['message'] === 'item object deleted')).toMatchObject({ itemId: 'lost', objectKey: replaced.key });
    expect(await env.objects()).toEqual(new Map());

    // A tombstone whose answer is lost the same way: counted as deleted.
    env.sim.deleteItem('lost');
    const tombstone = await env.run(['lost'], { handler: env.handler({ dynamodb: losingFirstAnswer(dynamo.client(), 'UpdateItem') }) });
    expect(tombstone.operations).toEqual(['BatchGetItem', 'UpdateItem', 'UpdateItem', 'BatchGetItem']);
    expect(tombstone.metrics).toMatchObject({ ItemsDeleted: 1, ItemsUnchanged: 0, RecordsRetried: 0 });
    expect(await env.row('lost')).toMatchObject({ revision: '2', deleted: true });
  });

  it('dead-letters an item larger than PROVIDER_MAX_RESPONSE_BYTES with a reason, storing nothing', async () => {
    const env = await setup({ items: [{ id: 'vast', type: 'file', revision: 1, content: 'v'.repeat(1536 * 1024) }, { id: 'ok', type: 'file', revision: 1 }] });
    const handler = env.handler({}, { PROVIDER_MAX_RESPONSE_BYTES: String(1024 * 1024) });

    const { result, metrics } = await env.run(['vast', 'ok'], { handler });

    expect(result).toEqual({ batchItemFailures: [] });
    expect(deadLetters()).toEqual([
      {
        body: 'vast',
        error: 'the provider cannot serve this item as asked (getItem: the response body exceeds 1048576 bytes; HTTP 200)',
        sourceMessageId: 'm1',
      },
    ]);
    expect(metrics).toMatchObject({ RecordsDeadLettered: 1, ItemsCreated: 1 });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['ok']);
    expect(await env.objects()).toEqual(new Map());
  });
});

describe('secrets', () => {
  it('no token ever appears in a log line, a metric, a response or a dead letter', () => {
    expect(tokens.size).toBeGreaterThan(5);
    const text = everything.join('\n');
    expect(text.length).toBeGreaterThan(10_000);
    for (const token of tokens) expect(text).not.toContain(token);
  });
});
