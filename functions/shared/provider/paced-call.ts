/**
 * One provider call as every caller makes it (the item sync's fetch today; any later call, a folder
 * listing, the same way), for one connection. No AWS import. Per request:
 *
 * - a slot of the connection's provider pace (pace/provider-pace.ts; the pace the connection's
 *   gate names, shared by every container): asked before, told after how the request ended. A
 *   `wait` longer than the invocation has left, or than the pace's `maxHoldMs` (a pace of one
 *   connection among others: its wait must not hold the batch), ends the call with a WaitError (the
 *   caller postpones); an open breaker ends it with a WaitError (outage);
 * - the connection's access token (the session's, from its gate: the connections' access layer,
 *   functions/shared/connections): after a 401, the access layer is asked what now
 *   (`afterRefusal(connection, token, { deadline })`: no refresh starts that could not end before
 *   the invocation's deadline): another token → the request is made again with it, once;
 *   wait (paused, failing, a refresh in progress) → the call waits (WaitError, kind `connection`);
 *   dead (removed, unknown) → PermanentError with the reason. A 401 is told to the pace as `ok`
 *   (the provider is up) and never opens the breaker: a refused token stops its connection alone.
 *   A token the container already knows refused (`knownRefused`: another call met the 401) is not
 *   sent again: before its slot and again once it has one, the call asks the access layer what
 *   now instead, so that only requests already on their way when the 401 came can meet it too;
 * - a 429 is not a failure: the pace stops every container until its Retry-After (that pace's:
 *   the connection's own under paceScope connection) and the request is made again when the pace
 *   allows;
 * - a transient failure (network, time-out, 408, 5xx) is tried again, up to `attempts` requests,
 *   after the backoff (exponential, equal jitter), while the invocation has time for it; the
 *   breaker opening in the meantime ends the call (outage);
 * - counting: `fetched` for every usable answer, `rateLimited` for every 429.
 *
 * Any other provider answer (404, 403, a malformed body...) is thrown as it is, after the pace was
 * told that the provider is up: what it means is the caller's to say. No token ever goes into a log
 * line or an error.
 */
import { backoffDelayMs, type Backoff } from '../backoff.js';
import type { ConnectionAccess } from '../connections/ports.js';
import { PermanentError, ProviderError } from '../errors.js';
import type { Clock, Log } from '../ports.js';
import type { Grant, PaceGate } from './pace/provider-pace.js';

/**
 * Why a call waits: the pace had no slot in time, the provider is in an outage (breaker open), or
 * the connection cannot be used now (paused, failing, a refresh in progress: its gate's seconds).
 */
export type Wait =
  | { kind: 'pace'; seconds: number; retryAfter: boolean }
  | { kind: 'outage'; reason: string }
  | { kind: 'connection'; reason: string; seconds: number };

/** The call must wait (for the pace, an outage, or its connection): its work is postponed, not failed. */
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
  /** Asked what now when the provider refused a connection's token (401). */
  connections: Pick<ConnectionAccess, 'afterRefusal' | 'knownRefused'>;
  clock: Clock;
  log: Log;
  /** [0, 1), for the backoff jitter. */
  random: () => number;
  sleep: (ms: number) => Promise<void>;
}

/**
 * One connection's use of the provider within a scope (a batch): its access token and its pace.
 * The token is replaced when the provider refused it and the access layer gave another, so that
 * the connection's later calls in the scope send the new one.
 */
export interface ConnectionSession {
  readonly connection: string;
  token: string;
  /** The pace the connection's gate names (`paceKey`). */
  readonly pace: PaceGate;
  /**
   * In a sweep scope: the connection's records are a users' backlog sent to the background lane,
   * drawn as the sweep but not held to its share (PACE_SCOPE=connection: the pace is the account's own).
   */
  readonly backlog?: boolean;
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

/** How long a call waits whose token is known refused when the access layer has no other (a rare race). */
export const REFUSED_WAIT_SECONDS = 5;

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
   * The request's answer, made within the connection's pace, with its token, retried as the answer
   * says. `where` goes into every log line (e.g. `{ connection, itemId }`). Throws WaitError,
   * OutOfTimeError, PermanentError (the connection's token was refused and the connection is gone),
   * or the ProviderError the caller has to decide about.
   */
  async call<T>(session: ConnectionSession, request: ProviderRequest<T>, where: Record<string, unknown>): Promise<T> {
    const { log } = this.ports;
    const { pace } = session;
    this.checkTime();
    let token = session.token;
    let retriedAfterRefusal = false;
    for (let attempt = 1; ; ) {
      // A token another call saw refused is not sent: the access layer's answer instead.
      if (this.ports.connections.knownRefused(session.connection, token)) token = await this.insteadOfRefused(session, token);
      const grant = await this.slot(pace, attempt > 1, session.backlog === true);
      // Refused while this call waited for its slot (a probe goes out all the same: the breaker needs its answer).
      if (!grant.probe && this.ports.connections.knownRefused(session.connection, token)) continue;
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
            // The provider answered: it is up. A refused token is its connection's matter alone.
            await pace.report({ kind: 'ok' }, grant);
            const next = await this.afterRefusal(session, token, error);
            if (retriedAfterRefusal || next === token) throw error;
            retriedAfterRefusal = true;
            log.info('access token refused; retrying with the connection\'s other token', where);
            token = next;
            continue;
          }
          case 'transient': {
            if (this.scope.signal.aborted) throw error; // our own deadline, not the provider's failure
            await pace.report({ kind: 'failed', repeat: attempt > 1 }, grant);
            if (pace.outageKnown()) throw outageError(error);
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

  /**
   * The token to send after the provider refused `refused`: the access layer's answer (the session
   * keeps it for the connection's later calls). Its wait and its dead end the call.
   */
  private async afterRefusal(session: ConnectionSession, refused: string, error?: ProviderError): Promise<string> {
    // The deadline goes along: a refresh that could not end before it is not started (the call waits).
    const gate = await this.ports.connections.afterRefusal(session.connection, refused, { deadline: this.scope.deadline });
    switch (gate.kind) {
      case 'ready':
        session.token = gate.token;
        return gate.token;
      case 'wait':
        throw connectionWaitError(gate.reason, gate.seconds, error);
      case 'dead':
        throw new PermanentError(gate.reason);
    }
  }

  /**
   * The token to send instead of `refused`, a token another call met a 401 with: the access layer's
   * answer (shared with that call while it is pending). The same token again, or a wait or dead
   * answer, ends the call.
   */
  private async insteadOfRefused(session: ConnectionSession, refused: string): Promise<string> {
    const next = await this.afterRefusal(session, refused);
    if (next !== refused) return next;
    throw connectionWaitError(`connection "${session.connection}": the provider refused its access token, and no other is there yet`, REFUSED_WAIT_SECONDS);
  }

  /** A slot of the connection's pace: waits for it while the invocation has time, else the call waits. */
  private async slot(pace: PaceGate, afterFailure: boolean, backlog: boolean): Promise<Extract<Grant, { kind: 'go' }>> {
    // A pace that is not the whole batch's holds its request this long at most (then it waits outside the invocation).
    const holdUntil = pace.maxHoldMs === undefined ? Infinity : this.now() + pace.maxHoldMs;
    for (;;) {
      this.checkTime();
      const grant = await pace.acquire({ afterFailure, sweep: this.scope.sweep, ...(backlog ? { backlog } : {}) });
      switch (grant.kind) {
        case 'go':
          return grant;
        case 'outage':
          throw outageError();
        case 'wait': {
          const now = this.now();
          const why = grant.why === 'retry-after' ? "the provider's Retry-After" : 'the provider pace';
          // Keep back the time a request needs: a slot too close to the deadline is no use.
          const pastDeadline = grant.until >= this.scope.deadline - SLOT_MARGIN_MS;
          if (pace.maxHoldMs !== undefined && (grant.until > holdUntil || pastDeadline)) {
            // It waited its hold out (or its slot is past the invocation): it waits outside the
            // invocation, at least as long again and past the pace's wait. The pace's word, not a
            // Retry-After's: no floor. Not booked behind the ids the batch sent away unadmitted
            // (ProviderPace.bookReturn): it was due now, and another container's bookings of the same
            // pace would put it past when the pace is free (an idle tail at a backlog's end).
            const holdMs = pace.maxHoldMs;
            const at = now + Math.max(holdMs, grant.until - now);
            const message =
              grant.until > holdUntil
                ? `no slot of the connection's provider pace within ${holdMs / 1000} s (${why}); the batch's other records are not held for it`
                : `no slot of the provider pace before this invocation ends (${why})`;
            throw new WaitError(message, { kind: 'pace', seconds: (at - now) / 1000, retryAfter: false });
          }
          if (pastDeadline) {
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

/** The wait of a call while the breaker is open: for the provider to come back. */
export function outageError(cause?: Error): WaitError {
  return new WaitError(`the provider fails every request (outage)${cause ? `; last answer: ${cause.message}` : ''}`, {
    kind: 'outage',
    reason: 'provider',
  });
}

/**
 * The wait of a call whose connection cannot be used now (its gate's `wait`): `reason` is the
 * gate's (it names the connection, never a token), `seconds` how long before it is looked at again.
 */
export function connectionWaitError(reason: string, seconds: number, cause?: Error): WaitError {
  return new WaitError(`${reason}${cause ? `; last answer: ${cause.message}` : ''}`, { kind: 'connection', reason, seconds });
}
