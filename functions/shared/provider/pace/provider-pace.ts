/**
 * One container's side of the shared provider pace. Every provider request asks `acquire()` first
 * and tells `report()` how it ended. Tokens are drawn from the shared bucket (PaceStore: one row of
 * the control table, written conditionally on its version) in small leases and spent spaced out
 * over the lease; a 429, a breaker that opens or closes is written at once, so that every other
 * container sees it at its next draw (within a lease, `leaseSeconds`).
 *
 * One instance per pace key and container (the item sync's `paceFor(paceKey, breakerKey)`): each
 * key has its own row (dynamodb-pace-store.ts) and its own bucket, so a 429 and its Retry-After
 * stop that key's pace alone. The breaker is the provider's, not a key's: one per client id. A pace
 * without a PaceBreaker (`paceScope` `client`, and any caller that passes none) keeps it in its own
 * row, as one state with its bucket. A pace given one (`paceScope` `connection`) keeps it in the
 * client id's row, through a PaceBreaker: the container's view of that breaker, shared by every
 * pace of the client id the container holds. Its draws read their own row only; the breaker row is
 * read and written when a request fails, when a success follows failures counted there, and while
 * the container knows the breaker open (to take a probe, or learn that it closed).
 *
 * Failing safe: when the store cannot be read or written (throttled, unreachable, a bad row), the
 * container falls back to a conservative local pace (`fallbackRate` requests a second) for
 * `fallbackMs`, then tries the store again. It never fails a request because of the store.
 */
import type { Clock, Log } from '../../ports.js';
import {
  breakerDraw,
  closeBreaker,
  draw,
  leaseSize,
  MAX_RETRY_AFTER_MS,
  MIN_RETRY_AFTER_MS,
  openBreaker,
  rateLimited,
  requestFailed,
  requestSucceeded,
  storedPaceState,
  type BreakerReason,
  type PaceSettings,
  type PaceState,
} from './pace-state.js';

import { admitted, classRate, paceClass, ReturnBook } from './pace-hold.js';
import { PaceDemand, spend, type Lease } from './lease.js';
import { PaceBreaker, type Grant, type PaceSnapshot, type PaceStore, type ProviderPaceOptions, type RequestResult } from './pace-types.js';

export { PaceBreaker, type Grant, type PaceSnapshot, type PaceStore, type ProviderPaceOptions, type RequestResult } from './pace-types.js';

/** What a provider caller needs of the pace. */
export type PaceGate = Pick<ProviderPace, 'acquire' | 'report' | 'outageKnown' | 'waitingForProbe'> &
  Partial<Pick<ProviderPace, 'maxHoldMs' | 'expect' | 'bookReturn' | 'admits' | 'serves'>>;

const DEFAULT_FALLBACK_MS = 30_000;
/** While the breaker is open, a container reads the row again at least this often. */
const OUTAGE_RECHECK_MS = 2_000;
const DEFAULT_WRITE_ATTEMPTS = 8;
/** A sweep container that waits for the bucket asks again up to this much later than it has to. */
const SWEEP_JITTER_MS = 20;

export class ProviderPace {
  private readonly settings: PaceSettings;
  private readonly fallbackMs: number;
  private readonly outageFailures: number;
  private readonly writeAttempts: number;
  private readonly random: () => number;
  private lease: Lease | undefined;
  /** The class the lease (and drawNotBefore) are for. */
  private leaseIsSweep = false;
  /** The lease is a backlog's (with leaseIsSweep): drawn as the sweep, without its share (pace-state.ts draw). */
  private leaseIsBacklog = false;
  private lastRate: number;
  private localBlockedUntil = 0;
  /** The sweep's own Retry-After in this container: it holds the sweep's requests, never users'. */
  private localSweepBlockedUntil = 0;
  /** Tokens of the last lease that expired unspent (a sweep that does not spend its leases does not grow the rate). */
  private leftUnspent = 0;
  /** What the container knows of the breaker: this pace's own, or the client id's shared view. */
  private readonly breaker: PaceBreaker;
  /** The row the breaker is kept in: the breaker's own, or this pace's (`store`). */
  private readonly breakerStore: PaceStore;
  /** True when the breaker is another row's: this pace's row is its bucket only. */
  private readonly separateBreaker: boolean;
  private fallbackUntil = 0;
  private fallbackNextAt = 0;
  /** A request of this container succeeded since its last draw (the draw resets the shared count). */
  private okSinceDraw = false;
  private readonly returns: ReturnBook; // the returns booked for requests sent away (bookReturn)
  private drawing: Promise<Grant> | undefined;
  /** No draw before this (the shared bucket was empty); epoch ms. */
  private drawNotBefore = 0;
  /** What callers said they are about to ask for (expect()). */
  private readonly demand = new PaceDemand();

  constructor(
    private readonly store: PaceStore,
    private readonly clock: Clock,
    private readonly log: Log,
    private readonly options: ProviderPaceOptions,
    /** The client id's breaker when it is not in this pace's row (`paceScope` `connection`); default this pace's own. */
    breaker?: PaceBreaker,
  ) {
    this.breaker = breaker ?? new PaceBreaker();
    this.separateBreaker = this.breaker.store !== undefined && this.breaker.store !== store;
    this.breakerStore = this.separateBreaker ? this.breaker.store! : store;
    this.settings = options.settings;
    this.fallbackMs = options.fallbackMs ?? DEFAULT_FALLBACK_MS;
    this.outageFailures = options.outageFailures ?? this.settings.outageFailures;
    this.writeAttempts = options.writeAttempts ?? DEFAULT_WRITE_ATTEMPTS;
    this.lastRate = this.settings.maxRate ?? this.settings.initialRate;
    this.random = options.random ?? Math.random;
    this.returns = new ReturnBook(this.random);
  }

  /** How long a request may wait for a slot within its invocation (ProviderPaceOptions.maxHoldMs); undefined: until its end. */
  get maxHoldMs(): number | undefined {
    return this.options.maxHoldMs;
  }

  /** When a request sent away should come back (epoch ms): not before a Retry-After this container knows of, then ReturnBook.book (pace-hold.ts). */
  bookReturn(minMs: number, sweep = false, backlog = false): number {
    const cls = paceClass(sweep, backlog);
    const now = this.now();
    return this.returns.book(cls, now, Math.max(minMs, this.blockedUntil(sweep) - now), classRate(this.snapshot().rate, cls, this.settings));
  }

  /** Of `requests` a batch is about to ask of this pace, how many it serves within its hold (pace-hold.ts admitted); all without a hold. */
  admits(requests: number, sweep = false, backlog = false): number {
    const hold = this.options.maxHoldMs;
    const rate = classRate(this.snapshot().rate, paceClass(sweep, backlog), this.settings);
    return hold === undefined ? requests : admitted(requests, rate, hold, this.blockedUntil(sweep) - this.now());
  }

  /** How many users' requests this pace serves within `ms` at its rate now, as this container knows it (at least one). */
  serves(ms: number): number {
    return Math.max(1, Math.floor((classRate(this.snapshot().rate, 'users', this.settings) * ms) / 1000));
  }

  /** Until when this container knows the class is stopped by a Retry-After (the sweep and a backlog by the sweep's too). */
  private blockedUntil(sweep: boolean): number {
    return sweep ? Math.max(this.localBlockedUntil, this.localSweepBlockedUntil) : this.localBlockedUntil;
  }

  snapshot(): PaceSnapshot {
    const fallback = this.now() < this.fallbackUntil;
    const { outage } = this.breaker;
    return {
      rate: fallback ? this.options.fallbackRate : this.lastRate,
      ...(outage ? { breakerOpenSince: outage.since, breakerReason: outage.reason } : {}),
      fallback,
    };
  }

  /**
   * True while this container knows the breaker is open and its next probe is not due: nothing can
   * be asked of the provider, so a batch need not even read its stored rows.
   */
  waitingForProbe(): boolean {
    return this.breaker.outage !== undefined && this.now() < this.outageKnownUntil() && this.now() >= this.fallbackUntil;
  }

  /** Whether the breaker is known to be open (without asking the store). */
  outageKnown(): { reason: BreakerReason; since: number } | undefined {
    const { outage } = this.breaker;
    return outage ? { reason: outage.reason, since: outage.since } : undefined;
  }

  /**
   * Says that `requests` requests are about to be asked for (a batch's items): a draw then takes a
   * lease no larger than what is still wanted, so that a batch of two ids does not take fifty
   * tokens from the shared bucket and let 48 expire unused (tokens every other container could have
   * spent). Each `go` counts one off; the function returned takes back what was never asked for (an
   * item that ended without a request). Without a claim, a lease is bounded by `concurrency` alone.
   */
  expect(requests: number): () => void {
    return this.demand.claim(requests);
  }

  /** One decision for one request: go, wait until, or outage. Never throws. */
  async acquire(options: { afterFailure?: boolean; sweep?: boolean; backlog?: boolean } = {}): Promise<Grant> {
    const grant = await this.decide(options);
    if (grant.kind === 'go') this.demand.granted();
    return grant;
  }

  private async decide(options: { afterFailure?: boolean; sweep?: boolean; backlog?: boolean }): Promise<Grant> {
    // A lease serves one class: users' ids, the sweep (which yields to users, pace-state.ts), or a
    // backlog (the sweep's rules without its share).
    const sweep = options.sweep === true;
    const backlog = sweep && options.backlog === true;
    if (sweep !== this.leaseIsSweep || backlog !== this.leaseIsBacklog) {
      this.lease = undefined;
      this.drawNotBefore = 0;
      this.leaseIsSweep = sweep;
      this.leaseIsBacklog = backlog;
    }
    // Another attempt after a failure draws from the shared row (not from this container's lease):
    // if the failures add up to an outage elsewhere, the breaker is seen before the attempt goes out.
    if (options.afterFailure) this.lease = undefined;
    for (;;) {
      const now = this.now();
      if (now < this.localBlockedUntil) return { kind: 'wait', until: this.localBlockedUntil, why: 'retry-after' };
      if (sweep && now < this.localSweepBlockedUntil) return { kind: 'wait', until: this.localSweepBlockedUntil, why: 'retry-after' };
      const { outage } = this.breaker;
      if (outage && now < this.outageKnownUntil()) {
        return { kind: 'outage', reason: outage.reason, since: outage.since };
      }
      if (now < this.fallbackUntil) return this.localGrant(now);
      if (outage && this.separateBreaker) {
        // The breaker's row, not this pace's, says whether it is still open (one read at a time per container).
        const checking = this.breaker.checking;
        if (checking) {
          await checking;
          continue;
        }
        const check = this.checkBreaker().finally(() => {
          if (this.breaker.checking === check) this.breaker.checking = undefined;
        });
        this.breaker.checking = check;
        const grant = await check;
        if (grant) return grant;
        continue; // closed: draw from this pace's row
      }
      const fromLease = this.fromLease(now);
      if (fromLease) return fromLease;
      if (now < this.drawNotBefore) return { kind: 'wait', until: this.drawNotBefore, why: 'pace' };
      if (this.drawing) {
        // One draw at a time per container; callers that came meanwhile look at its lease.
        await this.drawing;
        continue;
      }
      const drawing = this.drawFromStore(sweep, backlog).finally(() => {
        if (this.drawing === drawing) this.drawing = undefined;
      });
      this.drawing = drawing;
      // Awaited here, before any waiter: the caller that drew goes first.
      return await drawing;
    }
  }

  /** How the request that `grant` allowed ended. Never throws. */
  async report(result: RequestResult, grant: Grant): Promise<void> {
    const now = this.now();
    const probe = grant.kind === 'go' && grant.probe;
    switch (result.kind) {
      case 'ok':
        this.breaker.consecutiveFailures = 0;
        this.okSinceDraw = true;
        if (probe || this.breaker.outage) {
          this.breaker.outage = undefined;
          await this.change('breaker closed', (state) => closeBreaker(state, now), this.breakerStore);
        } else if (this.breaker.sharedFailures > 0) {
          await this.change('failures reset', (state) => requestSucceeded(state), this.breakerStore);
        }
        return;
      case 'rate-limited': {
        const retryAfterMs = Math.min(
          MAX_RETRY_AFTER_MS,
          Math.max(MIN_RETRY_AFTER_MS, result.retryAfterMs ?? this.settings.defaultRetryAfterMs),
        );
        // A sweep request's 429 holds the sweep alone (this pace serves one class at a time: leaseIsSweep).
        const sweep = this.leaseIsSweep;
        if (sweep) this.localSweepBlockedUntil = Math.max(this.localSweepBlockedUntil, now + retryAfterMs);
        else this.localBlockedUntil = Math.max(this.localBlockedUntil, now + retryAfterMs);
        this.lease = undefined;
        await this.change('rate limited', (state) => rateLimited(state, now, result.retryAfterMs, this.settings, sweep, this.leaseIsBacklog));
        return;
      }
      case 'failed': {
        if (probe) return; // the breaker stays open; the next probe is due in probeIntervalMs
        if (result.repeat) return;
        this.breaker.consecutiveFailures += 1;
        // Counted system-wide: a few failures in a row anywhere open the breaker for everyone.
        const after = await this.change('request failed', (state) => requestFailed(state, now, this.settings), this.breakerStore);
        if (after?.breaker.open) this.learnOutage(after.breaker);
        else if (after === undefined && this.breaker.consecutiveFailures >= this.outageFailures) await this.open('provider', now);
        return;
      }
    }
  }

  /**
   * How long this container trusts what it knows of an open breaker: until the next probe, and at
   * most OUTAGE_RECHECK_MS after it last read the row, so that it learns soon when another
   * container's probe closed it (records that came meanwhile would otherwise wait another period).
   */
  private outageKnownUntil(): number {
    const { outage } = this.breaker;
    if (!outage) return 0;
    // On the local pace the row is not read: the local probe schedule alone decides (one a probeIntervalMs).
    if (this.now() < this.fallbackUntil) return outage.nextProbeAt;
    return Math.min(outage.nextProbeAt, this.breaker.readAt + OUTAGE_RECHECK_MS);
  }

  private learnOutage(breaker: Extract<PaceState['breaker'], { open: true }>): void {
    this.lease = undefined;
    this.breaker.outage = { reason: breaker.reason, since: breaker.since, nextProbeAt: breaker.nextProbeAt };
    this.breaker.readAt = this.now();
  }

  private async open(reason: BreakerReason, now: number): Promise<void> {
    this.lease = undefined;
    if (!this.breaker.outage) {
      this.breaker.outage = { reason, since: now, nextProbeAt: now + this.settings.probeIntervalMs };
      this.breaker.readAt = now;
    }
    await this.change('breaker opened', (state) => openBreaker(state, now, reason, this.settings), this.breakerStore);
  }

  /**
   * The breaker's own row (separate breaker), read once the container's trust in an open breaker
   * ran out: closed → undefined (the caller draws from its pace's row); open → outage, or the probe
   * when it is due (taken with a conditional write: one probe per probe interval across every
   * container and every pace of the client id).
   */
  private async checkBreaker(): Promise<Grant | undefined> {
    try {
      for (let attempt = 1; attempt <= this.writeAttempts; attempt += 1) {
        const { state, version } = await this.readState(this.breakerStore);
        const now = this.now();
        this.breaker.sharedFailures = state.failures;
        const result = breakerDraw(state, now, this.settings);
        if (result === undefined) {
          this.breaker.outage = undefined;
          return undefined;
        }
        if (result.draw.kind === 'granted') {
          if ((await this.breakerStore.write(result.state, version)) === 'conflict') continue;
        }
        if (result.state.breaker.open) this.learnOutage(result.state.breaker);
        const { reason, since } = this.breaker.outage!;
        return result.draw.kind === 'granted' ? { kind: 'go', probe: true, reason } : { kind: 'outage', reason, since };
      }
      // Busy, not broken: others wrote the row meanwhile. Still open as far as this container knows: look again later.
      this.breaker.readAt = this.now();
      const { reason, since } = this.breaker.outage!;
      return { kind: 'outage', reason, since };
    } catch (error) {
      // The local pace's breaker takes over: its probe only when the one the container knew of is due.
      this.enterFallback(`breaker: ${(error as Error).message}`);
      const outage = this.breaker.outage;
      if (outage && this.now() < outage.nextProbeAt) return { kind: 'outage', reason: outage.reason, since: outage.since };
      return this.localGrant(this.now());
    }
  }

  private now(): number {
    return this.clock.now().getTime();
  }

  private fromLease(now: number): Grant | undefined {
    const grant = this.lease && spend(this.lease, now);
    if (!grant && this.lease) {
      this.leftUnspent = this.lease.tokens;
      this.lease = undefined;
    }
    return grant;
  }

  private localGrant(now: number): Grant {
    const { outage } = this.breaker;
    if (outage) {
      outage.nextProbeAt = now + this.settings.probeIntervalMs;
      return { kind: 'go', probe: true, reason: outage.reason };
    }
    if (now < this.fallbackNextAt) return { kind: 'wait', until: this.fallbackNextAt, why: 'pace' };
    this.fallbackNextAt = Math.max(now, this.fallbackNextAt) + 1000 / this.options.fallbackRate;
    return { kind: 'go', probe: false };
  }

  /** One draw from the shared bucket: the grant of the caller that drew, and a lease for the rest. */
  private async drawFromStore(sweep: boolean, backlog: boolean): Promise<Grant> {
    try {
      for (let attempt = 1; attempt <= this.writeAttempts; attempt += 1) {
        const { state, version } = await this.readState();
        const now = this.now();
        // A lease no larger than this container can spend, nor than it still wants (expect()):
        // tokens it could not use would expire unused.
        const want = Math.min(leaseSize(state.rate, this.settings), this.options.concurrency, this.demand.wanted());
        const result = draw(state, now, want, this.settings, this.okSinceDraw, sweep, this.leftUnspent < 1, backlog);
        // A wait takes nothing: no need to write (the refill is counted again at the next draw).
        const changed = result.state !== state && result.draw.kind !== 'wait';
        if (changed && (await this.store.write(result.state, version)) === 'conflict') continue;
        if (changed) this.okSinceDraw = false;
        // The count as the row holds it: a draw that was not written reset nothing there.
        if (!this.separateBreaker) this.breaker.sharedFailures = (changed ? result.state : state).failures;
        this.lastRate = result.state.rate;
        return this.applyDraw(result.draw, result.state, now, sweep);
      }
      // Busy, not broken: every other container drew meanwhile. Ask again in a moment (every caller
      // in this container: those that waited for this draw must not start their own at once).
      const until = this.now() + 5 + Math.floor(this.random() * 20);
      this.drawNotBefore = until;
      return { kind: 'wait', until, why: 'pace' };
    } catch (error) {
      return this.fallBack((error as Error).message);
    }
  }

  private applyDraw(d: ReturnType<typeof draw>['draw'], state: PaceState, now: number, sweep: boolean): Grant {
    switch (d.kind) {
      case 'granted': {
        if (d.probe) {
          const reason = state.breaker.open ? state.breaker.reason : 'provider';
          return { kind: 'go', probe: true, reason };
        }
        if (this.separateBreaker) {
          // Another pace of the container learned meanwhile that the breaker is open: so does this one.
          const { outage } = this.breaker;
          if (outage) return { kind: 'outage', reason: outage.reason, since: outage.since };
        } else if (this.breaker.outage) this.breaker.outage = undefined; // someone else's probe closed it
        const leaseMs = this.settings.leaseSeconds * 1000;
        const lastAt = d.startAt + (d.tokens - 1) * d.intervalMs;
        this.lease = { tokens: d.tokens, nextAt: d.startAt, intervalMs: d.intervalMs, expiresAt: lastAt + leaseMs };
        return this.fromLease(now) ?? { kind: 'wait', until: d.startAt, why: 'pace' };
      }
      case 'wait': {
        if (!this.separateBreaker && this.breaker.outage) this.breaker.outage = undefined;
        if (d.why === 'retry-after') {
          if (sweep) this.localSweepBlockedUntil = Math.max(this.localSweepBlockedUntil, d.retryAt);
          else this.localBlockedUntil = Math.max(this.localBlockedUntil, d.retryAt);
          return { kind: 'wait', until: d.retryAt, why: d.why };
        }
        // Every sweep container that found the bucket short computes the same time: spread them, so
        // that one takes the lease and the others read, rather than all writing and all but one conflicting.
        const until = sweep ? d.retryAt + Math.floor(this.random() * SWEEP_JITTER_MS) : d.retryAt;
        this.drawNotBefore = until;
        return { kind: 'wait', until, why: d.why };
      }
      case 'outage':
        this.breaker.outage = { reason: d.reason, since: d.since, nextProbeAt: d.nextProbeAt };
        this.breaker.readAt = now;
        return { kind: 'outage', reason: d.reason, since: d.since };
    }
  }

  /**
   * The state of `store` (this pace's row by default, or the breaker's). This pace's row has no
   * breaker of its own when the breaker is another row's.
   */
  private async readState(store: PaceStore = this.store): Promise<{ state: PaceState; version: number }> {
    const stored = await store.read();
    const state = storedPaceState(stored, this.settings, this.now(), {
      breakerElsewhere: this.separateBreaker && store === this.store,
      invalid: () => this.log.warn('the pace row is not a pace state; starting afresh'),
    });
    return { state, version: stored?.version ?? 0 };
  }

  /**
   * Applies one change to the shared state (read, change, conditional write). Returns the state as
   * stored after it; undefined when the store could not be used (this container then falls back).
   */
  private async change(what: string, apply: (state: PaceState) => PaceState, store: PaceStore = this.store): Promise<PaceState | undefined> {
    if (this.now() < this.fallbackUntil) return undefined;
    try {
      for (let attempt = 1; attempt <= this.writeAttempts; attempt += 1) {
        const { state, version } = await this.readState(store);
        const next = apply(state);
        if (store === this.breakerStore) this.breaker.sharedFailures = next.failures;
        if (next === state) return state;
        if ((await store.write(next, version)) === 'written') {
          if (store === this.store) this.lastRate = next.rate;
          if (next.breaker.open !== state.breaker.open || next.ceiling !== state.ceiling) {
            // The rate of a row that holds the breaker only (the client id's, under `paceScope` `connection`) means nothing.
            const rate = store === this.store ? { rate: round(next.rate) } : {};
            this.log.info(`provider pace: ${what}`, { ...rate, breakerOpen: next.breaker.open });
          }
          return next;
        }
      }
      // Busy, not broken: every other container wrote meanwhile. The change is given up (a failure
      // then counts only here, a cut is made by the containers that wrote); no fallback.
      this.log.warn('provider pace: a change was given up after write conflicts', { change: what });
    } catch (error) {
      this.fallBack(`${what}: ${(error as Error).message}`);
    }
    return undefined;
  }

  private fallBack(why: string): Grant {
    this.enterFallback(why);
    return this.localGrant(this.now());
  }

  /** This container runs on its local pace for `fallbackMs` from now (the warning once per period). */
  private enterFallback(why: string): void {
    const now = this.now();
    if (now >= this.fallbackUntil) {
      this.log.warn('the control table cannot be used; this container runs on its local pace for a while', {
        error: why,
        localRate: this.options.fallbackRate,
        forMs: this.fallbackMs,
      });
    }
    this.fallbackUntil = now + this.fallbackMs;
    this.lease = undefined;
  }
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
