/**
 * One container's client of the shared pace (functions/shared/provider/pace/provider-pace.ts) over the
 * port-level fake store, with a clock moved by hand: leases, one draw at a time, two containers on
 * one bucket, the 429 block, failures counted system-wide, the breaker and its probes, the local
 * fallback.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { MemoryPaceStore } from '../../../../../dev/fakes/memory-pace-store.js';
import {
  DEFAULT_PACE_SETTINGS,
  initialPaceState,
  openBreaker,
  type PaceSettings,
  type PaceState,
} from '../../../../../functions/shared/provider/pace/pace-state.js';
import { PaceBreaker, ProviderPace, type Grant, type PaceStore, type ProviderPaceOptions } from '../../../../../functions/shared/provider/pace/provider-pace.js';
import type { Clock, Log } from '../../../../../functions/shared/ports.js';

const T0 = Date.UTC(2026, 0, 1, 12);
/** The breaker's threshold set low (4; the default is 8) so that its mechanics take few requests to show. */
const SETTINGS: PaceSettings = { ...DEFAULT_PACE_SETTINGS, maxRate: 100, outageFailures: 4 };

/** A clock only the test moves. */
class ManualClock implements Clock {
  constructor(public ms = T0) {}
  now(): Date {
    return new Date(this.ms);
  }
  set(ms: number): void {
    this.ms = ms;
  }
}

class RecordingLog implements Log {
  readonly lines: Array<{ level: string; message: string; attributes: Record<string, unknown>[] }> = [];
  debug(message: string, ...attributes: Record<string, unknown>[]): void {
    this.lines.push({ level: 'debug', message, attributes });
  }
  info(message: string, ...attributes: Record<string, unknown>[]): void {
    this.lines.push({ level: 'info', message, attributes });
  }
  warn(message: string, ...attributes: Record<string, unknown>[]): void {
    this.lines.push({ level: 'warn', message, attributes });
  }
  error(message: string, ...attributes: Record<string, unknown>[]): void {
    this.lines.push({ level: 'error', message, attributes });
  }
  get warnings(): string[] {
    return this.lines.filter((line) => line.level === 'warn').map((line) => line.message);
  }
}

const GO: Grant = { kind: 'go', probe: false };

let clock: ManualClock;
let store: MemoryPaceStore;
let log: RecordingLog;

beforeEach(() => {
  clock = new ManualClock();
  store = new MemoryPaceStore();
  log = new RecordingLog();
});

function container(options: Partial<ProviderPaceOptions> = {}, over: PaceStore = store): ProviderPace {
  return new ProviderPace(over, clock, log, { settings: SETTINGS, fallbackRate: 2, concurrency: 10, random: () => 0, ...options });
}

/** Calls acquire() until it answers something other than go; returns how many went. */
async function drain(pace: ProviderPace): Promise<{ went: number; then: Grant }> {
  let went = 0;
  for (;;) {
    const grant = await pace.acquire();
    if (grant.kind !== 'go') return { went, then: grant };
    went += 1;
  }
}

/** Opens the breaker at the clock's time: outageFailures first attempts fail (reported by this container). */
async function openByFailures(pace: ProviderPace): Promise<void> {
  for (let i = 0; i < SETTINGS.outageFailures; i += 1) await pace.report({ kind: 'failed' }, GO);
}

describe('leases', () => {
  it('serve several acquire() calls from one store read and write', async () => {
    const pace = container();
    expect(pace.snapshot()).toEqual({ rate: 100, fallback: false });

    for (let n = 0; n < 10; n++) expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(1);
    expect(store.writes).toBe(1);
    // The full bucket (20) gave a lease of 10 (leaseSeconds 0.1 at 100/s).
    expect(store.state).toMatchObject({ rate: 100, tokens: 10, at: T0 });

    for (let n = 0; n < 10; n++) expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(2);
    expect(store.writes).toBe(2);
    expect(store.state?.tokens).toBe(0);

    // The bucket is empty: the next lease runs into debt, its first token due in 10 ms.
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 10, why: 'pace' });
    expect(store.reads).toBe(3);
    expect(store.state?.tokens).toBe(-10);
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 10, why: 'pace' });
    expect(store.reads).toBe(3);
    clock.set(T0 + 10);
    expect(await pace.acquire()).toEqual(GO);
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 20, why: 'pace' });
    clock.set(T0 + 20);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(3);
  });

  it('hold no more tokens than the container can have in flight', async () => {
    const pace = container({ concurrency: 3 });
    for (let n = 0; n < 3; n++) expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(1);
    expect(store.state?.tokens).toBe(17);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(2);
    expect(store.state?.tokens).toBe(14);
  });

  it('hold no more tokens than the requests the container said are coming (expect), each go counted off', async () => {
    const pace = container();
    const release = pace.expect(2);
    for (let n = 0; n < 2; n++) expect(await pace.acquire()).toEqual(GO);
    // A lease of 2, not 10: the bucket (20) keeps the other 8 for every other container.
    expect(store.writes).toBe(1);
    expect(store.state?.tokens).toBe(18);
    // Beyond the claim: one more request still draws (a lease of one), it is never refused.
    expect(await pace.acquire()).toEqual(GO);
    expect(store.writes).toBe(2);
    expect(store.state?.tokens).toBe(17);
    release();

    // Two claims add up; a claim taken back before its requests no longer counts.
    const first = pace.expect(3);
    const second = pace.expect(4);
    first();
    clock.set(T0 + 1_000);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.state?.tokens).toBe(20 - 4);
    second();
    // Without a claim, the lease is the concurrency's again.
    clock.set(T0 + 2_000);
    for (let n = 0; n < 10; n++) expect(await pace.acquire()).toEqual(GO);
    expect(store.state?.tokens).toBe(10);
    expect(store.writes).toBe(4);
  });

  it('expire: unused tokens are not spent after the lease, the next acquire() draws again', async () => {
    const pace = container();
    for (let n = 0; n < 3; n++) expect(await pace.acquire()).toEqual(GO);
    clock.set(T0 + 100);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(2);
  });

  it('are drawn once for concurrent acquire() calls in one container', async () => {
    const pace = container();
    const grants = await Promise.all(Array.from({ length: 6 }, () => pace.acquire()));
    expect(grants).toEqual(Array.from({ length: 6 }, () => GO));
    expect(store.reads).toBe(1);
    expect(store.writes).toBe(1);
    expect(store.state?.tokens).toBe(10);
  });
});

describe('two containers', () => {
  it('share one bucket: together they never get more than it holds and refills', async () => {
    const a = container();
    const b = container();
    const went = { a: 0, b: 0 };
    for (let ms = 0; ms <= 1000; ms += 1) {
      clock.set(T0 + ms);
      // Concurrently, so that their conditional writes conflict.
      const [fromA, fromB] = await Promise.all([drain(a), drain(b)]);
      went.a += fromA.went;
      went.b += fromB.went;
    }
    // A full bucket (20) and one second at 100/s (+1 for the token due at the last instant).
    expect(went.a + went.b).toBeLessThanOrEqual(121);
    expect(went.a + went.b).toBeGreaterThanOrEqual(110);
    expect(went.a).toBeGreaterThan(20);
    expect(went.b).toBeGreaterThan(20);
    expect(store.conflicts).toBeGreaterThan(0);
  });

  it("see each other's 429: the block and the cut are written, the other's next draw waits until the block ends", async () => {
    const a = container();
    const b = container();
    const grant = await a.acquire();
    expect(await b.acquire()).toEqual(GO); // b holds a lease from before the 429

    await a.report({ kind: 'rate-limited', retryAfterMs: 5_000 }, grant);
    expect(store.state).toMatchObject({ blockedUntil: T0 + 5_000, ceiling: 100, rate: 85, cutAt: T0, tokens: 0 });
    expect(await a.acquire()).toEqual({ kind: 'wait', until: T0 + 5_000, why: 'retry-after' });
    expect(a.snapshot()).toEqual({ rate: 85, fallback: false });
    // The ceiling stays 100 (the operator's, refused at it): a cut alone is not logged.
    expect(log.lines.filter((line) => line.level === 'info')).toEqual([]);

    // b's lease runs out (leaseSeconds); its next draw meets the block.
    clock.set(T0 + 200);
    const reads = store.reads;
    expect(await b.acquire()).toEqual({ kind: 'wait', until: T0 + 5_000, why: 'retry-after' });
    expect(store.reads).toBe(reads + 1);
    expect(b.snapshot()).toEqual({ rate: 85, fallback: false });
    expect(await b.acquire()).toEqual({ kind: 'wait', until: T0 + 5_000, why: 'retry-after' });
    expect(store.reads).toBe(reads + 1);

    // The block is over; the cut emptied the bucket, so the next lease is paced (no longer retry-after).
    clock.set(T0 + 5_000);
    expect(await b.acquire()).toMatchObject({ kind: 'wait', why: 'pace' });
    expect(await a.acquire()).toMatchObject({ kind: 'wait', why: 'pace' });

    // Those draws grew the rate to 90 (0.9 × the ceiling). Refused there, below 0.98 × the ceiling: the
    // limit fell, the new ceiling is 90 × 0.85, under the rate of the 429. Logged.
    expect(store.state?.rate).toBe(90);
    await b.report({ kind: 'rate-limited', retryAfterMs: 1_000 }, GO);
    expect(store.state).toMatchObject({ blockedUntil: T0 + 6_000, rate: 76.5, cutAt: T0 + 5_000, tokens: 0 });
    expect(store.state?.ceiling).toBeCloseTo(76.5, 10);
    expect(log.lines).toEqual([
      { level: 'info', message: 'provider pace: rate limited', attributes: [{ rate: 76.5, breakerOpen: false }] },
    ]);
  });

  it('honour a 429 without Retry-After for defaultRetryAfterMs, and a huge one for at most an hour', async () => {
    const a = container();
    await a.report({ kind: 'rate-limited' }, await a.acquire());
    expect(await a.acquire()).toEqual({ kind: 'wait', until: T0 + 1_000, why: 'retry-after' });
    clock.set(T0 + 3_000); // past the cut's cool-down
    await a.report({ kind: 'rate-limited', retryAfterMs: 86_400_000 }, GO);
    expect(store.state?.blockedUntil).toBe(T0 + 3_000 + 3_600_000);
    expect(await a.acquire()).toEqual({ kind: 'wait', until: T0 + 3_000 + 3_600_000, why: 'retry-after' });
  });
});

describe('failures, system-wide', () => {
  it("add up across containers: two containers' failures open the breaker for both", async () => {
    const a = container();
    const b = container();
    const grantA = await a.acquire();
    const grantB = await b.acquire();
    await a.report({ kind: 'failed' }, grantA);
    await a.report({ kind: 'failed' }, grantA);
    await b.report({ kind: 'failed' }, grantB);
    expect(store.state).toMatchObject({ failures: 3, breaker: { open: false } });
    expect(a.outageKnown()).toBeUndefined();
    expect(b.outageKnown()).toBeUndefined();

    clock.set(T0 + 40);
    await b.report({ kind: 'failed' }, grantB);
    expect(store.state).toMatchObject({ failures: 4, breaker: { open: true, reason: 'provider', since: T0 + 40, nextProbeAt: T0 + 20_040 } });
    // The container whose report opened it knows at once, and spends no more of its lease.
    expect(b.outageKnown()).toEqual({ reason: 'provider', since: T0 + 40 });
    expect(await b.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 40 });
    // The other one sees it at the report of its next failure (the row comes back open).
    await a.report({ kind: 'failed' }, grantA);
    expect(store.state).toMatchObject({ failures: 5, breaker: { open: true, reason: 'provider', since: T0 + 40 } });
    expect(a.outageKnown()).toEqual({ reason: 'provider', since: T0 + 40 });
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 40 });
  });

  it("start again at a success in either container: at once when it saw failures counted, else at its next draw", async () => {
    const a = container();
    const b = container();
    const grantB = await b.acquire(); // b draws while no failure is counted
    const grantA = await a.acquire();
    await a.report({ kind: 'failed' }, grantA);
    await a.report({ kind: 'failed' }, grantA);
    await a.report({ kind: 'failed' }, grantA);
    expect(store.state?.failures).toBe(3);

    // b last saw no failures: its success is not written at once...
    const writes = store.writes;
    await b.report({ kind: 'ok' }, grantB);
    expect(store.writes).toBe(writes);
    expect(store.state?.failures).toBe(3);
    // ...but its next draw starts the count again.
    clock.set(T0 + 200); // b's lease has run out
    expect(await b.acquire()).toEqual(GO);
    expect(store.writes).toBe(writes + 1);
    expect(store.state?.failures).toBe(0);
    await a.report({ kind: 'failed' }, grantA);
    expect(store.state).toMatchObject({ failures: 1, breaker: { open: false } });

    // a saw the count in the row at each of its failure reports: its success is written at once.
    await a.report({ kind: 'failed' }, grantA);
    await a.report({ kind: 'failed' }, grantA);
    expect(store.state?.failures).toBe(3);
    await a.report({ kind: 'ok' }, grantA);
    expect(store.state?.failures).toBe(0);
    expect(store.state?.breaker).toEqual({ open: false });

    // b sees the failures a counted at its next draw, so its success is then written at once.
    await a.report({ kind: 'failed' }, grantA);
    clock.set(T0 + 400);
    expect(await b.acquire()).toEqual(GO);
    expect(store.state?.failures).toBe(1);
    await b.report({ kind: 'ok' }, GO);
    expect(store.state?.failures).toBe(0);
    expect(log.lines).toEqual([]);
  });

  it('are not counted again for another attempt at a request that already failed (`repeat`)', async () => {
    const a = container();
    const grant = await a.acquire();
    await a.report({ kind: 'failed' }, grant);
    const writes = store.writes;
    for (let n = 0; n < 10; n++) await a.report({ kind: 'failed', repeat: true }, grant);
    expect(store.writes).toBe(writes);
    expect(store.state).toMatchObject({ failures: 1, breaker: { open: false } });
    expect(a.outageKnown()).toBeUndefined();
    expect(await a.acquire()).toEqual(GO);
  });

  it('counted only in the container while the store cannot be used: its outageFailures opens its own breaker', async () => {
    const a = container({ outageFailures: 2, fallbackMs: 60_000 });
    const grant = await a.acquire();
    store.failing = true;
    await a.report({ kind: 'failed' }, grant);
    expect(a.snapshot()).toEqual({ rate: 2, fallback: true });
    expect(a.outageKnown()).toBeUndefined();
    clock.set(T0 + 10);
    await a.report({ kind: 'failed' }, grant);
    expect(a.outageKnown()).toEqual({ reason: 'provider', since: T0 + 10 });
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 10 });
    // The shared row never saw them.
    expect(store.state).toMatchObject({ failures: 0, breaker: { open: false } });
  });

  it('open no breaker through the outageFailures option while the store works (the settings decide)', async () => {
    const a = container({ outageFailures: 1 });
    const grant = await a.acquire();
    await a.report({ kind: 'failed' }, grant);
    await a.report({ kind: 'failed' }, grant);
    expect(a.outageKnown()).toBeUndefined();
    expect(store.state).toMatchObject({ failures: 2, breaker: { open: false } });
  });
});

describe('another attempt after a failure (afterFailure)', () => {
  it("drops the container's lease: the attempt draws from the shared row", async () => {
    const a = container();
    expect(await a.acquire()).toEqual(GO);
    expect(await a.acquire()).toEqual(GO); // from the lease
    expect(store.reads).toBe(1);
    expect(store.state?.tokens).toBe(10);

    expect(await a.acquire({ afterFailure: true })).toEqual(GO);
    expect(store.reads).toBe(2);
    expect(store.writes).toBe(2);
    // A new lease of 10; the 8 tokens left of the old one are not given back.
    expect(store.state?.tokens).toBe(0);
    expect(await a.acquire()).toEqual(GO); // from the new lease
    expect(store.reads).toBe(2);
  });

  it('sees a breaker another container opened before the attempt goes out', async () => {
    const a = container();
    const b = container();
    const grant = await a.acquire();
    await a.report({ kind: 'failed' }, grant);
    const opener = container({ settings: { ...SETTINGS, outageFailures: 2 } });
    await opener.report({ kind: 'failed' }, await opener.acquire());
    expect(store.state?.breaker).toMatchObject({ open: true, reason: 'provider', since: T0 });

    // Without afterFailure, a's lease still serves it; the attempt after its failure asks the row.
    expect(await a.acquire()).toEqual(GO);
    expect(await a.acquire({ afterFailure: true })).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(a.outageKnown()).toEqual({ reason: 'provider', since: T0 });
    expect(await b.acquire({ afterFailure: true })).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
  });
});

describe('the breaker', () => {
  it('opens after settings.outageFailures failures in a row; an ok in between starts the count again', async () => {
    const a = container();
    const b = container();
    const grant = await a.acquire();
    await a.report({ kind: 'failed' }, grant);
    await a.report({ kind: 'failed' }, grant);
    expect(store.state?.failures).toBe(2);
    await a.report({ kind: 'ok' }, grant);
    expect(store.state?.failures).toBe(0);
    await a.report({ kind: 'failed' }, grant);
    await a.report({ kind: 'failed' }, grant);
    await a.report({ kind: 'failed' }, grant);
    expect(store.state).toMatchObject({ failures: 3, breaker: { open: false } });
    expect(a.outageKnown()).toBeUndefined();
    // The draw, every failure at once, and the reset.
    expect(store.writes).toBe(7);
    expect(log.lines).toEqual([]);

    clock.set(T0 + 5);
    await a.report({ kind: 'failed' }, grant);
    expect(store.state?.failures).toBe(4);
    expect(store.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0 + 5, nextProbeAt: T0 + 20_005 });
    expect(log.lines).toEqual([
      { level: 'info', message: 'provider pace: request failed', attributes: [{ rate: 100, breakerOpen: true }] },
    ]);
    expect(a.outageKnown()).toEqual({ reason: 'provider', since: T0 + 5 });
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 5 });
    expect(a.snapshot()).toEqual({ rate: 100, breakerOpenSince: T0 + 5, breakerReason: 'provider', fallback: false });

    // The other container learns it at its draw.
    expect(b.outageKnown()).toBeUndefined();
    expect(await b.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 5 });
    expect(b.outageKnown()).toEqual({ reason: 'provider', since: T0 + 5 });
  });

  it("is the pace key's own: another key's pace (its own row) is not stopped by it", async () => {
    const a = container();
    const otherKey = new MemoryPaceStore();
    const b = container({}, otherKey);
    await openByFailures(a);
    expect(store.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0, nextProbeAt: T0 + 20_000 });
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(await b.acquire()).toEqual(GO);
    expect(otherKey.state?.breaker).toEqual({ open: false });
  });

  it('lets one probe through per probeIntervalMs across containers; a probe that fails keeps it open', async () => {
    const a = container();
    const b = container();
    await openByFailures(a);
    clock.set(T0 + 1);
    expect(await b.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });

    const probesBetween = async (from: number, to: number, step: number): Promise<Grant[]> => {
      const probes: Grant[] = [];
      for (let ms = from; ms < to; ms += step) {
        clock.set(ms);
        for (const pace of [a, b, b, a]) {
          const grant = await pace.acquire();
          if (grant.kind === 'go') probes.push(grant);
          else expect(grant).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
        }
      }
      return probes;
    };

    expect(await probesBetween(T0 + 1, T0 + 20_000, 500)).toEqual([]);
    expect(await probesBetween(T0 + 20_000, T0 + 40_000, 500)).toEqual([{ kind: 'go', probe: true, reason: 'provider' }]);
    expect(store.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0, nextProbeAt: T0 + 40_000 });

    clock.set(T0 + 40_000);
    const probe = await b.acquire();
    expect(probe).toEqual({ kind: 'go', probe: true, reason: 'provider' });
    await b.report({ kind: 'failed' }, probe);
    expect(store.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0, nextProbeAt: T0 + 60_000 });
    // A probe's failure is not counted: the breaker is open already (the count is the four that opened it).
    expect(store.state?.failures).toBe(SETTINGS.outageFailures);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
  });

  it("closes for everyone on a probe's ok", async () => {
    const a = container();
    const b = container();
    await openByFailures(a);
    expect(await b.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });

    clock.set(T0 + 20_000);
    const probe = await a.acquire();
    expect(probe).toEqual({ kind: 'go', probe: true, reason: 'provider' });
    clock.set(T0 + 20_300);
    await a.report({ kind: 'ok' }, probe);
    expect(store.state).toMatchObject({ breaker: { open: false }, tokens: 0, at: T0 + 20_300 });
    expect(a.outageKnown()).toBeUndefined();
    expect(a.snapshot()).toEqual({ rate: 100, fallback: false });
    expect(await a.acquire()).toEqual({ kind: 'wait', until: T0 + 20_310, why: 'pace' });

    // b draws again once the probe time it knew has passed, and finds the breaker closed.
    clock.set(T0 + 40_000);
    expect(await b.acquire()).toEqual(GO);
    expect(b.outageKnown()).toBeUndefined();
  });
});

describe('the store', () => {
  it('throwing puts the container on its local fallback pace: it never throws and never fails a request', async () => {
    const pace = container({ fallbackMs: 5_000 });
    store.failing = true;

    expect(await pace.acquire()).toEqual(GO);
    expect(log.warnings).toEqual(['the control table cannot be used; this container runs on its local pace for a while']);
    expect(log.lines.find((line) => line.level === 'warn')?.attributes).toEqual([
      {
        error: 'ProvisionedThroughputExceededException: the control table is throttled',
        localRate: 2,
        forMs: 5_000,
      },
    ]);
    expect(pace.snapshot()).toEqual({ rate: 2, fallback: true });

    // 2 a second, from this container alone, without asking the store.
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 500, why: 'pace' });
    clock.set(T0 + 500);
    expect(await pace.acquire()).toEqual(GO);
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 1_000, why: 'pace' });
    await expect(pace.report({ kind: 'rate-limited', retryAfterMs: 2_000 }, GO)).resolves.toBeUndefined();
    expect(store.reads).toBe(1);
    expect(store.writes).toBe(0);
    // The 429 still holds this container back.
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 2_500, why: 'retry-after' });
    expect(log.warnings).toHaveLength(1);
  });

  it('is tried again after fallbackMs', async () => {
    const pace = container({ fallbackMs: 5_000 });
    store.failing = true;
    expect(await pace.acquire()).toEqual(GO);
    store.failing = false;
    clock.set(T0 + 4_999);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(1);
    expect(pace.snapshot().fallback).toBe(true);

    clock.set(T0 + 5_000);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(2);
    expect(store.writes).toBe(1);
    expect(pace.snapshot()).toEqual({ rate: 100, fallback: false });
  });

  it('failing during a report puts the container on its fallback pace', async () => {
    const pace = container({ fallbackMs: 5_000 });
    const grant = await pace.acquire();
    store.failing = true;
    await expect(pace.report({ kind: 'rate-limited', retryAfterMs: 1_000 }, grant)).resolves.toBeUndefined();
    expect(pace.snapshot()).toEqual({ rate: 2, fallback: true });
    expect(log.lines.find((line) => line.level === 'warn')?.attributes).toEqual([
      {
        error: 'rate limited: ProvisionedThroughputExceededException: the control table is throttled',
        localRate: 2,
        forMs: 5_000,
      },
    ]);
  });

  it('changing under every draw (conflicts beyond writeAttempts) is a short wait, not the fallback', async () => {
    const busy = new ConflictingStore();
    const pace = container({ writeAttempts: 3, random: () => 0 }, busy);
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 5, why: 'pace' });
    expect(busy.reads).toBe(3);
    expect(busy.writes).toBe(3);
    expect(pace.snapshot()).toEqual({ rate: 100, fallback: false });
    expect(log.warnings).toEqual([]);

    const other = container({ writeAttempts: 2, random: () => 0.999 }, busy);
    expect(await other.acquire()).toEqual({ kind: 'wait', until: T0 + 24, why: 'pace' });
    expect(busy.writes).toBe(5);
  });

  it('changing under every draw holds back every caller of the container, not only the one that drew', async () => {
    const busy = new ConflictingStore();
    const pace = container({ writeAttempts: 3, random: () => 0 }, busy);
    const grants = await Promise.all([pace.acquire(), pace.acquire(), pace.acquire()]);
    expect(grants).toEqual(Array.from({ length: 3 }, () => ({ kind: 'wait', until: T0 + 5, why: 'pace' })));
    expect(busy.reads).toBe(3);
    clock.set(T0 + 5);
    await pace.acquire();
    expect(busy.reads).toBe(6);
  });

  it('changing under every change of a report gives the change up after writeAttempts, with a warning, not the fallback', async () => {
    const busy = new ConflictingStore();
    const pace = container({ writeAttempts: 2 }, busy);
    await pace.report({ kind: 'rate-limited', retryAfterMs: 2_000 }, GO);
    expect(busy.writes).toBe(2);
    // Still on the shared pace; the 429 holds this container back all the same.
    expect(pace.snapshot()).toEqual({ rate: 100, fallback: false });
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 2_000, why: 'retry-after' });
    expect(log.lines).toEqual([
      { level: 'warn', message: 'provider pace: a change was given up after write conflicts', attributes: [{ change: 'rate limited' }] },
    ]);
  });

  it('changing under every failure report counts the failures in this container only: outageFailures of them open its breaker', async () => {
    const busy = new ConflictingStore();
    const pace = container({ writeAttempts: 2, outageFailures: 3 }, busy);
    await pace.report({ kind: 'failed' }, GO);
    await pace.report({ kind: 'failed' }, GO);
    expect(busy.writes).toBe(4);
    expect(pace.outageKnown()).toBeUndefined();
    expect(pace.snapshot()).toEqual({ rate: 100, fallback: false });

    clock.set(T0 + 7);
    await pace.report({ kind: 'failed' }, GO);
    expect(pace.outageKnown()).toEqual({ reason: 'provider', since: T0 + 7 });
    expect(await pace.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 7 });
    expect(pace.snapshot()).toEqual({ rate: 100, breakerOpenSince: T0 + 7, breakerReason: 'provider', fallback: false });
    // The three failures, and the breaker it then tried to open; never the fallback's warning.
    expect(log.lines.map((line) => line.attributes)).toEqual([
      [{ change: 'request failed' }],
      [{ change: 'request failed' }],
      [{ change: 'request failed' }],
      [{ change: 'breaker opened' }],
    ]);
    expect(new Set(log.warnings)).toEqual(new Set(['provider pace: a change was given up after write conflicts']));
  });

  it('holding a malformed row is started afresh over it, with a warning', async () => {
    await store.write({ rate: 'fast' } as unknown as PaceState, 0);
    const pace = container();
    expect(await pace.acquire()).toEqual(GO);
    expect(log.warnings).toEqual(['the pace row is not a pace state; starting afresh']);
    expect(store.state).toEqual({ ...initialPaceState(SETTINGS, T0), tokens: 10 });
    expect(store.writes).toBe(2);
  });

  it("holding a rate above the operator's maxRate is capped to it", async () => {
    await store.write(initialPaceState({ ...SETTINGS, maxRate: 500 }, T0), 0);
    const pace = container({ concurrency: 100 });
    expect(await pace.acquire()).toEqual(GO);
    // A lease of 10 (at 100/s, from a bucket of 20), not 50 (at 500/s, from a bucket of 100).
    expect(store.state).toMatchObject({ rate: 100, tokens: 10, ceiling: 500 });
    expect(pace.snapshot()).toEqual({ rate: 100, fallback: false });
  });
});

/** A row that some other container always wrote first. */
class ConflictingStore implements PaceStore {
  reads = 0;
  writes = 0;
  async read(): Promise<{ state: unknown; version: number }> {
    this.reads += 1;
    return { state: initialPaceState(SETTINGS, T0), version: this.reads };
  }
  async write(): Promise<'written' | 'conflict'> {
    this.writes += 1;
    return 'conflict';
  }
}

describe('the sweep (the reconciler’s ids)', () => {
  const SWEEP = { sweep: true } as const;

  it('has a lease of its own in a container: switching class drops the other class’s lease', async () => {
    const pace = container();
    expect(await pace.acquire()).toEqual(GO);
    expect(store.state).toMatchObject({ tokens: 10, sweepTokens: 20 });

    // The users' lease holds 9 more; the sweep does not spend them, it draws its own (from both buckets),
    // its tokens spaced at the rate.
    expect(await pace.acquire(SWEEP)).toEqual(GO);
    expect(store.reads).toBe(2);
    expect(store.writes).toBe(2);
    expect(store.state).toMatchObject({ tokens: 0, sweepTokens: 10 });
    expect(await pace.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 10, why: 'pace' });
    clock.set(T0 + 10);
    expect(await pace.acquire(SWEEP)).toEqual(GO);
    expect(store.reads).toBe(2);

    // Users again: their old lease is gone, the sweep's is dropped; a new users' lease, into debt.
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(3);
    expect(store.writes).toBe(3);
    expect(store.state?.tokens).toBe(-9);
    expect(store.state?.sweepTokens).toBeCloseTo(10.8, 10);

    // The sweep never borrows: users are in debt, so it waits until the bucket holds a lease (19 tokens: 190 ms).
    expect(await pace.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 200, why: 'pace' });
    expect(store.reads).toBe(4);
    expect(store.writes).toBe(3);
    expect(await pace.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 200, why: 'pace' });
    expect(store.reads).toBe(4);

    // Users are not held back by the sweep's wait; their lease from before is gone (dropped at the switch).
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 110, why: 'pace' });
    expect(store.reads).toBe(5);
    expect(store.writes).toBe(4);
    expect(store.state?.tokens).toBe(-19);
    clock.set(T0 + 110);
    expect(await pace.acquire()).toEqual(GO);
    expect(store.reads).toBe(5);
  });

  it("a sweep request's 429 holds the sweep alone: in this container and in another, users' ids go on", async () => {
    const sweeper = container();
    const users = container();
    expect(await sweeper.acquire(SWEEP)).toEqual(GO);
    await sweeper.report({ kind: 'rate-limited', retryAfterMs: 5_000 }, GO);
    expect(store.state).toMatchObject({ blockedUntil: 0, sweepBlockedUntil: T0 + 5_000, sweepTokens: 0 });
    expect(store.state?.rate).toBeCloseTo(85, 10);
    clock.set(T0 + 100);
    // The sweep waits out the Retry-After, here and in the other container; users' ids draw at once.
    expect(await sweeper.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 5_000, why: 'retry-after' });
    expect(await users.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 5_000, why: 'retry-after' });
    expect(await sweeper.acquire()).toEqual(GO);
    expect(await users.acquire()).toEqual(GO);
    // A users' 429 holds everyone, the sweep included (a third container sees it at its first draw).
    await users.report({ kind: 'rate-limited', retryAfterMs: 8_000 }, GO);
    expect(store.state?.blockedUntil).toBe(T0 + 8_100);
    expect(await container().acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 8_100, why: 'retry-after' });
    expect(await container().acquire()).toEqual({ kind: 'wait', until: T0 + 8_100, why: 'retry-after' });
  });

  it('a sweep whose leases expire unspent does not make the rate grow; one that spends them does', async () => {
    // 200/s: leases of 20 tokens, 5 ms apart, each expiring 100 ms after its last. Half the rate for the
    // sweep, so that its bucket does not overflow between two leases: only the spending tells the two apart.
    const UNKNOWN: PaceSettings = { ...DEFAULT_PACE_SETTINGS, initialRate: 200, userShare: 0.5 };
    const rateAfter = async (spend: number): Promise<number> => {
      const own = new MemoryPaceStore();
      const pace = container({ settings: UNKNOWN, concurrency: 50 }, own);
      clock.set(T0);
      for (let round = 0; round < 10; round += 1) {
        const drawnAt = clock.ms;
        for (let spent = 0, asked = 0; spent < spend; asked += 1) {
          expect(asked).toBeLessThan(1_000);
          const grant = await pace.acquire(SWEEP);
          if (grant.kind === 'wait') clock.set(Math.max(grant.until, clock.ms + 1));
          else spent += 1;
        }
        // A lease partly spent is left to expire (its last token due at +95 ms, gone at +195 ms).
        if (spend < 20) clock.set(drawnAt + 195);
      }
      return own.state!.rate;
    };
    expect(await rateAfter(1)).toBe(200);
    expect(await rateAfter(20)).toBeGreaterThan(200);
  });

  it('writes nothing for a draw that answers wait, and keeps a success seen for the next draw that is written', async () => {
    const seeded: PaceState = { ...initialPaceState(SETTINGS, T0), tokens: -30, failures: 2 };
    await store.write(seeded, 0);
    const pace = container();
    await pace.report({ kind: 'ok' }, GO); // no failures known here yet: nothing written
    expect(store.writes).toBe(1);

    expect(await pace.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 400, why: 'pace' });
    expect(store.reads).toBe(1);
    expect(store.writes).toBe(1);
    expect(store.state).toEqual(seeded);

    // The bucket holds a lease (10) at T0 + 400: the sweep takes it, and the draw starts the count again.
    clock.set(T0 + 400);
    expect(await pace.acquire(SWEEP)).toEqual(GO);
    expect(store.writes).toBe(2);
    expect(store.state).toMatchObject({ sweepTokens: 10, failures: 0, at: T0 + 400 });
    expect(store.state?.tokens).toBeCloseTo(0, 10);
    // The lease's next token is due one interval later, without a read of the row.
    expect(await pace.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 410, why: 'pace' });
    expect(store.reads).toBe(2);
  });

  it('spreads the sweep containers that found the bucket short over the next 20 ms; users wait exactly', async () => {
    const seeded: PaceState = { ...initialPaceState(SETTINGS, T0), tokens: -30 };
    await store.write(seeded, 0);
    // The bucket holds a lease at T0 + 400 (as above); each sweep container asks again a little later.
    expect(await container({ random: () => 0.5 }).acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 410, why: 'pace' });
    expect(await container({ random: () => 0.999 }).acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 419, why: 'pace' });
    const sweeper = container({ random: () => 0.25 });
    expect(await sweeper.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 405, why: 'pace' });
    // Its callers meanwhile do not read the row again.
    expect(await sweeper.acquire(SWEEP)).toEqual({ kind: 'wait', until: T0 + 405, why: 'pace' });
    expect(store.reads).toBe(3);
    expect(store.writes).toBe(1);
  });

  it('writes nothing for a users’ draw that answers wait either (deeper in debt than maxDebtSeconds)', async () => {
    const seeded: PaceState = { ...initialPaceState(SETTINGS, T0), tokens: -45 };
    await store.write(seeded, 0);
    // No jitter for users' ids, whatever the random source says.
    const pace = container({ random: () => 0.999 });
    expect(await pace.acquire()).toEqual({ kind: 'wait', until: T0 + 50, why: 'pace' });
    expect(store.writes).toBe(1);
    expect(store.state).toEqual(seeded);
  });

  it('keeps the failure count the row holds after a wait draw: a success is then written at once', async () => {
    await store.write({ ...initialPaceState(SETTINGS, T0), tokens: -30, failures: 2 }, 0);
    const pace = container();
    await pace.report({ kind: 'ok' }, GO);
    expect(await pace.acquire(SWEEP)).toMatchObject({ kind: 'wait', why: 'pace' });
    expect(store.state?.failures).toBe(2);

    // A request of an earlier lease succeeds: the row still counts 2 failures, so the reset is written.
    await pace.report({ kind: 'ok' }, GO);
    expect(store.state?.failures).toBe(0);
    // Two failures elsewhere then do not open the breaker (they would have, on top of the 2).
    const other = container();
    await other.report({ kind: 'failed' }, GO);
    await other.report({ kind: 'failed' }, GO);
    expect(store.state).toMatchObject({ failures: 2, breaker: { open: false } });
  });

  it('in another container gets nothing while users draw into debt, and resumes within its share once they stop', async () => {
    const users = container();
    const sweeper = container();
    let usersWent = 0;
    let swept = 0;
    for (let ms = 0; ms < 1000; ms += 1) {
      clock.set(T0 + ms);
      usersWent += (await drain(users)).went;
      for (;;) {
        const grant = await sweeper.acquire(SWEEP);
        if (grant.kind !== 'go') break;
        swept += 1;
      }
    }
    expect(swept).toBe(0);
    // The full bucket (20), a second at 100/s and the debt of the lease drawn last.
    expect(usersWent).toBeGreaterThanOrEqual(110);
    expect(usersWent).toBeLessThanOrEqual(121);
    expect(store.state?.tokens).toBeLessThan(1);
    // Its waits were never written: its bucket is as full as it started.
    expect(store.state?.sweepTokens).toBe(20);

    // Users stop: the sweep gets tokens once the debt is paid, at most 80/s (+ one burst) after that.
    let firstGrantAt: number | undefined;
    for (let ms = 1000; ms < 3000; ms += 1) {
      clock.set(T0 + ms);
      for (;;) {
        const grant = await sweeper.acquire(SWEEP);
        if (grant.kind !== 'go') break;
        firstGrantAt ??= ms;
        swept += 1;
      }
    }
    expect(firstGrantAt).toBeDefined();
    expect(firstGrantAt!).toBeGreaterThan(1000);
    expect(swept).toBeGreaterThan(0);
    expect(swept).toBeLessThanOrEqual(Math.ceil(((3000 - firstGrantAt!) / 1000) * 80) + 20);
  });
});

describe('an open breaker known in the container', () => {
  it('is trusted without reading the row until the next probe or 2 s after it was read, then read again', async () => {
    const a = container();
    expect(a.waitingForProbe()).toBe(false);
    await openByFailures(a);
    expect(store.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0, nextProbeAt: T0 + 20_000 });
    expect(a.waitingForProbe()).toBe(true);
    const reads = store.reads;

    clock.set(T0 + 1_999);
    expect(a.waitingForProbe()).toBe(true);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(store.reads).toBe(reads);

    clock.set(T0 + 2_000);
    expect(a.waitingForProbe()).toBe(false);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(store.reads).toBe(reads + 1);
    expect(a.waitingForProbe()).toBe(true);

    // Read again at T0 + 19 s: the probe is due at T0 + 20 s, sooner than 2 s after that read.
    clock.set(T0 + 19_000);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(store.reads).toBe(reads + 2);
    clock.set(T0 + 20_000);
    expect(a.waitingForProbe()).toBe(false);
    expect(await a.acquire()).toEqual({ kind: 'go', probe: true, reason: 'provider' });
  });

  it('is trusted for 2 s too when learned from the row at a failure report (opened by the failures of two containers)', async () => {
    const a = container();
    const b = container();
    await a.report({ kind: 'failed' }, GO);
    await a.report({ kind: 'failed' }, GO);
    await a.report({ kind: 'failed' }, GO);
    clock.set(T0 + 100);
    await b.report({ kind: 'failed' }, GO);
    expect(store.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0 + 100, nextProbeAt: T0 + 20_100 });
    // a learns it at its next failure report.
    clock.set(T0 + 500);
    await a.report({ kind: 'failed' }, GO);
    expect(a.waitingForProbe()).toBe(true);
    const reads = store.reads;
    clock.set(T0 + 2_499);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 100 });
    expect(store.reads).toBe(reads);
    clock.set(T0 + 2_500);
    expect(a.waitingForProbe()).toBe(false);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 + 100 });
    expect(store.reads).toBe(reads + 1);
  });

  it("is seen closed within 2 s of another container's probe succeeding, not a probe interval later", async () => {
    const a = container();
    const prober = container();
    await openByFailures(a);

    clock.set(T0 + 20_000);
    const probe = await prober.acquire();
    expect(probe).toEqual({ kind: 'go', probe: true, reason: 'provider' });
    clock.set(T0 + 20_001);
    // a reads the row: still open, the next probe at T0 + 40 s.
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(store.state?.breaker).toMatchObject({ open: true, nextProbeAt: T0 + 40_000 });

    clock.set(T0 + 20_300);
    await prober.report({ kind: 'ok' }, probe);
    expect(store.state?.breaker).toEqual({ open: false });

    const reads = store.reads;
    clock.set(T0 + 22_000);
    expect(a.waitingForProbe()).toBe(true);
    expect(await a.acquire()).toEqual({ kind: 'outage', reason: 'provider', since: T0 });
    expect(store.reads).toBe(reads);

    clock.set(T0 + 22_001);
    expect(a.waitingForProbe()).toBe(false);
    expect(await a.acquire()).toEqual(GO);
    expect(store.reads).toBe(reads + 1);
    expect(a.outageKnown()).toBeUndefined();
    expect(a.waitingForProbe()).toBe(false);
  });

  it('on the local pace (store unusable) lets one local probe through per probeIntervalMs, not one per request after 2 s', async () => {
    const a = container({ fallbackMs: 120_000, outageFailures: 1 });
    store.failing = true;
    await a.report({ kind: 'failed' }, GO);
    expect(a.outageKnown()).toEqual({ reason: 'provider', since: T0 });
    expect(a.snapshot().fallback).toBe(true);
    // The row cannot be read: a batch is not short-cut here, its requests are answered by the local breaker.
    expect(a.waitingForProbe()).toBe(false);
    const outage: Grant = { kind: 'outage', reason: 'provider', since: T0 };

    const grantsBetween = async (from: number, to: number): Promise<Grant[]> => {
      const probes: Grant[] = [];
      for (let ms = from; ms < to; ms += 250) {
        clock.set(ms);
        for (let n = 0; n < 3; n++) {
          const grant = await a.acquire();
          if (grant.kind === 'go') {
            probes.push(grant);
            await a.report({ kind: 'failed' }, grant); // a probe that fails keeps it open
          } else expect(grant).toEqual(outage);
        }
      }
      return probes;
    };
    expect(await grantsBetween(T0, T0 + 20_000)).toEqual([]);
    expect(await grantsBetween(T0 + 20_000, T0 + 40_000)).toEqual([{ kind: 'go', probe: true, reason: 'provider' }]);
    expect(await grantsBetween(T0 + 40_000, T0 + 60_000)).toEqual([{ kind: 'go', probe: true, reason: 'provider' }]);
    expect(store.writes).toBe(0);
  });
});

/**
 * paceScope `connection`: one pace (its own row, its own bucket) per connection, one breaker per
 * client id. `client` is the client id's row: it holds the breaker of every connection pace given
 * the container's PaceBreaker over it.
 */
describe('one pace per connection, one breaker per client id', () => {
  /** The limit unknown to the system: the pace starts at 5/s and finds each limit itself. */
  const UNKNOWN: PaceSettings = { ...DEFAULT_PACE_SETTINGS, outageFailures: 4 };
  let client: MemoryPaceStore;
  let rowA: MemoryPaceStore;
  let rowB: MemoryPaceStore;

  beforeEach(() => {
    client = new MemoryPaceStore();
    rowA = new MemoryPaceStore();
    rowB = new MemoryPaceStore();
  });

  /** One container: a pace for the connections a and b, sharing the container's view of the client id's breaker. */
  function containerOf(options: Partial<ProviderPaceOptions> = {}): { a: ProviderPace; b: ProviderPace; breaker: PaceBreaker; pace: (row: MemoryPaceStore) => ProviderPace } {
    const breaker = new PaceBreaker(client);
    const pace = (row: MemoryPaceStore): ProviderPace =>
      new ProviderPace(row, clock, log, { settings: SETTINGS, fallbackRate: 2, concurrency: 10, random: () => 0, ...options }, breaker);
    return { a: pace(rowA), b: pace(rowB), breaker, pace };
  }

  const outageSince = (since: number): Grant => ({ kind: 'outage', reason: 'provider', since });

  it("a 429 with Retry-After on one connection's pace blocks and cuts that pace only: the other keeps drawing, its rate untouched", async () => {
    const settings = { settings: UNKNOWN };
    const one = containerOf(settings);
    const two = containerOf(settings);
    // Both connections' paces busy in two containers for 10 s: each finds its rate on its own (slow start).
    for (let ms = 0; ms <= 10_000; ms += 10) {
      clock.set(T0 + ms);
      for (const pace of [one.a, one.b, two.a, two.b]) await drain(pace);
    }
    const rateB = rowB.state!.rate;
    const rateA = rowA.state!.rate;
    expect(rateA).toBeGreaterThan(5);
    expect(rateB).toBeGreaterThan(5);

    const at = T0 + 10_000;
    await one.a.report({ kind: 'rate-limited', retryAfterMs: 30_000 }, GO);
    expect(rowA.state).toMatchObject({ blockedUntil: at + 30_000, cutAt: at, tokens: 0 });
    // Its first 429 (slow start): rate and ceiling half the rate it came at.
    expect(rowA.state).toMatchObject({ rate: rateA / 2, ceiling: rateA / 2 });
    // Nothing of the 429 in the other connection's row, nor in the client id's.
    expect(rowB.state).toMatchObject({ blockedUntil: 0, cutAt: 0, rate: rateB });
    expect(rowB.state!.ceiling).toBeUndefined();
    expect(client.writes).toBe(0);

    // For the 30 s of the Retry-After: a waits (in both containers, the other at its next draw); b draws on.
    let wentB = 0;
    for (let ms = 200; ms < 30_000; ms += 10) {
      clock.set(at + ms);
      for (const pace of [one.a, two.a]) expect(await pace.acquire()).toEqual({ kind: 'wait', until: at + 30_000, why: 'retry-after' });
      for (const pace of [one.b, two.b]) wentB += (await drain(pace)).went;
    }
    // b went on at its own rate: still growing (slow start), never cut.
    expect(wentB).toBeGreaterThan(rateB * 29);
    expect(rowB.state!.rate).toBeGreaterThanOrEqual(rateB);
    expect(rowB.state).toMatchObject({ blockedUntil: 0, cutAt: 0 });
    expect(rowB.state!.ceiling).toBeUndefined();
    // Each 429 cuts its own pace: b's limit found at b's rate, a's stays a's.
    const ceilingA = rowA.state!.ceiling;
    clock.set(at + 30_000);
    await two.b.report({ kind: 'rate-limited', retryAfterMs: 1_000 }, GO);
    expect(rowB.state!.ceiling).toBeGreaterThan(ceilingA!);
    expect(rowA.state!.ceiling).toBe(ceilingA);
    expect(await one.a.acquire()).toMatchObject({ kind: 'wait', why: 'pace' });
    expect(client.reads).toBe(0);
    expect(client.writes).toBe(0);
  });

  it("draws read and write their own row only; a success reads no other row while the client id's row counts no failure", async () => {
    const { a, b } = containerOf();
    for (let n = 0; n < 25; n += 1) {
      for (const pace of [a, b]) {
        const grant = await pace.acquire();
        if (grant.kind === 'go') await pace.report({ kind: 'ok' }, grant);
      }
      clock.set(clock.ms + 50);
    }
    expect(rowA.reads).toBeGreaterThan(0);
    expect(rowB.reads).toBeGreaterThan(0);
    expect(client.reads).toBe(0);
    expect(client.writes).toBe(0);
  });

  it("counts failures in the client id's row, across connections and containers: the breaker opens there, and every pace of the container that knows answers outage", async () => {
    const one = containerOf();
    const two = containerOf();
    await one.a.report({ kind: 'failed' }, GO);
    await one.b.report({ kind: 'failed' }, GO);
    await two.a.report({ kind: 'failed' }, GO);
    expect(client.state).toMatchObject({ failures: 3, breaker: { open: false } });
    clock.set(T0 + 5);
    await two.b.report({ kind: 'failed' }, GO);
    expect(client.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0 + 5, nextProbeAt: T0 + 20_005 });
    // The connections' rows hold no breaker and no failure.
    for (const row of [rowA, rowB]) expect(row.state === undefined || (row.state.failures === 0 && !row.state.breaker.open)).toBe(true);
    expect(log.lines).toEqual([{ level: 'info', message: 'provider pace: request failed', attributes: [{ breakerOpen: true }] }]);

    // Container two learned it: both its paces, and one it makes now for a third connection, answer outage without a read.
    const reads = client.reads + rowA.reads + rowB.reads;
    const third = two.pace(new MemoryPaceStore());
    for (const pace of [two.a, two.b, third]) {
      expect(pace.outageKnown()).toEqual({ reason: 'provider', since: T0 + 5 });
      expect(pace.waitingForProbe()).toBe(true);
      expect(await pace.acquire()).toEqual(outageSince(T0 + 5));
    }
    expect(client.reads + rowA.reads + rowB.reads).toBe(reads);
    expect(two.breaker.outage).toEqual({ reason: 'provider', since: T0 + 5, nextProbeAt: T0 + 20_005 });

    // Container one has not learned it (its draws read its connections' rows): the next request that fails tells it, for both its paces.
    expect(one.a.outageKnown()).toBeUndefined();
    expect(await one.b.acquire()).toEqual(GO);
    await one.b.report({ kind: 'failed' }, GO);
    expect(client.state?.failures).toBe(5);
    for (const pace of [one.a, one.b]) expect(await pace.acquire()).toEqual(outageSince(T0 + 5));
  });

  it('lets one probe through per probe interval for every pace of every container; each container reads the row once per 2 s', async () => {
    const containers = [containerOf(), containerOf()];
    await openByFailures(containers[0]!.a);
    await containers[1]!.b.report({ kind: 'failed' }, GO); // the second container learns it
    const readsBefore = client.reads;

    const probesBetween = async (from: number, to: number, step: number): Promise<Grant[]> => {
      const probes: Grant[] = [];
      for (let ms = from; ms < to; ms += step) {
        clock.set(ms);
        for (const { a, b } of containers) {
          for (const pace of [a, b, b, a]) {
            const grant = await pace.acquire();
            if (grant.kind === 'go') {
              probes.push(grant);
              await pace.report({ kind: 'failed' }, grant); // the provider is still down
            } else expect(grant).toEqual(outageSince(T0));
          }
        }
      }
      return probes;
    };
    expect(await probesBetween(T0 + 1, T0 + 20_000, 250)).toEqual([]);
    // Each container read the row every 2 s (the probe time it knew is later): 9 reads each in 20 s.
    expect(client.reads - readsBefore).toBe(2 * 9);
    for (const start of [20_000, 40_000, 60_000]) {
      expect(await probesBetween(T0 + start, T0 + start + 20_000, 250)).toEqual([{ kind: 'go', probe: true, reason: 'provider' }]);
    }
    expect(client.state?.breaker).toEqual({ open: true, reason: 'provider', since: T0, nextProbeAt: T0 + 80_000 });
    // The probes' failures are not counted, and nothing was drawn from the connections' rows.
    expect(client.state?.failures).toBe(SETTINGS.outageFailures + 1);
    expect(rowA.writes + rowB.writes).toBe(0);
  });

  it("closes for every pace at a probe's ok; another container sees it closed within 2 s and draws from its connections' rows again", async () => {
    const one = containerOf();
    const two = containerOf();
    await openByFailures(one.a);
    await two.a.report({ kind: 'failed' }, GO);
    expect(await two.b.acquire()).toEqual(outageSince(T0));

    clock.set(T0 + 20_000);
    const probe = await one.b.acquire();
    expect(probe).toEqual({ kind: 'go', probe: true, reason: 'provider' });
    // two reads the row: still open, the next probe at T0 + 40 s.
    clock.set(T0 + 20_001);
    expect(await two.a.acquire()).toEqual(outageSince(T0));
    clock.set(T0 + 20_300);
    await one.b.report({ kind: 'ok' }, probe);
    expect(client.state).toMatchObject({ breaker: { open: false }, failures: 0 });
    for (const pace of [one.a, one.b]) {
      expect(pace.outageKnown()).toBeUndefined();
      expect(await pace.acquire()).toEqual(GO);
    }

    // two trusts what it read for 2 s, then reads the row again and draws from its connections' rows.
    clock.set(T0 + 22_000);
    expect(await two.b.acquire()).toEqual(outageSince(T0));
    clock.set(T0 + 22_001);
    const reads = client.reads;
    expect(await two.b.acquire()).toEqual(GO);
    expect(await two.a.acquire()).toEqual(GO);
    expect(client.reads).toBe(reads + 1);
    expect(two.a.outageKnown()).toBeUndefined();
  });

  it("resets the client id's failure count at a success that follows failures the container counted there, and only then", async () => {
    const { a, b } = containerOf();
    await a.report({ kind: 'failed' }, GO);
    await a.report({ kind: 'failed' }, GO);
    expect(client.state?.failures).toBe(2);
    const writes = client.writes;
    // A success of either pace of the container: the count starts again.
    await b.report({ kind: 'ok' }, GO);
    expect(client.state?.failures).toBe(0);
    expect(client.writes).toBe(writes + 1);
    await a.report({ kind: 'ok' }, GO);
    expect(client.writes).toBe(writes + 1);
  });

  it("drops a breaker and failures a connection's row held from before (its own breaker then): the draw goes out, the row is written without them", async () => {
    await rowA.write(openBreaker({ ...initialPaceState(SETTINGS, T0), failures: 8 }, T0, 'provider', SETTINGS), 0);
    const { a } = containerOf();
    expect(await a.acquire()).toEqual(GO);
    expect(rowA.state).toMatchObject({ breaker: { open: false }, failures: 0 });
    expect(a.outageKnown()).toBeUndefined();
  });

  it('on the local pace (the breaker row unusable) keeps the probe time it knew: one local probe per probe interval', async () => {
    const { a, b } = containerOf({ fallbackMs: 120_000 });
    await openByFailures(a);
    client.failing = true;
    clock.set(T0 + 2_000);
    // The look at the row fails: this pace runs on its local pace; the probe it knew of is due at T0 + 20 s.
    expect(await a.acquire()).toEqual(outageSince(T0));
    expect(a.snapshot().fallback).toBe(true);
    clock.set(T0 + 4_000);
    expect(await b.acquire()).toEqual(outageSince(T0));
    const probes: Grant[] = [];
    for (let ms = 4_000; ms < 60_000; ms += 250) {
      clock.set(T0 + ms);
      for (const pace of [a, b]) {
        const grant = await pace.acquire();
        if (grant.kind === 'go') {
          probes.push(grant);
          await pace.report({ kind: 'failed' }, grant);
        }
      }
    }
    expect(probes).toEqual([
      { kind: 'go', probe: true, reason: 'provider' },
      { kind: 'go', probe: true, reason: 'provider' },
    ]);
    expect(client.writes).toBe(SETTINGS.outageFailures);
  });
});

describe('a pace with a hold (paceScope connection): what it admits, and when what it sends away comes back', () => {
  it('admits what its rate serves within the hold, at least one; everything without a hold', () => {
    // The rate it knows: the operator's 100/s until a draw says otherwise.
    const held = container({ maxHoldMs: 1_000 });
    expect(held.admits(500)).toBe(100);
    expect(held.admits(30)).toBe(30);
    // The sweep: its share (80%); a backlog: the whole rate.
    expect(held.admits(500, true)).toBe(80);
    expect(held.admits(500, true, true)).toBe(100);
    const slow = container({ maxHoldMs: 1_000, settings: { ...SETTINGS, maxRate: 0.5 } });
    expect(slow.admits(10)).toBe(1);
    expect(container().admits(500)).toBe(500);
  });

  it('books returns at least minMs away, one slot of its rate after the last of the same class', () => {
    const held = container({ maxHoldMs: 1_000, settings: { ...SETTINGS, maxRate: 4 } });
    // 4/s: 250 ms apart for users and a backlog, 312.5 ms for the sweep (3.2/s).
    expect([held.bookReturn(1_000), held.bookReturn(1_000), held.bookReturn(1_000)]).toEqual([T0 + 1_000, T0 + 1_250, T0 + 1_500]);
    expect(held.bookReturn(1_000, true)).toBe(T0 + 1_000);
    expect(held.bookReturn(1_000, true)).toBe(T0 + 1_312.5);
    expect(held.bookReturn(1_000, true, true)).toBe(T0 + 1_000);
    // A longer wait (a Retry-After) moves the booking on; later bookings follow it.
    expect(held.bookReturn(5_000)).toBe(T0 + 5_000);
    expect(held.bookReturn(1_000)).toBe(T0 + 5_250);
    // Once the bookings are past, the next starts from now again.
    clock.set(T0 + 60_000);
    expect(held.bookReturn(1_000)).toBe(T0 + 61_000);
  });

  it('books no further than SQS delays (900 s): beyond, a return is spread at random over that horizon and books nothing', () => {
    const held = container({ maxHoldMs: 1_000, settings: { ...SETTINGS, maxRate: 4 }, random: () => 0.5 });
    let last = 0;
    for (let n = 0; n < 3_597; n += 1) last = held.bookReturn(1_000);
    // 1 s, then 3,596 slots of 250 ms: 900 s.
    expect(last).toBe(T0 + 900_000);
    expect(held.bookReturn(1_000)).toBe(T0 + 1_000 + 0.5 * 899_000);
    expect(held.bookReturn(1_000)).toBe(T0 + 1_000 + 0.5 * 899_000);
  });

  it('admits none and books past a Retry-After it knows of that outlasts the hold', async () => {
    const held = container({ maxHoldMs: 1_000 });
    expect(await held.acquire()).toMatchObject({ kind: 'go' });
    await held.report({ kind: 'rate-limited', retryAfterMs: 30_000 }, GO);
    expect(held.admits(50)).toBe(0);
    expect(held.bookReturn(1_000)).toBe(T0 + 30_000);
    // A sweep's Retry-After stops the sweep (and a backlog), not users.
    const sweep = container({ maxHoldMs: 1_000 }, new MemoryPaceStore());
    expect(await sweep.acquire({ sweep: true })).toMatchObject({ kind: 'go' });
    await sweep.report({ kind: 'rate-limited', retryAfterMs: 30_000 }, GO);
    expect(sweep.admits(50, true)).toBe(0);
    expect(sweep.admits(50, true, true)).toBe(0);
    expect(sweep.admits(50)).toBe(50);
    // Past it, the rate decides again.
    clock.set(T0 + 30_001);
    expect(held.admits(500)).toBeGreaterThan(0);
  });
});
