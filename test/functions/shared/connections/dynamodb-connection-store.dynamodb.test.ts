/**
 * The connections table's adapter (functions/shared/adapters/dynamodb-connection-store.ts) against
 * DynamoDB Local on 127.0.0.1: its conditional writes (two lease takers at once, a lease taken whose
 * answer was lost, a refresh over replaced credentials, a rotated refresh token, a pause while a
 * refresh runs, a refresh that outlived its lease, removal, the purge's conditional delete). The exact commands: dynamodb-connection-store.test.ts.
 */
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DynamoMeter, instrumentDynamo } from '../../../../dev/fakes/dynamo-meter.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../../dev/fakes/local-dynamo.js';
import { DynamoDbConnectionStore } from '../../../../functions/shared/adapters/dynamodb-connection-store.js';
import { testSealing } from '../../../support/sealer.js';

const sealing = testSealing();

const AT = '2026-11-24T10:00:00.000Z';
const NOW = Date.parse(AT);
const RT = 'rt-store-secret-0001';
const ROTATED = 'rt-store-secret-0002';
const AT_TOKEN = 'at-store-secret-0001';

describe('DynamoDbConnectionStore against DynamoDB Local', () => {
  let dynamo: LocalDynamoDb;
  let client: DynamoDBClient;
  let store: DynamoDbConnectionStore;
  let table = 0;

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    client = dynamo.client();
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  beforeEach(async () => {
    const name = `connections-${++table}`;
    await dynamo.createConnectionsTable(name);
    store = new DynamoDbConnectionStore(client, name, { sealer: sealing.sealer });
  });

  const lease = (owner: string, now = NOW) => ({ owner, until: now + 300_000, now });

  it('creates a connection as active, reads it back, and replaces its credentials', async () => {
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('created');
    expect(await store.get('acme', { consistent: true })).toEqual({
      connection: 'acme',
      clientId: 'client-1',
      status: 'active',
      refreshToken: RT,
      credentialsVersion: 1,
      health: { consecutiveFailures: 0 },
      createdAt: AT,
      updatedAt: AT,
      credentialsAt: AT,
    });
    const taken = await store.takeRefreshLease('acme', lease('one'));
    expect(taken.kind).toBe('taken');
    await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT });
    const later = '2026-11-24T11:00:00.000Z';
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-2', refreshToken: ROTATED, at: later })).toBe('replaced');
    const record = await store.get('acme', { consistent: true });
    expect(record).toMatchObject({ clientId: 'client-2', refreshToken: ROTATED, credentialsVersion: 2, createdAt: AT, updatedAt: later, status: 'active' });
    expect(record?.accessToken).toBeUndefined();
    expect(record?.health).toEqual({ consecutiveFailures: 0 });
  });

  it('two concurrent lease takers: exactly one takes it; the other sees it held; an expired lease is taken again', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    const results = await Promise.all([store.takeRefreshLease('acme', lease('one')), store.takeRefreshLease('acme', lease('two'))]);
    expect(results.filter((r) => r.kind === 'taken')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'held')).toEqual([{ kind: 'held', until: NOW + 300_000 }]);
    expect((await store.takeRefreshLease('acme', lease('three', NOW + 300_001))).kind).toBe('taken');
  });

  it('a lease whose answer was lost (the SDK sends the write again and meets the lease it took) is taken, not held', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    const meter = new DynamoMeter();
    // The first write's answer is lost; every later one arrives.
    const draws = [0];
    const losing = instrumentDynamo(dynamo.client(), meter, { random: () => draws.shift() ?? 1, throttleRate: 0, unprocessedRate: 0, lostAckRate: 0.5 });
    try {
      const taken = await new DynamoDbConnectionStore(losing, store.tableName, { sealer: sealing.sealer }).takeRefreshLease('acme', lease('one'));
      expect(meter.injected.lostAcks).toBe(1);
      expect(meter.requests['UpdateItem']).toBe(2);
      expect(taken).toMatchObject({ kind: 'taken', record: { connection: 'acme', refreshToken: RT, refreshLease: { owner: 'one', until: NOW + 300_000 } } });
      // Anyone else still finds it held.
      expect(await store.takeRefreshLease('acme', lease('two'))).toEqual({ kind: 'held', until: NOW + 300_000 });
    } finally {
      losing.destroy();
    }
  });

  it('completeRefresh after the credentials were replaced: conflict, and the new credentials stay', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    const taken = await store.takeRefreshLease('acme', lease('one'));
    if (taken.kind !== 'taken') throw new Error('lease not taken');
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: 'rt-operator-new-0003', at: AT });
    const written = await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: taken.record.credentialsVersion, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED });
    expect(written).toEqual({ kind: 'conflict' });
    const failed = await store.failRefresh({ connection: 'acme', owner: 'one', credentialsVersion: taken.record.credentialsVersion, at: AT, reason: 'refused', refused: true });
    expect(failed).toBe('conflict');
    expect(await store.get('acme', { consistent: true })).toMatchObject({ refreshToken: 'rt-operator-new-0003', status: 'active', credentialsVersion: 2 });
  });

  it('a rotated refresh token is stored with the access token; the version is raised and the lease released', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.takeRefreshLease('acme', lease('one'));
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED })).toEqual({ kind: 'written', status: 'active', accessTokenStamp: expect.any(String) });
    const record = await store.get('acme', { consistent: true });
    expect(record).toMatchObject({ refreshToken: ROTATED, accessToken: AT_TOKEN, refreshedAt: AT, credentialsVersion: 2, health: { lastSuccessAt: AT, consecutiveFailures: 0 } });
    expect(record?.refreshLease).toBeUndefined();
  });

  it('a refusal makes the connection failing; the hourly retry may take the lease; success makes it active again', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.takeRefreshLease('acme', lease('one'));
    await store.failRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, at: AT, reason: 'getToken: HTTP 401', refused: true });
    expect(await store.get('acme', { consistent: true })).toMatchObject({ status: 'failing', health: { lastFailureAt: AT, lastFailureReason: 'getToken: HTTP 401', consecutiveFailures: 1 } });
    expect(await store.takeRefreshLease('acme', lease('two'))).toEqual({ kind: 'not-refreshable', status: 'failing' });
    expect((await store.takeRefreshLease('acme', { ...lease('two'), includeFailing: true })).kind).toBe('taken');
    await store.completeRefresh({ connection: 'acme', owner: 'two', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT });
    expect(await store.get('acme', { consistent: true })).toMatchObject({ status: 'active', health: { consecutiveFailures: 0, lastFailureReason: 'getToken: HTTP 401' } });
  });

  it('a connection paused while its refresh ran stays paused and still gets its tokens', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.takeRefreshLease('acme', lease('one'));
    expect(await store.setStatus('acme', 'paused', ['active', 'failing'], AT)).toBe('written');
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED })).toEqual({ kind: 'written', status: 'paused', accessTokenStamp: expect.any(String) });
    expect(await store.get('acme', { consistent: true })).toMatchObject({ status: 'paused', refreshToken: ROTATED, accessToken: AT_TOKEN });
  });

  it('a refresh that outlived its lease writes its tokens and leaves the next holder\'s lease; the holder releases its own', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    expect((await store.takeRefreshLease('acme', lease('one'))).kind).toBe('taken');
    const later = NOW + 300_001;
    expect((await store.takeRefreshLease('acme', lease('two', later))).kind).toBe('taken');
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED })).toEqual({
      kind: 'written',
      status: 'active',
      accessTokenStamp: expect.any(String),
    });
    expect(await store.get('acme', { consistent: true })).toMatchObject({ accessToken: AT_TOKEN, refreshToken: ROTATED, credentialsVersion: 2, refreshLease: { owner: 'two', until: later + 300_000 } });
    expect(await store.failRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 2, at: AT, reason: 'getToken: HTTP 503', refused: false })).toBe('written');
    expect((await store.get('acme', { consistent: true }))?.refreshLease?.owner).toBe('two');
    await store.releaseRefreshLease('acme', 'one');
    expect((await store.get('acme', { consistent: true }))?.refreshLease?.owner).toBe('two');
    await store.releaseRefreshLease('acme', 'two');
    expect((await store.get('acme', { consistent: true }))?.refreshLease).toBeUndefined();
    // No lease at all: the result is written too.
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 2, accessToken: 'at-store-secret-0002', refreshedAt: AT })).toEqual({ kind: 'written', status: 'active', accessTokenStamp: expect.any(String) });
    expect((await store.get('acme', { consistent: true }))?.accessToken).toBe('at-store-secret-0002');
  });

  it('a paused connection: the result says so', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.takeRefreshLease('acme', lease('one'));
    await store.setStatus('acme', 'paused', ['active'], AT);
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT })).toEqual({ kind: 'written', status: 'paused', accessTokenStamp: expect.any(String) });
    expect((await store.get('acme', { consistent: true }))?.refreshLease).toBeUndefined();
  });

  it('delete: only a removed connection; one added again meanwhile is kept', async () => {
    expect(await store.delete('nobody')).toBe('missing');
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    expect(await store.delete('acme')).toBe('conflict');
    expect(await store.get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: RT });
    await store.setStatus('acme', 'removed', ['active'], AT);
    expect(await store.delete('acme')).toBe('deleted');
    expect(await store.get('acme', { consistent: true })).toBeUndefined();
  });

  it('setStatus: missing, conflict, and removal deletes the tokens (a refresh running then conflicts)', async () => {
    expect(await store.setStatus('nobody', 'paused', ['active'], AT)).toBe('missing');
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    expect(await store.setStatus('acme', 'active', ['paused'], AT)).toBe('conflict');
    await store.takeRefreshLease('acme', lease('one'));
    expect(await store.setStatus('acme', 'removed', ['active', 'paused', 'failing'], AT)).toBe('written');
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT })).toEqual({ kind: 'conflict' });
    const record = await store.get('acme', { consistent: true });
    expect(record).toMatchObject({ status: 'removed', refreshToken: '' });
    expect(JSON.stringify(record)).not.toContain(RT);
    expect(JSON.stringify(record)).not.toContain(AT_TOKEN);
  });

  it('markUsed writes only over an older lastUsedAt and never creates a row', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.markUsed('acme', '2026-11-24T10:30:00.000Z');
    await store.markUsed('acme', '2026-11-24T10:10:00.000Z');
    expect((await store.get('acme', { consistent: true }))?.lastUsedAt).toBe('2026-11-24T10:30:00.000Z');
    await store.markUsed('nobody', AT);
    expect(await store.get('nobody', { consistent: true })).toBeUndefined();
  });

  it('a row the change-events function made is no connection until added; add keeps its ids known', async () => {
    await client.send(new PutItemCommand({ TableName: store.tableName, Item: { connection: { S: 'acme' }, idsKnown: { N: '7' }, lastWriteAt: { S: AT } } }));
    expect(await store.get('acme', { consistent: true })).toBeUndefined();
    const listed: string[] = [];
    for await (const record of store.list()) listed.push(record.connection);
    expect(listed).toEqual([]);
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('created');
    expect(await store.get('acme', { consistent: true })).toMatchObject({ status: 'active', idsKnown: 7, lastWriteAt: AT });
    await store.setStatus('acme', 'removed', ['active'], AT);
    await store.delete('acme');
    expect(await store.get('acme', { consistent: true })).toBeUndefined();
  });
});
