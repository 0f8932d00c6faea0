/**
 * The connections table's adapter (functions/shared/adapters/dynamodb-connection-store.ts): the exact
 * commands, with the client mocked, and its conditional writes against dynalite on 127.0.0.1 (two
 * lease takers at once, a refresh over replaced credentials, a rotated refresh token, a pause while
 * a refresh runs, removal).
 */
import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startDynalite, type Dynalite } from '../../../../dev/fakes/dynalite.js';
import { DynamoDbConnectionStore, toRecord } from '../../../../functions/shared/adapters/dynamodb-connection-store.js';
import { ConfigError, TransientError } from '../../../../functions/shared/errors.js';

const TABLE = 'content-sync-connections';
const AT = '2026-11-24T10:00:00.000Z';
const NOW = Date.parse(AT);
const RT = 'rt-store-secret-0001';
const ROTATED = 'rt-store-secret-0002';
const AT_TOKEN = 'at-store-secret-0001';

describe('DynamoDbConnectionStore: the exact commands', () => {
  // This instance only: the dynalite tests below use real clients.
  const mocked = new DynamoDBClient({});
  const mock = mockClient(mocked);
  const store = new DynamoDbConnectionStore(mocked, TABLE);
  const key = { connection: { S: 'acme' } };

  beforeEach(() => mock.reset());

  it('get: GetItem by the connection, consistent when asked', async () => {
    mock.on(GetItemCommand).resolves({});
    expect(await store.get('acme')).toBeUndefined();
    await store.get('acme', { consistent: true });
    expect(mock.commandCalls(GetItemCommand).map((c) => c.args[0].input)).toEqual([
      { TableName: TABLE, Key: key, ConsistentRead: false },
      { TableName: TABLE, Key: key, ConsistentRead: true },
    ]);
  });

  it('putCredentials: one UpdateItem that sets active, raises the version and clears tokens, health and lease', async () => {
    mock.on(UpdateItemCommand).resolves({ Attributes: { status: { S: 'failing' } } });
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('replaced');
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression:
        'SET clientId = :clientId, #status = :active, refreshToken = :refreshToken, ' +
        'credentialsVersion = if_not_exists(credentialsVersion, :zero) + :one, consecutiveFailures = :zero, ' +
        'createdAt = if_not_exists(createdAt, :at), updatedAt = :at ' +
        'REMOVE accessToken, refreshedAt, lastSuccessAt, lastFailureAt, lastFailureReason, leaseOwner, leaseUntil',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: {
        ':clientId': { S: 'client-1' },
        ':active': { S: 'active' },
        ':refreshToken': { S: RT },
        ':zero': { N: '0' },
        ':one': { N: '1' },
        ':at': { S: AT },
      },
      ReturnValues: 'UPDATED_OLD',
    });
    mock.on(UpdateItemCommand).resolves({});
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('created');
  });

  it('takeRefreshLease: the status condition and no unexpired lease', async () => {
    mock.on(UpdateItemCommand).resolves({ Attributes: row({ leaseOwner: { S: 'me' }, leaseUntil: { N: String(NOW + 300_000) } }) });
    const lease = await store.takeRefreshLease('acme', { owner: 'me', until: NOW + 300_000, now: NOW, includeFailing: true });
    expect(lease).toMatchObject({ kind: 'taken', record: { connection: 'acme', refreshToken: RT, refreshLease: { owner: 'me', until: NOW + 300_000 } } });
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression: 'SET leaseOwner = :owner, leaseUntil = :until',
      ConditionExpression: '#status IN (:s0, :s1) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: {
        ':owner': { S: 'me' },
        ':until': { N: String(NOW + 300_000) },
        ':now': { N: String(NOW) },
        ':s0': { S: 'active' },
        ':s1': { S: 'failing' },
      },
      ReturnValues: 'ALL_NEW',
    });
  });

  it('takeRefreshLease: a failed condition is read back as held, not-refreshable or missing', async () => {
    const refused = new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
    mock.on(UpdateItemCommand).rejects(refused);
    mock
      .on(GetItemCommand)
      .resolvesOnce({ Item: row({ leaseOwner: { S: 'other' }, leaseUntil: { N: String(NOW + 1000) } }) })
      .resolvesOnce({ Item: row({ status: { S: 'paused' } }) })
      .resolvesOnce({});
    const lease = { owner: 'me', until: NOW + 300_000, now: NOW };
    expect(await store.takeRefreshLease('acme', lease)).toEqual({ kind: 'held', until: NOW + 1000 });
    expect(await store.takeRefreshLease('acme', lease)).toEqual({ kind: 'not-refreshable', status: 'paused' });
    expect(await store.takeRefreshLease('acme', lease)).toEqual({ kind: 'missing' });
  });

  it('completeRefresh: conditional on the version; a rotated token raises it; the lease is released', async () => {
    mock.on(UpdateItemCommand).resolves({});
    await store.completeRefresh({ connection: 'acme', owner: 'me', credentialsVersion: 3, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED });
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression:
        'SET accessToken = :accessToken, refreshedAt = :refreshedAt, lastSuccessAt = :refreshedAt, consecutiveFailures = :zero, updatedAt = :refreshedAt, ' +
        'refreshToken = :refreshToken, credentialsVersion = credentialsVersion + :one, #status = :status REMOVE leaseOwner, leaseUntil',
      ConditionExpression: 'credentialsVersion = :version AND #status IN (:active, :failing)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: {
        ':accessToken': { S: AT_TOKEN },
        ':refreshedAt': { S: AT },
        ':zero': { N: '0' },
        ':refreshToken': { S: ROTATED },
        ':one': { N: '1' },
        ':version': { N: '3' },
        ':status': { S: 'active' },
        ':active': { S: 'active' },
        ':failing': { S: 'failing' },
      },
    });
  });

  it('failRefresh: a transient failure counts in the health without touching the status', async () => {
    mock.on(UpdateItemCommand).resolves({});
    await store.failRefresh({ connection: 'acme', owner: 'me', credentialsVersion: 2, at: AT, reason: 'getToken: HTTP 503', refused: false });
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression:
        'SET lastFailureAt = :at, lastFailureReason = :reason, consecutiveFailures = if_not_exists(consecutiveFailures, :zero) + :one, updatedAt = :at REMOVE leaseOwner, leaseUntil',
      ConditionExpression: 'credentialsVersion = :version',
      ExpressionAttributeValues: { ':at': { S: AT }, ':reason': { S: 'getToken: HTTP 503' }, ':zero': { N: '0' }, ':one': { N: '1' }, ':version': { N: '2' } },
    });
  });

  it('setStatus: from the allowed statuses; removal deletes the tokens and raises the version', async () => {
    mock.on(UpdateItemCommand).resolves({});
    expect(await store.setStatus('acme', 'paused', ['active', 'failing'], AT)).toBe('written');
    expect(await store.setStatus('acme', 'removed', ['active'], AT)).toBe('written');
    expect(mock.commandCalls(UpdateItemCommand).map((c) => c.args[0].input)).toEqual([
      {
        TableName: TABLE,
        Key: key,
        UpdateExpression: 'SET #status = :to, updatedAt = :at',
        ConditionExpression: '#status IN (:from0, :from1)',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':to': { S: 'paused' }, ':at': { S: AT }, ':from0': { S: 'active' }, ':from1': { S: 'failing' } },
      },
      {
        TableName: TABLE,
        Key: key,
        UpdateExpression:
          'SET #status = :to, updatedAt = :at, credentialsVersion = if_not_exists(credentialsVersion, :zero) + :one REMOVE refreshToken, accessToken, refreshedAt, leaseOwner, leaseUntil',
        ConditionExpression: '#status IN (:from0)',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':to': { S: 'removed' }, ':at': { S: AT }, ':from0': { S: 'active' }, ':zero': { N: '0' }, ':one': { N: '1' } },
      },
    ]);
  });

  it('markUsed: only over an older lastUsedAt; a failed condition is no error', async () => {
    mock.on(UpdateItemCommand).rejects(new ConditionalCheckFailedException({ message: 'x', $metadata: {} }));
    await store.markUsed('acme', AT);
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression: 'SET lastUsedAt = :at',
      ConditionExpression: 'attribute_exists(#status) AND (attribute_not_exists(lastUsedAt) OR lastUsedAt < :at)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':at': { S: AT } },
    });
  });

  it('list: every page of the Scan; rows that are not connections are left out', async () => {
    mock
      .on(ScanCommand)
      .resolvesOnce({ Items: [row({}), { connection: { S: 'stub' }, idsKnown: { N: '4' } }], LastEvaluatedKey: key })
      .resolvesOnce({ Items: [row({ connection: { S: 'beta' } })] });
    const ids: string[] = [];
    for await (const record of store.list()) ids.push(record.connection);
    expect(ids).toEqual(['acme', 'beta']);
    expect(mock.commandCalls(ScanCommand).map((c) => c.args[0].input)).toEqual([
      { TableName: TABLE, ExclusiveStartKey: undefined },
      { TableName: TABLE, ExclusiveStartKey: key },
    ]);
  });

  it('delete: DeleteItem by the connection', async () => {
    mock.on(DeleteItemCommand).resolves({});
    await store.delete('acme');
    expect(mock).toReceiveCommandWith(DeleteItemCommand, { TableName: TABLE, Key: key });
  });

  it('AWS failures: throttling and 5xx are transient, a missing table names the setting, none quotes a value', async () => {
    const aws = (name: string, status: number) => Object.assign(new Error(`message with ${RT}`), { name, $metadata: { httpStatusCode: status } });
    mock
      .on(GetItemCommand)
      .rejectsOnce(aws('ProvisionedThroughputExceededException', 400))
      .rejectsOnce(aws('InternalServerError', 500))
      .rejectsOnce(aws('ResourceNotFoundException', 400))
      .rejectsOnce(aws('ValidationException', 400));
    const errors: unknown[] = [];
    for (let i = 0; i < 4; i++) errors.push(await store.get('acme').catch((error: unknown) => error));
    expect(errors[0]).toBeInstanceOf(TransientError);
    expect(errors[1]).toBeInstanceOf(TransientError);
    expect(errors[2]).toBeInstanceOf(ConfigError);
    expect((errors[2] as ConfigError).key).toBe('CONNECTIONS_TABLE_NAME');
    expect(errors[3]).not.toBeInstanceOf(TransientError);
    expect((errors[3] as Error).message).toBe(`DynamoDB GetItem on the connections table ${TABLE} failed (ValidationException, HTTP 400)`);
    for (const error of errors) {
      expect(String(error)).not.toContain(RT);
      expect((error as Error).cause).toBeUndefined();
    }
  });
});

describe('DynamoDbConnectionStore against dynalite', () => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let store: DynamoDbConnectionStore;
  let table = 0;

  beforeAll(async () => {
    dynamo = await startDynalite({ proxy: false });
    client = dynamo.client();
  });

  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  beforeEach(async () => {
    const name = `connections-${++table}`;
    await client.send(
      new CreateTableCommand({
        TableName: name,
        AttributeDefinitions: [{ AttributeName: 'connection', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'connection', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    store = new DynamoDbConnectionStore(client, name);
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

  it('completeRefresh after the credentials were replaced: conflict, and the new credentials stay', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    const taken = await store.takeRefreshLease('acme', lease('one'));
    if (taken.kind !== 'taken') throw new Error('lease not taken');
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: 'rt-operator-new-0003', at: AT });
    const written = await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: taken.record.credentialsVersion, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED });
    expect(written).toBe('conflict');
    const failed = await store.failRefresh({ connection: 'acme', owner: 'one', credentialsVersion: taken.record.credentialsVersion, at: AT, reason: 'refused', refused: true });
    expect(failed).toBe('conflict');
    expect(await store.get('acme', { consistent: true })).toMatchObject({ refreshToken: 'rt-operator-new-0003', status: 'active', credentialsVersion: 2 });
  });

  it('a rotated refresh token is stored with the access token; the version is raised and the lease released', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.takeRefreshLease('acme', lease('one'));
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED })).toBe('written');
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
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED })).toBe('written');
    expect(await store.get('acme', { consistent: true })).toMatchObject({ status: 'paused', refreshToken: ROTATED, accessToken: AT_TOKEN });
  });

  it('setStatus: missing, conflict, and removal deletes the tokens (a refresh running then conflicts)', async () => {
    expect(await store.setStatus('nobody', 'paused', ['active'], AT)).toBe('missing');
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    expect(await store.setStatus('acme', 'active', ['paused'], AT)).toBe('conflict');
    await store.takeRefreshLease('acme', lease('one'));
    expect(await store.setStatus('acme', 'removed', ['active', 'paused', 'failing'], AT)).toBe('written');
    expect(await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT })).toBe('conflict');
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
    await store.delete('acme');
    expect(await store.get('acme', { consistent: true })).toBeUndefined();
  });
});

function row(overrides: Record<string, AttributeValue>): Record<string, AttributeValue> {
  return {
    connection: { S: 'acme' },
    clientId: { S: 'client-1' },
    status: { S: 'active' },
    refreshToken: { S: RT },
    credentialsVersion: { N: '1' },
    consecutiveFailures: { N: '0' },
    createdAt: { S: AT },
    updatedAt: { S: AT },
    ...overrides,
  };
}

describe('toRecord', () => {
  it('reads every attribute', () => {
    expect(
      toRecord(
        row({
          accessToken: { S: AT_TOKEN },
          refreshedAt: { S: AT },
          lastUsedAt: { S: AT },
          lastSuccessAt: { S: AT },
          lastFailureAt: { S: AT },
          lastFailureReason: { S: 'why' },
          consecutiveFailures: { N: '2' },
          leaseOwner: { S: 'o' },
          leaseUntil: { N: '5' },
          idsKnown: { N: '9' },
          lastWriteAt: { S: AT },
        }),
      ),
    ).toEqual({
      connection: 'acme',
      clientId: 'client-1',
      status: 'active',
      refreshToken: RT,
      credentialsVersion: 1,
      accessToken: AT_TOKEN,
      refreshedAt: AT,
      lastUsedAt: AT,
      health: { lastSuccessAt: AT, lastFailureAt: AT, lastFailureReason: 'why', consecutiveFailures: 2 },
      refreshLease: { owner: 'o', until: 5 },
      createdAt: AT,
      updatedAt: AT,
      idsKnown: 9,
      lastWriteAt: AT,
    });
  });
});
