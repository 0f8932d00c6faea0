/**
 * A connection: one account's authorization of the client application (docs/connections.md). Its
 * id, its status and its refresh health, as every function and the operator CLI see them. No
 * imports beyond the shared errors: the CDK app and the tools load it too.
 */
import { PermanentError } from '../errors.js';

/** The connection a message without `connection` belongs to. */
export const DEFAULT_CONNECTION = 'default';

/**
 * 1–64 characters of `A–Z a–z 0–9 . _ -`, not made of dots only: the id is a segment of object keys
 * (`items/<connection>/…`), where `.` and `..` would name another place.
 */
export const CONNECTION_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
export const MAX_CONNECTION_ID_LENGTH = 64;

/**
 * `active`: synced; `paused`: the operator paused it (its messages wait); `failing`: the provider
 * refused its refresh token (its messages wait until the operator replaces the credentials);
 * `removed`: the operator removed it (its messages are dead-lettered).
 */
export type ConnectionStatus = 'active' | 'paused' | 'failing' | 'removed';
export const CONNECTION_STATUSES: readonly ConnectionStatus[] = ['active', 'paused', 'failing', 'removed'];

/** The connections table's partition key (docs/connections.md); a DynamoDB reserved word, so expressions alias it. */
export const CONNECTIONS_TABLE_KEY = 'connection';

/** How the connection's token refreshes have gone. Times are ISO-8601 UTC. */
export interface RefreshHealth {
  lastSuccessAt?: string;
  lastFailureAt?: string;
  /** Why the last refresh failed (never a token). */
  lastFailureReason?: string;
  /** Failed refreshes since the last success. */
  consecutiveFailures: number;
}

/** A connection as the connections table holds it, tokens included (only the roles that need them read those). */
export interface ConnectionRecord {
  connection: string;
  clientId: string;
  status: ConnectionStatus;
  /**
   * The refresh token; empty once the connection is `removed` (removal deletes its tokens), and when
   * its sealed value does not open (`refreshTokenUnreadable`).
   */
  refreshToken: string;
  /**
   * The stored refresh token's sealed value can never be opened (corrupt, sealed for another
   * connection or under another key): its refresh turns the connection `failing`
   * (`token-unreadable`, refresh.ts). An access token that does not open is read as none.
   */
  refreshTokenUnreadable?: true;
  /** Raised whenever the refresh token changes (the operator's `add`, a rotation): a refresh writes only over the one it used. */
  credentialsVersion: number;
  accessToken?: string;
  /**
   * A one-way name of the access token as stored (sealing.ts `stampOf`), present with it: what a
   * scan (which opens no token) and a later read compare.
   */
  accessTokenStamp?: string;
  /** When `accessToken` was issued (ISO-8601 UTC). */
  refreshedAt?: string;
  /** Last time the item sync used the connection (written at most a few times an hour). */
  lastUsedAt?: string;
  health: RefreshHealth;
  /** A refresh in progress: until when (epoch ms) and by whom. */
  refreshLease?: { owner: string; until: number };
  createdAt: string;
  updatedAt: string;
  /** Ids the items table holds for it, and its last row write (kept by the change-events function). */
  idsKnown?: number;
  lastWriteAt?: string;
  /** When its credentials were last put (`add`, the API's PUT); a token rotation does not change it. */
  credentialsAt?: string;
  /** An erase asked for (the API's `DELETE ?erase=true`, `remove --purge`): erase.ts. */
  erase?: EraseProgress;
}

/** A connection as a scan of the table gives it: no token opened (`accessTokenStamp` tells one is stored). */
export type ConnectionListing = Omit<ConnectionRecord, 'refreshToken' | 'accessToken'>;

/** Where a connection's erase is: `waiting` for the safety wait to pass, `running`, `done` (the row is deleted then). */
export type EraseState = 'waiting' | 'running' | 'done';

export interface EraseProgress {
  state: EraseState;
  /** When it was asked for (ISO-8601 UTC). */
  startedAt: string;
  /** Not before then (ISO-8601 UTC): no item sync container still uses the connection. */
  notBefore: string;
  rowsDeleted: number;
  objectsDeleted: number;
}

/** The reason a value is not a connection id, or undefined when it is one. */
export function connectionIdProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return `the connection is ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}, not a string`;
  if (value.length === 0) return 'the connection id is empty';
  if (value.length > MAX_CONNECTION_ID_LENGTH) {
    return `the connection id is ${value.length} characters long; the limit is ${MAX_CONNECTION_ID_LENGTH}`;
  }
  if (!CONNECTION_ID_PATTERN.test(value)) {
    return 'the connection id may hold only the characters A-Z a-z 0-9 . _ -';
  }
  if (/^\.+$/.test(value)) return 'the connection id may not be made of dots only';
  return undefined;
}

/** The id itself, or a PermanentError whose message is the reason (it never quotes the value). */
export function validateConnectionId(value: unknown): string {
  const problem = connectionIdProblem(value);
  if (problem !== undefined) throw new PermanentError(problem);
  return value as string;
}

/** Longest client id and refresh token accepted (a header and a query parameter must carry them). */
export const MAX_CLIENT_ID_LENGTH = 256;
export const MAX_REFRESH_TOKEN_LENGTH = 8192;

/** The reason a client id cannot be used, or undefined. Never quotes the value. */
export function clientIdProblem(value: string): string | undefined {
  if (value.trim() === '') return 'the client id is empty';
  if (value.length > MAX_CLIENT_ID_LENGTH) return `the client id is ${value.length} characters long; the limit is ${MAX_CLIENT_ID_LENGTH}`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(value)) return 'the client id holds a control character';
  return undefined;
}

/**
 * The reason a refresh token cannot be used, or undefined: it goes in an Authorization header, so
 * no whitespace, no control character and nothing beyond U+00FF. Never quotes the value.
 */
export function refreshTokenProblem(value: string): string | undefined {
  if (value.length === 0) return 'the refresh token is empty';
  if (value.length > MAX_REFRESH_TOKEN_LENGTH) return `the refresh token is ${value.length} characters long; the limit is ${MAX_REFRESH_TOKEN_LENGTH}`;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code <= 0x20 || (code >= 0x7f && code <= 0xa0)) return `the refresh token holds whitespace or a control character at position ${i + 1}`;
    if (code > 0xff) return `the refresh token holds a character beyond U+00FF at position ${i + 1}, which an HTTP header cannot carry`;
  }
  return undefined;
}

/** The provider pace a connection's requests draw from: one per client id, or one per connection. */
export function paceKeyOf(scope: 'client' | 'connection', connection: { connection: string; clientId: string }): string {
  return scope === 'client' ? `client#${connection.clientId}` : `connection#${connection.connection}`;
}
