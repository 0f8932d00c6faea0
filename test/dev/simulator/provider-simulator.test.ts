import { request as httpRequest } from 'node:http';
import { describe, it, expect, beforeAll, afterAll, afterEach } from 'vitest';
import { ProviderSimulator, type SimulatorOptions } from '../../../dev/simulator/provider-simulator.js';
import { generateItemTree, mulberry32 } from '../../../dev/simulator/item-tree.js';
import { HANG_GUARD_MS } from '../../support/hang-guard.js';


const started: ProviderSimulator[] = [];

async function startSim(options: SimulatorOptions = {}): Promise<ProviderSimulator> {
  const sim = await ProviderSimulator.start(options);
  started.push(sim);
  return sim;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
});

function tokenUrl(sim: ProviderSimulator, clientId = sim.clientId): string {
  return `${sim.baseUrl}/getToken?client_id=${encodeURIComponent(clientId)}`;
}

function getToken(sim: ProviderSimulator, refreshToken = sim.refreshToken, clientId = sim.clientId): Promise<Response> {
  return fetch(tokenUrl(sim, clientId), { headers: { authorization: `bearer ${refreshToken}` } });
}

function getItem(sim: ProviderSimulator, id: string, accessToken?: string, init: RequestInit = {}): Promise<Response> {
  const headers: Record<string, string> = accessToken ? { authorization: `Bearer ${accessToken}` } : {};
  return fetch(`${sim.baseUrl}/items/${encodeURIComponent(id)}`, { ...init, headers });
}

/** A request whose target is sent exactly as given (fetch would normalise dot segments). */
function rawGet(sim: ProviderSimulator, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(sim.baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method: 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function expectError(res: Response, status: number): Promise<void> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  const body = (await res.json()) as { error: { code: unknown; message: unknown } };
  expect(body.error.code).toBe(status);
  expect(typeof body.error.message).toBe('string');
}

const fileItem = { id: 'fil-1', type: 'file' as const, name: 'Résumé ✓.pdf', revision: 3, meta: { rev: 7 } };

describe('getToken', () => {
  it('issues an access token for the right client id and refresh token', async () => {
    const sim = await startSim({ clientId: 'cid', refreshToken: 'rt-1' });
    const res = await fetch(tokenUrl(sim), { headers: { authorization: 'BeArEr rt-1' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).not.toBeNull();
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ token_type: 'bearer', expires_in: 3600 });
    expect(body.access_token).toMatch(/^at-/);
    expect(body).not.toHaveProperty('refresh_token');
    // The token really works.
    sim.setItem(fileItem);
    expect((await getItem(sim, 'fil-1', body.access_token as string)).status).toBe(200);
    expect(sim.requests.map((r) => [r.endpoint, r.status])).toEqual([['token', 200], ['items', 200]]);
    expect(sim.requests[0]!.authorization).toBe('BeArEr rt-1');
  });

  it('gives distinct access tokens and a seeded default refresh token', async () => {
    const a = await startSim({ seed: 9 });
    const b = await startSim({ seed: 9 });
    expect(a.refreshToken).toMatch(/^rt-initial-/);
    expect(a.refreshToken).toBe(b.refreshToken);
    const t1 = a.issueAccessToken();
    const t2 = a.issueAccessToken();
    expect(t1).not.toBe(t2);
  });

  it('answers 400 for a missing or wrong client_id', async () => {
    const sim = await startSim();
    await expectError(await getToken(sim, sim.refreshToken, 'someone-else'), 400);
    await expectError(await fetch(`${sim.baseUrl}/getToken`, { headers: { authorization: `bearer ${sim.refreshToken}` } }), 400);
  });

  it('answers 401 for a missing or wrong refresh token', async () => {
    const sim = await startSim();
    await expectError(await getToken(sim, 'rt-wrong'), 401);
    await expectError(await fetch(tokenUrl(sim)), 401);
    await expectError(await fetch(tokenUrl(sim), { headers: { authorization: `Basic ${sim.refreshToken}` } }), 401);
  });

  it('rotates the refresh token and refuses the old one (revokeOnReplay off: the grant lives on)', async () => {
    const sim = await startSim({ rotateRefreshToken: true, revokeOnReplay: false, refreshToken: 'rt-old' });
    const first = (await (await getToken(sim, 'rt-old')).json()) as Record<string, string>;
    expect(first.refresh_token).toMatch(/^rt-/);
    expect(first.refresh_token).not.toBe('rt-old');
    expect(sim.refreshToken).toBe(first.refresh_token);
    await expectError(await getToken(sim, 'rt-old'), 401);
    const second = (await (await getToken(sim, first.refresh_token)).json()) as Record<string, string>;
    expect(second.refresh_token).not.toBe(first.refresh_token);
    // Access tokens from before the rotation stay valid.
    sim.setItem(fileItem);
    expect((await getItem(sim, 'fil-1', first.access_token)).status).toBe(200);
  });
});

describe('items', () => {
  it('serves a stored item (a deep copy) with 200, 401 without a valid token and 404 when unknown', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    const res = await getItem(sim, 'fil-1', token);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.json()).toEqual(fileItem);

    await expectError(await getItem(sim, 'fil-1'), 401);
    await expectError(await getItem(sim, 'fil-1', 'at-forged'), 401);
    await expectError(await getItem(sim, 'nope', token), 404);

    sim.deleteItem('fil-1');
    await expectError(await getItem(sim, 'fil-1', token), 404);
    expect(sim.itemIds()).toEqual([]);
  });

  it('keeps its own copy of items', async () => {
    const sim = await startSim();
    const item = { id: 'x', type: 'folder' as const, nested: { a: 1 } };
    sim.setItem(item);
    item.nested.a = 2;
    expect(sim.getItem('x')).toEqual({ id: 'x', type: 'folder', nested: { a: 1 } });
    sim.getItem('x')!.nested = 'changed';
    expect(sim.getItem('x')!.nested).toEqual({ a: 1 });
  });

  it('decodes ids with reserved and unicode characters from one segment', async () => {
    const sim = await startSim();
    const token = sim.issueAccessToken();
    for (const id of ['a/b?c#d', '日本語 ✓', '100%', 'x+y z']) {
      sim.setItem({ id, type: 'file' });
      const res = await getItem(sim, id, token);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { id: string }).id).toBe(id);
    }
    expect(sim.requests.at(0)!.rawUrl).toBe('/api/v2/items/a%2Fb%3Fc%23d');
    expect(sim.requests.at(0)!.itemId).toBe('a/b?c#d');
  });

  it('treats ..%2FgetToken as the item id ../getToken, never as the token endpoint', async () => {
    const sim = await startSim();
    const token = sim.issueAccessToken();
    const res = await fetch(`${sim.baseUrl}/items/..%2FgetToken?client_id=${sim.clientId}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    await expectError(res, 404);
    expect(sim.requests).toHaveLength(1);
    expect(sim.requests[0]).toMatchObject({ endpoint: 'items', itemId: '../getToken', status: 404, path: '/api/v2/items/..%2FgetToken' });

    // A raw (un-normalised) dot segment is two segments: no route at all.
    const raw = await rawGet(sim, '/api/v2/items/../getToken?client_id=test-client', { authorization: `bearer ${sim.refreshToken}` });
    expect(raw.status).toBe(404);
    expect(sim.requests[1]).toMatchObject({ endpoint: 'other', status: 404 });
    expect(sim.requests.some((r) => r.endpoint === 'token')).toBe(false);
  });

  it('answers 400 for a malformed percent-encoding and 404 other for extra segments', async () => {
    const sim = await startSim();
    const token = sim.issueAccessToken();
    await expectError(await fetch(`${sim.baseUrl}/items/%E0%A4%A`, { headers: { authorization: `Bearer ${token}` } }), 400);
    expect(sim.requests[0]).toMatchObject({ endpoint: 'items', status: 400 });
    expect(sim.requests[0]!.itemId).toBeUndefined();
    await expectError(await fetch(`${sim.baseUrl}/items/a/b`, { headers: { authorization: `Bearer ${token}` } }), 404);
    await expectError(await fetch(`${sim.baseUrl}/items/`, { headers: { authorization: `Bearer ${token}` } }), 404);
    expect(sim.requests.slice(1).map((r) => r.endpoint)).toEqual(['other', 'other']);
  });

  it('serves a 600 KB item', async () => {
    const big = { id: 'big', type: 'file' as const, revision: 1, blob: 'é'.repeat(300_000) };
    const sim = await startSim({ items: [big] });
    const res = await getItem(sim, 'big', sim.issueAccessToken());
    expect(res.status).toBe(200);
    expect(Number(res.headers.get('content-length'))).toBeGreaterThan(600_000);
    expect(await res.json()).toEqual(big);
  });

  it('answers 404 "other" for unknown paths and methods, and records them', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    await expectError(await fetch(`${sim.baseUrl}/elsewhere`), 404);
    await expectError(await fetch(`${sim.baseUrl}/items/fil-1`, { method: 'POST', body: 'x', headers: { authorization: `Bearer ${token}` } }), 404);
    await expectError(await fetch(`${sim.baseUrl}/getToken/?client_id=${sim.clientId}`), 404);
    expect(sim.requests.map((r) => [r.method, r.endpoint, r.status])).toEqual([
      ['GET', 'other', 404],
      ['POST', 'other', 404],
      ['GET', 'other', 404],
    ]);
  });

  it('revokeAccessTokens invalidates every token issued so far', async () => {
    const sim = await startSim({ items: [fileItem] });
    const viaApi = ((await (await getToken(sim)).json()) as { access_token: string }).access_token;
    const direct = sim.issueAccessToken();
    expect((await getItem(sim, 'fil-1', viaApi)).status).toBe(200);
    sim.revokeAccessTokens();
    await expectError(await getItem(sim, 'fil-1', viaApi), 401);
    await expectError(await getItem(sim, 'fil-1', direct), 401);
    expect((await getItem(sim, 'fil-1', sim.issueAccessToken())).status).toBe(200);
  });

  it('handles hundreds of concurrent requests', async () => {
    const items = generateItemTree({ count: 50, seed: 3 });
    const sim = await startSim({ items });
    const token = sim.issueAccessToken();
    const results = await Promise.all(
      Array.from({ length: 400 }, (_, i) => getItem(sim, items[i % items.length]!.id, token).then(async (r) => [r.status, ((await r.json()) as { id: string }).id])),
    );
    results.forEach(([status, id], i) => {
      expect(status).toBe(200);
      expect(id).toBe(items[i % items.length]!.id);
    });
    expect(sim.requests).toHaveLength(400);
    sim.resetRequests();
    expect(sim.requests).toHaveLength(0);
  });
});

describe('path prefix', () => {
  it('serves under a custom prefix and nowhere else', async () => {
    const sim = await startSim({ prefix: '/custom/p/', items: [fileItem] });
    expect(sim.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/custom\/p$/);
    expect((await getToken(sim)).status).toBe(200);
    const origin = new URL(sim.baseUrl).origin;
    await expectError(await fetch(`${origin}/getToken?client_id=${sim.clientId}`, { headers: { authorization: `bearer ${sim.refreshToken}` } }), 404);
    await expectError(await fetch(`${origin}/api/v2/items/fil-1`, { headers: { authorization: `Bearer ${sim.issueAccessToken()}` } }), 404);
    expect(sim.requests.map((r) => r.endpoint)).toEqual(['token', 'other', 'other']);
  });

  it('works without a prefix', async () => {
    const sim = await startSim({ prefix: '', items: [fileItem] });
    expect(sim.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await getToken(sim)).status).toBe(200);
    expect((await getItem(sim, 'fil-1', sim.issueAccessToken())).status).toBe(200);
  });

  it('defaults to /api/v2', async () => {
    const sim = await startSim();
    expect(new URL(sim.baseUrl).pathname).toBe('/api/v2');
  });
});

describe('faults', () => {
  it('status with a Retry-After header, before any auth check', async () => {
    const sim = await startSim({ items: [fileItem] });
    sim.addFault({ endpoint: 'items', fault: { kind: 'status', status: 429, headers: { 'Retry-After': '7' } } });
    const res = await getItem(sim, 'fil-1'); // no token at all: the fault still wins
    expect(res.headers.get('retry-after')).toBe('7');
    await expectError(res, 429);
    expect(sim.requests[0]).toMatchObject({ status: 429, fault: 'status' });
  });

  it('status without a Retry-After header, with a custom or raw body', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    const remove = sim.addFault({ fault: { kind: 'status', status: 503 } });
    const plain = await getItem(sim, 'fil-1', token);
    expect(plain.headers.get('retry-after')).toBeNull();
    await expectError(plain, 503);
    remove();

    sim.addFault({ times: 1, fault: { kind: 'status', status: 500, body: { oops: true } } });
    const custom = await getItem(sim, 'fil-1', token);
    expect(custom.status).toBe(500);
    expect(await custom.json()).toEqual({ oops: true });

    sim.addFault({ times: 1, fault: { kind: 'status', status: 502, rawBody: '<html>Bad Gateway</html>', headers: { 'content-type': 'text/html' } } });
    const raw = await getItem(sim, 'fil-1', token);
    expect(raw.status).toBe(502);
    expect(raw.headers.get('content-type')).toBe('text/html');
    expect(await raw.text()).toBe('<html>Bad Gateway</html>');

    expect((await getItem(sim, 'fil-1', token)).status).toBe(200);
  });

  it('delay answers normally after the wait', async () => {
    const sim = await startSim({ items: [fileItem] });
    sim.addFault({ fault: { kind: 'delay', ms: 150 } });
    const startedAt = performance.now();
    const res = await getItem(sim, 'fil-1', sim.issueAccessToken());
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(145);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(fileItem);
  });

  it('latencyMs applies to every response', async () => {
    const sim = await startSim({ latencyMs: 60 });
    const startedAt = performance.now();
    await expectError(await fetch(`${sim.baseUrl}/nothing`), 404);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(55);
  });

  it('body sends a raw 200 body (HTML, truncated JSON)', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    sim.addFault({ times: 1, fault: { kind: 'body', rawBody: '<!doctype html><p>login</p>', contentType: 'text/html; charset=utf-8' } });
    sim.addFault({ times: 1, fault: { kind: 'body', rawBody: '{"id":"fil-1","ty' } });
    const html = await getItem(sim, 'fil-1', token);
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await html.text()).toBe('<!doctype html><p>login</p>');
    const truncated = await getItem(sim, 'fil-1', token);
    expect(truncated.status).toBe(200);
    await expect(truncated.json()).rejects.toThrow();
    expect((await getItem(sim, 'fil-1', token)).status).toBe(200);
  });

  it('drop destroys the connection: fetch rejects', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    sim.addFault({ times: 1, fault: { kind: 'drop' } });
    await expect(getItem(sim, 'fil-1', token)).rejects.toThrow();
    expect(sim.requests[0]).toMatchObject({ status: 0, fault: 'drop' });
    expect((await getItem(sim, 'fil-1', token)).status).toBe(200);
  });

  it('hang never answers; the client times out and close() is prompt', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    sim.addFault({ fault: { kind: 'hang' } });
    const err = await getItem(sim, 'fil-1', token, { signal: AbortSignal.timeout(150) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).toBe('TimeoutError');
    // Leave another one hanging, with no time-out of its own, and close while it is open: only
    // close() can end it (were it not ended, the test would wait for the run's hang guard and fail).
    const pending = getItem(sim, 'fil-1', token).then(
      () => 'answered',
      () => 'failed',
    );
    while (sim.requests.length < 2) await new Promise((r) => setTimeout(r, 5));
    await sim.close();
    expect(await pending).toBe('failed');
  });

  it('close() cancels pending delays', async () => {
    const sim = await startSim({ items: [fileItem] });
    // A delay longer than the run's hang guard: only close() can end the request before it.
    sim.addFault({ fault: { kind: 'delay', ms: 2 * HANG_GUARD_MS } });
    const pending = getItem(sim, 'fil-1', sim.issueAccessToken()).then(() => 'answered', () => 'failed');
    while (sim.requests.length < 1) await new Promise((r) => setTimeout(r, 5));
    await sim.close();
    expect(await pending).toBe('failed');
  });

  it('times limits a rule and it is removed when used up; first matching rule wins', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    sim.addFault({ times: 2, fault: { kind: 'status', status: 503 } });
    sim.addFault({ times: 1, fault: { kind: 'status', status: 500 } });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await getItem(sim, 'fil-1', token)).status);
    expect(statuses).toEqual([503, 503, 500, 200]);
  });

  it('matches on endpoint and itemId', async () => {
    const sim = await startSim({ items: [fileItem, { id: 'other/id', type: 'folder' }] });
    const token = sim.issueAccessToken();
    sim.addFault({ endpoint: 'token', fault: { kind: 'status', status: 500 } });
    sim.addFault({ itemId: 'other/id', fault: { kind: 'status', status: 403 } });
    expect((await getToken(sim)).status).toBe(500);
    expect((await getItem(sim, 'fil-1', token)).status).toBe(200);
    expect((await getItem(sim, 'other/id', token)).status).toBe(403);
    sim.clearFaults();
    expect((await getToken(sim)).status).toBe(200);
    expect((await getItem(sim, 'other/id', token)).status).toBe(200);
  });

  it('probability draws from the seeded PRNG: deterministic per seed, roughly the right share', async () => {
    async function pattern(seed: number): Promise<number[]> {
      const sim = await startSim({ seed, items: [fileItem] });
      const token = sim.issueAccessToken();
      sim.addFault({ probability: 0.3, fault: { kind: 'status', status: 503 } });
      const out: number[] = [];
      for (let i = 0; i < 100; i += 1) out.push((await getItem(sim, 'fil-1', token)).status);
      return out;
    }
    const a = await pattern(42);
    const b = await pattern(42);
    const c = await pattern(43);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const failures = a.filter((s) => s === 503).length;
    expect(failures).toBeGreaterThan(10);
    expect(failures).toBeLessThan(50);
    expect(new Set(a)).toEqual(new Set([200, 503]));
  });

  it('probability 0 never applies and lets the next rule match', async () => {
    const sim = await startSim({ items: [fileItem] });
    const token = sim.issueAccessToken();
    sim.addFault({ probability: 0, fault: { kind: 'status', status: 500 } });
    sim.addFault({ times: 1, fault: { kind: 'status', status: 418 } });
    expect((await getItem(sim, 'fil-1', token)).status).toBe(418);
    expect((await getItem(sim, 'fil-1', token)).status).toBe(200);
  });

  it('rejects invalid rules', async () => {
    const sim = await startSim();
    expect(() => sim.addFault({ probability: 2, fault: { kind: 'drop' } })).toThrow(RangeError);
    expect(() => sim.addFault({ times: -1, fault: { kind: 'drop' } })).toThrow(RangeError);
    expect(() => sim.addFault({ fault: { kind: 'status', status: 42 } })).toThrow(RangeError);
  });
});

describe('bumpRevision', () => {
  it('increments a number at a dot path', async () => {
    const sim = await startSim({ revisionField: 'meta.rev', items: [fileItem] });
    sim.bumpRevision('fil-1');
    expect(sim.getItem('fil-1')).toMatchObject({ revision: 3, meta: { rev: 8 } });
    const res = await getItem(sim, 'fil-1', sim.issueAccessToken());
    expect(((await res.json()) as { meta: { rev: number } }).meta.rev).toBe(8);
    sim.bumpRevision('fil-1');
    expect((sim.getItem('fil-1')!.meta as { rev: number }).rev).toBe(9);
  });

  it('increments or appends a suffix for string revisions, creates a missing one', async () => {
    const sim = await startSim({ items: [
      { id: 'a', type: 'file', revision: 'r9' },
      { id: 'b', type: 'file', revision: 'abc' },
      { id: 'c', type: 'file', revision: 'v-009' },
      { id: 'd', type: 'file' },
    ] });
    for (const id of ['a', 'b', 'c', 'd']) sim.bumpRevision(id);
    expect(['a', 'b', 'c', 'd'].map((id) => sim.getItem(id)!.revision)).toEqual(['r10', 'abc-1', 'v-010', 1]);
    expect(() => sim.bumpRevision('missing')).toThrow();
  });
});

describe('generateItemTree', () => {
  let tree: ReturnType<typeof generateItemTree>;
  beforeAll(() => {
    tree = generateItemTree({ count: 300, seed: 7, revisionField: 'meta.rev' });
  });
  afterAll(() => {
    tree = [];
  });

  it('is deterministic for a seed', () => {
    expect(generateItemTree({ count: 300, seed: 7, revisionField: 'meta.rev' })).toEqual(tree);
    expect(generateItemTree({ count: 300, seed: 8, revisionField: 'meta.rev' })).not.toEqual(tree);
    const r1 = mulberry32(5);
    const r2 = mulberry32(5);
    const xs = Array.from({ length: 5 }, () => r1());
    expect(xs).toEqual(Array.from({ length: 5 }, () => r2()));
    xs.forEach((x) => expect(x >= 0 && x < 1).toBe(true));
  });

  it('is a tree of folders and files with the revision at the dot path', () => {
    expect(tree).toHaveLength(300);
    const root = tree[0]!;
    expect(root).toMatchObject({ id: 'fld-0001', type: 'folder', parentId: null });
    const byId = new Map(tree.map((i) => [i.id, i]));
    expect(byId.size).toBe(300);
    for (const item of tree.slice(1)) {
      expect(item.id).toMatch(item.type === 'folder' ? /^fld-\d{4}$/ : /^fil-\d{4}$/);
      expect(byId.get(item.parentId as string)?.type).toBe('folder');
      expect(typeof (item.meta as { rev: unknown }).rev).toBe('number');
      expect(item).not.toHaveProperty('revision');
      expect(Number.isNaN(Date.parse(item.modifiedAt as string))).toBe(false);
      expect(Array.isArray(item.tags)).toBe(true);
    }
    const files = tree.filter((i) => i.type === 'file');
    expect(files.length).toBeGreaterThan(100);
    expect(tree.some((i) => i.type === 'folder' && i.parentId !== root.id && i.parentId !== null)).toBe(true);
    expect(files.some((i) => /[^\x00-\x7f]/.test(i.name as string))).toBe(true);
    expect(tree.some((i) => i.description === null)).toBe(true);
    expect(tree.some((i) => i.description === '')).toBe(true);
    expect(tree.some((i) => Array.isArray(i.tags) && i.tags.length === 0)).toBe(true);
    for (const f of files) expect(f).toMatchObject({ size: expect.any(Number), mimeType: expect.any(String), createdBy: { id: expect.any(String), name: expect.any(String) } });
  });

  it('defaults to a top-level numeric revision and can be served', async () => {
    const items = generateItemTree({ count: 20, seed: 1 });
    expect(items.every((i) => typeof i.revision === 'number')).toBe(true);
    const sim = await startSim({ items });
    expect(sim.itemIds()).toEqual(items.map((i) => i.id));
    const res = await getItem(sim, items[5]!.id, sim.issueAccessToken());
    expect(await res.json()).toEqual(items[5]);
  });
});
