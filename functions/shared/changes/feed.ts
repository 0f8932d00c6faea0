/**
 * A connection's changes feed (docs/changes.md): reading the changes log from a cursor. No AWS
 * import: the log is the ChangesLog port (functions/shared/adapters/dynamodb-changes-log.ts).
 *
 * The log (written by the item sync, functions/item-sync/adapters/change-outbox.ts): each change
 * of a connection's rows has a sequence number, 1, 2, 3… with no number skipped, and the head row
 * holds the last one. A change and the head that counts it are committed in one transaction with
 * the row they describe, and the head's update is conditional on the head the writer read, so
 * change n + 1 can only commit after change n did. Hence the rule that makes the feed gap-free:
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
 */
import type { Outcome } from '../connections/operations.js';
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
 * The changes after `after` (a cursor; undefined: from the log's first change), at most `limit`.
 * `nowSeconds`: the time, to leave out what has expired.
 */
export async function readChanges(log: ChangesLog, connection: string, after: string | undefined, limit: number, nowSeconds: number): Promise<Outcome<FeedPage>> {
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

  const records = await log.range(connection, from.seq + 1, Math.min(now.seq, from.seq + limit), limit);
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
