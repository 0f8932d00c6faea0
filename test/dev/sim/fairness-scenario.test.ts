/**
 * Fairness between connections at short scale, in virtual time (dev/sim/fairness-scenario.ts): quiet
 * accounts keep their send-to-done times while another account's backfill, sent as `npm run enqueue
 * -- --backfill` sends it, goes through the reconcile queue's background lane. The full-scale figures
 * (`npm run sim -- fairness`) are in docs/measurements.md.
 */
import { describe, expect, it } from 'vitest';
import { FAIRNESS_P99_FACTOR, FAIRNESS_SHORT, fairnessRun } from '../../../dev/sim/fairness-scenario.js';
import { quantiles } from '../../../dev/sim/quiet-accounts.js';

describe('fairness, short scale: a backfill in the background lane beside quiet accounts', () => {
  it('keeps the quiet accounts’ p99 within 2× of idle, syncs every id, dead-letters nothing, meets no 429', async () => {
    const run = await fairnessRun(FAIRNESS_SHORT, 'background');
    const idle = quantiles(run.idle);
    const during = quantiles(run.during);

    // Enough quiet ids on each side for a p99 to mean something.
    expect(run.idle.length).toBeGreaterThanOrEqual(40);
    expect(run.during.length).toBeGreaterThanOrEqual(25);
    expect(FAIRNESS_P99_FACTOR).toBe(2);
    expect(during.p99).toBeLessThanOrEqual(FAIRNESS_P99_FACTOR * idle.p99);
    expect(run.backfill).toMatchObject({ ids: FAIRNESS_SHORT.backfillIds, done: FAIRNESS_SHORT.backfillIds });
    // The backfill is the sweep: it takes what users leave of (100 − usersReservedPercent)% of L, no more.
    const rate = run.backfill.done / run.backfill.seconds;
    expect(rate).toBeGreaterThan(0.5 * FAIRNESS_SHORT.limit);
    expect(rate).toBeLessThanOrEqual(0.8 * FAIRNESS_SHORT.limit * 1.02);
    expect(run.quietLeft).toBe(0);
    expect(run.deadLettered).toBe(0);
    expect(run.rateLimited).toBe(0);
  });
});
