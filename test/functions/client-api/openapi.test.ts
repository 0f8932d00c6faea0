/**
 * The client API's OpenAPI document (docs/openapi.json) held against the handler as production
 * builds it (./harness.ts: createApiHandler over loadApiConfig, DynamoDB Local, SQS mocked), both ways:
 *
 * - handler ⊆ document: every method on every documented path is routed when the document has it
 *   and answered the router's "no route" 404 when it does not; paths the document lacks are "no
 *   route" for every method; the stack's route keys (infra/client-api CLIENT_API_ROUTES) are the
 *   document's;
 * - document ⊆ handler: every operation is driven through every query parameter it documents and
 *   every status it documents, but API Gateway's own (403, 429: `x-content-sync-gateway`), which no
 *   code of ours answers; 500 and 503 through a connections store that fails. The last test lists
 *   any pair not reached;
 * - every answer validates against the schema of its (operation, status) (ajv, JSON Schema
 *   2020-12); every body the handler took against its request schema, which refuses a field more
 *   as the handler does;
 * - the document's bounds and enums are the code's constants.
 *
 * The items are rows written into the items table, the feed rows of the changes table as the
 * changes writer leaves them (read back by the production adapters).
 */
import { PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { S3ObjectLinks } from '../../../functions/client-api/adapters/s3-object-links.js';
import { createApiHandler } from '../../../functions/client-api/app.js';
import { ITEM_URL_SECONDS } from '../../../functions/client-api/items.js';
import { errorResponse, MAX_BODY_BYTES, PAGE_LIMIT, type ErrorCode } from '../../../functions/client-api/routes.js';
import { kmsApi } from '../../../functions/shared/adapters/kms-api.js';
import { sealedConnectionStore } from '../../../functions/shared/adapters/sealed-connection-store.js';
import { CHANGE_KINDS } from '../../../functions/shared/changes/transition.js';
import { loadApiConfig } from '../../../functions/shared/client-config.js';
import {
  clientIdProblem,
  CONNECTION_STATUSES,
  connectionIdProblem,
  MAX_CLIENT_ID_LENGTH,
  MAX_CONNECTION_ID_LENGTH,
  MAX_REFRESH_TOKEN_LENGTH,
  refreshTokenProblem,
  type EraseState,
} from '../../../functions/shared/connections/connection.js';
import { DEFAULT_PAGE_SIZE, LANES, MAX_IDS_PER_REQUEST, MAX_PAGE_SIZE } from '../../../functions/shared/connections/operations.js';
import type { ConnectionStore } from '../../../functions/shared/connections/ports.js';
import { TransientError } from '../../../functions/shared/errors.js';
import { MAX_ID_BYTES, sendableIdProblem } from '../../../functions/item-sync/message.js';
import { ApiHarness, iso, SYNC_QUEUE_URL, RECONCILE_QUEUE_URL, T0, token, TOKEN_MARK, type Answer } from './harness.js';

type Schema = Record<string, unknown>;
interface Reference {
  $ref: string;
  description?: string;
}
interface Parameter {
  name: string;
  in: 'path' | 'query';
  required?: boolean;
  description?: string;
  schema: Schema;
}
interface MediaType {
  schema: Schema;
}
interface ResponseObject {
  description: string;
  content?: Record<string, MediaType>;
  'x-content-sync-gateway'?: boolean;
}
interface OperationObject {
  operationId: string;
  description: string;
  parameters?: Array<Parameter | Reference>;
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<string, ResponseObject | Reference>;
}
type PathItem = Record<string, unknown> & { parameters?: Array<Parameter | Reference> };
interface OpenApi {
  info: { description: string };
  paths: Record<string, PathItem>;
  components: { schemas: Record<string, Schema>; parameters: Record<string, Parameter>; responses: Record<string, ResponseObject> };
}

const DOC = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../../docs/openapi.json'), 'utf8')) as OpenApi;
const METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'] as const;

function deref<T>(node: T | Reference): T {
  if (typeof node !== 'object' || node === null || !('$ref' in node)) return node;
  const target = node.$ref
    .replace(/^#\//, '')
    .split('/')
    .reduce<unknown>((at, key) => (at as Record<string, unknown>)[key], DOC);
  if (target === undefined) throw new Error(`unresolved ${node.$ref}`);
  return target as T;
}

interface Operation {
  id: string;
  method: string;
  template: string;
  parameters: Parameter[];
  responses: Record<string, ResponseObject>;
  requestSchema: Schema | undefined;
}

const OPERATIONS = new Map<string, Operation>();
for (const [template, item] of Object.entries(DOC.paths)) {
  for (const method of METHODS) {
    const operation = item[method.toLowerCase()] as OperationObject | undefined;
    if (!operation) continue;
    OPERATIONS.set(operation.operationId, {
      id: operation.operationId,
      method,
      template,
      parameters: [...(item.parameters ?? []), ...(operation.parameters ?? [])].map((parameter) => deref(parameter)),
      responses: Object.fromEntries(Object.entries(operation.responses).map(([status, response]) => [status, deref(response)])),
      requestSchema: operation.requestBody?.content['application/json']?.schema,
    });
  }
}
const operation = (id: string): Operation => {
  const found = OPERATIONS.get(id);
  if (!found) throw new Error(`the document has no operation ${id}`);
  return found;
};
const isGateway = (response: ResponseObject): boolean => response['x-content-sync-gateway'] === true;

// ---- the schemas, compiled ---------------------------------------------------------------------

const ajv = new Ajv2020({ strict: true, allErrors: true });
// OpenAPI's own schema keywords: annotations, nothing to check.
for (const keyword of ['discriminator', 'xml', 'externalDocs', 'example']) ajv.addKeyword(keyword);
ajv.addFormat('date-time', (value: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value) && !Number.isNaN(Date.parse(value)));
ajv.addFormat('uri', (value: string) => URL.canParse(value));

/** The schema with every `#/components/schemas/X` as a reference into the compiled `openapi` schema. */
function linked(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(linked);
  if (typeof node !== 'object' || node === null) return node;
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => [key, key === '$ref' && typeof value === 'string' ? value.replace('#/components/schemas/', 'openapi#/$defs/') : linked(value)]),
  );
}
ajv.addSchema({ $id: 'openapi', $defs: linked(DOC.components.schemas) as Schema });

const compiled = new Map<string, ValidateFunction>();
function validator(key: string, schema: Schema): ValidateFunction {
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(linked(schema) as Schema);
    compiled.set(key, validate);
  }
  return validate;
}

/** Fails unless `value` is valid against `schema`, with ajv's errors. */
function expectValid(key: string, schema: Schema, value: unknown, text = JSON.stringify(value)): void {
  const validate = validator(key, schema);
  if (!validate(value)) throw new Error(`${key}: ${ajv.errorsText(validate.errors, { separator: '; ' })}\n${text}`);
}

function responseSchema(operationId: string, status: number): Schema {
  const response = operation(operationId).responses[String(status)];
  if (!response) throw new Error(`${operationId} answered ${status}, a status the document does not give it`);
  const schema = response.content?.['application/json']?.schema;
  if (!schema) throw new Error(`${operationId} ${status}: the document gives no JSON schema`);
  return schema;
}

function expectAnswerValid(operationId: string, answer: Answer): void {
  expect(answer.headers['content-type']).toBe('application/json');
  expectValid(`${operationId} ${answer.status}`, responseSchema(operationId, answer.status), answer.body, answer.text);
}

const isNoRoute = (answer: Answer): boolean => answer.status === 404 && typeof answer.body?.error?.message === 'string' && answer.body.error.message.startsWith('no route');

// ---- driving the handler through the document ---------------------------------------------------

const api = new ApiHarness();
const ITEMS = 'items-openapi';
const BUCKET = 'content-sync-items-bucket';
const RETENTION_SECONDS = 35 * 86_400;

/** What the connections store does wrong, for the failures inside. */
let fault: 'internal' | 'unavailable' | 'put-races-erase' | undefined;

/** The connections store as deployed, failing as `fault` says. */
function faultyStore(inner: ConnectionStore): ConnectionStore {
  return new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (fault === 'internal') throw new Error('the connections table failed');
        if (fault === 'unavailable') throw new TransientError('the connections table is throttled');
        if (fault === 'put-races-erase' && name === 'requestErase') {
          await target.putCredentials({ connection: args[0] as string, clientId: 'client-1', refreshToken: token('race'), at: iso(api.clock.at) });
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** Every (operation, status) and (operation, parameter) reached; the request bodies held against their schema. */
const reached = new Set<string>();
const exercised = new Set<string>();
const bodiesHeld = new Set<string>();

interface Call {
  /** Path parameters, percent-encoded as sent. */
  path?: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
}

/**
 * One request of a documented operation, which must answer `status`: its answer validated against
 * the document, what it reached recorded; a query parameter the operation does not document must be
 * refused, and a body the handler took must be one the request schema takes.
 */
async function call(operationId: string, status: number, request: Call = {}): Promise<Answer> {
  const { method, template, parameters, requestSchema } = operation(operationId);
  const path = template.replace(/\{(\w+)\}/g, (_whole, name: string) => {
    const value = request.path?.[name];
    if (value === undefined) throw new Error(`${operationId}: no value for {${name}}`);
    return value;
  });
  const query = new URLSearchParams(request.query ?? {}).toString();
  const answer = await api.call({ method, path, ...(query !== '' ? { query } : {}), ...(request.body !== undefined ? { body: request.body } : {}) });
  expect({ operationId, status: answer.status }, answer.text).toEqual({ operationId, status });
  expectAnswerValid(operationId, answer);
  reached.add(`${operationId} ${status}`);
  const documented = new Set(parameters.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name));
  const undocumented = Object.keys(request.query ?? {}).filter((name) => !documented.has(name));
  if (undocumented.length > 0) expect(answer.status, `${operationId} with ${undocumented.join(', ')}`).toBe(400);
  if (status < 300) {
    for (const parameter of parameters) {
      if (parameter.in === 'path' || request.query?.[parameter.name] !== undefined) exercised.add(`${operationId} ${parameter.name}`);
    }
    if (requestSchema && typeof request.body === 'object' && request.body !== null && !Buffer.isBuffer(request.body)) {
      expectValid(`${operationId} request`, requestSchema, request.body);
      bodiesHeld.add(operationId);
    }
  }
  return answer;
}

const credentials = (name: string) => ({ clientId: 'client-1', refreshToken: token(name) });
const put = (connection: string): Promise<Answer> => call('putConnection', 200, { path: { connection }, body: credentials(connection) });
/** A body of JSON `value` padded with spaces to `bytes` bytes. */
function padded(value: Record<string, unknown>, bytes: number): string {
  const json = JSON.stringify(value);
  return json.slice(0, -1) + ' '.repeat(bytes - Buffer.byteLength(json)) + '}';
}

async function putRow(row: Record<string, AttributeValue>, table = ITEMS): Promise<void> {
  await api.db.send(new PutItemCommand({ TableName: table, Item: row }));
}

/** A change row of the changes table, and its head, as the changes writer leaves them. */
async function putChange(connection: string, seq: number, change: Record<string, AttributeValue>, expiresAt: number): Promise<void> {
  await putRow({ connection: { S: connection }, seq: { N: String(seq) }, ...change, expiresAt: { N: String(expiresAt) } }, api.changesTable);
  await putRow({ connection: { S: connection }, seq: { N: '0' }, head: { N: String(seq) }, epoch: { S: `epoch-${connection}` } }, api.changesTable);
}

beforeAll(async () => {
  await api.start();
  await api.reset({ ITEMS_TABLE_NAME: ITEMS });
  await ensureItemsTable(api.db, ITEMS);
  const config = loadApiConfig(api.env({ ITEMS_TABLE_NAME: ITEMS, ITEMS_BUCKET_NAME: BUCKET }));
  api.handler = createApiHandler({
    config,
    dynamodb: api.db,
    kms: api.sealing.kms,
    sqs: api.sqs,
    clock: api.clock,
    store: faultyStore(sealedConnectionStore({ dynamodb: api.db, kms: kmsApi(api.sealing.kms), config })),
    links: new S3ObjectLinks(new S3Client({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), BUCKET),
    sleep: async () => undefined,
  });
  const row = (id: string, extra: Record<string, AttributeValue>) =>
    putRow({ connection: { S: 'acme' }, id: { S: id }, type: { S: 'file' }, revision: { S: '2' }, syncedAt: { S: iso(T0 - 60_000) }, ...extra });
  await row('fil/1', { item: { M: { id: { S: 'fil/1' }, size: { N: '12345678901234567890' } } } });
  await row('gone', { deleted: { BOOL: true }, item: { M: { id: { S: 'gone' } } } });
  await row('big', { itemObject: { M: { key: { S: 'items/acme/big/2/x.json' }, size: { N: '9000000' }, sha256: { S: 'x' } } } });
  const kept = Math.floor(T0 / 1000) + RETENTION_SECONDS;
  const file = (revision: string, previous?: string): Record<string, AttributeValue> => ({
    id: { S: 'fil/1' },
    type: { S: 'file' },
    revision: { S: revision },
    ...(previous !== undefined ? { previousRevision: { S: previous } } : {}),
    syncedAt: { S: iso(T0 - 120_000) },
  });
  await putChange('acme', 1, { change: { S: 'created' }, ...file('1') }, kept);
  await putChange('acme', 2, { change: { S: 'updated' }, ...file('2', '1') }, kept);
  await putChange('expired', 1, { change: { S: 'created' }, ...file('1') }, Math.floor(T0 / 1000) - 1);
  for (const connection of ['acme', 'expired']) expect((await api.put(connection, credentials(connection))).status).toBe(200);
});

afterAll(async () => {
  for (const text of [...api.answered, ...api.written]) expect(text).not.toContain(TOKEN_MARK);
  await api.close();
});

describe('connections, as documented', () => {
  it('putConnection: 200 created and put again; 400 a field the body does not take; 413 a body over 1 MiB', async () => {
    expect((await put('fresh')).body).toMatchObject({ connection: 'fresh', status: 'active' });
    expect((await put('fresh')).body).toMatchObject({ connection: 'fresh', status: 'active' });
    await call('putConnection', 400, { path: { connection: 'acme' }, body: { ...credentials('acme'), accessToken: 'x' } });
    await call('putConnection', 400, { path: { connection: '..' }, body: credentials('dots') });
    await call('putConnection', 413, { path: { connection: 'acme' }, body: padded(credentials('acme'), MAX_BODY_BYTES + 1) });
  });

  it('getConnection: 200 its view; 400 a bad id or a parameter it does not take; 404 unknown', async () => {
    await call('getConnection', 200, { path: { connection: 'acme' } });
    await call('getConnection', 400, { path: { connection: 'a%20b' } });
    await call('getConnection', 400, { path: { connection: 'acme' }, query: { verbose: 'true' } });
    await call('getConnection', 404, { path: { connection: 'nobody' } });
  });

  it('listConnections: 200 pages by status, limit and cursor; 400 a bad limit, status or cursor', async () => {
    await put('list-a');
    await put('list-b');
    const first = await call('listConnections', 200, { query: { status: 'active', limit: '1' } });
    expect(first.body.connections).toHaveLength(1);
    expect(first.body.cursor).toEqual(expect.any(String));
    const next = await call('listConnections', 200, { query: { status: 'active', limit: '1', cursor: first.body.cursor } });
    expect(next.body.connections[0].connection).not.toBe(first.body.connections[0].connection);
    await call('listConnections', 200);
    const refused: Array<Record<string, string>> = [{ limit: '0' }, { limit: String(PAGE_LIMIT.max + 1) }, { status: 'gone' }, { cursor: 'nope' }, { after: 'x' }];
    for (const query of refused) {
      await call('listConnections', 400, { query });
    }
  });

  it('pauseConnection and resumeConnection: 200; 409 resuming a failing one, pausing a removed one; 404 unknown; 400 a bad id', async () => {
    await put('paused-one');
    expect((await call('pauseConnection', 200, { path: { connection: 'paused-one' } })).body.status).toBe('paused');
    expect((await call('resumeConnection', 200, { path: { connection: 'paused-one' } })).body.status).toBe('active');
    await put('failing-one');
    await api.makeFailing('failing-one', 'getToken: HTTP 401 (invalid_grant)');
    await call('resumeConnection', 409, { path: { connection: 'failing-one' } });
    await put('removed-one');
    await call('deleteConnection', 200, { path: { connection: 'removed-one' } });
    await call('pauseConnection', 409, { path: { connection: 'removed-one' } });
    await call('pauseConnection', 404, { path: { connection: 'nobody' } });
    await call('resumeConnection', 404, { path: { connection: 'nobody' } });
    await call('pauseConnection', 400, { path: { connection: '.' } });
    await call('resumeConnection', 400, { path: { connection: 'paused-one' }, query: { force: 'true' } });
  });

  it('deleteConnection: 200 removed, 202 erased; 400 an erase that is not true; 404 unknown or (a plain removal) being erased; putConnection 409 while the erase runs', async () => {
    await put('doomed');
    await call('deleteConnection', 400, { path: { connection: 'doomed' }, query: { erase: 'false' } });
    await call('deleteConnection', 400, { path: { connection: 'doomed' }, query: { erse: 'true' } });
    const removed = await call('deleteConnection', 200, { path: { connection: 'doomed' } });
    expect(removed.body).toMatchObject({ status: 'removed' });
    expect(removed.body).not.toHaveProperty('erase');
    const erased = await call('deleteConnection', 202, { path: { connection: 'doomed' }, query: { erase: 'true' } });
    expect(erased.body.erase).toMatchObject({ state: 'waiting' });
    await call('deleteConnection', 404, { path: { connection: 'nobody' } });
    await call('deleteConnection', 404, { path: { connection: 'nobody' }, query: { erase: 'true' } });
    expect(await api.store().updateErase('doomed', { ...(await api.store().view('doomed', { consistent: true }))!.erase!, state: 'running' })).toBe(true);
    await call('putConnection', 409, { path: { connection: 'doomed' }, body: credentials('doomed') });
    expect((await call('getConnection', 200, { path: { connection: 'doomed' } })).body.erase).toMatchObject({ state: 'running' });
    // Without `erase`, a connection whose erase was asked for is not found; the erase asked again answers its view.
    await call('deleteConnection', 404, { path: { connection: 'doomed' } });
    expect((await call('deleteConnection', 202, { path: { connection: 'doomed' }, query: { erase: 'true' } })).body.erase).toMatchObject({ state: 'running' });
  });

  it('deleteConnection: 409 when a PUT comes between the removal and the erase asked for', async () => {
    await put('racing');
    fault = 'put-races-erase';
    try {
      await call('deleteConnection', 409, { path: { connection: 'racing' }, query: { erase: 'true' } });
    } finally {
      fault = undefined;
    }
    expect((await call('getConnection', 200, { path: { connection: 'racing' } })).body).toMatchObject({ status: 'active' });
    expect((await call('getConnection', 200, { path: { connection: 'racing' } })).body).not.toHaveProperty('erase');
  });
});

describe('items, as documented', () => {
  it('sendItems: 200 in each lane (users by default); 400 with `rejected`, nothing sent; 404 unknown; 409 removed; 413 over 1 MiB', async () => {
    api.sqsMock.resetHistory();
    expect((await call('sendItems', 200, { path: { connection: 'acme' }, body: { ids: ['fil-1', 'fil-2', 'fil-1'] } })).body).toEqual({ sent: 2 });
    const lane = (DOC.components.schemas['SendItemsBody']!['properties'] as Record<string, Schema>)['lane']!;
    await call('sendItems', 200, { path: { connection: 'acme' }, body: { ids: ['fil-3'], lane: lane['default'] } });
    await call('sendItems', 200, { path: { connection: 'acme' }, body: { ids: ['fil-4'], lane: 'background' } });
    expect(api.sentBatches().map((batch) => batch.QueueUrl)).toEqual([SYNC_QUEUE_URL, SYNC_QUEUE_URL, RECONCILE_QUEUE_URL]);
    api.sqsMock.resetHistory();
    const refused = await call('sendItems', 400, { path: { connection: 'acme' }, body: { ids: ['fil-1', '', 'a\u0001b'] } });
    expect(refused.body.rejected.map((entry: { index: number }) => entry.index)).toEqual([1, 2]);
    await call('sendItems', 400, { path: { connection: 'acme' }, body: { ids: [] } });
    await call('sendItems', 400, { path: { connection: 'acme' }, body: { ids: Array.from({ length: MAX_IDS_PER_REQUEST + 1 }, (_, i) => `fil-${i}`) } });
    await call('sendItems', 400, { path: { connection: 'acme' }, body: { ids: ['fil-1'], lane: 'express' } });
    await call('sendItems', 413, { path: { connection: 'acme' }, body: padded({ ids: ['fil-1'] }, MAX_BODY_BYTES + 1) });
    await call('sendItems', 404, { path: { connection: 'nobody' }, body: { ids: ['fil-1'] } });
    await put('removed-two');
    await call('deleteConnection', 200, { path: { connection: 'removed-two' } });
    api.sqsMock.resetHistory();
    await call('sendItems', 409, { path: { connection: 'removed-two' }, body: { ids: ['fil-1'] } });
    expect(api.sentBatches()).toEqual([]);
  });

  it('getItem: 200 an item, a tombstone, an item by URL; 400 a bad id; 404 an id it does not hold', async () => {
    expect((await call('getItem', 200, { path: { connection: 'acme', id: 'fil%2F1' } })).body).toMatchObject({ id: 'fil/1', item: { id: 'fil/1' } });
    expect((await call('getItem', 200, { path: { connection: 'acme', id: 'gone' } })).body).toMatchObject({ deleted: true });
    const big = await call('getItem', 200, { path: { connection: 'acme', id: 'big' } });
    expect(new URL(big.body.itemUrl).searchParams.get('X-Amz-Expires')).toBe(String(ITEM_URL_SECONDS));
    await call('getItem', 400, { path: { connection: 'acme', id: 'a%01b' } });
    await call('getItem', 404, { path: { connection: 'acme', id: 'nope' } });
    await call('getItem', 404, { path: { connection: 'nobody', id: 'fil-1' } });
  });

  it('listItems: 200 the snapshot page by page (cursor, limit); 400 a bad cursor or limit; 404 unknown', async () => {
    const first = await call('listItems', 200, { path: { connection: 'acme' }, query: { limit: '2' } });
    expect(first.body.items).toHaveLength(2);
    const rest = await call('listItems', 200, { path: { connection: 'acme' }, query: { cursor: first.body.cursor, limit: '2' } });
    expect(rest.body.changesCursor).toBe(first.body.changesCursor);
    expect([...first.body.items, ...rest.body.items].map((item: { id: string }) => item.id)).toEqual(['big', 'fil/1', 'gone']);
    const refused: Array<Record<string, string>> = [{ cursor: 'nope' }, { limit: '0' }, { after: 'x' }];
    for (const query of refused) await call('listItems', 400, { path: { connection: 'acme' }, query });
    await call('listItems', 404, { path: { connection: 'nobody' } });
  });
});

describe('changes, as documented', () => {
  it('listChanges: 200 from the start and after a cursor (after, limit); 400 a bad cursor; 404 unknown; 410 expired', async () => {
    const first = await call('listChanges', 200, { path: { connection: 'acme' }, query: { limit: '1' } });
    expect(first.body.changes).toMatchObject([{ change: 'created', previousRevision: null }]);
    const next = await call('listChanges', 200, { path: { connection: 'acme' }, query: { after: first.body.next, limit: String(PAGE_LIMIT.max) } });
    expect(next.body.changes).toMatchObject([{ change: 'updated', previousRevision: '1' }]);
    const snapshot = await call('listItems', 200, { path: { connection: 'acme' } });
    await call('listChanges', 200, { path: { connection: 'acme' }, query: { after: snapshot.body.changesCursor } });
    const refused: Array<Record<string, string>> = [{ after: 'nope' }, { after: '' }, { limit: String(PAGE_LIMIT.max + 1) }, { cursor: first.body.next }];
    for (const query of refused) {
      await call('listChanges', 400, { path: { connection: 'acme' }, query });
    }
    await call('listChanges', 404, { path: { connection: 'nobody' } });
    await call('listChanges', 410, { path: { connection: 'expired' } });
  });
});

describe('failures inside, as documented', () => {
  /** A request each operation takes, its connections store aside. */
  const requests: Record<string, Call> = {
    listConnections: {},
    putConnection: { path: { connection: 'acme' }, body: credentials('acme') },
    getConnection: { path: { connection: 'acme' } },
    deleteConnection: { path: { connection: 'acme' } },
    pauseConnection: { path: { connection: 'acme' } },
    resumeConnection: { path: { connection: 'acme' } },
    sendItems: { path: { connection: 'acme' }, body: { ids: ['fil-1'] } },
    getItem: { path: { connection: 'acme', id: 'fil-1' } },
    listItems: { path: { connection: 'acme' } },
    listChanges: { path: { connection: 'acme' } },
  };

  it('covers every operation', () => {
    expect(Object.keys(requests).sort()).toEqual([...OPERATIONS.keys()].sort());
  });

  it.each([
    ['internal', 500],
    ['unavailable', 503],
  ] as const)('every operation: %s (%i) when the connections table fails, nothing sent', async (kind, status) => {
    api.sqsMock.resetHistory();
    fault = kind;
    try {
      for (const [operationId, request] of Object.entries(requests)) expect((await call(operationId, status, request)).body.error.code).toBe(kind);
    } finally {
      fault = undefined;
    }
    expect(api.sqsMock.calls()).toHaveLength(0);
  });
});

describe('handler ⊆ document', () => {
  const values: Record<string, string> = { connection: 'probe', id: 'fil-1' };
  const byPath = new Map([...OPERATIONS.values()].map((op) => [`${op.method} ${op.template}`, op.id]));

  it('every method on every documented path: routed when the document has it, "no route" when it does not', async () => {
    const outcomes: string[] = [];
    const expected: string[] = [];
    for (const template of Object.keys(DOC.paths)) {
      const path = template.replace(/\{(\w+)\}/g, (_whole, name: string) => values[name]!);
      for (const method of METHODS) {
        const answer = await api.call({ method, path });
        const operationId = byPath.get(`${method} ${template}`);
        outcomes.push(`${method} ${template}: ${isNoRoute(answer) ? 'no route' : 'routed'}`);
        expected.push(`${method} ${template}: ${operationId ? 'routed' : 'no route'}`);
        if (operationId && !isNoRoute(answer)) expectAnswerValid(operationId, answer);
        else expectValid('no route', DOC.components.schemas['NotFound']!, answer.body, answer.text);
      }
    }
    expect(outcomes).toEqual(expected);
  });

  it('paths the document does not have: "no route" for every method', async () => {
    for (const path of ['/', '/webhooks', '/connections/x/unknown', '/connections/x/items/a/b', '/connections/x/pause/y', '/connections/x/changes/y', '/v1/connections']) {
      for (const method of METHODS) {
        const answer = await api.call({ method, path });
        expect({ method, path, noRoute: isNoRoute(answer) }).toEqual({ method, path, noRoute: true });
        expectValid('no route', DOC.components.schemas['NotFound']!, answer.body, answer.text);
      }
    }
  });

  it("the stack's route keys are the document's operations (`$default` takes every other request to the same function)", async () => {
    const { CLIENT_API_ROUTES } = await import('../../../infra/client-api/client-api.js');
    expect([...CLIENT_API_ROUTES].sort()).toEqual([...byPath.keys()].sort());
  });
});

describe('request bodies', () => {
  it('each request schema took the bodies the handler took, and refuses a field more, as the handler does', async () => {
    const withRequest = [...OPERATIONS.values()].filter((op) => op.requestSchema);
    expect([...bodiesHeld].sort()).toEqual(withRequest.map((op) => op.id).sort());
    const bodies: Record<string, Record<string, unknown>> = { putConnection: credentials('acme'), sendItems: { ids: ['fil-1'] } };
    expect(Object.keys(bodies).sort()).toEqual(withRequest.map((op) => op.id).sort());
    for (const op of withRequest) {
      const body = { ...bodies[op.id]!, extra: true };
      expect(validator(`${op.id} request`, op.requestSchema!)(body), `${op.id}: the schema takes a field more`).toBe(false);
      await call(op.id, 400, { path: { connection: 'acme' }, body });
    }
  });
});

describe("the document's numbers are the code's", () => {
  const parameter = (name: string): Parameter => DOC.components.parameters[name]!;
  const property = (schema: string, name: string): Schema => (DOC.components.schemas[schema]!['properties'] as Record<string, Schema>)[name]!;
  const takes = (schema: Schema, value: unknown): boolean => ajv.validate(linked(schema) as Schema, value) as boolean;

  it('limit: 1 to PAGE_LIMIT.max, PAGE_LIMIT.default by default, on every route that pages (the list of connections too)', () => {
    expect(parameter('Limit').schema).toMatchObject({ type: 'integer', minimum: 1, maximum: PAGE_LIMIT.max, default: PAGE_LIMIT.default });
    expect([MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE]).toEqual([PAGE_LIMIT.max, PAGE_LIMIT.default]);
    const paged = [...OPERATIONS.values()].filter((op) => op.parameters.some((p) => p.name === 'limit')).map((op) => op.id);
    expect(paged.sort()).toEqual(['listChanges', 'listConnections', 'listItems']);
  });

  it('the statuses, lanes, change kinds, erase states and error codes', () => {
    expect(parameter('Status').schema['enum']).toEqual(CONNECTION_STATUSES);
    expect(DOC.components.schemas['ConnectionStatus']!['enum']).toEqual(CONNECTION_STATUSES);
    expect(property('SendItemsBody', 'lane')['enum']).toEqual(LANES);
    expect(DOC.components.schemas['ChangeKind']!['enum']).toEqual(CHANGE_KINDS);
    const eraseStates = { waiting: true, running: true, done: true } satisfies Record<EraseState, true>;
    expect(property('EraseProgress', 'state')['enum']).toEqual(Object.keys(eraseStates));
    const codes = { 'bad-request': true, 'not-found': true, conflict: true, 'cursor-expired': true, 'too-large': true } satisfies Record<ErrorCode, true>;
    const responseOf: Record<number, string> = { 400: 'BadRequest', 404: 'NotFound', 409: 'Conflict', 410: 'CursorExpired', 413: 'TooLarge' };
    for (const code of Object.keys(codes) as ErrorCode[]) {
      const status = errorResponse(code, '').statusCode;
      const schema = deref(DOC.components.responses[responseOf[status]!]!.content!['application/json']!.schema as Schema | Reference);
      expect(((schema['properties'] as Record<string, Schema>)['error']!['properties'] as Record<string, Schema>)['code'], `${status}`).toEqual({ type: 'string', enum: [code] });
    }
  });

  it('ids a send takes, the bytes a body takes, the minutes an item URL is valid', () => {
    expect(property('SendItemsBody', 'ids')).toMatchObject({ minItems: 1, maxItems: MAX_IDS_PER_REQUEST });
    expect(property('Sent', 'sent')).toMatchObject({ maximum: MAX_IDS_PER_REQUEST });
    const bytes = `${MAX_BODY_BYTES.toLocaleString('en-US')} bytes`;
    expect(DOC.info.description).toContain(bytes);
    expect(DOC.components.responses['TooLarge']!.description).toContain(bytes);
    expect(operation('getItem').responses['200']).toBeDefined();
    const minutes = `valid ${ITEM_URL_SECONDS / 60} minutes`;
    expect((DOC.paths['/connections/{connection}/items/{id}']!['get'] as OperationObject).description).toContain(minutes);
    expect(property('Item', 'itemUrl')['description']).toContain(minutes);
  });

  it("connection ids, client ids, refresh tokens and item ids: the schemas' bounds and patterns refuse what the code refuses", () => {
    const cases: Array<[string, Schema, number, (value: string) => string | undefined, string[]]> = [
      ['connection', parameter('Connection').schema, MAX_CONNECTION_ID_LENGTH, connectionIdProblem, ['acme', 'a.b_c-D9', '.a', 'a..', '', '.', '...', 'a b', 'a/b', 'café']],
      ['clientId', property('PutConnectionBody', 'clientId'), MAX_CLIENT_ID_LENGTH, clientIdProblem, ['client-1', 'Ünïcödé id', '', '   ', 'a\u0007b', 'a\u0085b', 'a\tb']],
      ['refreshToken', property('PutConnectionBody', 'refreshToken'), MAX_REFRESH_TOKEN_LENGTH, refreshTokenProblem, ['rt-1/+=', 'ÿ', '', 'a b', 'a\nb', 'a\u00a0b', 'a\u0100b', 'a✓']],
      ['item id', parameter('ItemId').schema, MAX_ID_BYTES, sendableIdProblem, ['fil-1', 'dir/fil 3', 'Résumé ✓', '', 'a\u0001b', 'a\u007fb', 'a\u0085b', 'a\ufffeb', 'a\uffffb']],
      ['sent id', property('SendItemsBody', 'ids')['items'] as Schema, MAX_ID_BYTES, sendableIdProblem, ['fil-1', '', 'a\u0001b']],
    ];
    for (const [name, schema, most, problem, samples] of cases) {
      expect(schema['maxLength'], name).toBe(most);
      for (const value of [...samples, 'x'.repeat(most), 'x'.repeat(most + 1)]) {
        expect({ name, value, takes: takes(schema, value) }).toEqual({ name, value, takes: problem(value) === undefined });
      }
    }
  });
});

it('reaches every status (but API Gateway\'s own) and every parameter the document gives each operation', () => {
  const statuses: string[] = [];
  const parameters: string[] = [];
  for (const op of OPERATIONS.values()) {
    for (const [status, response] of Object.entries(op.responses)) {
      if (isGateway(response)) expect(['403', '429'], `${op.id} ${status}`).toContain(status);
      else statuses.push(`${op.id} ${status}`);
    }
    for (const status of ['403', '429']) {
      const response = op.responses[status];
      expect(response !== undefined && isGateway(response), `${op.id} ${status}`).toBe(true);
    }
    for (const parameter of op.parameters) parameters.push(`${op.id} ${parameter.name}`);
  }
  expect(statuses.filter((pair) => !reached.has(pair))).toEqual([]);
  expect(parameters.filter((pair) => !exercised.has(pair))).toEqual([]);
});
