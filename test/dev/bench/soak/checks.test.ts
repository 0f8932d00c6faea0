/**
 * The soak's checks must catch what they are there for: a soak that reports 0 lost, 0 stale, 0
 * excess writes, only the expected dead letters and 0 tokens means something only if each check
 * fails on a run that gets it wrong.
 */
import { describe, expect, it } from 'vitest';
import { toAttributeValue } from '../../../../functions/item-sync/adapters/dynamodb-item-store.js';
import {
  checkDeadLetters,
  checkObjects,
  checkState,
  checkWrites,
  countTokens,
  objectsLeftInLogs,
  checkCredentials,
  mostAtOnce,
  tokensInConnections,
  type DeadLetterEntry,
  type Row,
} from '../../../../dev/bench/soak/checks.js';

const item = (id: string, revision: number, extra: Record<string, unknown> = {}) => ({ id, type: 'file', name: `${id}.txt`, revision, ...extra });

function row(value: Record<string, unknown>, options: { deleted?: boolean; revision?: string } = {}): Row {
  return {
    id: { S: String(value['id']) },
    type: { S: String(value['type']) },
    revision: { S: options.revision ?? String(value['revision']) },
    item: toAttributeValue(value),
    syncedAt: { S: '2026-11-21T10:00:00.000Z' },
    ...(options.deleted ? { deleted: { BOOL: true } } : {}),
  };
}

describe('checkState', () => {
  const provider = new Map<string, Record<string, unknown>>([
    ['a', item('a', 3)],
    ['b', item('b', 7, { meta: { tags: ['x', ''] } })],
  ]);
  const lookup = (id: string) => provider.get(id);

  it('passes when every live item is stored at its latest revision and deleted ones are tombstoned or absent', () => {
    const rows = new Map<string, Row>([
      ['a', row(item('a', 3))],
      ['b', row(item('b', 7, { meta: { tags: ['x', ''] } }))],
      ['gone', row(item('gone', 2), { deleted: true })],
    ]);
    const result = checkState(['a', 'b', 'gone', 'never-stored'], lookup, rows, 'revision');
    expect(result).toEqual({ itemsLost: 0, itemsStale: 0, contentMismatches: 0, unexpectedRows: 0, details: [] });
  });

  it('counts an item with no row as lost', () => {
    const result = checkState(['a', 'b'], lookup, new Map([['a', row(item('a', 3))]]), 'revision');
    expect(result.itemsLost).toBe(1);
    expect(result.details).toEqual(['lost: b']);
  });

  it('counts an older revision, a tombstone of a live item and a live row of a deleted item as stale', () => {
    const rows = new Map<string, Row>([
      ['a', row(item('a', 2))],
      ['b', row(item('b', 7, { meta: { tags: ['x', ''] } }), { deleted: true })],
      ['gone', row(item('gone', 2))],
    ]);
    expect(checkState(['a', 'b', 'gone'], lookup, rows, 'revision').itemsStale).toBe(3);
  });

  it('compares the stored item with the provider item, not only the revision', () => {
    const rows = new Map<string, Row>([
      ['a', row(item('a', 3, { name: 'renamed but same revision' }))],
      ['b', row(item('b', 7, { meta: { tags: ['x'] } }))],
    ]);
    expect(checkState(['a', 'b'], lookup, rows, 'revision').contentMismatches).toBe(2);
  });

  it('reads the revision at a dot path', () => {
    const nested = new Map([['n', { id: 'n', type: 'folder', meta: { rev: 'r-0007' } }]]);
    const ok = checkState(['n'], (id) => nested.get(id), new Map([['n', row(nested.get('n')!, { revision: 'r-0007' })]]), 'meta.rev');
    const stale = checkState(['n'], (id) => nested.get(id), new Map([['n', row(nested.get('n')!, { revision: 'r-0006' })]]), 'meta.rev');
    expect(ok.itemsStale).toBe(0);
    expect(stale.itemsStale).toBe(1);
  });

  it('counts rows of ids never sent as good messages', () => {
    const rows = new Map<string, Row>([
      ['a', row(item('a', 3))],
      ['bad-no-revision', row(item('bad-no-revision', 1))],
    ]);
    expect(checkState(['a'], lookup, rows, 'revision').unexpectedRows).toBe(1);
  });
});

describe('items in the bucket', () => {
  const big = item('big', 4, { blob: 'x'.repeat(10) });
  /** A row pointing to the items bucket (its item elsewhere). */
  function objectRow(id: string, revision: string, key: string, options: { deleted?: boolean } = {}): Row {
    return {
      id: { S: id },
      type: { S: 'file' },
      revision: { S: revision },
      itemObject: { M: { key: { S: key }, size: { N: '100' }, sha256: { S: 'ab'.repeat(32) } } },
      syncedAt: { S: '2026-11-21T10:00:00.000Z' },
      ...(options.deleted ? { deleted: { BOOL: true } } : {}),
    };
  }
  const lookup = (id: string) => (id === 'big' ? big : undefined);

  it('checkState compares a row in the bucket by its object, read back', () => {
    const rows = new Map<string, Row>([['big', objectRow('big', '4', 'items/k1')]]);
    const same = checkState(['big'], lookup, rows, 'revision', new Map([['big', { kind: 'found', item: big }]]));
    const other = checkState(['big'], lookup, rows, 'revision', new Map([['big', { kind: 'found', item: { ...big, blob: 'y' } }]]));
    expect(same).toEqual({ itemsLost: 0, itemsStale: 0, contentMismatches: 0, unexpectedRows: 0, details: [] });
    expect(other.contentMismatches).toBe(1);
    expect(other.details).toEqual(['content differs: big (its object in the items bucket)']);
  });

  it('passes when every row\'s object is there and the bucket holds only those and the explained ones', () => {
    const rows = new Map<string, Row>([
      ['big', objectRow('big', '4', 'items/k1')],
      ['gone', objectRow('gone', '2', 'items/k2', { deleted: true })],
      ['a', row(item('a', 3))],
    ]);
    const reads = new Map([
      ['big', { kind: 'found' as const, item: big }],
      ['gone', { kind: 'found' as const, item: item('gone', 2) }],
    ]);
    const listing = new Map([['items/k1', 100], ['items/k2', 100], ['items/left', 7]]);
    expect(checkObjects(rows, reads, listing, new Set(['items/left']))).toEqual({
      rowsWithObject: 2,
      pointersToNothing: 0,
      objectMismatches: 0,
      orphanedObjects: 0,
      orphansExplained: 1,
      objectsUnchecked: 0,
      details: [],
    });
  });

  it('counts a pointer to nothing, an object not what its row says, an unexplained object and an object it could not read', () => {
    const rows = new Map<string, Row>([
      ['p', objectRow('p', '1', 'items/p')],
      ['m', objectRow('m', '1', 'items/m')],
      ['u', objectRow('u', '1', 'items/u')],
    ]);
    const reads = new Map([
      ['p', { kind: 'missing' as const }],
      ['m', { kind: 'mismatch' as const, why: '99 bytes, the row says 100' }],
      ['u', { kind: 'unreadable' as const, error: 'ECONNREFUSED' }],
    ]);
    const result = checkObjects(rows, reads, new Map([['items/m', 99], ['items/u', 100], ['items/stray', 5]]), new Set());
    expect(result).toMatchObject({ rowsWithObject: 3, pointersToNothing: 1, objectMismatches: 1, orphanedObjects: 1, objectsUnchecked: 1 });
    expect(result.details).toEqual([
      'pointer to nothing: p -> items/p',
      'object not what its row says: m (99 bytes, the row says 100)',
      'object not read: u (ECONNREFUSED)',
      'object no row points to: items/stray',
    ]);
  });

  it('says so when the bucket cannot be listed (never passes silently)', () => {
    const result = checkObjects(new Map(), new Map(), { error: 'NoSuchBucket: gone' }, new Set());
    expect(result.objectsUnchecked).toBe(1);
    expect(result.details).toEqual(['the items bucket could not be listed (NoSuchBucket: gone): objects no row points to were not looked for']);
  });

  it('reads the keys the sync logged as left in the bucket', () => {
    const output = [
      JSON.stringify({ level: 'WARN', message: 'item object left in the bucket', itemId: 'a', objectKey: 'items/a1' }),
      JSON.stringify({ level: 'INFO', message: 'item object deleted', itemId: 'b', objectKey: 'items/b1' }),
      'not json',
    ].join('\n');
    expect(objectsLeftInLogs(output)).toEqual(['items/a1']);
  });
});

describe('checkWrites', () => {
  it('counts a state written twice for an id as an excess write', () => {
    const result = checkWrites([
      { id: 'a', state: 'live:1', operation: 'PutItem' },
      { id: 'a', state: 'live:2', operation: 'PutItem' },
      { id: 'b', state: 'live:1', operation: 'PutItem' },
      { id: 'a', state: 'deleted:2', operation: 'UpdateItem' },
      { id: 'a', state: 'live:2', operation: 'PutItem' },
      { id: 'b', state: 'live:1', operation: 'PutItem' },
    ]);
    expect(result).toMatchObject({ writes: 6, distinctStates: 4, excessWrites: 2 });
    expect(result.details).toHaveLength(2);
  });

  it('finds none when every write stores a new state', () => {
    expect(checkWrites([{ id: 'a', state: 'live:1', operation: 'PutItem' }, { id: 'a', state: 'deleted:1', operation: 'UpdateItem' }]).excessWrites).toBe(0);
  });
});

describe('checkDeadLetters', () => {
  const expected = new Map([
    ['m-1', { what: 'empty id', expected: /the item id is empty/ }],
    ['m-2', { what: 'provider 400', expected: /HTTP 400/ }],
  ]);
  const entry = (sourceMessageId: string, reason: string, source: DeadLetterEntry['source'] = 'handler'): DeadLetterEntry => ({
    source,
    body: '{"id": ""}',
    sourceMessageId,
    reason,
    attributes: { error: reason, sourceMessageId },
    at: 0,
  });

  it('passes when exactly the expected messages are dead-lettered with their reasons (duplicates allowed)', () => {
    const result = checkDeadLetters(
      [entry('m-1', 'the item id is empty'), entry('m-2', 'the provider cannot serve it (HTTP 400)'), entry('m-1', 'the item id is empty')],
      expected,
    );
    expect(result).toMatchObject({ expected: 2, bad: 2, unexpected: 0, wrongReason: 0, missing: 0 });
    expect(result.byReason.map((r) => [r.what, r.entries])).toEqual([
      ['empty id', 2],
      ['provider 400', 1],
    ]);
  });

  it('counts any other dead letter as unexpected, a redrive or another reason as wrong, and a missing one', () => {
    const result = checkDeadLetters(
      [entry('m-1', 'maxReceiveCount exceeded', 'redrive'), entry('m-9', 'the provider failed (HTTP 503)'), entry('m-9', 'maxReceiveCount exceeded', 'redrive')],
      expected,
    );
    expect(result).toMatchObject({ expected: 0, unexpected: 2, wrongReason: 1, missing: 1 });
    expect(result.byReason.find((r) => r.what.startsWith('UNEXPECTED'))).toBeDefined();
  });
});

describe('tokens', () => {
  it('counts every occurrence of every token in every text', () => {
    expect(countTokens(['at-0123456789', 'rt-abcdefghij'], ['{"auth":"Bearer at-0123456789"} at-0123456789', 'rt-abcdefghij', 'clean'])).toBe(3);
    expect(countTokens(['short'], ['short short'])).toBe(0);
  });

  it('collects the tokens the connections table holds', () => {
    expect(
      tokensInConnections([
        { connection: { S: 'default' }, clientId: { S: 'client' }, refreshToken: { S: 'rt-0123456789' }, accessToken: { S: 'at-0123456789' } },
        { connection: { S: 'other' }, refreshToken: { S: 'short' } },
        { connection: { S: 'removed' }, status: { S: 'removed' } },
      ]),
    ).toEqual(['at-0123456789', 'rt-0123456789']);
  });
});

describe('mostAtOnce', () => {
  it('counts requests in flight together; one answered when the next arrives is not', () => {
    expect(mostAtOnce([], 0)).toBe(0);
    expect(mostAtOnce([[0, 10], [10, 20], [20, 30]], 100)).toBe(1);
    expect(mostAtOnce([[0, 10], [5, 20], [9, 12], [30, 31]], 100)).toBe(3);
    // One never answered stays open until the end.
    expect(mostAtOnce([[0, undefined], [50, 60]], 100)).toBe(2);
  });
});

describe('checkCredentials', () => {
  const live = { authorized: true, liveRefreshTokens: ['rt-now'], replays: 0 };

  it('holds when the connection is active with the refresh token the provider takes', () => {
    expect(checkCredentials({ status: 'active', refreshToken: 'rt-now' }, live)).toEqual({ refreshTokensLost: 0, details: [] });
  });

  it('catches a lost rotation, a replay, a revoked grant, a connection that is not active or missing', () => {
    expect(checkCredentials({ status: 'active', refreshToken: 'rt-before' }, live).refreshTokensLost).toBe(1);
    expect(checkCredentials({ status: 'active', refreshToken: 'rt-now' }, { ...live, replays: 1 }).details).toEqual(['a rotated-away refresh token was presented again 1 time(s)']);
    expect(checkCredentials({ status: 'active', refreshToken: 'rt-now' }, { ...live, authorized: false }).refreshTokensLost).toBe(1);
    expect(checkCredentials({ status: 'failing', refreshToken: 'rt-now' }, live).details).toEqual(['the connection is failing, not active']);
    expect(checkCredentials(undefined, live).refreshTokensLost).toBe(1);
  });
});
