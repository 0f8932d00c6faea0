/**
 * The connections table holds no token in clear (the contract's "Credentials live in the
 * connections table…"): the DynamoDB adapter (functions/shared/adapters/dynamodb-connection-store.ts)
 * over DynamoDB Local, its tokens sealed by the application's TokenSealer over KMS (the KMS model:
 * test/support/sealer.ts). A raw read of the table shows only ciphertext; a sealed token copied into
 * another connection's row does not open there; listings open nothing; clear rows of an older
 * deployment are sealed in place without overwriting a newer token.
 */
import 'aws-sdk-client-mock-vitest/extend';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../../../dev/fakes/local-dynamo.js';
import { DynamoDbConnectionStore } from '../../../../functions/shared/adapters/dynamodb-connection-store.js';
import { KmsDataKeys } from '../../../../functions/shared/adapters/kms-data-keys.js';
import type { ConnectionListing } from '../../../../functions/shared/connections/connection.js';
import { isSealed, KeyUnavailableError, NO_TOKENS, SEALED_PREFIX, SealError, stampOf, TokenSealer, type Sealer } from '../../../../functions/shared/connections/sealing.js';
import { testSealing, type TestSealing } from '../../../support/sealer.js';
import { kmsApi } from '../../../../functions/shared/adapters/kms-api.js';

type Row = Record<string, AttributeValue>;

const AT = '2026-11-24T10:00:00.000Z';
const LATER = '2026-11-24T11:00:00.000Z';
const NOW = Date.parse(AT);
const RT = 'rt-sealed-secret-0001-qwertyuiop';
const ROTATED = 'rt-sealed-secret-0002-asdfghjkl';
const AT_TOKEN = 'at-sealed-secret-0001-zxcvbnm';
const AT_TOKEN_2 = 'at-sealed-secret-0002-poiuytr';
const TOKENS = [RT, ROTATED, AT_TOKEN, AT_TOKEN_2];

/** Every way a token could show in a row: as it is, base64, base64url, hex. */
function encodingsOf(token: string): string[] {
  const bytes = Buffer.from(token, 'utf8');
  return [token, bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex')];
}

function expectNoToken(value: unknown): void {
  const text = JSON.stringify(value);
  for (const token of TOKENS) for (const form of encodingsOf(token)) expect(text).not.toContain(form);
}

/** The error `promise` was rejected with (fails the test when it was not). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(Error);
    return error as Error;
  }
  throw new Error('expected a rejection');
}

const lease = (owner: string) => ({ owner, until: NOW + 300_000, now: NOW });

describe('the connections table over DynamoDB Local, tokens sealed under KMS', () => {
  let dynamo: LocalDynamoDb;
  let client: DynamoDBClient;
  let sealing: TestSealing;
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
    const name = `sealed-connections-${++table}`;
    await dynamo.createConnectionsTable(name);
    sealing = testSealing();
    store = new DynamoDbConnectionStore(client, name, { sealer: sealing.sealer });
  });

  /** The store of another container: same table and KMS key, nothing opened yet. */
  const newContainer = (sealer: Sealer = new TokenSealer(new KmsDataKeys(kmsApi(sealing.kms), sealing.keyArn))) =>
    new DynamoDbConnectionStore(client, store.tableName, { sealer });

  const rawRow = async (connection: string): Promise<Row> => {
    const out = await client.send(new GetItemCommand({ TableName: store.tableName, Key: { connection: { S: connection } }, ConsistentRead: true }));
    if (!out.Item) throw new Error(`no row for ${connection}`);
    return out.Item;
  };

  const rawSet = (connection: string, values: Record<string, string>) =>
    client.send(
      new UpdateItemCommand({
        TableName: store.tableName,
        Key: { connection: { S: connection } },
        UpdateExpression: `SET ${Object.keys(values).map((name, i) => `#n${i} = :v${i}`).join(', ')}`,
        ExpressionAttributeNames: Object.fromEntries(Object.keys(values).map((name, i) => [`#n${i}`, name])),
        ExpressionAttributeValues: Object.fromEntries(Object.values(values).map((value, i) => [`:v${i}`, { S: value }])),
      }),
    );

  /** acme with a refresh token, refreshed once: an access token and a rotated refresh token. */
  const refreshed = async (connection = 'acme') => {
    await store.putCredentials({ connection, clientId: 'client-1', refreshToken: RT, at: AT });
    const taken = await store.takeRefreshLease(connection, lease('one'));
    if (taken.kind !== 'taken') throw new Error('lease not taken');
    return store.completeRefresh({ connection, owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED });
  };

  it('a raw read of the table (Scan, GetItem) shows only ciphertext; the store opens the tokens again, in another container too', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    expect(sealing.calls).toEqual({ GenerateDataKey: 1 });
    expectNoToken(await dynamo.scan(store.tableName));
    const first = await rawRow('acme');
    expect(isSealed(first['refreshToken']!.S!)).toBe(true);
    expectNoToken(first);

    await store.takeRefreshLease('acme', lease('one'));
    await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED });
    // One data key per sealed token: the first refresh token, the access token, the rotated one.
    expect(sealing.calls).toEqual({ GenerateDataKey: 3 });
    expect(sealing.model.calls).toEqual({ GenerateDataKey: 3 });

    const scanned = await client.send(new ScanCommand({ TableName: store.tableName, ConsistentRead: true }));
    expect(scanned.Items).toHaveLength(1);
    expectNoToken(scanned.Items);
    expectNoToken(await dynamo.scan(store.tableName));
    const row = await rawRow('acme');
    expectNoToken(row);
    for (const name of ['refreshToken', 'accessToken']) {
      expect(row[name]!.S!.startsWith(SEALED_PREFIX)).toBe(true);
      expect(row[name]!.S!.slice(SEALED_PREFIX.length).split('.')).toHaveLength(3);
    }
    expect(row['refreshToken']!.S).not.toBe(first['refreshToken']!.S);

    expect(await store.get('acme', { consistent: true })).toMatchObject({ refreshToken: ROTATED, accessToken: AT_TOKEN, credentialsVersion: 2 });
    // This container sealed them: it opens them from memory.
    expect(sealing.calls.Decrypt).toBeUndefined();
    const other = newContainer();
    expect(await other.get('acme', { consistent: true })).toMatchObject({ refreshToken: ROTATED, accessToken: AT_TOKEN });
    expect(sealing.calls.Decrypt).toBe(2);
    expect(await other.get('acme')).toMatchObject({ refreshToken: ROTATED, accessToken: AT_TOKEN });
    expect(sealing.calls.Decrypt).toBe(2);
  });

  it("a sealed refresh token copied into another connection's row does not open there (KMS's context check): read as unreadable, never thrown", async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    await store.putCredentials({ connection: 'globex', clientId: 'client-2', refreshToken: 'rt-globex-own-0001', at: AT });
    const acme = await rawRow('acme');
    await rawSet('globex', { refreshToken: acme['refreshToken']!.S! });
    for (const reader of [store, newContainer()]) {
      const before = sealing.calls.Decrypt ?? 0;
      const read = await reader.get('globex', { consistent: true });
      expect(read).toMatchObject({ connection: 'globex', status: 'active', refreshToken: '', refreshTokenUnreadable: true });
      expectNoToken(read);
      // KMS refused it.
      expect(sealing.calls.Decrypt).toBe(before + 1);
    }
    // The sealer itself says why (a SealError naming the connection, never the value).
    const error = await rejection(new TokenSealer(new KmsDataKeys(kmsApi(sealing.kms), sealing.keyArn)).open('globex', acme['refreshToken']!.S!));
    expect(error).toBeInstanceOf(SealError);
    expect(error.message).toContain('connection "globex"');
    expect(error.message).toContain('InvalidCiphertextException');
    expect(error.message).not.toContain(RT);
    // Where it belongs, it opens.
    expect((await newContainer().get('acme'))?.refreshToken).toBe(RT);
  });

  it("a sealed access token copied into another connection's row does not open there: read as none (a refresh replaces it)", async () => {
    await refreshed('acme');
    await store.putCredentials({ connection: 'globex', clientId: 'client-2', refreshToken: 'rt-globex-own-0001', at: AT });
    const acme = await rawRow('acme');
    await rawSet('globex', { accessToken: acme['accessToken']!.S! });
    for (const reader of [store, newContainer()]) {
      const read = await reader.get('globex', { consistent: true });
      expect(read).toMatchObject({ connection: 'globex', refreshToken: 'rt-globex-own-0001' });
      expect(read?.accessToken).toBeUndefined();
      expect(read?.accessTokenStamp).toBeUndefined();
      expect(read?.refreshTokenUnreadable).toBeUndefined();
    }
    expect((await newContainer().get('acme'))?.accessToken).toBe(AT_TOKEN);
  });

  it("a whole row copied under another connection's key (PutItem) does not open: no token handed out, the lease taken says so", async () => {
    await refreshed('acme');
    const acme = await rawRow('acme');
    await client.send(new PutItemCommand({ TableName: store.tableName, Item: { ...acme, connection: { S: 'globex' } } }));
    expect((await store.view('globex'))?.connection).toBe('globex');
    for (const reader of [store, newContainer()]) {
      const read = await reader.get('globex', { consistent: true });
      expect(read).toMatchObject({ refreshToken: '', refreshTokenUnreadable: true });
      expect(read?.accessToken).toBeUndefined();
      expectNoToken(read);
    }
    // A lease taken on it: taken (the refresh core turns it failing), no token in the record.
    const taken = await newContainer().takeRefreshLease('globex', lease('two'));
    expect(taken).toMatchObject({ kind: 'taken', record: { refreshToken: '', refreshTokenUnreadable: true } });
    expectNoToken(taken);
  });

  it('the key disabled: a lease taken is released at once (not held for its 5 minutes), and the KeyUnavailableError is thrown', async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    sealing.model.disable(sealing.keyArn);
    try {
      const error = await rejection(newContainer().takeRefreshLease('acme', lease('one')));
      expect(error).toBeInstanceOf(KeyUnavailableError);
      const row = await rawRow('acme');
      expect(row['leaseOwner']).toBeUndefined();
      expect(row['leaseUntil']).toBeUndefined();
    } finally {
      sealing.model.enable(sealing.keyArn);
    }
  });

  it('view, list and page ask KMS nothing and return no token', async () => {
    await refreshed('acme');
    await store.putCredentials({ connection: 'globex', clientId: 'client-2', refreshToken: 'rt-globex-own-0001', at: AT });
    await store.setStatus('globex', 'paused', ['active'], AT);
    const before = structuredClone(sealing.calls);
    const modelBefore = structuredClone(sealing.model.calls);
    const acmeRow = await rawRow('acme');
    const sealedValues = [acmeRow['refreshToken']!.S!, acmeRow['accessToken']!.S!, (await rawRow('globex'))['refreshToken']!.S!];

    // A new container (nothing cached) and one that may open no token at all.
    for (const reader of [newContainer(), newContainer(NO_TOKENS)]) {
      const listings: ConnectionListing[] = [];
      const viewed = await reader.view('acme', { consistent: true });
      expect(viewed).toBeDefined();
      listings.push(viewed!);
      const listed: ConnectionListing[] = [];
      for await (const listing of reader.list()) listed.push(listing);
      expect(listed.map((l) => l.connection).sort()).toEqual(['acme', 'globex']);
      listings.push(...listed);
      const page = await reader.page({ limit: 10 });
      expect(page.connections.map((l) => l.connection).sort()).toEqual(['acme', 'globex']);
      listings.push(...page.connections);
      const paused = await reader.page({ status: 'paused', limit: 10 });
      expect(paused.connections.map((l) => l.connection)).toEqual(['globex']);
      listings.push(...paused.connections);
      for (const listing of listings) {
        expect(listing).not.toHaveProperty('refreshToken');
        expect(listing).not.toHaveProperty('accessToken');
        expectNoToken(listing);
        for (const sealed of sealedValues) expect(JSON.stringify(listing)).not.toContain(sealed.slice(SEALED_PREFIX.length));
      }
    }
    expect(sealing.calls).toEqual(before);
    expect(sealing.model.calls).toEqual(modelBefore);
  });

  it("the access token's stamp: view shows stampOf(the stored value), as completeRefresh answered; a new token, a new stamp", async () => {
    await store.putCredentials({ connection: 'acme', clientId: 'client-1', refreshToken: RT, at: AT });
    expect((await store.view('acme', { consistent: true }))?.accessTokenStamp).toBeUndefined();
    await store.takeRefreshLease('acme', lease('one'));
    const written = await store.completeRefresh({ connection: 'acme', owner: 'one', credentialsVersion: 1, accessToken: AT_TOKEN, refreshedAt: AT, rotatedRefreshToken: ROTATED });
    const stored = (await rawRow('acme'))['accessToken']!.S!;
    const stamp = stampOf(stored);
    expect(written).toEqual({ kind: 'written', status: 'active', accessTokenStamp: stamp });
    const viewed = await store.view('acme', { consistent: true });
    expect(viewed?.accessTokenStamp).toBe(stamp);
    expect(stamp).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(stamp).not.toContain(AT_TOKEN);
    for await (const listing of store.list()) expect(listing.accessTokenStamp).toBe(stamp);
    expect((await store.page({ limit: 10 })).connections[0]?.accessTokenStamp).toBe(stamp);

    // A new access token: a new stored value, a new stamp.
    await store.takeRefreshLease('acme', lease('two'));
    const again = await store.completeRefresh({ connection: 'acme', owner: 'two', credentialsVersion: 2, accessToken: AT_TOKEN_2, refreshedAt: LATER });
    const storedAgain = (await rawRow('acme'))['accessToken']!.S!;
    expect(again).toEqual({ kind: 'written', status: 'active', accessTokenStamp: stampOf(storedAgain) });
    expect(stampOf(storedAgain)).not.toBe(stamp);
    expect((await store.view('acme', { consistent: true }))?.accessTokenStamp).toBe(stampOf(storedAgain));

    // Even the same token again is sealed anew: the stamp changes too.
    await store.takeRefreshLease('acme', lease('three'));
    const same = await store.completeRefresh({ connection: 'acme', owner: 'three', credentialsVersion: 2, accessToken: AT_TOKEN_2, refreshedAt: LATER });
    const storedSame = (await rawRow('acme'))['accessToken']!.S!;
    expect(storedSame).not.toBe(storedAgain);
    expect(same).toEqual({ kind: 'written', status: 'active', accessTokenStamp: stampOf(storedSame) });
    expect((await store.view('acme', { consistent: true }))?.accessTokenStamp).toBe(stampOf(storedSame));
    expect((await newContainer().get('acme'))?.accessToken).toBe(AT_TOKEN_2);
  });

  describe('sealClearTokens', () => {
    /** A row as a deployment that did not seal wrote it. */
    const putClear = (connection: string, tokens: { refreshToken: string; accessToken?: string }) =>
      client.send(
        new PutItemCommand({
          TableName: store.tableName,
          Item: {
            connection: { S: connection },
            clientId: { S: 'client-1' },
            status: { S: 'active' },
            credentialsVersion: { N: '3' },
            consecutiveFailures: { N: '0' },
            createdAt: { S: AT },
            updatedAt: { S: AT },
            refreshToken: { S: tokens.refreshToken },
            ...(tokens.accessToken === undefined ? {} : { accessToken: { S: tokens.accessToken } }),
          },
        }),
      );

    it('seals both clear tokens of a row in place, counts them, and the store opens them as before', async () => {
      await putClear('acme', { refreshToken: RT, accessToken: AT_TOKEN });
      expect(await store.get('acme', { consistent: true })).toMatchObject({ refreshToken: RT, accessToken: AT_TOKEN });
      const stampBefore = (await store.view('acme', { consistent: true }))?.accessTokenStamp;
      expect(stampBefore).toBe(stampOf(AT_TOKEN));

      expect(await store.sealClearTokens('acme')).toBe(2);
      expect(sealing.calls).toEqual({ GenerateDataKey: 2 });
      const row = await rawRow('acme');
      expectNoToken(row);
      expect(isSealed(row['refreshToken']!.S!)).toBe(true);
      expect(isSealed(row['accessToken']!.S!)).toBe(true);
      // Nothing else changed.
      expect(row['credentialsVersion']).toEqual({ N: '3' });
      expect(row['updatedAt']).toEqual({ S: AT });
      expect(await newContainer().get('acme', { consistent: true })).toMatchObject({ refreshToken: RT, accessToken: AT_TOKEN, credentialsVersion: 3 });
      expect((await store.view('acme', { consistent: true }))?.accessTokenStamp).toBe(stampOf(row['accessToken']!.S!));

      // Sealed already: left alone, KMS not asked.
      const calls = structuredClone(sealing.calls);
      expect(await store.sealClearTokens('acme')).toBe(0);
      expect(await rawRow('acme')).toEqual(row);
      expect(sealing.calls).toEqual(calls);
    });

    it('seals the one clear token of a row, leaves a sealed one and a row without access token alone; no row: 0', async () => {
      await refreshed('acme');
      const sealedAccess = (await rawRow('acme'))['accessToken']!.S!;
      await rawSet('acme', { refreshToken: 'rt-clear-again-0009' });
      expect(await store.sealClearTokens('acme')).toBe(1);
      const row = await rawRow('acme');
      expect(row['accessToken']!.S).toBe(sealedAccess);
      expect(isSealed(row['refreshToken']!.S!)).toBe(true);
      expect(JSON.stringify(row)).not.toContain('rt-clear-again-0009');
      expect(await newContainer().get('acme')).toMatchObject({ refreshToken: 'rt-clear-again-0009', accessToken: AT_TOKEN });

      await putClear('globex', { refreshToken: 'rt-globex-clear-0001' });
      expect(await store.sealClearTokens('globex')).toBe(1);
      expect(await rawRow('globex')).not.toHaveProperty('accessToken');

      const calls = structuredClone(sealing.calls);
      expect(await store.sealClearTokens('nobody')).toBe(0);
      expect(sealing.calls).toEqual(calls);
    });

    it('a token changed between the read and the write is not overwritten (the write is conditional on the clear value)', async () => {
      await putClear('acme', { refreshToken: RT, accessToken: AT_TOKEN });
      const newer = await sealing.sealer.seal('acme', AT_TOKEN_2);
      // A refresh writes a new access token while the access token is being sealed.
      const racing: Sealer = {
        seal: async (connection, token) => {
          if (token === AT_TOKEN) await rawSet('acme', { accessToken: newer });
          return sealing.sealer.seal(connection, token);
        },
        open: (connection, stored) => sealing.sealer.open(connection, stored),
      };
      expect(await newContainer(racing).sealClearTokens('acme')).toBe(1);
      const row = await rawRow('acme');
      expect(row['accessToken']!.S).toBe(newer);
      expect(isSealed(row['refreshToken']!.S!)).toBe(true);
      expect(await newContainer().get('acme', { consistent: true })).toMatchObject({ refreshToken: RT, accessToken: AT_TOKEN_2 });
    });
  });
});

describe('sealClearTokens: the exact commands', () => {
  const mocked = new DynamoDBClient({});
  const mock = mockClient(mocked);
  const sealing = testSealing();
  const store = new DynamoDbConnectionStore(mocked, 'content-sync-connections', { sealer: sealing.sealer });
  const key = { connection: { S: 'acme' } };

  beforeEach(() => mock.reset());

  it('reads the row consistently, then one UpdateItem per clear token, conditional on its clear value; a failed condition is not counted', async () => {
    mock.on(GetItemCommand).resolves({
      Item: { connection: { S: 'acme' }, clientId: { S: 'client-1' }, status: { S: 'active' }, refreshToken: { S: RT }, accessToken: { S: AT_TOKEN } },
    });
    mock
      .on(UpdateItemCommand)
      .resolvesOnce({})
      .rejectsOnce(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: { httpStatusCode: 400 } }));
    expect(await store.sealClearTokens('acme')).toBe(1);
    expect(mock).toReceiveCommandExactlyOnceWith(GetItemCommand, { TableName: 'content-sync-connections', Key: key, ConsistentRead: true });
    const updates = mock.commandCalls(UpdateItemCommand).map((call) => call.args[0].input);
    expect(updates).toEqual([
      {
        TableName: 'content-sync-connections',
        Key: key,
        UpdateExpression: 'SET #token = :sealed',
        ConditionExpression: '#token = :clear',
        ExpressionAttributeNames: { '#token': 'refreshToken' },
        ExpressionAttributeValues: { ':sealed': { S: expect.stringMatching(/^cs-sealed-v1 [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/) }, ':clear': { S: RT } },
      },
      {
        TableName: 'content-sync-connections',
        Key: key,
        UpdateExpression: 'SET #token = :sealed',
        ConditionExpression: '#token = :clear',
        ExpressionAttributeNames: { '#token': 'accessToken' },
        ExpressionAttributeValues: { ':sealed': { S: expect.stringMatching(/^cs-sealed-v1 /) }, ':clear': { S: AT_TOKEN } },
      },
    ]);
    // What it wrote opens, for this connection, as the token it replaces.
    const sealedRefresh = updates[0]!.ExpressionAttributeValues![':sealed']!.S!;
    const sealedAccess = updates[1]!.ExpressionAttributeValues![':sealed']!.S!;
    const opener = new TokenSealer(new KmsDataKeys(kmsApi(sealing.kms), sealing.keyArn));
    expect(await opener.open('acme', sealedRefresh)).toBe(RT);
    expect(await opener.open('acme', sealedAccess)).toBe(AT_TOKEN);
  });

  it('a sealed row: no write', async () => {
    const sealedRefresh = await sealing.sealer.seal('acme', RT);
    mock.on(GetItemCommand).resolves({ Item: { connection: { S: 'acme' }, clientId: { S: 'client-1' }, status: { S: 'active' }, refreshToken: { S: sealedRefresh } } });
    expect(await store.sealClearTokens('acme')).toBe(0);
    expect(mock).toReceiveCommandTimes(UpdateItemCommand, 0);
  });
});
