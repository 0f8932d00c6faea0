/**
 * The item sync's ConnectionAccess (functions/shared/connections/access.ts, connection-access.ts)
 * over the in-memory store and a fake provider: the gate per status, the per-container cache, the
 * refresh before use, the refresh after a 401 shared by every caller and across two containers,
 * lastUsedAt, the cache's bound.
 */
import { describe, expect, it } from 'vitest';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import { createConnectionAccess } from '../../../../functions/shared/connections/access.js';
import {
  BUSY_WAIT_SECONDS,
  CachedConnectionAccess,
  FAILED_WAIT_SECONDS,
  FRESH_REFUSAL_SECONDS,
  MAX_BUSY_WAIT_SECONDS,
  MAX_FAILED_WAIT_SECONDS,
  NO_TIME_WAIT_SECONDS,
} from '../../../../functions/shared/connections/connection-access.js';
import type { SyncConfig } from '../../../../functions/shared/config.js';
import type { RefreshResult } from '../../../../functions/shared/connections/refresh.js';
import { MemoryPaceStore } from '../../../../dev/fakes/memory-pace-store.js';
import { ProviderError } from '../../../../functions/shared/errors.js';
import { KeyUnavailableError } from '../../../../functions/shared/connections/sealing.js';
import { STATUS_CHANGE_MESSAGE } from '../../../../functions/shared/connections/refresh.js';
import { expectNoToken, FakeClock, FakeProvider, FakeTokenSlots, MemoryConnectionStore, MemoryLog, providerError, T0 } from './fakes.js';
import { kmsApi } from '../../../../functions/shared/adapters/kms-api.js';

const MINUTE = 60_000;
const config: Pick<
  SyncConfig,
  'connectionsTableName' | 'connectionsKeyArn' | 'controlTableName' | 'tokenRefreshMinutes' | 'tokenRequestsPerSecond' | 'tokenCacheSeconds' | 'connectionWaitSeconds' | 'paceScope'
> & {
  provider: { timeoutMs: number };
} = {
  connectionsTableName: 'connections',
  connectionsKeyArn: 'arn:aws:kms:eu-west-1:000000000000:key/00000000-0000-4000-8000-000000000000',
  controlTableName: 'control',
  tokenRefreshMinutes: 30,
  // Far above what a test asks for: the token pace grants at once (its own tests are in token-pace.test.ts).
  tokenRequestsPerSecond: 1000,
  tokenCacheSeconds: 60,
  connectionWaitSeconds: 300,
  paceScope: 'client',
  provider: { timeoutMs: 10_000 },
};
const iso = (ms: number): string => new Date(ms).toISOString();

function setup(overrides: Partial<typeof config> = {}, cacheSize?: number) {
  const store = new MemoryConnectionStore();
  const provider = new FakeProvider();
  const clock = new FakeClock();
  const log = new MemoryLog();
  const refreshes: RefreshResult[] = [];
  // The token pace's row, shared by every container built here.
  const paceStore = new MemoryPaceStore();
  const paceKeys: string[] = [];
  const build = () =>
    createConnectionAccess({
      config: { ...config, ...overrides },
      dynamodb: new DynamoDBClient({}),
      kms: kmsApi(new KMSClient({})),
      provider,
      clock,
      logger: log,
      store,
      onRefresh: (result) => void refreshes.push(result),
      tokenPaceStoreFor: (paceKey) => {
        paceKeys.push(paceKey);
        return paceStore;
      },
      sleep: async (ms) => clock.advance(ms),
      ...(cacheSize !== undefined ? { cacheSize } : {}),
    });
  return { store, provider, clock, log, refreshes, paceStore, paceKeys, access: build(), build };
}

const gets = (store: MemoryConnectionStore): number => store.calls.filter((c) => c === 'get').length;

describe('open', () => {
  it('unknown and removed connections are dead; paused and failing ones wait; a bad id is dead', async () => {
    const { store, access } = setup();
    store.seed({ connection: 'gone', status: 'removed' });
    store.seed({ connection: 'held', status: 'paused' });
    store.seed({ connection: 'bad', status: 'failing', health: { consecutiveFailures: 2, lastFailureReason: 'getToken: HTTP 401' } });
    expect(await access.open('nobody')).toEqual({ kind: 'dead', reason: 'unknown connection "nobody"' });
    expect(await access.open('gone')).toEqual({ kind: 'dead', reason: 'connection "gone" was removed' });
    expect(await access.open('held')).toEqual({ kind: 'wait', reason: 'connection "held" is paused', seconds: 300 });
    expect(await access.open('bad')).toEqual({
      kind: 'wait',
      reason: 'connection "bad" is failing: the provider refused its refresh token (getToken: HTTP 401); add it again with new credentials',
      seconds: 300,
    });
    expect(await access.open('a/b')).toEqual({ kind: 'dead', reason: 'the connection id may hold only the characters A-Z a-z 0-9 . _ -' });
    expect(await access.open('..')).toEqual({ kind: 'dead', reason: 'the connection id may not be made of dots only' });
  });

  it('the key that seals the tokens out (a read or a lease cannot open them): the items wait FAILED_WAIT_SECONDS, no connection fails, nothing is cached', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-young-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    store.seed({ connection: 'old', accessToken: 'at-old-secret', refreshedAt: iso(T0 - 2 * 60 * MINUTE), lastUsedAt: iso(T0) });
    const outage = new KeyUnavailableError('KMS Decrypt on CONNECTIONS_KEY_ARN … failed (DisabledException, HTTP 400): the key is disabled or pending deletion');
    const wait = (connection: string) => ({
      kind: 'wait',
      reason: `connection "${connection}": the key that seals the tokens (CONNECTIONS_KEY_ARN) is disabled or pending deletion`,
      seconds: FAILED_WAIT_SECONDS,
    });
    store.failing.set('get', outage);
    expect(await access.open('acme')).toEqual(wait('acme'));
    expect(await access.afterRefusal('acme', 'at-young-secret')).toEqual(wait('acme'));
    store.failing.delete('get');
    // A token too old: its refresh's lease meets the key (paced, key-outage).
    store.failing.set('takeRefreshLease', outage);
    expect(await access.open('old')).toEqual({ kind: 'wait', reason: `connection "old": its access token needs a refresh, and ${wait('old').reason.slice('connection "old": '.length)}`, seconds: FAILED_WAIT_SECONDS });
    store.failing.delete('takeRefreshLease');
    expect(provider.calls).toHaveLength(0);
    expect(store.rows.get('old')).toMatchObject({ status: 'active' });
    // The key back: served as before.
    expect(await access.open('acme')).toMatchObject({ kind: 'ready', token: 'at-young-secret' });
  });

  it('an active connection with a young token is ready, with the pace key of its scope and the breaker of its client id', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', clientId: 'client-9', accessToken: 'at-young-secret', refreshedAt: iso(T0 - 10 * MINUTE), lastUsedAt: iso(T0) });
    expect(await access.open('acme')).toEqual({ kind: 'ready', connection: 'acme', token: 'at-young-secret', paceKey: 'client#client-9', breakerKey: 'client#client-9' });
    const { store: store2, access: byConnection } = setup({ paceScope: 'connection' });
    store2.seed({ connection: 'acme', clientId: 'client-9', accessToken: 'at-young-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    expect(await byConnection.open('acme')).toMatchObject({ kind: 'ready', paceKey: 'connection#acme', breakerKey: 'client#client-9' });
    expect(provider.calls).toHaveLength(0);
  });

  it('reads a row at most once per tokenCacheSeconds; concurrent opens share one read', async () => {
    const { store, clock, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-young-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    await Promise.all([access.open('acme'), access.open('acme'), access.open('acme')]);
    expect(gets(store)).toBe(1);
    clock.advance(59_000);
    await access.open('acme');
    expect(gets(store)).toBe(1);
    clock.advance(1_000);
    await access.open('acme');
    expect(gets(store)).toBe(2);
  });

  it('no token, or one older than tokenRefreshMinutes + 5 minutes: refreshed now, once for concurrent callers', async () => {
    const { store, provider, access, refreshes } = setup();
    store.seed({ connection: 'new' });
    store.seed({ connection: 'old', accessToken: 'at-old-secret', refreshedAt: iso(T0 - 35 * MINUTE) });
    const gates = await Promise.all([access.open('new'), access.open('new'), access.open('old')]);
    expect(gates.map((g) => g.kind)).toEqual(['ready', 'ready', 'ready']);
    expect(gates[0]).toEqual(gates[1]);
    expect(provider.calls.map((c) => c.refreshToken).sort()).toEqual(['rt-new-secret', 'rt-old-secret']);
    expect(store.row('old')?.accessToken).not.toBe('at-old-secret');
    expect(refreshes.map((r) => r.kind)).toEqual(['refreshed', 'refreshed']);
  });

  it('a token older than tokenRefreshMinutes but not by 5 minutes is used as it is: the token refresher renews it', async () => {
    const { store, provider, clock, access } = setup({ tokenCacheSeconds: 0 });
    store.seed({ connection: 'acme', accessToken: 'at-aging-secret', refreshedAt: iso(T0 - 32 * MINUTE), lastUsedAt: iso(T0) });
    expect(await access.open('acme')).toMatchObject({ kind: 'ready', token: 'at-aging-secret' });
    clock.advance(3 * MINUTE - 1);
    expect(await access.open('acme')).toMatchObject({ kind: 'ready', token: 'at-aging-secret' });
    expect(provider.calls).toHaveLength(0);
    clock.advance(1);
    expect(await access.open('acme')).toMatchObject({ kind: 'ready', token: 'at-issued-secret-1' });
    expect(provider.calls).toHaveLength(1);
  });

  it('a refresh held by another container: wait 5 s; refused: wait connectionWaitSeconds; failed: wait 30 s', async () => {
    const { store, provider, access, log } = setup();
    store.seed({ connection: 'busy', refreshLease: { owner: 'other', until: T0 + 5 * MINUTE } });
    store.seed({ connection: 'refused', refreshToken: 'rt-refused-secret' });
    store.seed({ connection: 'down', refreshToken: 'rt-down-secret' });
    provider.answers.set('rt-refused-secret', providerError('unauthorized', 401, 'bad token rt-refused-secret'));
    provider.answers.set('rt-down-secret', providerError('transient', 503));
    expect(await access.open('busy')).toEqual({ kind: 'wait', reason: 'connection "busy": its access token is being refreshed', seconds: BUSY_WAIT_SECONDS });
    const refused = await access.open('refused');
    expect(refused).toMatchObject({ kind: 'wait', seconds: 300 });
    expect(store.row('refused')?.status).toBe('failing');
    const down = await access.open('down');
    expect(down).toMatchObject({ kind: 'wait', seconds: FAILED_WAIT_SECONDS });
    expect(store.row('down')?.status).toBe('active');
    // The refused connection now waits from the cache, without another getToken.
    expect(await access.open('refused')).toMatchObject({ kind: 'wait', seconds: 300 });
    expect(provider.calls.filter((c) => c.refreshToken === 'rt-refused-secret')).toHaveLength(1);
    expect(log.lines.filter((l) => l.message === STATUS_CHANGE_MESSAGE).map((l) => l.attributes)).toEqual([
      expect.objectContaining({ connection: 'refused', from: 'active', to: 'failing' }),
    ]);
    expectNoToken(JSON.stringify([refused, down]) + log.text(), ['rt-refused-secret', 'rt-down-secret']);
  });

  it('after a failed refresh, no other getToken for the connection from this container for 30 s; failures that are answers in a row double it, up to 2 minutes', async () => {
    const { store, provider, clock, access } = setup({ tokenCacheSeconds: 0 });
    store.seed({ connection: 'down', refreshToken: 'rt-down-secret' });
    provider.answers.set('rt-down-secret', providerError('malformed', 200));
    expect(await access.open('down')).toMatchObject({ kind: 'wait', seconds: FAILED_WAIT_SECONDS });
    clock.advance(10_000);
    // Every batch of the next 30 s waits without a request: the remaining wait, then one try.
    const again = await access.open('down');
    expect(again).toMatchObject({ kind: 'wait', seconds: FAILED_WAIT_SECONDS - 10 });
    expect(again.kind === 'wait' && again.reason).toMatch(/refreshing its access token failed .*; the next try is after the wait/);
    expect(provider.calls).toHaveLength(1);
    // Failures in a row double the wait, up to MAX_FAILED_WAIT_SECONDS.
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      clock.advance(((waits.at(-1) ?? FAILED_WAIT_SECONDS - 10)) * 1000);
      const gate = await access.open('down');
      waits.push(gate.kind === 'wait' ? gate.seconds : -1);
    }
    expect(waits).toEqual([60, 120, MAX_FAILED_WAIT_SECONDS, MAX_FAILED_WAIT_SECONDS]);
    expect(provider.calls).toHaveLength(5);
    clock.advance(MAX_FAILED_WAIT_SECONDS * 1000);
    provider.answers.delete('rt-down-secret');
    expect(await access.open('down')).toMatchObject({ kind: 'ready' });
    expect(provider.calls).toHaveLength(6);
  });

  it('failed calls (5xx, time-out) hold 30 s each, not more: an outage is the token pace\'s breaker\'s to hold back', async () => {
    const { store, provider, clock, access } = setup({ tokenCacheSeconds: 0 });
    store.seed({ connection: 'down', refreshToken: 'rt-down-secret' });
    provider.answers.set('rt-down-secret', providerError('transient', 503));
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const gate = await access.open('down');
      waits.push(gate.kind === 'wait' ? gate.seconds : -1);
      clock.advance(FAILED_WAIT_SECONDS * 1000);
    }
    expect(waits).toEqual([FAILED_WAIT_SECONDS, FAILED_WAIT_SECONDS, FAILED_WAIT_SECONDS, FAILED_WAIT_SECONDS]);
    expect(provider.calls).toHaveLength(4);
  });

  it('records lastUsedAt at most once per half refresh interval, and not over a recent one', async () => {
    const { store, clock, access } = setup({ tokenCacheSeconds: 0 });
    store.seed({ connection: 'acme', accessToken: 'at-secret', refreshedAt: iso(T0) });
    store.seed({ connection: 'used', accessToken: 'at-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0 - MINUTE) });
    await access.open('acme');
    await access.open('used');
    expect(store.row('acme')?.lastUsedAt).toBe(iso(T0));
    expect(store.row('used')?.lastUsedAt).toBe(iso(T0 - MINUTE));
    clock.advance(14 * MINUTE);
    await access.open('acme');
    expect(store.calls.filter((c) => c === 'markUsed')).toHaveLength(1);
    clock.advance(MINUTE);
    await access.open('acme');
    expect(store.calls.filter((c) => c === 'markUsed')).toHaveLength(2);
    expect(store.row('acme')?.lastUsedAt).toBe(iso(T0 + 15 * MINUTE));
  });

  it('a failed lastUsedAt write changes nothing', async () => {
    const { store, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-secret', refreshedAt: iso(T0) });
    store.failing.set('markUsed', new Error('throttled'));
    expect(await access.open('acme')).toMatchObject({ kind: 'ready' });
  });

  it('the cache holds at most cacheSize connections', async () => {
    const { store, access } = setup({}, 2);
    for (const id of ['a', 'b', 'c']) store.seed({ connection: id, accessToken: 'at-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    for (const id of ['a', 'b', 'c']) await access.open(id);
    expect((access as CachedConnectionAccess).cached).toBe(2);
    await access.open('c');
    expect(gets(store)).toBe(3);
    await access.open('a');
    expect(gets(store)).toBe(4);
  });
});

describe('afterRefusal', () => {
  it('the row holds another token: that one, without getToken', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-1-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    expect(await access.open('acme')).toMatchObject({ token: 'at-1-secret' });
    store.rows.get('acme')!.accessToken = 'at-2-secret';
    expect(await access.afterRefusal('acme', 'at-1-secret')).toMatchObject({ kind: 'ready', token: 'at-2-secret' });
    expect(provider.calls).toHaveLength(0);
  });

  it('the row holds the refused token: one refresh for every caller that met it; then the cache answers', async () => {
    const { store, provider, clock, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-1-secret', refreshedAt: iso(T0 - 5 * MINUTE), lastUsedAt: iso(T0) });
    await access.open('acme');
    const gates = await Promise.all(Array.from({ length: 10 }, () => access.afterRefusal('acme', 'at-1-secret')));
    expect(provider.calls).toHaveLength(1);
    const token = store.row('acme')!.accessToken!;
    expect(gates.every((g) => g.kind === 'ready' && g.token === token)).toBe(true);
    const reads = gets(store);
    expect(await access.afterRefusal('acme', 'at-1-secret')).toMatchObject({ kind: 'ready', token });
    expect(gets(store)).toBe(reads);
    // The new token refused at once too: no second refresh within a minute.
    expect(await access.afterRefusal('acme', token)).toEqual({
      kind: 'wait',
      reason: 'connection "acme": the provider refused an access token issued less than a minute ago',
      seconds: FRESH_REFUSAL_SECONDS,
    });
    clock.advance(FRESH_REFUSAL_SECONDS * 1000);
    expect(await access.afterRefusal('acme', token)).toMatchObject({ kind: 'ready' });
    expect(provider.calls).toHaveLength(2);
  });

  it('remembers the token refused last (knownRefused); a revoked account answers its later refusals from the cache, no read, no getToken', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', refreshToken: 'rt-revoked-secret', accessToken: 'at-1-secret', refreshedAt: iso(T0 - 5 * MINUTE), lastUsedAt: iso(T0) });
    store.seed({ connection: 'globex', accessToken: 'at-g-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    provider.answers.set('rt-revoked-secret', providerError('unauthorized', 401, 'refresh token revoked'));
    await access.open('acme');
    expect(access.knownRefused('acme', 'at-1-secret')).toBe(false);
    // The first 401: a consistent read, one getToken, refused: the connection is failing.
    expect(await access.afterRefusal('acme', 'at-1-secret')).toMatchObject({ kind: 'wait', seconds: 300 });
    expect(store.row('acme')?.status).toBe('failing');
    expect(access.knownRefused('acme', 'at-1-secret')).toBe(true);
    // Another connection's token, or another token of this one, is not known refused.
    expect(access.knownRefused('globex', 'at-1-secret')).toBe(false);
    expect(access.knownRefused('acme', 'at-2-secret')).toBe(false);
    // The batch's other records ask again: the cache's failing view answers.
    const reads = gets(store);
    for (let i = 0; i < 5; i++) expect(await access.afterRefusal('acme', 'at-1-secret')).toMatchObject({ kind: 'wait', seconds: 300 });
    expect(gets(store)).toBe(reads);
    expect(provider.calls).toHaveLength(1);
  });

  it('a connection paused meanwhile: wait', async () => {
    const { store, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-1-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    await access.open('acme');
    store.rows.get('acme')!.status = 'paused';
    expect(await access.afterRefusal('acme', 'at-1-secret')).toMatchObject({ kind: 'wait', reason: 'connection "acme" is paused' });
  });

  it('two containers over one store, a 401 in both at once, one refresh done before the other takes the lease: one getToken', async () => {
    const { store, provider, build } = setup();
    const first = build();
    const second = build();
    store.seed({ connection: 'acme', accessToken: 'at-1-secret', refreshedAt: iso(T0 - 5 * MINUTE), lastUsedAt: iso(T0) });
    await Promise.all([first.open('acme'), second.open('acme')]);
    // The second container reads the row (still at-1) and is held just before it takes the lease.
    const take = store.takeRefreshLease.bind(store);
    let letGo: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    let calls = 0;
    store.takeRefreshLease = async (connection, lease) => {
      if (++calls === 1) await held;
      return take(connection, lease);
    };
    const two = second.afterRefusal('acme', 'at-1-secret');
    for (let i = 0; i < 20 && calls < 1; i++) await new Promise((r) => setImmediate(r));
    expect(calls).toBe(1);
    // The first container refreshes and releases the lease, all before the second takes it.
    const one = await first.afterRefusal('acme', 'at-1-secret');
    expect(one).toMatchObject({ kind: 'ready' });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
    letGo();
    const token = store.row('acme')!.accessToken!;
    expect(await two).toMatchObject({ kind: 'ready', token });
    expect(provider.calls).toHaveLength(1);
    expect(store.row('acme')?.refreshLease).toBeUndefined();
  });

  it('two containers over one store, a 401 in both at once: one getToken; the other waits, then reads the new token', async () => {
    const { store, provider, clock, build } = setup();
    const first = build();
    const second = build();
    store.seed({ connection: 'acme', accessToken: 'at-1-secret', refreshedAt: iso(T0 - 5 * MINUTE), lastUsedAt: iso(T0) });
    await Promise.all([first.open('acme'), second.open('acme')]);
    provider.hold();
    const one = first.afterRefusal('acme', 'at-1-secret');
    const two = second.afterRefusal('acme', 'at-1-secret');
    // Let both take their turn at the lease before the provider answers.
    for (let i = 0; i < 20 && store.calls.filter((c) => c === 'takeRefreshLease').length < 2; i++) await new Promise((r) => setImmediate(r));
    provider.release();
    const gates = await Promise.all([one, two]);
    expect(provider.calls).toHaveLength(1);
    const token = store.row('acme')!.accessToken!;
    expect(gates.map((g) => g.kind).sort()).toEqual(['ready', 'wait']);
    expect(gates.find((g) => g.kind === 'wait')).toMatchObject({ seconds: BUSY_WAIT_SECONDS });
    clock.advance(BUSY_WAIT_SECONDS * 1000);
    const waited = gates[0]!.kind === 'wait' ? first : second;
    expect(await waited.open('acme')).toMatchObject({ kind: 'ready', token });
    expect(provider.calls).toHaveLength(1);
  });
});

describe('unknown and removed: never from a stale read, never cached', () => {
  it('an eventually consistent read that does not show the row yet: read again consistently before the items are dead', async () => {
    const { store, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    store.stale.set('acme', undefined);
    expect(await access.open('acme')).toMatchObject({ kind: 'ready', token: 'at-secret' });
    expect(store.consistentReads).toEqual(['acme']);
  });

  it('a stale read of a connection removed and added again: read again, ready', async () => {
    const { store, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    store.stale.set('acme', { ...store.row('acme')!, status: 'removed', refreshToken: '' });
    expect(await access.open('acme')).toMatchObject({ kind: 'ready' });
  });

  it('a dead answer is not cached: a connection added a moment later is used at once', async () => {
    const { store, access } = setup();
    expect(await access.open('acme')).toEqual({ kind: 'dead', reason: 'unknown connection "acme"' });
    expect(store.consistentReads).toEqual(['acme']);
    store.seed({ connection: 'acme', accessToken: 'at-secret', refreshedAt: iso(T0), lastUsedAt: iso(T0) });
    expect(await access.open('acme')).toMatchObject({ kind: 'ready', token: 'at-secret' });
    store.rows.get('acme')!.status = 'removed';
    store.stale.set('acme', store.row('acme'));
    // Within tokenCacheSeconds, the cache still answers ready; once read as removed (twice), dead, and not kept.
    (access as CachedConnectionAccess)['entries'].delete('acme');
    expect(await access.open('acme')).toEqual({ kind: 'dead', reason: 'connection "acme" was removed' });
    expect((access as CachedConnectionAccess).cached).toBe(0);
  });
});

describe('a refresh and the time left', () => {
  it('starts no refresh with less than the provider time-out plus 5 s before the deadline: a short wait, no lease, no getToken', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme' });
    expect(await access.open('acme', { deadline: T0 + 15_000 - 1 })).toEqual({
      kind: 'wait',
      reason: 'connection "acme": its access token needs a refresh, and this invocation has too little time left for one',
      seconds: NO_TIME_WAIT_SECONDS,
    });
    expect(provider.calls).toHaveLength(0);
    expect(store.calls).not.toContain('takeRefreshLease');
    expect(await access.open('acme', { deadline: T0 + 15_000 })).toMatchObject({ kind: 'ready' });
    expect(provider.calls).toHaveLength(1);
  });

  it('after a refusal too', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-1-secret', refreshedAt: iso(T0 - 5 * MINUTE), lastUsedAt: iso(T0) });
    expect(await access.afterRefusal('acme', 'at-1-secret', { deadline: T0 + 3_000 })).toMatchObject({ kind: 'wait', seconds: NO_TIME_WAIT_SECONDS });
    expect(provider.calls).toHaveLength(0);
    expect(await access.afterRefusal('acme', 'at-1-secret', { deadline: T0 + 60_000 })).toMatchObject({ kind: 'ready' });
  });

  it('the result write is tried again until the deadline: a rotated token survives a store failure of several seconds', async () => {
    const store = new MemoryConnectionStore();
    const provider = new FakeProvider();
    const clock = new FakeClock();
    const access = new CachedConnectionAccess(
      { store, provider, clock, log: new MemoryLog(), tokens: new FakeTokenSlots(), sleep: async (ms) => clock.advance(ms) },
      { paceScope: 'client', tokenCacheSeconds: 60, tokenRefreshMinutes: 30, connectionWaitSeconds: 300, providerTimeoutMs: 10_000 },
    );
    store.seed({ connection: 'acme', refreshToken: 'rt-old-secret' });
    provider.answers.set('rt-old-secret', { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    const complete = store.completeRefresh.bind(store);
    let failures = 5;
    store.completeRefresh = async (input) => {
      if (failures-- > 0) throw new Error('DynamoDB UpdateItem failed (InternalServerError)');
      return complete(input);
    };
    expect(await access.open('acme', { deadline: T0 + 40_000 })).toMatchObject({ kind: 'ready', token: 'at-new-secret' });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret', accessToken: 'at-new-secret' });
  });
});

describe('the token pace on demand', () => {
  it("each on-demand getToken takes a slot of the client id's token pace (its row `token#<client id>`) and tells it the answer", async () => {
    const { store, provider, access, paceStore, paceKeys } = setup();
    store.seed({ connection: 'acme', clientId: 'client-7' });
    expect(await access.open('acme')).toMatchObject({ kind: 'ready' });
    expect(provider.calls).toHaveLength(1);
    expect(paceKeys).toEqual(['token#client-7']);
    expect(paceStore.writes).toBeGreaterThan(0);
  });

  it("a 429: the items wait its Retry-After; the connection stays active, its health untouched; the next try after it", async () => {
    const { store, provider, clock, access } = setup({ tokenCacheSeconds: 0 });
    store.seed({ connection: 'acme', refreshToken: 'rt-acme-secret' });
    provider.answers.set('rt-acme-secret', new ProviderError('the provider answered 429', { kind: 'rate-limited', operation: 'getToken', status: 429, retryAfterSeconds: 20 }));
    expect(await access.open('acme')).toEqual({
      kind: 'wait',
      reason: 'connection "acme": its access token needs a refresh, and the token endpoint answered 429',
      seconds: 20,
    });
    expect(store.row('acme')).toMatchObject({ status: 'active', health: { consecutiveFailures: 0 } });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
    // Within the Retry-After, the pace holds the refresh (longer than PACE_WAIT_MS): the items wait the rest, no getToken.
    clock.advance(5_000);
    expect(await access.open('acme')).toMatchObject({ kind: 'wait', seconds: 15 });
    expect(provider.calls).toHaveLength(1);
    // After it: refreshed (a 429 sets no 30-second hold as a failure does).
    clock.advance(15_000);
    provider.answers.delete('rt-acme-secret');
    expect(await access.open('acme')).toMatchObject({ kind: 'ready' });
    expect(provider.calls).toHaveLength(2);
  });

  it('a slot within 5 s is waited for; the token endpoint down (the pace\'s breaker open): the items wait 30 s, no getToken', async () => {
    const { store, provider, clock, access } = setup({ tokenCacheSeconds: 0 });
    store.seed({ connection: 'acme', refreshToken: 'rt-acme-secret' });
    provider.answers.set('rt-acme-secret', new ProviderError('the provider answered 429', { kind: 'rate-limited', operation: 'getToken', status: 429, retryAfterSeconds: 3 }));
    expect(await access.open('acme')).toMatchObject({ kind: 'wait', seconds: 3 });
    provider.answers.delete('rt-acme-secret');
    expect(await access.open('acme')).toMatchObject({ kind: 'ready' });
    expect(clock.ms).toBeGreaterThanOrEqual(T0 + 3_000);

    const down = setup({ tokenCacheSeconds: 0 });
    for (let i = 0; i < 8; i++) down.store.seed({ connection: `c${i}`, refreshToken: `rt-c${i}-secret` });
    for (let i = 0; i < 8; i++) down.provider.answers.set(`rt-c${i}-secret`, providerError('transient', 503));
    for (let i = 0; i < 8; i++) expect(await down.access.open(`c${i}`)).toMatchObject({ kind: 'wait', seconds: FAILED_WAIT_SECONDS });
    down.store.seed({ connection: 'next', refreshToken: 'rt-next-secret' });
    expect(await down.access.open('next')).toEqual({
      kind: 'wait',
      reason: 'connection "next": its access token needs a refresh, and the token endpoint is down (its pace\'s breaker is open)',
      seconds: FAILED_WAIT_SECONDS,
    });
    expect(down.provider.calls).toHaveLength(8);
    expect(down.store.row('next')).toMatchObject({ status: 'active', health: { consecutiveFailures: 0 } });
  });
});

describe('what a refresh leaves', () => {
  it('a connection paused while its token was refreshed: its items wait (the tokens are stored)', async () => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', refreshToken: 'rt-acme-secret' });
    provider.answers.set('rt-acme-secret', () => {
      void store.setStatus('acme', 'paused', ['active', 'failing'], iso(T0));
      return { accessToken: 'at-new-secret' };
    });
    expect(await access.open('acme')).toEqual({ kind: 'wait', reason: 'connection "acme" is paused', seconds: 300 });
    expect(store.row('acme')).toMatchObject({ status: 'paused', accessToken: 'at-new-secret' });
    // And from the cache as well.
    expect(await access.open('acme')).toMatchObject({ kind: 'wait', reason: 'connection "acme" is paused' });
  });

  it.each([
    ['just taken (its holder is at work)', 5 * MINUTE, BUSY_WAIT_SECONDS],
    ['taken 14 s ago, within the provider time-out plus 5 s', 5 * MINUTE - 14_000, BUSY_WAIT_SECONDS],
    ['taken 2 minutes ago (its holder likely died)', 3 * MINUTE, MAX_BUSY_WAIT_SECONDS],
    ['ending in 20 s', 20_000, 20],
    ['ending in 2 s', 2_000, BUSY_WAIT_SECONDS],
  ])('a lease held by another, %s: the items wait %d s', async (_what, endsIn, seconds) => {
    const { store, provider, access } = setup();
    store.seed({ connection: 'acme', refreshLease: { owner: 'other', until: T0 + endsIn } });
    expect(await access.open('acme')).toEqual({ kind: 'wait', reason: 'connection "acme": its access token is being refreshed', seconds });
    expect(provider.calls).toHaveLength(0);
  });
});

describe('CachedConnectionAccess errors', () => {
  it('a store that cannot be read: open throws, and the next open reads again', async () => {
    const { store, access } = setup();
    store.seed({ connection: 'acme', accessToken: 'at-secret', refreshedAt: iso(T0) });
    store.failing.set('get', new Error('DynamoDB GetItem failed (ThrottlingException)'));
    await expect(access.open('acme')).rejects.toThrow(/ThrottlingException/);
    store.failing.delete('get');
    expect(await access.open('acme')).toMatchObject({ kind: 'ready' });
  });
});
