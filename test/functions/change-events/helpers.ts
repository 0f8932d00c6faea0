/**
 * Stream records as Lambda hands them to the change-events function, built from plain rows: the
 * items table's, and the connections table's (the account lifecycle events).
 */
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import type { AttributeValue, StreamImage } from '../../../functions/change-events/ports.js';

export const STREAM_ARN = 'arn:aws:dynamodb:eu-west-1:123456789012:table/items/stream/2026-11-21T00:00:00.000';

/** A row of the items table (contract, "The items table"); `revision` may be a number to store it as N. */
export interface Row {
  connection?: string;
  id: string;
  type?: string;
  revision?: string | number;
  syncedAt?: string;
  deleted?: boolean;
  item?: Record<string, unknown>;
  itemObject?: { key: string; size: number; sha256: string };
  /** A folder whose children the sync has yet to send (docs/discovery.md). */
  childrenPending?: boolean;
}

export function image(row: Row | ConnectionRow): StreamImage {
  const out: StreamImage = {};
  for (const [name, value] of Object.entries(row)) {
    if (value !== undefined) out[name] = attribute(value);
  }
  return out;
}

function attribute(value: unknown): AttributeValue {
  if (value === null) return { NULL: true };
  if (typeof value === 'string') return { S: value };
  if (typeof value === 'number') return { N: String(value) };
  if (typeof value === 'boolean') return { BOOL: value };
  if (Array.isArray(value)) return { L: value.map(attribute) };
  const map: Record<string, AttributeValue> = {};
  for (const [name, element] of Object.entries(value as Record<string, unknown>)) map[name] = attribute(element);
  return { M: map };
}

let sequence = 100;

/** One stream record: INSERT without `before`, REMOVE without `after`, MODIFY with both. */
export function record(before: Row | undefined, after: Row | undefined, options: { sequenceNumber?: string; eventID?: string } = {}): DynamoDBRecord {
  const eventName = before === undefined ? 'INSERT' : after === undefined ? 'REMOVE' : 'MODIFY';
  const { connection, id } = (after ?? before)!;
  sequence += 1;
  const sequenceNumber = options.sequenceNumber ?? `${sequence}000000000000000000001`;
  return {
    eventID: options.eventID ?? `event-${sequence}`,
    eventName,
    eventVersion: '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: 'eu-west-1',
    eventSourceARN: STREAM_ARN,
    dynamodb: {
      ApproximateCreationDateTime: 1_795_000_000,
      Keys: { ...(connection !== undefined ? { connection: { S: connection } } : {}), id: { S: id } },
      ...(before ? { OldImage: image(before) as never } : {}),
      ...(after ? { NewImage: image(after) as never } : {}),
      SequenceNumber: sequenceNumber,
      SizeBytes: 100,
      StreamViewType: 'NEW_AND_OLD_IMAGES',
    },
  };
}

export function streamEvent(...records: DynamoDBRecord[]): DynamoDBStreamEvent {
  return { Records: records };
}

/** A live file row at `revision`, of the connection `default` unless `extra` names another. */
export function live(id: string, revision: string | number, syncedAt = '2026-11-21T10:00:00.000Z', extra: Partial<Row> = {}): Row {
  return { connection: 'default', id, type: 'file', revision, item: { id, type: 'file', revision, name: `${id}.txt` }, syncedAt, ...extra };
}

/** The same row as a tombstone (the last copy kept, `syncedAt` moved on). */
export function tombstone(row: Row, syncedAt = '2026-11-21T11:00:00.000Z'): Row {
  return { ...row, deleted: true, syncedAt };
}

/** The connections table's name in the tests (CONNECTIONS_TABLE_NAME) and its stream. */
export const CONNECTIONS_TABLE = 'content-sync-connections';
export const CONNECTIONS_STREAM_ARN = `arn:aws:dynamodb:eu-west-1:123456789012:table/${CONNECTIONS_TABLE}/stream/2026-11-21T00:00:00.000`;

/** Recognisable token values (sealed ciphertext in a real row): they must never reach an event or a log line. */
export const REFRESH_TOKEN = 'sealed-REFRESH-TOKEN-must-not-leak-3f9c1e';
export const ROTATED_REFRESH_TOKEN = 'sealed-ROTATED-REFRESH-TOKEN-must-not-leak-7d2b';
export const ACCESS_TOKEN = 'sealed-ACCESS-TOKEN-must-not-leak-a81f44';
export const NEW_ACCESS_TOKEN = 'sealed-NEW-ACCESS-TOKEN-must-not-leak-0c5e';
export const CLIENT_ID = 'client-id-not-in-events-5b7a';

/** A row of the connections table: every attribute functions/shared/adapters/dynamodb-connection-store.ts writes. */
export interface ConnectionRow {
  connection?: string;
  clientId?: string;
  status?: string;
  refreshToken?: string;
  accessToken?: string;
  credentialsVersion?: number;
  credentialsAt?: string;
  createdAt?: string;
  updatedAt?: string;
  refreshedAt?: string;
  lastSuccessAt?: string;
  lastFailureAt?: string;
  lastFailureReason?: string;
  consecutiveFailures?: number;
  leaseOwner?: string;
  leaseUntil?: number;
  lastUsedAt?: string;
  idsKnown?: number;
  lastWriteAt?: string;
  erase?: Record<string, unknown>;
}

/** A connection's row in `status` (none: `undefined`), with credentials put at `credentialsAt`, tokens, health and counters. */
export function connectionRow(connection: string, status: string | undefined, extra: ConnectionRow = {}): ConnectionRow {
  return {
    connection,
    clientId: CLIENT_ID,
    ...(status !== undefined ? { status } : {}),
    refreshToken: REFRESH_TOKEN,
    accessToken: ACCESS_TOKEN,
    credentialsVersion: 1,
    credentialsAt: '2026-11-20T09:00:00.000Z',
    createdAt: '2026-11-20T09:00:00.000Z',
    updatedAt: '2026-11-21T08:00:00.000Z',
    refreshedAt: '2026-11-21T08:00:00.000Z',
    lastSuccessAt: '2026-11-21T08:00:00.000Z',
    consecutiveFailures: 0,
    lastUsedAt: '2026-11-21T08:30:00.000Z',
    idsKnown: 12,
    lastWriteAt: '2026-11-21T08:45:00.000Z',
    ...extra,
  };
}

/**
 * One record of the connections table's stream: INSERT without `before`, REMOVE without `after`,
 * MODIFY with both; ApproximateCreationDateTime `seconds` (default 2026-11-21T10:10:00Z; null: none).
 */
export function connectionRecord(
  before: ConnectionRow | undefined,
  after: ConnectionRow | undefined,
  options: { sequenceNumber?: string; eventID?: string; seconds?: number | null; eventSourceARN?: string } = {},
): DynamoDBRecord {
  const eventName = before === undefined ? 'INSERT' : after === undefined ? 'REMOVE' : 'MODIFY';
  const { connection } = (after ?? before)!;
  sequence += 1;
  const seconds = options.seconds === undefined ? CONNECTION_RECORD_SECONDS : options.seconds;
  return {
    eventID: options.eventID ?? `event-${sequence}`,
    eventName,
    eventVersion: '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: 'eu-west-1',
    eventSourceARN: options.eventSourceARN ?? CONNECTIONS_STREAM_ARN,
    dynamodb: {
      ...(seconds !== null ? { ApproximateCreationDateTime: seconds } : {}),
      Keys: connection !== undefined ? { connection: { S: connection } } : {},
      ...(before ? { OldImage: image(before) as never } : {}),
      ...(after ? { NewImage: image(after) as never } : {}),
      SequenceNumber: options.sequenceNumber ?? `${sequence}000000000000000000001`,
      SizeBytes: 300,
      StreamViewType: 'NEW_AND_OLD_IMAGES',
    },
  };
}

/** 2026-11-21T10:10:00.000Z, in seconds: connectionRecord's ApproximateCreationDateTime by default. */
export const CONNECTION_RECORD_SECONDS = Date.parse('2026-11-21T10:10:00.000Z') / 1000;
