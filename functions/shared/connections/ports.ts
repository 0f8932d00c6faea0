/**
 * Ports of the connections (docs/connections.md): the connections table as the refresher, the item
 * sync and the operator CLI use it (ConnectionStore; the DynamoDB adapter is
 * functions/shared/adapters/dynamodb-connection-store.ts), what the item sync asks of a
 * connection before it fetches one of its items (ConnectionAccess; access.ts), and the token
 * endpoint's pace every getToken takes a slot of (TokenSlots; token-pace.ts).
 */
import type { RequestResult } from '../provider/pace/provider-pace.js';
import type { ConnectionListing, ConnectionRecord, ConnectionStatus, EraseProgress } from './connection.js';

/** One page of connections: `after` is where the next starts (absent: the last page). */
export interface ConnectionPage {
  connections: ConnectionListing[];
  after?: string;
}

export interface ConnectionStore {
  /** The connection's row, its tokens opened; undefined when there is none. Throws TransientError when DynamoDB keeps failing. */
  get(connection: string, options?: { consistent?: boolean }): Promise<ConnectionRecord | undefined>;
  /** The connection's row without its tokens (none opened); undefined when there is none. */
  view(connection: string, options?: { consistent?: boolean }): Promise<ConnectionListing | undefined>;
  /** Every connection (a Scan), page by page, no token opened; a row that is not a connection (no credentials ever added) is left out. */
  list(): AsyncIterable<ConnectionListing>;
  /** Up to `limit` connections (of `status`, when given) after the connection `after`, no token opened. */
  page(options: { status?: ConnectionStatus; limit: number; after?: string }): Promise<ConnectionPage>;
  /**
   * Marks a removed connection's erase as asked for (`waiting`), once: `requested` when an erase
   * already is, `conflict` when the connection is not removed, `missing` when there is no row.
   */
  requestErase(connection: string, erase: { startedAt: string; notBefore: string }): Promise<'written' | 'requested' | 'missing' | 'conflict'>;
  /** Writes an erase's progress while that erase (its startedAt) is the row's and the connection removed: false otherwise. */
  updateErase(connection: string, progress: EraseProgress): Promise<boolean>;
  /**
   * Creates the connection as `active`, or replaces the credentials of an existing one (status back
   * to `active`, health reset, access token, any lease and any erase asked for cleared,
   * credentialsVersion raised, credentialsAt set). `erasing` (nothing written) while its erase runs.
   */
  putCredentials(input: { connection: string; clientId: string; refreshToken: string; at: string }): Promise<'created' | 'replaced' | 'erasing'>;
  /**
   * Sets the status if the row exists and its status is one of `from`; `missing` / `conflict`
   * otherwise. `removed` also deletes the tokens and raises credentialsVersion (a refresh still
   * running cannot write them back).
   */
  setStatus(connection: string, to: ConnectionStatus, from: readonly ConnectionStatus[], at: string): Promise<'written' | 'missing' | 'conflict'>;
  /**
   * Deletes the row (after `remove --purge` has deleted the connection's rows and objects), only
   * while its status is `removed`: `conflict` when it is not (added again meanwhile: the row and its
   * new credentials are kept), `missing` when there is no row.
   */
  delete(connection: string, erase?: { startedAt: string }): Promise<'deleted' | 'conflict' | 'missing'>;
  /**
   * Takes the refresh lease: written only if the status is `active` (or `failing` when
   * `includeFailing`) and no unexpired lease is held. Returns the row with the lease taken, tokens
   * included; `held` when another holds the lease; `missing` / `not-refreshable` (with the status)
   * otherwise.
   */
  takeRefreshLease(
    connection: string,
    lease: { owner: string; until: number; now: number; includeFailing?: boolean },
  ): Promise<{ kind: 'taken'; record: ConnectionRecord } | { kind: 'held'; until: number } | { kind: 'missing' } | { kind: 'not-refreshable'; status: ConnectionStatus }>;
  /**
   * A successful refresh: the new access token (and the rotated refresh token, raising
   * credentialsVersion), consecutive failures reset, lastSuccessAt set, status `active` (a
   * connection paused meanwhile stays paused); written only while the stored credentialsVersion is
   * still `credentialsVersion`, and `conflict` only when it is not (a status or a lease that changed
   * meanwhile is read again and the write tried again). The lease is released only if `owner` still
   * holds it: a refresh that outlived its lease writes its tokens and leaves the new holder's lease.
   * `written` says the status the row was left with, and the stamp of the access token as stored.
   */
  completeRefresh(input: {
    connection: string;
    owner: string;
    credentialsVersion: number;
    accessToken: string;
    refreshedAt: string;
    rotatedRefreshToken?: string;
  }): Promise<{ kind: 'written'; status: ConnectionStatus; accessTokenStamp: string } | { kind: 'conflict' }>;
  /**
   * A failed refresh: health updated; `refused` also sets the status `failing` (unless the
   * connection was paused meanwhile); the lease released if `owner` still holds it.
   * Written only while the stored credentialsVersion is still `credentialsVersion` (credentials the
   * operator replaced meanwhile are not marked failing for the old ones' refusal).
   */
  failRefresh(input: { connection: string; owner: string; credentialsVersion: number; at: string; reason: string; refused: boolean }): Promise<'written' | 'conflict'>;
  /** Releases the refresh lease if `owner` still holds it (a refresh that found it had nothing to do). */
  releaseRefreshLease(connection: string, owner: string): Promise<void>;
  /**
   * Seals the connection's tokens still stored in clear (rows written before tokens were sealed),
   * each only while it is still the one read: how many it sealed.
   */
  sealClearTokens(connection: string): Promise<number>;
  /** Records that the item sync used the connection: `lastUsedAt`, written only over an older one (best effort). */
  markUsed(connection: string, at: string): Promise<void>;
}

/** What the item sync may do with a connection's items now. */
export type ConnectionGate =
  /**
   * Fetch: with this access token; `paceKey` names the provider pace the requests draw from,
   * `breakerKey` the pace whose breaker (the provider's outage) guards them: the client id's in
   * every scope (absent: the pace's own).
   */
  | { kind: 'ready'; connection: string; token: string; paceKey: string; breakerKey?: string }
  /** Dead-letter every message: the reason says why (unknown connection, removed). */
  | { kind: 'dead'; reason: string }
  /** The messages wait (paused, failing, a refresh in progress or failed for now) this long. */
  | { kind: 'wait'; reason: string; seconds: number };

/**
 * Both methods throw a TransientError when the connections table cannot be read or written for now
 * (the records are retried), and a ConfigError when it cannot be used as configured (no such table,
 * access denied). A connection's refresh failing is no error: it is a `wait` gate.
 */
export interface ConnectionAccess {
  /**
   * Whether and how the connection's items can be fetched now: read from the connections table (at
   * most once per token-cache period per container), the access token refreshed first when there is
   * none or it is too old (one refresh at a time per connection, across every container: the
   * lease). With a `deadline` (epoch ms: the invocation's), no refresh starts that could not end
   * before it (the provider time-out plus the writes): the items wait a few seconds instead.
   */
  open(connection: string, options?: AccessOptions): Promise<ConnectionGate>;
  /**
   * The provider refused `rejected` (401): a different token (read afresh; else refreshed now, once
   * for every caller that met the same token), or why the items must wait. `deadline` as for open.
   */
  afterRefusal(connection: string, rejected: string, options?: AccessOptions): Promise<ConnectionGate>;
  /**
   * Whether the provider refused `token` for `connection` in this container (afterRefusal was asked
   * about it): a caller then sends it no more, and asks afterRefusal instead (no I/O here).
   */
  knownRefused(connection: string, token: string): boolean;
}

export interface AccessOptions {
  /** Epoch ms: the caller's invocation ends its work then; a refresh must be able to end before it. */
  deadline?: number;
}

/** A slot of a client id's token pace (token-pace.ts), or why there is none now. */
export type TokenSlot =
  /** Call getToken now, then tell `report` how it ended (tokenCallResult). */
  | { kind: 'go'; report(result: RequestResult): Promise<void> }
  /** No slot before `until` (epoch ms), later than the caller can wait: the pace, or a 429's Retry-After. */
  | { kind: 'wait'; until: number; why: 'pace' | 'retry-after' }
  /** The token endpoint fails every call (the pace's breaker is open, since `since`): no getToken now. */
  | { kind: 'outage'; since: number };

/** The token endpoint's paces, one per client id: every getToken asks for a slot first. */
export interface TokenSlots {
  /**
   * A slot of `clientId`'s token pace: one that comes by `startBy` (epoch ms; none: whenever it
   * comes) is waited for; a later one is `wait`. Never throws.
   */
  slot(clientId: string, startBy: number | undefined): Promise<TokenSlot>;
}
