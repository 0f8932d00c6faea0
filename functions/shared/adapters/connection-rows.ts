/**
 * A connections-table row as the connections see it (docs/connections.md lists the attributes):
 * `toListing` reads one without opening a token; `eraseValue` writes an erase's progress.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import {
  CONNECTION_STATUSES,
  CONNECTIONS_TABLE_KEY,
  type ConnectionListing,
  type ConnectionStatus,
  type EraseProgress,
  type EraseState,
} from '../connections/connection.js';
import { stampOf } from '../connections/sealing.js';

type Row = Record<string, AttributeValue>;

/** The row as a ConnectionListing (no token opened); undefined for a row that is not a connection (no status or client id). */
export function toListing(row: Row): ConnectionListing | undefined {
  const connection = row[CONNECTIONS_TABLE_KEY]?.S;
  const status = row['status']?.S as ConnectionStatus | undefined;
  const clientId = row['clientId']?.S;
  if (connection === undefined || clientId === undefined || status === undefined || !CONNECTION_STATUSES.includes(status)) return undefined;
  const refreshToken = row['refreshToken']?.S;
  if (refreshToken === undefined && status !== 'removed') return undefined;
  const s = (name: string): string | undefined => row[name]?.S;
  const n = (name: string): number | undefined => {
    const text = row[name]?.N;
    return text === undefined ? undefined : Number(text);
  };
  const leaseOwner = s('leaseOwner');
  const leaseUntil = n('leaseUntil');
  const accessToken = s('accessToken');
  const listing: ConnectionListing = {
    connection,
    clientId,
    status,
    credentialsVersion: n('credentialsVersion') ?? 0,
    health: { consecutiveFailures: n('consecutiveFailures') ?? 0 },
    createdAt: s('createdAt') ?? '',
    updatedAt: s('updatedAt') ?? '',
  };
  const optional: Array<[keyof ConnectionListing, string | number | undefined]> = [
    ['accessTokenStamp', accessToken === undefined ? undefined : stampOf(accessToken)],
    ['refreshedAt', s('refreshedAt')],
    ['lastUsedAt', s('lastUsedAt')],
    ['idsKnown', n('idsKnown')],
    ['lastWriteAt', s('lastWriteAt')],
    ['credentialsAt', s('credentialsAt')],
  ];
  for (const [field, value] of optional) if (value !== undefined) (listing as unknown as Record<string, unknown>)[field] = value;
  const health = listing.health;
  if (s('lastSuccessAt') !== undefined) health.lastSuccessAt = s('lastSuccessAt');
  if (s('lastFailureAt') !== undefined) health.lastFailureAt = s('lastFailureAt');
  if (s('lastFailureReason') !== undefined) health.lastFailureReason = s('lastFailureReason');
  if (leaseOwner !== undefined && leaseUntil !== undefined) listing.refreshLease = { owner: leaseOwner, until: leaseUntil };
  const erase = eraseOf(row['erase']);
  if (erase) listing.erase = erase;
  return listing;
}

const ERASE_STATES: readonly EraseState[] = ['waiting', 'running', 'done'];

function eraseOf(value: AttributeValue | undefined): EraseProgress | undefined {
  const map = value?.M;
  const state = map?.['state']?.S as EraseState | undefined;
  const startedAt = map?.['startedAt']?.S;
  if (!map || state === undefined || !ERASE_STATES.includes(state) || startedAt === undefined) return undefined;
  return {
    state,
    startedAt,
    notBefore: map['notBefore']?.S ?? startedAt,
    rowsDeleted: Number(map['rowsDeleted']?.N ?? 0),
    objectsDeleted: Number(map['objectsDeleted']?.N ?? 0),
  };
}

export function eraseValue(erase: EraseProgress): AttributeValue {
  return {
    M: {
      state: { S: erase.state },
      startedAt: { S: erase.startedAt },
      notBefore: { S: erase.notBefore },
      rowsDeleted: { N: String(erase.rowsDeleted) },
      objectsDeleted: { N: String(erase.objectsDeleted) },
    },
  };
}
