/**
 * The token refresher (functions/token-refresher: run.ts and app.ts) over the in-memory store and a
 * fake provider: which connections are due (each rule), the order (most overdue first, the ones a
 * run left first in the next), early renewals that spread the load, one connection's refusal beside
 * the others' refreshes, the concurrency bound, the remaining-time margin, the token pace (its
 * ceiling, a 429, no slot in time, an outage), the metrics, the status change lines, no token in any
 * output.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { emfDimensionSets, sumEmfMetrics } from '../../../dev/fakes/emf.js';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import type { RefresherConfig } from '../../../functions/shared/config.js';
import type { ConnectionListing, ConnectionRecord } from '../../../functions/shared/connections/connection.js';
import { stampOf } from '../../../functions/shared/connections/sealing.js';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { STATUS_CHANGE_MESSAGE } from '../../../functions/shared/connections/refresh.js';
import { ProviderError } from '../../../functions/shared/errors.js';
import { dueReason, FAILING_RETRY_MS, runRefresher, type RunPorts, type RunSettings } from '../../../functions/token-refresher/run.js';
import { expectNoToken, FakeClock, FakeProvider, FakeTokenSlots, MemoryConnectionStore, MemoryLog, providerError, T0 } from '../shared/connections/fakes.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const iso = (ms: number): string => new Date(ms).toISOString();
const settings: RunSettings = { tokenRefreshMinutes: 30, idleRefreshHours: 24, refreshConcurrency: 3 };
const config: RefresherConfig = {
  provider: { baseUrl: 'https://provider.example.com/api', timeoutMs: 1000, maxResponseBytes: 1024 },
  connectionsTableName: 'connections',
  connectionsKeyArn: 'arn:aws:kms:eu-west-1:000000000000:key/00000000-0000-4000-8000-000000000000',
  controlTableName: 'control',
  tokenRefreshMinutes: 30,
  // Far above what a test asks for, but where the pace itself is tested.
  tokenRequestsPerSecond: 1000,
  refreshConcurrency: 3,
  idleRefreshHours: 24,
};

/** A connection as a scan lists it: an access token given is named by its stamp. */
function record(overrides: Partial<ConnectionRecord>): ConnectionListing {
  const { accessToken, refreshToken: _refresh, ...rest } = overrides;
  return {
    connection: 'acme',
    clientId: 'client-1',
    status: 'active',
    credentialsVersion: 1,
    health: { consecutiveFailures: 0 },
    createdAt: iso(T0),
    updatedAt: iso(T0),
    ...(accessToken !== undefined ? { accessTokenStamp: stampOf(accessToken) } : {}),
    ...rest,
  };
}

function context(remainingMs: () => number): Context {
  return {
    functionName: 'token-refresher',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:token-refresher',
    memoryLimitInMB: '256',
    awsRequestId: 'req-1',
    logGroupName: '/aws/lambda/token-refresher',
    logStreamName: 'stream',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: remainingMs,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

function setup(configOverrides: Partial<RefresherConfig> = {}) {
  const store = new MemoryConnectionStore();
  const provider = new FakeProvider();
  const clock = new FakeClock();
  // The token pace's row (token#client-1 for every connection seeded); waiting for it moves the clock.
  const paceStore = new MemoryPaceStore();
  const paceKeys = new Set<string>();
  const handler = createRefresherHandler({
    config: { ...config, ...configOverrides },
    dynamodb: new DynamoDBClient({}),
    kms: new KMSClient({}),
    store,
    provider,
    clock,
    tokenPaceStoreFor: (paceKey) => {
      paceKeys.add(paceKey);
      return paceStore;
    },
    sleep: async (ms) => clock.advance(ms),
  });
  const run = (event: unknown = {}, ctx?: Context) => captureOutput(() => handler(event as { trigger?: string }, ctx));
  return { store, provider, clock, run, paceStore, paceKeys };
}

/** The run's ports over fakes, for the core alone (runRefresher). */
function corePorts(overrides: Partial<RunPorts> = {}) {
  const store = new MemoryConnectionStore();
  const provider = new FakeProvider();
  const clock = new FakeClock();
  const log = new MemoryLog();
  const tokens = new FakeTokenSlots();
  const ports: RunPorts = { store, provider, clock, log, tokens, marginMs: 11_000, sleep: async (ms) => clock.advance(ms), ...overrides };
  return { store, provider, clock, log, tokens, ports };
}

function logs(output: string): Array<Record<string, unknown>> {
  return jsonLines(output).filter((line): line is Record<string, unknown> => typeof line !== 'string' && !line['_aws']);
}

describe('dueReason', () => {
  const now = T0;
  it('active without an access token', () => {
    expect(dueReason(record({}), now, settings)).toBe('no-token');
  });

  it('in use (used within two intervals): once its token is older than tokenRefreshMinutes minus 5 minutes', () => {
    const inUse = { accessToken: 'at', lastUsedAt: iso(now - 59 * MINUTE) };
    // The token the previous run stored (runs are tokenRefreshMinutes apart): renewed.
    expect(dueReason(record({ ...inUse, refreshedAt: iso(now - 30 * MINUTE) }), now, settings)).toBe('in-use');
    expect(dueReason(record({ ...inUse, refreshedAt: iso(now - 25 * MINUTE) }), now, settings)).toBe('in-use');
    // Younger (e.g. refreshed on demand by the item sync since the last run): left alone.
    expect(dueReason(record({ ...inUse, refreshedAt: iso(now - 25 * MINUTE + 1) }), now, settings)).toBeUndefined();
    expect(dueReason(record({ ...inUse, refreshedAt: iso(now - MINUTE) }), now, settings)).toBeUndefined();
    const recent = { accessToken: 'at', lastUsedAt: iso(now - MINUTE) };
    expect(dueReason(record({ ...recent, refreshedAt: iso(now - 5 * MINUTE) }), now, { ...settings, tokenRefreshMinutes: 10 })).toBe('in-use');
    expect(dueReason(record({ ...recent, refreshedAt: iso(now - 4 * MINUTE) }), now, { ...settings, tokenRefreshMinutes: 10 })).toBeUndefined();
  });

  it('idle (last used more than two intervals ago, or never): only once its token is idleRefreshHours old', () => {
    const idle = { accessToken: 'at', lastUsedAt: iso(now - 61 * MINUTE) };
    expect(dueReason(record({ ...idle, refreshedAt: iso(now - 23 * HOUR) }), now, settings)).toBeUndefined();
    expect(dueReason(record({ ...idle, refreshedAt: iso(now - 24 * HOUR) }), now, settings)).toBe('idle');
    expect(dueReason(record({ accessToken: 'at', refreshedAt: iso(now - 2 * HOUR) }), now, settings)).toBeUndefined();
  });

  it('failing: once its last failure is an hour old; paused and removed never', () => {
    const failing = (ago: number) => record({ status: 'failing', health: { consecutiveFailures: 3, lastFailureAt: iso(now - ago) } });
    expect(dueReason(failing(FAILING_RETRY_MS - 1), now, settings)).toBeUndefined();
    expect(dueReason(failing(FAILING_RETRY_MS), now, settings)).toBe('failing-retry');
    expect(dueReason(record({ status: 'paused' }), now, settings)).toBeUndefined();
    expect(dueReason(record({ status: 'removed' }), now, settings)).toBeUndefined();
  });
});

describe('the token refresher run', () => {
  it('refreshes the due connections only, counts them by status and publishes the metrics', async () => {
    const { store, provider, run } = setup();
    store.seed({ connection: 'new', refreshToken: 'rt-new-secret' });
    store.seed({ connection: 'busy', refreshToken: 'rt-busy-secret', accessToken: 'at-busy-secret', refreshedAt: iso(T0 - 29 * MINUTE), lastUsedAt: iso(T0 - MINUTE) });
    store.seed({ connection: 'quiet', refreshToken: 'rt-quiet-secret', accessToken: 'at-quiet-secret', refreshedAt: iso(T0 - HOUR) });
    store.seed({ connection: 'paused', status: 'paused', refreshToken: 'rt-paused-secret' });
    store.seed({ connection: 'broken', status: 'failing', refreshToken: 'rt-broken-secret', health: { consecutiveFailures: 1, lastFailureAt: iso(T0 - 2 * HOUR) } });
    store.seed({ connection: 'gone', status: 'removed', refreshToken: '' });
    provider.answers.set('rt-new-secret', { accessToken: 'at-new-secret', refreshToken: 'rt-new-rotated-secret' });
    provider.answers.set('rt-broken-secret', providerError('unauthorized', 401, 'still refused: rt-broken-secret'));

    const { result, error, output } = await run({});
    expect(error).toBeUndefined();
    expect(result).toEqual({
      trigger: 'schedule',
      connections: { active: 3, paused: 1, failing: 1, removed: 1 },
      due: 3,
      early: 0,
      refreshed: 2,
      rotated: 1,
      refused: 1,
      failed: 0,
      skipped: 0,
      rateLimited: 0,
      left: 0,
      keyUnavailable: false,
    });
    expect(provider.calls.map((c) => c.refreshToken).sort()).toEqual(['rt-broken-secret', 'rt-busy-secret', 'rt-new-secret']);
    expect(store.row('new')).toMatchObject({ accessToken: 'at-new-secret', refreshToken: 'rt-new-rotated-secret' });
    expect(store.row('broken')).toMatchObject({ status: 'failing', health: { consecutiveFailures: 2 } });
    expect(sumEmfMetrics(output)).toEqual({
      ConnectionsActive: 3,
      ConnectionsPaused: 1,
      ConnectionsFailing: 1,
      TokenRefreshed: 2,
      RefreshTokenRotated: 1,
      TokenRefreshFailed: 0,
      TokenRefreshRefused: 1,
      ConnectionsKeyUnavailable: 0,
    });
    expect(output).not.toMatch(/"connection":"[^"]*"[^\n]*"_aws"/); // no metric carries a connection
    const lines = logs(output).filter((l) => l['message'] === 'token refresh');
    expect(lines.map((l) => [l['connection'], l['outcome']]).sort()).toEqual([
      ['broken', 'refused'],
      ['busy', 'refreshed'],
      ['new', 'refreshed'],
    ]);
    // Already failing: no status change, so no status line.
    expect(logs(output).filter((l) => l['message'] === STATUS_CHANGE_MESSAGE)).toHaveLength(0);
    // The run's line: its counts and the token pace's rate per client id.
    expect(logs(output).find((l) => l['message'] === 'token refresher run')).toMatchObject({ trigger: 'schedule', due: 3, refreshed: 2, tokenPace: { 'client-1': 1000 } });
    expectNoToken(output + JSON.stringify(result), [...store.rows.values()].flatMap((r) => [r.refreshToken, r.accessToken ?? '']).concat(['rt-broken-secret', 'at-busy-secret']));
  });

  it('publishes with the dimension service alone, and with the stage beside it when the configuration has one', async () => {
    const unstaged = await setup().run({});
    expect(emfDimensionSets(unstaged.output)).toEqual(['ContentSync: service=token-refresher']);
    const staged = await setup({ stage: 'staging' }).run({});
    expect(emfDimensionSets(staged.output)).toEqual(['ContentSync: service=token-refresher, stage=staging']);
  });

  it("one connection's refusal or failure never stops the others; the status change is logged once", async () => {
    const { store, provider, run } = setup();
    for (const id of ['a', 'b', 'c', 'd', 'e']) store.seed({ connection: id, refreshToken: `rt-${id}-secret` });
    provider.answers.set('rt-b-secret', providerError('permanent', 400, 'invalid_grant'));
    provider.answers.set('rt-d-secret', providerError('transient', 503));
    store.rows.get('e')!.refreshLease = { owner: 'other', until: T0 + MINUTE };
    const { result, output } = await run({});
    expect(result).toMatchObject({ due: 5, refreshed: 2, refused: 1, failed: 1, skipped: 1 });
    expect(store.row('a')?.accessToken).toBeDefined();
    expect(store.row('c')?.accessToken).toBeDefined();
    expect(store.row('b')?.status).toBe('failing');
    expect(store.row('d')).toMatchObject({ status: 'active', health: { consecutiveFailures: 1 } });
    const changes = logs(output).filter((l) => l['message'] === STATUS_CHANGE_MESSAGE);
    expect(changes.map((l) => [l['connection'], l['from'], l['to']])).toEqual([['b', 'active', 'failing']]);
    expect(changes[0]?.['reason']).toMatch(/HTTP 400.*invalid_grant/);
    expect(sumEmfMetrics(output)).toMatchObject({ TokenRefreshed: 2, TokenRefreshRefused: 1, TokenRefreshFailed: 1 });
  });

  it('a store failure for one connection counts as failed; the run goes on', async () => {
    const { store, run } = setup();
    store.seed({ connection: 'a' });
    const take = store.takeRefreshLease.bind(store);
    store.takeRefreshLease = async (connection, lease) => {
      if (connection === 'a') throw new Error('DynamoDB UpdateItem failed (InternalServerError)');
      return take(connection, lease);
    };
    store.seed({ connection: 'b' });
    const { result, error } = await run({});
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ refreshed: 1, failed: 1 });
  });

  it(`refreshes at most refreshConcurrency connections at once`, async () => {
    const { store, provider, run } = setup({ refreshConcurrency: 3 });
    for (let i = 0; i < 12; i++) store.seed({ connection: `c${i}` });
    const { result } = await run({});
    expect(result).toMatchObject({ due: 12, refreshed: 12 });
    expect(provider.maxInFlight).toBe(3);
  });

  it('starts no refresh once the remaining time is under the margin, and logs how many are left', async () => {
    const { store, provider, run } = setup({ refreshConcurrency: 1 });
    for (let i = 0; i < 5; i++) store.seed({ connection: `c${i}` });
    let remaining = 60_000;
    const ctx = context(() => {
      const now = remaining;
      remaining -= 20_000; // each look at the clock costs 20 s of the invocation (margin: 1 s time-out + 10 s)
      return now;
    });
    const { result, output } = await run({}, ctx);
    expect(provider.calls).toHaveLength(3);
    expect(result).toMatchObject({ due: 5, refreshed: 3, left: 2 });
    expect(logs(output).find((l) => String(l['message']).startsWith('time ran short'))).toMatchObject({ left: 2, due: 5 });
  });

  it('a token another refresh stored between the scan and the lease is kept: no getToken', async () => {
    const { store, provider, run } = setup();
    store.seed({ connection: 'acme', refreshToken: 'rt-acme-secret', accessToken: 'at-scanned-secret', refreshedAt: iso(T0 - 29 * MINUTE), lastUsedAt: iso(T0 - MINUTE) });
    const take = store.takeRefreshLease.bind(store);
    store.takeRefreshLease = async (connection, lease) => {
      // The item sync (or an overlapping run) refreshed it after the scan and released its lease.
      Object.assign(store.rows.get(connection)!, { accessToken: 'at-meanwhile-secret', refreshedAt: iso(T0) });
      return take(connection, lease);
    };
    const { result, output } = await run({});
    expect(provider.calls).toHaveLength(0);
    expect(result).toMatchObject({ due: 1, refreshed: 0, skipped: 1 });
    expect(store.row('acme')).toMatchObject({ accessToken: 'at-meanwhile-secret' });
    expect(store.row('acme')?.refreshLease).toBeUndefined();
    expect(logs(output).find((l) => l['message'] === 'token refresh')).toMatchObject({ connection: 'acme', outcome: 'current' });
  });

  it("a result write that fails is tried again until shortly before the invocation's end", async () => {
    const store = new MemoryConnectionStore();
    const provider = new FakeProvider();
    const clock = new FakeClock();
    const log = new MemoryLog();
    const sleeps: number[] = [];
    store.seed({ connection: 'acme', refreshToken: 'rt-acme-secret' });
    provider.answers.set('rt-acme-secret', { accessToken: 'at-new-secret', refreshToken: 'rt-rotated-secret' });
    store.failing.set('completeRefresh', new Error('DynamoDB UpdateItem failed (InternalServerError)'));
    const ports = {
      store,
      provider,
      clock,
      log,
      tokens: new FakeTokenSlots(),
      marginMs: 11_000,
      remainingMs: () => 20_000 - (clock.ms - T0),
      sleep: async (ms: number) => {
        sleeps.push(ms);
        clock.advance(ms);
      },
    };
    const report = await runRefresher(ports, settings);
    expect(report).toMatchObject({ due: 1, failed: 1 });
    // The deadline: 20 s left at the start, less 2 s.
    expect(sleeps).toEqual([200, 400, 800, 1600, 2000, 2000, 2000, 2000, 2000, 2000, 2000]);
    expect(clock.ms - T0).toBe(17_000);
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
    // Stored at last, within the time: the rotated token is kept.
    store.failing.delete('completeRefresh');
    delete store.rows.get('acme')!.refreshLease;
    clock.ms = T0;
    let failures = 6;
    const complete = store.completeRefresh.bind(store);
    store.completeRefresh = async (input) => {
      if (failures-- > 0) throw new Error('DynamoDB UpdateItem failed (InternalServerError)');
      return complete(input);
    };
    expect(await runRefresher(ports, settings)).toMatchObject({ refreshed: 1, rotated: 1 });
    expect(store.row('acme')).toMatchObject({ refreshToken: 'rt-rotated-secret' });
  });

  it('the deploy-time run is a run like any other; no connection at all is fine', async () => {
    const { run } = setup();
    const { result, error, output } = await run({ trigger: 'deploy' });
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ trigger: 'deploy', due: 0, connections: { active: 0, paused: 0, failing: 0, removed: 0 } });
    expect(sumEmfMetrics(output)).toMatchObject({ ConnectionsActive: 0, TokenRefreshed: 0 });
  });

  it('a scan that fails fails the invocation, with the reason logged', async () => {
    const { store, run } = setup();
    store.failing.set('list', new Error('DynamoDB Scan on the connections table failed (AccessDeniedException)'));
    const { error, output } = await run(null);
    expect(String(error)).toMatch(/AccessDeniedException/);
    expect(logs(output).find((l) => l['level'] === 'ERROR')).toMatchObject({ message: 'token refresher run failed: the connections table could not be scanned' });
  });
});

describe('the order of a run, and spreading the load', () => {
  const inUse = (minutesOld: number, used = T0 - MINUTE) => ({ accessToken: `at-${minutesOld}-secret`, refreshedAt: iso(T0 - minutesOld * MINUTE), lastUsedAt: iso(used) });

  it('in use first, then no token, idle, failing; within each the most overdue first', async () => {
    const { store, provider, ports } = corePorts();
    store.seed({ connection: 'f-late', status: 'failing', refreshToken: 'rt-f-late', health: { consecutiveFailures: 1, lastFailureAt: iso(T0 - 3 * HOUR) } });
    store.seed({ connection: 'f-early', status: 'failing', refreshToken: 'rt-f-early', health: { consecutiveFailures: 1, lastFailureAt: iso(T0 - 5 * HOUR) } });
    store.seed({ connection: 'idle-25h', refreshToken: 'rt-idle-25h', accessToken: 'at-i1', refreshedAt: iso(T0 - 25 * HOUR) });
    store.seed({ connection: 'idle-30h', refreshToken: 'rt-idle-30h', accessToken: 'at-i2', refreshedAt: iso(T0 - 30 * HOUR) });
    store.seed({ connection: 'new-later', refreshToken: 'rt-new-later', updatedAt: iso(T0 - MINUTE) });
    store.seed({ connection: 'new-sooner', refreshToken: 'rt-new-sooner', updatedAt: iso(T0 - HOUR) });
    store.seed({ connection: 'use-26', refreshToken: 'rt-use-26', ...inUse(26) });
    store.seed({ connection: 'use-40', refreshToken: 'rt-use-40', ...inUse(40) });
    store.seed({ connection: 'use-31', refreshToken: 'rt-use-31', ...inUse(31) });
    const report = await runRefresher(ports, { ...settings, refreshConcurrency: 1 });
    expect(report).toMatchObject({ due: 9, early: 0, refreshed: 9, refused: 0, left: 0 });
    expect(provider.calls.map((c) => c.refreshToken)).toEqual([
      'rt-use-40',
      'rt-use-31',
      'rt-use-26',
      'rt-new-sooner',
      'rt-new-later',
      'rt-idle-30h',
      'rt-idle-25h',
      'rt-f-early',
      'rt-f-late',
    ]);
  });

  it('the ones a run could not start are the first of the next', async () => {
    const { store, provider, clock, ports } = corePorts({ marginMs: 11_000 });
    for (let i = 0; i < 6; i++) store.seed({ connection: `c${i}`, refreshToken: `rt-c${i}`, ...inUse(26 + i) });
    // Each refresh takes 10 s of the invocation: 30 s left at the start allow two.
    const getToken = provider.getToken.bind(provider);
    provider.getToken = async (credentials) => {
      clock.advance(10_000);
      return getToken(credentials);
    };
    const started = clock.ms;
    const first = await runRefresher({ ...ports, remainingMs: () => 30_000 - (clock.ms - started) }, { ...settings, refreshConcurrency: 1 });
    expect(first).toMatchObject({ due: 6, refreshed: 2, left: 4 });
    expect(provider.calls.map((c) => c.refreshToken)).toEqual(['rt-c5', 'rt-c4']);
    // The next run, 5 minutes later: the four left first (still the most overdue), oldest first.
    clock.advance(5 * MINUTE);
    const next = clock.ms;
    const second = await runRefresher({ ...ports, remainingMs: () => 30_000 - (clock.ms - next) }, { ...settings, refreshConcurrency: 1 });
    expect(second).toMatchObject({ due: 4, refreshed: 2, left: 2 });
    expect(provider.calls.map((c) => c.refreshToken)).toEqual(['rt-c5', 'rt-c4', 'rt-c3', 'rt-c2']);
  });

  it("a run with fewer tokens in use due than its share renews the oldest others early (at least half tokenRefreshMinutes old), after all the rest", async () => {
    const { store, provider, ports } = corePorts();
    // 12 connections in use, none due: a run's share is 12 × 5 ÷ 30 = 2.
    for (let i = 0; i < 4; i++) store.seed({ connection: `a${i}`, refreshToken: `rt-a${i}`, ...inUse(20 + i) });
    for (let i = 0; i < 4; i++) store.seed({ connection: `b${i}`, refreshToken: `rt-b${i}`, ...inUse(16) });
    for (let i = 0; i < 4; i++) store.seed({ connection: `c${i}`, refreshToken: `rt-c${i}`, ...inUse(10) });
    store.seed({ connection: 'idle', refreshToken: 'rt-idle', accessToken: 'at-idle', refreshedAt: iso(T0 - 25 * HOUR) });
    const report = await runRefresher(ports, { ...settings, refreshConcurrency: 1 });
    expect(report).toMatchObject({ due: 1, early: 2, refreshed: 3, left: 0 });
    expect(provider.calls.map((c) => c.refreshToken)).toEqual(['rt-idle', 'rt-a3', 'rt-a2']);
  });

  it('no early renewal when the due ones make the share; none of a token younger than half tokenRefreshMinutes', async () => {
    const { store, provider, ports } = corePorts();
    for (let i = 0; i < 2; i++) store.seed({ connection: `due${i}`, refreshToken: `rt-due${i}`, ...inUse(26) });
    for (let i = 0; i < 10; i++) store.seed({ connection: `x${i}`, refreshToken: `rt-x${i}`, ...inUse(20) });
    expect(await runRefresher(ports, settings)).toMatchObject({ due: 2, early: 0, refreshed: 2 });
    const young = corePorts();
    for (let i = 0; i < 12; i++) young.store.seed({ connection: `y${i}`, refreshToken: `rt-y${i}`, ...inUse(14) });
    expect(await runRefresher(young.ports, settings)).toMatchObject({ due: 0, early: 0, refreshed: 0 });
    expect(provider.calls).toHaveLength(2);
    expect(young.provider.calls).toHaveLength(0);
  });
});

describe('the token pace in a run', () => {
  it("asks each refresh's slot of its client id's pace, with the time by which it must start", async () => {
    const { store, tokens, clock, ports } = corePorts();
    store.seed({ connection: 'a', clientId: 'client-a' });
    store.seed({ connection: 'b', clientId: 'client-b' });
    await runRefresher({ ...ports, remainingMs: () => 100_000 }, settings);
    expect(tokens.asked.map((a) => a.clientId).sort()).toEqual(['client-a', 'client-b']);
    // The remaining time less the margin (the provider time-out and 10 s).
    for (const asked of tokens.asked) expect(asked.startBy).toBe(clock.ms + 100_000 - 11_000);
  });

  it.each([
    ['no slot before the run ends', { kind: 'wait', until: T0 + 10 * MINUTE, why: 'pace' } as const, 'the token pace has no slot before the run ends'],
    ["a Retry-After beyond the run's end", { kind: 'wait', until: T0 + HOUR, why: 'retry-after' } as const, "the token endpoint's Retry-After outlasts the run"],
    ['the token endpoint down (its breaker open)', { kind: 'outage', since: T0 } as const, 'the token endpoint is down'],
  ])('%s: the run starts no other refresh; the due ones are left, none failing or failed', async (_what, answer, message) => {
    const { store, provider, tokens, log, ports } = corePorts();
    for (let i = 0; i < 5; i++) store.seed({ connection: `c${i}` });
    tokens.answers.push(answer);
    const report = await runRefresher(ports, { ...settings, refreshConcurrency: 1 });
    expect(report).toMatchObject({ due: 5, refreshed: 0, failed: 0, refused: 0, left: 5 });
    expect(provider.calls).toHaveLength(0);
    expect(store.calls.filter((c) => c !== 'list')).toEqual([]);
    expect(log.lines.find((l) => l.message.startsWith(message))?.attributes).toMatchObject({ left: 5, due: 5 });
    for (let i = 0; i < 5; i++) expect(store.row(`c${i}`)).toMatchObject({ status: 'active', health: { consecutiveFailures: 0 } });
  });

  it('a getToken answered 429 is tried again in the run, first, when the pace allows; the connection is never failing', async () => {
    const { store, provider, ports } = corePorts();
    for (let i = 0; i < 3; i++) store.seed({ connection: `c${i}`, refreshToken: `rt-c${i}` });
    let first = true;
    provider.answers.set('rt-c0', () => {
      if (!first) return { accessToken: 'at-c0-secret' };
      first = false;
      return new ProviderError('the provider answered 429', { kind: 'rate-limited', operation: 'getToken', status: 429, retryAfterSeconds: 2 });
    });
    const report = await runRefresher(ports, { ...settings, refreshConcurrency: 1 });
    expect(report).toMatchObject({ due: 3, refreshed: 3, rateLimited: 1, failed: 0, left: 0 });
    expect(provider.calls.map((c) => c.refreshToken)).toEqual(['rt-c0', 'rt-c0', 'rt-c1', 'rt-c2']);
    expect(store.row('c0')).toMatchObject({ status: 'active', accessToken: 'at-c0-secret', health: { consecutiveFailures: 0 } });
  });

  it('through the handler: the pace of `token#<client id>` holds getToken to TOKEN_REQUESTS_PER_SECOND', async () => {
    const { store, provider, clock, run, paceKeys } = setup({ tokenRequestsPerSecond: 10, refreshConcurrency: 10 });
    for (let i = 0; i < 60; i++) store.seed({ connection: `c${i}` });
    const times: number[] = [];
    const getToken = provider.getToken.bind(provider);
    provider.getToken = async (credentials) => {
      times.push(clock.ms);
      return getToken(credentials);
    };
    const { result, output } = await run({});
    expect(result).toMatchObject({ due: 60, refreshed: 60, left: 0 });
    expect([...paceKeys]).toEqual(['token#client-1']);
    // After the first burst, 10 a second: 60 calls over about 5 s of the clock, never more than 12 in a second.
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(4_500);
    for (const t of times) expect(times.filter((u) => u >= t && u < t + 1000).length).toBeLessThanOrEqual(12);
    expectNoToken(output, [...store.rows.values()].flatMap((r) => [r.refreshToken, r.accessToken ?? '']));
  });
});
