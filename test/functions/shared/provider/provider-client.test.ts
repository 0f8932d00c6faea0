import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HttpProviderClient, parseRetryAfter } from '../../../../functions/shared/provider/provider-client.js';
import { ProviderError } from '../../../../functions/shared/errors.js';
import { outcomeOf } from '../../../../functions/item-sync/outcome/decide.js';
import { ProviderSimulator } from '../../../../dev/simulator/provider-simulator.js';
import { HANG_GUARD_MS } from '../../../support/hang-guard.js';

let sim: ProviderSimulator;
let client: HttpProviderClient;
let token: string;

beforeAll(async () => {
  sim = await ProviderSimulator.start({
    clientId: 'client one/2',
    refreshToken: 'rt-valid-refresh-token',
    items: [
      { id: 'file-1', type: 'file', revision: 3, name: 'a.txt' },
      { id: '../getToken', type: 'file', revision: 1 },
      { id: 'a/b?c#d', type: 'folder', revision: 'r-7' },
      { id: '日本 語', type: 'file', revision: 2 },
    ],
  });
});
afterAll(() => sim.close());

beforeEach(() => {
  sim.clearFaults();
  sim.resetRequests();
  // A client that must not give up waits as long as the test run's hang guard: a loaded machine
  // cannot make it time out (the time-out test below has its own short one).
  client = new HttpProviderClient({ baseUrl: sim.baseUrl, timeoutMs: HANG_GUARD_MS, maxResponseBytes: 64 * 1024 });
  token = sim.issueAccessToken();
});

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

describe('getToken', () => {
  it('sends GET {base}/getToken?client_id=<encoded> with "Authorization: bearer <refresh token>"', async () => {
    const grant = await client.getToken({ clientId: 'client one/2', refreshToken: 'rt-valid-refresh-token' });

    expect(grant.accessToken).toMatch(/^at-/);
    expect(grant.refreshToken).toBeUndefined();
    expect(sim.requests).toHaveLength(1);
    expect(sim.requests[0]).toMatchObject({
      method: 'GET',
      rawUrl: '/api/v2/getToken?client_id=client%20one%2F2',
      endpoint: 'token',
      authorization: 'bearer rt-valid-refresh-token',
      status: 200,
    });
  });

  it('returns a rotated refresh token', async () => {
    const rotating = await ProviderSimulator.start({ clientId: 'c', refreshToken: 'rt-first', rotateRefreshToken: true });
    try {
      const rotatingClient = new HttpProviderClient({ baseUrl: rotating.baseUrl, timeoutMs: HANG_GUARD_MS, maxResponseBytes: 4096 });
      const grant = await rotatingClient.getToken({ clientId: 'c', refreshToken: 'rt-first' });
      expect(grant.refreshToken).toBe(rotating.refreshToken);
      expect(grant.refreshToken).not.toBe('rt-first');
    } finally {
      await rotating.close();
    }
  });

  it('classifies a refused refresh token as unauthorized with the provider error, never the token', async () => {
    const error = await failure(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-wrong-token' }));

    expect(error.kind).toBe('unauthorized');
    expect(error.status).toBe(401);
    expect(error.providerCode).toEqual(expect.any(Number));
    expect(error.message).toMatch(/^getToken: the provider refused the credentials; HTTP 401; provider error \d+: /);
    expect(error.message).not.toContain('rt-wrong-token');
  });

  it.each([
    ['an empty access_token', '{"access_token": ""}', /no non-empty string "access_token"/],
    ['a numeric access_token', '{"access_token": 42}', /no non-empty string "access_token"/],
    ['a non-string refresh_token', '{"access_token": "at-x", "refresh_token": 7}', /"refresh_token" that is not a non-empty string/],
    ['an array', '["at-x"]', /not a JSON object/],
    ['HTML', '<html>maintenance</html>', /the 200 body is not JSON/],
  ])('classifies a 200 with %s as malformed', async (_label, rawBody, message) => {
    sim.addFault({ endpoint: 'token', fault: { kind: 'body', rawBody } });

    const error = await failure(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-valid-refresh-token' }));

    expect(error.kind).toBe('malformed');
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain('at-x');
  });

  // What fetch refuses in a header value (undici: "invalid header value", or not a ByteString), and
  // the control characters it would send but no token holds.
  const unusable = [
    ['a line feed', '\n', 'a line break, U+000A'],
    ['a carriage return', '\r', 'a line break, U+000D'],
    ['NUL', '\u0000', 'the control character U+0000'],
    ['U+0001', '\u0001', 'the control character U+0001'],
    ['DEL', '\u007f', 'the control character U+007F'],
    ['a tab', '\t', 'the control character U+0009'],
    ['a C1 control', '\u0085', 'the control character U+0085'],
    ['a character beyond U+00FF', '\u20ac', 'a character beyond U+00FF, which a header cannot carry'],
  ] as const;

  it.each(unusable)('classifies an access_token holding %s as malformed, never quoting it', async (_label, char, reason) => {
    const secret = `at-unusable-secret${char}tail`;
    sim.addFault({ endpoint: 'token', fault: { kind: 'body', rawBody: JSON.stringify({ access_token: secret }) } });

    const error = await failure(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-valid-refresh-token' }));

    expect(error.kind).toBe('malformed');
    expect(error.message).toBe(`getToken: the 200 body has an "access_token" that cannot be sent in an HTTP header (it holds ${reason})`);
    expect(error.message).not.toContain('unusable-secret');
  });

  it.each(unusable)('classifies a rotated refresh_token holding %s as malformed, never quoting it', async (_label, char, reason) => {
    const secret = `rt-unusable-secret${char}tail`;
    sim.addFault({ endpoint: 'token', fault: { kind: 'body', rawBody: JSON.stringify({ access_token: 'at-fine', refresh_token: secret }) } });

    const error = await failure(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-valid-refresh-token' }));

    expect(error.kind).toBe('malformed');
    expect(error.message).toBe(`getToken: the 200 body has a "refresh_token" that cannot be sent in an HTTP header (it holds ${reason})`);
    expect(error.message).not.toContain('unusable-secret');
  });

  it('accepts tokens of visible ASCII and Latin-1 characters with inner spaces', async () => {
    sim.addFault({ endpoint: 'token', fault: { kind: 'body', rawBody: JSON.stringify({ access_token: 'at-a b~é', refresh_token: 'rt-=+/' }) } });

    await expect(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-valid-refresh-token' })).resolves.toEqual({
      accessToken: 'at-a b~é',
      refreshToken: 'rt-=+/',
    });
  });

  it('refuses to send a stored refresh token that fetch would refuse in a header, without quoting it', async () => {
    const error = await failure(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-stored-secret\nx' }));

    expect(error).toMatchObject({ kind: 'transient', operation: 'getToken', status: undefined });
    expect(error.message).toBe('getToken: the refresh token cannot be sent in an HTTP header (it holds a line break, U+000A)');
    expect(error.cause).toBeUndefined();
    expect(sim.requests).toHaveLength(0);
  });

  it('ignores a null refresh_token and unknown fields', async () => {
    sim.addFault({
      endpoint: 'token',
      fault: { kind: 'body', rawBody: '{"access_token":"at-fresh","refresh_token":null,"scope":"read","expires_in":60}' },
    });
    await expect(client.getToken({ clientId: 'client one/2', refreshToken: 'rt-valid-refresh-token' })).resolves.toEqual({
      accessToken: 'at-fresh',
    });
  });
});

describe('getItem', () => {
  it('sends "Authorization: Bearer <access token>" and returns the parsed item', async () => {
    await expect(client.getItem('file-1', token)).resolves.toEqual({ id: 'file-1', type: 'file', revision: 3, name: 'a.txt' });
    expect(sim.requests[0]).toMatchObject({ rawUrl: '/api/v2/items/file-1', authorization: `Bearer ${token}` });
  });

  it.each([
    ['../getToken', '/api/v2/items/..%2FgetToken'],
    ['a/b?c#d', '/api/v2/items/a%2Fb%3Fc%23d'],
    ['日本 語', '/api/v2/items/%E6%97%A5%E6%9C%AC%20%E8%AA%9E'],
  ])('sends the id %s as one percent-encoded segment under the prefix', async (id, rawUrl) => {
    const item = (await client.getItem(id, token)) as { id: string };

    expect(item.id).toBe(id);
    expect(sim.requests.map((request) => [request.rawUrl, request.endpoint, request.itemId])).toEqual([[rawUrl, 'items', id]]);
  });

  it.each([
    ['a line break', 'at-stored-secret\nx', 'a line break, U+000A'],
    ['NUL', 'at-stored-secret\u0000x', 'the control character U+0000'],
    ['a character beyond U+00FF', 'at-stored-secret\u20acx', 'a character beyond U+00FF, which a header cannot carry'],
  ])('refuses to send an access token holding %s, as fetch would, without quoting it (transient)', async (_label, stored, reason) => {
    const error = await failure(client.getItem('file-1', stored));

    expect(error).toMatchObject({ kind: 'transient', operation: 'getItem', status: undefined });
    expect(error.message).toBe(`getItem: the access token cannot be sent in an HTTP header (it holds ${reason})`);
    expect(error.cause).toBeUndefined();
    expect(sim.requests).toHaveLength(0);
  });

  it('sends an access token with a tab or a C1 control as before (fetch accepts them)', async () => {
    await failure(client.getItem('file-1', 'at-odd\ttoken\u0085'));

    expect(sim.requests).toHaveLength(1);
    expect(sim.requests[0]).toMatchObject({ endpoint: 'items', status: 401 });
  });

  it.each(['.', '..', '\uD800lone'])('refuses the id %j that cannot be one path segment, sending nothing', async (id) => {
    const error = await failure(client.getItem(id, token));

    expect(error.kind).toBe('permanent');
    expect(sim.requests).toHaveLength(0);
  });

  it.each([
    [400, 'permanent'],
    [401, 'unauthorized'],
    [403, 'permanent'],
    [404, 'not-found'],
    [408, 'transient'],
    [409, 'permanent'],
    [418, 'permanent'],
    [429, 'rate-limited'],
    [500, 'transient'],
    [502, 'transient'],
    [503, 'transient'],
    [599, 'transient'],
    [600, 'permanent'],
  ] as const)('classifies HTTP %i as %s and parses the error object', async (status, kind) => {
    sim.addFault({ endpoint: 'items', fault: { kind: 'status', status, body: { error: { code: 9000 + status, message: `failure ${status}` } } } });

    const error = await failure(client.getItem('file-1', token));

    expect(error).toMatchObject({ kind, status, providerCode: 9000 + status, providerMessage: `failure ${status}`, operation: 'getItem' });
    expect(error.message).toContain(`HTTP ${status}; provider error ${9000 + status}: failure ${status}`);
  });

  it('keeps the status when the error body is not an error object', async () => {
    sim.addFault({ endpoint: 'items', fault: { kind: 'status', status: 502, rawBody: '<html>Bad gateway</html>', headers: { 'content-type': 'text/html' } } });

    const error = await failure(client.getItem('file-1', token));

    expect(error).toMatchObject({ kind: 'transient', status: 502, providerCode: undefined, providerMessage: undefined });
  });

  it('reads Retry-After on a 429', async () => {
    sim.addFault({ endpoint: 'items', fault: { kind: 'status', status: 429, headers: { 'Retry-After': '7' } } });

    const error = await failure(client.getItem('file-1', token));

    expect(error).toMatchObject({ kind: 'rate-limited', retryAfterSeconds: 7 });
    // How the record ends is decided in one place: it is retried, delayed by the Retry-After.
    expect(outcomeOf(error, { rateLimitMinDelaySeconds: 0 })).toMatchObject({ kind: 'retry', delaySeconds: 7 });
  });

  it('redacts the access token when the provider echoes it in an error message', async () => {
    sim.addFault({ endpoint: 'items', fault: { kind: 'status', status: 400, body: { error: { code: 1, message: `token ${token} is malformed` } } } });

    const error = await failure(client.getItem('file-1', token));

    expect(error.providerMessage).toBe('token [redacted] is malformed');
    expect(error.message).not.toContain(token);
  });

  it('classifies an HTML 200 as malformed', async () => {
    sim.addFault({ endpoint: 'items', fault: { kind: 'body', rawBody: '<!doctype html><p>login</p>', contentType: 'text/html' } });

    expect((await failure(client.getItem('file-1', token))).kind).toBe('malformed');
  });

  it('classifies a dropped connection as transient', async () => {
    sim.addFault({ endpoint: 'items', times: 1, fault: { kind: 'drop' } });

    const error = await failure(client.getItem('file-1', token));

    expect(error.kind).toBe('transient');
    expect(error.message).toMatch(/^getItem: network failure/);
    expect(error.cause).toBeDefined();
  });

  it('times out (transient) when the provider does not answer', async () => {
    const impatient = new HttpProviderClient({ baseUrl: sim.baseUrl, timeoutMs: 150, maxResponseBytes: 4096 });
    sim.addFault({ endpoint: 'items', times: 1, fault: { kind: 'hang' } });

    const error = await failure(impatient.getItem('file-1', token));

    expect(error).toMatchObject({ kind: 'transient', message: 'getItem: timed out after 150 ms' });
  });

  it('stops when the caller aborts', async () => {
    sim.addFault({ endpoint: 'items', times: 1, fault: { kind: 'hang' } });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);

    const error = await failure(client.getItem('file-1', token, { signal: controller.signal }));

    expect(error).toMatchObject({ kind: 'transient', message: 'getItem: aborted by the caller' });
  });

  it('refuses a body over the size cap', async () => {
    const small = new HttpProviderClient({ baseUrl: sim.baseUrl, timeoutMs: HANG_GUARD_MS, maxResponseBytes: 1024 });
    sim.setItem({ id: 'big', type: 'file', revision: 1, blob: 'x'.repeat(5000) });

    const error = await failure(small.getItem('big', token));

    expect(error).toMatchObject({ kind: 'permanent', status: 200, message: 'getItem: the response body exceeds 1024 bytes; HTTP 200' });
  });

  it('refuses a streamed body over the size cap even without Content-Length', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 10; i++) controller.enqueue(new Uint8Array(512).fill(32));
        controller.close();
      },
    });
    const streaming = new HttpProviderClient({
      baseUrl: 'https://provider.example.com/api',
      timeoutMs: HANG_GUARD_MS,
      maxResponseBytes: 2048,
      fetch: async () => new Response(stream, { status: 200 }),
    });

    expect((await failure(streaming.getItem('x', 'at-token'))).message).toMatch(/exceeds 2048 bytes/);
  });

  it('follows a same-origin redirect with its credentials', async () => {
    sim.addFault({ endpoint: 'items', itemId: 'moved', times: 1, fault: { kind: 'status', status: 302, headers: { Location: '/api/v2/items/file-1' } } });

    await expect(client.getItem('moved', token)).resolves.toMatchObject({ id: 'file-1' });
    expect(sim.requests.map((request) => [request.rawUrl, request.authorization])).toEqual([
      ['/api/v2/items/moved', `Bearer ${token}`],
      ['/api/v2/items/file-1', `Bearer ${token}`],
    ]);
  });

  it('refuses to follow a redirect to another origin', async () => {
    sim.addFault({ endpoint: 'items', times: 1, fault: { kind: 'status', status: 307, headers: { Location: 'https://elsewhere.invalid/steal' } } });

    const error = await failure(client.getItem('file-1', token));

    expect(error).toMatchObject({ kind: 'permanent', status: 307 });
    expect(error.message).toContain('refused a redirect to another origin (https://elsewhere.invalid)');
    expect(sim.requests).toHaveLength(1);
  });

  it('gives up after a bounded number of redirects', async () => {
    sim.addFault({ endpoint: 'items', fault: { kind: 'status', status: 301, headers: { Location: '/api/v2/items/file-1' } } });

    expect((await failure(client.getItem('file-1', token))).message).toMatch(/more than 3 redirects/);
    expect(sim.requests).toHaveLength(3);
  });
});

describe('parseRetryAfter', () => {
  const now = new Date('2026-11-21T10:00:00Z');
  it.each([
    ['12', 12],
    [' 0 ', 0],
    ['Sat, 21 Nov 2026 10:00:30 GMT', 30],
    ['Sat, 21 Nov 2026 09:00:00 GMT', 0],
    ['soon', undefined],
    ['', undefined],
    [null, undefined],
  ])('reads %j as %j seconds', (value, seconds) => {
    expect(parseRetryAfter(value, now)).toBe(seconds);
  });
});
