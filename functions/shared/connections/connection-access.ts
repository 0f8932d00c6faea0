/**
 * ConnectionAccess, the core (no AWS import; access.ts wires it over the connections table): what
 * the item sync may do with a connection's items now, from a per-container cache of the
 * connections' rows.
 *
 * - A row is read at most once per `tokenCacheSeconds` per container (concurrent callers share the
 *   read); the cache holds at most `cacheSize` connections (the one read least recently dropped). It
 *   never holds a refresh token, nor a negative answer: a connection read as unknown or removed is
 *   read again, consistently, before its items are dead-lettered (an eventually consistent read may
 *   not show an `add` of a moment ago), and is not cached.
 * - open: unknown or removed → dead; paused or failing → wait `connectionWaitSeconds`; active with
 *   no access token or one older than `tokenRefreshMinutes` + 5 minutes (ON_DEMAND_GRACE_MS: the
 *   token refresher renews tokens in use 5 minutes before `tokenRefreshMinutes`, so this is rare) →
 *   refreshed now (refresh.ts: one getToken at a time per connection across every container;
 *   concurrent callers in this container share one refresh); else ready, with the pace key of
 *   `paceScope`.
 * - afterRefusal: callers that met the same rejected token share one operation: a token the cache
 *   already holds instead, or the cache's fresh view of a connection no longer active (paused,
 *   failing: a wait); else the row read afresh (consistent): another token → that one; the same
 *   token → a refresh (unless that token was issued less than a minute ago: the provider refuses a
 *   fresh token, and refreshing again would not help; the items wait a minute). The container
 *   remembers the rejected token (knownRefused, the last one of each connection): no caller sends
 *   it again, so a revoked account costs one refused item request per container, not one per record.
 * - A refresh starts only with time for it before the caller's deadline (the provider time-out
 *   plus REFRESH_WRITE_MARGIN_MS for the lease and result writes): a rotated refresh token must not
 *   be lost to the invocation's end. Otherwise the items wait NO_TIME_WAIT_SECONDS. The refresh is
 *   told what the caller saw: a newer token that another container stored meanwhile is taken as it
 *   is, without a getToken.
 * - Its getToken takes a slot of the token endpoint's pace (token-pace.ts), shared with the token
 *   refresher: a slot within PACE_WAIT_MS (and with that time before the deadline) is waited for;
 *   otherwise, and after a 429, the items wait until the pace has one (at least a second); while
 *   the token endpoint is down (the pace's breaker is open) they wait FAILED_WAIT_SECONDS. None of
 *   these is a failure of the connection.
 * - Refresh outcomes: refreshed → the status the write left (a connection paused meanwhile waits);
 *   busy (another holds the lease) → wait 5 s while the holder may still be at work (within the
 *   provider time-out plus the margin since it took the lease), then until the lease ends, at most
 *   60 s (a holder that died does not requeue the items every 5 s for the lease's 5 minutes);
 *   refused → wait `connectionWaitSeconds` (the refresh core logs the status change); failed → wait
 *   30 s, and this container tries no other refresh of the connection meanwhile; a failure that is
 *   an answer (a malformed token, a 404, a result not stored) doubles the wait with each in a row,
 *   up to 120 s (a connection whose getToken keeps failing so costs at most one every 2 minutes per
 *   container). A failed call (5xx, time-out) does not double it: an outage is the token pace's
 *   breaker's to hold back (one probe every 20 s for everyone), and the first success after it
 *   must not find containers holding their connections back for minutes.
 * - The key that seals the tokens disabled or pending deletion (a read or a refresh cannot open
 *   them): the items wait FAILED_WAIT_SECONDS, as for an outage; no connection's failure.
 * - lastUsedAt is written (best effort) at most once per half refresh interval per connection per
 *   container, and only over a row's lastUsedAt older than that: the refresher keeps connections in
 *   use refreshed.
 */
import { BoundedMap } from '../bounded-map.js';
import type { PaceScope } from '../config.js';
import type { Log } from '../ports.js';
import { connectionIdProblem, paceKeyOf, type ConnectionRecord, type ConnectionStatus } from './connection.js';
import type { AccessOptions, ConnectionAccess, ConnectionGate } from './ports.js';
import { REFRESH_LEASE_MS, refreshConnection, type RefreshPorts, type RefreshResult, type SeenToken } from './refresh.js';
import { KeyUnavailableError, TOKEN_UNREADABLE } from './sealing.js';

/** How long the items wait, at least, while another container refreshes the token. */
export const BUSY_WAIT_SECONDS = 5;
/** How long the items wait, at most, for a lease whose holder should have been done by now. */
export const MAX_BUSY_WAIT_SECONDS = 60;
/** How long the items wait after a refresh failed in a way that may pass. */
export const FAILED_WAIT_SECONDS = 30;
/** The longest of those waits: the wait after a failure that is an answer doubles with each in a row, up to it. */
export const MAX_FAILED_WAIT_SECONDS = 120;
/** A rejected token issued less than this long ago is not refreshed again; the items wait this long. */
export const FRESH_REFUSAL_SECONDS = 60;
/** How long the items wait when the invocation has no time left for a refresh (the next one has). */
export const NO_TIME_WAIT_SECONDS = 5;
/** Kept beyond the provider time-out before the deadline for a refresh's lease and result writes. */
export const REFRESH_WRITE_MARGIN_MS = 5_000;
/** How long a refresh on demand waits, at most, for a slot of the token endpoint's pace. */
export const PACE_WAIT_MS = 5_000;
/**
 * A token is refreshed on demand once older than `tokenRefreshMinutes` plus this: the token
 * refresher renews tokens in use from `tokenRefreshMinutes` minus 5 minutes on, so it normally wins.
 */
export const ON_DEMAND_GRACE_MS = 5 * 60_000;
export const DEFAULT_CACHE_SIZE = 5_000;

export interface AccessSettings {
  paceScope: PaceScope;
  tokenCacheSeconds: number;
  tokenRefreshMinutes: number;
  connectionWaitSeconds: number;
  /** One provider call's time-out (PROVIDER_TIMEOUT_MS): a refresh needs this much time before the deadline, plus the margin. */
  providerTimeoutMs: number;
  /** Connections the cache holds at most; default 5,000. */
  cacheSize?: number;
}

export interface AccessPorts extends RefreshPorts {
  log: Log;
  /** Told of every on-demand refresh's result (the item sync counts them in its metrics). */
  onRefresh?: (result: RefreshResult) => void;
}

/** What the cache keeps of a row: no refresh token. */
interface View {
  connection: string;
  clientId: string;
  status: ConnectionStatus;
  accessToken?: string;
  accessTokenStamp?: string;
  /** Epoch ms. */
  refreshedAt?: number;
  lastUsedAt?: number;
  failureReason?: string;
}

interface Entry {
  /** Undefined: no such connection (never cached). */
  view: View | undefined;
  readAt: number;
  consistent: boolean;
}

export class CachedConnectionAccess implements ConnectionAccess {
  private readonly entries: BoundedMap<string, Entry>;
  /** When this container last wrote lastUsedAt, per connection (epoch ms). */
  private readonly marks: BoundedMap<string, number>;
  private readonly reads = new Map<string, Promise<Entry>>();
  private readonly refreshes = new Map<string, Promise<ConnectionGate>>();
  private readonly refusals = new Map<string, Promise<ConnectionGate>>();
  /** The last token the provider refused, per connection (knownRefused). */
  private readonly refused: BoundedMap<string, string>;
  /**
   * After a refresh failed in a way that may pass (a provider outage, a time-out): until when this
   * container starts no other for the connection (epoch ms), and why. During an outage, every batch
   * would otherwise send a getToken the breaker does not see.
   */
  private readonly failedUntil: BoundedMap<string, { until: number; reason: string; failures: number }>;

  constructor(
    private readonly ports: AccessPorts,
    private readonly settings: AccessSettings,
  ) {
    this.entries = new BoundedMap(settings.cacheSize ?? DEFAULT_CACHE_SIZE);
    this.marks = new BoundedMap(settings.cacheSize ?? DEFAULT_CACHE_SIZE);
    this.failedUntil = new BoundedMap(settings.cacheSize ?? DEFAULT_CACHE_SIZE);
    this.refused = new BoundedMap(settings.cacheSize ?? DEFAULT_CACHE_SIZE);
  }

  /** Connections the cache holds now (for tests and diagnostics). */
  get cached(): number {
    return this.entries.size;
  }

  async open(connection: string, options: AccessOptions = {}): Promise<ConnectionGate> {
    const problem = connectionIdProblem(connection);
    if (problem !== undefined) return { kind: 'dead', reason: problem };
    return keyOutageWaits(connection, async () => {
      const entry = this.fresh(connection) ?? (await this.read(connection, false));
      return this.decide(connection, entry, options.deadline);
    });
  }

  knownRefused(connection: string, token: string): boolean {
    return this.refused.get(connection) === token;
  }

  afterRefusal(connection: string, rejected: string, options: AccessOptions = {}): Promise<ConnectionGate> {
    this.refused.set(connection, rejected);
    const key = `${connection}\u0000${rejected}`;
    const pending = this.refusals.get(key);
    if (pending) return pending;
    const operation = keyOutageWaits(connection, () => this.refuse(connection, rejected, options.deadline)).finally(() => this.refusals.delete(key));
    this.refusals.set(key, operation);
    return operation;
  }

  private async refuse(connection: string, rejected: string, deadline: number | undefined): Promise<ConnectionGate> {
    const problem = connectionIdProblem(connection);
    if (problem !== undefined) return { kind: 'dead', reason: problem };
    const cached = this.fresh(connection);
    // What the cache knows afresh answers without a read: another token, or a connection no longer active.
    const known = cached?.view;
    if (known !== undefined && (known.status === 'paused' || known.status === 'failing')) return this.decide(connection, cached!, deadline);
    if (known?.status === 'active' && known.accessToken !== undefined && known.accessToken !== rejected) return this.decide(connection, cached!, deadline);
    const entry = await this.read(connection, true);
    const { view } = entry;
    if (view?.status !== 'active' || view.accessToken !== rejected) return this.decide(connection, entry, deadline);
    if (view.refreshedAt !== undefined && this.now() - view.refreshedAt < FRESH_REFUSAL_SECONDS * 1000) {
      return { kind: 'wait', reason: `connection "${connection}": the provider refused an access token issued less than a minute ago`, seconds: FRESH_REFUSAL_SECONDS };
    }
    return this.refresh(connection, view.clientId, deadline, { ...(view.accessTokenStamp !== undefined ? { stamp: view.accessTokenStamp } : {}), ...(view.refreshedAt !== undefined ? { refreshedAt: view.refreshedAt } : {}) });
  }

  /** The gate of what was read: a dead answer read again consistently first; a token too old refreshed. */
  private async decide(connection: string, entry: Entry, deadline: number | undefined): Promise<ConnectionGate> {
    let { view } = entry;
    if ((view === undefined || view.status === 'removed') && !entry.consistent) view = (await this.read(connection, true)).view;
    const now = this.now();
    if (view?.status === 'active' && (view.accessToken === undefined || view.refreshedAt === undefined || now - view.refreshedAt >= this.refreshAgeMs())) {
      return this.refresh(connection, view.clientId, deadline, {
        ...(view.accessTokenStamp !== undefined ? { stamp: view.accessTokenStamp } : {}),
        ...(view.refreshedAt !== undefined ? { refreshedAt: view.refreshedAt } : {}),
      });
    }
    return this.gateOf(connection, view, now);
  }

  /** The gate of a view as it is, without a refresh: an active one is ready with its token. */
  private async gateOf(connection: string, view: View | undefined, now: number): Promise<ConnectionGate> {
    if (view === undefined) return { kind: 'dead', reason: `unknown connection "${connection}"` };
    switch (view.status) {
      case 'removed':
        return { kind: 'dead', reason: `connection "${connection}" was removed` };
      case 'paused':
        return { kind: 'wait', reason: `connection "${connection}" is paused`, seconds: this.settings.connectionWaitSeconds };
      case 'failing':
        return { kind: 'wait', reason: failingReason(connection, view.failureReason), seconds: this.settings.connectionWaitSeconds };
      case 'active':
        break;
    }
    if (view.accessToken === undefined) return this.busy(connection, BUSY_WAIT_SECONDS);
    await this.markUsed(view, now);
    return { kind: 'ready', connection, token: view.accessToken, paceKey: paceKeyOf(this.settings.paceScope, view), breakerKey: paceKeyOf('client', view) };
  }

  /** One refresh per connection at a time in this container (the lease makes it one across containers). */
  private refresh(connection: string, clientId: string, deadline: number | undefined, seen: SeenToken): Promise<ConnectionGate> {
    const pending = this.refreshes.get(connection);
    if (pending) return pending;
    const failed = this.failedUntil.get(connection);
    if (failed !== undefined && this.now() < failed.until) {
      return Promise.resolve({
        kind: 'wait',
        reason: `connection "${connection}": refreshing its access token failed (${failed.reason}); the next try is after the wait`,
        seconds: Math.max(1, Math.ceil((failed.until - this.now()) / 1000)),
      });
    }
    if (deadline !== undefined && deadline - this.now() < this.settings.providerTimeoutMs + REFRESH_WRITE_MARGIN_MS) {
      return Promise.resolve({
        kind: 'wait',
        reason: `connection "${connection}": its access token needs a refresh, and this invocation has too little time left for one`,
        seconds: NO_TIME_WAIT_SECONDS,
      });
    }
    const operation = this.refreshNow(connection, clientId, deadline, seen).finally(() => this.refreshes.delete(connection));
    this.refreshes.set(connection, operation);
    return operation;
  }

  private async refreshNow(connection: string, clientId: string, deadline: number | undefined, seen: SeenToken): Promise<ConnectionGate> {
    // A slot of the token pace within PACE_WAIT_MS, and early enough for the call and the writes.
    const latestStart = deadline === undefined ? Infinity : deadline - this.settings.providerTimeoutMs - REFRESH_WRITE_MARGIN_MS;
    const startBy = Math.min(this.now() + PACE_WAIT_MS, latestStart);
    let result: RefreshResult;
    try {
      result = await refreshConnection(this.ports, connection, { clientId, seen, startBy, ...(deadline !== undefined ? { deadline } : {}) });
    } catch (error) {
      this.entries.delete(connection);
      throw error;
    }
    this.ports.onRefresh?.(result);
    const log = this.ports.log;
    const previous = this.entries.get(connection)?.view;
    switch (result.kind) {
      case 'refreshed':
      case 'current': {
        this.failedUntil.delete(connection);
        if (result.kind === 'refreshed') log.info('access token refreshed on demand', { connection, rotated: result.rotated, status: result.status });
        const view: View = {
          connection,
          clientId: result.clientId,
          status: result.status,
          accessToken: result.token,
          accessTokenStamp: result.stamp,
          refreshedAt: Date.parse(result.refreshedAt),
          ...(previous?.lastUsedAt !== undefined ? { lastUsedAt: previous.lastUsedAt } : {}),
          ...(previous?.failureReason !== undefined ? { failureReason: previous.failureReason } : {}),
        };
        this.entries.set(connection, { view, readAt: this.now(), consistent: true });
        return this.gateOf(connection, view, this.now());
      }
      case 'refused': {
        const view: View = { connection, clientId: previous?.clientId ?? '', status: 'failing', failureReason: result.reason };
        this.entries.set(connection, { view, readAt: this.now(), consistent: true });
        return { kind: 'wait', reason: failingReason(connection, result.reason), seconds: this.settings.connectionWaitSeconds };
      }
      case 'failed':
        log.warn('refreshing the access token failed', { connection, reason: result.reason });
        this.entries.delete(connection);
        const failures = (this.failedUntil.get(connection)?.failures ?? 0) + 1;
        const seconds = result.transient ? FAILED_WAIT_SECONDS : Math.min(FAILED_WAIT_SECONDS * 2 ** (failures - 1), MAX_FAILED_WAIT_SECONDS);
        this.failedUntil.set(connection, { until: this.now() + seconds * 1000, reason: result.reason, failures });
        return { kind: 'wait', reason: `connection "${connection}": refreshing its access token failed (${result.reason})`, seconds };
      case 'paced': {
        // The token endpoint's pace, not the connection: nothing changed, nothing to read again.
        const seconds = result.until === undefined ? FAILED_WAIT_SECONDS : Math.max(1, Math.ceil((result.until - this.now()) / 1000));
        return { kind: 'wait', reason: `connection "${connection}": its access token needs a refresh, and ${PACED[result.why]}`, seconds };
      }
      case 'busy':
        this.entries.delete(connection);
        return this.busy(connection, this.busySeconds(result.until));
      case 'superseded':
        this.entries.delete(connection);
        return this.busy(connection, BUSY_WAIT_SECONDS);
      case 'missing':
        // The lease's conditional write and its consistent read found no row: dead, not cached.
        this.entries.delete(connection);
        return this.gateOf(connection, undefined, this.now());
      case 'not-refreshable': {
        // Its status changed since it was read: read it again, as it is now.
        const { view } = await this.read(connection, true);
        return view?.status === 'active' ? this.busy(connection, BUSY_WAIT_SECONDS) : this.gateOf(connection, view, this.now());
      }
    }
  }

  private busy(connection: string, seconds: number): ConnectionGate {
    return { kind: 'wait', reason: `connection "${connection}": its access token is being refreshed`, seconds };
  }

  /**
   * How long to wait for another's lease ending at `until`: 5 s while its holder may still be at
   * work (the provider time-out plus the margin since it took the lease, REFRESH_LEASE_MS before
   * `until`); after that until the lease ends, at most 60 s: a holder that died leaves its lease
   * until it runs out.
   */
  private busySeconds(until: number): number {
    const now = this.now();
    const heldFor = now - (until - REFRESH_LEASE_MS);
    if (heldFor < this.settings.providerTimeoutMs + REFRESH_WRITE_MARGIN_MS) return BUSY_WAIT_SECONDS;
    return Math.max(BUSY_WAIT_SECONDS, Math.min(MAX_BUSY_WAIT_SECONDS, Math.ceil((until - now) / 1000)));
  }

  private refreshAgeMs(): number {
    return this.settings.tokenRefreshMinutes * 60_000 + ON_DEMAND_GRACE_MS;
  }

/** lastUsedAt, at most once per half refresh interval per connection, over an older one only; failures only logged. */
  private async markUsed(view: View, now: number): Promise<void> {
    const every = (this.settings.tokenRefreshMinutes * 60_000) / 2;
    const last = Math.max(view.lastUsedAt ?? -Infinity, this.marks.get(view.connection) ?? -Infinity);
    if (now - last < every) return;
    this.marks.set(view.connection, now);
    try {
      await this.ports.store.markUsed(view.connection, new Date(now).toISOString());
    } catch (error) {
      this.ports.log.debug('recording the connection as used failed', { connection: view.connection, error: (error as Error).name });
    }
  }

  private fresh(connection: string): Entry | undefined {
    const entry = this.entries.get(connection);
    if (entry && this.now() - entry.readAt < this.settings.tokenCacheSeconds * 1000) return entry;
    return undefined;
  }

  /** The row, read now (concurrent reads of one connection share one request); cached unless unknown or removed. */
  private read(connection: string, consistent: boolean): Promise<Entry> {
    const key = `${consistent ? 'c' : 'e'}${connection}`;
    const pending = this.reads.get(key);
    if (pending) return pending;
    const operation = (async (): Promise<Entry> => {
      const record = await this.ports.store.get(connection, { consistent });
      const entry: Entry = { view: record ? viewOf(record) : undefined, readAt: this.now(), consistent };
      if (entry.view === undefined || entry.view.status === 'removed') this.entries.delete(connection);
      else this.entries.set(connection, entry);
      return entry;
    })().finally(() => this.reads.delete(key));
    this.reads.set(key, operation);
    return operation;
  }

  private now(): number {
    return this.ports.clock.now().getTime();
  }
}

function viewOf(record: ConnectionRecord): View {
  const time = (iso: string | undefined): number | undefined => {
    const ms = iso === undefined ? NaN : Date.parse(iso);
    return Number.isNaN(ms) ? undefined : ms;
  };
  const view: View = { connection: record.connection, clientId: record.clientId, status: record.status };
  if (record.accessToken !== undefined) view.accessToken = record.accessToken;
  if (record.accessTokenStamp !== undefined) view.accessTokenStamp = record.accessTokenStamp;
  const refreshedAt = time(record.refreshedAt);
  if (refreshedAt !== undefined) view.refreshedAt = refreshedAt;
  const lastUsedAt = time(record.lastUsedAt);
  if (lastUsedAt !== undefined) view.lastUsedAt = lastUsedAt;
  if (record.health.lastFailureReason !== undefined) view.failureReason = record.health.lastFailureReason;
  return view;
}

const KEY_OUTAGE = 'the key that seals the tokens (CONNECTIONS_KEY_ARN) is disabled or pending deletion';

/** The key that seals the tokens out (a read cannot open them): the items wait, as for an outage of the token endpoint. */
async function keyOutageWaits(connection: string, gate: () => Promise<ConnectionGate>): Promise<ConnectionGate> {
  try {
    return await gate();
  } catch (error) {
    if (error instanceof KeyUnavailableError) return { kind: 'wait', reason: `connection "${connection}": ${KEY_OUTAGE}`, seconds: FAILED_WAIT_SECONDS };
    throw error;
  }
}

/** Why an on-demand refresh waits for the token pace. */
const PACED: Record<Extract<RefreshResult, { kind: 'paced' }>['why'], string> = {
  pace: "the token endpoint's pace has no slot for it yet",
  'retry-after': "the token endpoint's pace waits out a 429's Retry-After",
  'rate-limited': 'the token endpoint answered 429',
  outage: "the token endpoint is down (its pace's breaker is open)",
  'key-outage': KEY_OUTAGE,
};

function failingReason(connection: string, reason: string | undefined): string {
  if (reason === TOKEN_UNREADABLE) return `connection "${connection}" is failing: its sealed refresh token does not open (${TOKEN_UNREADABLE}); put its credentials again`;
  return `connection "${connection}" is failing: the provider refused its refresh token (${reason ?? 'no reason recorded'}); add it again with new credentials`;
}
