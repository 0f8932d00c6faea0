/**
 * The token refresher as deployed, in process: its handler over the connections table and the
 * control table (the token pace's row) in DynamoDB Local and the HTTP provider client against a small
 * getToken server on 127.0.0.1 (real HTTP): rotation stored, a refused connection failing beside a
 * refreshed one, a 429 waited out and tried again, the pace's row written, no token in anything printed.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { DynamoDbConnectionStore } from '../../../functions/shared/adapters/dynamodb-connection-store.js';
import { loadRefresherConfig } from '../../../functions/shared/config.js';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { testSealing } from '../../support/sealer.js';
import { expectNoToken } from '../shared/connections/fakes.js';

const TABLE = 'connections-refresher';
const CONTROL = 'control-refresher';
/** getToken answers 429 (Retry-After: 1) to this refresh token the first time only. */
const LIMITED = 'rt-limited-secret';
let limitedCalls = 0;
/** Refresh token → what getToken answers: a rotation for `rt-rotating-secret`, 401 (echoing the token) for any unknown one. */
const grants = new Map<string, { access_token: string; refresh_token?: string }>([
  ['rt-plain-secret', { access_token: 'at-plain-secret' }],
  ['rt-rotating-secret', { access_token: 'at-rotating-secret', refresh_token: 'rt-rotated-secret' }],
  [LIMITED, { access_token: 'at-limited-secret' }],
]);
const seen = new Set<string>(['rt-plain-secret', 'rt-rotating-secret', 'rt-rotated-secret', 'rt-revoked-secret', 'at-plain-secret', 'at-rotating-secret', LIMITED, 'at-limited-secret']);

let dynamo: LocalDynamoDb;
let client: DynamoDBClient;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  client = dynamo.client();
  await dynamo.createConnectionsTable(TABLE);
  await dynamo.createControlTable(CONTROL);
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const token = String(req.headers.authorization ?? '').replace(/^bearer /, '');
    if (token === LIMITED && limitedCalls++ === 0) {
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '1' });
      res.end(JSON.stringify({ error: { code: 429, message: 'slow down' } }));
      return;
    }
    const grant = url.pathname === '/api/getToken' && url.searchParams.get('client_id') === 'client-1' ? grants.get(token) : undefined;
    res.writeHead(grant ? 200 : 401, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(grant ?? { error: { code: 1001, message: `refresh token ${token} was revoked` } }));
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

describe('the token refresher against DynamoDB Local and a getToken server', () => {
  it('refreshes every due connection, stores a rotation, makes a refused one failing, prints no token', async () => {
    const sealing = testSealing();
    const store = new DynamoDbConnectionStore(client, TABLE, { sealer: sealing.sealer });
    const at = new Date().toISOString();
    await store.putCredentials({ connection: 'plain', clientId: 'client-1', refreshToken: 'rt-plain-secret', at });
    await store.putCredentials({ connection: 'rotating', clientId: 'client-1', refreshToken: 'rt-rotating-secret', at });
    await store.putCredentials({ connection: 'revoked', clientId: 'client-1', refreshToken: 'rt-revoked-secret', at });
    await store.putCredentials({ connection: 'limited', clientId: 'client-1', refreshToken: LIMITED, at });
    await store.putCredentials({ connection: 'held', clientId: 'client-1', refreshToken: 'rt-plain-secret', at });
    await store.setStatus('held', 'paused', ['active'], at);

    // The longest provider time-out the configuration allows: a loaded machine cannot make a getToken time out.
    const config = loadRefresherConfig({ PROVIDER_BASE_URL: baseUrl, CONNECTIONS_TABLE_NAME: TABLE, CONTROL_TABLE_NAME: CONTROL, CONNECTIONS_KEY_ARN: sealing.keyArn, PROVIDER_TIMEOUT_MS: '120000' });
    const handler = createRefresherHandler({ config, dynamodb: client, kms: sealing.kms });
    const { result, error, output } = await captureOutput(() => handler({ trigger: 'deploy' }));

    expect(error).toBeUndefined();
    expect(result).toMatchObject({ trigger: 'deploy', connections: { active: 4, paused: 1, failing: 0 }, due: 4, refreshed: 3, rotated: 1, refused: 1, rateLimited: 1, left: 0 });
    // The 429 was waited out (its Retry-After held the pace) and the refresh tried again.
    expect(limitedCalls).toBe(2);
    expect(await store.get('limited', { consistent: true })).toMatchObject({ status: 'active', accessToken: 'at-limited-secret', health: { consecutiveFailures: 0 } });
    // The token pace's one row, in the control table, with the Retry-After it was told.
    const paceRows = await dynamo.scan(CONTROL);
    expect(paceRows.map((row) => row['pk']?.S)).toEqual(['provider-pace#token#client-1']);
    // Its rate: started at the ceiling (TOKEN_REQUESTS_PER_SECOND, 10 by default), cut by the 429.
    expect(JSON.parse(paceRows[0]!['state']!.S!).rate).toBeLessThan(10);
    expect(await store.get('plain', { consistent: true })).toMatchObject({ status: 'active', accessToken: 'at-plain-secret' });
    expect(await store.get('rotating', { consistent: true })).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-rotating-secret', credentialsVersion: 2 });
    const revoked = await store.get('revoked', { consistent: true });
    expect(revoked).toMatchObject({ status: 'failing', health: { consecutiveFailures: 1 } });
    expect(revoked?.health.lastFailureReason).toBe('getToken: the provider refused the credentials; HTTP 401; provider error 1001: refresh token [redacted] was revoked');
    expect(output).toContain('"connection":"revoked"');
    expectNoToken(output + JSON.stringify(result) + JSON.stringify(revoked?.health), seen);
  });
});
