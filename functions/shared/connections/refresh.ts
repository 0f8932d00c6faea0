/**
 * One connection's token refresh, the core the token refresher and the item sync share (no AWS
 * import): take the connection's refresh lease, trade its refresh token for an access token
 * (getToken), and write the result over the credentials the refresh used.
 *
 * - The lease (5 minutes, far longer than a getToken call may take; its owner a random id per call)
 *   makes one getToken per connection at a time across every container: whoever does not get it
 *   returns `busy` with the lease's end and calls nothing.
 * - Success: the access token, and the refresh token when the provider returned a different one
 *   (rotation), in one write conditional on the credentialsVersion used; health reset.
 * - Refused (isRefusal: 401, 400 or 403 from getToken): the connection becomes `failing` with the
 *   reason. Anything else (5xx, time-out, 429, a malformed or oversized answer, a redirect, another
 *   4xx such as 405, 410 or 422): `failed`, the connection stays as it is and its health counts the
 *   failure: those say nothing about the refresh token.
 * - Credentials the operator replaced (or removed) while the refresh ran win: the result is not
 *   written (`superseded`).
 * No result, log line or error ever holds a token but the `refreshed` result's access token.
 */
import { randomUUID } from 'node:crypto';
import { ProviderError, redact } from '../errors.js';
import type { Clock, Log, ProviderClient, RequestOptions } from '../ports.js';
import type { ConnectionStatus } from './connection.js';
import type { ConnectionStore } from './ports.js';

/** How long a refresh lease is held: far longer than one getToken call (PROVIDER_TIMEOUT_MS is at most 120 s). */
export const REFRESH_LEASE_MS = 5 * 60_000;
/** Attempts at writing a successful refresh's result (a rotated refresh token must not be lost to one failed write). */
export const RESULT_WRITE_ATTEMPTS = 3;
/** Longest failure reason kept. */
const MAX_REASON_LENGTH = 500;

export interface RefreshPorts {
  store: ConnectionStore;
  provider: ProviderClient;
  clock: Clock;
  log: Log;
  /** The lease owner's id; default a random UUID per call. */
  newOwner?: () => string;
  /** Waits between attempts at writing the result; default real time. */
  sleep?: (ms: number) => Promise<void>;
}

export interface RefreshOptions {
  /** Also refresh a `failing` connection (the refresher's hourly retry). */
  includeFailing?: boolean;
  /** Lease length; default REFRESH_LEASE_MS. */
  leaseMs?: number;
  /** Aborts the getToken call. */
  signal?: AbortSignal;
}

export type RefreshResult =
  /** A new access token, stored. `rotated`: the provider returned a new refresh token, stored too. */
  | { kind: 'refreshed'; connection: string; clientId: string; token: string; refreshedAt: string; rotated: boolean; previousStatus: ConnectionStatus }
  /** Another refresh holds the lease until `until` (epoch ms): its token will be in the table. */
  | { kind: 'busy'; connection: string; until: number }
  /** The provider refused the refresh token: the connection is `failing` (`previousStatus` says whether it was before). */
  | { kind: 'refused'; connection: string; reason: string; previousStatus: ConnectionStatus }
  /** The refresh failed in a way that may pass; the connection's status is unchanged. */
  | { kind: 'failed'; connection: string; reason: string }
  /** Its status allows no refresh (paused, removed; failing without includeFailing). */
  | { kind: 'not-refreshable'; connection: string; status: ConnectionStatus }
  /** No such connection. */
  | { kind: 'missing'; connection: string }
  /** The credentials were replaced or removed while the refresh ran: its result was not written. */
  | { kind: 'superseded'; connection: string };

/** Throws what the store throws when the lease cannot be taken (a TransientError when DynamoDB keeps failing). */
export async function refreshConnection(ports: RefreshPorts, connection: string, options: RefreshOptions = {}): Promise<RefreshResult> {
  const owner = (ports.newOwner ?? randomUUID)();
  const now = ports.clock.now().getTime();
  const lease = await ports.store.takeRefreshLease(connection, {
    owner,
    until: now + (options.leaseMs ?? REFRESH_LEASE_MS),
    now,
    ...(options.includeFailing ? { includeFailing: true } : {}),
  });
  if (lease.kind === 'missing') return { kind: 'missing', connection };
  if (lease.kind === 'held') return { kind: 'busy', connection, until: lease.until };
  if (lease.kind === 'not-refreshable') return { kind: 'not-refreshable', connection, status: lease.status };

  const { record } = lease;
  const secrets = [record.refreshToken, record.accessToken];
  const requestOptions: RequestOptions = options.signal ? { signal: options.signal } : {};
  let accessToken: string;
  let returnedRefreshToken: string | undefined;
  try {
    const grant = await ports.provider.getToken({ clientId: record.clientId, refreshToken: record.refreshToken }, requestOptions);
    accessToken = grant.accessToken;
    returnedRefreshToken = grant.refreshToken;
  } catch (error) {
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
    return refused ? { kind: 'refused', connection, reason, previousStatus: record.status } : { kind: 'failed', connection, reason };
  }

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
      // An earlier attempt may have been written although its answer was lost.
      if (written === 'conflict' && attempt > 1 && (await ports.store.get(connection, { consistent: true }))?.accessToken === accessToken) written = 'written';
      if (written === 'conflict') {
        if (rotatedRefreshToken !== undefined) {
          ports.log.warn('the provider rotated the refresh token, but the credentials had been replaced meanwhile: the new one was not stored', { connection });
        }
        return { kind: 'superseded', connection };
      }
      return { kind: 'refreshed', connection, clientId: record.clientId, token: accessToken, refreshedAt, rotated: rotatedRefreshToken !== undefined, previousStatus: record.status };
    } catch (error) {
      const reason = reasonOf(error, [...secrets, accessToken, rotatedRefreshToken]);
      if (attempt >= RESULT_WRITE_ATTEMPTS) {
        if (rotatedRefreshToken !== undefined) {
          // The only copy of the new refresh token is lost with this call: an operator must act.
          ports.log.error('the provider rotated the refresh token, but storing the new one failed: the stored one may no longer work; add the connection again with new credentials if it becomes failing', {
            connection,
            error: reason,
          });
        }
        return { kind: 'failed', connection, reason: `storing the refreshed token failed: ${reason}` };
      }
      await sleep(200 * 2 ** (attempt - 1));
    }
  }
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
