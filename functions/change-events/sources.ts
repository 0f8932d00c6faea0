/**
 * Which stream a record comes from, and so which mapping announces it. One function, two event
 * sources (infra/change-events): the items table's stream (item changes, change.ts) and the
 * connections table's (account lifecycle events, lifecycle.ts). Pure: no AWS import.
 *
 * A record's `eventSourceARN` names its stream,
 * `arn:aws:dynamodb:<region>:<account>:table/<table name>/stream/<label>`. The connections table's
 * records are those whose table name is CONNECTIONS_TABLE_NAME (a name; a table's ARN is taken as
 * its name). Every other record, one without an ARN of that form included, is the items table's,
 * as every record was before the second source (the items table's name is not part of the
 * function's configuration). A batch comes from one stream (one event source mapping per stream),
 * but each record is routed on its own, so a mixed batch is announced right too.
 */
import { changeOf } from './change.js';
import { lifecycleOf } from './lifecycle.js';
import type { BusEvent, StreamRecord } from './ports.js';

export type StreamSource = 'items' | 'connections';

const STREAM_ARN = /^arn:[^:]+:dynamodb:[^:]*:[^:]*:table\/([^/]+)\/stream\/[^/]+$/;
const TABLE_ARN = /^arn:[^:]+:dynamodb:[^:]*:[^:]*:table\/([^/]+)$/;

/** The table name in a DynamoDB stream ARN; undefined for anything else. */
export function streamTableName(arn: string | undefined): string | undefined {
  return arn === undefined ? undefined : STREAM_ARN.exec(arn)?.[1];
}

/** A configured table: its name as is, or the name in a table's ARN. */
export function tableNameOf(configured: string): string {
  return TABLE_ARN.exec(configured)?.[1] ?? configured;
}

/** The stream `record` comes from, given the connections table's name (or ARN). */
export function sourceOf(record: StreamRecord, connectionsTable: string): StreamSource {
  return streamTableName(record.eventSourceARN) === tableNameOf(connectionsTable) ? 'connections' : 'items';
}

export interface RouterOptions {
  /** CONNECTIONS_TABLE_NAME. */
  connectionsTable: string;
  /** The function's clock, milliseconds since the epoch (lifecycle.ts: `at` of a record without its own time). */
  now: () => number;
}

/** The event of a record of either stream (changeOf or lifecycleOf by its source); both throw MappingError. */
export function eventRouter(options: RouterOptions): (record: StreamRecord) => BusEvent | undefined {
  const { connectionsTable, now } = options;
  return (record) => (sourceOf(record, connectionsTable) === 'connections' ? lifecycleOf(record, { now }) : changeOf(record));
}
