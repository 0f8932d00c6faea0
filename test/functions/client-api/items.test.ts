/**
 * `GET /connections/{connection}/items/{id}` through the client API's handler as production builds
 * it, over DynamoDB Local (the connections and items tables): an item stored in its row is answered as
 * stored (its numbers exact), a tombstone says `deleted`, an item held in the items bucket is a
 * presigned URL of its object (the S3 signer with local credentials: no request is made), and the
 * refusals: a bad id, an unknown connection or item, another method, a body.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { S3ObjectLinks } from '../../../functions/client-api/adapters/s3-object-links.js';
import { createApiHandler, type ApiHandler } from '../../../functions/client-api/app.js';
import { ITEM_URL_SECONDS } from '../../../functions/client-api/items.js';
import { DynamoDbConnectionStore } from '../../../functions/shared/adapters/dynamodb-connection-store.js';
import { loadApiConfig } from '../../../functions/shared/client-config.js';
import { API_SERVICE } from '../../../functions/shared/metric-names.js';
import { createLogger } from '../../../functions/shared/observability.js';
import { testSealing } from '../../support/sealer.js';
import { httpEvent } from './harness.js';

const ITEMS = 'items-read';
const CONNECTIONS = 'connections-read';
const BUCKET = 'content-sync-items-bucket';
const sealing = testSealing();
let dynamo: LocalDynamoDb;
let db: DynamoDBClient;
let handler: ApiHandler;
/** The handler's log lines (its request line each call), kept here, not printed. */
let logText = '';
const logOutput = new PassThrough();
logOutput.on('data', (chunk: Buffer) => void (logText += chunk.toString('utf8')));
const logLines = (): Array<Record<string, unknown>> =>
  logText
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  db = dynamo.client();
  await dynamo.createConnectionsTable(CONNECTIONS);
  await dynamo.createControlTable('control-read');
  await ensureItemsTable(db, ITEMS);
  const store = new DynamoDbConnectionStore(db, CONNECTIONS, { sealer: sealing.sealer });
  await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: 'rt-read-secret', at: '2026-11-27T10:00:00.000Z' });
  const row = (id: string, extra: Record<string, unknown>) =>
    db.send(
      new PutItemCommand({
        TableName: ITEMS,
        Item: { connection: { S: 'acme' }, id: { S: id }, type: { S: 'file' }, revision: { S: '7' }, syncedAt: { S: '2026-11-27T10:01:00.000Z' }, ...extra } as never,
      }),
    );
  await row('fil/1', { item: { M: { id: { S: 'fil/1' }, type: { S: 'file' }, size: { N: '12345678901234567890' }, meta: { M: { rev: { N: '7' } } } } } });
  await row('gone', { deleted: { BOOL: true }, item: { M: { id: { S: 'gone' }, type: { S: 'file' } } } });
  // A folder whose children the sync is still sending (discovery's marker, docs/discovery.md).
  await row('fld-1', { type: { S: 'folder' }, childrenPending: { BOOL: true }, item: { M: { id: { S: 'fld-1' }, type: { S: 'folder' } } } });
  await row('big', { itemObject: { M: { key: { S: 'items/acme/abc/7/def-0123.json' }, size: { N: '9000000' }, sha256: { S: 'def' } } } });
  const sqs = new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS });
  handler = createApiHandler({
    config: loadApiConfig({
      CONNECTIONS_TABLE_NAME: CONNECTIONS,
      CONNECTIONS_KEY_ARN: sealing.keyArn,
      ITEMS_TABLE_NAME: ITEMS,
      ITEMS_BUCKET_NAME: BUCKET,
      CHANGES_TABLE_NAME: 'content-sync-changes',
      CHANGES_RETENTION_DAYS: '35',
      CONTROL_TABLE_NAME: 'control-read',
      SYNC_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/sync',
      RECONCILE_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile',
      ERASE_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/erase',
      ERASE_SETTLE_SECONDS: '150',
    }),
    dynamodb: db,
    kms: sealing.kms,
    sqs,
    links: new S3ObjectLinks(new S3Client({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), BUCKET),
    clock: { now: () => new Date('2026-11-27T10:02:00.000Z') },
    logger: createLogger(API_SERVICE, { output: logOutput }),
  });
});

afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
});

async function get(path: string, method = 'GET', body?: unknown): Promise<{ status: number; text: string; body: Record<string, unknown> }> {
  const result = await handler(httpEvent({ method, path, ...(body !== undefined ? { body } : {}) }));
  const text = String(result.body);
  return { status: result.statusCode ?? 0, text, body: JSON.parse(text) as Record<string, unknown> };
}

describe('GET /connections/{connection}/items/{id}', () => {
  it('200: the item as stored, its numbers exact, the id percent-decoded once', async () => {
    const answer = await get('/connections/acme/items/fil%2F1');
    expect(answer.status).toBe(200);
    expect(answer.text).toBe(
      '{"connection":"acme","id":"fil/1","type":"file","revision":"7","syncedAt":"2026-11-27T10:01:00.000Z","item":{"id":"fil/1","type":"file","size":12345678901234567890,"meta":{"rev":7}}}',
    );
  });

  it('200: a tombstone says deleted, with the last copy', async () => {
    const answer = await get('/connections/acme/items/gone');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ connection: 'acme', id: 'gone', type: 'file', revision: '7', syncedAt: '2026-11-27T10:01:00.000Z', deleted: true, item: { id: 'gone', type: 'file' } });
  });

  it('200: an item held in the items bucket is a presigned URL of its object, valid ITEM_URL_SECONDS, never its body', async () => {
    const answer = await get('/connections/acme/items/big');
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual(['connection', 'id', 'itemUrl', 'revision', 'syncedAt', 'type']);
    const url = new URL(String(answer.body['itemUrl']));
    expect(url.pathname).toContain('items/acme/abc/7/def-0123.json');
    expect(url.hostname).toContain(BUCKET);
    expect(url.searchParams.get('X-Amz-Expires')).toBe(String(ITEM_URL_SECONDS));
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    // Its log line names the route, the connection and the status; never the URL or its signature.
    await new Promise((resolve) => setImmediate(resolve)); // the log stream's data delivered
    const line = logLines().at(-1)!;
    expect(line).toMatchObject({ level: 'INFO', message: 'request', service: API_SERVICE, method: 'GET', route: 'GET /connections/{connection}/items/{id}', status: 200, connection: 'acme' });
    expect(logText).not.toContain(url.searchParams.get('X-Amz-Signature')!);
    expect(logText).not.toContain('def-0123.json');
  });

  it("200: a folder row still marked childrenPending is answered as any row, without the marker", async () => {
    const answer = await get('/connections/acme/items/fld-1');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ connection: 'acme', id: 'fld-1', type: 'folder', revision: '7', syncedAt: '2026-11-27T10:01:00.000Z', item: { id: 'fld-1', type: 'folder' } });
  });

  it('refusals: an unknown item or connection (404), a bad id or connection (400), another method or a body', async () => {
    expect(await get('/connections/acme/items/nope')).toMatchObject({ status: 404, body: { error: { code: 'not-found', message: 'connection "acme" holds no item of that id' } } });
    expect(await get('/connections/globex/items/fil-1')).toMatchObject({ status: 404, body: { error: { code: 'not-found', message: 'connection "globex" is not known' } } });
    const control = await get('/connections/acme/items/a%01b');
    expect(control).toMatchObject({ status: 400, body: { error: { code: 'bad-request' } } });
    expect(control.text).not.toContain('\\u0001');
    expect(await get('/connections/..%2E/items/x')).toMatchObject({ status: 400, body: { error: { code: 'bad-request' } } });
    expect(await get('/connections/acme/items/fil-1', 'DELETE')).toMatchObject({ status: 404, body: { error: { code: 'not-found' } } });
    expect(await get('/connections/acme/items/fil-1', 'GET', { x: 1 })).toMatchObject({ status: 400, body: { error: { code: 'bad-request', message: 'this route takes no body' } } });
  });
});
