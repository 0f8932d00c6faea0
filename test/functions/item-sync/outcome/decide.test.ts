/**
 * The delay of a waiting record (postponeDelaySeconds in functions/item-sync/outcome/decide.ts): the outage
 * schedule with its jitter, the pace's wait, a Retry-After's minimum, a connection's wait (its
 * gate's seconds), and SQS's 900 s ceiling.
 */
import { describe, expect, it } from 'vitest';
import {
  MAX_SEND_DELAY_SECONDS,
  OUTAGE_FIRST_DELAY_SECONDS,
  postponeDelaySeconds,
  type PostponePolicy,
  type Wait,
} from '../../../../functions/item-sync/outcome/decide.js';
import { DEFAULTS } from '../../../../functions/shared/config.js';

const POLICY: PostponePolicy = { rateLimitMinDelaySeconds: 60, postponeMaxSeconds: 300 };
const OUTAGE: Wait = { kind: 'outage', reason: 'the provider looks down' };
const MIDDLE = (): number => 0.5; // jitter factor exactly 1
const LOWEST = (): number => 0;
const HIGHEST = (): number => 0.999;

function pace(seconds: number, retryAfter = false): Wait {
  return { kind: 'pace', seconds, retryAfter };
}

describe('postponeDelaySeconds', () => {
  it('follows the outage schedule 5, 10, 20, 40 s…, doubling with each postponement, up to postponeMaxSeconds', () => {
    expect(OUTAGE_FIRST_DELAY_SECONDS).toBe(5);
    const schedule = [0, 1, 2, 3, 4, 5, 6, 20, 1_000].map((n) => postponeDelaySeconds(OUTAGE, n, POLICY, MIDDLE));
    expect(schedule).toEqual([5, 10, 20, 40, 80, 160, 300, 300, 300]);
    const short = { ...POLICY, postponeMaxSeconds: 120 };
    expect([0, 1, 2, 3, 4, 5, 9].map((n) => postponeDelaySeconds(OUTAGE, n, short, MIDDLE))).toEqual([5, 10, 20, 40, 80, 120, 120]);
  });

  it('with the default SYNC_POSTPONE_MAX_SECONDS (30): 5, 10, 20, 30, 30 …', () => {
    expect(DEFAULTS.postponeMaxSeconds).toBe(30);
    const defaults = { ...POLICY, postponeMaxSeconds: DEFAULTS.postponeMaxSeconds };
    expect([0, 1, 2, 3, 4, 9].map((n) => postponeDelaySeconds(OUTAGE, n, defaults, MIDDLE))).toEqual([5, 10, 20, 30, 30, 30]);
    expect([0, 3].map((n) => postponeDelaySeconds(OUTAGE, n, defaults, LOWEST))).toEqual([4, 24]);
    expect([0, 3].map((n) => postponeDelaySeconds(OUTAGE, n, defaults, HIGHEST))).toEqual([6, 36]);
  });

  it('treats a negative count as none', () => {
    expect(postponeDelaySeconds(OUTAGE, -3, POLICY, MIDDLE)).toBe(5);
  });

  it('spreads the outage delay by ±20% (random 0 → 80%, random 0.999 → just under 120%)', () => {
    expect([0, 1, 3, 5].map((n) => postponeDelaySeconds(OUTAGE, n, POLICY, LOWEST))).toEqual([4, 8, 32, 128]);
    expect([0, 1, 3, 5].map((n) => postponeDelaySeconds(OUTAGE, n, POLICY, HIGHEST))).toEqual([6, 12, 48, 192]);
  });

  it('never goes over SQS’s 900 s', () => {
    expect(MAX_SEND_DELAY_SECONDS).toBe(900);
    const long = { rateLimitMinDelaySeconds: 1_200, postponeMaxSeconds: 3_600 };
    expect(postponeDelaySeconds(OUTAGE, 10, long, HIGHEST)).toBe(900);
    expect(postponeDelaySeconds(OUTAGE, 10, long, LOWEST)).toBe(900);
    expect(postponeDelaySeconds(OUTAGE, 7, long, LOWEST)).toBe(512); // 640 × 0.8: under the ceiling, unchanged
    expect(postponeDelaySeconds(pace(5_000), 0, long, MIDDLE)).toBe(900);
    expect(postponeDelaySeconds(pace(2, true), 0, long, MIDDLE)).toBe(900);
  });

  it('gives a pace wait its seconds rounded up, at least 1 s, without jitter', () => {
    for (const random of [LOWEST, MIDDLE, HIGHEST]) {
      expect([0, 0.2, 1, 1.2, 3, 59.01].map((s) => postponeDelaySeconds(pace(s), 0, POLICY, random))).toEqual([1, 1, 1, 2, 3, 60]);
    }
    // Earlier postponements do not lengthen a pace wait.
    expect(postponeDelaySeconds(pace(4), 7, POLICY, MIDDLE)).toBe(4);
  });

  it('gives a Retry-After wait at least rateLimitMinDelaySeconds', () => {
    expect(postponeDelaySeconds(pace(2, true), 0, POLICY, MIDDLE)).toBe(60);
    expect(postponeDelaySeconds(pace(0, true), 0, POLICY, MIDDLE)).toBe(60);
    expect(postponeDelaySeconds(pace(75.2, true), 0, POLICY, MIDDLE)).toBe(76);
    expect(postponeDelaySeconds(pace(2, true), 0, { ...POLICY, rateLimitMinDelaySeconds: 5 }, MIDDLE)).toBe(5);
    // Not a Retry-After: no minimum.
    expect(postponeDelaySeconds(pace(2, false), 0, POLICY, MIDDLE)).toBe(2);
  });

  it('gives a connection’s wait its gate’s seconds rounded up, at least 1 s, at most 900 s, without jitter or schedule', () => {
    const connection = (seconds: number): Wait => ({ kind: 'connection', reason: 'connection "acme" is paused', seconds });
    for (const random of [LOWEST, MIDDLE, HIGHEST]) {
      expect([0, 0.4, 5, 12.2, 300, 900, 3_600].map((s) => postponeDelaySeconds(connection(s), 0, POLICY, random))).toEqual([1, 1, 5, 13, 300, 900, 900]);
    }
    // Neither earlier postponements nor the outage maximum change it.
    expect(postponeDelaySeconds(connection(300), 9, { ...POLICY, postponeMaxSeconds: 15 }, MIDDLE)).toBe(300);
  });
});
