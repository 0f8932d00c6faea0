/**
 * A connection's changes feed (docs/changes.md): reading the changes log from a cursor. No AWS
 * import: the log is the ChangesLog port (functions/shared/adapters/dynamodb-changes-log.ts).
 *
 * The log (written by the changes writer from the items table's stream,
 * functions/shared/changes/sequencer.ts): each change of a connection's rows has a sequence number,
 * 1, 2, 3… with no number skipped, and the head row holds the last one. The change rows are written
 * before the head moves over them, and the head's move is conditional on the head the writer read,
 * so the head never counts a change that is not there. Hence the rule that makes the feed gap-free:
 * read the head first (strongly consistent), then the changes up to it; every change at or below
 * the head is already there. A cursor is a place in that sequence: the changes after it are the
 * ones with a greater number, the same ones every time it is read, until they expire.
 *
 * A cursor names its connection and the log's epoch (a random value fixed by the log's first
 * change; an erased connection's log goes with it, and a new one has a new epoch). A cursor is
 * refused with:
 * - 400 `bad-request` when it is not one this API gave: malformed, of another connection, ahead of
 *   the head;
 * - 410 `cursor-expired` when the changes after it are gone: older than changesRetentionDays (its
 *   next change is missing or past its `expiresAt`), or its log was erased since.
 *
 * One more thing a reader allows for: DynamoDB applies a committed transaction's items one by one,
 * and a Query is read-committed with a transaction, not serializable. For a few milliseconds a read
 * may find the head moved and its change, or its items-table row, not there yet. So a change missing
 * below the head is read again after short waits (SETTLE_WAITS_MS) before it is taken for expired,
 * and a snapshot's feed starts before the last changes (SNAPSHOT_OVERLAP), not at the head.
 */
import type { Outcome } from '../connections/outcome.js';
import type { ChangeKind } from './transition.js';

/** A change as the log holds it. */
export interface ChangeRecord {
  seq: number;
  change: ChangeKind;
  id: string;
  type: string | null;
  revision: string;
  previousRevision: string | null;
  syncedAt: string;
  /** When the change leaves the log (epoch seconds): it is not read once this is past. */
  expiresAt: number;
}

/** A connection's head: its last change's number and the log's epoch. */
export interface LogHead {
  head: number;
  epoch: string;
}

export interface ChangesLog {
  /** The connection's head, strongly consistent; undefined before its first change. */
  head(connection: string): Promise<LogHead | undefined>;
  /**
   * The changes numbered `from` to `to` that the log still holds, strongly consistent, in order,
   * at most `limit` of them (fewer when a page of the store is full).
   */
  range(connection: string, from: number, to: number, limit: number): Promise<ChangeRecord[]>;
}

/** A change as the feed answers it (contract: `GET /connections/{connection}/changes`). */
export interface FeedChange extends Omit<ChangeRecord, 'seq' | 'expiresAt'> {
  /** Where the feed continues after this change. */
  cursor: string;
}

export interface FeedPage {
  changes: FeedChange[];
  /** Where the next read continues: the last change's cursor, or the cursor read from when there was none. */
  next: string;
}

/** A place in a connection's log. The epoch is '' before the log's first change. */
export interface FeedPlace {
  connection: string;
  epoch: string;
  seq: number;
}

const CURSOR_VERSION = 1;

/**
 * The waits, in ms, before a change missing below the head is taken for expired: still missing
 * after them, TTL deleted it; there after one, it was being applied.
 */
export const SETTLE_WAITS_MS: readonly number[] = [50, 200, 750];

/**
 * The last changes a snapshot's feed reads again, at most: its `changesCursor` is before them, so a
 * change whose transaction was still being applied while the snapshot's rows were read is in its
 * feed. Only changes written within SNAPSHOT_OVERLAP_SECONDS of the read: an older one is applied
 * long since, and a cursor before it would expire with it, soon perhaps. Applied again in order,
 * the changes read again leave the copy as the feed's end has it.
 */
export const SNAPSHOT_OVERLAP = 100;

/**
 * How recent (by its `syncedAt`, the sync's clock when it built the row) a change a snapshot's feed
 * reads again is: longer than a write takes from building its row to its commit and any clock skew
 * between containers. (A change numbered after the snapshot's head was read has a higher number
 * than its cursor, however late the changes writer numbered it.)
 */
export const SNAPSHOT_OVERLAP_SECONDS = 300;

/** Waits `ms` (real time unless a test or a simulation gives its own). */
export type Sleep = (ms: number) => Promise<void>;

/** The log's changes as `read` answers them, read again after each of SETTLE_WAITS_MS until `ready`. */
async function settled(read: () => Promise<ChangeRecord[]>, ready: (records: ChangeRecord[]) => boolean, sleep: Sleep): Promise<ChangeRecord[]> {
  let records = await read();
  for (const ms of SETTLE_WAITS_MS) {
    if (ready(records)) return records;
    await sleep(ms);
    records = await read();
  }
  return records;
}

/** A place as the opaque cursor the API answers: base64url of a small JSON object. */
export function encodeFeedCursor(place: FeedPlace): string {
  return Buffer.from(JSON.stringify({ v: CURSOR_VERSION, c: place.connection, e: place.epoch, s: place.seq }), 'utf8').toString('base64url');
}

/** An opaque cursor's JSON object (base64url, at most `maxLength` characters), or undefined when it is none. */
export function cursorFields(cursor: string, maxLength: number): Record<string, unknown> | undefined {
  if (cursor.length === 0 || cursor.length > maxLength || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The place a cursor names, or undefined when it is not a cursor this API makes. */
export function decodeFeedCursor(cursor: string): FeedPlace | undefined {
  const fields = cursorFields(cursor, 512);
  if (!fields) return undefined;
  const { v, c, e, s } = fields;
  if (v !== CURSOR_VERSION || typeof c !== 'string' || typeof e !== 'string' || typeof s !== 'number') return undefined;
  if (!Number.isSafeInteger(s) || s < 0 || (e === '' && s !== 0)) return undefined;
  return { connection: c, epoch: e, seq: s };
}

/** The place where the feed continues after everything committed now: the head. */
export function placeOfHead(connection: string, head: LogHead | undefined): FeedPlace {
  return { connection, epoch: head?.epoch ?? '', seq: head?.head ?? 0 };
}

const NOT_OURS = 'the cursor is not one this API gave for this connection: pass a cursor from this connection\'s changes or snapshot as it was';

/**
 * Where a snapshot's feed continues: before the run of kept changes that ends at the head, written
 * within SNAPSHOT_OVERLAP_SECONDS, at most SNAPSHOT_OVERLAP of them (the head itself when there is
 * none, or before the first change).
 */
export async function snapshotPlace(log: ChangesLog, connection: string, nowSeconds: number, sleep: Sleep): Promise<FeedPlace> {
  const head = await log.head(connection);
  const place = placeOfHead(connection, head);
  if (!head) return place;
  const from = Math.max(1, head.head - SNAPSHOT_OVERLAP + 1);
  const records = await settled(() => log.range(connection, from, head.head, SNAPSHOT_OVERLAP), (read) => read.at(-1)?.seq === head.head, sleep);
  const recentMs = (nowSeconds - SNAPSHOT_OVERLAP_SECONDS) * 1000;
  let seq = head.head;
  for (let i = records.length - 1; i >= 0; i -= 1) {
    const record = records[i]!;
    if (record.seq !== seq || record.expiresAt <= nowSeconds || !(Date.parse(record.syncedAt) >= recentMs)) break;
    seq -= 1;
  }
  return { ...place, seq };
}

/**
 * The changes after `after` (a cursor; undefined: from the log's first change), at most `limit`.
 * `nowSeconds`: the time, to leave out what has expired.
 */
export async function readChanges(
  log: ChangesLog,
  connection: string,
  after: string | undefined,
  limit: number,
  nowSeconds: number,
  sleep: Sleep,
): Promise<Outcome<FeedPage>> {
  const from = after === undefined ? { connection, epoch: '', seq: 0 } : decodeFeedCursor(after);
  if (from === undefined || from.connection !== connection) return { ok: false, code: 'bad-request', message: NOT_OURS };
  const head = await log.head(connection);
  const now = placeOfHead(connection, head);
  if (from.epoch !== '' && from.epoch !== now.epoch) {
    return { ok: false, code: 'cursor-expired', message: 'the changes after that cursor are gone: the connection was erased since it was given; read a snapshot again' };
  }
  if (from.seq > now.seq) return { ok: false, code: 'bad-request', message: NOT_OURS };
  const place = { ...from, epoch: now.epoch };
  if (from.seq === now.seq) return { ok: true, value: { changes: [], next: encodeFeedCursor(place) }, changed: false };

  const first = from.seq + 1;
  const records = await settled(() => log.range(connection, first, Math.min(now.seq, from.seq + limit), limit), (read) => read[0]?.seq === first, sleep);
  const changes: FeedChange[] = [];
  let expected = from.seq + 1;
  for (const record of records) {
    // Numbers follow one another; one missing or expired ends the read where it is (the next read
    // from there is then refused as expired rather than skipping it).
    if (record.seq !== expected || record.expiresAt <= nowSeconds) break;
    changes.push({
      change: record.change,
      id: record.id,
      type: record.type,
      revision: record.revision,
      previousRevision: record.previousRevision,
      syncedAt: record.syncedAt,
      cursor: encodeFeedCursor({ ...place, seq: record.seq }),
    });
    expected += 1;
  }
  if (changes.length === 0) {
    return {
      ok: false,
      code: 'cursor-expired',
      message: 'the changes after that cursor have expired (they are kept changesRetentionDays days): read a snapshot again',
    };
  }
  return { ok: true, value: { changes, next: changes[changes.length - 1]!.cursor }, changed: false };
}
