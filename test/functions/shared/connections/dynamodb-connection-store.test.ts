/**
 * The connections table's adapter (functions/shared/adapters/dynamodb-connection-store.ts): the exact
 * commands, with the client mocked (its conditional writes against DynamoDB Local:
 * dynamodb-connection-store.dynamodb.test.ts), and toRecord.
 */
import 'aws-sdk-client-mock-vitest/extend';
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoDbConnectionStore, toListing } from '../../../../functions/shared/adapters/dynamodb-connection-store.js';
import { stampOf, type Sealer } from '../../../../functions/shared/connections/sealing.js';

/** Seals a token as `sealed:<connection>:<token>`: the commands below show what was sealed, and for which connection. */
const VISIBLE_SEALER: Sealer = {
  seal: async (connection, token) => `sealed:${connection}:${token}`,
  open: async (connection, stored) => (stored.startsWith(`sealed:${connection}:`) ? stored.slice(`sealed:${connection}:`.length) : stored),
};
import { ConfigError, TransientError } from '../../../../functions/shared/errors.js';

const TABLE = 'content-sync-connections';
const AT = '2026-11-24T10:00:00.000Z';
const NOW = Date.parse(AT);
const RT = 'rt-store-secret-0001';
const ROTATED = 'rt-store-secret-0002';
const AT_TOKEN = 'at-store-secret-0001';

describe('DynamoDbConnectionStore: the exact commands', () => {
  // This instance only: the DynamoDB Local tests below use real clients.
  const mocked = new DynamoDBClient({});
  const mock = mockClient(mocked);
  const store = new DynamoDbConnectionStore(mocked, TABLE, { sealer: VISIBLE_SEALER });
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

  it('putCredentials: one UpdateItem that sets active with the token sealed for its connection, raises the version and clears tokens, health, lease and erase', async () => {
    mock.on(UpdateItemCommand).resolves({ Attributes: { status: { S: 'failing' } } });
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('replaced');
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression:
        'SET clientId = :clientId, #status = :active, refreshToken = :refreshToken, ' +
        'credentialsVersion = if_not_exists(credentialsVersion, :zero) + :one, consecutiveFailures = :zero, ' +
        'createdAt = if_not_exists(createdAt, :at), updatedAt = :at, credentialsAt = :at ' +
        'REMOVE accessToken, refreshedAt, lastSuccessAt, lastFailureAt, lastFailureReason, leaseOwner, leaseUntil, #erase',
      ConditionExpression: 'attribute_not_exists(#erase) OR #erase.#state <> :running',
      ExpressionAttributeNames: { '#status': 'status', '#erase': 'erase', '#state': 'state' },
      ExpressionAttributeValues: {
        ':clientId': { S: 'client-1' },
        ':active': { S: 'active' },
        ':refreshToken': { S: `sealed:acme:${RT}` },
        ':zero': { N: '0' },
        ':one': { N: '1' },
        ':at': { S: AT },
        ':running': { S: 'running' },
      },
      ReturnValues: 'UPDATED_OLD',
    });
    mock.on(UpdateItemCommand).resolves({});
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('created');
    // While its erase runs, nothing is written.
    mock.on(UpdateItemCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    expect(await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT })).toBe('erasing');
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
      ConditionExpression: 'credentialsVersion = :version AND #status IN (:active, :failing) AND leaseOwner = :owner',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: {
        ':accessToken': { S: `sealed:acme:${AT_TOKEN}` },
        ':refreshedAt': { S: AT },
        ':zero': { N: '0' },
        ':refreshToken': { S: `sealed:acme:${ROTATED}` },
        ':one': { N: '1' },
        ':version': { N: '3' },
        ':owner': { S: 'me' },
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
      ConditionExpression: 'credentialsVersion = :version AND leaseOwner = :owner',
      ExpressionAttributeValues: { ':at': { S: AT }, ':reason': { S: 'getToken: HTTP 503' }, ':zero': { N: '0' }, ':one': { N: '1' }, ':version': { N: '2' }, ':owner': { S: 'me' } },
    });
  });

  it('a result write whose condition fails is read again: the status and the lease as they are now, written again; conflict only for another version', async () => {
    const failed = new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
    mock.on(UpdateItemCommand).rejectsOnce(failed).resolves({});
    mock.on(GetItemCommand).resolves({ Item: row({ credentialsVersion: { N: '3' }, status: { S: 'paused' }, leaseOwner: { S: 'other' }, leaseUntil: { N: String(NOW) } }) });
    const input = { connection: 'acme', owner: 'me', credentialsVersion: 3, accessToken: AT_TOKEN, refreshedAt: AT };
    expect(await store.completeRefresh(input)).toEqual({ kind: 'written', status: 'paused', accessTokenStamp: expect.any(String) });
    const second = mock.commandCalls(UpdateItemCommand)[1]!.args[0].input;
    expect(second.ConditionExpression).toBe('credentialsVersion = :version AND #status = :seen AND (attribute_not_exists(leaseOwner) OR leaseOwner <> :owner)');
    expect(second.UpdateExpression).not.toContain('REMOVE');
    expect(second.ExpressionAttributeValues).toMatchObject({ ':seen': { S: 'paused' }, ':owner': { S: 'me' } });

    // The status keeps changing under the write, the version does not: not a conflict (the rotated token would be dropped), an error to try again.
    mock.reset();
    mock.on(UpdateItemCommand).rejects(failed);
    let flip = 0;
    mock.on(GetItemCommand).callsFake(() => ({ Item: row({ credentialsVersion: { N: '3' }, status: { S: ++flip % 2 ? 'paused' : 'active' }, leaseOwner: { S: 'me' }, leaseUntil: { N: String(NOW) } }) }));
    await expect(store.completeRefresh(input)).rejects.toBeInstanceOf(TransientError);

    mock.reset();
    mock.on(UpdateItemCommand).rejects(failed);
    mock.on(GetItemCommand).resolves({ Item: row({ credentialsVersion: { N: '4' } }) });
    expect(await store.completeRefresh(input)).toEqual({ kind: 'conflict' });
    expect(mock.commandCalls(UpdateItemCommand)).toHaveLength(1);
  });

  it('releaseRefreshLease: only the owner\'s lease; a failed condition is no error', async () => {
    mock.on(UpdateItemCommand).rejects(new ConditionalCheckFailedException({ message: 'x', $metadata: {} }));
    await store.releaseRefreshLease('acme', 'me');
    expect(mock).toReceiveCommandWith(UpdateItemCommand, {
      TableName: TABLE,
      Key: key,
      UpdateExpression: 'REMOVE leaseOwner, leaseUntil',
      ConditionExpression: 'leaseOwner = :owner',
      ExpressionAttributeValues: { ':owner': { S: 'me' } },
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

  it('delete: DeleteItem by the connection, only while it is removed', async () => {
    mock.on(DeleteItemCommand).resolves({});
    expect(await store.delete('acme')).toBe('deleted');
    expect(mock).toReceiveCommandWith(DeleteItemCommand, {
      TableName: TABLE,
      Key: key,
      ConditionExpression: '#status = :removed',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':removed': { S: 'removed' } },
    });
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

describe('toListing', () => {
  it('reads every attribute but the tokens, which it names by their stamp only', () => {
    expect(
      toListing(
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
          credentialsAt: { S: AT },
          erase: { M: { state: { S: 'running' }, startedAt: { S: AT }, notBefore: { S: AT }, rowsDeleted: { N: '3' }, objectsDeleted: { N: '1' } } },
        }),
      ),
    ).toEqual({
      connection: 'acme',
      clientId: 'client-1',
      status: 'active',
      credentialsVersion: 1,
      accessTokenStamp: stampOf(AT_TOKEN),
      refreshedAt: AT,
      lastUsedAt: AT,
      health: { lastSuccessAt: AT, lastFailureAt: AT, lastFailureReason: 'why', consecutiveFailures: 2 },
      refreshLease: { owner: 'o', until: 5 },
      createdAt: AT,
      updatedAt: AT,
      idsKnown: 9,
      lastWriteAt: AT,
      credentialsAt: AT,
      erase: { state: 'running', startedAt: AT, notBefore: AT, rowsDeleted: 3, objectsDeleted: 1 },
    });
  });
});
