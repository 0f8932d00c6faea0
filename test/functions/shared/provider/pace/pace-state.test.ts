/**
 * The provider pace's arithmetic (functions/shared/provider/pace/pace-state.ts): the token bucket, leases into
 * debt, growth by zone, the cut on a 429, the Retry-After block, the system-wide failure count and the
 * breaker, each with exact numbers.
 */
import { describe, expect, it } from 'vitest';
import {
  breakerDraw,
  burst,
  closeBreaker,
  DEFAULT_PACE_SETTINGS,
  draw,
  grownRate,
  initialPaceState,
  isPaceState,
  leaseSize,
  openBreaker,
  rateLimited,
  requestFailed,
  requestSucceeded,
  type PaceSettings,
  type PaceState,
  withoutBreaker,
} from '../../../../../functions/shared/provider/pace/pace-state.js';

const T = Date.UTC(2026, 0, 1, 12);
/** No operator ceiling: growth is not capped by maxRate. */
const OPEN: PaceSettings = { ...DEFAULT_PACE_SETTINGS };
/** The operator's ceiling at 100 requests a second. */
const CAPPED: PaceSettings = { ...DEFAULT_PACE_SETTINGS, maxRate: 100 };

/** A closed-breaker state at `T`; `grownAt: T` keeps a draw at `T` from growing the rate. */
function state(overrides: Partial<PaceState> = {}): PaceState {
  return { rate: 100, tokens: 0, at: T, cutAt: 0, grownAt: T, blockedUntil: 0, breaker: { open: false }, failures: 0, ...overrides };
}

/**
 * A background container (the sweep, or a backlog with `backlog`) as provider-pace.ts runs it: draws,
 * keeps the state only when granted (a wait is not written), comes back at the wait's retryAt (never
 * sooner than 10 ms nor later than 1 s), or `afterGrantMs` after a grant; from `from` (default a
 * fresh state) until `ms` have passed.
 */
function backgroundAlone(
  settings: PaceSettings,
  ms: number,
  afterGrantMs: number,
  want: (rate: number) => number,
  options: { backlog?: boolean; from?: PaceState } = {},
) {
  let current = options.from ?? initialPaceState(settings, T);
  let now = T;
  let taken = 0;
  let grants = 0;
  let waits = 0;
  while (now <= T + ms) {
    const result = draw(current, now, want(current.rate), settings, false, true, true, options.backlog === true);
    if (result.draw.kind === 'granted') {
      current = result.state;
      taken += result.draw.tokens;
      grants += 1;
      now += afterGrantMs;
    } else if (result.draw.kind === 'wait') {
      waits += 1;
      expect(result.draw.retryAt).toBeGreaterThanOrEqual(now + 10);
      expect(result.draw.retryAt).toBeLessThanOrEqual(now + 1_000);
      now = result.draw.retryAt;
    } else {
      throw new Error(`unexpected ${result.draw.kind}`);
    }
  }
  return { current, taken, grants, waits };
}

describe('the bucket', () => {
  it('keeps two leases of tokens, at least one; a lease is leaseSeconds of the rate, at least one token', () => {
    expect(burst(100, OPEN)).toBe(20);
    expect(burst(2, OPEN)).toBe(1);
    expect(leaseSize(100, OPEN)).toBe(10);
    expect(leaseSize(25, OPEN)).toBe(2);
    expect(leaseSize(5, OPEN)).toBe(1);
  });

  it('starts full at the operator ceiling, or at the initial rate with no ceiling known', () => {
    expect(initialPaceState(CAPPED, T)).toEqual({
      rate: 100,
      tokens: 20,
      at: T,
      ceiling: 100,
      cutAt: 0,
      grownAt: T,
      blockedUntil: 0,
      breaker: { open: false },
      failures: 0,
      sweepTokens: 20,
    });
    const fresh = initialPaceState(OPEN, T);
    expect(fresh).toEqual({ rate: 5, tokens: 1, at: T, cutAt: 0, grownAt: T, blockedUntil: 0, breaker: { open: false }, failures: 0, sweepTokens: 1 });
    expect('ceiling' in fresh).toBe(false);
  });

  it('refills at the rate, capped at the burst', () => {
    const partly = draw(state({ tokens: 0 }), T + 50, 5, CAPPED);
    expect(partly.draw).toEqual({ kind: 'granted', tokens: 5, startAt: T + 50, intervalMs: 0, probe: false });
    expect(partly.state).toMatchObject({ tokens: 0, at: T + 50, rate: 100 });

    // A second of 100/s would be 100 tokens; the bucket keeps 20.
    const full = draw(state({ tokens: 0 }), T + 1000, 10, CAPPED);
    expect(full.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T + 1000, intervalMs: 0, probe: false });
    expect(full.state).toMatchObject({ tokens: 10, at: T + 1000, grownAt: T + 1000 });
  });

  it('grants a lease into debt with its tokens spaced at 1/rate, the last one due when the debt is paid', () => {
    const first = draw(state({ tokens: 0 }), T, 10, OPEN);
    // 10 tokens of debt at 100/s are paid at T+100: the first of ten spaced 10 ms apart goes at T+10.
    expect(first.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T + 10, intervalMs: 10, probe: false });
    expect(first.state.tokens).toBe(-10);

    const second = draw(first.state, T, 10, OPEN);
    expect(second.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T + 110, intervalMs: 10, probe: false });
    expect(second.state.tokens).toBe(-20);
  });

  it('answers wait beyond the largest debt (maxDebtSeconds of the rate), until the lease would fit', () => {
    // Max debt at 100/s: 50 tokens. -45 - 10 = -55 is 5 tokens too deep: 50 ms.
    const deep = draw(state({ tokens: -45 }), T, 10, OPEN);
    expect(deep.draw).toEqual({ kind: 'wait', retryAt: T + 50, why: 'pace' });
    expect(deep.state.tokens).toBe(-45);

    const fits = draw(deep.state, T + 50, 10, OPEN);
    expect(fits.draw).toMatchObject({ kind: 'granted', tokens: 10 });
    expect(fits.state.tokens).toBe(-50);
  });

  it('never moves its time back for a container whose clock is behind: no time is counted twice', () => {
    const behind = draw(state({ tokens: 10, at: T, grownAt: T }), T - 5, 1, OPEN);
    expect(behind.state).toMatchObject({ tokens: 9, at: T, grownAt: T });
    // 10 ms after T at 100/s: one token, not 1.5.
    const later = draw(behind.state, T + 10, 1, OPEN);
    expect(later.state).toMatchObject({ tokens: 9, at: T + 10 });

    const cut = rateLimited(state({ tokens: 10, at: T }), T - 5, 1_000, OPEN);
    expect(cut).toMatchObject({ tokens: 0, at: T });
    const closed = closeBreaker(openBreaker(state({ at: T, grownAt: T }), T - 20, 'provider', OPEN), T - 5);
    expect(closed).toMatchObject({ tokens: 0, at: T, grownAt: T });
  });

  it('lets a lease as large as the wanted tokens into debt even where the rate allows less debt', () => {
    // At 2/s the debt limit would be 1 token; a lease of 3 is still granted (the debt limit is at least the lease).
    const result = draw(state({ rate: 2, tokens: 0 }), T, 3, OPEN);
    expect(result.draw).toEqual({ kind: 'granted', tokens: 3, startAt: T + 500, intervalMs: 500, probe: false });
  });
});

describe('growth', () => {
  it('grows only when the bucket is drawn empty (demand-limited)', () => {
    const limited = draw(state({ rate: 10, tokens: 0, grownAt: T - 1000 }), T, 1, OPEN);
    expect(limited.state.rate).toBe(15);
    expect(limited.state.grownAt).toBe(T);
    // Spacing at the grown rate: one token of debt at 15/s.
    expect(limited.draw).toEqual({ kind: 'granted', tokens: 1, startAt: T + 67, intervalMs: 1000 / 15, probe: false });

    const enough = draw(state({ rate: 10, tokens: 2, grownAt: T - 1000 }), T, 1, OPEN);
    expect(enough.state.rate).toBe(10);
    expect(enough.state.grownAt).toBe(T);
  });

  it('does not grow within cutCooldownMs of a cut', () => {
    const justCut = draw(state({ rate: 10, tokens: 0, grownAt: T - 1000, cutAt: T - 1999 }), T, 1, OPEN);
    expect(justCut.state.rate).toBe(10);
    expect(justCut.state.grownAt).toBe(T);

    const cooled = draw(state({ rate: 10, tokens: 0, grownAt: T - 1000, cutAt: T - 2000 }), T, 1, OPEN);
    expect(cooled.state.rate).toBe(15);
  });

  it('in slow start (no ceiling yet) multiplies the rate by 1.5 a second', () => {
    expect(grownRate({ rate: 10 }, 1000, OPEN)).toBe(15);
    expect(grownRate({ rate: 10 }, 500, OPEN)).toBeCloseTo(10 * Math.sqrt(1.5), 10);
  });

  it('below 0.9 × ceiling multiplies by 1.25 a second, up to 0.9 × ceiling', () => {
    expect(grownRate({ rate: 50, ceiling: 100 }, 1000, OPEN)).toBe(62.5);
    expect(grownRate({ rate: 80, ceiling: 100 }, 1000, OPEN)).toBe(90);
  });

  it('between 0.9 and 1.1 × ceiling adds 0.4% of the ceiling a second', () => {
    expect(grownRate({ rate: 90, ceiling: 100 }, 1000, OPEN)).toBeCloseTo(90.4, 10);
    expect(grownRate({ rate: 100, ceiling: 100 }, 500, OPEN)).toBeCloseTo(100.2, 10);
    expect(grownRate({ rate: 109, ceiling: 100 }, 1000, OPEN)).toBeCloseTo(109.4, 10);
  });

  it('from 1.1 × ceiling up (the limit rose?) multiplies by 1.05 a second', () => {
    expect(grownRate({ rate: 111, ceiling: 100 }, 1000, OPEN)).toBeCloseTo(116.55, 10);
    expect(grownRate({ rate: 200, ceiling: 100 }, 1000, OPEN)).toBeCloseTo(210, 10);
  });

  it('is capped by the operator maxRate and applied over at most one second at once', () => {
    expect(grownRate({ rate: 99, ceiling: 50 }, 1000, CAPPED)).toBe(100);
    expect(grownRate({ rate: 60 }, 1000, CAPPED)).toBe(90);
    expect(grownRate({ rate: 10 }, 60_000, OPEN)).toBe(15);
    expect(grownRate({ rate: 10 }, 0, OPEN)).toBe(10);
    expect(grownRate({ rate: 10 }, -500, OPEN)).toBe(10);
  });
});

describe('a 429', () => {
  const settings: PaceSettings = { ...OPEN, defaultRetryAfterMs: 3_000 };

  it('blocks until now + Retry-After, cuts the rate by cutFactor, and takes the rate it had as the ceiling', () => {
    const next = rateLimited(state({ rate: 100, tokens: 7, at: T - 10, ceiling: 100 }), T, 5_000, settings);
    expect(next.blockedUntil).toBe(T + 5_000);
    expect(next.ceiling).toBe(100);
    expect(next.rate).toBeCloseTo(85, 10);
    expect(next.cutAt).toBe(T);
    expect(next.tokens).toBe(0);
    expect(next.at).toBe(T);
  });

  it('the first 429 (no ceiling yet: slow start) halves the rate and takes that half as the ceiling', () => {
    // Slow start grew the rate ×1.5 a second past the limit while the provider's burst lasted.
    const first = rateLimited(state({ rate: 80, tokens: 7 }), T, 1_000, settings);
    expect(first).toMatchObject({ rate: 40, ceiling: 40, cutAt: T, blockedUntil: T + 1_000, tokens: 0 });
    // After it, a ceiling is known: the next cut is by cutFactor again.
    expect(rateLimited(first, T + 2_000, 1_000, settings).rate).toBeCloseTo(34, 10);
  });

  it('clamps Retry-After to at least 1 s and at most 1 h; without one it blocks defaultRetryAfterMs', () => {
    expect(rateLimited(state(), T, 0, settings).blockedUntil).toBe(T + 1_000);
    expect(rateLimited(state(), T, 999, settings).blockedUntil).toBe(T + 1_000);
    expect(rateLimited(state(), T, 36_000_000, settings).blockedUntil).toBe(T + 3_600_000);
    expect(rateLimited(state(), T, undefined, settings).blockedUntil).toBe(T + 3_000);
  });

  it('cuts once per cool-down (one episode is one signal); a shorter Retry-After never shortens the block', () => {
    const first = rateLimited(state({ rate: 100, ceiling: 100 }), T, 5_000, settings);
    const second = rateLimited(first, T + 1_999, 1_000, settings);
    expect(second.rate).toBeCloseTo(85, 10);
    expect(second.ceiling).toBe(100);
    expect(second.cutAt).toBe(T);
    expect(second.blockedUntil).toBe(T + 5_000);

    // Refused again at 85, below 0.98 × the ceiling of 100: the limit fell, the ceiling is 85 × 0.85.
    const third = rateLimited(second, T + 2_000, 10_000, settings);
    expect(third.ceiling).toBeCloseTo(72.25, 10);
    expect(third.rate).toBeCloseTo(72.25, 10);
    expect(third.cutAt).toBe(T + 2_000);
    expect(third.blockedUntil).toBe(T + 12_000);
  });

  it('takes the rate as the ceiling when refused at or above 0.98 × the ceiling (the limit did not fall)', () => {
    const near = rateLimited(state({ rate: 99, ceiling: 100 }), T, 1_000, settings);
    expect(near.ceiling).toBe(99);
    expect(near.rate).toBeCloseTo(84.15, 10);
    const atEdge = rateLimited(state({ rate: 98, ceiling: 100 }), T, 1_000, settings);
    expect(atEdge.ceiling).toBe(98);
    const above = rateLimited(state({ rate: 120, ceiling: 100 }), T, 1_000, settings);
    expect(above.ceiling).toBe(120);
    expect(above.rate).toBeCloseTo(102, 10);
  });

  it('aims below the rate when refused under 0.98 × the ceiling (the limit fell): ceiling = rate × cutFactor', () => {
    const fell = rateLimited(state({ rate: 97, ceiling: 100 }), T, 1_000, settings);
    expect(fell.ceiling).toBeCloseTo(82.45, 10);
    expect(fell.rate).toBeCloseTo(82.45, 10);
    expect(fell.cutAt).toBe(T);
    // Within the cool-down the ceiling is not touched either.
    expect(rateLimited(fell, T + 1_000, 1_000, settings).ceiling).toBeCloseTo(82.45, 10);
    // Near the minimum rate neither the ceiling nor the rate goes below minRate.
    const low = rateLimited(state({ rate: 0.55, ceiling: 1 }), T, 1_000, settings);
    expect(low.ceiling).toBe(0.5);
    expect(low.rate).toBe(0.5);
  });

  it('never cuts below minRate', () => {
    const next = rateLimited(state({ rate: 0.5 }), T, 1_000, settings);
    expect(next.rate).toBe(0.5);
    expect(next.ceiling).toBe(0.5);
    expect(rateLimited(state({ rate: 0.55 }), T, 1_000, settings).rate).toBe(0.5);
  });

  it('makes a draw during the block wait until it ends, and the block is not refilled', () => {
    const blocked = rateLimited(state({ rate: 100, tokens: 20, ceiling: 100 }), T, 5_000, settings);
    const during = draw(blocked, T + 1_000, 8, settings);
    expect(during.draw).toEqual({ kind: 'wait', retryAt: T + 5_000, why: 'retry-after' });
    expect(during.state).toBe(blocked);

    // 100 ms after the block at 85/s: 8.5 tokens (5.1 s counted would fill the bucket to 17).
    const after = draw(blocked, T + 5_100, 8, settings);
    expect(after.draw).toEqual({ kind: 'granted', tokens: 8, startAt: T + 5_100, intervalMs: 0, probe: false });
    expect(after.state.tokens).toBeCloseTo(0.5, 10);
    expect(after.state.at).toBe(T + 5_100);
  });
});

describe('the breaker', () => {
  it('opens with its reason; draws answer outage until nextProbeAt', () => {
    const open = openBreaker(state(), T, 'provider', OPEN);
    expect(open.breaker).toEqual({ open: true, reason: 'provider', since: T, nextProbeAt: T + 20_000 });
    const during = draw(open, T + 19_999, 10, OPEN);
    expect(during.draw).toEqual({ kind: 'outage', reason: 'provider', since: T, nextProbeAt: T + 20_000 });
    expect(during.state).toBe(open);
  });

  it('lets exactly one probe through per probeIntervalMs', () => {
    const open = openBreaker(state({ tokens: 20 }), T, 'provider', OPEN);
    const probe = draw(open, T + 20_000, 10, OPEN);
    expect(probe.draw).toEqual({ kind: 'granted', tokens: 1, startAt: T + 20_000, intervalMs: 0, probe: true });
    expect(probe.state.breaker).toEqual({ open: true, reason: 'provider', since: T, nextProbeAt: T + 40_000 });
    expect(probe.state.tokens).toBe(20);

    const again = draw(probe.state, T + 20_000, 10, OPEN);
    expect(again.draw).toEqual({ kind: 'outage', reason: 'provider', since: T, nextProbeAt: T + 40_000 });
    const late = draw(probe.state, T + 45_000, 10, OPEN);
    expect(late.draw).toMatchObject({ kind: 'granted', tokens: 1, probe: true });
    expect(late.state.breaker).toMatchObject({ nextProbeAt: T + 65_000 });
  });

  it('opening an open breaker changes nothing (its start and its probe schedule stay)', () => {
    const open = openBreaker(state(), T, 'provider', OPEN);
    expect(openBreaker(open, T + 4_000, 'provider', OPEN)).toBe(open);
  });

  it('closes with an empty bucket counted from now and no failures; closing a closed breaker changes nothing', () => {
    const open = openBreaker(state({ tokens: 12, at: T, grownAt: T, failures: 5 }), T, 'provider', OPEN);
    const closed = closeBreaker(open, T + 30_000);
    expect(closed).toEqual({ ...open, breaker: { open: false }, failures: 0, tokens: 0, at: T + 30_000, grownAt: T + 30_000 });
    expect(closeBreaker(closed, T + 40_000)).toBe(closed);
    expect(draw(closed, T + 30_000, 10, OPEN).draw).toMatchObject({ kind: 'granted', probe: false });
  });
});

describe('a breaker kept in another row (paceScope connection: the client id\'s)', () => {
  it('breakerDraw: nothing while closed; outage before the probe time, the probe at it (the next one a probe interval later), no token taken', () => {
    expect(breakerDraw(state(), T, OPEN)).toBeUndefined();
    const open = openBreaker(state({ tokens: 7 }), T, 'provider', OPEN);
    const before = breakerDraw(open, T + 19_999, OPEN)!;
    expect(before.draw).toEqual({ kind: 'outage', reason: 'provider', since: T, nextProbeAt: T + 20_000 });
    expect(before.state).toBe(open);
    const probe = breakerDraw(open, T + 20_000, OPEN)!;
    expect(probe.draw).toEqual({ kind: 'granted', tokens: 1, startAt: T + 20_000, intervalMs: 0, probe: true });
    expect(probe.state).toEqual({ ...open, breaker: { open: true, reason: 'provider', since: T, nextProbeAt: T + 40_000 } });
    expect(open.breaker).toEqual({ open: true, reason: 'provider', since: T, nextProbeAt: T + 20_000 });
  });

  it('withoutBreaker: a pace row with no breaker or failures of its own is kept as it is; one with them loses them', () => {
    const closed = state({ tokens: 3 });
    expect(withoutBreaker(closed)).toBe(closed);
    const held = openBreaker(state({ tokens: 3, failures: 8 }), T, 'provider', OPEN);
    expect(withoutBreaker(held)).toEqual({ ...closed, failures: 0 });
  });
});

describe('the failure count', () => {
  it('counts failed requests; at outageFailures the breaker opens with reason `provider`', () => {
    expect(DEFAULT_PACE_SETTINGS.outageFailures).toBe(8);
    const FOUR: PaceSettings = { ...OPEN, outageFailures: 4 };
    const one = requestFailed(state(), T, FOUR);
    expect(one).toEqual({ ...state(), failures: 1 });
    const three = requestFailed(requestFailed(one, T + 1, FOUR), T + 2, FOUR);
    expect(three).toEqual({ ...state(), failures: 3 });
    const four = requestFailed(three, T + 3, FOUR);
    expect(four).toEqual({ ...state(), failures: 4, breaker: { open: true, reason: 'provider', since: T + 3, nextProbeAt: T + 20_003 } });

    // Counted on while open; the breaker it opened stays as it is.
    const five = requestFailed(four, T + 4, FOUR);
    expect(five).toEqual({ ...four, failures: 5 });
  });

  it('opens at the settings’ outageFailures; an open breaker stays as it opened', () => {
    const once: PaceSettings = { ...OPEN, outageFailures: 1 };
    expect(requestFailed(state(), T, once).breaker).toEqual({ open: true, reason: 'provider', since: T, nextProbeAt: T + 20_000 });

    const open = openBreaker(state(), T, 'provider', OPEN);
    expect(requestFailed(open, T + 1, once)).toEqual({ ...open, failures: 1 });
  });

  it('starts again at a success; a success with no failures counted changes nothing', () => {
    const failing = state({ failures: 3 });
    expect(requestSucceeded(failing)).toEqual(state({ failures: 0 }));
    const clean = state();
    expect(requestSucceeded(clean)).toBe(clean);
    // After a success, outageFailures more failures are needed.
    let next = requestSucceeded(failing);
    for (let n = 0; n < 3; n++) next = requestFailed(next, T, OPEN);
    expect(next).toEqual(state({ failures: 3 }));
  });

  it("starts again at a draw of a container that had a success since its last draw (sawSuccess)", () => {
    const failing = state({ tokens: 20, failures: 3 });
    const seen = draw(failing, T, 10, OPEN, true);
    expect(seen.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T, intervalMs: 0, probe: false });
    expect(seen.state).toMatchObject({ tokens: 10, failures: 0 });

    // Without a success (the default) the count is kept; nothing else differs.
    const unseen = draw(failing, T, 10, OPEN, false);
    expect(unseen.state).toMatchObject({ tokens: 10, failures: 3 });
    expect(seen.state).toEqual({ ...unseen.state, failures: 0 });
    expect(unseen.draw).toEqual(seen.draw);
    expect(draw(failing, T, 10, OPEN)).toEqual(unseen);

    // A draw told to wait for the pace still starts the count again.
    const deep = draw(state({ tokens: -45, failures: 2 }), T, 10, OPEN, true);
    expect(deep.draw).toEqual({ kind: 'wait', retryAt: T + 50, why: 'pace' });
    expect(deep.state.failures).toBe(0);

    // A probe's draw, too.
    const open = openBreaker(state({ failures: 4 }), T, 'provider', OPEN);
    const probe = draw(open, T + 20_000, 10, OPEN, true);
    expect(probe.draw).toMatchObject({ kind: 'granted', probe: true });
    expect(probe.state.failures).toBe(0);
  });
});

describe('a stored row', () => {
  it('is a pace state when every field has its type, also through JSON', () => {
    expect(isPaceState(initialPaceState(CAPPED, T))).toBe(true);
    expect(isPaceState(JSON.parse(JSON.stringify(initialPaceState(OPEN, T))))).toBe(true);
    expect(isPaceState(openBreaker(state(), T, 'provider', OPEN))).toBe(true);
    expect(isPaceState(JSON.parse(JSON.stringify(state({ failures: 3 }))))).toBe(true);
  });

  it.each([
    ['null', null],
    ['a string', 'state'],
    ['an array', []],
    ['no rate', (({ rate: _rate, ...rest }) => rest)(state())],
    ['a zero rate', state({ rate: 0 })],
    ['a negative rate', state({ rate: -1 })],
    ['a rate as text', { ...state(), rate: '100' }],
    ['NaN tokens', state({ tokens: Number.NaN })],
    ['an infinite blockedUntil', state({ blockedUntil: Number.POSITIVE_INFINITY })],
    ['no cutAt', (({ cutAt: _cutAt, ...rest }) => rest)(state())],
    ['a ceiling as text', { ...state(), ceiling: '90' }],
    ['a null ceiling', { ...state(), ceiling: null }],
    ['no failures', (({ failures: _failures, ...rest }) => rest)(state())],
    ['failures as text', { ...state(), failures: '0' }],
    ['negative failures', state({ failures: -1 })],
    ['NaN failures', state({ failures: Number.NaN })],
    ['infinite failures', state({ failures: Number.POSITIVE_INFINITY })],
    ['no breaker', (({ breaker: _breaker, ...rest }) => rest)(state())],
    ['a breaker without open', { ...state(), breaker: {} }],
    ['a breaker open as text', { ...state(), breaker: { open: 'false' } }],
    ['an open breaker with another reason', { ...state(), breaker: { open: true, reason: 'other', since: T, nextProbeAt: T } }],
    ['an open breaker without since', { ...state(), breaker: { open: true, reason: 'provider', nextProbeAt: T } }],
    // The token breaker is gone (a refused token stops only its connection): such a row is not a state.
    ['an open breaker with the reason `token`', { ...state(), breaker: { open: true, reason: 'token', since: T, nextProbeAt: T } }],
    ['an open breaker without nextProbeAt', { ...state(), breaker: { open: true, reason: 'provider', since: T } }],
  ])('is not a pace state with %s', (_what, value) => {
    expect(isPaceState(value)).toBe(false);
  });
});

describe('the sweep (the reconciler’s ids)', () => {
  /** At maxRate already: a draw never grows the rate, whatever the bucket holds. */
  const AT_MAX: PaceSettings = CAPPED;

  it('takes a whole lease (want, at most a burst) once both buckets hold it, never into debt', () => {
    const plenty = draw(state({ tokens: 20, sweepTokens: 20 }), T, 10, AT_MAX, false, true);
    expect(plenty.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T, intervalMs: 10, probe: false });
    expect(plenty.state).toMatchObject({ tokens: 10, sweepTokens: 10, at: T, rate: 100 });

    // A row written before the sweep existed has no sweepTokens: full.
    const old = draw(state({ tokens: 20 }), T, 10, AT_MAX, false, true);
    expect(old.draw).toMatchObject({ kind: 'granted', tokens: 10 });
    expect(old.state).toMatchObject({ tokens: 10, sweepTokens: 10 });

    // More than a burst is never there: a burst (20 at 100/s) is the most one draw takes.
    const big = draw(state({ tokens: 20, sweepTokens: 20 }), T, 30, AT_MAX, false, true);
    expect(big.draw).toMatchObject({ kind: 'granted', tokens: 20 });
    expect(big.state).toMatchObject({ tokens: 0, sweepTokens: 0 });

    // 7 of 10 for everyone: nothing taken; the 3 missing come in 30 ms at 100/s.
    const fewTokens = draw(state({ tokens: 7, sweepTokens: 20 }), T, 10, AT_MAX, false, true);
    expect(fewTokens.draw).toEqual({ kind: 'wait', retryAt: T + 30, why: 'pace' });
    expect(fewTokens.state).toMatchObject({ tokens: 7, sweepTokens: 20 });

    // 4.5 of 10 in the sweep's own bucket: the 5.5 missing come in 68.75 ms at 80/s.
    const fewSweep = draw(state({ tokens: 20, sweepTokens: 4.5 }), T, 10, AT_MAX, false, true);
    expect(fewSweep.draw).toEqual({ kind: 'wait', retryAt: T + 69, why: 'pace' });
    expect(fewSweep.state).toMatchObject({ tokens: 20, sweepTokens: 4.5 });

    // Nearly there: it asks again no sooner than 10 ms later.
    const nearly = draw(state({ tokens: 9.99, sweepTokens: 20 }), T, 10, AT_MAX, false, true);
    expect(nearly.draw).toEqual({ kind: 'wait', retryAt: T + 10, why: 'pace' });
  });

  it('waits while users are in debt, even with its own bucket full, until the debt is paid and a lease is there', () => {
    const inDebt = state({ tokens: -30, sweepTokens: 20 });
    const waiting = draw(inDebt, T, 10, AT_MAX, false, true);
    // 40 tokens at 100/s: the bucket holds a lease again at T + 400.
    expect(waiting.draw).toEqual({ kind: 'wait', retryAt: T + 400, why: 'pace' });
    expect(waiting.state).toMatchObject({ tokens: -30, sweepTokens: 20 });
    expect(draw(inDebt, T + 399, 10, AT_MAX, false, true).draw).toMatchObject({ kind: 'wait', why: 'pace' });

    const paid = draw(inDebt, T + 400, 10, AT_MAX, false, true);
    expect(paid.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T + 400, intervalMs: 10, probe: false });
    expect(paid.state.tokens).toBeCloseTo(0, 10);
    expect(paid.state.sweepTokens).toBe(10);

    // The same state lets users borrow (up to maxDebtSeconds of the rate).
    const user = draw(inDebt, T, 10, AT_MAX);
    expect(user.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T + 310, intervalMs: 10, probe: false });
    expect(user.state).toMatchObject({ tokens: -40, sweepTokens: 20 });
  });

  it('has its own bucket refilled at (1 − userShare) of the rate, capped at the burst', () => {
    // 50 ms at 100/s: 5 tokens for everyone, 4 of them for the sweep: not a lease yet (6 more at 80/s: 75 ms).
    const early = draw(state({ tokens: 20, sweepTokens: 0 }), T + 50, 10, AT_MAX, false, true);
    expect(early.draw).toEqual({ kind: 'wait', retryAt: T + 125, why: 'pace' });
    expect(early.state.sweepTokens).toBeCloseTo(4, 10);
    const refilled = draw(state({ tokens: 20, sweepTokens: 0 }), T + 125, 10, AT_MAX, false, true);
    expect(refilled.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T + 125, intervalMs: 10, probe: false });
    expect(refilled.state.tokens).toBe(10);
    expect(refilled.state.sweepTokens).toBeCloseTo(0, 10);

    // userShare 0.5: half the rate, so a lease after 200 ms, not 125.
    const half = { ...AT_MAX, userShare: 0.5 };
    expect(draw(state({ tokens: 20, sweepTokens: 0 }), T + 125, 10, half, false, true).draw).toMatchObject({ kind: 'wait' });
    const halfLater = draw(state({ tokens: 20, sweepTokens: 0 }), T + 200, 10, half, false, true);
    expect(halfLater.draw).toMatchObject({ kind: 'granted', tokens: 10 });

    // Ten seconds would be 800 tokens; the bucket keeps a burst (20).
    const capped = draw(state({ tokens: 20, sweepTokens: 0 }), T + 10_000, 15, AT_MAX, false, true);
    expect(capped.draw).toMatchObject({ kind: 'granted', tokens: 15 });
    expect(capped.state).toMatchObject({ tokens: 5, sweepTokens: 5 });
  });

  it('is not touched by a user draw, which only brings it up to date', () => {
    const full = draw(state({ tokens: 20, sweepTokens: 3 }), T, 10, AT_MAX);
    expect(full.state).toMatchObject({ tokens: 10, sweepTokens: 3 });
    const debt = draw(state({ tokens: 0, sweepTokens: 3 }), T, 10, AT_MAX);
    expect(debt.state).toMatchObject({ tokens: -10, sweepTokens: 3 });
    // 50 ms later: 5 tokens for everyone (then 10 drawn), 4 more in the sweep's bucket (none drawn).
    const later = draw(state({ tokens: 0, sweepTokens: 3 }), T + 50, 10, AT_MAX);
    expect(later.state).toMatchObject({ tokens: -5, sweepTokens: 7, at: T + 50 });
  });

  it('waits for a Retry-After and for the breaker like users; a due probe may be the sweep’s', () => {
    const blocked = rateLimited(state({ tokens: 20, sweepTokens: 20 }), T, 5_000, AT_MAX);
    const during = draw(blocked, T + 1_000, 10, AT_MAX, false, true);
    expect(during.draw).toEqual({ kind: 'wait', retryAt: T + 5_000, why: 'retry-after' });
    expect(during.state).toBe(blocked);

    const open = openBreaker(state({ tokens: 20 }), T, 'provider', AT_MAX);
    expect(draw(open, T + 19_999, 10, AT_MAX, false, true).draw).toEqual({ kind: 'outage', reason: 'provider', since: T, nextProbeAt: T + 20_000 });
    const probe = draw(open, T + 20_000, 10, AT_MAX, false, true);
    expect(probe.draw).toEqual({ kind: 'granted', tokens: 1, startAt: T + 20_000, intervalMs: 0, probe: true });
    expect(probe.state.breaker).toMatchObject({ nextProbeAt: T + 40_000 });
  });

  it('over a minute with users idle, gets (1 − userShare) of the rate (± one burst), one lease a draw', () => {
    const { current, taken: swept, grants, waits } = backgroundAlone(AT_MAX, 60_000, 1, () => 10);
    // 80/s for 60 s, and the bucket it started with (one burst, 20).
    expect(swept).toBeGreaterThanOrEqual(4_800 - 20);
    expect(swept).toBeLessThanOrEqual(4_800 + 20);
    // Whole leases only: one written draw per 10 requests.
    expect(grants * 10).toBe(swept);
    expect(waits).toBeGreaterThan(0);
    // What users may take was never touched: the sweep's bucket (80/s) is the shorter one, so after a
    // lease (10) users' bucket (100/s, at most 20) still holds half its burst or more.
    expect(current.tokens).toBeGreaterThanOrEqual(10 - 1e-9);
    expect(current.rate).toBe(100);
  });

  it('grows the rate when it alone keeps up with it (users idle, limit unknown), not when it asks for less', () => {
    const lease = (rate: number): number => Math.min(leaseSize(rate, OPEN), 10);
    // Coming back at once after each lease: the rate is what holds it back, so the rate grows; by
    // ×1.05 a second at most, never by the users' slow start (×1.5): at an unknown limit the sweep
    // comes up to it rather than overshooting it.
    const busy = backgroundAlone(OPEN, 10_000, 1, lease);
    expect(busy.current.rate).toBeGreaterThan(OPEN.initialRate * 1.05 ** 5);
    expect(busy.current.rate).toBeLessThanOrEqual(OPEN.initialRate * 1.05 ** 10 + 1e-9);
    // One lease a second: the buckets are full at every draw; the rate stays where it started.
    const idle = backgroundAlone(OPEN, 10_000, 1_000, lease);
    expect(idle.current.rate).toBe(OPEN.initialRate);
  });

  it('a container whose last lease expired unspent does not make the rate grow (growth follows tokens spent)', () => {
    const base = state({ rate: 50, tokens: 10, sweepTokens: 0, grownAt: T - 1_000 });
    expect(draw(base, T, 10, OPEN, false, true, true).state.rate).toBeGreaterThan(50);
    expect(draw(base, T, 10, OPEN, false, true, false).state.rate).toBe(50);
  });

  it("its 429 stops the sweep alone: users' ids draw on at the cut rate, the sweep waits out the Retry-After", () => {
    const after = rateLimited(state({ rate: 100, tokens: 20, sweepTokens: 20, ceiling: 100 }), T, 5_000, OPEN, true);
    expect(after).toMatchObject({ blockedUntil: 0, sweepBlockedUntil: T + 5_000, tokens: 20, sweepTokens: 0, ceiling: 100, cutAt: T });
    expect(after.rate).toBeCloseTo(85, 10);
    expect(draw(after, T + 1, 5, OPEN).draw).toMatchObject({ kind: 'granted', tokens: 5 });
    expect(draw(after, T + 1, 5, OPEN, false, true).draw).toEqual({ kind: 'wait', retryAt: T + 5_000, why: 'retry-after' });
    // A users' 429 stops everyone, the sweep too.
    const users = rateLimited(state({ rate: 100, tokens: 20, sweepTokens: 20 }), T, 5_000, OPEN);
    expect(users).toMatchObject({ blockedUntil: T + 5_000, tokens: 0, sweepTokens: 20 });
    expect(draw(users, T + 1, 5, OPEN, false, true).draw).toEqual({ kind: 'wait', retryAt: T + 5_000, why: 'retry-after' });
  });

  it("a users' 429 within a second of the sweep's last lease is the sweep's overshoot: the sweep stops, users go on; later, everyone stops", () => {
    const drawn = draw(state({ rate: 100, tokens: 20, sweepTokens: 20 }), T, 10, AT_MAX, false, true).state;
    expect(drawn.sweepDrawnAt).toBe(T);
    const soon = rateLimited(drawn, T + 500, 2_000, OPEN);
    expect(soon).toMatchObject({ blockedUntil: 0, sweepBlockedUntil: T + 2_500, sweepTokens: 0 });
    const late = rateLimited(drawn, T + 1_000, 2_000, OPEN);
    expect(late).toMatchObject({ blockedUntil: T + 3_000 });
    expect(late.sweepBlockedUntil).toBeUndefined();
    // While the sweep is stopped by its own 429, a users' 429 is users' own: everyone stops.
    expect(rateLimited(soon, T + 600, 2_000, OPEN).blockedUntil).toBe(T + 2_600);
  });

  it('asks again at most a second later, however slow its share (userShare 0.9 at 5/s: a token in 2 s)', () => {
    const slow: PaceSettings = { ...OPEN, maxRate: 5, userShare: 0.9 };
    const result = draw(state({ rate: 5, tokens: 1, sweepTokens: 0 }), T, 1, slow, false, true);
    expect(result.draw).toEqual({ kind: 'wait', retryAt: T + 1_000, why: 'pace' });
  });

  it('gets nothing while users draw the whole rate, whichever draws first', () => {
    let current = initialPaceState(AT_MAX, T);
    let users = 0;
    let swept = 0;
    const usersDraw = (now: number): void => {
      // As many leases as the pace grants now (into debt, up to maxDebtSeconds).
      for (;;) {
        const result = draw(current, now, 10, AT_MAX);
        current = result.state;
        if (result.draw.kind !== 'granted') return;
        users += result.draw.tokens;
      }
    };
    const sweepDraws = (now: number): void => {
      const result = draw(current, now, 10, AT_MAX, false, true);
      current = result.state;
      if (result.draw.kind === 'granted') swept += result.draw.tokens;
    };
    usersDraw(T);
    for (let ms = 0; ms <= 60_000; ms += 10) {
      if (ms % 20 === 0) {
        sweepDraws(T + ms);
        usersDraw(T + ms);
      } else {
        usersDraw(T + ms);
        sweepDraws(T + ms);
      }
    }
    expect(swept).toBe(0);
    // The users had the whole rate: 100/s for 60 s, the burst and the debt (20 + 50).
    expect(users).toBeGreaterThanOrEqual(6_000);
    expect(users).toBeLessThanOrEqual(6_000 + 20 + 50 + 10);
  });
});

describe("a users' backlog in the background lane (draw's `backlog`: paceScope connection)", () => {
  const AT_MAX: PaceSettings = CAPPED;
  const backlogDraw = (s: PaceState, now: number, want: number, settings: PaceSettings = AT_MAX, spentLast = true) =>
    draw(s, now, want, settings, false, true, spentLast, true);

  it("takes a whole lease from the users' bucket alone, leaving half a lease there; the sweep's bucket is not touched", () => {
    // 15 of 20: a lease of 10 and the half lease it leaves.
    const granted = backlogDraw(state({ tokens: 15, sweepTokens: 0 }), T, 10);
    expect(granted.draw).toEqual({ kind: 'granted', tokens: 10, startAt: T, intervalMs: 10, probe: false });
    expect(granted.state).toMatchObject({ tokens: 5, sweepTokens: 0, sweepDrawnAt: T });
    // 14 of 15: 10 ms more at 100/s. The sweep with the same buckets waits for its own (empty) one.
    expect(backlogDraw(state({ tokens: 14, sweepTokens: 0 }), T, 10).draw).toEqual({ kind: 'wait', retryAt: T + 10, why: 'pace' });
    expect(draw(state({ tokens: 15, sweepTokens: 0 }), T, 10, AT_MAX, false, true).draw).toMatchObject({ kind: 'wait', why: 'pace' });
    // Never into debt: while users are in debt it waits, as the sweep does.
    expect(backlogDraw(state({ tokens: -30, sweepTokens: 20 }), T, 10).draw).toEqual({ kind: 'wait', retryAt: T + 450, why: 'pace' });
  });

  it('at a rate whose bucket holds less than a lease and a half, takes what the bucket holds (2/s: one token)', () => {
    const slow: PaceSettings = { ...OPEN, maxRate: 2 };
    expect(burst(2, slow)).toBe(1);
    expect(backlogDraw(state({ rate: 2, tokens: 1, sweepTokens: 0 }), T, 1, slow).draw).toMatchObject({ kind: 'granted', tokens: 1 });
    expect(backlogDraw(state({ rate: 2, tokens: 0.5, sweepTokens: 0 }), T, 1, slow).draw).toEqual({ kind: 'wait', retryAt: T + 250, why: 'pace' });
  });

  it('over a minute with users idle, gets the whole rate (± one burst), not the sweep’s share', () => {
    const { taken } = backgroundAlone(AT_MAX, 60_000, 1, () => 10, { backlog: true });
    expect(taken).toBeGreaterThanOrEqual(6_000 - 20);
    expect(taken).toBeLessThanOrEqual(6_000 + 20);
  });

  it("grows the rate as users' ids do (slow start ×1.5 a second, no ceiling known) when it spends its leases; not when they expired unspent", () => {
    const base = state({ rate: 10, tokens: 2, sweepTokens: 0, grownAt: T - 1_000 });
    expect(backlogDraw(base, T, 2, OPEN).state.rate).toBeCloseTo(15, 10);
    expect(draw(base, T, 2, OPEN, false, true, true).state.rate).toBeCloseTo(10.5, 10);
    expect(backlogDraw(base, T, 2, OPEN, false).state.rate).toBe(10);
  });
});

describe('a backlog at a rate whose bucket holds one or two tokens (the sync’s leases of 0.25 s)', () => {
  it('takes its rate as it grows to it: 2.25 to 2.5 requests/s, not stuck where a lease of the grown rate would not fit', () => {
    const settings: PaceSettings = { ...OPEN, leaseSeconds: 0.25, maxRate: 2.5 };
    const from: PaceState = { ...initialPaceState(settings, T), rate: 2.25 };
    const { current, taken } = backgroundAlone(settings, 60_000, 1, (rate) => leaseSize(rate, settings), { backlog: true, from });
    expect(current.rate).toBe(2.5);
    // 2.5/s for 60 s, less the first second's climb: at least 96% of it.
    expect(taken).toBeGreaterThanOrEqual(0.96 * 150);
  });
});

describe('the first 429 of whom', () => {
  it('the sweep’s (it never slow-starts: near the limit) cuts ×0.85; a backlog’s (it slow-starts) halves', () => {
    const sweep = rateLimited(state({ rate: 80, sweepTokens: 10 }), T, 1_000, OPEN, true);
    expect(sweep.rate).toBeCloseTo(68, 10);
    expect(sweep.ceiling).toBe(80);
    const backlog = rateLimited(state({ rate: 80 }), T, 1_000, OPEN, true, true);
    expect(backlog).toMatchObject({ rate: 40, ceiling: 40, sweepBlockedUntil: T + 1_000 });
  });

  it("a users' 429 within a second of a backlog's lease (the backlog's overshoot, which slow-started) halves; of the sweep's lease alone, ×0.85", () => {
    const backlogDrew = draw(state({ rate: 80, tokens: 16, sweepTokens: 0 }), T, 8, OPEN, false, true, true, true).state;
    expect(backlogDrew).toMatchObject({ sweepDrawnAt: T, backlogDrawnAt: T });
    expect(rateLimited(backlogDrew, T + 500, 1_000, OPEN)).toMatchObject({ ceiling: backlogDrew.rate / 2, sweepBlockedUntil: T + 1_500 });
    const sweepDrew = draw(state({ rate: 80, tokens: 16, sweepTokens: 16 }), T, 8, OPEN, false, true).state;
    expect(sweepDrew.backlogDrawnAt).toBeUndefined();
    expect(rateLimited(sweepDrew, T + 500, 1_000, OPEN).ceiling).toBe(sweepDrew.rate);
    // A stored row with backlogDrawnAt is a pace state; one with it not a number is not.
    expect(isPaceState(JSON.parse(JSON.stringify(backlogDrew)))).toBe(true);
    expect(isPaceState({ ...backlogDrew, backlogDrawnAt: 'x' })).toBe(false);
  });
});
