/**
 * One connection's refresh (functions/shared/connections/refresh.ts) over the in-memory store: the
 * token pace's slot first and what it is told, the lease, the provider's answers (rotation,
 * refusal, 429, transient failure), credentials replaced while it ran, a result write that fails,
 * the status change lines; no token in any result reason, log line or error.
 */
import { describe, expect, it } from 'vitest';
import { refreshConnection, REFRESH_LEASE_MS, STATUS_CHANGE_MESSAGE, type RefreshPorts } from '../../../../functions/shared/connections/refresh.js';
import { expectNoToken, FakeClock, FakeProvider, FakeTokenSlots, MemoryConnectionStore, MemoryLog, providerError, T0 } from './fakes.js';
import { ProviderError, TransientError } from '../../../../functions/shared/errors.js';
import { stampOf } from '../../../../functions/shared/connections/sealing.js';

const RT = 'rt-acme-secret';

function setup() {
  const store = new MemoryConnectionStore();
  store.seed({ connection: 'acme', clientId: 'client-acme', refreshToken: RT });
  const provider = new FakeProvider();
  const clock = new FakeClock();
  const log = new MemoryLog();
  const sleeps: number[] = [];
  const tokens = new FakeTokenSlots();
  const ports: RefreshPorts = { store, provider, clock, log, tokens, newOwner: () => 'owner-1', sleep: async (ms) => void sleeps.push(ms) };
  return { store, provider, clock, log, ports, sleeps, tokens };
}

/** The options of a caller that read the connection `acme` (its client id), and of the others seeded with `client-1`. */
const ACME = { clientId: 'client-acme' };
const OTHER = { clientId: 'client-1' };

describe('refreshConnection', () => {
  it('takes a 5-minute lease, calls getToken with the client id and refresh token, stores the access token', async () => {
    const { store, provider, ports } = setup();
    let leaseSeen: unknown;
    provider.answers.set(RT, () => {
      leaseSeen = store.row('acme')?.refreshLease;
      return { accessToken: 'at-new-secret' };
    });
    const result = await refreshConnection(ports, 'acme', ACME);
    expect(leaseSeen).toEqual({ owner: 'owner-1', until: T0 + REFRESH_LEASE_MS });
    expect(provider.calls).toEqual([{ clientId: 'client-acme', refreshToken: RT }]);
    expect(result).toEqual({
      kind: 'refreshed',
      connection: 'acme',
      clientId: 'client-acme',
      token: 'at-new-secret',
      stamp: stampOf('at-new-secret'),
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
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refreshed', rotated: false });
    expect(store.row('acme')?.credentialsVersion).toBe(1);
    provider.answers.set(RT, { accessToken: 'at-2-secret', refreshToken: 'rt-rotated-secret' });
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refreshed', rotated: true });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-2-secret', credentialsVersion: 2 });
  });

  it('a lease held by another: busy until its end, and no getToken', async () => {
    const { store, provider, ports } = setup();
    store.rows.get('acme')!.refreshLease = { owner: 'other', until: T0 + 1000 };
    expect(await refreshConnection(ports, 'acme', ACME)).toEqual({ kind: 'busy', connection: 'acme', until: T0 + 1000 });
    expect(provider.calls).toHaveLength(0);
  });

  it.each([
    ['401', providerError('unauthorized', 401, `refresh token ${RT} expired`)],
    ['400', providerError('permanent', 400, 'invalid_grant')],
    ['403', providerError('permanent', 403)],
  ])('refused (%s): the connection is failing, with a reason that holds no token', async (_status, error) => {
    const { store, provider, ports, log } = setup();
    provider.answers.set(RT, error);
    const result = await refreshConnection(ports, 'acme', ACME);
    expect(result).toMatchObject({ kind: 'refused', connection: 'acme', previousStatus: 'active' });
    const row = store.row('acme')!;
    expect(row.status).toBe('failing');
    expect(row.health).toMatchObject({ consecutiveFailures: 1, lastFailureAt: new Date(T0).toISOString() });
    expect(row.health.lastFailureReason).toMatch(/getToken: the provider answered 4\d\d; HTTP 4\d\d/);
    expectNoToken(JSON.stringify(result) + JSON.stringify(row.health) + log.text(), [RT]);
  });

  it.each([
    ['503', providerError('transient', 503)],
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
    const result = await refreshConnection(ports, 'acme', ACME);
    expect(result.kind).toBe('failed');
    expect(store.row('acme')).toMatchObject({ status: 'active', health: { consecutiveFailures: 1 } });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
  });

  it('paused, removed, failing (without includeFailing), missing: nothing is called', async () => {
    const { store, provider, ports } = setup();
    store.seed({ connection: 'p', status: 'paused' });
    store.seed({ connection: 'f', status: 'failing' });
    store.seed({ connection: 'r', status: 'removed' });
    expect(await refreshConnection(ports, 'p', OTHER)).toEqual({ kind: 'not-refreshable', connection: 'p', status: 'paused' });
    expect(await refreshConnection(ports, 'r', OTHER)).toEqual({ kind: 'not-refreshable', connection: 'r', status: 'removed' });
    expect(await refreshConnection(ports, 'f', OTHER)).toEqual({ kind: 'not-refreshable', connection: 'f', status: 'failing' });
    expect(await refreshConnection(ports, 'nobody', OTHER)).toEqual({ kind: 'missing', connection: 'nobody' });
    expect(provider.calls).toHaveLength(0);
    expect(await refreshConnection(ports, 'f', { ...OTHER, includeFailing: true })).toMatchObject({ kind: 'refreshed', previousStatus: 'failing' });
    expect(store.row('f')?.status).toBe('active');
  });

  it('credentials replaced while the refresh ran: superseded, the new credentials kept (a rotated token is not written over them)', async () => {
    const { store, provider, ports, log } = setup();
    provider.answers.set(RT, () => {
      void store.putCredentials({ connection: 'acme', clientId: 'client-acme', refreshToken: 'rt-operator-secret', at: new Date(T0).toISOString() });
      return { accessToken: 'at-old-secret', refreshToken: 'rt-rotated-secret' };
    });
    expect(await refreshConnection(ports, 'acme', ACME)).toEqual({ kind: 'superseded', connection: 'acme' });
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
    expect(await refreshConnection(ports, 'acme', ACME)).toEqual({ kind: 'superseded', connection: 'acme' });
    expect(store.row('acme')?.status).toBe('active');
  });

  it('the result write is tried three times; a rotated token it could not store is logged as an error without any token', async () => {
    const { store, provider, ports, log, sleeps } = setup();
    provider.answers.set(RT, { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    store.failing.set('completeRefresh', new TransientError('DynamoDB UpdateItem failed (ThrottlingException)'));
    const result = await refreshConnection(ports, 'acme', ACME);
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
    const result = await refreshConnection(ports, 'acme', { ...ACME, deadline: T0 + 30_000 });
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
    expect(await refreshConnection(ports, 'acme', { ...ACME, deadline: T0 + 10_000 })).toMatchObject({ kind: 'failed' });
    expect(sleeps).toEqual([200, 400, 800, 1600, 2000, 2000, 2000]);
    expect(clock.ms).toBeLessThanOrEqual(T0 + 10_000);
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
    // A deadline already passed: still three attempts.
    sleeps.length = 0;
    delete store.rows.get('acme')!.refreshLease; // the failed refresh's lease would run out by itself
    expect(await refreshConnection(ports, 'acme', { ...ACME, deadline: clock.ms - 1 })).toMatchObject({ kind: 'failed' });
    expect(sleeps).toEqual([200, 400]);
  });

  it('the row already holds a newer access token than the caller saw: that one, the lease released, no getToken', async () => {
    const { store, provider, ports } = setup();
    store.rows.get('acme')!.accessToken = 'at-newer-secret';
    store.rows.get('acme')!.refreshedAt = new Date(T0 - 1000).toISOString();
    const seen = { stamp: stampOf('at-older-secret'), refreshedAt: T0 - 31 * 60_000 };
    expect(await refreshConnection(ports, 'acme', { ...ACME, seen })).toEqual({
      kind: 'current',
      connection: 'acme',
      clientId: 'client-acme',
      token: 'at-newer-secret',
      stamp: stampOf('at-newer-secret'),
      refreshedAt: new Date(T0 - 1000).toISOString(),
      status: 'active',
    });
    expect(provider.calls).toHaveLength(0);
    expect(store.row('acme')?.refreshLease).toBeUndefined();
    // The token the caller saw (or refused) is still the row's: refreshed.
    expect(await refreshConnection(ports, 'acme', { ...ACME, seen: { stamp: stampOf('at-newer-secret'), refreshedAt: T0 - 1000 } })).toMatchObject({ kind: 'refreshed' });
    // A caller that saw no token takes any token the row holds.
    expect(await refreshConnection(ports, 'acme', { ...ACME, seen: {} })).toMatchObject({ kind: 'current' });
    // Without `seen`, always a refresh.
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refreshed' });
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
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refreshed', rotated: true });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-new-secret' });
  });

  it('a store that cannot take the lease: the error is thrown, nothing is called', async () => {
    const { store, provider, ports } = setup();
    store.failing.set('takeRefreshLease', new TransientError('DynamoDB UpdateItem failed (ThrottlingException)'));
    await expect(refreshConnection(ports, 'acme', ACME)).rejects.toBeInstanceOf(TransientError);
    expect(provider.calls).toHaveLength(0);
  });
});

describe('refreshConnection and the token pace', () => {
  it("asks the pace of the caller's client id for a slot before the lease, with its startBy, and tells it the answer", async () => {
    const { store, provider, ports, tokens } = setup();
    let callsAtSlot: string[] = [];
    const slot = tokens.slot.bind(tokens);
    tokens.slot = async (clientId, startBy) => {
      callsAtSlot = [...store.calls];
      return slot(clientId, startBy);
    };
    expect(await refreshConnection(ports, 'acme', { ...ACME, startBy: T0 + 5_000 })).toMatchObject({ kind: 'refreshed' });
    expect(callsAtSlot).toEqual([]);
    expect(tokens.asked).toEqual([{ clientId: 'client-acme', startBy: T0 + 5_000 }]);
    expect(tokens.reports).toEqual([{ kind: 'ok' }]);
    // A refusal is an answer: the provider is up.
    provider.answers.set(RT, providerError('unauthorized', 401));
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refused' });
    expect(tokens.reports).toEqual([{ kind: 'ok' }, { kind: 'ok' }]);
  });

  it.each([
    ['a 5xx', providerError('transient', 503)],
    ['a time-out', new ProviderError('the request timed out after 10000 ms', { kind: 'transient', operation: 'getToken' })],
  ])('tells the pace of %s as failed (its breaker counts it); the health counts it, the connection stays active', async (_what, error) => {
    const { store, provider, ports, tokens } = setup();
    provider.answers.set(RT, error);
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'failed' });
    expect(tokens.reports).toEqual([{ kind: 'failed' }]);
    expect(store.row('acme')).toMatchObject({ status: 'active', health: { consecutiveFailures: 1 } });
  });

  it("a 429: the pace told its Retry-After, the lease released, nothing recorded in the health: paced until then, still due", async () => {
    const { store, provider, ports, tokens, log } = setup();
    provider.answers.set(RT, new ProviderError('the provider answered 429', { kind: 'rate-limited', operation: 'getToken', status: 429, retryAfterSeconds: 7 }));
    const before = store.row('acme')!;
    expect(await refreshConnection(ports, 'acme', ACME)).toEqual({ kind: 'paced', connection: 'acme', why: 'rate-limited', until: T0 + 7_000 });
    expect(tokens.reports).toEqual([{ kind: 'rate-limited', retryAfterMs: 7_000 }]);
    expect(store.row('acme')).toEqual(before);
    expect(store.calls).toEqual(['takeRefreshLease', 'releaseRefreshLease']);
    expect(log.lines.filter((l) => l.message === STATUS_CHANGE_MESSAGE)).toHaveLength(0);
    // Without Retry-After: a second.
    provider.answers.set(RT, providerError('rate-limited', 429));
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'paced', why: 'rate-limited', until: T0 + 1_000 });
  });

  it('no slot by startBy, a Retry-After, an outage: paced, and nothing else is done (no lease, no getToken, no write)', async () => {
    const { store, provider, ports, tokens } = setup();
    tokens.answers.push(
      { kind: 'wait', until: T0 + 3_000, why: 'pace' },
      { kind: 'wait', until: T0 + 60_000, why: 'retry-after' },
      { kind: 'outage', since: T0 - 1_000 },
    );
    expect(await refreshConnection(ports, 'acme', { ...ACME, startBy: T0 + 1_000 })).toEqual({ kind: 'paced', connection: 'acme', why: 'pace', until: T0 + 3_000 });
    expect(await refreshConnection(ports, 'acme', ACME)).toEqual({ kind: 'paced', connection: 'acme', why: 'retry-after', until: T0 + 60_000 });
    expect(await refreshConnection(ports, 'acme', ACME)).toEqual({ kind: 'paced', connection: 'acme', why: 'outage' });
    expect(store.calls).toEqual([]);
    expect(provider.calls).toHaveLength(0);
  });

  it("credentials replaced with another client id since the caller's read: that client id's pace is asked too, under the lease", async () => {
    const { store, provider, ports, tokens } = setup();
    store.rows.get('acme')!.clientId = 'client-new';
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refreshed', clientId: 'client-new' });
    expect(tokens.asked.map((a) => a.clientId)).toEqual(['client-acme', 'client-new']);
    expect(provider.calls).toEqual([{ clientId: 'client-new', refreshToken: RT }]);
    // Its pace has no slot in time: the lease is released, nothing called.
    store.rows.get('acme')!.clientId = 'client-newer';
    const slot = tokens.slot.bind(tokens);
    tokens.slot = async (clientId, startBy) => (clientId === 'client-newer' ? { kind: 'wait', until: T0 + 9_000, why: 'pace' } : slot(clientId, startBy));
    expect(await refreshConnection(ports, 'acme', { ...ACME, startBy: T0 + 1_000 })).toMatchObject({ kind: 'paced', why: 'pace', until: T0 + 9_000 });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
    expect(provider.calls).toHaveLength(1);
  });
});

describe('refreshConnection: a line per status change', () => {
  it('active → failing when the provider refuses the refresh token: the connection, from, to and why, never a token', async () => {
    const { provider, ports, log } = setup();
    provider.answers.set(RT, providerError('unauthorized', 401, `refresh token ${RT} revoked`));
    await refreshConnection(ports, 'acme', ACME);
    const lines = log.lines.filter((l) => l.message === STATUS_CHANGE_MESSAGE);
    expect(lines).toEqual([
      {
        level: 'warn',
        message: STATUS_CHANGE_MESSAGE,
        attributes: { connection: 'acme', from: 'active', to: 'failing', reason: 'getToken: the provider answered 401; HTTP 401; provider error 1001: refresh token [redacted] revoked' },
      },
    ]);
    expectNoToken(log.text(), [RT]);
  });

  it('failing → active when a retry succeeds; no line when nothing changed (active refreshed, failing refused again)', async () => {
    const { store, provider, ports, log } = setup();
    store.seed({ connection: 'f', status: 'failing', health: { consecutiveFailures: 2 } });
    store.seed({ connection: 'g', status: 'failing', refreshToken: 'rt-g-secret', health: { consecutiveFailures: 2 } });
    provider.answers.set('rt-g-secret', providerError('unauthorized', 401));
    await refreshConnection(ports, 'acme', ACME);
    await refreshConnection(ports, 'g', { ...OTHER, includeFailing: true });
    expect(log.lines.filter((l) => l.message === STATUS_CHANGE_MESSAGE)).toEqual([]);
    await refreshConnection(ports, 'f', { ...OTHER, includeFailing: true });
    expect(log.lines.filter((l) => l.message === STATUS_CHANGE_MESSAGE)).toEqual([
      { level: 'info', message: STATUS_CHANGE_MESSAGE, attributes: { connection: 'f', from: 'failing', to: 'active', reason: 'a token refresh succeeded' } },
    ]);
  });

  it('a refusal of a connection paused while the refresh ran: it stays paused, and no change is logged', async () => {
    const { store, provider, ports, log } = setup();
    provider.answers.set(RT, () => {
      store.rows.get('acme')!.status = 'paused';
      return providerError('unauthorized', 401);
    });
    expect(await refreshConnection(ports, 'acme', ACME)).toMatchObject({ kind: 'refused', previousStatus: 'active' });
    expect(store.row('acme')?.status).toBe('paused');
    expect(log.lines.filter((l) => l.message === STATUS_CHANGE_MESSAGE)).toEqual([]);
  });
});
