/**
 * The token endpoint's pace (functions/shared/connections/token-pace.ts): the real provider pace
 * over an in-memory pace row, one per client id under `token#<client id>`, on a clock that moves
 * when the pace makes its caller wait. Its ceiling, a slot later than the caller can wait, a 429's
 * Retry-After and cut, the breaker after failures in a row, how a getToken's end is told.
 */
import { describe, expect, it } from 'vitest';
import { MemoryPaceStore } from '../../../../dev/fakes/memory-pace-store.js';
import { paceRowKey } from '../../../../functions/shared/adapters/dynamodb-pace-store.js';
import type { TokenSlot } from '../../../../functions/shared/connections/ports.js';
import { tokenCallResult, tokenPaceKey, TokenPaces } from '../../../../functions/shared/connections/token-pace.js';
import { ProviderError } from '../../../../functions/shared/errors.js';
import { TOKEN_PACE_ROWS } from '../../../../infra/token-refresher/token-refresher.js';
import { FakeClock, MemoryLog, providerError, T0 } from './fakes.js';

function setup(ceiling = 10, concurrency = 10) {
  const clock = new FakeClock();
  const log = new MemoryLog();
  const stores = new Map<string, MemoryPaceStore>();
  const sleeps: number[] = [];
  const paces = new TokenPaces(
    {
      storeFor: (paceKey) => {
        const store = new MemoryPaceStore();
        stores.set(paceKey, store);
        return store;
      },
      clock,
      log,
      sleep: async (ms) => {
        sleeps.push(ms);
        clock.advance(ms);
      },
      random: () => 0.5,
    },
    { ceiling, concurrency },
  );
  return { clock, log, stores, sleeps, paces };
}

async function go(paces: TokenPaces, clientId = 'client-1', startBy?: number): Promise<Extract<TokenSlot, { kind: 'go' }>> {
  const slot = await paces.slot(clientId, startBy);
  if (slot.kind !== 'go') throw new Error(`expected a slot, got ${JSON.stringify(slot)}`);
  return slot;
}

describe('the token pace', () => {
  it('one pace per client id, its row `provider-pace#token#<client id>` (the rows the refresher may touch)', async () => {
    const { paces, stores } = setup();
    await go(paces, 'client-1');
    await go(paces, 'client-2');
    await go(paces, 'client-1');
    expect([...stores.keys()]).toEqual(['token#client-1', 'token#client-2']);
    expect(tokenPaceKey('client-1')).toBe('token#client-1');
    expect(paceRowKey(tokenPaceKey('client-1'))).toBe('provider-pace#token#client-1');
    expect(paceRowKey(tokenPaceKey('x')).startsWith(TOKEN_PACE_ROWS.replace(/\*$/, ''))).toBe(true);
  });

  it('never goes above its ceiling: 100 slots in a row take 10 s at 10 a second (after the first burst)', async () => {
    const { paces, clock } = setup(10, 1);
    const times: number[] = [];
    for (let i = 0; i < 100; i++) {
      const slot = await go(paces);
      times.push(clock.ms);
      await slot.report({ kind: 'ok' });
    }
    const elapsed = times.at(-1)! - times[0]!;
    expect(elapsed).toBeGreaterThanOrEqual(9_500);
    expect(elapsed).toBeLessThanOrEqual(10_500);
    // No second holds more than the ceiling and one burst (2 × 0.1 s of the rate).
    for (const t of times) expect(times.filter((u) => u >= t && u < t + 1000).length).toBeLessThanOrEqual(12);
    expect(paces.rates()).toEqual({ 'client-1': 10 });
  });

  it('a slot later than the caller can wait: `wait`, with when it would come, and nothing waited for', async () => {
    const { paces, clock, sleeps } = setup(1, 1);
    await go(paces);
    const waited = sleeps.length;
    const slot = await paces.slot('client-1', clock.ms + 100);
    expect(slot).toMatchObject({ kind: 'wait', why: 'pace' });
    expect((slot as { until: number }).until).toBeGreaterThan(clock.ms + 100);
    expect(sleeps).toHaveLength(waited);
    // Without a limit it is waited for.
    await go(paces);
    expect(sleeps.length).toBeGreaterThan(waited);
  });

  it("a 429 holds every caller until its Retry-After and cuts the rate", async () => {
    const { paces, clock } = setup();
    const slot = await go(paces);
    await slot.report({ kind: 'rate-limited', retryAfterMs: 30_000 });
    expect(await paces.slot('client-1', clock.ms + 10_000)).toEqual({ kind: 'wait', until: T0 + 30_000, why: 'retry-after' });
    // Waited for by a caller that can.
    await go(paces);
    expect(clock.ms).toBeGreaterThanOrEqual(T0 + 30_000);
    expect(paces.rates()['client-1']).toBeLessThan(10);
    // Another client id's pace is not held.
    const other = await go(paces, 'client-2', clock.ms);
    expect(other.kind).toBe('go');
  });

  it('failed calls in a row open its breaker: `outage`, no slot but one probe every 20 s; a probe that succeeds closes it', async () => {
    const { paces, clock, log } = setup();
    for (let i = 0; i < 8; i++) await (await go(paces)).report({ kind: 'failed' });
    expect(await paces.slot('client-1', undefined)).toMatchObject({ kind: 'outage' });
    // Its log lines name the pace.
    const paceLines = log.lines.filter((l) => l.message.startsWith('provider pace'));
    expect(paceLines.length).toBeGreaterThan(0);
    for (const line of paceLines) expect(line.attributes).toMatchObject({ paceKey: 'token#client-1' });
    clock.advance(20_000);
    const probe = await go(paces);
    expect(await paces.slot('client-1', undefined)).toMatchObject({ kind: 'outage' });
    await probe.report({ kind: 'ok' });
    await go(paces);
  });

  it("tells the pace how a getToken ended: 429 with its Retry-After, a transient failure, any other answer", () => {
    expect(tokenCallResult(new ProviderError('429', { kind: 'rate-limited', operation: 'getToken', status: 429, retryAfterSeconds: 3 }))).toEqual({ kind: 'rate-limited', retryAfterMs: 3_000 });
    expect(tokenCallResult(providerError('rate-limited', 429))).toEqual({ kind: 'rate-limited' });
    expect(tokenCallResult(providerError('transient', 503))).toEqual({ kind: 'failed' });
    for (const error of [providerError('unauthorized', 401), providerError('permanent', 400), providerError('malformed', 200), providerError('not-found', 404)]) {
      expect(tokenCallResult(error)).toEqual({ kind: 'ok' });
    }
    expect(tokenCallResult(new Error('not an answer'))).toBeUndefined();
  });
});
