/**
 * The provider's token endpoint as the refresher scenario sees it (refresher-scenario.ts): an
 * unpublished limit of its own in front of the provider model, and what it watches of the calls.
 *
 * - The limit: a token bucket of `requestsPerSecond` (bursts of one second's worth, at least one call) on getToken
 *   alone; a call beyond it is answered 429 with `Retry-After` after the model's latency, without
 *   reaching the model. The model's own rate limit is the items endpoint's (dev/simulator); the
 *   token endpoint's is kept here, where only this scenario needs it.
 * - What it watches: every getToken by virtual second (the busiest second), its answers by status,
 *   and each connection's token renewals: the age of the token a renewal replaced (the refresh
 *   token names the connection: the model does not rotate refresh tokens here).
 */
import type { VirtualClock } from './virtual-clock.js';

export interface TokenEndpointLimit {
  /** getToken calls a second the endpoint takes; more are answered 429. */
  requestsPerSecond: number;
  /** Sent as Retry-After (seconds) with each 429; default 1. */
  retryAfterSeconds?: number;
}

/** What the token endpoint saw. */
export interface TokenEndpointStats {
  calls: number;
  /** Answers by HTTP status (429 included: the limit's). */
  byStatus: Record<number, number>;
  /** The most calls in one virtual second, and when (epoch ms of its start). */
  peakPerSecond: number;
  peakAt: number;
  /** Calls in the 60 seconds that held the most (a minute's average rate = this ÷ 60). */
  peakPerMinute: number;
}

/** Each connection's token renewals: the age of the token each replaced. */
export interface RenewalStats {
  renewals: number;
  /** The oldest token a renewal replaced, ms, and whose. */
  maxAge: number;
  maxAgeConnection: string | undefined;
  /** Renewals of a token at least `lateAfterMs` old. */
  late: number;
}

export class TokenEndpoint {
  readonly stats: TokenEndpointStats = { calls: 0, byStatus: {}, peakPerSecond: 0, peakAt: 0, peakPerMinute: 0 };
  readonly renewals: RenewalStats = { renewals: 0, maxAge: 0, maxAgeConnection: undefined, late: 0 };
  /** When each connection's current token was issued (epoch ms). */
  readonly issuedAt = new Map<string, number>();
  private bucket: { tokens: number; at: number };
  private second = -1;
  private inSecond = 0;
  /** Calls per second of the last minute, as a ring. */
  private readonly lastMinute = new Array<number>(60).fill(0);
  private minuteSum = 0;

  constructor(
    private readonly limit: TokenEndpointLimit,
    private readonly clock: VirtualClock,
    /** The refresh token → its connection. */
    private readonly owners: ReadonlyMap<string, string>,
    /** A renewal of a token this old or older counts as late. */
    private readonly lateAfterMs: number,
    private readonly latencyMs: number,
  ) {
    this.bucket = { tokens: this.burst(), at: clock.ms() };
  }

  /** `fetch` in front of the model's: getToken goes through the limit and is watched; anything else passes. */
  gate(next: typeof globalThis.fetch): typeof globalThis.fetch {
    return async (input, init) => {
      const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      if (!url.pathname.endsWith('/getToken')) return next(input, init);
      const now = this.clock.ms();
      this.count(now);
      const connection = this.owners.get((new Headers(init?.headers).get('authorization') ?? '').replace(/^bearer /i, ''));
      let response: Response;
      if (this.take(now)) {
        response = await next(input, init);
      } else {
        await this.clock.sleep(this.latencyMs);
        response = new Response(JSON.stringify({ error: { code: 429, message: 'too many token requests' } }), {
          status: 429,
          headers: { 'content-type': 'application/json', 'Retry-After': String(this.limit.retryAfterSeconds ?? 1) },
        });
      }
      this.stats.byStatus[response.status] = (this.stats.byStatus[response.status] ?? 0) + 1;
      if (response.status === 200 && connection !== undefined) this.renewed(connection, this.clock.ms());
      return response;
    };
  }

  /** The age of every connection's current token at `at`: the oldest, and how many are at least `lateAfterMs` old. */
  agesAt(at: number, connections: readonly string[]): { oldest: number; late: number; without: number } {
    let oldest = 0;
    let late = 0;
    let without = 0;
    for (const connection of connections) {
      const issued = this.issuedAt.get(connection);
      if (issued === undefined) {
        without += 1;
        continue;
      }
      oldest = Math.max(oldest, at - issued);
      if (at - issued >= this.lateAfterMs) late += 1;
    }
    return { oldest, late, without };
  }

  private renewed(connection: string, at: number): void {
    const before = this.issuedAt.get(connection);
    this.issuedAt.set(connection, at);
    if (before === undefined) return;
    const age = at - before;
    this.renewals.renewals += 1;
    if (age > this.renewals.maxAge) {
      this.renewals.maxAge = age;
      this.renewals.maxAgeConnection = connection;
    }
    if (age >= this.lateAfterMs) this.renewals.late += 1;
  }

  private take(now: number): boolean {
    const { requestsPerSecond } = this.limit;
    this.bucket.tokens = Math.min(this.burst(), this.bucket.tokens + ((now - this.bucket.at) * requestsPerSecond) / 1000);
    this.bucket.at = now;
    if (this.bucket.tokens < 1) return false;
    this.bucket.tokens -= 1;
    return true;
  }

  private burst(): number {
    return Math.max(1, this.limit.requestsPerSecond);
  }

  /** Counts a call in its virtual second (calls come in time order), and the busiest second and minute. */
  private count(now: number): void {
    this.stats.calls += 1;
    const second = Math.floor(now / 1000);
    if (second !== this.second) {
      // The seconds between the last call and this one held none.
      for (let s = this.second + 1; this.second >= 0 && s <= second && s <= this.second + 60; s += 1) {
        this.minuteSum -= this.lastMinute[s % 60]!;
        this.lastMinute[s % 60] = 0;
      }
      if (this.second >= 0 && second - this.second > 60) {
        this.lastMinute.fill(0);
        this.minuteSum = 0;
      }
      this.second = second;
      this.inSecond = 0;
    }
    this.inSecond += 1;
    this.lastMinute[second % 60]! += 1;
    this.minuteSum += 1;
    if (this.inSecond > this.stats.peakPerSecond) {
      this.stats.peakPerSecond = this.inSecond;
      this.stats.peakAt = second * 1000;
    }
    this.stats.peakPerMinute = Math.max(this.stats.peakPerMinute, this.minuteSum);
  }
}
