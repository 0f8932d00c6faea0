/**
 * ConnectionAccess, the core (no AWS import; access.ts wires it over the connections table): what
 * the item sync may do with a connection's items now, from a per-container cache of the
 * connections' rows.
 *
 * - A row is read at most once per `tokenCacheSeconds` per container (concurrent callers share the
 *   read); the cache holds at most `cacheSize` connections (the least recently used dropped). It
 *   never holds a refresh token.
 * - open: unknown or removed → dead; paused or failing → wait `connectionWaitSeconds`; active with
 *   no access token or one older than `tokenRefreshMinutes` → refreshed now (refresh.ts: one
 *   getToken at a time per connection across every container; concurrent callers in this container
 *   share one refresh); else ready, with the pace key of `paceScope`.
 * - afterRefusal: callers that met the same rejected token share one operation: a token the cache
 *   already holds instead; else the row read afresh (consistent): another token → that one; the
 *   same token → a refresh (unless that token was issued less than a minute ago: the provider
 *   refuses a fresh token, and refreshing again would not help; the items wait a minute).
 * - Refresh outcomes: busy (another holds the lease) → wait 5 s; refused → wait
 *   `connectionWaitSeconds`; failed → wait 30 s.
 * - lastUsedAt is written (best effort) at most once per half refresh interval per connection per
 *   container, and only over a row's lastUsedAt older than that: the refresher keeps connections in
 *   use refreshed.
 */
import type { PaceScope } from '../config.js';
import type { Log } from '../ports.js';
import { connectionIdProblem, paceKeyOf, type ConnectionRecord, type ConnectionStatus } from './connection.js';
import type { ConnectionAccess, ConnectionGate } from './ports.js';
import { refreshConnection, type RefreshPorts, type RefreshResult } from './refresh.js';

/** How long the items wait while another container refreshes the token. */
export const BUSY_WAIT_SECONDS = 5;
/** How long the items wait after a refresh failed in a way that may pass. */
export const FAILED_WAIT_SECONDS = 30;
/** A rejected token issued less than this long ago is not refreshed again; the items wait this long. */
export const FRESH_REFUSAL_SECONDS = 60;
export const DEFAULT_CACHE_SIZE = 5_000;

export interface AccessSettings {
  paceScope: PaceScope;
  tokenCacheSeconds: number;
  tokenRefreshMinutes: number;
  connectionWaitSeconds: number;
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
  /** Epoch ms. */
  refreshedAt?: number;
  lastUsedAt?: number;
  failureReason?: string;
}

interface Entry {
  /** Undefined: no such connection. */
  view: View | undefined;
  readAt: number;
}

/** A Map that keeps at most `limit` keys, dropping the least recently set. */
class Bounded<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly limit: number) {}
  get(key: string): V | undefined {
    return this.map.get(key);
  }
  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.limit) this.map.delete(this.map.keys().next().value as string);
  }
  delete(key: string): void {
    this.map.delete(key);
  }
  get size(): number {
    return this.map.size;
  }
}

export class CachedConnectionAccess implements ConnectionAccess {
  private readonly entries: Bounded<Entry>;
  /** When this container last wrote lastUsedAt, per connection (epoch ms). */
  private readonly marks: Bounded<number>;
  private readonly reads = new Map<string, Promise<Entry>>();
  private readonly refreshes = new Map<string, Promise<ConnectionGate>>();
  private readonly refusals = new Map<string, Promise<ConnectionGate>>();

  constructor(
    private readonly ports: AccessPorts,
    private readonly settings: AccessSettings,
  ) {
    this.entries = new Bounded(settings.cacheSize ?? DEFAULT_CACHE_SIZE);
    this.marks = new Bounded(settings.cacheSize ?? DEFAULT_CACHE_SIZE);
  }

  /** Connections the cache holds now (for tests and diagnostics). */
  get cached(): number {
    return this.entries.size;
  }

  async open(connection: string): Promise<ConnectionGate> {
    const problem = connectionIdProblem(connection);
    if (problem !== undefined) return { kind: 'dead', reason: problem };
    const entry = this.fresh(connection) ?? (await this.read(connection, false));
    return this.decide(connection, entry.view);
  }

  afterRefusal(connection: string, rejected: string): Promise<ConnectionGate> {
    const key = `${connection}\u0000${rejected}`;
    const pending = this.refusals.get(key);
    if (pending) return pending;
    const operation = this.refuse(connection, rejected).finally(() => this.refusals.delete(key));
    this.refusals.set(key, operation);
    return operation;
  }

  private async refuse(connection: string, rejected: string): Promise<ConnectionGate> {
    const problem = connectionIdProblem(connection);
    if (problem !== undefined) return { kind: 'dead', reason: problem };
    const cached = this.fresh(connection)?.view;
    if (cached?.status === 'active' && cached.accessToken !== undefined && cached.accessToken !== rejected) return this.decide(connection, cached);
    const { view } = await this.read(connection, true);
    if (view?.status !== 'active' || view.accessToken !== rejected) return this.decide(connection, view);
    if (view.refreshedAt !== undefined && this.now() - view.refreshedAt < FRESH_REFUSAL_SECONDS * 1000) {
      return { kind: 'wait', reason: `connection "${connection}": the provider refused an access token issued less than a minute ago`, seconds: FRESH_REFUSAL_SECONDS };
    }
    return this.refresh(connection);
  }

  private async decide(connection: string, view: View | undefined): Promise<ConnectionGate> {
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
    const now = this.now();
    if (view.accessToken === undefined || view.refreshedAt === undefined || now - view.refreshedAt >= this.settings.tokenRefreshMinutes * 60_000) {
      return this.refresh(connection);
    }
    await this.markUsed(view, now);
    return { kind: 'ready', connection, token: view.accessToken, paceKey: paceKeyOf(this.settings.paceScope, view) };
  }

  /** One refresh per connection at a time in this container (the lease makes it one across containers). */
  private refresh(connection: string): Promise<ConnectionGate> {
    const pending = this.refreshes.get(connection);
    if (pending) return pending;
    const operation = this.refreshNow(connection).finally(() => this.refreshes.delete(connection));
    this.refreshes.set(connection, operation);
    return operation;
  }

  private async refreshNow(connection: string): Promise<ConnectionGate> {
    let result: RefreshResult;
    try {
      result = await refreshConnection(this.ports, connection);
    } catch (error) {
      this.entries.delete(connection);
      throw error;
    }
    this.ports.onRefresh?.(result);
    const log = this.ports.log;
    const previous = this.entries.get(connection)?.view;
    switch (result.kind) {
      case 'refreshed': {
        log.info('access token refreshed on demand', { connection, rotated: result.rotated });
        const view: View = {
          connection,
          clientId: result.clientId,
          status: 'active',
          accessToken: result.token,
          refreshedAt: Date.parse(result.refreshedAt),
          ...(previous?.lastUsedAt !== undefined ? { lastUsedAt: previous.lastUsedAt } : {}),
        };
        this.entries.set(connection, { view, readAt: this.now() });
        return this.decide(connection, view);
      }
      case 'refused': {
        if (result.previousStatus !== 'failing') log.warn('connection is now failing: the provider refused its refresh token', { connection, reason: result.reason });
        const view: View = { connection, clientId: previous?.clientId ?? '', status: 'failing', failureReason: result.reason };
        this.entries.set(connection, { view, readAt: this.now() });
        return { kind: 'wait', reason: failingReason(connection, result.reason), seconds: this.settings.connectionWaitSeconds };
      }
      case 'failed':
        log.warn('refreshing the access token failed', { connection, reason: result.reason });
        this.entries.delete(connection);
        return { kind: 'wait', reason: `connection "${connection}": refreshing its access token failed (${result.reason})`, seconds: FAILED_WAIT_SECONDS };
      case 'busy':
      case 'superseded':
        this.entries.delete(connection);
        return { kind: 'wait', reason: `connection "${connection}": its access token is being refreshed`, seconds: BUSY_WAIT_SECONDS };
      case 'missing':
        this.entries.set(connection, { view: undefined, readAt: this.now() });
        return this.decide(connection, undefined);
      case 'not-refreshable': {
        // Its status changed since it was read: read it again, as it is now.
        const { view } = await this.read(connection, true);
        return view?.status === 'active' ? { kind: 'wait', reason: `connection "${connection}": its access token is being refreshed`, seconds: BUSY_WAIT_SECONDS } : this.decide(connection, view);
      }
    }
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

  /** The row, read now (concurrent eventually consistent reads of one connection share one request). */
  private read(connection: string, consistent: boolean): Promise<Entry> {
    const key = `${consistent ? 'c' : 'e'}${connection}`;
    const pending = this.reads.get(key);
    if (pending) return pending;
    const operation = (async (): Promise<Entry> => {
      const record = await this.ports.store.get(connection, { consistent });
      const entry: Entry = { view: record ? viewOf(record) : undefined, readAt: this.now() };
      this.entries.set(connection, entry);
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
  const refreshedAt = time(record.refreshedAt);
  if (refreshedAt !== undefined) view.refreshedAt = refreshedAt;
  const lastUsedAt = time(record.lastUsedAt);
  if (lastUsedAt !== undefined) view.lastUsedAt = lastUsedAt;
  if (record.health.lastFailureReason !== undefined) view.failureReason = record.health.lastFailureReason;
  return view;
}

function failingReason(connection: string, reason: string | undefined): string {
  return `connection "${connection}" is failing: the provider refused its refresh token (${reason ?? 'no reason recorded'}); add it again with new credentials`;
}
