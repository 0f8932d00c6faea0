/**
 * The TypeScript client (clients/typescript) against the client API's production handler
 * (functions/client-api/app.ts `createApiHandler`, built as the harness of
 * test/functions/client-api builds it: DynamoDB Local, tokens sealed under the local KMS model, SQS
 * mocked), served over HTTP on 127.0.0.1 by the local run's server (dev/local/client-api.ts). Every
 * route through the client: put, get, list (the iterator over small pages), pause, resume, send
 * (both lanes; a refused id a typed 400 with `rejected`), get an item (in its row; in the bucket,
 * by URL; an id holding `/`), the snapshot and the changes feed with their cursors stored by
 * `onCursor` and read again from a stored one, following the feed, an expired cursor (410), remove,
 * erase (202) and then 404. Requests are signed with fixed fake credentials (the local server does
 * not check them): the signing path runs on each. No answer, log line or error holds a token.
 */
import { PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { isSafeNumber, parse } from 'lossless-json';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContentSyncError, createClient, type Change, type ContentSyncClient, type Item, type SnapshotCursors } from '../../../clients/typescript/src/index.js';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { startLocalApi, type LocalApi } from '../../../dev/local/client-api.js';
import { S3ObjectLinks } from '../../../functions/client-api/adapters/s3-object-links.js';
import { createApiHandler, type ApiHandler } from '../../../functions/client-api/app.js';
import { DynamoDbChangesWriter } from '../../../functions/shared/adapters/dynamodb-changes-writer.js';
import { ChangeSequencer, type StreamedChange } from '../../../functions/shared/changes/sequencer.js';
import type { ChangeKind } from '../../../functions/shared/changes/transition.js';
import { loadApiConfig } from '../../../functions/shared/client-config.js';
import { API_SERVICE } from '../../../functions/shared/metric-names.js';
import { createLogger } from '../../../functions/shared/observability.js';
import { ApiHarness, iso, RECONCILE_QUEUE_URL, SYNC_QUEUE_URL, T0, token, TOKEN_MARK } from '../../functions/client-api/harness.js';

const ITEMS = 'client-ts-items';
const BUCKET = 'content-sync-items-bucket';
const RETENTION_DAYS = 35;
const FAKE = { accessKeyId: 'AKIDCLIENTTEST', secretAccessKey: 'fake-secret-key-of-the-client-test', sessionToken: 'fake-session-token-of-the-client-test' };

const api = new ApiHarness();
let local: LocalApi;
let client: ContentSyncClient;
/** The handler's log lines, kept here, not printed. */
let logText = '';
const logOutput = new PassThrough();
logOutput.on('data', (chunk: Buffer) => void (logText += chunk.toString('utf8')));
/** Every event the handler was given: its headers show the signature of each request. */
const events: APIGatewayProxyEventV2[] = [];
/** Every error the client threw in this file. */
const errors: ContentSyncError[] = [];

beforeAll(async () => {
  await api.start();
  await api.reset({ ITEMS_TABLE_NAME: ITEMS });
  await ensureItemsTable(api.db, ITEMS);
  const handler: ApiHandler = createApiHandler({
    config: loadApiConfig(api.env({ ITEMS_TABLE_NAME: ITEMS, CHANGES_RETENTION_DAYS: String(RETENTION_DAYS) })),
    dynamodb: api.db,
    kms: api.sealing.kms,
    sqs: api.sqs,
    clock: api.clock,
    links: new S3ObjectLinks(new S3Client({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), BUCKET),
    logger: createLogger(API_SERVICE, { output: logOutput }),
  });
  local = await startLocalApi(async (event) => {
    events.push(event);
    return handler(event);
  });
  client = createClient({ baseUrl: local.url, region: 'eu-west-1', credentials: FAKE });
});

afterAll(async () => {
  const said = [logText, ...api.answered, ...errors.map((error) => JSON.stringify({ ...error, message: error.message }))].join('\n');
  expect(said).not.toContain(TOKEN_MARK);
  expect(logText).toContain('"route":"GET /connections/{connection}/changes"');
  // Every request was signed with the fake credentials, its session token beside it.
  expect(events.length).toBeGreaterThan(40);
  for (const event of events) {
    expect(event.headers['authorization']).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDCLIENTTEST\/\d{8}\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$/);
    expect(event.headers['x-amz-security-token']).toBe(FAKE.sessionToken);
  }
  await local?.close();
  await api.close();
});

/** The ContentSyncError a call throws. */
async function refusal(promise: Promise<unknown>): Promise<ContentSyncError> {
  const error = await promise.then(
    () => expect.fail('the call passed'),
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ContentSyncError);
  errors.push(error as ContentSyncError);
  return error as ContentSyncError;
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const value of iterable) all.push(value);
  return all;
}

/** A row of the items table as the sync writes it. */
async function putRow(connection: string, id: string, revision: string, extra: Record<string, AttributeValue> = { item: { M: { id: { S: id }, rev: { S: revision } } } }): Promise<void> {
  await api.db.send(
    new PutItemCommand({ TableName: ITEMS, Item: { connection: { S: connection }, id: { S: id }, type: { S: 'file' }, revision: { S: revision }, syncedAt: { S: iso(T0) }, ...extra } }),
  );
}

let src = 1000n;
/** Numbers changes into the changes log as the changes writer does (its sequencer and DynamoDB adapter). */
async function numberChanges(connection: string, changes: Array<[id: string, change: ChangeKind, revision: string, previousRevision: string | null]>): Promise<void> {
  const sequencer = new ChangeSequencer({
    writer: new DynamoDbChangesWriter(api.db, { tableName: api.changesTable, retentionDays: RETENTION_DAYS }),
    now: () => api.clock.at,
    sleep: async () => undefined,
    random: () => 0.5,
    staleAfterMs: 120_000,
  });
  const streamed = changes.map(([id, change, revision, previousRevision]): StreamedChange => {
    src += 10n;
    return { connection, id, change, type: 'file', revision, previousRevision, syncedAt: iso(T0), src: String(src).padStart(21, '0'), srcAt: Math.floor(T0 / 1000) };
  });
  expect(await sequencer.append(connection, streamed)).toMatchObject({ numbered: changes.length });
}

const sentBatches = () => api.sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);

describe('connections', () => {
  it('put, get, pause, resume; the list through the iterator across pages of 2, and of one status', async () => {
    const put = await client.putConnection('acme', { clientId: 'client-1', refreshToken: token('acme-0001') });
    expect(put).toEqual({ connection: 'acme', clientId: 'client-1', status: 'active', refresh: { consecutiveFailures: 0 }, fresh: false, createdAt: iso(T0), updatedAt: iso(T0) });
    expect(await client.getConnection('acme')).toEqual(put);
    for (const name of ['list-1', 'list-2', 'list-3', 'list-4']) await client.putConnection(name, { clientId: 'client-2', refreshToken: token(name) });

    const first = await client.listConnectionsPage({ limit: 2 });
    expect(first.connections).toHaveLength(2);
    expect(first.cursor).toEqual(expect.any(String));
    const before = events.length;
    const listed = (await collect(client.connections({ limit: 2 }))).map((view) => view.connection);
    expect(listed).toEqual(expect.arrayContaining(['acme', 'list-1', 'list-2', 'list-3', 'list-4']));
    expect(new Set(listed).size).toBe(listed.length);
    expect(events.length - before).toBeGreaterThanOrEqual(3);

    expect(await client.pauseConnection('list-2')).toMatchObject({ connection: 'list-2', status: 'paused' });
    expect(await client.pauseConnection('list-2')).toMatchObject({ status: 'paused' });
    expect((await collect(client.connections({ status: 'paused', limit: 1 }))).map((view) => view.connection)).toEqual(['list-2']);
    expect(await client.resumeConnection('list-2')).toMatchObject({ connection: 'list-2', status: 'active' });
    expect(await collect(client.connections({ status: 'paused' }))).toEqual([]);
  });

  it('refusals typed: an unknown connection 404, resuming a failing one 409, a bad connection id 400', async () => {
    expect(await refusal(client.getConnection('nobody'))).toMatchObject({ status: 404, code: 'not-found', tries: 1, operation: 'GET /connections/{connection}' });
    await client.putConnection('failing-1', { clientId: 'client-1', refreshToken: token('failing-1') });
    await api.makeFailing('failing-1', 'getToken: HTTP 401 (invalid_grant: token revoked)');
    expect(await refusal(client.resumeConnection('failing-1'))).toMatchObject({ status: 409, code: 'conflict' });
    expect(await refusal(client.putConnection('not/valid', { clientId: 'client-1', refreshToken: token('bad') }))).toMatchObject({ status: 400, code: 'bad-request' });
  });
});

describe('sending ids', () => {
  it('users to the sync queue, background to the reconcile queue; a refused id a 400 with `rejected`, nothing sent', async () => {
    await client.putConnection('sender', { clientId: 'client-1', refreshToken: token('sender') });
    const batches = sentBatches().length;
    expect(await client.sendIds('sender', ['a', 'b', 'a'])).toEqual({ sent: 2 });
    expect(await client.sendIds('sender', ['c'], { lane: 'background' })).toEqual({ sent: 1 });
    const [users, background] = sentBatches().slice(batches);
    expect(users!.QueueUrl).toBe(SYNC_QUEUE_URL);
    expect(users!.Entries!.map((entry) => JSON.parse(entry.MessageBody!))).toEqual([
      { connection: 'sender', id: 'a' },
      { connection: 'sender', id: 'b' },
    ]);
    expect(background!.QueueUrl).toBe(RECONCILE_QUEUE_URL);

    const refused = await refusal(client.sendIds('sender', ['ok', '', 'x'.repeat(1025)]));
    expect(refused).toMatchObject({ status: 400, code: 'bad-request', tries: 1 });
    expect(refused.rejected?.map((entry) => entry.index)).toEqual([1, 2]);
    expect(refused.rejected?.every((entry) => entry.reason.length > 0)).toBe(true);
    expect(sentBatches()).toHaveLength(batches + 2);
  });
});

describe('items', () => {
  it('an item in its row (an id holding `/`), one in the bucket by its presigned URL, numbers exact with a parser that keeps them, an unknown id 404', async () => {
    await client.putConnection('reader', { clientId: 'client-1', refreshToken: token('reader') });
    await putRow('reader', 'fil/1', '7', { item: { M: { id: { S: 'fil/1' }, size: { N: '12345678901234567890' } } } });
    await putRow('reader', 'big', '9', { itemObject: { M: { key: { S: 'items/reader/big/9/x.json' }, size: { N: '9000000' }, sha256: { S: 'x' } } } });

    const small = await client.getItem('reader', 'fil/1');
    expect(small).toMatchObject({ connection: 'reader', id: 'fil/1', type: 'file', revision: '7', syncedAt: iso(T0) });
    expect(events.at(-1)!.rawPath).toBe('/connections/reader/items/fil%2F1');
    const big: Item = await client.getItem('reader', 'big');
    expect(big.item).toBeUndefined();
    expect(new URL(big.itemUrl!).pathname).toContain('items/reader/big/9/x.json');
    expect(new URL(big.itemUrl!).searchParams.get('X-Amz-Expires')).toBe('300');

    const exact = createClient({ baseUrl: local.url, region: 'eu-west-1', credentials: FAKE, parseJson: (text) => parse(text, null, (value) => (isSafeNumber(value) ? Number(value) : BigInt(value))) });
    expect((await exact.getItem('reader', 'fil/1')).item).toEqual({ id: 'fil/1', size: 12345678901234567890n });

    expect(await refusal(client.getItem('reader', 'nothing'))).toMatchObject({ status: 404, code: 'not-found' });
  });
});

describe('the snapshot and the changes feed', () => {
  const ids = ['a', 'b', 'c', 'd', 'e'];
  const FEED: Array<[string, ChangeKind, string, string | null]> = [...ids.map((id): [string, ChangeKind, string, null] => [id, 'created', '1', null]), ['a', 'updated', '2', '1']];

  beforeAll(async () => {
    await client.putConnection('feed', { clientId: 'client-1', refreshToken: token('feed') });
    for (const id of ids) await putRow('feed', id, id === 'a' ? '2' : '1');
    await numberChanges('feed', FEED);
  });

  it('the snapshot: every item in id order; onCursor hands each page its cursor and the changesCursor; a stored cursor resumes it', async () => {
    const stored: SnapshotCursors[] = [];
    const all = await collect(client.snapshot('feed', { limit: 2, onCursor: (cursors) => void stored.push(cursors) }));
    expect(all.map((item) => `${item.id}@${item.revision}`)).toEqual(['a@2', 'b@1', 'c@1', 'd@1', 'e@1']);
    expect(stored.length).toBeGreaterThanOrEqual(3);
    expect(stored.at(-1)!.cursor).toBeNull();
    expect(new Set(stored.map((cursors) => cursors.changesCursor)).size).toBe(1);

    // Stopped in its second page: the cursor stored is the first page's; read again from it.
    const kept: SnapshotCursors[] = [];
    const seen: string[] = [];
    for await (const item of client.snapshot('feed', { limit: 2, onCursor: (cursors) => void kept.push(cursors) })) {
      seen.push(item.id);
      if (seen.length === 3) break;
    }
    expect(kept).toHaveLength(1);
    const rest = await collect(client.snapshot('feed', { limit: 2, cursor: kept[0]!.cursor! }));
    expect(rest.map((item) => item.id)).toEqual(['c', 'd', 'e']);
  });

  it('the feed: every change in order; onCursor stores the cursor after each page; read again from a stored one, it goes on from there', async () => {
    const { changesCursor } = (await client.snapshotPage('feed', { limit: 1 })) as { changesCursor: string };
    const stored: string[] = [];
    const all: Change[] = await collect(client.changes('feed', { after: changesCursor, limit: 2, onCursor: (next) => void stored.push(next) }));
    expect(all.map((change) => [change.id, change.change, change.revision, change.previousRevision])).toEqual(FEED);
    expect(stored).toHaveLength(3);
    expect(stored.at(-1)).toBe(all.at(-1)!.cursor);
    expect(await collect(client.changes('feed', { after: stored.at(-1)! }))).toEqual([]);
    expect(all).toEqual(await collect(client.changes('feed', { limit: 1000 })));

    // Stopped in the second page: resumed from the cursor stored after the first.
    const kept: string[] = [];
    const seen: Change[] = [];
    for await (const change of client.changes('feed', { limit: 2, onCursor: (next) => void kept.push(next) })) {
      seen.push(change);
      if (seen.length === 3) break;
    }
    expect(kept).toEqual([all[1]!.cursor]);
    expect(await collect(client.changes('feed', { after: kept[0]!, limit: 2 }))).toEqual(all.slice(2));

    // A change after the end: read from the last cursor stored, it alone.
    await putRow('feed', 'f', '1');
    await numberChanges('feed', [['f', 'created', '1', null]]);
    const later: string[] = [];
    expect((await collect(client.changes('feed', { after: stored.at(-1)!, onCursor: (next) => void later.push(next) }))).map((change) => change.id)).toEqual(['f']);
    expect(later).toHaveLength(1);
  });

  it('following the feed: polls every intervalMs, yields what comes, ends without an error when the signal aborts', async () => {
    const controller = new AbortController();
    let polls = 0;
    const follower = createClient({
      baseUrl: local.url,
      region: 'eu-west-1',
      credentials: FAKE,
      sleep: async (ms) => {
        expect(ms).toBe(5_000);
        polls += 1;
        if (polls === 1) {
          await putRow('feed', 'g', '1');
          await numberChanges('feed', [['g', 'created', '1', null]]);
        } else controller.abort();
      },
    });
    const { next } = await client.changesPage('feed', { limit: 1000, after: (await client.snapshotPage('feed')).changesCursor });
    const stored: string[] = [];
    const followed = await collect(follower.changes('feed', { after: next, follow: { intervalMs: 5_000 }, signal: controller.signal, onCursor: (cursor) => void stored.push(cursor) }));
    expect(followed.map((change) => change.id)).toEqual(['g']);
    expect(stored).toEqual([followed[0]!.cursor]);
    expect(polls).toBe(2);
  });

  it('a cursor whose changes have expired: 410 cursor-expired, typed, not tried again', async () => {
    const first = (await client.changesPage('feed', { limit: 1 })).next;
    const now = api.clock.at;
    api.clock.advance((RETENTION_DAYS + 1) * 86_400_000);
    try {
      const expired = await refusal(collect(client.changes('feed', { after: first })));
      expect(expired).toMatchObject({ status: 410, code: 'cursor-expired', tries: 1, retryable: false, operation: 'GET /connections/{connection}/changes' });
    } finally {
      api.clock.at = now;
    }
  });
});

describe('remove and erase', () => {
  it('DELETE: 200 the view, removed; sending ids to it then a 409', async () => {
    await client.putConnection('removed-1', { clientId: 'client-1', refreshToken: token('removed-1') });
    expect(await client.deleteConnection('removed-1')).toMatchObject({ connection: 'removed-1', status: 'removed' });
    expect(await refusal(client.sendIds('removed-1', ['a']))).toMatchObject({ status: 409, code: 'conflict' });
  });

  it('DELETE ?erase=true: 202 the view with its erase; then every other route of it a 404, typed', async () => {
    await client.putConnection('erased-1', { clientId: 'client-1', refreshToken: token('erased-1') });
    const erasing = await client.deleteConnection('erased-1', { erase: true });
    expect(events.at(-1)!.rawQueryString).toBe('erase=true');
    expect(erasing).toMatchObject({ connection: 'erased-1', status: 'removed', erase: { state: 'waiting' } });
    const calls = [
      () => client.pauseConnection('erased-1'),
      () => client.resumeConnection('erased-1'),
      () => client.getItem('erased-1', 'a'),
      () => client.snapshotPage('erased-1'),
      () => client.changesPage('erased-1'),
      () => client.sendIds('erased-1', ['a']),
    ];
    for (const call of calls) expect(await refusal(call())).toMatchObject({ status: 404, code: 'not-found', tries: 1 });
    // Its view still answers, until the eraser is done.
    expect(await client.getConnection('erased-1')).toMatchObject({ status: 'removed', erase: { state: 'waiting' } });
  });
});
