/**
 * One connection's token refresh, the core the token refresher and the item sync share (no AWS
 * import): take a slot of the token endpoint's pace, take the connection's refresh lease, trade its
 * refresh token for an access token (getToken), and write the result over the credentials the
 * refresh used.
 *
 * - The token pace (token-pace.ts: one per client id, shared by every container) is asked first,
 *   with the client id the caller read: a slot that comes by the caller's `startBy` is waited for;
 *   a later one, or the pace's open breaker, ends the refresh before anything is written (`paced`:
 *   the connection is as it was, still due). The pace is told how the getToken ended: a 429 with
 *   its Retry-After (every caller stops until then; the lease is released and the refresh is
 *   `paced` too: a 429 is no failure of the connection), a transient failure, or an answer.
 * - The lease (5 minutes, far longer than a getToken call may take; its owner a random id per call)
 *   makes one getToken per connection at a time across every container: whoever does not get it
 *   returns `busy` with the lease's end and calls nothing.
 * - Still needed? With the lease taken, a row that already holds a newer access token than the
 *   caller saw (`seen`: another refresh ended between the caller's read and its lease) is used as
 *   it is: the lease is released and no getToken is made (`current`).
 * - Success: the access token, and the refresh token when the provider returned a different one
 *   (rotation), in one write conditional on the credentialsVersion used; health reset. A write that
 *   fails is tried again, with backoff (200 ms doubling, at most 2 s apart), until the caller's
 *   `deadline`, and at least RESULT_WRITE_MIN_ATTEMPTS times: a rotated refresh token exists nowhere
 *   else.
 * - Refused (isRefusal: 401, 400 or 403 from getToken): the connection becomes `failing` with the
 *   reason. Anything else (5xx, time-out, a malformed or oversized answer, a redirect, another 4xx
 *   such as 405, 410 or 422): `failed`, the connection stays as it is and its health counts the
 *   failure: those say nothing about the refresh token.
 * - Every status this core changes is logged, one line (`connection status changed`: the
 *   connection, from, to, why): active → failing (refused), failing → active (a refresh that
 *   succeeded).
 * - A refresh token whose sealed value can never be opened (sealing.ts): the connection becomes
 *   `failing`, reason `token-unreadable`, with no getToken. The key that seals the tokens disabled
 *   or pending deletion: `paced` (`key-outage`), nothing written, the lease released: an outage of
 *   the key, never a failure of the connection.
 * - Credentials the operator replaced (or removed) while the refresh ran win: the result is not
 *   written (`superseded`).
 * No result, log line or error ever holds a token but the access token of `refreshed` and `current`.
 */
import { randomUUID } from 'node:crypto';
import { ProviderError, redact } from '../errors.js';
import type { Clock, Log, ProviderClient, RequestOptions } from '../ports.js';
import { MAX_RETRY_AFTER_MS, MIN_RETRY_AFTER_MS } from '../provider/pace/pace-state.js';
import type { ConnectionRecord, ConnectionStatus } from './connection.js';
import type { ConnectionStore, TokenSlot, TokenSlots } from './ports.js';
import { KeyUnavailableError, TOKEN_UNREADABLE } from './sealing.js';
import { tokenCallResult } from './token-pace.js';

/** How long a refresh lease is held: far longer than one getToken call (PROVIDER_TIMEOUT_MS is at most 120 s). */
export const REFRESH_LEASE_MS = 5 * 60_000;
/** Attempts at writing a successful refresh's result at least, whatever the deadline (a rotated refresh token must not be lost to one failed write). */
export const RESULT_WRITE_MIN_ATTEMPTS = 3;
/** The wait before the second attempt at writing the result; it doubles, up to RESULT_WRITE_MAX_DELAY_MS. */
export const RESULT_WRITE_BASE_DELAY_MS = 200;
export const RESULT_WRITE_MAX_DELAY_MS = 2_000;
/** Longest failure reason kept. */
const MAX_REASON_LENGTH = 500;

export interface RefreshPorts {
  store: ConnectionStore;
  provider: ProviderClient;
  clock: Clock;
  log: Log;
  /** The token endpoint's pace: every getToken takes a slot of its client id's first and tells it how it ended. */
  tokens: TokenSlots;
  /** The lease owner's id; default a random UUID per call. */
  newOwner?: () => string;
  /** Waits between attempts at writing the result; default real time. */
  sleep?: (ms: number) => Promise<void>;
}

/** The log line of every status change this core makes (one per change, never a token). */
export const STATUS_CHANGE_MESSAGE = 'connection status changed';

/** What the caller saw of the connection's access token when it decided to refresh it. */
export interface SeenToken {
  /** The stamp (ConnectionRecord.accessTokenStamp) of the access token it had, or that the provider refused; none: it saw no token. */
  stamp?: string;
  /** When that token was issued (ISO-8601 or epoch ms); none: unknown, or no token. */
  refreshedAt?: string | number;
}

export interface RefreshOptions {
  /** The connection's client id as the caller read it: a slot of its token pace is taken before the lease. */
  clientId: string;
  /**
   * Epoch ms: the latest a getToken may start. A slot of the token pace that comes later is not
   * waited for (`paced`, with when it would come). None: waited for, however long.
   */
  startBy?: number;
  /** Also refresh a `failing` connection (the refresher's hourly retry). */
  includeFailing?: boolean;
  /** Lease length; default REFRESH_LEASE_MS. */
  leaseMs?: number;
  /** Aborts the getToken call. */
  signal?: AbortSignal;
  /** Epoch ms: the result's write is tried again until then (and at least RESULT_WRITE_MIN_ATTEMPTS times). */
  deadline?: number;
  /** What the caller saw: a newer access token in the row is used without a getToken. None: always refresh. */
  seen?: SeenToken;
}

export type RefreshResult =
  /**
   * A new access token, stored. `rotated`: the provider returned a new refresh token, stored too.
   * `status`: the connection's status after the write (one paused meanwhile stays paused).
   */
  | { kind: 'refreshed'; connection: string; clientId: string; token: string; stamp: string; refreshedAt: string; rotated: boolean; previousStatus: ConnectionStatus; status: ConnectionStatus }
  /** The row already held a newer access token than the caller saw: that one, no getToken made. */
  | { kind: 'current'; connection: string; clientId: string; token: string; stamp: string; refreshedAt: string; status: ConnectionStatus }
  /** Another refresh holds the lease until `until` (epoch ms): its token will be in the table. */
  | { kind: 'busy'; connection: string; until: number }
  /** The provider refused the refresh token: the connection is `failing` (`previousStatus` says whether it was before). */
  | { kind: 'refused'; connection: string; reason: string; previousStatus: ConnectionStatus }
  /**
   * The refresh failed in a way that may pass; the connection's status is unchanged. `transient`:
   * the call itself failed (5xx, 408, time-out, network: the token pace's breaker counts those),
   * rather than answering something unusable or the result not being stored.
   */
  | { kind: 'failed'; connection: string; reason: string; transient: boolean }
  /** Its status allows no refresh (paused, removed; failing without includeFailing). */
  | { kind: 'not-refreshable'; connection: string; status: ConnectionStatus }
  /** No such connection. */
  | { kind: 'missing'; connection: string }
  /** The credentials were replaced or removed while the refresh ran: its result was not written. */
  | { kind: 'superseded'; connection: string }
  /**
   * No access token now, and nothing written: the token pace had no slot by `startBy` (`pace`, or
   * `retry-after`: it holds every caller until a 429's Retry-After), this getToken was answered
   * 429 (`rate-limited`: the pace now holds every caller until its Retry-After), or the token
   * endpoint is down (`outage`: the pace's breaker is open), or the key that seals the tokens is
   * disabled or pending deletion (`key-outage`: its tokens cannot be opened; the lease is not kept).
   * `until`: when the pace gives the next slot (none for an outage). The connection is as it was:
   * still due.
   */
  | { kind: 'paced'; connection: string; why: 'pace' | 'retry-after' | 'rate-limited' | 'outage' | 'key-outage'; until?: number };

/** Throws what the store throws when the lease cannot be taken (a TransientError when DynamoDB keeps failing). */
export async function refreshConnection(ports: RefreshPorts, connection: string, options: RefreshOptions): Promise<RefreshResult> {
  // The slot first: a refresh that has to wait for the pace holds no lease meanwhile.
  let slot = await ports.tokens.slot(options.clientId, options.startBy);
  if (slot.kind !== 'go') return pacedBy(connection, slot);
  const owner = (ports.newOwner ?? randomUUID)();
  const now = ports.clock.now().getTime();
  let lease: Awaited<ReturnType<ConnectionStore['takeRefreshLease']>>;
  try {
    lease = await ports.store.takeRefreshLease(connection, {
      owner,
      until: now + (options.leaseMs ?? REFRESH_LEASE_MS),
      now,
      ...(options.includeFailing ? { includeFailing: true } : {}),
    });
  } catch (error) {
    // The key that seals the tokens is out: every refresh waits for it, none is the connection's failure.
    if (error instanceof KeyUnavailableError) return { kind: 'paced', connection, why: 'key-outage' };
    throw error;
  }
  if (lease.kind === 'missing') return { kind: 'missing', connection };
  if (lease.kind === 'held') return { kind: 'busy', connection, until: lease.until };
  if (lease.kind === 'not-refreshable') return { kind: 'not-refreshable', connection, status: lease.status };

  const { record } = lease;
  const secrets = [record.refreshToken, record.accessToken];
  const release = async (): Promise<void> => {
    try {
      await ports.store.releaseRefreshLease(connection, owner);
    } catch (error) {
      // The lease runs out by itself.
      ports.log.warn('releasing a refresh lease failed', { connection, error: reasonOf(error, secrets) });
    }
  };
  if (record.refreshTokenUnreadable) return unreadable(ports, connection, owner, record);
  if (options.seen !== undefined && record.accessToken !== undefined && record.refreshedAt !== undefined && newerThanSeen(record.accessTokenStamp, record.refreshedAt, options.seen)) {
    // The token in the row is what the caller needs.
    await release();
    return { kind: 'current', connection, clientId: record.clientId, token: record.accessToken, stamp: record.accessTokenStamp ?? '', refreshedAt: record.refreshedAt, status: record.status };
  }
  if (record.clientId !== options.clientId) {
    // The credentials were replaced with another client id since the caller read them: its pace.
    slot = await ports.tokens.slot(record.clientId, options.startBy);
    if (slot.kind !== 'go') {
      await release();
      return pacedBy(connection, slot);
    }
  }

  const requestOptions: RequestOptions = options.signal ? { signal: options.signal } : {};
  let accessToken: string;
  let returnedRefreshToken: string | undefined;
  try {
    const grant = await ports.provider.getToken({ clientId: record.clientId, refreshToken: record.refreshToken }, requestOptions);
    accessToken = grant.accessToken;
    returnedRefreshToken = grant.refreshToken;
  } catch (error) {
    const told = tokenCallResult(error);
    if (told !== undefined) await slot.report(told);
    if (told?.kind === 'rate-limited') {
      // The token endpoint's limit, not the connection's failure: nothing recorded, still due.
      await release();
      const waitMs = Math.min(MAX_RETRY_AFTER_MS, Math.max(MIN_RETRY_AFTER_MS, told.retryAfterMs ?? MIN_RETRY_AFTER_MS));
      return { kind: 'paced', connection, why: 'rate-limited', until: ports.clock.now().getTime() + waitMs };
    }
    const refused = isRefusal(error);
    const reason = reasonOf(error, secrets);
    const at = ports.clock.now().toISOString();
    let written: 'written' | 'conflict';
    try {
      written = await ports.store.failRefresh({ connection, owner, credentialsVersion: record.credentialsVersion, at, reason, refused });
    } catch (writeError) {
      // The health could not be recorded: the lease runs out by itself; the result stands.
      ports.log.warn('recording a failed token refresh failed', { connection, error: reasonOf(writeError, secrets) });
      written = 'written';
    }
    if (written === 'conflict') return { kind: 'superseded', connection };
    if (!refused) return { kind: 'failed', connection, reason, transient: told?.kind === 'failed' };
    if (record.status === 'active') await logRefusal(ports, connection, reason);
    return { kind: 'refused', connection, reason, previousStatus: record.status };
  }
  await slot.report({ kind: 'ok' });

  const rotatedRefreshToken = returnedRefreshToken !== undefined && returnedRefreshToken !== record.refreshToken ? returnedRefreshToken : undefined;
  const refreshedAt = ports.clock.now().toISOString();
  const input = {
    connection,
    owner,
    credentialsVersion: record.credentialsVersion,
    accessToken,
    refreshedAt,
    ...(rotatedRefreshToken !== undefined ? { rotatedRefreshToken } : {}),
  };
  const sleep = ports.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      let written = await ports.store.completeRefresh(input);
      if (written.kind === 'conflict' && attempt > 1) {
        // An earlier attempt may have been written although its answer was lost.
        const row = await ports.store.get(connection, { consistent: true });
        if (row?.accessToken === accessToken) written = { kind: 'written', status: row.status, accessTokenStamp: row.accessTokenStamp ?? '' };
      }
      if (written.kind === 'conflict') {
        if (rotatedRefreshToken !== undefined) {
          ports.log.warn('the provider rotated the refresh token, but the credentials had been replaced meanwhile: the new one was not stored', { connection });
        }
        return { kind: 'superseded', connection };
      }
      if (record.status !== 'active' && written.status === 'active') {
        ports.log.info(STATUS_CHANGE_MESSAGE, { connection, from: record.status, to: written.status, reason: 'a token refresh succeeded' });
      }
      return {
        kind: 'refreshed',
        connection,
        clientId: record.clientId,
        token: accessToken,
        stamp: written.accessTokenStamp,
        refreshedAt,
        rotated: rotatedRefreshToken !== undefined,
        previousStatus: record.status,
        status: written.status,
      };
    } catch (error) {
      const reason = reasonOf(error, [...secrets, accessToken, rotatedRefreshToken]);
      const delay = Math.min(RESULT_WRITE_BASE_DELAY_MS * 2 ** (attempt - 1), RESULT_WRITE_MAX_DELAY_MS);
      const timeLeft = options.deadline !== undefined && ports.clock.now().getTime() + delay < options.deadline;
      if (attempt >= RESULT_WRITE_MIN_ATTEMPTS && !timeLeft) {
        if (rotatedRefreshToken !== undefined) {
          // The only copy of the new refresh token is lost with this call: an operator must act.
          ports.log.error('the provider rotated the refresh token, but storing the new one failed: the stored one may no longer work; add the connection again with new credentials if it becomes failing', {
            connection,
            attempts: attempt,
            error: reason,
          });
        }
        if (error instanceof KeyUnavailableError) {
          // The token could not be sealed: the key went out between opening and sealing; the lease runs out by itself.
          return { kind: 'paced', connection, why: 'key-outage' };
        }
        return { kind: 'failed', connection, reason: `storing the refreshed token failed: ${reason}`, transient: false };
      }
      ports.log.warn('storing a refreshed token failed; trying again', { connection, attempt, delayMs: delay, error: reason });
      await sleep(delay);
    }
  }
}

/**
 * A refresh token whose sealed value can never be opened: the connection turns `failing` with the
 * reason TOKEN_UNREADABLE (one status change, so one ConnectionFailing event), and is not tried
 * again until its credentials are put again (the refresher skips it: functions/token-refresher/run.ts).
 */
async function unreadable(ports: RefreshPorts, connection: string, owner: string, record: ConnectionRecord): Promise<RefreshResult> {
  ports.log.error('a sealed refresh token does not open: the connection is failing until its credentials are put again', { connection, reason: TOKEN_UNREADABLE });
  const written = await ports.store.failRefresh({
    connection,
    owner,
    credentialsVersion: record.credentialsVersion,
    at: ports.clock.now().toISOString(),
    reason: TOKEN_UNREADABLE,
    refused: true,
  });
  if (written === 'conflict') return { kind: 'superseded', connection };
  if (record.status === 'active') await logRefusal(ports, connection, TOKEN_UNREADABLE);
  return { kind: 'refused', connection, reason: TOKEN_UNREADABLE, previousStatus: record.status };
}

/** What a slot that did not come means for the refresh: it waits. */
function pacedBy(connection: string, slot: Exclude<TokenSlot, { kind: 'go' }>): RefreshResult {
  return slot.kind === 'outage' ? { kind: 'paced', connection, why: 'outage' } : { kind: 'paced', connection, why: slot.why, until: slot.until };
}

/**
 * The status change of an active connection whose refresh token was refused: `failing`, unless the
 * operator paused it meanwhile (the write keeps a paused status). The row is read to know which.
 */
async function logRefusal(ports: RefreshPorts, connection: string, reason: string): Promise<void> {
  let to: ConnectionStatus | undefined = 'failing';
  try {
    to = (await ports.store.get(connection, { consistent: true }))?.status;
  } catch {
    // Not known for certain: the write made it failing unless it was paused meanwhile.
  }
  if (to === 'failing') ports.log.warn(STATUS_CHANGE_MESSAGE, { connection, from: 'active', to, reason });
}

/** Whether the row holds an access token newer than the one the caller saw (another refresh ended meanwhile). */
function newerThanSeen(stamp: string | undefined, refreshedAt: string, seen: SeenToken): boolean {
  if (stamp === seen.stamp) return false;
  if (seen.refreshedAt === undefined) return true;
  const issued = Date.parse(refreshedAt);
  const before = typeof seen.refreshedAt === 'number' ? seen.refreshedAt : Date.parse(seen.refreshedAt);
  return Number.isNaN(before) || (!Number.isNaN(issued) && issued >= before);
}

/**
 * Whether a getToken failure is the provider refusing the refresh token: a 401, or a 400 (e.g.
 * `invalid_grant`) or 403. Other permanent answers (a redirect, an oversized body, 405, 410, 422...)
 * are the provider's or our configuration's matter, not the connection's: they do not make it failing.
 */
export function isRefusal(error: unknown): boolean {
  if (!(error instanceof ProviderError)) return false;
  return error.kind === 'unauthorized' || (error.kind === 'permanent' && (error.status === 400 || error.status === 403));
}

/** A failure's reason for the connection's health and the logs: name and message, tokens redacted, bounded. */
export function reasonOf(error: unknown, secrets: ReadonlyArray<string | undefined>): string {
  const text = error instanceof Error ? (error instanceof ProviderError ? error.message : `${error.name}: ${error.message}`) : String(error);
  return redact(text, secrets).slice(0, MAX_REASON_LENGTH);
}
