/** Stream records as Lambda hands them to the change-events function, built from plain rows. */
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
}

export function image(row: Row): StreamImage {
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
