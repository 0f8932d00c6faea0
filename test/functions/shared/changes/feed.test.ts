/**
 * The feed's reading rule (functions/shared/changes/feed.ts) on a log held in memory: cursors,
 * replay, the head read first, expiry (a missing or expired next change), an erased log's epoch,
 * and cursors this API never gave. The log as DynamoDB holds it, written by the item sync, is in
 * test/functions/client-api/changes.test.ts.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import {
  decodeFeedCursor,
  encodeFeedCursor,
  readChanges,
  SETTLE_WAITS_MS,
  SNAPSHOT_OVERLAP,
  SNAPSHOT_OVERLAP_SECONDS,
  snapshotPlace,
  type ChangeRecord,
  type ChangesLog,
  type LogHead,
} from '../../../../functions/shared/changes/feed.js';

const NOW = 1_800_000_000;

/** Every wait the reader asked for (ms), and what runs during a wait (a change being applied, say). */
let waits: number[] = [];
let duringWait: () => void = () => undefined;
const sleep = async (ms: number): Promise<void> => {
  waits.push(ms);
  duringWait();
};

beforeEach(() => {
  waits = [];
  duringWait = () => undefined;
});

/** A log in memory: `heads` and `records` as the table would hold them; the calls recorded. */
class MemoryLog implements ChangesLog {
  readonly calls: string[] = [];
  constructor(
    public heads: Map<string, LogHead> = new Map(),
    public records: ChangeRecord[] = [],
  ) {}
  async head(connection: string): Promise<LogHead | undefined> {
    this.calls.push(`head ${connection}`);
    return this.heads.get(connection);
  }
  async range(connection: string, from: number, to: number, limit: number): Promise<ChangeRecord[]> {
    this.calls.push(`range ${connection} ${from}-${to} limit ${limit}`);
    return this.records.filter((record) => record.id.startsWith(`${connection}:`) && record.seq >= from && record.seq <= to).slice(0, limit);
  }
}

function record(connection: string, seq: number, overrides: Partial<ChangeRecord> = {}): ChangeRecord {
  return {
    seq,
    change: seq === 1 ? 'created' : 'updated',
    id: `${connection}:item-${seq}`,
    type: 'file',
    revision: String(seq),
    previousRevision: seq === 1 ? null : String(seq - 1),
    syncedAt: new Date((NOW - 100 + seq) * 1000).toISOString(),
    expiresAt: NOW + 1000,
    ...overrides,
  };
}

/** acme: 5 changes, epoch E1. */
function acmeLog(): MemoryLog {
  return new MemoryLog(new Map([['acme', { head: 5, epoch: 'E1' }]]), [1, 2, 3, 4, 5].map((seq) => record('acme', seq)));
}

const cursorOf = (seq: number, epoch = 'E1', connection = 'acme') => encodeFeedCursor({ connection, epoch, seq });

describe('feed cursors', () => {
  it('round-trip, opaque (base64url)', () => {
    const cursor = cursorOf(42);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeFeedCursor(cursor)).toEqual({ connection: 'acme', epoch: 'E1', seq: 42 });
  });

  it.each([
    ['empty', ''],
    ['not base64url', 'abc$'],
    ['not JSON', Buffer.from('{"v":1,').toString('base64url')],
    ['another version', Buffer.from(JSON.stringify({ v: 2, c: 'acme', e: 'E1', s: 1 })).toString('base64url')],
    ['a negative number', Buffer.from(JSON.stringify({ v: 1, c: 'acme', e: 'E1', s: -1 })).toString('base64url')],
    ['a fraction', Buffer.from(JSON.stringify({ v: 1, c: 'acme', e: 'E1', s: 1.5 })).toString('base64url')],
    ['a number as text', Buffer.from(JSON.stringify({ v: 1, c: 'acme', e: 'E1', s: '1' })).toString('base64url')],
    ['no epoch but a number', Buffer.from(JSON.stringify({ v: 1, c: 'acme', e: '', s: 3 })).toString('base64url')],
    ['too long', 'A'.repeat(513)],
  ])('refuses %s', (_name, cursor) => {
    expect(decodeFeedCursor(cursor)).toBeUndefined();
  });
});

describe('readChanges', () => {
  it('from the start (no cursor): the changes in order, each with its cursor; next is the last one; the head read before the changes', async () => {
    const log = acmeLog();
    const page = await readChanges(log, 'acme', undefined, 3, NOW, sleep);
    expect(page).toEqual({
      ok: true,
      changed: false,
      value: {
        changes: [1, 2, 3].map((seq) => {
          const { seq: _seq, expiresAt: _expiresAt, ...change } = record('acme', seq);
          return { ...change, cursor: cursorOf(seq) };
        }),
        next: cursorOf(3),
      },
    });
    expect(log.calls).toEqual(['head acme', 'range acme 1-3 limit 3']);
  });

  it('replayable: the same cursor read again answers the same changes; reading on from next answers the rest, then nothing', async () => {
    const log = acmeLog();
    const first = await readChanges(log, 'acme', cursorOf(1), 2, NOW, sleep);
    const again = await readChanges(log, 'acme', cursorOf(1), 2, NOW, sleep);
    expect(again).toEqual(first);
    if (!first.ok) throw new Error('refused');
    expect(first.value.changes.map((change) => change.revision)).toEqual(['2', '3']);
    const rest = await readChanges(log, 'acme', first.value.next, 100, NOW, sleep);
    if (!rest.ok) throw new Error('refused');
    expect(rest.value.changes.map((change) => change.revision)).toEqual(['4', '5']);
    // Only up to the head is asked for.
    expect(log.calls.at(-1)).toBe('range acme 4-5 limit 100');
    const end = await readChanges(log, 'acme', rest.value.next, 100, NOW, sleep);
    expect(end).toEqual({ ok: true, changed: false, value: { changes: [], next: cursorOf(5) } });
  });

  it("never past the head read first: a change committed after it (numbered above it) waits for the next read", async () => {
    const log = acmeLog();
    // Change 6 is in the table, the head read says 5 (6 committed after the read: the next read has it).
    log.records.push(record('acme', 6));
    const page = await readChanges(log, 'acme', cursorOf(4), 100, NOW, sleep);
    if (!page.ok) throw new Error('refused');
    expect(page.value.changes.map((change) => change.revision)).toEqual(['5']);
    expect(log.calls.at(-1)).toBe('range acme 5-5 limit 100');
  });

  it('a connection without a log: nothing, and a cursor before its first change that reads it once it is there', async () => {
    const log = new MemoryLog();
    const empty = await readChanges(log, 'acme', undefined, 100, NOW, sleep);
    if (!empty.ok) throw new Error('refused');
    expect(empty.value).toEqual({ changes: [], next: encodeFeedCursor({ connection: 'acme', epoch: '', seq: 0 }) });
    expect(log.calls).toEqual(['head acme']);
    log.heads.set('acme', { head: 1, epoch: 'E9' });
    log.records.push(record('acme', 1));
    const later = await readChanges(log, 'acme', empty.value.next, 100, NOW, sleep);
    if (!later.ok) throw new Error('refused');
    expect(later.value.changes.map((change) => change.cursor)).toEqual([cursorOf(1, 'E9')]);
  });

  it('expired: the next change past its expiresAt, or gone from the table, is a 410 cursor-expired; so is the start once change 1 is gone', async () => {
    const log = acmeLog();
    log.records[0] = record('acme', 1, { expiresAt: NOW });
    const expired = await readChanges(log, 'acme', undefined, 100, NOW, sleep);
    expect(expired).toEqual({ ok: false, code: 'cursor-expired', message: 'the changes after that cursor have expired (they are kept changesRetentionDays days): read a snapshot again' });
    // Past its expiresAt: expired at once, no wait.
    expect(waits).toEqual([]);
    log.records.splice(0, 2);
    // Gone from the table: read again after each wait (it might have been being applied), then expired.
    expect(await readChanges(log, 'acme', cursorOf(1), 100, NOW, sleep)).toMatchObject({ ok: false, code: 'cursor-expired' });
    expect(waits).toEqual([...SETTLE_WAITS_MS]);
    expect(log.calls.filter((call) => call === 'range acme 2-5 limit 100')).toHaveLength(SETTLE_WAITS_MS.length + 1);
    // Change 3 on is kept: a cursor at 2 reads it.
    const kept = await readChanges(log, 'acme', cursorOf(2), 100, NOW, sleep);
    if (!kept.ok) throw new Error('refused');
    expect(kept.value.changes.map((change) => change.revision)).toEqual(['3', '4', '5']);
  });

  it("a missing change inside the range ends the read before it (never skipped); the next read from there is refused as expired", async () => {
    const log = acmeLog();
    log.records.splice(2, 1);
    const page = await readChanges(log, 'acme', undefined, 100, NOW, sleep);
    if (!page.ok) throw new Error('refused');
    expect(page.value.changes.map((change) => change.revision)).toEqual(['1', '2']);
    // Inside the range, no wait: the read ends before it.
    expect(waits).toEqual([]);
    expect(await readChanges(log, 'acme', page.value.next, 100, NOW, sleep)).toMatchObject({ ok: false, code: 'cursor-expired' });
    expect(waits).toEqual([...SETTLE_WAITS_MS]);
  });

  it('a next change not there yet below the head (DynamoDB still applying its transaction) is read after a wait, never refused as expired', async () => {
    const log = acmeLog();
    const [third] = log.records.splice(2, 1);
    const page = await readChanges(log, 'acme', undefined, 100, NOW, sleep);
    if (!page.ok) throw new Error('refused');
    expect(page.value.changes.map((change) => change.revision)).toEqual(['1', '2']);
    // Applied during the second wait.
    let waited = 0;
    duringWait = () => {
      waited += 1;
      if (waited === 2) log.records.splice(2, 0, third!);
    };
    const rest = await readChanges(log, 'acme', page.value.next, 100, NOW, sleep);
    if (!rest.ok) throw new Error(rest.message);
    expect(rest.value.changes.map((change) => change.revision)).toEqual(['3', '4', '5']);
    expect(waits).toEqual(SETTLE_WAITS_MS.slice(0, 2));
  });

  it('a log erased since the cursor was given (another epoch): 410 cursor-expired', async () => {
    const log = acmeLog();
    expect(await readChanges(log, 'acme', cursorOf(2, 'E0'), 100, NOW, sleep)).toEqual({
      ok: false,
      code: 'cursor-expired',
      message: 'the changes after that cursor are gone: the connection was erased since it was given; read a snapshot again',
    });
  });

  it.each([
    ['malformed', 'not-a-cursor'],
    ["another connection's", cursorOf(2, 'E1', 'other')],
    ['ahead of the head', cursorOf(6)],
  ])("a cursor this API did not give for it (%s): 400 bad-request, the message quoting no cursor", async (_name, cursor) => {
    const log = acmeLog();
    const refused = await readChanges(log, 'acme', cursor, 100, NOW, sleep);
    expect(refused).toEqual({
      ok: false,
      code: 'bad-request',
      message: "the cursor is not one this API gave for this connection: pass a cursor from this connection's changes or snapshot as it was",
    });
    if (!refused.ok) expect(refused.message).not.toContain(cursor);
  });
});

describe('snapshotPlace: where a snapshot\'s feed continues', () => {
  it('before the last kept changes, at most SNAPSHOT_OVERLAP: from the log\'s start when it holds fewer', async () => {
    expect(await snapshotPlace(acmeLog(), 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 0 });
    const records = Array.from({ length: 150 }, (_, i) => record('acme', i + 1));
    const log = new MemoryLog(new Map([['acme', { head: 150, epoch: 'E1' }]]), records);
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 150 - SNAPSHOT_OVERLAP });
    expect(log.calls).toEqual(['head acme', `range acme ${150 - SNAPSHOT_OVERLAP + 1}-150 limit ${SNAPSHOT_OVERLAP}`]);
    expect(waits).toEqual([]);
  });

  it('never before an expired or missing change (its feed would be 410): after the run of kept changes that ends at the head', async () => {
    const log = acmeLog();
    log.records[1] = record('acme', 2, { expiresAt: NOW });
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 2 });
    log.records.splice(2, 1);
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 3 });
    // The feed from there reads the kept ones.
    const page = await readChanges(log, 'acme', cursorOf(3), 100, NOW, sleep);
    if (!page.ok) throw new Error(page.message);
    expect(page.value.changes.map((change) => change.revision)).toEqual(['4', '5']);
  });

  it('the head\'s own change not there yet: read again after a wait, and the feed starts before it; gone for good (expired): the head', async () => {
    const log = acmeLog();
    const [fifth] = log.records.splice(4, 1);
    duringWait = () => log.records.push(fifth!);
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 0 });
    expect(waits).toEqual([SETTLE_WAITS_MS[0]]);
    // A quiet connection whose changes all expired (TTL deleted them): nothing to read again.
    const quiet = new MemoryLog(new Map([['acme', { head: 5, epoch: 'E1' }]]), []);
    waits = [];
    duringWait = () => undefined;
    expect(await snapshotPlace(quiet, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 5 });
    expect(waits).toEqual([...SETTLE_WAITS_MS]);
  });

  it('only changes written within SNAPSHOT_OVERLAP_SECONDS: a quiet connection\'s older ones are not read again (a cursor before them would expire with them)', async () => {
    const log = acmeLog();
    const old = (seq: number) => new Date((NOW - SNAPSHOT_OVERLAP_SECONDS - seq) * 1000).toISOString();
    for (const seq of [1, 2, 3]) log.records[seq - 1] = record('acme', seq, { syncedAt: old(seq) });
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 3 });
    // Exactly SNAPSHOT_OVERLAP_SECONDS old is recent still.
    log.records[2] = record('acme', 3, { syncedAt: new Date((NOW - SNAPSHOT_OVERLAP_SECONDS) * 1000).toISOString() });
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 2 });
    // All of them old (a quiet connection): the head, nothing read again, no wait.
    for (const seq of [4, 5]) log.records[seq - 1] = record('acme', seq, { syncedAt: old(seq) });
    log.records[2] = record('acme', 3, { syncedAt: old(3) });
    expect(await snapshotPlace(log, 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: 'E1', seq: 5 });
    expect(waits).toEqual([]);
  });

  it('a connection without a log: its start, no epoch', async () => {
    expect(await snapshotPlace(new MemoryLog(), 'acme', NOW, sleep)).toEqual({ connection: 'acme', epoch: '', seq: 0 });
  });
});
