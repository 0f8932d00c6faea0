/**
 * The changes feed and the snapshot end to end on DynamoDB Local: rows written by the item sync's
 * own store (DynamoDbItemStore: one conditional write a row), numbered into the changes table by
 * the changes writer as deployed (its handler, fed the items table's real stream), read through the
 * client API's handler as production builds it. A read of the feed first hands the writer what the
 * stream holds, as its event source would within a second. Each gap hazard the design names is
 * played here:
 * - racing writers: several stores (containers) writing one connection at once;
 * - a write that commits after a reader's read: in its next read;
 * - a stream batch delivered again (the writer's answer lost): numbered once;
 * - clock skew: a container whose clock is an hour behind writes between two others;
 * and the snapshot + feed hand-off, large items by URL, expired and erased logs, bad cursors.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { TableStream, untracked, type LambdaStreamRecord } from '../../../dev/fakes/dynamodb-stream.js';
import { createContext } from '../../../dev/fakes/lambda.js';
import { createChangesWriterHandler } from '../../../functions/changes-writer/app.js';
import { CHANGES_WRITER_SERVICE } from '../../../functions/shared/metric-names.js';
import { createLogger, createMetrics } from '../../../functions/shared/observability.js';
import { PassThrough } from 'node:stream';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { S3ObjectLinks } from '../../../functions/client-api/adapters/s3-object-links.js';
import { createApiHandler, type ApiHandler } from '../../../functions/client-api/app.js';
import { DynamoDbItemStore } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import type { ExpectedRow, ItemRow } from '../../../functions/item-sync/ports.js';
import { DynamoDbConnectionStore } from '../../../functions/shared/adapters/dynamodb-connection-store.js';
import { AwsItemsEraser } from '../../../functions/shared/adapters/items-eraser.js';
import { loadApiConfig } from '../../../functions/shared/client-config.js';
import { createClient, type Change } from '../../../clients/typescript/src/index.js';
import { startLocalApi, type LocalApi } from '../../../dev/local/client-api.js';
import { testSealing } from '../../support/sealer.js';
import { httpEvent } from './harness.js';

const CONNECTIONS = 'connections-feed';
const BUCKET = 'content-sync-items-bucket';
const RETENTION_DAYS = 35;
const T0 = Date.parse('2026-11-27T10:00:00.000Z');
const iso = (ms: number): string => new Date(ms).toISOString();
const sealing = testSealing();

let dynamo: LocalDynamoDb;
let db: DynamoDBClient;
let n = 0;
let items = '';
let changes = '';
/** The items table's stream, as the changes writer's event source reads it. */
let stream: TableStream | undefined;
/** The API's clock (ms). */
let apiNow = T0;

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  db = dynamo.client();
  await dynamo.createConnectionsTable(CONNECTIONS);
  await dynamo.createControlTable('control-feed');
  const store = new DynamoDbConnectionStore(db, CONNECTIONS, { sealer: sealing.sealer });
  for (const connection of ['acme', 'other']) {
    await store.putCredentials({ connection, clientId: 'client-1', refreshToken: `rt-${connection}-secret`, at: iso(T0 - 3_600_000) });
  }
});

afterAll(async () => {
  for (const line of lines) expect(line).not.toMatch(/rt-[a-z]+-secret/);
  expect(writerText).not.toMatch(/rt-[a-z]+-secret/);
  stream?.close();
  db?.destroy();
  await dynamo?.close();
});

beforeEach(async () => {
  n += 1;
  items = `items-feed-${n}`;
  changes = `changes-feed-${n}`;
  apiNow = T0 + 60_000;
  await ensureItemsTable(db, items);
  await dynamo.createChangesTable(changes);
  stream?.close();
  stream = new TableStream(dynamo, items, untracked, Date.now);
});

/** Every line the changes writer wrote, checked for tokens at the end. */
const writerOutput = new PassThrough();
let writerText = '';
writerOutput.on('data', (chunk: Buffer) => (writerText += chunk.toString('utf8')));

/** The changes writer as deployed, on this test's tables. */
function writer(): ReturnType<typeof createChangesWriterHandler> {
  return createChangesWriterHandler({
    config: { changesTableName: changes, changesRetentionDays: RETENTION_DAYS, connectionsTableName: CONNECTIONS, stage: undefined },
    dynamodb: db,
    logger: createLogger(CHANGES_WRITER_SERVICE, { output: writerOutput }),
    metrics: createMetrics(CHANGES_WRITER_SERVICE, { output: writerOutput }),
  });
}

/** Hands the changes writer every record the items table's stream holds and it has not had; the records handed. */
async function numberChanges(): Promise<LambdaStreamRecord[]> {
  const handed: LambdaStreamRecord[] = [];
  const handler = writer();
  for (let empty = 0; empty < 2; ) {
    const read = await stream!.read(1000);
    if (read.records.length === 0) {
      empty += 1;
      continue;
    }
    empty = 0;
    const answer = await handler({ Records: read.records } as never, createContext('changes-writer', LOCAL_REGION, 60_000));
    expect(answer.batchItemFailures).toEqual([]);
    handed.push(...read.records);
  }
  return handed;
}

function api(): ApiHandler {
  return createApiHandler({
    config: loadApiConfig({
      CONNECTIONS_TABLE_NAME: CONNECTIONS,
      CONNECTIONS_KEY_ARN: sealing.keyArn,
      ITEMS_TABLE_NAME: items,
      ITEMS_BUCKET_NAME: BUCKET,
      CHANGES_TABLE_NAME: changes,
      CHANGES_RETENTION_DAYS: String(RETENTION_DAYS),
      CONTROL_TABLE_NAME: 'control-feed',
      SYNC_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/sync',
      RECONCILE_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile',
      ERASE_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/erase',
      ERASE_SETTLE_SECONDS: '150',
    }),
    dynamodb: db,
    kms: sealing.kms,
    sqs: new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }),
    links: new S3ObjectLinks(new S3Client({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), BUCKET),
    clock: { now: () => new Date(apiNow) },
  });
}

/** Every line the handler wrote, checked for tokens at the end. */
const lines: string[] = [];

async function get(target: string, method = 'GET'): Promise<{ status: number; text: string; body: Record<string, unknown> }> {
  const [path = '', query = ''] = target.split('?');
  const { result, output } = await captureOutput(() => api()(httpEvent({ method, path, query })));
  lines.push(output);
  if (!result) throw new Error('the handler threw');
  const text = String(result.body);
  return { status: result.statusCode ?? 0, text, body: JSON.parse(text) as Record<string, unknown> };
}

/** A container's item store. */
function container(client: DynamoDBClient = db): DynamoDbItemStore {
  return new DynamoDbItemStore(client, items, { sleep: async () => undefined });
}

const row = (id: string, revision: string, at = T0, connection = 'acme'): ItemRow => ({ connection, id, type: 'file', revision, item: { id, rev: revision }, syncedAt: iso(at) });

/** Writes `id` at `revision` over what the table holds now, as the sync does (read, then a conditional write). */
async function sync(store: DynamoDbItemStore, id: string, revision: string, at = T0, connection = 'acme'): Promise<string> {
  const stored = (await store.getRevisions([{ connection, id }], { consistent: true })).get(connection)?.get(id);
  const expected: ExpectedRow = stored ? { exists: true, revision: stored.revision, deleted: stored.deleted, ...(stored.objectKey ? { objectKey: stored.objectKey } : {}) } : { exists: false };
  return (await store.put(row(id, revision, at, connection), expected)).result;
}


/** Every change from `after` to the end, page by page (`limit` each), once the changes writer has had what the stream holds. */
async function readAll(connection: string, after?: string, limit = 1000): Promise<{ changes: Change[]; next: string }> {
  await numberChanges();
  const all: Change[] = [];
  let cursor = after;
  for (;;) {
    const query = new URLSearchParams({ limit: String(limit), ...(cursor !== undefined ? { after: cursor } : {}) });
    const page = await get(`/connections/${connection}/changes?${query}`);
    if (page.status !== 200) throw new Error(`GET changes answered ${page.status}: ${page.text}`);
    const got = page.body['changes'] as Change[];
    all.push(...got);
    cursor = page.body['next'] as string;
    if (got.length === 0) return { changes: all, next: cursor };
  }
}

describe('GET /connections/{connection}/changes', () => {
  it('every transition once, in order, with revision, previousRevision, syncedAt and a cursor each; only its own connection', async () => {
    const store = container();
    expect(await sync(store, 'a', '1', T0)).toBe('written');
    expect(await sync(store, 'a', '2', T0 + 1000)).toBe('written');
    expect(await store.markDeleted({ connection: 'acme', id: 'a' }, '2', iso(T0 + 2000))).toBe('written');
    expect(await sync(store, 'a', '3', T0 + 3000)).toBe('written');
    expect(await sync(store, 'b', '1', T0 + 4000, 'other')).toBe('written');

    const { changes: feed, next } = await readAll('acme');
    expect(feed.map(({ cursor: _cursor, ...change }) => change)).toEqual([
      { change: 'created', id: 'a', type: 'file', revision: '1', previousRevision: null, syncedAt: iso(T0) },
      { change: 'updated', id: 'a', type: 'file', revision: '2', previousRevision: '1', syncedAt: iso(T0 + 1000) },
      { change: 'deleted', id: 'a', type: 'file', revision: '2', previousRevision: '2', syncedAt: iso(T0 + 2000) },
      { change: 'restored', id: 'a', type: 'file', revision: '3', previousRevision: '2', syncedAt: iso(T0 + 3000) },
    ]);
    expect(next).toBe(feed[3]!.cursor);
    expect(new Set(feed.map((change) => change.cursor)).size).toBe(4);
    expect((await readAll('other')).changes.map((change) => change.id)).toEqual(['b']);
    // Replayable: from the second change's cursor, the same last two, again and again.
    const fromSecond = await get(`/connections/acme/changes?after=${feed[1]!.cursor}`);
    expect(fromSecond.body['changes']).toEqual(feed.slice(2));
    expect((await get(`/connections/acme/changes?after=${feed[1]!.cursor}`)).text).toBe(fromSecond.text);
    // An unchanged write makes no change (same revision, live over live).
    expect(await sync(store, 'a', '3', T0 + 5000)).toBe('written');
    expect((await readAll('acme', next)).changes).toEqual([]);
  });

  it('racing writers: four containers race on every write of 20 items (3 revisions each); the feed has each write once, numbered without a hole, each item in its order', async () => {
    const stores = [container(), container(), container(), container()];
    const ids = Array.from({ length: 20 }, (_, i) => `item-${i}`);
    let conflicts = 0;
    // Every container tries every write: revision r of an id over r - 1. One wins each (the row's
    // condition), the others lose it ('conflict') or find it done.
    await Promise.all(
      stores.map(async (store, s) => {
        for (let revision = 1; revision <= 3; revision++) {
          for (const id of s % 2 === 0 ? ids : [...ids].reverse()) {
            for (;;) {
              const stored = (await store.getRevisions([{ connection: 'acme', id }], { consistent: true })).get('acme')?.get(id);
              if (Number(stored?.revision ?? '0') >= revision) break;
              const expected: ExpectedRow = stored ? { exists: true, revision: stored.revision, deleted: false } : { exists: false };
              const written = await store.put(row(id, String(Number(stored?.revision ?? '0') + 1)), expected);
              if (written.result === 'conflict') conflicts += 1;
            }
          }
        }
      }),
    );
    const feed = (await readAll('acme', undefined, 7)).changes;
    expect(feed).toHaveLength(60);
    for (const id of ids) {
      expect(feed.filter((change) => change.id === id).map((change) => `${change.previousRevision}→${change.revision}`)).toEqual(['null→1', '1→2', '2→3']);
    }
    expect(conflicts).toBeGreaterThan(0);
    const heads = await dynamo.scan(changes);
    expect(heads.find((item) => item['seq']?.N === '0')?.['head']).toEqual({ N: '60' });
    expect(heads.map((item) => Number(item['seq']?.N)).sort((a, b) => a - b)).toEqual(Array.from({ length: 61 }, (_, i) => i));
  });

  it("clock skew: a container an hour behind writes between two others; the feed keeps the commit order, not the clocks'", async () => {
    const ahead = container();
    const behind = container();
    await sync(ahead, 'x', '1', T0);
    await sync(behind, 'y', '1', T0 - 3_600_000);
    await sync(ahead, 'z', '1', T0 + 1);
    expect((await readAll('acme')).changes.map((change) => `${change.id}@${change.syncedAt}`)).toEqual([`x@${iso(T0)}`, `y@${iso(T0 - 3_600_000)}`, `z@${iso(T0 + 1)}`]);
  });

  it('a reader that reads between a head and a later commit misses nothing: what commits after its read is in its next read', async () => {
    const store = container();
    await sync(store, 'a', '1');
    const first = await readAll('acme');
    // Another container's write commits after that read.
    await sync(container(), 'b', '1');
    const second = await readAll('acme', first.next);
    expect([...first.changes, ...second.changes].map((change) => change.id)).toEqual(['a', 'b']);
  });

  it("a stream batch delivered again (the writer's answer lost, or a batch after it failed): numbered once", async () => {
    await sync(container(), 'a', '1');
    await sync(container(), 'b', '1');
    const records = await numberChanges();
    expect(records).toHaveLength(2);
    const again = await writer()({ Records: records } as never, createContext('changes-writer', LOCAL_REGION, 60_000));
    expect(again.batchItemFailures).toEqual([]);
    expect((await readAll('acme')).changes.map((change) => change.id)).toEqual(['a', 'b']);
  });

  it('expired: a cursor whose next change is older than changesRetentionDays is a 410 cursor-expired; the head stays readable', async () => {
    const store = container();
    await sync(store, 'a', '1', T0);
    await sync(store, 'a', '2', T0 + 1000);
    const { changes: feed, next } = await readAll('acme');
    apiNow = T0 + RETENTION_DAYS * 86_400_000 + 500;
    const expired = await get(`/connections/acme/changes`);
    expect(expired).toMatchObject({ status: 410, body: { error: { code: 'cursor-expired' } } });
    expect(await get(`/connections/acme/changes?after=${feed[0]!.cursor}`)).toMatchObject({ status: 200, body: { changes: [feed[1]] } });
    expect(await get(`/connections/acme/changes?after=${next}`)).toMatchObject({ status: 200, body: { changes: [], next } });
  });

  it('an erased log: a cursor of the old log is a 410; the new log starts again at its first change', async () => {
    const store = container();
    await sync(store, 'a', '1');
    const old = await readAll('acme');
    const eraser = new AwsItemsEraser({ dynamodb: db, s3: new S3Client({ region: LOCAL_REGION }), itemsTable: items, itemsBucket: BUCKET, changesTable: changes, sleep: async () => undefined });
    await eraser.deleteRows('acme', { stop: () => false, beforeDelete: async () => undefined });
    expect(await eraser.deleteChanges('acme', { stop: () => false })).toEqual({ deleted: 2, complete: true });
    // The erase deleted the head: the next change starts a new log.
    expect(await sync(store, 'b', '1')).toBe('written');
    expect(await get(`/connections/acme/changes?after=${old.next}`)).toMatchObject({ status: 410, body: { error: { code: 'cursor-expired' } } });
    expect((await readAll('acme')).changes.map((change) => change.id)).toEqual(['b']);
  });

  it('refusals: malformed, another connection\'s or a future cursor (400), limit outside 1–1000, unknown parameters, unknown connection (404), another method', async () => {
    await sync(container(), 'a', '1');
    const { next } = await readAll('acme');
    const otherNext = (await readAll('other')).next;
    for (const query of ['after=nope', `after=${otherNext}`, 'limit=0', 'limit=1001', 'limit=ten', 'limit=1.5', 'from=1', 'after=']) {
      const answer = await get(`/connections/acme/changes?${query}`);
      expect(answer, query).toMatchObject({ status: 400, body: { error: { code: 'bad-request' } } });
      expect(answer.text).not.toContain(otherNext);
    }
    expect(await get('/connections/globex/changes')).toMatchObject({ status: 404, body: { error: { code: 'not-found' } } });
    expect(await get('/connections/acme/changes', 'POST')).toMatchObject({ status: 404, body: { error: { code: 'not-found' } } });
    expect(await get(`/connections/acme/changes?after=${next}&limit=1000`)).toMatchObject({ status: 200, body: { changes: [], next } });
  });
});

describe('GET /connections/{connection}/items (the snapshot)', () => {
  it('pages of rows answered as the item route answers them (an item in the bucket by URL), each page with the same changesCursor', async () => {
    const store = container();
    for (const id of ['a', 'b', 'c']) await sync(store, id, '1');
    await db.send(
      new PutItemCommand({
        TableName: items,
        Item: { connection: { S: 'acme' }, id: { S: 'big' }, type: { S: 'file' }, revision: { S: '9' }, syncedAt: { S: iso(T0) }, itemObject: { M: { key: { S: 'items/acme/big/9/x.json' }, size: { N: '9000000' }, sha256: { S: 'x' } } } },
      }),
    );
    const first = await get('/connections/acme/items?limit=2');
    expect(first.status).toBe(200);
    expect(first.body['items']).toEqual([
      { connection: 'acme', id: 'a', type: 'file', revision: '1', syncedAt: iso(T0), item: { id: 'a', rev: '1' } },
      { connection: 'acme', id: 'b', type: 'file', revision: '1', syncedAt: iso(T0), item: { id: 'b', rev: '1' } },
    ]);
    const changesCursor = first.body['changesCursor'] as string;
    const second = await get(`/connections/acme/items?limit=2&cursor=${first.body['cursor']}`);
    expect(second.body['changesCursor']).toBe(changesCursor);
    const [big, c] = second.body['items'] as Array<Record<string, unknown>>;
    expect(Object.keys(big!).sort()).toEqual(['connection', 'id', 'itemUrl', 'revision', 'syncedAt', 'type']);
    expect(new URL(String(big!['itemUrl'])).pathname).toContain('items/acme/big/9/x.json');
    expect(c).toMatchObject({ id: 'c' });
    const last = await get(`/connections/acme/items?limit=2&cursor=${second.body['cursor']}`);
    expect(last.body).toEqual({ items: [], cursor: null, changesCursor });
    // The feed after changesCursor: the last changes again (SNAPSHOT_OVERLAP: in case one was still
    // being numbered while the rows were read); here the four, which the snapshot holds already (a
    // row written by hand, as big, is numbered as any other: the stream has every write).
    const overlap = await readAll('acme', changesCursor);
    expect(overlap.changes.map((change) => `${change.change} ${change.id} ${change.revision}`)).toEqual(['created a 1', 'created b 1', 'created c 1', 'created big 9']);
    expect((await readAll('acme', overlap.next)).changes).toEqual([]);
  });

  it('hand-off: changes made while the snapshot is read are in the feed after its changesCursor; snapshot + feed give every row as the table holds it', async () => {
    const store = container();
    const ids = Array.from({ length: 12 }, (_, i) => `item-${String(i).padStart(2, '0')}`);
    for (const id of ids) await sync(store, id, '1');
    const mirror = new Map<string, string>();
    let page = await get('/connections/acme/items?limit=3');
    const changesCursor = page.body['changesCursor'] as string;
    let round = 0;
    for (;;) {
      for (const item of page.body['items'] as Array<{ id: string; revision: string; deleted?: boolean }>) mirror.set(item.id, item.deleted ? 'deleted' : item.revision);
      // Between pages: an id already read changes, one not read yet changes, one is deleted, one is new.
      round += 1;
      await sync(container(), ids[round - 1]!, '2');
      await sync(container(), ids[Math.min(11, round + 6)]!, String(3 + round));
      if (round === 2) await store.markDeleted({ connection: 'acme', id: ids[0]! }, '2', iso(T0 + 5000));
      await sync(container(), `new-${round}`, '1');
      if (page.body['cursor'] === null) break;
      page = await get(`/connections/acme/items?limit=3&cursor=${page.body['cursor']}`);
    }
    for (const change of (await readAll('acme', changesCursor)).changes) mirror.set(change.id, change.change === 'deleted' ? 'deleted' : change.revision);
    const table = new Map((await dynamo.scan(items)).map((item) => [item['id']!.S!, item['deleted']?.BOOL ? 'deleted' : item['revision']!.S!]));
    expect(mirror).toEqual(table);
  });

  it('refusals: a malformed or another connection\'s cursor, one of no item id, a bad limit, unknown parameters (400), an unknown connection (404)', async () => {
    for (const id of ['a', 'b']) await sync(container(), id, '1');
    await sync(container(), 'z', '1', T0, 'other');
    await sync(container(), 'zz', '1', T0, 'other');
    const otherCursor = (await get('/connections/other/items?limit=1')).body['cursor'] as string;
    // A page cursor of acme's whose id is no item id (over 1,024 bytes: DynamoDB would refuse the key).
    const first = (await get('/connections/acme/items?limit=1')).body;
    const longId = Buffer.from(JSON.stringify({ v: 1, c: 'acme', k: 'x'.repeat(1025), f: first['changesCursor'] })).toString('base64url');
    expect(await get(`/connections/acme/items?limit=1&cursor=${first['cursor']}`)).toMatchObject({ status: 200 });
    for (const query of ['cursor=nope', `cursor=${otherCursor}`, `cursor=${longId}`, 'limit=0', 'limit=1001', 'after=x']) {
      expect(await get(`/connections/acme/items?${query}`), query).toMatchObject({ status: 400, body: { error: { code: 'bad-request' } } });
    }
    expect(await get('/connections/globex/items')).toMatchObject({ status: 404, body: { error: { code: 'not-found' } } });
  });
});

describe('the typed client (clients/typescript) on the handler, served on 127.0.0.1', () => {
  // What the client does on its own (every route, cursor-expired typed, refusals typed without a
  // token, a stored cursor resumed midway) is test/clients/typescript/handler.test.ts's; here, the
  // snapshot + feed hand-off through it while the real changes writer numbers what is written.
  let local: LocalApi;

  beforeAll(async () => {
    // Each request first hands the changes writer what the stream holds, as its event source would within a second.
    local = await startLocalApi(async (event) => {
      await numberChanges();
      const { result, output } = await captureOutput(() => api()(event));
      lines.push(output);
      if (!result) throw new Error('the handler threw');
      return result;
    });
  });

  afterAll(async () => {
    await local?.close();
  });

  it('the snapshot, then the feed from its changesCursor, pages of 3: the copy equals the table, with the writes made between the pages; read again from the cursor stored, nothing', async () => {
    const client = createClient({ baseUrl: local.url, signer: false });
    const ids = Array.from({ length: 8 }, (_, i) => `item-${i}`);
    for (const id of ids) await sync(container(), id, '1');
    const copy = new Map<string, string>();
    let pages = 0;
    let cursor = undefined as string | undefined;
    const snapshot = client.snapshot('acme', {
      limit: 3,
      onCursor: async ({ changesCursor }) => {
        pages += 1;
        cursor ??= changesCursor;
        // Once a page is taken: a new id (after the ids read so far), an id already read changes.
        await sync(container(), `new-${pages}`, '1');
        await sync(container(), ids[0]!, String(pages + 1));
      },
    });
    for await (const row of snapshot) copy.set(row.id, row.deleted ? 'deleted' : row.revision);
    // item-0..2, item-3..5, item-6, item-7, new-1, then new-2, new-3 (new-4 came after the last page).
    expect(pages).toBe(4);
    expect(copy.size).toBe(11);
    const applied: Change[] = [];
    const stored: string[] = [];
    for await (const change of client.changes('acme', { after: cursor!, limit: 3, onCursor: (next) => void stored.push(next) })) {
      applied.push(change);
      copy.set(change.id, change.change === 'deleted' ? 'deleted' : change.revision);
    }
    // The 8 changes before the snapshot again (SNAPSHOT_OVERLAP), then the 8 made while it was read.
    expect(applied.map((change) => `${change.change} ${change.id} ${change.revision}`)).toEqual([
      ...ids.map((id) => `created ${id} 1`),
      ...[1, 2, 3, 4].flatMap((page) => [`created new-${page} 1`, `updated item-0 ${page + 1}`]),
    ]);
    expect(stored).toHaveLength(Math.ceil(16 / 3));
    expect(stored.at(-1)).toBe(applied.at(-1)!.cursor);
    const table = new Map((await dynamo.scan(items)).map((item) => [item['id']!.S!, item['deleted']?.BOOL ? 'deleted' : item['revision']!.S!]));
    expect(copy).toEqual(table);
    // Read again from the cursor stored: nothing is new, and the cursor stays.
    for await (const change of client.changes('acme', { after: stored.at(-1)!, onCursor: () => expect.fail('the cursor moved') })) expect.fail(`nothing is new: ${change.id}`);
  });
});
