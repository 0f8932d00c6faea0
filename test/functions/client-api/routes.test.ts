/**
 * The client API's routes as deployed (functions/client-api: createApiHandler over loadApiConfig),
 * against a real connections table and control table in DynamoDB Local, tokens sealed under the local KMS
 * model, SQS mocked: every route's success, with its exact status and body (the contract's view),
 * the exact SQS commands it sends, and what a request repeated changes (nothing).
 */
import 'aws-sdk-client-mock-vitest/extend';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ApiHarness,
  ERASE_QUEUE_URL,
  ERASE_SETTLE_SECONDS,
  iso,
  RECONCILE_QUEUE_URL,
  requestLine,
  SYNC_QUEUE_URL,
  T0,
  token,
  TOKEN_MARK,
} from './harness.js';

const api = new ApiHarness();
const RT = token('acme-0001');
const REFUSED = 'getToken: HTTP 401 (invalid_grant: token revoked)';
const ACCESS_TOKEN = 'at-api-secret-0001';
const BACKGROUND = { lane: { DataType: 'String', StringValue: 'background' } };

beforeAll(() => api.start());
afterAll(async () => {
  // No answer and no line written, of any request of this file, ever held a refresh or access token.
  for (const text of [...api.answered, ...api.written]) {
    expect(text).not.toContain(TOKEN_MARK);
    expect(text).not.toContain(ACCESS_TOKEN);
  }
  expect(api.answered.length).toBeGreaterThan(50);
  await api.close();
});
beforeEach(() => api.reset());

/** The view of a connection created at `at` and never touched since. */
function newView(connection: string, clientId: string, at = T0) {
  return { connection, clientId, status: 'active', refresh: { consecutiveFailures: 0 }, fresh: false, createdAt: iso(at), updatedAt: iso(at) };
}

const kmsCalls = (operation: string): number => api.sealing.calls[operation] ?? 0;

async function created(connection: string, clientId = 'client-1', refreshToken = token(`${connection}-0001`)): Promise<void> {
  const answer = await api.put(connection, { clientId, refreshToken });
  expect(answer.status).toBe(200);
}

describe('PUT /connections/{connection}', () => {
  it('creates the connection, active, its refresh token sealed in its row: 200 its view', async () => {
    const seals = kmsCalls('GenerateDataKey');
    const answer = await api.put('acme', { clientId: 'client-1', refreshToken: RT });
    expect(answer.status).toBe(200);
    expect(answer.headers).toEqual({ 'content-type': 'application/json' });
    expect(answer.body).toEqual(newView('acme', 'client-1'));
    expect(kmsCalls('GenerateDataKey') - seals).toBe(1);

    const rows = await api.scan();
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row['refreshToken']?.S).toMatch(/^cs-sealed-v1 /);
    expect(JSON.stringify(row)).not.toContain(RT);
    expect(row).toEqual({
      connection: { S: 'acme' },
      clientId: { S: 'client-1' },
      status: { S: 'active' },
      refreshToken: { S: row['refreshToken']!.S },
      credentialsVersion: { N: '1' },
      consecutiveFailures: { N: '0' },
      createdAt: { S: iso(T0) },
      updatedAt: { S: iso(T0) },
      credentialsAt: { S: iso(T0) },
    });
    // The sealed token opens to the one put.
    expect((await api.store().get('acme', { consistent: true }))?.refreshToken).toBe(RT);
    expect(api.sqsMock.calls()).toHaveLength(0);
    expect(requestLine(answer)).toMatchObject({ level: 'INFO', service: 'client-api', method: 'PUT', route: 'PUT /connections/{connection}', status: 200, connection: 'acme', durationMs: 0 });
  });

  it('replaces the credentials with another refresh token: a new version, the row created before kept', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    const seals = kmsCalls('GenerateDataKey');
    const answer = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0002') });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...newView('acme', 'client-1'), updatedAt: iso(T0 + 60_000) });
    expect(kmsCalls('GenerateDataKey') - seals).toBe(1);
    expect(await api.store().get('acme', { consistent: true })).toMatchObject({ refreshToken: token('acme-0002'), credentialsVersion: 2, createdAt: iso(T0), credentialsAt: iso(T0 + 60_000) });
  });

  it('replaces the credentials with another client id and the same token', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    const answer = await api.put('acme', { clientId: 'client-2', refreshToken: RT });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...newView('acme', 'client-2'), updatedAt: iso(T0 + 60_000) });
    expect(await api.store().get('acme', { consistent: true })).toMatchObject({ clientId: 'client-2', refreshToken: RT, credentialsVersion: 2 });
  });

  it('a failing connection put again: status back to active, its refresh health reset', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    await api.makeFailing('acme', REFUSED);
    expect((await api.get('/connections/acme')).body).toMatchObject({ status: 'failing', refresh: { lastFailureAt: iso(T0 + 60_000), lastFailureReason: REFUSED, consecutiveFailures: 1 } });
    api.clock.advance(60_000);
    const answer = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0002') });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...newView('acme', 'client-1'), updatedAt: iso(T0 + 120_000) });
  });

  it('the same credentials put again on a paused connection make it active', async () => {
    await created('acme', 'client-1', RT);
    await api.post('/connections/acme/pause');
    api.clock.advance(60_000);
    const answer = await api.put('acme', { clientId: 'client-1', refreshToken: RT });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...newView('acme', 'client-1'), updatedAt: iso(T0 + 60_000) });
  });

  it('the same PUT twice: 200 the same view, the row unchanged (version, updatedAt), no second seal', async () => {
    const first = await api.put('acme', { clientId: 'client-1', refreshToken: RT });
    const before = await api.scan();
    const seals = kmsCalls('GenerateDataKey');
    const opens = kmsCalls('Decrypt');
    api.clock.advance(60_000);
    const again = await api.put('acme', { clientId: 'client-1', refreshToken: RT });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await api.scan()).toEqual(before);
    expect(before[0]).toMatchObject({ credentialsVersion: { N: '1' }, updatedAt: { S: iso(T0) } });
    expect(kmsCalls('GenerateDataKey') - seals).toBe(0);
    // The token this container sealed is compared from its cache: no Decrypt either.
    expect(kmsCalls('Decrypt') - opens).toBe(0);

    // A new container opens the stored token once to compare it, and seals nothing.
    api.handler = api.build();
    const cold = await api.put('acme', { clientId: 'client-1', refreshToken: RT });
    expect(cold.status).toBe(200);
    expect(cold.body).toEqual(first.body);
    expect(await api.scan()).toEqual(before);
    expect(kmsCalls('GenerateDataKey') - seals).toBe(0);
    expect(kmsCalls('Decrypt') - opens).toBe(1);
  });

  it('accepts Content-Type with parameters and in any case', async () => {
    expect((await api.put('acme', { clientId: 'client-1', refreshToken: RT }, { 'content-type': 'Application/JSON; charset=utf-8' })).status).toBe(200);
    const other = await api.call({ method: 'PUT', path: '/connections/beta', headers: { 'Content-Type': 'application/json' }, body: { clientId: 'client-1', refreshToken: token('beta') } });
    expect(other.status).toBe(200);
    expect(other.body).toEqual(newView('beta', 'client-1'));
  });
});

describe('GET /connections/{connection}', () => {
  it('answers the view: refresh health, ids known, last write, last pass and fresh, never a token', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    await api.makeFailing('acme', REFUSED);
    await api.db.send(
      new UpdateItemCommand({
        TableName: api.connectionsTable,
        Key: { connection: { S: 'acme' } },
        UpdateExpression: 'SET idsKnown = :n, lastWriteAt = :w',
        ExpressionAttributeValues: { ':n': { N: '1834' }, ':w': { S: iso(T0 + 30_000) } },
      }),
    );
    // Pass 1 started after acme was added and ended; beta was added after it began.
    expect(await api.cursors().startPass({ pass: 1, startedAt: T0 + 3_600_000, segments: [{ done: false, version: 0, ids: 0 }] }, undefined)).toBe('written');
    api.clock.at = T0 + 5_400_000;
    await created('beta', 'client-1');
    expect(await api.cursors().endPass(1, T0 + 7_200_000)).toBe('written');
    api.clock.at = T0 + 10_800_000;

    const answer = await api.get('/connections/acme');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      connection: 'acme',
      clientId: 'client-1',
      status: 'failing',
      refresh: { lastFailureAt: iso(T0 + 60_000), lastFailureReason: REFUSED, consecutiveFailures: 1 },
      idsKnown: 1834,
      lastWriteAt: iso(T0 + 30_000),
      lastPassAt: iso(T0 + 7_200_000),
      fresh: true,
      createdAt: iso(T0),
      updatedAt: iso(T0 + 60_000),
    });
    expect(requestLine(answer)).toMatchObject({ method: 'GET', route: 'GET /connections/{connection}', status: 200, connection: 'acme' });
    const beta = await api.get('/connections/beta');
    expect(beta.body).toEqual(newView('beta', 'client-1', T0 + 5_400_000));

    // freshnessHours after the pass ended it is no longer fresh.
    api.clock.at = T0 + 7_200_000 + 24 * 3_600_000 + 1;
    expect((await api.get('/connections/acme')).body).toMatchObject({ lastPassAt: iso(T0 + 7_200_000), fresh: false });
    expect(api.sqsMock.calls()).toHaveLength(0);
  });

  it('an unknown connection: 404 not-found', async () => {
    const answer = await api.get('/connections/nobody');
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ error: { code: 'not-found', message: 'connection "nobody" is not known' } });
  });
});

describe('GET /connections', () => {
  const NAMES = ['c1', 'c2', 'c3', 'c4', 'c5'];

  beforeEach(async () => {
    for (const name of NAMES) await created(name, 'client-1');
    api.clock.advance(60_000);
    expect((await api.post('/connections/c2/pause')).status).toBe(200);
    expect((await api.post('/connections/c4/pause')).status).toBe(200);
  });

  /** Every page from the first, following `cursor` until it is null. */
  async function pages(query: string): Promise<Array<{ connections: Array<Record<string, unknown>>; cursor: string | null }>> {
    const all = [];
    let cursor: string | null = null;
    do {
      const answer = await api.get('/connections', `${query}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
      expect(answer.status).toBe(200);
      expect(Object.keys(answer.body).sort()).toEqual(['connections', 'cursor']);
      all.push(answer.body);
      cursor = answer.body.cursor;
      expect(all.length).toBeLessThanOrEqual(NAMES.length + 1);
    } while (cursor !== null);
    return all;
  }

  it('lists every connection with its view, 100 a page by default: one page, cursor null', async () => {
    const answer = await api.get('/connections');
    expect(answer.status).toBe(200);
    expect(answer.body.cursor).toBeNull();
    const views = [...answer.body.connections].sort((a, b) => (a.connection < b.connection ? -1 : 1));
    expect(views).toEqual(
      NAMES.map((name) => (name === 'c2' || name === 'c4' ? { ...newView(name, 'client-1'), status: 'paused', updatedAt: iso(T0 + 60_000) } : newView(name, 'client-1'))),
    );
    expect(requestLine(answer)).toMatchObject({ method: 'GET', route: 'GET /connections', status: 200 });
    expect(requestLine(answer)).not.toHaveProperty('connection');
  });

  it('pages of 2: every connection exactly once across the pages, cursor null on the last', async () => {
    const all = await pages('limit=2');
    expect(all.map((page) => page.connections.length)).toEqual([2, 2, 1]);
    for (const page of all.slice(0, -1)) expect(typeof page.cursor).toBe('string');
    const names = all.flatMap((page) => page.connections.map((view) => view['connection']));
    expect([...names].sort()).toEqual(NAMES);
  });

  it('pages of 1 with a status: the paused ones exactly once each', async () => {
    const all = await pages('status=paused&limit=1');
    const views = all.flatMap((page) => page.connections);
    expect(views.map((view) => view['connection']).sort()).toEqual(['c2', 'c4']);
    for (const view of views) expect(view['status']).toBe('paused');
    expect(all.at(-1)?.cursor).toBeNull();
  });

  it('filters by status: active, and none removed', async () => {
    const active = await api.get('/connections', 'status=active');
    expect(active.status).toBe(200);
    expect(active.body.connections.map((view: { connection: string }) => view.connection).sort()).toEqual(['c1', 'c3', 'c5']);
    expect(active.body.cursor).toBeNull();
    expect((await api.get('/connections', 'status=removed')).body).toEqual({ connections: [], cursor: null });
  });

  it('limit 1000 is taken; a trailing slash is the same route', async () => {
    const answer = await api.get('/connections/', 'limit=1000');
    expect(answer.status).toBe(200);
    expect(answer.body.connections).toHaveLength(5);
    expect(answer.body.cursor).toBeNull();
  });
});

describe('POST /connections/{connection}/pause and /resume', () => {
  it('pauses, and pausing again changes nothing; resumes, and resuming again changes nothing', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    const paused = await api.post('/connections/acme/pause');
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({ ...newView('acme', 'client-1'), status: 'paused', updatedAt: iso(T0 + 60_000) });
    expect(requestLine(paused)).toMatchObject({ route: 'POST /connections/{connection}/pause', status: 200, connection: 'acme' });
    const whilePaused = await api.scan();

    api.clock.advance(60_000);
    const again = await api.post('/connections/acme/pause');
    expect(again.status).toBe(200);
    expect(again.body).toEqual(paused.body);
    expect(await api.scan()).toEqual(whilePaused);

    api.clock.advance(60_000);
    const resumed = await api.post('/connections/acme/resume');
    expect(resumed.status).toBe(200);
    expect(resumed.body).toEqual({ ...newView('acme', 'client-1'), updatedAt: iso(T0 + 180_000) });
    const whileActive = await api.scan();

    api.clock.advance(60_000);
    const resumedAgain = await api.post('/connections/acme/resume');
    expect(resumedAgain.status).toBe(200);
    expect(resumedAgain.body).toEqual(resumed.body);
    expect(await api.scan()).toEqual(whileActive);
    expect(api.sqsMock.calls()).toHaveLength(0);
  });

  it('resuming a failing connection: 409 conflict with the provider\'s reason, nothing written', async () => {
    await created('acme', 'client-1', RT);
    await api.makeFailing('acme', REFUSED);
    const before = await api.scan();
    api.clock.advance(60_000);
    const answer = await api.post('/connections/acme/resume');
    expect(answer.status).toBe(409);
    expect(answer.body).toEqual({
      error: {
        code: 'conflict',
        message: `connection "acme" is failing, not paused: the provider refused its refresh token (${REFUSED}); resume does not apply: put it again with new credentials`,
      },
    });
    expect(await api.scan()).toEqual(before);
  });

  it('a removed connection cannot be paused or resumed: 409; an unknown one: 404', async () => {
    await created('acme', 'client-1', RT);
    await api.delete('/connections/acme');
    const before = await api.scan();
    expect(await api.post('/connections/acme/pause')).toMatchObject({
      status: 409,
      body: { error: { code: 'conflict', message: 'connection "acme" was removed: it cannot be paused; put it again with a refresh token to use it' } },
    });
    expect(await api.post('/connections/acme/resume')).toMatchObject({
      status: 409,
      body: { error: { code: 'conflict', message: 'connection "acme" was removed: it cannot be resumed; put it again with a refresh token to use it' } },
    });
    expect(await api.scan()).toEqual(before);
    for (const action of ['pause', 'resume']) {
      const answer = await api.post(`/connections/nobody/${action}`);
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ error: { code: 'not-found', message: 'connection "nobody" is not known' } });
    }
    expect(await api.scan()).toEqual(before);
  });
});

describe('DELETE /connections/{connection}', () => {
  it('200 the view, status removed, its tokens gone from its row; again: nothing changes', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    const answer = await api.delete('/connections/acme');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...newView('acme', 'client-1'), status: 'removed', updatedAt: iso(T0 + 60_000) });
    expect(requestLine(answer)).toMatchObject({ method: 'DELETE', route: 'DELETE /connections/{connection}', status: 200, connection: 'acme' });
    const row = (await api.row('acme'))!;
    expect(row['refreshToken']).toBeUndefined();
    expect(row['accessToken']).toBeUndefined();
    expect(row).toMatchObject({ status: { S: 'removed' }, credentialsVersion: { N: '2' } });
    const removed = await api.scan();

    api.clock.advance(60_000);
    const again = await api.delete('/connections/acme');
    expect(again.status).toBe(200);
    expect(again.body).toEqual(answer.body);
    expect(await api.scan()).toEqual(removed);
    expect(api.sqsMock.calls()).toHaveLength(0);
  });

  it('removes a connection with an access token: both tokens gone', async () => {
    await created('acme', 'client-1', RT);
    const store = api.store();
    await store.takeRefreshLease('acme', { owner: 'refresher', until: T0 + 300_000, now: T0 });
    await store.completeRefresh({ connection: 'acme', owner: 'refresher', credentialsVersion: 1, accessToken: ACCESS_TOKEN, refreshedAt: iso(T0) });
    expect((await api.row('acme'))?.['accessToken']?.S).toMatch(/^cs-sealed-v1 /);
    expect((await api.delete('/connections/acme')).status).toBe(200);
    const row = (await api.row('acme'))!;
    expect(Object.keys(row)).not.toContain('refreshToken');
    expect(Object.keys(row)).not.toContain('accessToken');
    expect(Object.keys(row)).not.toContain('refreshedAt');
  });

  it('an unknown connection: 404, nothing written', async () => {
    const answer = await api.delete('/connections/nobody');
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ error: { code: 'not-found', message: 'connection "nobody" is not known' } });
    expect(await api.scan()).toEqual([]);
  });
});

describe('DELETE /connections/{connection}?erase=true', () => {
  /** The view of acme removed and its erase asked for at `startedAt`. */
  const eraseView = (startedAt: number) => ({
    ...newView('acme', 'client-1'),
    status: 'removed',
    updatedAt: iso(startedAt),
    erase: { state: 'waiting', startedAt: iso(startedAt), rowsDeleted: 0, objectsDeleted: 0 },
  });

  it('a PUT while its erase runs: 409 conflict, nothing written; while it waits, the PUT takes the connection back', async () => {
    await created('acme', 'client-1', RT);
    expect((await api.delete('/connections/acme', 'erase=true')).status).toBe(202);
    // The eraser has started: the erase is `running` (the eraser's own write).
    const removed = (await api.store().view('acme', { consistent: true }))!;
    expect(await api.store().updateErase('acme', { ...removed.erase!, state: 'running' })).toBe(true);
    const before = await api.row('acme');
    const refused = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0002') });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: { code: 'conflict', message: 'connection "acme" is being erased: put it again once its erase is over (it then answers 404)' } });
    expect(await api.row('acme')).toEqual(before);
    // Waiting (not started): the PUT clears the erase and the connection is active again.
    expect(await api.store().updateErase('acme', { ...removed.erase!, state: 'waiting' })).toBe(true);
    const back = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0003') });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ connection: 'acme', status: 'active' });
    expect(back.body).not.toHaveProperty('erase');
  });

  it.each(['waiting', 'running'] as const)('from the erase on (%s), every route of the connection answers 404 but its view, a PUT and the erase asked again; nothing written or sent', async (state) => {
    await created('acme', 'client-1', RT);
    expect((await api.delete('/connections/acme', 'erase=true')).status).toBe(202);
    const removed = (await api.store().view('acme', { consistent: true }))!;
    expect(await api.store().updateErase('acme', { ...removed.erase!, state })).toBe(true);
    const before = await api.tablesNow();
    api.sqsMock.resetHistory();
    const gone = { error: { code: 'not-found', message: 'connection "acme" is being erased (GET /connections/acme shows how far)' } };
    for (const [name, answer] of [
      ['GET an item', await api.get('/connections/acme/items/fil-1')],
      ['GET the snapshot', await api.get('/connections/acme/items')],
      ['GET the changes', await api.get('/connections/acme/changes')],
      ['POST ids', await api.post('/connections/acme/items', { ids: ['fil-1'] })],
      ['POST pause', await api.post('/connections/acme/pause')],
      ['POST resume', await api.post('/connections/acme/resume')],
      ['DELETE (a plain removal)', await api.delete('/connections/acme')],
    ] as const) {
      expect({ name, status: answer.status, body: answer.body }).toEqual({ name, status: 404, body: gone });
    }
    expect(await api.tablesNow()).toEqual(before);
    expect(api.sqsMock.calls()).toHaveLength(0);
    const view = await api.get('/connections/acme');
    expect(view).toMatchObject({ status: 200, body: { status: 'removed', erase: { state } } });
    expect(await api.delete('/connections/acme', 'erase=true')).toMatchObject({ status: 202, body: { erase: { state } } });
  });

  it('202: removed, the erase waiting, and one message on the erase queue delayed by the safety wait', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    const at = T0 + 60_000;
    const answer = await api.delete('/connections/acme', 'erase=true');
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual(eraseView(at));
    expect(requestLine(answer)).toMatchObject({ route: 'DELETE /connections/{connection}?erase=true', status: 202, connection: 'acme' });

    expect(api.sqsMock).toReceiveCommandTimes(SendMessageCommand, 1);
    expect(api.sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 0);
    expect(api.sqsMock).toReceiveCommandWith(SendMessageCommand, { QueueUrl: ERASE_QUEUE_URL, DelaySeconds: ERASE_SETTLE_SECONDS });
    expect(api.sentMessages()).toEqual([
      { QueueUrl: ERASE_QUEUE_URL, MessageBody: JSON.stringify({ connection: 'acme', startedAt: iso(at) }), DelaySeconds: ERASE_SETTLE_SECONDS },
    ]);
    const row = (await api.row('acme'))!;
    expect(row['refreshToken']).toBeUndefined();
    expect(row).toMatchObject({
      status: { S: 'removed' },
      credentialsVersion: { N: '2' },
      erase: { M: { state: { S: 'waiting' }, startedAt: { S: iso(at) }, notBefore: { S: iso(at + ERASE_SETTLE_SECONDS * 1000) }, rowsDeleted: { N: '0' }, objectsDeleted: { N: '0' } } },
    });
  });

  it('asked again: 202, the same startedAt, no second removal; the erase is asked to run again for the wait left', async () => {
    await created('acme', 'client-1', RT);
    api.clock.advance(60_000);
    const first = await api.delete('/connections/acme', 'erase=true');
    const after = await api.scan();
    api.clock.advance(100_000);
    const again = await api.delete('/connections/acme', 'erase=true');
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);
    expect(await api.scan()).toEqual(after);
    const body = JSON.stringify({ connection: 'acme', startedAt: iso(T0 + 60_000) });
    expect(api.sentMessages()).toEqual([
      { QueueUrl: ERASE_QUEUE_URL, MessageBody: body, DelaySeconds: ERASE_SETTLE_SECONDS },
      { QueueUrl: ERASE_QUEUE_URL, MessageBody: body, DelaySeconds: ERASE_SETTLE_SECONDS - 100 },
    ]);
  });

  it('a connection removed long ago: its safety wait has passed, the message is not delayed', async () => {
    await created('acme', 'client-1', RT);
    expect((await api.delete('/connections/acme')).status).toBe(200);
    api.clock.advance(3_600_000);
    const answer = await api.delete('/connections/acme', 'erase=true');
    expect(answer.status).toBe(202);
    expect(answer.body.erase).toEqual({ state: 'waiting', startedAt: iso(T0 + 3_600_000), rowsDeleted: 0, objectsDeleted: 0 });
    expect(api.sentMessages()).toEqual([{ QueueUrl: ERASE_QUEUE_URL, MessageBody: JSON.stringify({ connection: 'acme', startedAt: iso(T0 + 3_600_000) }), DelaySeconds: 0 }]);
    expect((await api.row('acme'))?.['erase']?.M?.['notBefore']).toEqual({ S: iso(T0 + ERASE_SETTLE_SECONDS * 1000) });
  });

  it('a PUT while the erase waits keeps the connection: active, the erase gone from its view and row', async () => {
    await created('acme', 'client-1', RT);
    await api.delete('/connections/acme', 'erase=true');
    api.clock.advance(60_000);
    const put = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0002') });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ ...newView('acme', 'client-1'), updatedAt: iso(T0 + 60_000) });
    expect((await api.row('acme'))?.['erase']).toBeUndefined();
  });

  it('an unknown connection: 404, nothing written, nothing sent', async () => {
    const answer = await api.delete('/connections/nobody', 'erase=true');
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ error: { code: 'not-found', message: 'connection "nobody" is not known' } });
    expect(await api.scan()).toEqual([]);
    expect(api.sqsMock.calls()).toHaveLength(0);
  });
});

describe('POST /connections/{connection}/items', () => {
  const entry = (index: number, id: string, connection = 'acme') => ({ Id: String(index), MessageBody: JSON.stringify({ connection, id }), MessageGroupId: connection });

  it('the users lane (by default): the sync queue, bodies {"connection","id"}, grouped by connection, each id once', async () => {
    await created('acme', 'client-1', RT);
    const before = await api.tablesNow();
    const answer = await api.post('/connections/acme/items', { ids: ['fil-1', 'fil-2', 'fil-1', 'dir/fil 3', 'Résumé ✓'] });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ sent: 4 });
    expect(requestLine(answer)).toMatchObject({ method: 'POST', route: 'POST /connections/{connection}/items', status: 200, connection: 'acme' });
    expect(api.sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 1);
    expect(api.sqsMock).toReceiveCommandTimes(SendMessageCommand, 0);
    expect(api.sentBatches()).toEqual([{ QueueUrl: SYNC_QUEUE_URL, Entries: [entry(0, 'fil-1'), entry(1, 'fil-2'), entry(2, 'dir/fil 3'), entry(3, 'Résumé ✓')] }]);
    expect(await api.tablesNow()).toEqual(before);
  });

  it('"lane": "users" said, and 25 ids: batches of at most 10', async () => {
    await created('acme', 'client-1', RT);
    const ids = Array.from({ length: 25 }, (_, i) => `fil-${String(i).padStart(2, '0')}`);
    const answer = await api.post('/connections/acme/items', { ids, lane: 'users' });
    expect(answer).toMatchObject({ status: 200, body: { sent: 25 } });
    const batches = api.sentBatches();
    expect(batches.map((batch) => batch.Entries?.length)).toEqual([10, 10, 5]);
    for (const batch of batches) expect(batch.QueueUrl).toBe(SYNC_QUEUE_URL);
    expect(batches.flatMap((batch) => batch.Entries ?? []).sort((a, b) => Number(a.Id) - Number(b.Id))).toEqual(ids.map((id, i) => entry(i, id)));
  });

  it('the background lane: the reconcile queue, each message with lane = background', async () => {
    await created('acme', 'client-1', RT);
    const answer = await api.post('/connections/acme/items', { ids: ['fil-1', 'fil-2'], lane: 'background' });
    expect(answer).toMatchObject({ status: 200, body: { sent: 2 } });
    expect(api.sqsMock).toReceiveCommandWith(SendMessageBatchCommand, { QueueUrl: RECONCILE_QUEUE_URL });
    expect(api.sentBatches()).toEqual([
      {
        QueueUrl: RECONCILE_QUEUE_URL,
        Entries: [
          { ...entry(0, 'fil-1'), MessageAttributes: BACKGROUND },
          { ...entry(1, 'fil-2'), MessageAttributes: BACKGROUND },
        ],
      },
    ]);
  });

  it('a paused or failing connection\'s ids are accepted (they wait in the queue)', async () => {
    await created('paused-one', 'client-1');
    await created('failing-one', 'client-1');
    await api.post('/connections/paused-one/pause');
    await api.makeFailing('failing-one', REFUSED);
    expect(await api.post('/connections/paused-one/items', { ids: ['fil-1'] })).toMatchObject({ status: 200, body: { sent: 1 } });
    expect(await api.post('/connections/failing-one/items', { ids: ['fil-2'] })).toMatchObject({ status: 200, body: { sent: 1 } });
    expect(api.sentBatches()).toEqual([
      { QueueUrl: SYNC_QUEUE_URL, Entries: [entry(0, 'fil-1', 'paused-one')] },
      { QueueUrl: SYNC_QUEUE_URL, Entries: [entry(0, 'fil-2', 'failing-one')] },
    ]);
  });

  it('a removed connection: 409 conflict, nothing sent; an unknown one: 404, nothing sent', async () => {
    await created('acme', 'client-1', RT);
    await api.delete('/connections/acme');
    const removed = await api.post('/connections/acme/items', { ids: ['fil-1'] });
    expect(removed.status).toBe(409);
    expect(removed.body).toEqual({ error: { code: 'conflict', message: 'connection "acme" was removed: its ids would be dead-lettered; put it again to use it' } });
    const unknown = await api.post('/connections/nobody/items', { ids: ['fil-1'] });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: { code: 'not-found', message: 'connection "nobody" is not known' } });
    expect(api.sqsMock.calls()).toHaveLength(0);
  });

  it('ids of exactly 1,024 UTF-8 bytes and a body of exactly 1 MiB are taken', async () => {
    await created('acme', 'client-1', RT);
    const ids = ['x'.repeat(1024), '😀'.repeat(256)];
    const json = JSON.stringify({ ids });
    const body = json.slice(0, -1) + ' '.repeat(1024 * 1024 - Buffer.byteLength(json)) + '}';
    expect(Buffer.byteLength(body)).toBe(1024 * 1024);
    const answer = await api.post('/connections/acme/items', body);
    expect(answer).toMatchObject({ status: 200, body: { sent: 2 } });
    expect(api.sentBatches()[0]?.Entries?.map((e) => JSON.parse(e.MessageBody!).id)).toEqual(ids);
  });
});
