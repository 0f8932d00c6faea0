/**
 * The provider pace, as arithmetic: one shared state (held in the control table, one row) and pure
 * functions that move it. No I/O here; `provider-pace.ts` reads and writes the state through the
 * PaceStore port, with conditional writes, so that every container applies these rules to the same
 * state.
 *
 * - A token bucket: `rate` tokens a second, at most `burst(rate)` kept. Every provider request needs
 *   a token. Containers draw tokens in small leases (`leaseSeconds` of the rate).
 * - The rate finds the provider's unpublished limit: it grows while the bucket is drawn empty and no
 *   request is refused, and is cut multiplicatively when one is answered 429. Growth is fast far
 *   below the rate of the last cut (`ceiling`, the best estimate of the limit), slow near it, and
 *   speeds up again well above it, so that a limit that rose is found in minutes.
 * - A 429's Retry-After blocks every container until then (`blockedUntil`).
 * - The breaker: when the provider fails every request (5xx, time-outs, refused connections), the
 *   breaker opens: no request goes out but one probe every `probeIntervalMs`, for every container
 *   drawing from this pace. The first probe that succeeds closes it. It is for outages only: a
 *   provider that refuses a connection's token (401) is up, and that connection alone waits
 *   (docs/connections.md).
 *
 * One state per pace key (`client#<client id>` or `connection#<connection id>`, PACE_SCOPE): each
 * is its own row, and the bucket's rules apply to each alone. The breaker is one per client id: in
 * the client id's row, which under PACE_SCOPE=client is the pace's own; a connection's row under
 * PACE_SCOPE=connection has none of its own (`withoutBreaker`), and its paces take the probe from
 * the client id's row (`breakerDraw`).
 */

/** Why the breaker is open: the provider fails every request (the only reason there is). */
export type BreakerReason = 'provider';

export type Breaker =
  | { open: false }
  | { open: true; reason: BreakerReason; since: number; nextProbeAt: number };

export interface PaceState {
  /** Requests a second allowed now. */
  rate: number;
  /** Tokens in the bucket at `at`. */
  tokens: number;
  /** Epoch ms the bucket was last brought up to date. */
  at: number;
  /** The rate at the last cut (the estimate of the provider's limit); undefined until the first 429. */
  ceiling?: number;
  /** Epoch ms of the last cut. */
  cutAt: number;
  /** Epoch ms growth was last applied up to. */
  grownAt: number;
  /** Epoch ms before which no request may go out (the latest Retry-After met by a users' request). */
  blockedUntil: number;
  /**
   * Epoch ms before which the sweep sends nothing (the latest Retry-After met by a sweep request):
   * the sweep's 429 stops the sweep, never users' ids. Undefined: none.
   */
  sweepBlockedUntil?: number;
  /** Epoch ms the sweep last took a lease (a 429 soon after is the sweep's overshoot, whoever met it). */
  sweepDrawnAt?: number;
  /** Epoch ms a users' backlog last took a lease (it slow-starts, as users' ids do: a 429 soon after halves the rate). */
  backlogDrawnAt?: number;
  breaker: Breaker;
  /** Failed requests (5xx, time-outs, connections) reported by any container since the last success anyone reported. */
  failures: number;
  /**
   * The sweep's own bucket (the reconciler's ids), refilled at (1 − userShare) of the rate: the sweep
   * never takes the share reserved for users' ids. Undefined: full.
   */
  sweepTokens?: number;
}

export interface PaceSettings {
  /** The operator's `providerRequestsPerSecond`: the ceiling and the starting rate. */
  maxRate?: number;
  /** Starting rate when the limit is unknown. */
  initialRate: number;
  /** The rate is never cut below this. */
  minRate: number;
  /** A lease is this much of the rate (seconds' worth of tokens). */
  leaseSeconds: number;
  /** Leases may be granted ahead, into debt, up to this much of the rate (seconds' worth). */
  maxDebtSeconds: number;
  /** The rate is multiplied by this on a 429 (at most once per `cutCooldownMs`). */
  cutFactor: number;
  cutCooldownMs: number;
  /** Blocks every container this long after a 429 without Retry-After. */
  defaultRetryAfterMs: number;
  /** One probe every this long while the breaker is open (system-wide). */
  probeIntervalMs: number;
  /** Failed requests in a row, system-wide, that open the breaker. */
  outageFailures: number;
  /** Share of the rate the sweep (reconciliation) may never take: kept for users' ids. */
  userShare: number;
}

export const DEFAULT_PACE_SETTINGS: PaceSettings = {
  initialRate: 5,
  minRate: 0.5,
  leaseSeconds: 0.1,
  maxDebtSeconds: 0.5,
  cutFactor: 0.85,
  cutCooldownMs: 2_000,
  defaultRetryAfterMs: 1_000,
  probeIntervalMs: 20_000,
  outageFailures: 8,
  userShare: 0.2,
};

/** A Retry-After is honoured for at least a second (0 would mean "at once, again") and at most an hour. */
export const MIN_RETRY_AFTER_MS = 1_000;
export const MAX_RETRY_AFTER_MS = 3_600_000;

/** Growth below 90% of the ceiling: ×(1 + FAST) per second. */
const FAST_GROWTH = 0.25;
/** Growth between 90% and 110% of the ceiling: this fraction of the ceiling per second. */
const NEAR_GROWTH = 0.004;
/** Growth above 110% of the ceiling (the limit rose?) and in slow start: ×(1 + PROBE) per second. */
const PROBE_GROWTH = 0.05;
const SLOW_START_GROWTH = 0.5;
/** The first 429 (no ceiling yet) cuts the rate, and sets the ceiling, to this much of the rate it came at. */
export const SLOW_START_CUT = 0.5;
/** The sweep asks again no sooner than this after a wait, and no later than MAX_SWEEP_WAIT_MS. */
const SWEEP_MIN_WAIT_MS = 10;
const MAX_SWEEP_WAIT_MS = 1_000;
/** The sweep counts as drawing for this long after its last lease. */
const SWEEP_ACTIVE_MS = 1_000;
/** Growth is applied over at most this much time at once (a long idle gap is not growth). */
const MAX_GROWTH_STEP_MS = 1_000;

export function initialPaceState(settings: PaceSettings, now: number): PaceState {
  const rate = settings.maxRate ?? settings.initialRate;
  return {
    rate,
    tokens: burst(rate, settings),
    sweepTokens: burst(rate, settings),
    at: now,
    ...(settings.maxRate !== undefined ? { ceiling: settings.maxRate } : {}),
    cutAt: 0,
    grownAt: now,
    blockedUntil: 0,
    breaker: { open: false },
    failures: 0,
  };
}

/** The most tokens the bucket keeps: two leases' worth, and at least one token. */
export function burst(rate: number, settings: PaceSettings): number {
  return Math.max(1, rate * settings.leaseSeconds * 2);
}

/** Tokens one draw asks for at this rate. */
export function leaseSize(rate: number, settings: PaceSettings): number {
  return Math.max(1, Math.floor(rate * settings.leaseSeconds));
}

/**
 * The rate after `ms` of demand-limited time without a 429. `sweep`: the growth the sweep's demand
 * makes. The sweep never slow-starts: with no ceiling yet it grows as a probe above one does, so
 * that a sweep starting at an unknown limit comes up to it rather than overshooting it (its 429s
 * would be paid by users' ids waiting on the cut).
 */
export function grownRate(state: Pick<PaceState, 'rate' | 'ceiling'>, ms: number, settings: PaceSettings, sweep = false): number {
  const seconds = Math.min(ms, MAX_GROWTH_STEP_MS) / 1000;
  if (seconds <= 0) return state.rate;
  let rate: number;
  const { ceiling } = state;
  if (ceiling === undefined) {
    rate = state.rate * (1 + (sweep ? PROBE_GROWTH : SLOW_START_GROWTH)) ** seconds;
  } else if (state.rate < 0.9 * ceiling) {
    rate = Math.min(0.9 * ceiling, state.rate * (1 + FAST_GROWTH) ** seconds);
  } else if (state.rate < 1.1 * ceiling) {
    rate = state.rate + NEAR_GROWTH * ceiling * seconds;
  } else {
    rate = state.rate * (1 + PROBE_GROWTH) ** seconds;
  }
  return settings.maxRate === undefined ? rate : Math.min(settings.maxRate, rate);
}

export type Draw =
  /**
   * `tokens` requests may go out, the first at `startAt`, then one every `intervalMs` (a lease: the
   * bucket may run into debt by up to one burst, so a container draws once per lease, not per
   * request). A probe is the one request the open breaker lets through.
   */
  | { kind: 'granted'; tokens: number; startAt: number; intervalMs: number; probe: boolean }
  /** Nothing now: ask again at `retryAt` (the pace, or a Retry-After). */
  | { kind: 'wait'; retryAt: number; why: 'pace' | 'retry-after' }
  /** The breaker is open and the next probe is someone else's. */
  | { kind: 'outage'; reason: BreakerReason; since: number; nextProbeAt: number };

/**
 * Takes up to `want` tokens at `now`. Returns the new state and what was granted. `sawSuccess`: the
 * drawing container had a request succeed since its last draw (the failure count starts again).
 * `spentLast`: the drawing container spent every token of its last lease (a sweep whose leases
 * expire unspent is not held back by the rate, and does not make it grow). `backlog` (with
 * `sweep`): a users' backlog sent to the background lane under `paceScope` `connection` draws as
 * the sweep does (tokens that are there, after users' ids, its 429 stopping the background alone)
 * but is not held to the sweep's share, and grows the rate as users' ids do: the pace is its own
 * account's, and the share kept for users is that account's own new ids, which still go first.
 */
export function draw(
  state: PaceState,
  now: number,
  want: number,
  settings: PaceSettings,
  sawSuccess = false,
  sweep = false,
  spentLast = true,
  backlog = false,
): { state: PaceState; draw: Draw } {
  const next: PaceState = { ...state };
  if (sawSuccess && next.failures > 0) next.failures = 0;
  if (next.breaker.open) return probeDraw(next, state, now, settings);
  if (now < next.blockedUntil) {
    return { state, draw: { kind: 'wait', retryAt: next.blockedUntil, why: 'retry-after' } };
  }
  // Refill from the later of the last update and the end of the block.
  const from = Math.max(next.at, Math.min(now, next.blockedUntil));
  const cap = burst(next.rate, settings);
  const elapsed = Math.max(0, now - from);
  const refilled = next.tokens + (next.rate * elapsed) / 1000;
  next.tokens = Math.min(cap, refilled);
  const sweepRate = next.rate * (1 - settings.userShare);
  const sweepRefilled = (next.sweepTokens ?? cap) + (sweepRate * elapsed) / 1000;
  next.sweepTokens = Math.min(cap, sweepRefilled);
  // Never back (containers' clocks differ by a little): time already counted is not counted again.
  next.at = Math.max(next.at, now);
  // Demand meets the rate, so the rate grows: users' ids found fewer tokens than a lease; the sweep
  // (which takes a lease as soon as one is there) found that its bucket did not overflow since the
  // last draw, give or take half a lease (a container's jitter). A sweep that asks for less than
  // its share lets the bucket fill and spill over.
  // A backlog's demand is the same test on the bucket it draws from (the whole rate's).
  const demandLimited = sweep ? spentLast && (backlog ? refilled : sweepRefilled) < cap + sweepLease(next.rate, want, settings) / 2 : next.tokens < want;
  if (demandLimited && now - next.cutAt >= settings.cutCooldownMs) {
    next.rate = grownRate(next, now - next.grownAt, settings, sweep && !backlog);
  }
  next.grownAt = Math.max(next.grownAt, now);
  if (sweep) return drawSweep(next, now, want, settings, backlog, cap);
  const intervalMs = 1000 / next.rate;
  const after = next.tokens - want;
  const maxDebt = Math.max(want, next.rate * settings.maxDebtSeconds);
  if (after < -maxDebt) {
    // Deep enough in debt: come back when this lease would fit.
    const retryAt = now + Math.ceil(((-maxDebt - after) / next.rate) * 1000);
    return { state: next, draw: { kind: 'wait', retryAt, why: 'pace' } };
  }
  next.tokens = after;
  if (after >= 0) {
    // Tokens in the bucket: the lease may go out at once (bursts are bounded by the bucket).
    return { state: next, draw: { kind: 'granted', tokens: want, startAt: now, intervalMs: 0, probe: false } };
  }
  // In debt: the lease's last token is due when the debt is paid; its tokens are spaced at the rate.
  const startAt = Math.max(now, now + (-after / next.rate) * 1000 - (want - 1) * intervalMs);
  return { state: next, draw: { kind: 'granted', tokens: want, startAt: Math.round(startAt), intervalMs, probe: false } };
}

/**
 * The draw of an open breaker: the probe when it is due (the next one a probe interval later), else
 * outage. `unchanged` is returned as the state when nothing is taken.
 */
function probeDraw(next: PaceState, unchanged: PaceState, now: number, settings: PaceSettings): { state: PaceState; draw: Draw } {
  if (!next.breaker.open) throw new Error('probeDraw: the breaker is closed');
  if (now < next.breaker.nextProbeAt) {
    const { reason, since, nextProbeAt } = next.breaker;
    return { state: unchanged, draw: { kind: 'outage', reason, since, nextProbeAt } };
  }
  next.breaker = { ...next.breaker, nextProbeAt: now + settings.probeIntervalMs };
  return { state: next, draw: { kind: 'granted', tokens: 1, startAt: now, intervalMs: 0, probe: true } };
}

/**
 * The breaker's draw alone, for a pace whose breaker is another row's (the client id's, under
 * `paceScope` `connection`): undefined while the breaker is closed (the pace's own row decides);
 * else the probe when it is due, or outage. Takes no token of the row's bucket.
 */
export function breakerDraw(state: PaceState, now: number, settings: PaceSettings): { state: PaceState; draw: Draw } | undefined {
  if (!state.breaker.open) return undefined;
  return probeDraw({ ...state }, state, now, settings);
}

/**
 * A pace row whose breaker is another row's, as its draws see it: no breaker and no failures of
 * its own (a row written before its breaker moved may hold them; they are dropped at its next write).
 */
export function withoutBreaker(state: PaceState): PaceState {
  return !state.breaker.open && state.failures === 0 ? state : { ...state, breaker: { open: false }, failures: 0 };
}

/**
 * The state a stored row reads as: a fresh one when there is no row or it holds no pace state
 * (`invalid` is told), its rate within the operator's ceiling (which may have changed since the row
 * was written), and without a breaker when the breaker is another row's.
 */
export function storedPaceState(
  stored: { state: unknown } | undefined,
  settings: PaceSettings,
  now: number,
  options: { breakerElsewhere: boolean; invalid: () => void },
): PaceState {
  if (stored === undefined) return initialPaceState(settings, now);
  const { state } = stored;
  if (!isPaceState(state)) {
    options.invalid();
    return initialPaceState(settings, now);
  }
  const { maxRate } = settings;
  const capped = maxRate !== undefined && state.rate > maxRate ? { ...state, rate: maxRate } : state;
  return options.breakerElsewhere ? withoutBreaker(capped) : capped;
}

/** The lease the sweep takes at once: what it wants, at most what the bucket can hold. */
function sweepLease(rate: number, want: number, settings: PaceSettings): number {
  return Math.max(1, Math.min(want, Math.floor(burst(rate, settings))));
}

/**
 * The sweep's draw: only tokens that are there now, never into debt (users' ids may borrow, the sweep
 * may not: whenever users are in debt, the sweep waits), within its own share of the rate, and a
 * whole lease at a time: a draw that found a token or two would cost one write of the shared row
 * per request or two (with several containers polling the bucket, it never fills otherwise).
 */
function drawSweep(next: PaceState, now: number, want: number, settings: PaceSettings, backlog: boolean, cap: number): { state: PaceState; draw: Draw } {
  if (next.sweepBlockedUntil !== undefined && now < next.sweepBlockedUntil) {
    return { state: next, draw: { kind: 'wait', retryAt: next.sweepBlockedUntil, why: 'retry-after' } };
  }
  const sweepTokens = next.sweepTokens ?? 0;
  // A backlog's lease and the half lease it leaves fit the bucket as it is (`cap`, its size before
  // this draw's growth): a lease sized by the grown rate could never be there while the rate grows.
  const need = backlog ? Math.min(sweepLease(next.rate, want, settings), Math.max(1, Math.floor(cap))) : sweepLease(next.rate, want, settings);
  // A backlog is not held to the sweep's share but leaves half a lease in the bucket when it can
  // hold that much: its account's own users' ids find a token there and do not wait behind it.
  const floor = backlog ? Math.min(cap, need * 1.5) : need;
  if (next.tokens < floor || (!backlog && sweepTokens < need)) {
    // When both buckets will hold the lease (at least SWEEP_MIN_WAIT_MS: no tight polling).
    const sweepRate = next.rate * (1 - settings.userShare);
    const usersMs = ((floor - next.tokens) / next.rate) * 1000;
    const sweepMs = backlog ? 0 : sweepRate > 0 ? ((need - sweepTokens) / sweepRate) * 1000 : MAX_SWEEP_WAIT_MS;
    const waitMs = Math.min(MAX_SWEEP_WAIT_MS, Math.max(SWEEP_MIN_WAIT_MS, Math.ceil(Math.max(usersMs, sweepMs))));
    return { state: next, draw: { kind: 'wait', retryAt: now + waitMs, why: 'pace' } };
  }
  next.tokens -= need;
  if (!backlog) next.sweepTokens = sweepTokens - need;
  next.sweepDrawnAt = now;
  if (backlog) next.backlogDrawnAt = now;
  return { state: next, draw: { kind: 'granted', tokens: need, startAt: now, intervalMs: 1000 / next.rate, probe: false } };
}

/**
 * A request was answered 429 at `now`: every container stops until its Retry-After, and the rate is
 * cut (once per cool-down: the many 429s of one episode are one signal). A sweep request's 429
 * (`sweep`) stops the sweep alone: users' ids go on, at the cut rate.
 */
export function rateLimited(
  state: PaceState,
  now: number,
  retryAfterMs: number | undefined,
  settings: PaceSettings,
  metBySweep = false,
  metByBacklog = false,
): PaceState {
  const next: PaceState = { ...state };
  const blockMs = Math.min(MAX_RETRY_AFTER_MS, Math.max(MIN_RETRY_AFTER_MS, retryAfterMs ?? settings.defaultRetryAfterMs));
  // While the sweep draws (a lease within SWEEP_ACTIVE_MS), a 429 is its overshoot whoever met it:
  // the sweep stops, users' ids go on at the cut rate. Users alone over the limit stop everyone.
  const sweep = metBySweep || (next.sweepDrawnAt !== undefined && now - next.sweepDrawnAt < SWEEP_ACTIVE_MS && now >= (next.sweepBlockedUntil ?? 0));
  if (sweep) next.sweepBlockedUntil = Math.max(next.sweepBlockedUntil ?? 0, now + blockMs);
  else next.blockedUntil = Math.max(next.blockedUntil, now + blockMs);
  if (now - next.cutAt >= settings.cutCooldownMs) {
    // Refused below the last ceiling: the limit fell. Aim lower than where this 429 came, so that the
    // rate comes down to the new limit in a few cuts rather than creeping down cut after cut.
    const fell = next.ceiling !== undefined && next.rate < 0.98 * next.ceiling;
    // The first 429 of a slow start (users' ids' or a backlog's, or met while a backlog draws: the
    // sweep alone never slow-starts): the rate has grown ×1.5 a second past the limit while the
    // provider's burst lasted, so the limit is nearer half of it: start from there.
    const backlogDrew = metByBacklog || (next.backlogDrawnAt !== undefined && now - next.backlogDrawnAt < SWEEP_ACTIVE_MS);
    const first = next.ceiling === undefined && (!sweep || backlogDrew) ? SLOW_START_CUT : 1;
    next.ceiling = Math.max(settings.minRate, (fell ? next.rate * settings.cutFactor : next.rate) * first);
    next.rate = Math.max(settings.minRate, next.rate * (first < 1 ? first : settings.cutFactor));
    next.cutAt = now;
    // The bucket of the class that met the 429 starts empty: a sweep's leaves users' tokens alone.
    if (sweep) next.sweepTokens = 0;
    else next.tokens = 0;
    next.at = Math.max(next.at, now);
  }
  return next;
}

/** The provider looks down: no request but the probes until one succeeds. Opening an open breaker changes nothing. */
export function openBreaker(state: PaceState, now: number, reason: BreakerReason, settings: PaceSettings): PaceState {
  if (state.breaker.open) return state;
  return { ...state, breaker: { open: true, reason, since: now, nextProbeAt: now + settings.probeIntervalMs } };
}

/** A request failed (5xx, time-out, connection): counted system-wide; enough in a row open the breaker. */
export function requestFailed(state: PaceState, now: number, settings: PaceSettings): PaceState {
  const next: PaceState = { ...state, failures: state.failures + 1 };
  return next.failures >= settings.outageFailures ? openBreaker(next, now, 'provider', settings) : next;
}

/** A request succeeded: the count of failures in a row starts again. */
export function requestSucceeded(state: PaceState): PaceState {
  return state.failures === 0 ? state : { ...state, failures: 0 };
}

/** A request succeeded while the breaker was open: the provider is back. */
export function closeBreaker(state: PaceState, now: number): PaceState {
  if (!state.breaker.open) return state;
  return { ...state, breaker: { open: false }, failures: 0, tokens: 0, at: Math.max(state.at, now), grownAt: Math.max(state.grownAt, now) };
}

/** Checks a state read from the store; anything else is replaced by a fresh state. */
export function isPaceState(value: unknown): value is PaceState {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const finite = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x);
  if (!['rate', 'tokens', 'at', 'cutAt', 'grownAt', 'blockedUntil'].every((key) => finite(v[key]))) return false;
  if ((v.rate as number) <= 0) return false;
  if (v.ceiling !== undefined && !finite(v.ceiling)) return false;
  if (!finite(v.failures) || (v.failures as number) < 0) return false;
  if (v.sweepTokens !== undefined && !finite(v.sweepTokens)) return false;
  if (v.sweepBlockedUntil !== undefined && !finite(v.sweepBlockedUntil)) return false;
  if (v.sweepDrawnAt !== undefined && !finite(v.sweepDrawnAt)) return false;
  if (v.backlogDrawnAt !== undefined && !finite(v.backlogDrawnAt)) return false;
  const breaker = v.breaker as Record<string, unknown> | undefined;
  if (typeof breaker !== 'object' || breaker === null || typeof breaker.open !== 'boolean') return false;
  if (breaker.open) {
    return breaker.reason === 'provider' && finite(breaker.since) && finite(breaker.nextProbeAt);
  }
  return true;
}
