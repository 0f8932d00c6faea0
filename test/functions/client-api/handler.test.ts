/**
 * The client API's handler (functions/client-api/app.ts) as deployed, over DynamoDB Local, the local KMS
 * model and a mocked SQS: what it reads of API Gateway's event (path segments percent-decoded once,
 * the query string, base64-encoded bodies, an event with little in it), its failures (503
 * `unavailable` for one that may pass, 500 `internal` otherwise) and its one log line a request,
 * which never holds a body, a header or a token.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { createServer } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, SendMessageCommand, SQSServiceException } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import {
  acceptAll,
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
  type Answer,
} from './harness.js';

const api = new ApiHarness();
const RT = token('acme-0001');

beforeAll(() => api.start());
afterAll(async () => {
  // Over every request of this file, the failures' lines included: never a refresh token.
  for (const text of [...api.answered, ...api.written]) expect(text).not.toContain(TOKEN_MARK);
  await api.close();
});
beforeEach(async () => {
  await api.reset();
  expect((await api.put('acme', { clientId: 'client-1', refreshToken: RT })).status).toBe(200);
  api.sqsMock.resetHistory();
});

/** SQS's answer to a call that failed on its side, as the SDK throws it once its own retries are spent. */
const sqsInternalError = (): SQSServiceException =>
  new SQSServiceException({ name: 'InternalError', $fault: 'server', $metadata: { httpStatusCode: 500 }, message: 'We encountered an internal error. Please try again.' });

const UNAVAILABLE = { error: { code: 'unavailable', message: 'a service the API depends on failed for now: try again' } };
const INTERNAL = { error: { code: 'internal', message: 'the request failed inside the API: its log line says why' } };

function errorLines(answer: Answer): Array<Record<string, unknown>> {
  return answer.logs.filter((line) => line['level'] === 'ERROR');
}

describe('the path and the query string', () => {
  it('each path segment is percent-decoded once', async () => {
    const encoded = await api.get('/connections/ac%6De');
    expect(encoded.status).toBe(200);
    expect(encoded.body).toMatchObject({ connection: 'acme', status: 'active' });
    expect(requestLine(encoded)).toMatchObject({ route: 'GET /connections/{connection}', connection: 'acme' });

    // `%2F` is a `/` inside one segment: `acme/pause` is one (refused) connection id, not the pause route.
    const slash = await api.call({ method: 'POST', path: '/connections/acme%2Fpause' });
    expect(slash.status).toBe(404);
    const slashGet = await api.get('/connections/acme%2Fpause');
    expect(slashGet.status).toBe(400);
    expect(slashGet.body).toEqual({ error: { code: 'bad-request', message: 'the connection id may hold only the characters A-Z a-z 0-9 . _ -' } });
    expect((await api.get('/connections/acme')).body.status).toBe('active');

    // Decoded once only: `%2561` is `%61`, not `a`.
    const twice = await api.get('/connections/%2561cme');
    expect(twice.status).toBe(400);
    expect(twice.body).toEqual({ error: { code: 'bad-request', message: 'the connection id may hold only the characters A-Z a-z 0-9 . _ -' } });

    const pause = await api.post('/connections/acme/%70ause');
    expect(pause.status).toBe(200);
    expect(pause.body.status).toBe('paused');
    expect(requestLine(pause)).toMatchObject({ route: 'POST /connections/{connection}/pause' });
  });

  it('an item id holding `/`, sent as ids in the body, is one id', async () => {
    const answer = await api.post('/connections/acme/items', { ids: ['dir/sub/fil-1'] });
    expect(answer).toMatchObject({ status: 200, body: { sent: 1 } });
    expect(api.sentBatches()[0]?.Entries?.[0]?.MessageBody).toBe(JSON.stringify({ connection: 'acme', id: 'dir/sub/fil-1' }));
  });

  it('query parameters are percent-decoded; a repeated one keeps its last value', async () => {
    await api.put('beta', { clientId: 'client-1', refreshToken: token('beta-0001') });
    await api.post('/connections/beta/pause');
    const paused = await api.get('/connections', 'status=p%61used&limit=%32');
    expect(paused.status).toBe(200);
    expect(paused.body.connections.map((view: { connection: string }) => view.connection)).toEqual(['beta']);
    const last = await api.get('/connections', 'status=bogus&status=active');
    expect(last.status).toBe(200);
    expect(last.body.connections.map((view: { connection: string }) => view.connection)).toEqual(['acme']);
    const erase = await api.delete('/connections/beta', 'erase=tru%65');
    expect(erase.status).toBe(202);
  });

  it('an event with little in it: no headers, no query string, no body', async () => {
    const event = { rawPath: '/connections/acme', requestContext: { http: { method: 'GET' } } } as unknown as APIGatewayProxyEventV2;
    const { result } = await captureOutput(() => api.handler(event));
    expect(result?.statusCode).toBe(200);
    expect(JSON.parse(String(result?.body))).toMatchObject({ connection: 'acme', status: 'active' });
  });
});

describe('base64-encoded bodies', () => {
  it('a PUT body sent base64-encoded is read', async () => {
    const answer = await api.call({ method: 'PUT', path: '/connections/beta', body: { clientId: 'client-b', refreshToken: token('beta-0001') }, base64: true });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ connection: 'beta', clientId: 'client-b', status: 'active', refresh: { consecutiveFailures: 0 }, fresh: false, createdAt: iso(T0), updatedAt: iso(T0) });
    expect((await api.store().get('beta', { consistent: true }))?.refreshToken).toBe(token('beta-0001'));
  });

  it('an items body sent base64-encoded, non-ASCII ids kept as they were', async () => {
    const ids = ['Résumé ✓', '日本語/ファイル', '😀'];
    const answer = await api.call({ method: 'POST', path: '/connections/acme/items', body: { ids, lane: 'background' }, base64: true });
    expect(answer).toMatchObject({ status: 200, body: { sent: 3 } });
    expect(api.sentBatches()).toEqual([
      {
        QueueUrl: RECONCILE_QUEUE_URL,
        Entries: ids.map((id, i) => ({
          Id: String(i),
          MessageBody: JSON.stringify({ connection: 'acme', id }),
          MessageGroupId: 'acme',
          MessageAttributes: { lane: { DataType: 'String', StringValue: 'background' } },
        })),
      },
    ]);
  });

  it('a base64 body is measured by its bytes, not its encoding: 1 MiB encoded is taken', async () => {
    const json = JSON.stringify({ ids: ['fil-1'] });
    const body = json.slice(0, -1) + ' '.repeat(1024 * 1024 - json.length) + '}';
    const answer = await api.call({ method: 'POST', path: '/connections/acme/items', body, base64: true });
    expect(answer).toMatchObject({ status: 200, body: { sent: 1 } });
  });
});

describe('failures', () => {
  it('SQS failing (a 500 after the SDK\'s retries): 503 unavailable, ids tried again and given up; the log line says why, with no token', async () => {
    api.sqsMock.on(SendMessageBatchCommand).rejects(sqsInternalError());
    const answer = await api.post('/connections/acme/items', { ids: ['fil-1', 'fil-2'] });
    expect(answer.status).toBe(503);
    expect(answer.body).toEqual(UNAVAILABLE);
    // Sent with the enqueue's own re-sends (5 attempts), always the same batch.
    expect(api.sqsMock).toReceiveCommandTimes(SendMessageBatchCommand, 5);
    for (const batch of api.sentBatches()) expect(batch.QueueUrl).toBe(SYNC_QUEUE_URL);
    expect(errorLines(answer)).toEqual([
      expect.objectContaining({
        message: 'request failed',
        service: 'client-api',
        method: 'POST',
        error: { name: 'TransientError', message: '0 of 2 ids were sent to the users lane; the others failed (InternalError): sending them all again is safe' },
      }),
    ]);
    expect(requestLine(answer)).toMatchObject({ level: 'INFO', method: 'POST', status: 503 });
    expect(answer.output).not.toContain(TOKEN_MARK);

    // SQS back: the same request passes.
    api.sqsMock.on(SendMessageBatchCommand).callsFake(acceptAll);
    expect(await api.post('/connections/acme/items', { ids: ['fil-1', 'fil-2'] })).toMatchObject({ status: 200, body: { sent: 2 } });
  });

  it('the erase queue failing: a 5xx once the removal and the erase are written; asked again, the erase is sent for the same start', async () => {
    api.sqsMock.on(SendMessageCommand).rejects(sqsInternalError());
    api.clock.advance(60_000);
    const failed = await api.delete('/connections/acme', 'erase=true');
    // The removal and the erase are written already: asking again is safe, so a 503 `unavailable`.
    expect(failed.status).toBe(503);
    expect(failed.body).toEqual(UNAVAILABLE);
    expect(errorLines(failed)).toEqual([
      expect.objectContaining({
        message: 'request failed',
        method: 'DELETE',
        route: 'DELETE /connections/{connection}',
        connection: 'acme',
        error: expect.objectContaining({ name: 'TransientError', message: expect.stringContaining('SQS SendMessage to the erase queue failed (InternalError') }),
      }),
    ]);
    expect(failed.output).not.toContain(TOKEN_MARK);
    expect((await api.row('acme'))?.['erase']?.M?.['startedAt']).toEqual({ S: iso(T0 + 60_000) });

    api.sqsMock.on(SendMessageCommand).resolves({ MessageId: 'msg-erase' });
    api.clock.advance(10_000);
    const again = await api.delete('/connections/acme', 'erase=true');
    expect(again.status).toBe(202);
    expect(again.body.erase).toEqual({ state: 'waiting', startedAt: iso(T0 + 60_000), rowsDeleted: 0, objectsDeleted: 0 });
    expect(api.sentMessages().at(-1)).toEqual({
      QueueUrl: ERASE_QUEUE_URL,
      MessageBody: JSON.stringify({ connection: 'acme', startedAt: iso(T0 + 60_000) }),
      DelaySeconds: ERASE_SETTLE_SECONDS - 10,
    });
  });

  it('DynamoDB unreachable: 503 unavailable, nothing sealed, nothing sent', async () => {
    const port = await closedPort();
    const unreachable = new DynamoDBClient({ endpoint: `http://127.0.0.1:${port}`, region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS });
    try {
      api.handler = api.build({}, { dynamodb: unreachable });
      const seals = api.sealing.calls['GenerateDataKey'] ?? 0;
      const answer = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0002') });
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual(UNAVAILABLE);
      expect(errorLines(answer)[0]).toMatchObject({ message: 'request failed', error: { name: 'TransientError' } });
      expect(api.sealing.calls['GenerateDataKey'] ?? 0).toBe(seals);
      expect(api.sqsMock.calls()).toHaveLength(0);
      expect(answer.output).not.toContain(TOKEN_MARK);
    } finally {
      unreachable.destroy();
    }
  });

  it('a connections table that does not exist: 500 internal, the log line naming CONNECTIONS_TABLE_NAME', async () => {
    api.handler = api.build({ CONNECTIONS_TABLE_NAME: 'no-such-table' });
    const answer = await api.get('/connections/acme');
    expect(answer.status).toBe(500);
    expect(answer.body).toEqual(INTERNAL);
    expect(errorLines(answer)[0]).toMatchObject({ message: 'request failed', error: { name: 'ConfigError', message: expect.stringContaining('CONNECTIONS_TABLE_NAME') } });
    expect(requestLine(answer)).toMatchObject({ status: 500 });
  });

  it('the connections key disabled (an outage of the key): a PUT is 503 unavailable and writes nothing', async () => {
    const before = await api.scan();
    api.sealing.model.disable(api.sealing.keyArn);
    try {
      const answer = await api.put('acme', { clientId: 'client-1', refreshToken: token('acme-0002') });
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual(UNAVAILABLE);
      expect(errorLines(answer)[0]).toMatchObject({ error: { name: 'TransientError', message: expect.stringContaining('CONNECTIONS_KEY_ARN') } });
      expect(answer.output).not.toContain(TOKEN_MARK);
    } finally {
      api.sealing.model.enable(api.sealing.keyArn);
    }
    expect(await api.scan()).toEqual(before);
  });
});

describe('the log line', () => {
  it('one line a request: method, route, status, connection, duration; never a body or a header', async () => {
    const answer = await api.call({
      method: 'PUT',
      path: '/connections/acme',
      headers: { authorization: 'AWS4-HMAC-SHA256 Credential=secret-credential', 'x-amz-security-token': 'session-secret' },
      body: { clientId: 'client-logged-not', refreshToken: token('acme-0002') },
    });
    expect(answer.status).toBe(200);
    expect(answer.logs).toHaveLength(1);
    const line = requestLine(answer);
    expect(line).toMatchObject({ level: 'INFO', message: 'request', service: 'client-api', method: 'PUT', route: 'PUT /connections/{connection}', status: 200, connection: 'acme', durationMs: 0 });
    for (const key of Object.keys(line)) expect(['level', 'message', 'timestamp', 'service', 'sampling_rate', 'xray_trace_id', 'method', 'route', 'status', 'connection', 'durationMs']).toContain(key);
    for (const secret of ['secret-credential', 'session-secret', 'client-logged-not', TOKEN_MARK]) expect(answer.output).not.toContain(secret);
  });

  it('the duration is the clock\'s', async () => {
    const started = api.clock.at;
    let reads = 0;
    // Each reading of the clock is 7 ms after the one before.
    api.handler = api.build({}, { clock: { now: () => new Date(started + 7 * reads++) } });
    const answer = await api.get('/connections/acme');
    expect(answer.status).toBe(200);
    expect(requestLine(answer)['durationMs']).toBe(7 * (reads - 1));
  });

  it('an unknown route: route none, no connection', async () => {
    const answer = await api.get('/nope');
    expect(answer.status).toBe(404);
    expect(requestLine(answer)).toMatchObject({ method: 'GET', route: 'none', status: 404 });
    expect(requestLine(answer)).not.toHaveProperty('connection');
  });

  it('a refused request is logged at INFO with its status, its body not', async () => {
    const answer = await api.put('acme', { clientId: 'client-1', refreshToken: `${token('acme')}\nbroken` });
    expect(answer.status).toBe(400);
    expect(answer.logs).toHaveLength(1);
    expect(requestLine(answer)).toMatchObject({ level: 'INFO', method: 'PUT', status: 400, connection: 'acme' });
    expect(answer.output).not.toContain('broken');
  });
});

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
