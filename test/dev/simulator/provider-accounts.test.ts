/**
 * The provider simulator's accounts: tokens bound to their account, revocation, re-authorization,
 * rotation replay, per-account items, faults, rate limits and counters. Over HTTP on 127.0.0.1 (an
 * ephemeral port) where the provider is asked as the system asks it; in process (the model) for the
 * controls and for a thousand accounts.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { ProviderSimulator, DEFAULT_ACCOUNT, type AccountCounters, type SimulatorOptions } from '../../../dev/simulator/provider-simulator.js';
import { ProviderModel, type ProviderAnswer } from '../../../dev/simulator/provider-model.js';

const started: ProviderSimulator[] = [];

async function startSim(options: SimulatorOptions = {}): Promise<ProviderSimulator> {
  const sim = await ProviderSimulator.start(options);
  started.push(sim);
  return sim;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
});

interface Reply {
  status: number;
  body: Record<string, unknown> & { error?: { code: number; message: string } };
}

async function reply(res: Response): Promise<Reply> {
  return { status: res.status, body: (await res.json()) as Reply['body'] };
}

async function getToken(sim: ProviderSimulator, refreshToken: string, clientId = sim.clientId): Promise<Reply> {
  const url = `${sim.baseUrl}/getToken?client_id=${encodeURIComponent(clientId)}`;
  return reply(await fetch(url, { headers: { authorization: `bearer ${refreshToken}` } }));
}

async function accessToken(sim: ProviderSimulator, refreshToken: string, clientId = sim.clientId): Promise<string> {
  const answer = await getToken(sim, refreshToken, clientId);
  expect(answer.status).toBe(200);
  return answer.body.access_token as string;
}

async function getItem(sim: ProviderSimulator, id: string, token: string): Promise<Reply> {
  return reply(await fetch(`${sim.baseUrl}/items/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${token}` } }));
}

/** Two accounts holding the same id with different contents, and one id each of their own. */
function twoAccounts(extra: SimulatorOptions = {}): SimulatorOptions {
  return {
    clientId: 'app',
    ...extra,
    accounts: [
      { id: 'acme', refreshToken: 'rt-acme', items: [{ id: 'shared', type: 'file', owner: 'acme', revision: 1 }, { id: 'only-acme', type: 'folder', revision: 1 }] },
      { id: 'globex', refreshToken: 'rt-globex', items: [{ id: 'shared', type: 'file', owner: 'globex', revision: 7 }, { id: 'only-globex', type: 'file', revision: 2 }] },
    ],
  };
}

const zero: AccountCounters = {
  tokenRequests: 0,
  tokensIssued: 0,
  itemRequests: 0,
  itemsServed: 0,
  notFound: 0,
  unauthorized: 0,
  rateLimited: 0,
  replays: 0,
  lastRequestAt: undefined,
};

describe('accounts over HTTP', () => {
  it('binds an access token to its account: its own items only, another account\'s id is 404', async () => {
    const sim = await startSim(twoAccounts());
    expect(sim.accountIds()).toEqual([DEFAULT_ACCOUNT, 'acme', 'globex']);
    const acme = await accessToken(sim, 'rt-acme');
    const globex = await accessToken(sim, 'rt-globex');

    expect(await getItem(sim, 'shared', acme)).toMatchObject({ status: 200, body: { owner: 'acme', revision: 1 } });
    expect(await getItem(sim, 'shared', globex)).toMatchObject({ status: 200, body: { owner: 'globex', revision: 7 } });
    expect(await getItem(sim, 'only-globex', globex)).toMatchObject({ status: 200, body: { id: 'only-globex' } });
    expect(await getItem(sim, 'only-globex', acme)).toMatchObject({ status: 404, body: { error: { code: 404 } } });
    expect(await getItem(sim, 'only-acme', globex)).toMatchObject({ status: 404 });
    // The account `default` holds neither.
    expect(await getItem(sim, 'shared', sim.issueAccessToken())).toMatchObject({ status: 404 });

    expect(sim.requests.map((r) => [r.endpoint, r.account, r.status])).toEqual([
      ['token', 'acme', 200],
      ['token', 'globex', 200],
      ['items', 'acme', 200],
      ['items', 'globex', 200],
      ['items', 'globex', 200],
      ['items', 'acme', 404],
      ['items', 'globex', 404],
      ['items', DEFAULT_ACCOUNT, 404],
    ]);
    expect(sim.accountCounters('acme')).toMatchObject({ tokenRequests: 1, tokensIssued: 1, itemRequests: 2, itemsServed: 1, notFound: 1, unauthorized: 0 });
    expect(sim.accountCounters('globex')).toMatchObject({ tokenRequests: 1, tokensIssued: 1, itemRequests: 3, itemsServed: 2, notFound: 1 });
  });

  it('asks for the client id of the refresh token\'s account: another known one is 400, an unknown one 400', async () => {
    const sim = await startSim({ clientId: 'app', accounts: [{ id: 'other-app', clientId: 'app-2', refreshToken: 'rt-2' }] });
    expect(await getToken(sim, 'rt-2', 'app')).toMatchObject({ status: 400, body: { error: { code: 400, message: 'client_id does not match the refresh token' } } });
    expect(await getToken(sim, sim.refreshToken, 'app-2')).toMatchObject({ status: 400 });
    expect(await getToken(sim, 'rt-2', 'nobody')).toMatchObject({ status: 400, body: { error: { message: 'unknown client_id' } } });
    expect(await getToken(sim, 'rt-unknown', 'app-2')).toMatchObject({ status: 401, body: { error: { message: 'invalid refresh token' } } });
    expect((await getToken(sim, 'rt-2', 'app-2')).status).toBe(200);
    expect((await getToken(sim, sim.refreshToken, 'app')).status).toBe(200);
    expect(sim.account('other-app').clientId).toBe('app-2');
  });

  it('revoking an account answers 401 on both endpoints, for it alone, until it is re-authorized', async () => {
    const sim = await startSim(twoAccounts());
    const acme = await accessToken(sim, 'rt-acme');
    const globex = await accessToken(sim, 'rt-globex');

    sim.revokeAccount('globex');
    expect(sim.account('globex').authorized).toBe(false);
    expect(await getToken(sim, 'rt-globex')).toMatchObject({ status: 401, body: { error: { code: 401, message: 'refresh token revoked' } } });
    expect(await getItem(sim, 'shared', globex)).toMatchObject({ status: 401, body: { error: { code: 401 } } });
    expect(() => sim.issueAccessToken('globex')).toThrow(/no live grant/);
    // The other account goes on.
    expect((await getItem(sim, 'shared', acme)).status).toBe(200);
    expect((await getToken(sim, 'rt-acme')).status).toBe(200);

    const fresh = sim.reauthorizeAccount('globex');
    expect(fresh).toMatch(/^rt-/);
    expect(sim.account('globex').refreshToken).toBe(fresh);
    expect(sim.account('globex').authorized).toBe(true);
    // The old tokens stay dead; the new grant works.
    expect((await getToken(sim, 'rt-globex')).status).toBe(401);
    expect((await getItem(sim, 'shared', globex)).status).toBe(401);
    const again = await accessToken(sim, fresh);
    expect(await getItem(sim, 'shared', again)).toMatchObject({ status: 200, body: { owner: 'globex' } });

    expect(sim.accountCounters('globex')).toMatchObject({ tokenRequests: 4, tokensIssued: 2, itemRequests: 3, itemsServed: 1, unauthorized: 4 });
    expect(sim.accountCounters('acme')).toMatchObject({ tokenRequests: 2, tokensIssued: 2, unauthorized: 0 });
  });

  it('a rotated-away refresh token presented again revokes the account\'s grant, access tokens included', async () => {
    const sim = await startSim(twoAccounts({ rotateRefreshToken: true }));
    const first = await getToken(sim, 'rt-acme');
    const rotated = first.body.refresh_token as string;
    expect(rotated).toMatch(/^rt-/);
    expect(sim.account('acme').refreshToken).toBe(rotated);
    const second = await getToken(sim, rotated);
    expect(second.status).toBe(200);
    const current = second.body.refresh_token as string;
    expect((await getItem(sim, 'shared', first.body.access_token as string)).status).toBe(200);

    // `rotated` was used once already: the replay ends the grant.
    expect(await getToken(sim, rotated)).toMatchObject({ status: 401, body: { error: { message: 'refresh token reused: grant revoked' } } });
    expect(sim.account('acme').authorized).toBe(false);
    expect((await getToken(sim, current)).status).toBe(401);
    expect((await getItem(sim, 'shared', first.body.access_token as string)).status).toBe(401);
    expect((await getItem(sim, 'shared', second.body.access_token as string)).status).toBe(401);
    // Presenting an old token of the ended grant again changes nothing more.
    expect((await getToken(sim, 'rt-acme')).status).toBe(401);
    expect(sim.accountCounters('acme')).toMatchObject({ tokenRequests: 5, tokensIssued: 2, replays: 1, unauthorized: 5 });
    // The other account still rotates as before.
    const other = await getToken(sim, 'rt-globex');
    expect((await getToken(sim, other.body.refresh_token as string)).status).toBe(200);

    // Re-authorized, the account works again; a token of the ended grant does not end the new one.
    const fresh = sim.reauthorizeAccount('acme');
    expect((await getToken(sim, rotated)).status).toBe(401);
    const renewed = await getToken(sim, fresh);
    expect(renewed.status).toBe(200);
    expect((await getItem(sim, 'shared', renewed.body.access_token as string)).status).toBe(200);
    expect(sim.accountCounters('acme').replays).toBe(1);
  });

  it('with revokeOnReplay off, a replayed refresh token is only refused', async () => {
    const sim = await startSim({ ...twoAccounts({ rotateRefreshToken: true }), revokeOnReplay: false });
    const first = await getToken(sim, 'rt-acme');
    expect(await getToken(sim, 'rt-acme')).toMatchObject({ status: 401, body: { error: { message: 'invalid refresh token' } } });
    expect((await getToken(sim, first.body.refresh_token as string)).status).toBe(200);
    expect(sim.accountCounters('acme')).toMatchObject({ replays: 1, tokensIssued: 2, unauthorized: 1 });
  });

  it('changes items in one account only', async () => {
    const sim = await startSim(twoAccounts());
    const acme = await accessToken(sim, 'rt-acme');
    const globex = await accessToken(sim, 'rt-globex');
    sim.account('acme').bumpRevision('shared');
    sim.account('acme').setItem({ id: 'new', type: 'file', revision: 1 });
    sim.account('globex').deleteItem('only-globex');

    expect(await getItem(sim, 'shared', acme)).toMatchObject({ status: 200, body: { revision: 2 } });
    expect(await getItem(sim, 'shared', globex)).toMatchObject({ status: 200, body: { revision: 7 } });
    expect((await getItem(sim, 'new', acme)).status).toBe(200);
    expect((await getItem(sim, 'new', globex)).status).toBe(404);
    expect((await getItem(sim, 'only-globex', globex)).status).toBe(404);
    expect(sim.account('acme').itemIds()).toEqual(['shared', 'only-acme', 'new']);
    expect(sim.account('globex').itemIds()).toEqual(['shared']);
    expect(sim.account('globex').getItem('shared')).toEqual({ id: 'shared', type: 'file', owner: 'globex', revision: 7 });
    // The methods without an account are the account `default`'s.
    sim.setItem({ id: 'shared', type: 'folder', revision: 1 });
    expect(sim.getItem('shared')!.type).toBe('folder');
    expect(sim.account('acme').getItem('shared')!.type).toBe('file');
  });

  it('matches faults on the account of the token presented', async () => {
    const sim = await startSim(twoAccounts());
    const acme = await accessToken(sim, 'rt-acme');
    const globex = await accessToken(sim, 'rt-globex');
    sim.addFault({ account: 'globex', fault: { kind: 'status', status: 503 } });
    expect((await getItem(sim, 'shared', acme)).status).toBe(200);
    expect((await getItem(sim, 'shared', globex)).status).toBe(503);
    expect((await getToken(sim, 'rt-globex')).status).toBe(503);
    expect((await getToken(sim, 'rt-acme')).status).toBe(200);
    // A request with no token names no account: never matched.
    const res = await fetch(`${sim.baseUrl}/items/shared`);
    expect(res.status).toBe(401);
  });
});

/** One request to the model, in process. */
function call(model: ProviderModel, rawUrl: string, authorization?: string): ProviderAnswer & { json?: Record<string, unknown> } {
  const answer = model.respond(model.receive({ method: 'GET', rawUrl, ...(authorization !== undefined ? { authorization } : {}) }));
  if (answer.kind !== 'response') return answer;
  return { ...answer, json: JSON.parse(answer.body.toString()) as Record<string, unknown> };
}

function status(answer: ProviderAnswer): number {
  return answer.kind === 'response' ? answer.status : 0;
}

describe('accounts in the model', () => {
  it('makes the account `default` of the simulator\'s own options, as before', () => {
    const model = new ProviderModel({ clientId: 'c', refreshToken: 'rt-d', items: [{ id: 'x', type: 'file' }] });
    expect(model.accountIds()).toEqual([DEFAULT_ACCOUNT]);
    const account = model.account(DEFAULT_ACCOUNT);
    expect([model.clientId, model.refreshToken, account.clientId, account.refreshToken]).toEqual(['c', 'rt-d', 'c', 'rt-d']);
    expect(model.itemIds()).toEqual(['x']);
    expect(account.itemIds()).toEqual(['x']);
    expect(status(call(model, '/api/v2/items/x', `Bearer ${model.issueAccessToken()}`))).toBe(200);
  });

  it('adds accounts with generated, distinct, seeded refresh tokens, and refuses bad ones', () => {
    const make = (): ProviderModel => new ProviderModel({ seed: 4, accounts: [{ id: 'a' }, { id: 'b' }] });
    const [one, two] = [make(), make()];
    expect(one.account('a').refreshToken).toMatch(/^rt-[0-9a-f]{24}$/);
    expect(one.account('a').refreshToken).not.toBe(one.account('b').refreshToken);
    expect(two.account('b').refreshToken).toBe(one.account('b').refreshToken);
    expect(one.account('a').clientId).toBe('test-client');

    expect(() => one.addAccount({ id: 'a' })).toThrow(/exists already/);
    expect(() => one.addAccount({ id: 'bad id' })).toThrow(RangeError);
    expect(() => one.addAccount({ id: 'x'.repeat(65) })).toThrow(RangeError);
    expect(() => one.addAccount({ id: 'c', refreshToken: one.account('a').refreshToken })).toThrow(/issued already/);
    expect(() => one.reauthorizeAccount('a', { refreshToken: one.account('b').refreshToken })).toThrow(/issued already/);
    expect(one.account('a').authorized).toBe(true);
    expect(one.hasAccount('c')).toBe(false);
    expect(() => one.account('c')).toThrow(/no account/);
  });

  it('revokeAccessTokens ends one account\'s access tokens, or every account\'s', () => {
    const model = new ProviderModel({ accounts: [{ id: 'a', items: [{ id: 'x', type: 'file' }] }], items: [{ id: 'x', type: 'file' }] });
    const a = model.issueAccessToken('a');
    const d = model.issueAccessToken();
    model.revokeAccessTokens('a');
    expect(status(call(model, '/api/v2/items/x', `Bearer ${a}`))).toBe(401);
    expect(status(call(model, '/api/v2/items/x', `Bearer ${d}`))).toBe(200);
    const a2 = model.issueAccessToken('a');
    model.revokeAccessTokens();
    expect(status(call(model, '/api/v2/items/x', `Bearer ${a2}`))).toBe(401);
    expect(status(call(model, '/api/v2/items/x', `Bearer ${d}`))).toBe(401);
    // The refresh tokens still work.
    expect(status(call(model, '/api/v2/getToken?client_id=test-client', `bearer ${model.account('a').refreshToken}`))).toBe(200);
  });

  it('re-authorizing with keepOtherGrants leaves the earlier grant working beside the new one', () => {
    const model = new ProviderModel({ accounts: [{ id: 'a', refreshToken: 'rt-a1' }] });
    const second = model.reauthorizeAccount('a', { keepOtherGrants: true, refreshToken: 'rt-a2' });
    expect(model.account('a').refreshTokens).toEqual(['rt-a1', 'rt-a2']);
    expect(status(call(model, '/api/v2/getToken?client_id=test-client', 'bearer rt-a1'))).toBe(200);
    expect(status(call(model, '/api/v2/getToken?client_id=test-client', `bearer ${second}`))).toBe(200);
    model.reauthorizeAccount('a', { refreshToken: 'rt-a3' });
    expect(model.account('a').refreshTokens).toEqual(['rt-a3']);
    expect(status(call(model, '/api/v2/getToken?client_id=test-client', 'bearer rt-a1'))).toBe(401);
  });

  it('counts per account, records when it was last asked and when it was revoked, and resets', () => {
    let now = 1_000;
    const model = new ProviderModel({ now: () => now, accounts: [{ id: 'a', refreshToken: 'rt-a', items: [{ id: 'x', type: 'file' }] }] });
    expect(model.accountCounters('a')).toEqual(zero);
    const token = call(model, '/api/v2/getToken?client_id=test-client', 'bearer rt-a').json!.access_token as string;
    now = 2_000;
    call(model, '/api/v2/items/x', `Bearer ${token}`);
    call(model, '/api/v2/items/y', `Bearer ${token}`);
    call(model, '/api/v2/items/x', 'Bearer at-forged'); // no account's
    expect(model.accountCounters('a')).toEqual({ ...zero, tokenRequests: 1, tokensIssued: 1, itemRequests: 2, itemsServed: 1, notFound: 1, lastRequestAt: 2_000 });
    expect(model.account(DEFAULT_ACCOUNT).counters()).toEqual(zero);

    now = 3_000;
    model.revokeAccount('a');
    expect(model.account('a').revokedAt).toBe(3_000);
    for (let i = 0; i < 3; i += 1) call(model, '/api/v2/items/x', `Bearer ${token}`);
    call(model, '/api/v2/getToken?client_id=test-client', 'bearer rt-a');
    expect(model.accountCounters('a')).toMatchObject({ tokenRequests: 2, itemRequests: 5, unauthorized: 4, lastRequestAt: 3_000 });

    model.resetCounters();
    expect(model.accountCounters('a')).toEqual(zero);
    model.reauthorizeAccount('a');
    expect(model.account('a').revokedAt).toBeUndefined();
  });

  it('limits each account on its own with a rate limit of scope account', () => {
    const now = 0;
    const model = new ProviderModel({
      now: () => now,
      accounts: [{ id: 'a', items: [{ id: 'x', type: 'file' }] }, { id: 'b', items: [{ id: 'x', type: 'file' }] }],
      rateLimit: { requestsPerSecond: 2, burst: 2, scope: 'account' },
    });
    const a = model.issueAccessToken('a');
    const b = model.issueAccessToken('b');
    const statuses = (token: string): number[] => [1, 2, 3].map(() => status(call(model, '/api/v2/items/x', `Bearer ${token}`)));
    expect(statuses(a)).toEqual([200, 200, 429]);
    expect(statuses(b)).toEqual([200, 200, 429]);
    expect(model.accountCounters('a').rateLimited).toBe(1);
    expect(model.rateLimited).toBe(2);

    // The default scope: one bucket for every account.
    model.setRateLimit({ requestsPerSecond: 2, burst: 2 });
    expect([a, b, a].map((token) => status(call(model, '/api/v2/items/x', `Bearer ${token}`)))).toEqual([200, 200, 429]);
  });

  it('limits each account to its own rate when the accounts\' limits differ (a map or a function), one changed alone later', () => {
    let now = 0;
    const items = [{ id: 'x', type: 'file' as const }];
    const model = new ProviderModel({
      now: () => now,
      accounts: [{ id: 'a', items }, { id: 'b', items }, { id: 'c', items }],
      rateLimit: { requestsPerSecond: 2, scope: 'account', accountRequestsPerSecond: { a: 5, b: 1 } },
    });
    const tokens = Object.fromEntries(['a', 'b', 'c'].map((id) => [id, model.issueAccessToken(id)]));
    const served = (id: string, requests: number): number =>
      Array.from({ length: requests }, () => status(call(model, '/api/v2/items/x', `Bearer ${tokens[id]}`))).filter((s) => s === 200).length;
    // A full bucket is one second of the account's own rate; then its rate refills it.
    expect([served('a', 10), served('b', 10), served('c', 10)]).toEqual([5, 1, 2]);
    now = 1_000;
    expect([served('a', 10), served('b', 10), served('c', 10)]).toEqual([5, 1, 2]);
    expect(model.accountCounters('a')).toMatchObject({ itemsServed: 10, rateLimited: 10 });

    // One account's limit halves: its bucket is kept (no fuller than the new burst), the others' untouched.
    now = 1_400;
    model.setAccountRateLimit('a', 2.5);
    expect(served('a', 10)).toBe(2); // 0.4 s at 5/s, before the change
    now = 2_400;
    expect([served('a', 10), served('b', 10), served('c', 10)]).toEqual([2, 1, 2]);

    // A function of the account id; a rate that is not above 0 is refused.
    model.setRateLimit({ requestsPerSecond: 1, scope: 'account', accountRequestsPerSecond: (id) => (id === 'c' ? 3 : undefined) });
    expect([served('a', 10), served('b', 10), served('c', 10)]).toEqual([1, 1, 3]);
    expect(() => model.setRateLimit({ requestsPerSecond: 1, scope: 'account', accountRequestsPerSecond: { a: 0 } })).toThrow(RangeError);
    expect(() => model.setAccountRateLimit('a', -1)).toThrow(RangeError);
    model.setRateLimit({ requestsPerSecond: 1 });
    expect(() => model.setAccountRateLimit('a', 1)).toThrow('setAccountRateLimit needs a rate limit of scope account');
  });

  it('serves 1,000 accounts of 100 items each, every token reaching its own account only', () => {
    const ACCOUNTS = 1_000;
    const ITEMS = 100;
    const model = new ProviderModel({ seed: 11 });
    model.limitRecordedRequests(100);
    const ids = Array.from({ length: ITEMS }, (_, n) => `fil-${n}`);
    for (let a = 0; a < ACCOUNTS; a += 1) {
      model.addAccount({ id: `acct-${a}`, items: ids.map((id) => ({ id, type: 'file' as const, revision: a })) });
    }
    model.account('acct-7').setItem({ id: 'only-7', type: 'file', revision: 1 });
    const tokens = new Map<string, string>();
    for (let a = 0; a < ACCOUNTS; a += 1) {
      const answer = call(model, '/api/v2/getToken?client_id=test-client', `bearer ${model.account(`acct-${a}`).refreshToken}`);
      tokens.set(`acct-${a}`, answer.json!.access_token as string);
    }
    model.revokeAccount('acct-500');
    // Tallied, then checked once: what each account was answered.
    let served = 0;
    const wrong: string[] = [];
    for (let a = 0; a < ACCOUNTS; a += 1) {
      const token = tokens.get(`acct-${a}`)!;
      for (const id of ids) {
        const answer = call(model, `/api/v2/items/${id}`, `Bearer ${token}`);
        if (a === 500 ? status(answer) !== 401 : answer.json?.revision !== a) wrong.push(`acct-${a} ${id}`);
        else if (a !== 500) served += 1;
      }
      const only7 = status(call(model, '/api/v2/items/only-7', `Bearer ${token}`));
      if (only7 !== (a === 7 ? 200 : a === 500 ? 401 : 404)) wrong.push(`acct-${a} only-7: ${only7}`);
    }
    expect(wrong).toEqual([]);
    expect(served).toBe((ACCOUNTS - 1) * ITEMS);
    expect(model.requests).toHaveLength(100);
    expect(model.accountCounters('acct-500')).toMatchObject({ tokenRequests: 1, itemRequests: ITEMS + 1, unauthorized: ITEMS + 1, itemsServed: 0 });
    expect(model.accountCounters('acct-7')).toMatchObject({ itemRequests: ITEMS + 1, itemsServed: ITEMS + 1, notFound: 0 });
    expect(model.accountCounters('acct-8')).toMatchObject({ itemRequests: ITEMS + 1, itemsServed: ITEMS, notFound: 1 });
  });
});
