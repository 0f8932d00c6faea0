/**
 * The mapping from one record of the connections table's stream to its account lifecycle event
 * (contract, "Account lifecycle events"): every row of lifecycle.ts's table, the writes that change
 * no status (counters, a lease, a refreshed access token, a rotated refresh token, lastUsedAt, the
 * health, an erase's progress), `at` and its fallbacks, the reason and its cap, the records that
 * cannot be mapped, and a detail that holds its five fields only (never a token, never the client id).
 */
import { describe, expect, it } from 'vitest';
import { MappingError } from '../../../functions/change-events/change.js';
import { isLifecycleEvent, LIFECYCLE_DETAIL_TYPES, lifecycleOf, MAX_REASON_CHARACTERS } from '../../../functions/change-events/lifecycle.js';
import type { LifecycleEvent, StreamRecord } from '../../../functions/change-events/ports.js';
import {
  ACCESS_TOKEN,
  CLIENT_ID,
  connectionRecord,
  connectionRow,
  NEW_ACCESS_TOKEN,
  REFRESH_TOKEN,
  ROTATED_REFRESH_TOKEN,
  type ConnectionRow,
} from './helpers.js';

const T_PUT = '2026-11-21T09:00:00.000Z';
const T_CHANGE = '2026-11-21T10:00:00.000Z';
const RECORD_TIME = '2026-11-21T10:10:00.000Z';
const NOW = Date.parse('2026-11-21T10:15:30.250Z');

const map = (record: StreamRecord) => lifecycleOf(record, { now: () => NOW });

/** `row` after a status write at T_CHANGE (setStatus: the status and updatedAt). */
const statusWrite = (row: ConnectionRow, status: string): ConnectionRow => ({ ...row, status, updatedAt: T_CHANGE });

/** `row` after the credentials are put at T_PUT (putCredentials: active, a new refresh token, credentialsAt, no access token). */
function credentialsPut(row: ConnectionRow): ConnectionRow {
  const { accessToken: _a, refreshedAt: _r, lastSuccessAt: _s, lastFailureAt: _f, lastFailureReason: _why, ...rest } = row;
  return { ...rest, status: 'active', refreshToken: ROTATED_REFRESH_TOKEN, credentialsVersion: (row.credentialsVersion ?? 0) + 1, consecutiveFailures: 0, updatedAt: T_PUT, credentialsAt: T_PUT };
}

const event = (detailType: LifecycleEvent['detailType'], detail: LifecycleEvent['detail']): LifecycleEvent => ({ detailType, detail });

describe('lifecycleOf: one event per status change', () => {
  it('the eight detail-types', () => {
    expect(LIFECYCLE_DETAIL_TYPES).toEqual([
      'ConnectionAdded',
      'ConnectionCredentialsReplaced',
      'ConnectionFailing',
      'ConnectionRecovered',
      'ConnectionPaused',
      'ConnectionResumed',
      'ConnectionRemoved',
      'ConnectionErased',
    ]);
  });

  it('INSERT of an active row (credentials put for a new connection): ConnectionAdded, previousStatus null, at its updatedAt', () => {
    const created = connectionRow('acme', 'active', { updatedAt: T_PUT, credentialsAt: T_PUT });
    expect(map(connectionRecord(undefined, created))).toEqual(event('ConnectionAdded', { connection: 'acme', status: 'active', previousStatus: null, at: T_PUT }));
  });

  it('a row of counters only (no status) that becomes active: ConnectionAdded, previousStatus null', () => {
    const counters: ConnectionRow = { connection: 'acme', idsKnown: 3, lastWriteAt: '2026-11-21T08:00:00.000Z' };
    expect(map(connectionRecord(counters, credentialsPut(counters)))).toEqual(
      event('ConnectionAdded', { connection: 'acme', status: 'active', previousStatus: null, at: T_PUT }),
    );
  });

  it('removed → active (credentials put again): ConnectionAdded, previousStatus "removed"', () => {
    const removed = connectionRow('acme', 'removed', { refreshToken: undefined, accessToken: undefined, credentialsVersion: 2 });
    expect(map(connectionRecord(removed, credentialsPut(removed)))).toEqual(
      event('ConnectionAdded', { connection: 'acme', status: 'active', previousStatus: 'removed', at: T_PUT }),
    );
  });

  it('failing → active: ConnectionRecovered, whether a refresh succeeded or new credentials were put', () => {
    const failing = connectionRow('acme', 'failing', { lastFailureReason: 'invalid_grant', consecutiveFailures: 3 });
    const refreshed: ConnectionRow = { ...failing, status: 'active', accessToken: NEW_ACCESS_TOKEN, consecutiveFailures: 0, updatedAt: T_CHANGE };
    expect(map(connectionRecord(failing, refreshed))).toEqual(event('ConnectionRecovered', { connection: 'acme', status: 'active', previousStatus: 'failing', at: T_CHANGE }));
    expect(map(connectionRecord(failing, credentialsPut(failing)))).toEqual(
      event('ConnectionRecovered', { connection: 'acme', status: 'active', previousStatus: 'failing', at: T_PUT }),
    );
  });

  it('active → active with another credentialsAt: ConnectionCredentialsReplaced', () => {
    const active = connectionRow('acme', 'active');
    expect(map(connectionRecord(active, credentialsPut(active)))).toEqual(
      event('ConnectionCredentialsReplaced', { connection: 'acme', status: 'active', previousStatus: 'active', at: T_PUT }),
    );
  });

  it('a row without credentialsAt (written before it existed) that gets one: ConnectionCredentialsReplaced', () => {
    const { credentialsAt: _c, ...older } = connectionRow('acme', 'active');
    expect(map(connectionRecord(older, credentialsPut(older)))?.detailType).toBe('ConnectionCredentialsReplaced');
  });

  it('paused → active with another credentialsAt: ConnectionCredentialsReplaced, previousStatus "paused"', () => {
    const paused = connectionRow('acme', 'paused');
    expect(map(connectionRecord(paused, credentialsPut(paused)))).toEqual(
      event('ConnectionCredentialsReplaced', { connection: 'acme', status: 'active', previousStatus: 'paused', at: T_PUT }),
    );
  });

  it('paused → active, the credentials untouched: ConnectionResumed', () => {
    const paused = connectionRow('acme', 'paused');
    expect(map(connectionRecord(paused, statusWrite(paused, 'active')))).toEqual(
      event('ConnectionResumed', { connection: 'acme', status: 'active', previousStatus: 'paused', at: T_CHANGE }),
    );
  });

  it('any status but paused → paused: ConnectionPaused', () => {
    for (const from of ['active', 'failing', 'removed'] as const) {
      const row = connectionRow('acme', from);
      expect(map(connectionRecord(row, statusWrite(row, 'paused')))).toEqual(
        event('ConnectionPaused', { connection: 'acme', status: 'paused', previousStatus: from, at: T_CHANGE }),
      );
    }
    expect(map(connectionRecord(undefined, connectionRow('acme', 'paused')))).toEqual(
      event('ConnectionPaused', { connection: 'acme', status: 'paused', previousStatus: null, at: '2026-11-21T08:00:00.000Z' }),
    );
  });

  it('active → failing (the provider refused the refresh token): ConnectionFailing with the refusal as reason', () => {
    const active = connectionRow('acme', 'active');
    const refused: ConnectionRow = {
      ...active,
      status: 'failing',
      lastFailureAt: T_CHANGE,
      lastFailureReason: 'the provider refused the refresh token (HTTP 401: invalid_grant)',
      consecutiveFailures: 1,
      updatedAt: T_CHANGE,
    };
    expect(map(connectionRecord(active, refused))).toEqual(
      event('ConnectionFailing', {
        connection: 'acme',
        status: 'failing',
        previousStatus: 'active',
        reason: 'the provider refused the refresh token (HTTP 401: invalid_grant)',
        at: T_CHANGE,
      }),
    );
  });

  it('ConnectionFailing from any status but failing; without lastFailureReason, no reason field', () => {
    for (const from of ['paused', 'removed'] as const) {
      const row = connectionRow('acme', from);
      expect(map(connectionRecord(row, statusWrite(row, 'failing')))).toEqual(
        event('ConnectionFailing', { connection: 'acme', status: 'failing', previousStatus: from, at: T_CHANGE }),
      );
    }
    const inserted = map(connectionRecord(undefined, connectionRow('acme', 'failing', { lastFailureReason: 'refused' })));
    expect(inserted).toEqual(event('ConnectionFailing', { connection: 'acme', status: 'failing', previousStatus: null, reason: 'refused', at: '2026-11-21T08:00:00.000Z' }));
  });

  it(`the reason is cut to ${MAX_REASON_CHARACTERS} characters, never inside a character`, () => {
    const active = connectionRow('acme', 'active');
    const long = 'x'.repeat(999) + '\u{1F511}' + 'y'.repeat(500);
    const detail = map(connectionRecord(active, { ...statusWrite(active, 'failing'), lastFailureReason: long }))!.detail;
    expect(detail.reason).toBe('x'.repeat(999) + '\u{1F511}');
    expect(Array.from(detail.reason!)).toHaveLength(MAX_REASON_CHARACTERS);
    const exact = 'z'.repeat(MAX_REASON_CHARACTERS);
    expect(map(connectionRecord(active, { ...statusWrite(active, 'failing'), lastFailureReason: exact }))!.detail.reason).toBe(exact);
  });

  it('the reason belongs to ConnectionFailing only', () => {
    const failing = connectionRow('acme', 'failing', { lastFailureReason: 'invalid_grant' });
    expect(map(connectionRecord(failing, statusWrite(failing, 'removed')))).toEqual(
      event('ConnectionRemoved', { connection: 'acme', status: 'removed', previousStatus: 'failing', at: T_CHANGE }),
    );
  });

  it('any status but removed → removed (its tokens deleted): ConnectionRemoved', () => {
    for (const from of ['active', 'paused', 'failing'] as const) {
      const row = connectionRow('acme', from);
      const { refreshToken: _r, accessToken: _a, ...withoutTokens } = statusWrite(row, 'removed');
      expect(map(connectionRecord(row, { ...withoutTokens, credentialsVersion: 2 }))).toEqual(
        event('ConnectionRemoved', { connection: 'acme', status: 'removed', previousStatus: from, at: T_CHANGE }),
      );
    }
  });

  it('REMOVE of a removed row (purged or erased): ConnectionErased, status null, at the record’s time', () => {
    const removed = connectionRow('acme', 'removed', { refreshToken: undefined, accessToken: undefined, erase: { state: 'running', startedAt: T_CHANGE } });
    expect(map(connectionRecord(removed, undefined))).toEqual(event('ConnectionErased', { connection: 'acme', status: null, previousStatus: 'removed', at: RECORD_TIME }));
  });

  it('REMOVE without ApproximateCreationDateTime: at is the function’s clock', () => {
    const removed = connectionRow('acme', 'removed');
    expect(map(connectionRecord(removed, undefined, { seconds: null }))!.detail.at).toBe('2026-11-21T10:15:30.250Z');
  });

  it('REMOVE of a row that was not removed, or had no status: nothing', () => {
    for (const status of ['active', 'paused', 'failing', undefined]) {
      expect(map(connectionRecord(connectionRow('acme', status), undefined))).toBeUndefined();
    }
  });

  it('a status change whose new image has no updatedAt: at is the record’s time', () => {
    const paused = connectionRow('acme', 'paused');
    const { updatedAt: _u, ...resumed } = statusWrite(paused, 'active');
    expect(map(connectionRecord(paused, resumed))!.detail.at).toBe(RECORD_TIME);
    expect(map(connectionRecord(paused, resumed, { seconds: null }))!.detail.at).toBe('2026-11-21T10:15:30.250Z');
  });

  it('the connection id comes from the record’s key when the image lacks it', () => {
    const { connection: _c, ...paused } = connectionRow('acme', 'paused');
    const record = connectionRecord(connectionRow('acme', 'active'), paused);
    record.dynamodb!.Keys = { connection: { S: 'acme' } };
    expect(map(record)?.detail.connection).toBe('acme');
  });

  it('isLifecycleEvent tells a lifecycle event from an item change', () => {
    expect(isLifecycleEvent(event('ConnectionAdded', { connection: 'a', status: 'active', previousStatus: null, at: T_PUT }))).toBe(true);
    expect(
      isLifecycleEvent({ detailType: 'ItemCreated', detail: { connection: 'a', id: 'x', type: 'file', revision: '1', previousRevision: null, syncedAt: T_PUT } }),
    ).toBe(false);
  });
});

describe('lifecycleOf: a write that changes no status announces nothing', () => {
  const active = connectionRow('acme', 'active');
  const cases: Array<[string, ConnectionRow, ConnectionRow]> = [
    ['the counters (idsKnown, lastWriteAt)', active, { ...active, idsKnown: 15, lastWriteAt: '2026-11-21T09:59:00.000Z' }],
    ['a refresh lease taken', active, { ...active, leaseOwner: 'refresher-1', leaseUntil: 1_795_000_000_000 }],
    ['a refresh lease released', { ...active, leaseOwner: 'refresher-1', leaseUntil: 1_795_000_000_000 }, active],
    [
      'an access token refreshed',
      active,
      { ...active, accessToken: NEW_ACCESS_TOKEN, refreshedAt: T_CHANGE, lastSuccessAt: T_CHANGE, consecutiveFailures: 0, updatedAt: T_CHANGE },
    ],
    [
      'a refresh token rotated by the provider (credentialsVersion raised, credentialsAt unchanged)',
      active,
      { ...active, refreshToken: ROTATED_REFRESH_TOKEN, accessToken: NEW_ACCESS_TOKEN, credentialsVersion: 2, updatedAt: T_CHANGE },
    ],
    ['lastUsedAt', active, { ...active, lastUsedAt: T_CHANGE }],
    ['a refresh that failed and may pass (health only)', active, { ...active, lastFailureAt: T_CHANGE, lastFailureReason: 'HTTP 503', consecutiveFailures: 1, updatedAt: T_CHANGE }],
    [
      'a failing connection failing again',
      connectionRow('acme', 'failing', { lastFailureReason: 'invalid_grant', consecutiveFailures: 1 }),
      connectionRow('acme', 'failing', { lastFailureReason: 'invalid_client', consecutiveFailures: 2, updatedAt: T_CHANGE }),
    ],
    ['a paused connection’s access token refreshed', connectionRow('acme', 'paused'), connectionRow('acme', 'paused', { accessToken: NEW_ACCESS_TOKEN, updatedAt: T_CHANGE })],
    [
      'an erase asked for and its progress',
      connectionRow('acme', 'removed'),
      connectionRow('acme', 'removed', { erase: { state: 'running', startedAt: T_CHANGE, rowsDeleted: 40 }, updatedAt: T_CHANGE }),
    ],
    ['a row of counters only', { connection: 'acme', idsKnown: 1 }, { connection: 'acme', idsKnown: 2, lastWriteAt: T_CHANGE }],
    ['a status that goes away', active, { connection: 'acme', idsKnown: 12 }],
  ];

  for (const [what, before, after] of cases) {
    it(what, () => {
      expect(map(connectionRecord(before, after))).toBeUndefined();
    });
  }

  it('INSERT of a row of counters only: not a connection yet', () => {
    expect(map(connectionRecord(undefined, { connection: 'acme', idsKnown: 1, lastWriteAt: T_CHANGE }))).toBeUndefined();
  });
});

describe('lifecycleOf: the detail holds its fields only', () => {
  it('never a token, the client id or another attribute of the row, whatever the event', () => {
    const full = (status: string, extra: ConnectionRow = {}) =>
      connectionRow('acme', status, { leaseOwner: 'refresher-1', leaseUntil: 1, lastFailureReason: 'invalid_grant', erase: { state: 'waiting' }, ...extra });
    const records = [
      connectionRecord(undefined, full('active')),
      connectionRecord(full('failing'), full('active', { credentialsAt: T_PUT })),
      connectionRecord(full('active'), full('active', { credentialsAt: T_PUT })),
      connectionRecord(full('paused'), full('active')),
      connectionRecord(full('active'), full('paused')),
      connectionRecord(full('active'), full('failing')),
      connectionRecord(full('active'), full('removed')),
      connectionRecord(full('removed'), undefined),
    ];
    const events = records.map(map);
    expect(events.map((e) => e?.detailType)).toEqual([
      'ConnectionAdded',
      'ConnectionRecovered',
      'ConnectionCredentialsReplaced',
      'ConnectionResumed',
      'ConnectionPaused',
      'ConnectionFailing',
      'ConnectionRemoved',
      'ConnectionErased',
    ]);
    for (const e of events) {
      const keys = Object.keys(e!.detail);
      expect(keys).toEqual(e!.detailType === 'ConnectionFailing' ? ['connection', 'status', 'previousStatus', 'reason', 'at'] : ['connection', 'status', 'previousStatus', 'at']);
      const text = JSON.stringify(e);
      for (const secret of [REFRESH_TOKEN, ACCESS_TOKEN, CLIENT_ID, 'refresher-1']) expect(text).not.toContain(secret);
    }
  });
});

describe('lifecycleOf: records that cannot be mapped throw MappingError', () => {
  const active = connectionRow('acme', 'active');

  it('MODIFY without an old image', () => {
    const record = connectionRecord(active, statusWrite(active, 'paused'));
    delete record.dynamodb!.OldImage;
    expect(() => map(record)).toThrow(MappingError);
    expect(() => map(record)).toThrow('MODIFY record of the row of connection "acme" without an old image (the stream must be NEW_AND_OLD_IMAGES)');
  });

  it('REMOVE without an old image', () => {
    const record = connectionRecord(active, undefined);
    delete record.dynamodb!.OldImage;
    expect(() => map(record)).toThrow('REMOVE record of the row of connection "acme" without an old image (the stream must be NEW_AND_OLD_IMAGES)');
  });

  it('INSERT or MODIFY without a new image', () => {
    const record = connectionRecord(undefined, active);
    delete record.dynamodb!.NewImage;
    expect(() => map(record)).toThrow('INSERT record of the row of connection "acme" without a new image (the stream must be NEW_AND_OLD_IMAGES)');
  });

  it('an unknown status, in the new image or the old one, or not a string', () => {
    expect(() => map(connectionRecord(active, statusWrite(active, 'archived')))).toThrow(
      'the row of connection "acme": the new image\'s status "archived" is not one of active, paused, failing, removed',
    );
    expect(() => map(connectionRecord(connectionRow('acme', 'Active'), active))).toThrow('the old image\'s status "Active" is not one of');
    expect(() => map(connectionRecord(connectionRow('acme', 'removed', { status: undefined }), undefined))).not.toThrow();
    const numeric = connectionRecord(active, active);
    numeric.dynamodb!.NewImage!['status'] = { N: '1' };
    expect(() => map(numeric)).toThrow('the new image\'s status of type N is not one of');
    expect(() => map(connectionRecord(connectionRow('acme', 'gone'), undefined))).toThrow(MappingError);
  });

  it('an unknown eventName; a record that names no connection', () => {
    const record = connectionRecord(active, active) as StreamRecord;
    (record as { eventName?: string }).eventName = 'TRUNCATE';
    expect(() => map(record)).toThrow('unknown stream eventName "TRUNCATE" on the connections table\'s stream');
    const { connection: _c, ...nameless } = active;
    const anonymous = connectionRecord(undefined, nameless);
    expect(() => map(anonymous)).toThrow('a record of the connections table names no connection (no text attribute "connection")');
  });

  it('the messages hold no token', () => {
    const record = connectionRecord(active, { ...active, status: 'archived' });
    try {
      map(record);
      expect.unreachable();
    } catch (error) {
      expect(String(error)).not.toContain(REFRESH_TOKEN);
      expect(String(error)).not.toContain(ACCESS_TOKEN);
    }
  });
});
