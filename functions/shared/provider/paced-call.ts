/**
 * One provider call as every caller makes it (the item sync's fetch today; any later call, a folder
 * listing or a token refresh per connection, the same way). No AWS import. Per request:
 *
 * - a slot of the one provider pace every container shares (pace/provider-pace.ts): asked before,
 *   told after how the request ended. A `wait` longer than the invocation has left ends the call
 *   with a WaitError (the caller postpones); an open breaker ends it with a WaitError (outage);
 * - the access token (access-token.ts): after a 401, the secret is read afresh once and the request
 *   made again with the new token; when the secret still holds the refused token, nothing can
 *   succeed until the refresher runs: the pace is told (token-refused) and the call waits (outage).
 *   The probe of a breaker opened for the token is made only with a token other than the refused one;
 * - a 429 is not a failure: the pace stops every container until its Retry-After and the request
 *   is made again when the pace allows;
 * - a transient failure (network, time-out, 408, 5xx) is tried again, up to `attempts` requests,
 *   after the backoff (exponential, equal jitter), while the invocation has time for it; the
 *   breaker opening in the meantime ends the call (outage);
 * - counting: `fetched` for every usable answer, `rateLimited` for every 429.
 *
 * Any other provider answer (404, 403, a malformed body...) is thrown as it is, after the pace was
 * told that the provider is up: what it means is the caller's to say.
 */
import { backoffDelayMs, type Backoff } from '../backoff.js';
import { ProviderError } from '../errors.js';
import type { Clock, Log } from '../ports.js';
import type { AccessTokenSource } from './access-token.js';
import type { Grant, PaceGate } from './pace/provider-pace.js';

/** Why a call waits: the pace had no slot in time, or the provider is in an outage (breaker open). */
export type Wait = { kind: 'pace'; seconds: number; retryAfter: boolean } | { kind: 'outage'; reason: string };

/** The call must wait (for the pace, or for an outage to pass): its work is postponed, not failed. */
export class WaitError extends Error {
  override readonly name = 'WaitError';
  constructor(
    message: string,
    readonly wait: Wait,
  ) {
    super(message);
  }
}

/** The invocation is running out of time: the work is handed back for later. */
export class OutOfTimeError extends Error {
  override readonly name = 'OutOfTimeError';
}

export interface PacedCallPorts {
  /** The one provider pace every container shares: asked before, told after, every request. */
  pace: PaceGate;
  tokens: AccessTokenSource;
  clock: Clock;
  log: Log;
  /** [0, 1), for the backoff jitter. */
  random: () => number;
  sleep: (ms: number) => Promise<void>;
}

export interface PacedCallSettings {
  /** Requests per call for transient failures, the first included (at least 1). */
  attempts: number;
  /** The wait between them (the item sync: 200 ms doubling up to 2 s, equal jitter). */
  backoff: Backoff;
}

/** What the calls of one scope count (the item sync's batch counters have both). */
export interface PacedCallCounts {
  /** Usable answers. */
  fetched: number;
  /** 429 answers. */
  rateLimited: number;
}

/** What the calls of one invocation share. */
export interface PacedCallScope {
  /** Epoch ms: no request starts after it (nor a slot is waited for that ends too close to it). */
  deadline: number;
  /** Aborts requests in flight (at the deadline). */
  signal: AbortSignal;
  /** The reconciliation sweep's calls: they yield to users' in the pace. */
  sweep: boolean;
  counts: PacedCallCounts;
}

/** A provider request with the token to send and the signal to honour. */
export type ProviderRequest<T> = (token: string, signal: AbortSignal) => Promise<T>;

/** A pace slot later than this before the deadline is of no use: the call waits instead. */
export const SLOT_MARGIN_MS = 1_000;

/** Makes the provider calls of one scope (one invocation). */
export class PacedCaller {
  constructor(
    private readonly ports: PacedCallPorts,
    private readonly settings: PacedCallSettings,
    private readonly scope: PacedCallScope,
  ) {}

  /** Throws OutOfTimeError once the deadline has passed. */
  checkTime(): void {
    if (this.now() >= this.scope.deadline) {
      throw new OutOfTimeError('the invocation ran out of time before this item was done');
    }
  }

  /**
   * The request's answer, made within the pace, with the token, retried as the header says. `where`
   * goes into every log line (e.g. `{ itemId }`). Throws WaitError, OutOfTimeError, or the
   * ProviderError the caller has to decide about.
   */
  async call<T>(request: ProviderRequest<T>, where: Record<string, unknown>): Promise<T> {
    const { pace, tokens, log } = this.ports;
    this.checkTime();
    let token = await tokens.get();
    let tokenReadAfresh = false;
    for (let attempt = 1; ; ) {
      const grant = await this.slot(attempt > 1);
      if (grant.probe && grant.reason === 'token') {
        // The breaker is open because the provider refused the token the secret held: probe only
        // with another token, once the refresher has written one.
        token = await tokens.refresh(token);
        if (tokens.isRefused(token)) {
          await pace.report({ kind: 'token-refused' }, grant);
          throw outageError('token');
        }
      }
      let answer: T;
      try {
        answer = await request(token, this.scope.signal);
      } catch (error) {
        if (!(error instanceof ProviderError)) throw error;
        switch (error.kind) {
          case 'rate-limited':
            this.scope.counts.rateLimited += 1;
            await pace.report(
              { kind: 'rate-limited', ...(error.retryAfterSeconds !== undefined ? { retryAfterMs: error.retryAfterSeconds * 1000 } : {}) },
              grant,
            );
            log.info('rate limited; waiting for the pace', { ...where, retryAfterSeconds: error.retryAfterSeconds });
            continue;
          case 'unauthorized': {
            await pace.report({ kind: 'ok' }, grant); // the provider answered: it is up
            if (!tokenReadAfresh) {
              tokenReadAfresh = true;
              const fresh = await tokens.refresh(token);
              if (fresh !== token) {
                log.info('access token refused; retrying with the token read afresh', where);
                token = fresh;
                continue;
              }
            }
            // The secret still holds the refused token: nothing can succeed until the refresher runs.
            tokens.markRefused(token);
            await pace.report({ kind: 'token-refused' }, grant);
            throw outageError('token', error);
          }
          case 'transient': {
            if (this.scope.signal.aborted) throw error; // our own deadline, not the provider's failure
            await pace.report({ kind: 'failed', repeat: attempt > 1 }, grant);
            if (pace.outageKnown()) throw outageError('provider', error);
            if (attempt >= this.settings.attempts) throw error;
            const delay = backoffDelayMs(attempt, this.settings.backoff, this.ports.random);
            if (this.now() + delay >= this.scope.deadline) throw error; // no time left for another attempt
            log.info('transient provider failure; retrying', { ...where, attempt, delayMs: delay, error: error.message });
            await this.ports.sleep(delay);
            attempt += 1;
            continue;
          }
          default:
            await pace.report({ kind: 'ok' }, grant); // 404, 4xx, malformed: the provider is up
            throw error;
        }
      }
      await pace.report({ kind: 'ok' }, grant);
      this.scope.counts.fetched += 1;
      return answer;
    }
  }

  /** A slot of the shared pace: waits for it while the invocation has time, else the call waits. */
  private async slot(afterFailure: boolean): Promise<Extract<Grant, { kind: 'go' }>> {
    for (;;) {
      this.checkTime();
      const grant = await this.ports.pace.acquire({ afterFailure, sweep: this.scope.sweep });
      switch (grant.kind) {
        case 'go':
          return grant;
        case 'outage':
          throw outageError(grant.reason);
        case 'wait': {
          const now = this.now();
          // Keep back the time a request needs: a slot too close to the deadline is no use.
          if (grant.until >= this.scope.deadline - SLOT_MARGIN_MS) {
            const why = grant.why === 'retry-after' ? "the provider's Retry-After" : 'the provider pace';
            throw new WaitError(`no slot of the provider pace before this invocation ends (${why})`, {
              kind: 'pace',
              seconds: (grant.until - now) / 1000,
              retryAfter: grant.why === 'retry-after',
            });
          }
          await this.ports.sleep(Math.max(1, grant.until - now));
          break;
        }
      }
    }
  }

  private now(): number {
    return this.ports.clock.now().getTime();
  }
}

/** The wait of a call while the breaker is open: for the token refresher, or for the provider to come back. */
export function outageError(reason: 'provider' | 'token', cause?: Error): WaitError {
  const what =
    reason === 'token'
      ? 'the provider refuses the access token the secret holds (waiting for the token refresher)'
      : 'the provider fails every request (outage)';
  return new WaitError(`${what}${cause ? `; last answer: ${cause.message}` : ''}`, { kind: 'outage', reason });
}
