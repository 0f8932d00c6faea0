/**
 * The client's retries, time-outs and errors (clients/typescript/src/transport.ts, errors.ts), with
 * a scripted fetch and an injected sleep and random, so that no test waits for a real backoff:
 * - a 429 waits its Retry-After (seconds, or an HTTP date), a long one throws at once; a 5xx is tried
 *   again, then passes; a 4xx is never tried again; at most `retries` more tries, each signed again;
 *   full jitter, capped; a failed connection is tried again; the caller's signal ends the waits;
 * - a hung server on 127.0.0.1: each try is abandoned after `timeoutMs`, then a `timeout` error;
 * - errors typed by their code (the API's, API Gateway's 403 and 429, none), with `rejected`, and
 *   never a token in a message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContentSyncError, createClient, type ClientOptions } from '../../../clients/typescript/src/index.js';
import { startServer, type TestServer } from './servers.js';

const BASE = 'https://abc123.execute-api.eu-west-1.amazonaws.com/';
const KEY = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret-key-of-the-retry-tests', sessionToken: 'session-token-of-the-retry-tests' };
const VIEW = { connection: 'acme', clientId: 'client-1', status: 'active', refresh: { consecutiveFailures: 0 }, fresh: false, createdAt: '2026-11-24T10:00:00.000Z', updatedAt: '2026-11-24T10:00:00.000Z' };

type Step = { status: number; body?: unknown; headers?: Record<string, string> } | Error;

/** A client whose fetch answers `steps` in order (the last one again once they run out); what was sent and waited is kept. */
function scripted(steps: Step[], options: Partial<ClientOptions> = {}) {
  const sent: Array<{ url: string; method: string; headers: Record<string, string>; body: string | undefined }> = [];
  const waits: number[] = [];
  const client = createClient({
    baseUrl: BASE,
    credentials: KEY,
    random: () => 0.5,
    sleep: async (ms) => void waits.push(ms),
    fetch: async (url, init) => {
      sent.push({ url: url.href, method: String(init.method), headers: { ...(init.headers as Record<string, string>) }, body: init.body === undefined ? undefined : Buffer.from(init.body as Uint8Array).toString('utf8') });
      const step = steps[Math.min(sent.length - 1, steps.length - 1)]!;
      if (step instanceof Error) throw step;
      return new Response(step.body === undefined ? null : JSON.stringify(step.body), { status: step.status, headers: { 'content-type': 'application/json', ...step.headers } });
    },
    ...options,
  });
  return { client, sent, waits };
}

async function refusal(promise: Promise<unknown>): Promise<ContentSyncError> {
  const error = await promise.then(
    () => expect.fail('the call passed'),
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ContentSyncError);
  return error as ContentSyncError;
}

const apiError = (code: string, message = `a ${code} of the test`) => ({ error: { code, message } });

describe('retries', () => {
  it('a 429 with Retry-After in seconds: waits it, then passes', async () => {
    const { client, sent, waits } = scripted([{ status: 429, body: { message: 'Too Many Requests' }, headers: { 'retry-after': '7' } }, { status: 200, body: VIEW }]);
    expect(await client.getConnection('acme')).toEqual(VIEW);
    expect(sent).toHaveLength(2);
    expect(waits).toEqual([7000]);
  });

  it('a Retry-After that is an HTTP date: waits until then', async () => {
    const now = Date.parse('2026-11-24T10:00:00.000Z');
    const { client, waits } = scripted([{ status: 503, body: apiError('unavailable'), headers: { 'retry-after': 'Tue, 24 Nov 2026 10:00:12 GMT' } }, { status: 200, body: VIEW }], { now: () => now });
    await client.getConnection('acme');
    expect(waits).toEqual([12_000]);
  });

  it('a Retry-After over maxRetryAfterMs: thrown at once, for the caller to come back later', async () => {
    const { client, sent, waits } = scripted([{ status: 429, body: { message: 'Too Many Requests' }, headers: { 'retry-after': '3600' } }]);
    const error = await refusal(client.getConnection('acme'));
    expect(error).toMatchObject({ status: 429, code: 'throttled', message: 'Too Many Requests', tries: 1, retryable: true });
    expect(sent).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it('503 twice, then 200: three tries, full-jitter waits (random 0.5 of 200, then of 400 ms), each try signed again', async () => {
    const { client, sent, waits } = scripted([{ status: 503, body: apiError('unavailable') }, { status: 503, body: apiError('unavailable') }, { status: 200, body: { sent: 2 } }]);
    expect(await client.sendIds('acme', ['a', 'b'], { lane: 'background' })).toEqual({ sent: 2 });
    expect(sent).toHaveLength(3);
    expect(waits).toEqual([100, 200]);
    for (const request of sent) {
      expect(request.method).toBe('POST');
      expect(request.body).toBe('{"ids":["a","b"],"lane":"background"}');
      expect(request.headers['authorization']).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\//);
      expect(request.headers['x-amz-security-token']).toBe(KEY.sessionToken);
    }
  });

  it('every try is signed again: the credentials are asked for each time', async () => {
    let asked = 0;
    const { client } = scripted([{ status: 500, body: apiError('internal') }, { status: 502, body: { message: 'Bad Gateway' } }, { status: 200, body: VIEW }], {
      credentials: async () => {
        asked += 1;
        return KEY;
      },
    });
    await client.pauseConnection('acme');
    expect(asked).toBe(3);
  });

  it('5xx every time: 1 + retries tries, then the last error; the waits capped at capMs', async () => {
    const { client, sent, waits } = scripted([{ status: 503, body: apiError('unavailable', 'try again') }], { random: () => 0.999, backoff: { baseMs: 200, capMs: 300 } });
    const error = await refusal(client.resumeConnection('acme'));
    expect(error).toMatchObject({ status: 503, code: 'unavailable', message: 'try again', tries: 4, operation: 'POST /connections/{connection}/resume' });
    expect(sent).toHaveLength(4);
    expect(waits).toEqual([199, 299, 299]);
    const none = scripted([{ status: 503, body: apiError('unavailable') }], { retries: 0 });
    expect(await refusal(none.client.getConnection('acme'))).toMatchObject({ tries: 1 });
    expect(none.sent).toHaveLength(1);
  });

  it('400, 404, 409 and 410: never tried again', async () => {
    for (const [status, code] of [
      [400, 'bad-request'],
      [404, 'not-found'],
      [409, 'conflict'],
      [410, 'cursor-expired'],
    ] as const) {
      const { client, sent, waits } = scripted([{ status, body: apiError(code) }, { status: 200, body: VIEW }]);
      const error = await refusal(client.getConnection('acme'));
      expect(error).toMatchObject({ status, code, tries: 1, retryable: false });
      expect(sent).toHaveLength(1);
      expect(waits).toEqual([]);
    }
  });

  it('a failed connection: tried again, then passes; failing every time, a `network` error with its cause', async () => {
    const passes = scripted([new TypeError('fetch failed'), new TypeError('fetch failed'), { status: 200, body: VIEW }]);
    expect(await passes.client.getConnection('acme')).toEqual(VIEW);
    expect(passes.sent).toHaveLength(3);
    const fails = scripted([new TypeError('fetch failed')], { retries: 2 });
    const error = await refusal(fails.client.getConnection('acme'));
    expect(error).toMatchObject({ status: 0, code: 'network', tries: 3, retryable: true });
    expect(error.cause).toBeInstanceOf(TypeError);
  });

  it("the caller's signal: aborted during a wait between tries, it rejects with its reason and tries no more", async () => {
    const controller = new AbortController();
    const { client, sent } = scripted([{ status: 503, body: apiError('unavailable') }], {
      sleep: async () => {
        controller.abort(new Error('the caller gave up'));
        throw controller.signal.reason;
      },
    });
    await expect(client.getConnection('acme', { signal: controller.signal })).rejects.toThrow('the caller gave up');
    expect(sent).toHaveLength(1);
  });
});

describe('time-outs: a server on 127.0.0.1 that never answers', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(() => 'hang');
  });
  afterAll(() => server.close());

  it('each try abandoned after timeoutMs, tried again, then a `timeout` error (status 0)', async () => {
    const waits: number[] = [];
    const client = createClient({ baseUrl: server.url, region: 'eu-west-1', credentials: KEY, timeoutMs: 200, retries: 1, sleep: async (ms) => void waits.push(ms), random: () => 0 });
    const error = await refusal(client.getConnection('acme'));
    expect(error).toMatchObject({ status: 0, code: 'timeout', tries: 2, operation: 'GET /connections/{connection}', message: 'no answer within 200 ms, 2 tries' });
    expect(waits).toEqual([0]);
  });

  it("the caller's signal, aborted first, ends the wait with its own reason, not a time-out", async () => {
    const controller = new AbortController();
    const client = createClient({ baseUrl: server.url, signer: false, timeoutMs: 60_000 });
    const pending = client.getConnection('acme', { signal: controller.signal });
    const arrived = server.received.length;
    while (server.received.length === arrived) await new Promise((resolve) => setImmediate(resolve));
    controller.abort(new Error('stopped by the caller'));
    await expect(pending).rejects.toThrow('stopped by the caller');
  });
});

describe('errors typed by their code', () => {
  it("API Gateway's own answers: 403 forbidden, 429 throttled (after the retries), 413 too-large; request id kept", async () => {
    const forbidden = await refusal(scripted([{ status: 403, body: { message: 'Forbidden' }, headers: { 'apigw-requestid': 'req-1' } }]).client.listConnectionsPage());
    expect(forbidden).toMatchObject({ status: 403, code: 'forbidden', message: 'Forbidden', requestId: 'req-1', operation: 'GET /connections', tries: 1 });
    const throttled = await refusal(scripted([{ status: 429, body: { message: 'Too Many Requests' } }]).client.listConnectionsPage());
    expect(throttled).toMatchObject({ status: 429, code: 'throttled', tries: 4 });
    const large = await refusal(scripted([{ status: 413, body: { message: 'Request Entity Too Large' } }]).client.sendIds('acme', ['a']));
    expect(large).toMatchObject({ status: 413, code: 'too-large' });
  });

  it("the API's codes as sent, `rejected` with a refused id, and a body that is not JSON named by its status", async () => {
    const rejected = [{ index: 1, reason: 'the item id is empty' }];
    const refused = await refusal(scripted([{ status: 400, body: { ...apiError('bad-request', 'an id is refused: nothing was sent'), rejected } }]).client.sendIds('acme', ['a', '']));
    expect(refused).toMatchObject({ status: 400, code: 'bad-request', message: 'an id is refused: nothing was sent', rejected });
    const odd = await refusal(scripted([{ status: 500, body: '<html>oops</html>' }], { retries: 0 }).client.getConnection('acme'));
    expect(odd).toMatchObject({ status: 500, code: 'internal', message: 'HTTP 500' });
  });

  it('never a token in an error: a signature refusal quoting the canonical request, a server echoing the refresh token', async () => {
    const quoting = {
      message:
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.\n\nThe Canonical String for this request should have been\n' +
        `'PUT\n/connections/acme\n\nhost:abc123.execute-api.eu-west-1.amazonaws.com\nx-amz-security-token:${KEY.sessionToken}\n'`,
    };
    const error = await refusal(scripted([{ status: 403, body: quoting }]).client.putConnection('acme', { clientId: 'client-1', refreshToken: 'rt-never-in-a-message' }));
    expect(error.message).toBe('The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.');
    const echo = await refusal(
      scripted([{ status: 400, body: apiError('bad-request', `refused rt-never-in-a-message with ${KEY.sessionToken} and ${KEY.secretAccessKey}`) }]).client.putConnection('acme', {
        clientId: 'client-1',
        refreshToken: 'rt-never-in-a-message',
      }),
    );
    expect(echo.message).toBe('refused [redacted] with [redacted] and [redacted]');
    const everything = JSON.stringify({ ...echo, message: echo.message, stack: echo.stack });
    for (const secret of ['rt-never-in-a-message', KEY.sessionToken, KEY.secretAccessKey]) expect(everything).not.toContain(secret);
  });
});

describe('paths, answers, options', () => {
  it('path segments percent-encoded (`/` as %2F); ".", ".." and empty ones refused before any request', async () => {
    const { client, sent } = scripted([{ status: 200, body: { connection: 'acme', id: 'a/b c?d#e' } }]);
    await client.getItem('acme', 'a/b c?d#e');
    expect(sent[0]!.url).toBe(`${BASE}connections/acme/items/a%2Fb%20c%3Fd%23e`);
    for (const id of ['.', '..', '']) await expect(client.getItem('acme', id)).rejects.toBeInstanceOf(TypeError);
    expect(sent).toHaveLength(1);
  });

  it('parseJson: an item whose integers are beyond 2^53 read exact by a parser that keeps them', async () => {
    const text = '{"connection":"acme","id":"big","type":"file","revision":"1","syncedAt":"2026-11-24T10:00:00.000Z","item":{"size":12345678901234567890}}';
    const client = createClient({
      baseUrl: BASE,
      signer: false,
      fetch: async () => new Response(text, { status: 200 }),
      parseJson: (json) => JSON.parse(json.replace(/:(\d{16,})/g, ':"$1"')),
    });
    expect((await client.getItem('acme', 'big')).item).toEqual({ size: '12345678901234567890' });
  });

  it('options refused: a time-out that is not positive, retries that are not a whole number', () => {
    expect(() => createClient({ baseUrl: BASE, timeoutMs: 0 })).toThrow(RangeError);
    expect(() => createClient({ baseUrl: BASE, retries: 1.5 })).toThrow(RangeError);
    expect(() => createClient({ baseUrl: BASE, retries: -1 })).toThrow(RangeError);
  });
});
