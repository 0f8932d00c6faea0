/**
 * The one backoff formula (functions/shared/backoff.ts): the step doubles from the base up to the
 * cap, and each jitter kind takes its share of it, for the lowest, middle and highest random draw.
 */
import { describe, expect, it } from 'vitest';
import { backoffDelayMs, type Backoff } from '../../../functions/shared/backoff.js';

const LOWEST = (): number => 0;
const MIDDLE = (): number => 0.5;
const HIGHEST = (): number => 0.999;
const delays = (backoff: Backoff, random: () => number, attempts = 6): number[] =>
  Array.from({ length: attempts }, (_, i) => backoffDelayMs(i + 1, backoff, random));

describe('backoffDelayMs', () => {
  it('none: the step itself, doubling from the base, capped', () => {
    expect(delays({ baseMs: 100, jitter: 'none' }, HIGHEST)).toEqual([100, 200, 400, 800, 1600, 3200]);
    expect(delays({ baseMs: 100, capMs: 500, jitter: 'none' }, LOWEST)).toEqual([100, 200, 400, 500, 500, 500]);
  });

  it('equal: half the step fixed, half random', () => {
    const backoff: Backoff = { baseMs: 200, capMs: 2_000, jitter: 'equal' };
    expect(delays(backoff, LOWEST)).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(delays(backoff, MIDDLE)).toEqual([150, 300, 600, 1200, 1500, 1500]);
    expect(delays(backoff, HIGHEST)).toEqual([200, 400, 800, 1599, 1999, 1999]);
  });

  it('full: anywhere from nothing to the step', () => {
    const backoff: Backoff = { baseMs: 200, capMs: 5_000, jitter: 'full' };
    expect(delays(backoff, LOWEST)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(delays(backoff, MIDDLE)).toEqual([100, 200, 400, 800, 1600, 2500]);
    expect(delays(backoff, HIGHEST)).toEqual([200, 400, 799, 1598, 3197, 4995]);
  });

  it('whole milliseconds; an attempt below 1 counts as the first; no random draw without jitter', () => {
    expect(backoffDelayMs(1, { baseMs: 75, jitter: 'equal' }, () => 0.3)).toBe(49); // 37.5 + 0.3 × 37.5 = 48.75
    expect(backoffDelayMs(0, { baseMs: 100, jitter: 'none' }, LOWEST)).toBe(100);
    let draws = 0;
    backoffDelayMs(3, { baseMs: 100, jitter: 'none' }, () => (draws += 1) && 0);
    expect(draws).toBe(0);
  });
});
