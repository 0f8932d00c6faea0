/**
 * The reconciler against DynamoDB Local (items table keyed by connection and id, and control table, on
 * 127.0.0.1) and the HTTP SQS emulator: parallel Scan segments really cover every row of every
 * connection exactly once, tombstones and rows too big for one Scan page included; the cursor row's
 * conditional writes as DynamoDB evaluates them, its key round-tripped; and the handler built as
 * Lambda runs it, from its environment, sending every row's `{"connection", "id"}` once with
 * `reconcilePass`, a write per page (none per id), and its metrics.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  GetItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { AwsEmulator } from '../../../dev/fakes/aws-emulator.js';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { startLocalDynamo, type LocalDynamo } from '../../../dev/fakes/local-dynamo.js';
import { sumEmfMetrics } from '../../../dev/fakes/emf.js';
import { createContext } from '../../../dev/fakes/lambda.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { DynamoDbCursorStore, RECONCILE_CURSOR_KEY } from '../../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { DynamoDbItemIds } from '../../../functions/reconciler/adapters/dynamodb-item-ids.js';
import { createReconcilerHandler } from '../../../functions/reconciler/app.js';
import type { ItemKey } from '../../../functions/reconciler/ports.js';
import { newPass } from '../../../functions/reconciler/tick.js';
import { ENV, loadReconcilerConfig } from '../../../functions/shared/config.js';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';

const ITEMS = 'reconcile-items';
const CONTROL = 'reconcile-control';
const COUNT = 1_000;
const T = Date.UTC(2026, 0, 1, 12);

let dynamo: LocalDynamo;
let client: DynamoDBClient;
let emulator: AwsEmulator;
let sqs: SQSClient;
let queueUrl: string;
/** Every row as `<connection>/<id>`. */
const ids: string[] = [];
const CONNECTIONS = ['default', 'acme', 'globex'];

/**
 * Rows as the sync writes them, of three connections (the ids of the first 30 rows are held by two
 * connections): live ones, tombstones (every tenth), and a few of ~120 KB (a Scan page stops at 1 MB).
 */
function rowFor(index: number): Record<string, AttributeValue> {
  const connection = CONNECTIONS[index % 3]!;
  const number = index < 60 ? index >> 1 : index;
  const id = number % 97 === 0 ? `fld-${number}/Résumé 文件 ✓` : `fil-${String(number).padStart(6, '0')}`;
  const big = index % 50 === 1;
  return {
    connection: { S: connection },
    id: { S: id },
    type: { S: id.startsWith('fld') ? 'folder' : 'file' },
    revision: { S: String(index) },
    item: { M: { id: { S: id }, revision: { N: String(index) }, ...(big ? { blob: { S: 'x'.repeat(120_000) } } : {}) } },
    syncedAt: { S: '2026-01-01T00:00:00.000Z' },
    ...(index % 10 === 3 ? { deleted: { BOOL: true } } : {}),
  };
}

/** A message body as `<connection>/<id>`. */
function label(body: string): string {
  const { connection, id } = JSON.parse(body) as ItemKey;
  return `${connection}/${id}`;
}

beforeAll(async () => {
  dynamo = await startLocalDynamo();
  client = dynamo.client();
  await ensureItemsTable(client, ITEMS);
  await dynamo.createControlTable(CONTROL);
  const rows = Array.from({ length: COUNT }, (_, index) => rowFor(index));
  for (const row of rows) ids.push(`${row['connection']!.S!}/${row['id']!.S!}`);
  expect(new Set(ids).size).toBe(COUNT);
  for (let start = 0; start < rows.length; start += 25) {
    await client.send(new BatchWriteItemCommand({ RequestItems: { [ITEMS]: rows.slice(start, start + 25).map((Item) => ({ PutRequest: { Item } })) } }));
  }
  emulator = await AwsEmulator.start({ region: LOCAL_REGION });
  sqs = new SQSClient({ region: LOCAL_REGION, endpoint: emulator.endpoint, credentials: LOCAL_CREDENTIALS });
  queueUrl = emulator.sqs.createQueue('content-sync-reconcile');
});

afterAll(async () => {
  sqs?.destroy();
  client?.destroy();
  await emulator?.close();
  await dynamo?.close();
});

beforeEach(async () => {
  emulator.sqs.purge(queueUrl);
  await client.send(new DeleteItemCommand({ TableName: CONTROL, Key: { pk: { S: RECONCILE_CURSOR_KEY } } }));
});

describe('parallel Scan segments on DynamoDB Local', () => {
  it.each([1, 4, 7])('%i segment(s), pages of at most 64 rows, cover every row of every connection exactly once, tombstones included', async (segments) => {
    const items = new DynamoDbItemIds(client, ITEMS);
    const seen: string[] = [];
    for (let segment = 0; segment < segments; segment += 1) {
      let after: ItemKey | undefined;
      do {
        const page = await items.page({ segment, totalSegments: segments, limit: 64, ...(after !== undefined ? { after } : {}) });
        expect(page.keys.length).toBeLessThanOrEqual(64);
        seen.push(...page.keys.map((key) => `${key.connection}/${key.id}`));
        after = page.after;
      } while (after !== undefined);
    }
    expect(seen.length).toBe(COUNT);
    expect([...seen].sort()).toEqual([...ids].sort());
  });
});

describe('the cursor row on DynamoDB Local', () => {
  it('a new pass, advances of different segments (never in conflict), a stale version refused, the end once', async () => {
    const store = new DynamoDbCursorStore(client, CONTROL);
    expect(await store.read()).toBeUndefined();
    const first = newPass(1, T, 3, undefined);
    expect(await store.startPass(first, undefined)).toBe('written');
    expect(await store.startPass(first, undefined)).toBe('conflict');

    const [a, b] = await Promise.all([
      store.advance(1, 0, { after: { connection: 'acme', id: 'fil-000010' }, done: false, version: 1, ids: 10 }, 0),
      store.advance(1, 2, { done: true, version: 1, ids: 4 }, 0),
    ]);
    expect([a, b]).toEqual(['written', 'written']);
    // The key (connection and id) round-trips through the row.
    expect((await store.read())?.segments[0]).toEqual({ after: { connection: 'acme', id: 'fil-000010' }, done: false, version: 1, ids: 10 });
    expect(await store.advance(1, 0, { after: { connection: 'acme', id: 'fil-000020' }, done: false, version: 1, ids: 20 }, 0)).toBe('conflict');
    expect(await store.advance(2, 1, { done: true, version: 1, ids: 0 }, 0)).toBe('conflict');
    expect(await store.advance(1, 0, { done: true, version: 2, ids: 12 }, 1)).toBe('written');
    expect(await store.advance(1, 1, { done: true, version: 1, ids: 0 }, 0)).toBe('written');

    expect(await store.endPass(1, T + 5_000)).toBe('written');
    expect(await store.endPass(1, T + 6_000)).toBe('conflict');
    expect(await store.read()).toEqual({
      pass: 1,
      startedAt: T,
      endedAt: T + 5_000,
      segments: [
        { done: true, version: 2, ids: 12 },
        { done: true, version: 1, ids: 0 },
        { done: true, version: 1, ids: 4 },
      ],
    });

    const second = newPass(2, T + 86_400_000, 2, { pass: 1, startedAt: T, endedAt: T + 5_000, ids: 16 });
    expect(await store.startPass(second, 2)).toBe('conflict');
    expect(await store.startPass(second, 1)).toBe('written');
    expect(await store.read()).toEqual(second);
  });
});

describe('the reconciler handler on DynamoDB Local and the SQS emulator', () => {
  const env = (overrides: Record<string, string> = {}) => ({
    [ENV.itemsTableName]: ITEMS,
    [ENV.controlTableName]: CONTROL,
    [ENV.reconcileQueueUrl]: 'http://placeholder.invalid/q',
    ...overrides,
  });
  // The handler's time moves only by its own waits: its tick budget measures the work it did, never
  // how fast the machine did it.
  const build = (extra: Record<string, string> = {}) => {
    let now = T;
    return createReconcilerHandler({
      config: loadReconcilerConfig(env({ RECONCILE_QUEUE_URL: queueUrl, ...extra })),
      dynamodb: client,
      sqs,
      clock: { now: () => new Date(now) },
      sleep: async (ms) => {
        now += ms;
        await new Promise((resolve) => setImmediate(resolve));
      },
      tuning: { pageSize: 100, refillWaitMs: 20 },
    });
  };
  const context = () => createContext('content-sync-reconciler', LOCAL_REGION, 60_000);
  const messages = () => emulator.sqs.peek(queueUrl);

  it('a tick sends every id once with reconcilePass and lane = background, in its connection’s message group, writes the cursor once per page only, ends the pass and publishes its metrics', async () => {
    const handler = build({ RECONCILE_SEGMENTS: '4' });
    const before = dynamo.operations.length;
    const { result, error, output } = await captureOutput(() => handler({ trigger: 'schedule', worker: 0, workers: 1 }, context()));
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ state: 'ended', pass: 1, startedPass: true, enqueued: COUNT, passIds: COUNT, refused: 0 });

    const sent = messages();
    expect(sent.map((message) => label(message.body)).sort()).toEqual([...ids].sort());
    for (const message of sent) expect(Object.keys(JSON.parse(message.body))).toEqual(['connection', 'id']);
    for (const message of sent) {
      expect(message.messageAttributes).toEqual({
        reconcilePass: { DataType: 'Number', StringValue: '1' },
        lane: { DataType: 'String', StringValue: 'background' },
      });
      expect(message.messageGroupId).toBe(JSON.parse(message.body).connection);
    }

    const operations = dynamo.operations.slice(before);
    const scans = operations.filter((op) => op === 'Scan').length;
    // Pages of 100 (fewer where the 1 MB page limit stops a page first), about 10 plus one last per segment.
    expect(scans).toBeGreaterThanOrEqual(COUNT / 100);
    expect(operations.filter((op) => op === 'UpdateItem')).toHaveLength(scans + 1); // one advance per page, the end of the pass
    expect(operations.filter((op) => op === 'PutItem')).toHaveLength(1); // the pass's start
    expect(operations.filter((op) => op === 'BatchWriteItem' || op === 'DeleteItem')).toEqual([]);

    const row = (await client.send(new GetItemCommand({ TableName: CONTROL, Key: { pk: { S: RECONCILE_CURSOR_KEY } }, ConsistentRead: true }))).Item;
    expect(row).toMatchObject({ pk: { S: 'reconcile-cursor' }, pass: { N: '1' }, endedAt: { S: expect.any(String) } });
    expect(Object.keys(row!['segments']!.M!)).toEqual(['0', '1', '2', '3']);

    const metrics = sumEmfMetrics(output);
    expect(metrics).toMatchObject({ IdsEnqueued: COUNT, PassNumber: 1, IdsKnown: COUNT, PassLengthSeconds: expect.any(Number), ProjectedPassSeconds: expect.any(Number) });
    const emf = jsonLines(output).find((line) => typeof line === 'object' && '_aws' in line) as Record<string, unknown>;
    expect(emf).toMatchObject({ service: 'reconciler', _aws: { CloudWatchMetrics: [{ Namespace: 'ContentSync', Dimensions: [['service']] }] } });

    // The next tick waits for freshnessHours (24 by default): nothing more is sent.
    const next = await captureOutput(() => handler({ trigger: 'schedule' }, context()));
    expect(next.result).toMatchObject({ state: 'waiting', pass: 1, enqueued: 0 });
    expect(messages()).toHaveLength(COUNT);
  });

  it('keeps the queue at the high-water mark, and the next ticks go on where the last stopped', async () => {
    const handler = build({ RECONCILE_HIGH_WATER: '250', RECONCILE_SEGMENTS: '3' });
    const first = await captureOutput(() => handler(undefined, context()));
    expect(first.result).toMatchObject({ state: 'running', pass: 1 });
    expect(messages().length).toBeGreaterThan(0);
    expect(messages().length).toBeLessThanOrEqual(250);

    const received: string[] = [];
    for (let round = 0; round < 20; round += 1) {
      // The sync takes everything on the queue.
      for (const message of messages()) received.push(label(message.body));
      emulator.sqs.purge(queueUrl);
      const { result, error } = await captureOutput(() => handler(undefined, context()));
      expect(error).toBeUndefined();
      expect(messages().length).toBeLessThanOrEqual(250);
      if (result!.state === 'ended') break;
    }
    for (const message of messages()) received.push(label(message.body));
    expect(received.sort()).toEqual([...ids].sort());
  });

  it('refuses a worker outside the workers, failing the invocation', async () => {
    const handler = build();
    const { error } = await captureOutput(() => handler({ worker: 1, workers: 1 }, context()));
    expect(error).toBeInstanceOf(RangeError);
    expect(messages()).toEqual([]);
  });
});
