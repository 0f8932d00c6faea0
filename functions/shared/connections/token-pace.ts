/**
 * The token endpoint's pace (docs/connections.md, "The token pace"), the core (no AWS import): one
 * provider pace per client id, of its own (pace key `token#<client id>`, control-table row
 * `provider-pace#token#<client id>`), apart from the item requests' pace. Every getToken, the token
 * refresher's and the item sync's on demand alike, takes a slot of it first (refresh.ts) and tells
 * it how the call ended: a 429 with its Retry-After (`rate-limited`: every caller stops until then,
 * and the rate is cut), a 5xx, time-out or network failure (`failed`: enough in a row open its
 * breaker, one probe every 20 s), any other answer (`ok`: the provider is up; a refused refresh
 * token is its connection's matter alone).
 *
 * It is the shared ProviderPace (functions/shared/provider/pace/provider-pace.ts, used through its
 * public API only), with a ceiling: it starts at TOKEN_REQUESTS_PER_SECOND (10 by default) and
 * never goes above it, and a 429 cuts it, so it finds a lower limit of the token endpoint the way
 * the item pace finds the items'. While the control table cannot be used a container runs on its
 * own TOKEN_PACE_FALLBACK_RATE.
 *
 * A caller that may wait says until when a getToken may start (`startBy`): a slot that comes by
 * then is waited for (sleep), a later one is not (`wait`, with when it would come); an open breaker
 * is `outage`. Waiting for a slot is not failing: the connection stays as it was, and due.
 */
import { BoundedMap } from '../bounded-map.js';
import { ProviderError } from '../errors.js';
import type { Clock, Log } from '../ports.js';
import { DEFAULT_PACE_SETTINGS } from '../provider/pace/pace-state.js';
import { ProviderPace, type PaceStore, type RequestResult } from '../provider/pace/provider-pace.js';
import type { TokenSlot, TokenSlots } from './ports.js';

/** The pace key of a client id's token pace (its control-table row is `provider-pace#<this>`). */
export const TOKEN_PACE_KEY_PREFIX = 'token#';

export function tokenPaceKey(clientId: string): string {
  return `${TOKEN_PACE_KEY_PREFIX}${clientId}`;
}

/** getToken calls a second of one container while the control table cannot be used. */
export const TOKEN_PACE_FALLBACK_RATE = 1;
/** Token paces one container keeps (one per client id it met); the least recently used goes first. */
export const MAX_TOKEN_PACES = 100;

export interface TokenPaceSettings {
  /** TOKEN_REQUESTS_PER_SECOND: the starting rate and the ceiling, getToken calls a second. */
  ceiling: number;
  /** getToken calls this container makes at once at most (a lease holds no more slots). */
  concurrency: number;
}

export interface TokenPacePorts {
  /** The shared state of a pace key's pace (the control table's row, or a fake). */
  storeFor: (paceKey: string) => PaceStore;
  clock: Clock;
  log: Log;
  /** Waits for a slot; default real time. */
  sleep?: (ms: number) => Promise<void>;
  /** [0, 1), for the pace's jitter; default Math.random. */
  random?: () => number;
}

/** One container's token paces, one per client id, made on first use. */
export class TokenPaces implements TokenSlots {
  private readonly paces = new BoundedMap<string, ProviderPace>(MAX_TOKEN_PACES);
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(
    private readonly ports: TokenPacePorts,
    private readonly settings: TokenPaceSettings,
  ) {
    this.sleep = ports.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  }

  async slot(clientId: string, startBy: number | undefined): Promise<TokenSlot> {
    const pace = this.paceOf(clientId);
    for (;;) {
      const grant = await pace.acquire();
      switch (grant.kind) {
        case 'go':
          return { kind: 'go', report: (result) => pace.report(result, grant) };
        case 'outage':
          return { kind: 'outage', since: grant.since };
        case 'wait': {
          if (startBy !== undefined && grant.until > startBy) return { kind: 'wait', until: grant.until, why: grant.why };
          await this.sleep(Math.max(1, grant.until - this.ports.clock.now().getTime()));
          break;
        }
      }
    }
  }

  /** The rate each client id's pace last saw (requests a second), for the run's report. */
  rates(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [clientId, pace] of this.paces.entries()) out[clientId] = pace.snapshot().rate;
    return out;
  }

  private paceOf(clientId: string): ProviderPace {
    const known = this.paces.use(clientId);
    if (known) return known;
    const paceKey = tokenPaceKey(clientId);
    const pace = new ProviderPace(this.ports.storeFor(paceKey), this.ports.clock, keyedLog(this.ports.log, paceKey), {
      settings: { ...DEFAULT_PACE_SETTINGS, maxRate: this.settings.ceiling },
      fallbackRate: TOKEN_PACE_FALLBACK_RATE,
      concurrency: this.settings.concurrency,
      ...(this.ports.random ? { random: this.ports.random } : {}),
    });
    this.paces.set(clientId, pace);
    return pace;
  }
}

/**
 * How a getToken call ended, as the pace needs to know: a 429 (with its Retry-After), a transient
 * failure (5xx, 408, time-out, network), or an answer (any other: the provider is up). Undefined
 * for an error that is no provider answer at all (nothing to tell).
 */
export function tokenCallResult(error: unknown): RequestResult | undefined {
  if (!(error instanceof ProviderError)) return undefined;
  switch (error.kind) {
    case 'rate-limited':
      return { kind: 'rate-limited', ...(error.retryAfterSeconds !== undefined ? { retryAfterMs: error.retryAfterSeconds * 1000 } : {}) };
    case 'transient':
      return { kind: 'failed' };
    default:
      return { kind: 'ok' };
  }
}

/** The pace's log lines name the pace they are about. */
function keyedLog(log: Log, paceKey: string): Log {
  return {
    debug: (message, ...attributes) => log.debug(message, { paceKey }, ...attributes),
    info: (message, ...attributes) => log.info(message, { paceKey }, ...attributes),
    warn: (message, ...attributes) => log.warn(message, { paceKey }, ...attributes),
    error: (message, ...attributes) => log.error(message, { paceKey }, ...attributes),
  };
}
