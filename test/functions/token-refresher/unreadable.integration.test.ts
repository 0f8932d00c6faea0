/**
 * The token refresher when a token does not open, as deployed, in process: its handler over the
 * connections table in DynamoDB Local, the tokens sealed under a key of the KMS model, the HTTP
 * provider client against a getToken server on 127.0.0.1.
 * - A sealed refresh token that can never be opened (sealed for another connection, or altered)
 *   turns its connection `failing`, reason `token-unreadable`, with no getToken and the lease
 *   released; the row change announces one ConnectionFailing (the change-events function's own
 *   mapping); later runs never try it again, until its credentials are put again.
 * - The key disabled or pending deletion is an outage of the key: the run stops at the first refresh
 *   that meets it, no connection turns failing, no lease is left, ConnectionsKeyUnavailable is 1 (the
 *   alarm's metric); once the key is enabled again the next run refreshes them all.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetItemCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { lifecycleOf } from '../../../functions/change-events/lifecycle.js';
import { DynamoDbConnectionStore } from '../../../functions/shared/adapters/dynamodb-connection-store.js';
import { loadRefresherConfig } from '../../../functions/shared/config.js';
import { kmsApi } from '../../../functions/shared/adapters/kms-api.js';
import { KmsDataKeys } from '../../../functions/shared/adapters/kms-data-keys.js';
import { TOKEN_UNREADABLE, TokenSealer } from '../../../functions/shared/connections/sealing.js';
import { REFRESHER_METRIC_NAMES } from '../../../functions/shared/metric-names.js';
import { FAILING_RETRY_MS } from '../../../functions/token-refresher/run.js';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { testSealing, type TestSealing } from '../../support/sealer.js';
import { expectNoToken } from '../shared/connections/fakes.js';

type Row = Record<string, AttributeValue>;

/** getToken calls per refresh token. */
const calls = new Map<string, number>();
const TOKENS = new Set<string>();

let dynamo: LocalDynamoDb;
let client: DynamoDBClient;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  client = dynamo.client();
  server = createServer((req, res) => {
    const token = String(req.headers.authorization ?? '').replace(/^bearer /, '');
    calls.set(token, (calls.get(token) ?? 0) + 1);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ access_token: `at-of-${token}` }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
});

afterAll(async () => {
  client?.destroy();
  await dynamo?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

const token = (name: string): string => {
  const value = `rt-unreadable-secret-${name}`;
  TOKENS.add(value).add(`at-of-${value}`);
  return value;
};

/** Each test's own control table (the token pace's row): a pace on one test's clock never holds another's. */
const controlOf = (table: string): string => `${table}-control`;

async function createTables(table: string): Promise<void> {
  await dynamo.createConnectionsTable(table);
  await dynamo.createControlTable(controlOf(table));
}

/** Real time moved `ahead` ms on (the token pace waits in real time). */
class AheadClock {
  ahead = 0;
  now(): Date {
    return new Date(Date.now() + this.ahead);
  }
}

/** A refresher as one container runs it: its own store (an empty cache of opened tokens), on `clock`. */
function refresher(table: string, sealing: TestSealing, clock: AheadClock) {
  const config = loadRefresherConfig({ PROVIDER_BASE_URL: baseUrl, CONNECTIONS_TABLE_NAME: table, CONTROL_TABLE_NAME: controlOf(table), CONNECTIONS_KEY_ARN: sealing.keyArn, PROVIDER_TIMEOUT_MS: '120000' });
  return createRefresherHandler({ config, dynamodb: client, kms: sealing.kms, clock });
}

async function rawRow(table: string, connection: string): Promise<Row> {
  const output = await client.send(new GetItemCommand({ TableName: table, Key: { connection: { S: connection } }, ConsistentRead: true }));
  return output.Item!;
}

async function setRaw(table: string, connection: string, name: string, value: string): Promise<void> {
  await client.send(
    new UpdateItemCommand({ TableName: table, Key: { connection: { S: connection } }, UpdateExpression: 'SET #n = :v', ExpressionAttributeNames: { '#n': name }, ExpressionAttributeValues: { ':v': { S: value } } }),
  );
}

/** The metric the refresher published under `name` in its EMF line. */
function metricOf(output: string, name: string): unknown {
  const line = jsonLines(output).find((entry) => typeof entry === 'object' && entry !== null && '_aws' in entry && name in entry) as Record<string, unknown> | undefined;
  return line?.[name];
}

describe('a sealed refresh token that can never be opened', () => {
  it('turns its connection failing (token-unreadable) once, with no getToken and no lease left; later runs leave it until new credentials are put', async () => {
    const table = 'connections-unreadable';
    await createTables(table);
    const sealing = testSealing();
    const store = new DynamoDbConnectionStore(client, table, { sealer: sealing.sealer });
    const at = new AheadClock();
    const iso = at.now().toISOString();
    for (const name of ['good', 'copied', 'altered']) await store.putCredentials({ connection: name, clientId: 'client-1', refreshToken: token(name), at: iso });
    // `copied` holds good's sealed refresh token (sealed for another connection); `altered` its own, one byte changed.
    await setRaw(table, 'copied', 'refreshToken', (await rawRow(table, 'good'))['refreshToken']!.S!);
    const own = (await rawRow(table, 'altered'))['refreshToken']!.S!;
    const last = own.at(-2) === 'A' ? 'B' : 'A';
    await setRaw(table, 'altered', 'refreshToken', `${own.slice(0, -2)}${last}${own.at(-1)}`);
    const before = { copied: await rawRow(table, 'copied'), altered: await rawRow(table, 'altered') };

    const { result, error, output } = await captureOutput(() => refresher(table, sealing, at)({ trigger: 'deploy' }));

    expect(error).toBeUndefined();
    expect(result).toMatchObject({ connections: { active: 3, failing: 0 }, due: 3, refreshed: 1, refused: 2, failed: 0, left: 0, keyUnavailable: false });
    expect([...calls.keys()].filter((key) => key.startsWith('rt-unreadable-secret-'))).toStrictEqual([token('good')]);
    for (const name of ['copied', 'altered'] as const) {
      const row = await rawRow(table, name);
      expect(row['status']?.S).toBe('failing');
      expect(row['lastFailureReason']?.S).toBe(TOKEN_UNREADABLE);
      expect(row['consecutiveFailures']?.N).toBe('1');
      expect(row['leaseOwner']).toBeUndefined();
      expect(row['leaseUntil']).toBeUndefined();
      // What the stream carries for this write: one ConnectionFailing, its reason token-unreadable.
      const event = lifecycleOf({ eventName: 'MODIFY', dynamodb: { Keys: { connection: { S: name } }, OldImage: before[name], NewImage: row } } as never, { now: () => Date.now() });
      expect(event).toStrictEqual({ detailType: 'ConnectionFailing', detail: { connection: name, status: 'failing', previousStatus: 'active', reason: TOKEN_UNREADABLE, at: row['updatedAt']!.S } });
    }
    const lines = jsonLines(output) as Array<Record<string, unknown>>;
    const changed = lines.filter((line) => line['message'] === 'connection status changed');
    expect(changed.map((line) => `${String(line['connection'])} ${String(line['from'])}→${String(line['to'])} ${String(line['reason'])}`).sort()).toStrictEqual([
      `altered active→failing ${TOKEN_UNREADABLE}`,
      `copied active→failing ${TOKEN_UNREADABLE}`,
    ]);
    expect(lines.filter((line) => line['level'] === 'ERROR' && line['reason'] === TOKEN_UNREADABLE).map((line) => line['connection']).sort()).toStrictEqual(['altered', 'copied']);
    expectNoToken(output + JSON.stringify(result), TOKENS);

    // Two hours later (past the failing connections' hourly retry): neither is tried again, nor written.
    const failed = { copied: await rawRow(table, 'copied'), altered: await rawRow(table, 'altered') };
    at.ahead = 2 * FAILING_RETRY_MS;
    const decrypts = sealing.model.calls['Decrypt'] ?? 0;
    const again = await captureOutput(() => refresher(table, sealing, at)({ trigger: 'schedule' }));
    expect(again.error).toBeUndefined();
    expect(again.result).toMatchObject({ connections: { active: 1, failing: 2 }, refused: 0, failed: 0, left: 0 });
    for (const name of ['copied', 'altered'] as const) expect(await rawRow(table, name)).toStrictEqual(failed[name]);
    // Only the good connection's tokens were opened (idle: its token is not due, so none at all).
    expect((sealing.model.calls['Decrypt'] ?? 0) - decrypts).toBe(0);

    // New credentials put: active again, refreshed by the next run.
    await store.putCredentials({ connection: 'copied', clientId: 'client-1', refreshToken: token('copied-new'), at: at.now().toISOString() });
    const third = await captureOutput(() => refresher(table, sealing, at)({ trigger: 'schedule' }));
    expect(third.result).toMatchObject({ refreshed: 1, refused: 0 });
    expect(await store.get('copied', { consistent: true })).toMatchObject({ status: 'active', accessToken: `at-of-${token('copied-new')}` });
  });

  it('an access token that does not open is read as none: the refresh replaces it, the connection stays active', async () => {
    const table = 'connections-unreadable-access';
    await createTables(table);
    const sealing = testSealing();
    const store = new DynamoDbConnectionStore(client, table, { sealer: sealing.sealer });
    const at = new AheadClock();
    await store.putCredentials({ connection: 'one', clientId: 'client-1', refreshToken: token('one'), at: at.now().toISOString() });
    await store.putCredentials({ connection: 'two', clientId: 'client-1', refreshToken: token('two'), at: at.now().toISOString() });
    await captureOutput(() => refresher(table, sealing, at)({ trigger: 'deploy' }));
    // `two` holds one's sealed access token.
    await setRaw(table, 'two', 'accessToken', (await rawRow(table, 'one'))['accessToken']!.S!);
    const fresh = new DynamoDbConnectionStore(client, table, { sealer: new TokenSealer(new KmsDataKeys(kmsApi(sealing.kms), sealing.keyArn)) });
    const read = await fresh.get('two', { consistent: true });
    expect(read).toMatchObject({ status: 'active', refreshToken: token('two') });
    expect(read?.accessToken).toBeUndefined();
    expect(read?.accessTokenStamp).toBeUndefined();
    expect(read?.refreshTokenUnreadable).toBeUndefined();
  });
});

describe.each([
  ['disabled', (sealing: TestSealing) => sealing.model.disable(sealing.keyArn), (sealing: TestSealing) => sealing.model.enable(sealing.keyArn)],
  [
    'pending deletion',
    (sealing: TestSealing) => sealing.model.scheduleDeletion(sealing.keyArn),
    (sealing: TestSealing) => {
      sealing.model.cancelDeletion(sealing.keyArn);
      sealing.model.enable(sealing.keyArn);
    },
  ],
] as const)('the key that seals the tokens %s', (what, takeOut, restore) => {
  it('is an outage of the key: the run stops, no connection turns failing, no lease is left, one metric for the alarm; enabled again, every refresh resumes', async () => {
    const table = `connections-key-${what.replace(' ', '-')}`;
    await createTables(table);
    const sealing = testSealing();
    const store = new DynamoDbConnectionStore(client, table, { sealer: sealing.sealer });
    const at = new AheadClock();
    const names = Array.from({ length: 6 }, (_, i) => `${what.replace(' ', '-')}-${i}`);
    for (const name of names) await store.putCredentials({ connection: name, clientId: 'client-1', refreshToken: token(name), at: at.now().toISOString() });
    const rowsBefore = await dynamo.scan(table);
    takeOut(sealing);

    const { result, error, output } = await captureOutput(() => refresher(table, sealing, at)({ trigger: 'schedule' }));

    expect(error).toBeUndefined();
    expect(result).toMatchObject({ connections: { active: 6, failing: 0 }, due: 6, refreshed: 0, refused: 0, failed: 0, keyUnavailable: true });
    const { refreshConcurrency } = loadRefresherConfig({ PROVIDER_BASE_URL: baseUrl, CONNECTIONS_TABLE_NAME: table, CONTROL_TABLE_NAME: controlOf(table), CONNECTIONS_KEY_ARN: sealing.keyArn });
    // The refreshes running when the first met the key, no more: the rest are left for the next run.
    expect((result as { left: number }).left).toBeGreaterThanOrEqual(6 - refreshConcurrency);
    expect(sealing.model.calls['Decrypt'] ?? 0).toBeLessThanOrEqual(refreshConcurrency);
    expect(names.some((name) => calls.has(token(name)))).toBe(false);
    // Every row as it was: no status, no health, no lease written.
    expect(await dynamo.scan(table)).toStrictEqual(rowsBefore);
    expect(metricOf(output, REFRESHER_METRIC_NAMES.keyUnavailable)).toBe(1);
    expect(metricOf(output, REFRESHER_METRIC_NAMES.failing)).toBe(0);
    expect(output).toContain('CONNECTIONS_KEY_ARN) is disabled or pending deletion');
    expectNoToken(output + JSON.stringify(result), TOKENS);

    restore(sealing);
    const after = await captureOutput(() => refresher(table, sealing, at)({ trigger: 'schedule' }));
    expect(after.result).toMatchObject({ refreshed: 6, refused: 0, failed: 0, left: 0, keyUnavailable: false });
    expect(metricOf(after.output, REFRESHER_METRIC_NAMES.keyUnavailable)).toBe(0);
    for (const name of names) expect(await store.get(name, { consistent: true })).toMatchObject({ status: 'active', accessToken: `at-of-${token(name)}` });
  });
});
