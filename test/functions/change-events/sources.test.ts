/**
 * Which stream a record comes from (sources.ts): the table name in its eventSourceARN compared with
 * CONNECTIONS_TABLE_NAME, every other record the items table's; the router that maps each record by
 * its stream.
 */
import { describe, expect, it } from 'vitest';
import { MappingError } from '../../../functions/change-events/change.js';
import { eventRouter, sourceOf, streamTableName, tableNameOf } from '../../../functions/change-events/sources.js';
import { CONNECTIONS_STREAM_ARN, CONNECTIONS_TABLE, connectionRecord, connectionRow, live, record, STREAM_ARN } from './helpers.js';

const T0 = '2026-11-21T10:00:00.000Z';

describe('streamTableName', () => {
  it('the table name of a DynamoDB stream ARN', () => {
    expect(streamTableName(CONNECTIONS_STREAM_ARN)).toBe(CONNECTIONS_TABLE);
    expect(streamTableName(STREAM_ARN)).toBe('items');
    expect(streamTableName('arn:aws-cn:dynamodb:cn-north-1:123456789012:table/ContentSyncStateful-ConnectionsTable8000B8A1-1A2B3C.x_y/stream/2026-11-21T00:00:00.000')).toBe(
      'ContentSyncStateful-ConnectionsTable8000B8A1-1A2B3C.x_y',
    );
  });

  it('anything else: undefined', () => {
    for (const arn of [
      undefined,
      '',
      'arn:aws:dynamodb:eu-west-1:123456789012:table/content-sync-connections',
      'arn:aws:sqs:eu-west-1:123456789012:table/content-sync-connections/stream/x',
      'arn:aws:kinesis:eu-west-1:123456789012:stream/content-sync-connections',
      'content-sync-connections',
    ]) {
      expect(streamTableName(arn)).toBeUndefined();
    }
  });
});

describe('tableNameOf', () => {
  it('a name as is; a table ARN as its name', () => {
    expect(tableNameOf(CONNECTIONS_TABLE)).toBe(CONNECTIONS_TABLE);
    expect(tableNameOf(`arn:aws:dynamodb:eu-west-1:123456789012:table/${CONNECTIONS_TABLE}`)).toBe(CONNECTIONS_TABLE);
  });
});

describe('sourceOf', () => {
  it('the connections table’s stream by its table name, exactly; everything else is the items table’s', () => {
    expect(sourceOf({ eventSourceARN: CONNECTIONS_STREAM_ARN }, CONNECTIONS_TABLE)).toBe('connections');
    expect(sourceOf({ eventSourceARN: CONNECTIONS_STREAM_ARN }, `arn:aws:dynamodb:eu-west-1:123456789012:table/${CONNECTIONS_TABLE}`)).toBe('connections');
    expect(sourceOf({ eventSourceARN: STREAM_ARN }, CONNECTIONS_TABLE)).toBe('items');
    expect(sourceOf({}, CONNECTIONS_TABLE)).toBe('items');
    expect(sourceOf({ eventSourceARN: CONNECTIONS_STREAM_ARN.replace(CONNECTIONS_TABLE, `${CONNECTIONS_TABLE}-old`) }, CONNECTIONS_TABLE)).toBe('items');
    expect(sourceOf({ eventSourceARN: CONNECTIONS_STREAM_ARN.replace(CONNECTIONS_TABLE, 'Content-Sync-Connections') }, CONNECTIONS_TABLE)).toBe('items');
  });
});

describe('eventRouter', () => {
  const route = eventRouter({ connectionsTable: CONNECTIONS_TABLE, now: () => 0 });

  it('maps a record of the connections table’s stream to its lifecycle event, any other to its item change', () => {
    const paused = connectionRow('acme', 'paused');
    expect(route(connectionRecord(paused, { ...paused, status: 'active', updatedAt: T0 }))).toEqual({
      detailType: 'ConnectionResumed',
      detail: { connection: 'acme', status: 'active', previousStatus: 'paused', at: T0 },
    });
    expect(route(record(undefined, live('f1', '1', T0)))).toEqual({
      detailType: 'ItemCreated',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 },
    });
    const withoutArn = record(undefined, live('f2', '1', T0));
    delete withoutArn.eventSourceARN;
    expect(route(withoutArn)?.detailType).toBe('ItemCreated');
  });

  it('a connections row from a stream of another table goes the items way (and cannot be mapped there)', () => {
    const stray = connectionRecord(undefined, connectionRow('acme', 'active'), { eventSourceARN: STREAM_ARN });
    expect(() => route(stray)).toThrow(MappingError);
  });
});
