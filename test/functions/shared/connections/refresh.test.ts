/**
 * One connection's refresh (functions/shared/connections/refresh.ts) over the in-memory store: the
 * lease, the provider's answers (rotation, refusal, transient failure), credentials replaced while
 * it ran, a result write that fails; no token in any result reason, log line or error.
 */
import { describe, expect, it } from 'vitest';
import { refreshConnection, REFRESH_LEASE_MS, type RefreshPorts } from '../../../../functions/shared/connections/refresh.js';
import { expectNoToken, FakeClock, FakeProvider, MemoryConnectionStore, MemoryLog, providerError, T0 } from './fakes.js';
import { ProviderError, TransientError } from '../../../../functions/shared/errors.js';

const RT = 'rt-acme-secret';

function setup() {
  const store = new MemoryConnectionStore();
  store.seed({ connection: 'acme', clientId: 'client-acme', refreshToken: RT });
  const provider = new FakeProvider();
  const clock = new FakeClock();
  const log = new MemoryLog();
  const sleeps: number[] = [];
  const ports: RefreshPorts = { store, provider, clock, log, newOwner: () => 'owner-1', sleep: async (ms) => void sleeps.push(ms) };
  return { store, provider, clock, log, ports, sleeps };
}

describe('refreshConnection', () => {
  it('takes a 5-minute lease, calls getToken with the client id and refresh token, stores the access token', async () => {
    const { store, provider, ports } = setup();
    let leaseSeen: unknown;
    provider.answers.set(RT, () => {
      leaseSeen = store.row('acme')?.refreshLease;
      return { accessToken: 'at-new-secret' };
    });
    const result = await refreshConnection(ports, 'acme');
    expect(leaseSeen).toEqual({ owner: 'owner-1', until: T0 + REFRESH_LEASE_MS });
    expect(provider.calls).toEqual([{ clientId: 'client-acme', refreshToken: RT }]);
    expect(result).toEqual({
      kind: 'refreshed',
      connection: 'acme',
      clientId: 'client-acme',
      token: 'at-new-secret',
      refreshedAt: new Date(T0).toISOString(),
      rotated: false,
      previousStatus: 'active',
      status: 'active',
    });
    expect(store.row('acme')).toMatchObject({ accessToken: 'at-new-secret', refreshToken: RT, credentialsVersion: 1, health: { consecutiveFailures: 0, lastSuccessAt: new Date(T0).toISOString() } });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
  });

  it('stores a rotated refresh token with the access token; the same one returned is no rotation', async () => {
    const { store, provider, ports } = setup();
    provider.answers.set(RT, { accessToken: 'at-1-secret', refreshToken: RT });
    expect(await refreshConnection(ports, 'acme')).toMatchObject({ kind: 'refreshed', rotated: false });
    expect(store.row('acme')?.credentialsVersion).toBe(1);
    provider.answers.set(RT, { accessToken: 'at-2-secret', refreshToken: 'rt-rotated-secret' });
    expect(await refreshConnection(ports, 'acme')).toMatchObject({ kind: 'refreshed', rotated: true });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-2-secret', credentialsVersion: 2 });
  });

  it('a lease held by another: busy until its end, and no getToken', async () => {
    const { store, provider, ports } = setup();
    store.rows.get('acme')!.refreshLease = { owner: 'other', until: T0 + 1000 };
    expect(await refreshConnection(ports, 'acme')).toEqual({ kind: 'busy', connection: 'acme', until: T0 + 1000 });
    expect(provider.calls).toHaveLength(0);
  });

  it.each([
    ['401', providerError('unauthorized', 401, `refresh token ${RT} expired`)],
    ['400', providerError('permanent', 400, 'invalid_grant')],
    ['403', providerError('permanent', 403)],
  ])('refused (%s): the connection is failing, with a reason that holds no token', async (_status, error) => {
    const { store, provider, ports, log } = setup();
    provider.answers.set(RT, error);
    const result = await refreshConnection(ports, 'acme');
    expect(result).toMatchObject({ kind: 'refused', connection: 'acme', previousStatus: 'active' });
    const row = store.row('acme')!;
    expect(row.status).toBe('failing');
    expect(row.health).toMatchObject({ consecutiveFailures: 1, lastFailureAt: new Date(T0).toISOString() });
    expect(row.health.lastFailureReason).toMatch(/getToken: the provider answered 4\d\d; HTTP 4\d\d/);
    expectNoToken(JSON.stringify(result) + JSON.stringify(row.health) + log.text(), [RT]);
  });

  it.each([
    ['503', providerError('transient', 503)],
    ['429', providerError('rate-limited', 429)],
    ['a malformed answer', providerError('malformed', 200)],
    ['a network failure', new TypeError('fetch failed')],
    ['405', providerError('permanent', 405)],
    ['410', providerError('permanent', 410)],
    ['422', providerError('permanent', 422)],
    ['a redirect to another origin', new ProviderError('refused a redirect to another origin (https://elsewhere.example) that would carry credentials', { kind: 'permanent', operation: 'getToken', status: 302 })],
    ['an oversized body', new ProviderError('the response body exceeds 1024 bytes', { kind: 'permanent', operation: 'getToken', status: 200 })],
    ['a 404', providerError('not-found', 404)],
  ])('failed (%s): the connection stays active, its health counts the failure', async (_what, error) => {
    const { store, provider, ports } = setup();
    provider.answers.set(RT, error);
    const result = await refreshConnection(ports, 'acme');
    expect(result.kind).toBe('failed');
    expect(store.row('acme')).toMatchObject({ status: 'active', health: { consecutiveFailures: 1 } });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
  });

  it('paused, removed, failing (without includeFailing), missing: nothing is called', async () => {
    const { store, provider, ports } = setup();
    store.seed({ connection: 'p', status: 'paused' });
    store.seed({ connection: 'f', status: 'failing' });
    store.seed({ connection: 'r', status: 'removed' });
    expect(await refreshConnection(ports, 'p')).toEqual({ kind: 'not-refreshable', connection: 'p', status: 'paused' });
    expect(await refreshConnection(ports, 'r')).toEqual({ kind: 'not-refreshable', connection: 'r', status: 'removed' });
    expect(await refreshConnection(ports, 'f')).toEqual({ kind: 'not-refreshable', connection: 'f', status: 'failing' });
    expect(await refreshConnection(ports, 'nobody')).toEqual({ kind: 'missing', connection: 'nobody' });
    expect(provider.calls).toHaveLength(0);
    expect(await refreshConnection(ports, 'f', { includeFailing: true })).toMatchObject({ kind: 'refreshed', previousStatus: 'failing' });
    expect(store.row('f')?.status).toBe('active');
  });

  it('credentials replaced while the refresh ran: superseded, the new credentials kept (a rotated token is not written over them)', async () => {
    const { store, provider, ports, log } = setup();
    provider.answers.set(RT, () => {
      void store.putCredentials({ connection: 'acme', clientId: 'client-acme', refreshToken: 'rt-operator-secret', at: new Date(T0).toISOString() });
      return { accessToken: 'at-old-secret', refreshToken: 'rt-rotated-secret' };
    });
    expect(await refreshConnection(ports, 'acme')).toEqual({ kind: 'superseded', connection: 'acme' });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-operator-secret', credentialsVersion: 2 });
    expect(store.row('acme')?.accessToken).toBeUndefined();
    expect(log.lines.map((l) => l.message)).toEqual(['the provider rotated the refresh token, but the credentials had been replaced meanwhile: the new one was not stored']);
    expectNoToken(log.text(), [RT, 'rt-operator-secret', 'rt-rotated-secret', 'at-old-secret']);
  });

  it('a refusal of credentials replaced meanwhile does not mark the new ones failing', async () => {
    const { store, provider, ports } = setup();
    provider.answers.set(RT, () => {
      void store.putCredentials({ connection: 'acme', clientId: 'client-acme', refreshToken: 'rt-operator-secret', at: new Date(T0).toISOString() });
      return providerError('unauthorized', 401);
    });
    expect(await refreshConnection(ports, 'acme')).toEqual({ kind: 'superseded', connection: 'acme' });
    expect(store.row('acme')?.status).toBe('active');
  });

  it('the result write is tried three times; a rotated token it could not store is logged as an error without any token', async () => {
    const { store, provider, ports, log, sleeps } = setup();
    provider.answers.set(RT, { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    store.failing.set('completeRefresh', new TransientError('DynamoDB UpdateItem failed (ThrottlingException)'));
    const result = await refreshConnection(ports, 'acme');
    expect(result).toMatchObject({ kind: 'failed', reason: 'storing the refreshed token failed: TransientError: DynamoDB UpdateItem failed (ThrottlingException)' });
    expect(store.calls.filter((c) => c === 'completeRefresh')).toHaveLength(3);
    expect(sleeps).toEqual([200, 400]);
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
    expectNoToken(log.text() + JSON.stringify(result), [RT, 'at-new-secret', 'rt-rotated-secret']);
  });

  it('with a deadline, the result write is tried again (backoff up to 2 s) until the deadline: a rotated token survives a long store failure', async () => {
    const { store, provider, ports, clock, sleeps } = setup();
    ports.sleep = async (ms) => {
      sleeps.push(ms);
      clock.advance(ms);
    };
    provider.answers.set(RT, { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    const complete = store.completeRefresh.bind(store);
    let failures = 7;
    store.completeRefresh = async (input) => {
      if (failures-- > 0) throw new TransientError('DynamoDB UpdateItem failed (ThrottlingException)');
      return complete(input);
    };
    const result = await refreshConnection(ports, 'acme', { deadline: T0 + 30_000 });
    expect(result).toMatchObject({ kind: 'refreshed', rotated: true, status: 'active' });
    expect(sleeps).toEqual([200, 400, 800, 1600, 2000, 2000, 2000]);
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-new-secret', credentialsVersion: 2 });
  });

  it('with a deadline, the result write stops at the deadline (never before three attempts)', async () => {
    const { store, provider, ports, clock, sleeps, log } = setup();
    ports.sleep = async (ms) => {
      sleeps.push(ms);
      clock.advance(ms);
    };
    provider.answers.set(RT, { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    store.failing.set('completeRefresh', new TransientError('DynamoDB UpdateItem failed (ThrottlingException)'));
    expect(await refreshConnection(ports, 'acme', { deadline: T0 + 10_000 })).toMatchObject({ kind: 'failed' });
    expect(sleeps).toEqual([200, 400, 800, 1600, 2000, 2000, 2000]);
    expect(clock.ms).toBeLessThanOrEqual(T0 + 10_000);
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
    // A deadline already passed: still three attempts.
    sleeps.length = 0;
    delete store.rows.get('acme')!.refreshLease; // the failed refresh's lease would run out by itself
    expect(await refreshConnection(ports, 'acme', { deadline: clock.ms - 1 })).toMatchObject({ kind: 'failed' });
    expect(sleeps).toEqual([200, 400]);
  });

  it('the row already holds a newer access token than the caller saw: that one, the lease released, no getToken', async () => {
    const { store, provider, ports } = setup();
    store.rows.get('acme')!.accessToken = 'at-newer-secret';
    store.rows.get('acme')!.refreshedAt = new Date(T0 - 1000).toISOString();
    const seen = { token: 'at-older-secret', refreshedAt: T0 - 31 * 60_000 };
    expect(await refreshConnection(ports, 'acme', { seen })).toEqual({
      kind: 'current',
      connection: 'acme',
      clientId: 'client-acme',
      token: 'at-newer-secret',
      refreshedAt: new Date(T0 - 1000).toISOString(),
      status: 'active',
    });
    expect(provider.calls).toHaveLength(0);
    expect(store.row('acme')?.refreshLease).toBeUndefined();
    // The token the caller saw (or refused) is still the row's: refreshed.
    expect(await refreshConnection(ports, 'acme', { seen: { token: 'at-newer-secret', refreshedAt: T0 - 1000 } })).toMatchObject({ kind: 'refreshed' });
    // A caller that saw no token takes any token the row holds.
    expect(await refreshConnection(ports, 'acme', { seen: {} })).toMatchObject({ kind: 'current' });
    // Without `seen`, always a refresh.
    expect(await refreshConnection(ports, 'acme')).toMatchObject({ kind: 'refreshed' });
    expect(provider.calls).toHaveLength(2);
  });

  it('a result written although its answer was lost counts as written', async () => {
    const { store, provider, ports } = setup();
    provider.answers.set(RT, { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    const complete = store.completeRefresh.bind(store);
    let first = true;
    store.completeRefresh = async (input) => {
      const written = await complete(input);
      if (first) {
        first = false;
        throw new TransientError('the answer was lost');
      }
      return written;
    };
    expect(await refreshConnection(ports, 'acme')).toMatchObject({ kind: 'refreshed', rotated: true });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-new-secret' });
  });

  it('a store that cannot take the lease: the error is thrown, nothing is called', async () => {
    const { store, provider, ports } = setup();
    store.failing.set('takeRefreshLease', new TransientError('DynamoDB UpdateItem failed (ThrottlingException)'));
    await expect(refreshConnection(ports, 'acme')).rejects.toBeInstanceOf(TransientError);
    expect(provider.calls).toHaveLength(0);
  });
});
