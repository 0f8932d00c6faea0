/**
 * Mending a connection's changes feed from the items table (docs/changes.md, "When a change is
 * missing"): the changes a feed lacks because their stream records were never numbered (they left
 * the stream's 24 hours unnumbered, or could not be read) are appended at the feed's end, numbered
 * by the changes writer's own sequencer (sequencer.ts), so that each row's last change in the feed
 * says what the table holds. No AWS import: the rows, the log and the log's writer are ports.
 *
 * 1. The feed is read from its first kept change to its head (expired changes left out), and each
 *    id's last change kept.
 * 2. Each row of the connection is compared with its id's last change by the rule of every change
 *    (transition.ts `changeKindOf`): a row the last change does not account for is missing its
 *    change. An id with no change kept is compared as a row without a before (created, or deleted
 *    for a tombstone), as a stream record without an old image is.
 * 3. Only rows whose last write is settled are compared: written at least MEND_SETTLED_AFTER_MS ago
 *    (the stream's 24 hours and an hour: a later write's record may still be on its way to the
 *    writer), and within the feed's retention less an hour (an older write's change may have
 *    expired, as it should). The others are counted, never mended.
 * 4. Each row to mend is read again (strongly consistent) just before its change is appended, and
 *    left alone when it was written since: the connection is paused or failing (operations.ts
 *    refuses otherwise), so only a write already in flight at the pause can come.
 * 5. The changes are appended oldest write first, each with the row's `syncedAt`, `revision` and
 *    `type`; `previousRevision` is the last change's revision. Their source is the mend (`src`
 *    MEND_SOURCE, `srcAt` the mend's start, the writer token `mend-…`): below any stream record, so
 *    they never move the head's `lastSrc`, and looked up by identity before they are numbered, so
 *    a mend run twice, or two at once, appends each change once.
 *
 * An intermediate write whose change is missing but whose row was written again since (and that
 * later write numbered) is not recreated: the feed's later change names its previousRevision, and
 * the feed ends where the table is.
 */
import { randomBytes } from 'node:crypto';
import type { ChangesLog } from './feed.js';
import type { ChangeSequencer, StreamedChange } from './sequencer.js';
import { changeKindOf, type ChangeKind } from './transition.js';

const HOUR_MS = 3_600_000;
/** How long the items table's stream holds a record (DynamoDB Streams: 24 hours). */
export const STREAM_RETENTION_MS = 24 * HOUR_MS;
/** A row written more recently may still have its record on its way to the writer: not mended. */
export const MEND_SETTLED_AFTER_MS = STREAM_RETENTION_MS + HOUR_MS;
/** A row written within this much of the feed's retention may have had its change expire already: not mended. */
export const MEND_RETENTION_MARGIN_MS = HOUR_MS;
/** The `src` of a mended change: below every stream record's SequenceNumber. */
export const MEND_SOURCE = '0';
/** Changes read from the log, rows read from the table, a page. */
const PAGE = 1_000;

/** A row of the items table as the mend compares it. */
export interface MendRow {
  id: string;
  type: string;
  revision: string;
  syncedAt: string;
  deleted?: boolean;
}

/** The connection's rows (the client API's ItemRows port has this shape). */
export interface MendRows {
  /** The row of `id` (strongly consistent), undefined when there is none. */
  get(connection: string, id: string): Promise<MendRow | undefined>;
  /** The rows in id order after `afterId`, at most `limit`; `lastId` when there may be more. */
  page(connection: string, afterId: string | undefined, limit: number): Promise<{ rows: MendRow[]; lastId?: string }>;
}

export interface MendPorts {
  rows: MendRows;
  log: ChangesLog;
  /** The changes writer's sequencer over the changes table, its changes kept `retentionDays` (the feed's own). */
  sequencer: (retentionDays: number) => ChangeSequencer;
  now: () => number;
  /** Asked before a new log is started (the connection has no head yet). */
  mayStart?: () => Promise<boolean>;
}

export interface MendSettings {
  /**
   * `changesRetentionDays`, when the feed keeps no change to read it from: each change row expires
   * `changesRetentionDays` after its `syncedAt`, so a kept change says the deployment's.
   */
  retentionDays: number;
}

/** What a mend did (the CLI prints it). */
export interface MendResult {
  connection: string;
  /** Rows read. */
  rows: number;
  /** Rows compared with their last change (the settled ones within retention). */
  compared: number;
  /** Rows written within MEND_SETTLED_AFTER_MS: their records may still come. */
  recent: number;
  /** Rows last written before the retention (less MEND_RETENTION_MARGIN_MS): their change may have expired. */
  beyondRetention: number;
  /** Changes the feed lacked, by kind: each appended, or found appended by another mend at once (`already`). */
  missing: Record<ChangeKind, number>;
  /** Changes this mend appended. */
  appended: number;
  /** Changes found numbered already when appended (another mend, at once). */
  already: number;
  /** Rows found missing a change, then written again before it was appended: left to the writer. */
  writtenSince: number;
  /** Changes not appended because the log may not start (the connection is being erased). */
  refused: number;
  /** The feed's head once mended. */
  head: number;
}

/** Mends `connection`'s feed (the caller has checked its status: operations.ts `mendChanges`). */
export async function mendFeed(connection: string, ports: MendPorts, settings: MendSettings): Promise<MendResult> {
  const startedAt = ports.now();
  const { last, retentionDays } = await lastChanges(ports.log, connection, Math.floor(startedAt / 1000));
  const settledBefore = startedAt - MEND_SETTLED_AFTER_MS;
  const retention = retentionDays ?? settings.retentionDays;
  const keptSince = startedAt - retention * 24 * HOUR_MS + MEND_RETENTION_MARGIN_MS;
  const result: MendResult = {
    connection,
    rows: 0,
    compared: 0,
    recent: 0,
    beyondRetention: 0,
    missing: { created: 0, updated: 0, deleted: 0, restored: 0 },
    appended: 0,
    already: 0,
    writtenSince: 0,
    refused: 0,
    head: 0,
  };
  const missing: StreamedChange[] = [];
  let afterId: string | undefined;
  do {
    const page = await ports.rows.page(connection, afterId, PAGE);
    for (const row of page.rows) {
      result.rows += 1;
      const at = Date.parse(row.syncedAt);
      if (!(at <= settledBefore)) {
        result.recent += 1;
        continue;
      }
      if (at < keptSince) {
        result.beyondRetention += 1;
        continue;
      }
      result.compared += 1;
      const change = missingChange(connection, row, last.get(row.id), startedAt);
      if (change) missing.push(change);
    }
    afterId = page.lastId;
  } while (afterId !== undefined);

  const current: StreamedChange[] = [];
  for (const change of missing) {
    const row = await ports.rows.get(connection, change.id);
    if (row?.syncedAt === change.syncedAt && row.revision === change.revision) current.push(change);
    else result.writtenSince += 1;
  }
  current.sort((a, b) => a.syncedAt.localeCompare(b.syncedAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (current.length > 0) {
    const outcome = await ports.sequencer(retention).append(connection, current, {
      writer: `mend-${startedAt}-${randomBytes(6).toString('hex')}`,
      ...(ports.mayStart ? { mayStart: ports.mayStart } : {}),
    });
    result.appended = outcome.numbered;
    result.already = outcome.already;
    result.refused = outcome.refused;
    for (const change of current) result.missing[change.change] += 1;
  }
  result.head = (await ports.log.head(connection))?.head ?? 0;
  return result;
}

/** The change the feed lacks for `row`, or undefined when its last change accounts for it. */
function missingChange(connection: string, row: MendRow, last: LastChange | undefined, startedAt: number): StreamedChange | undefined {
  const before = last === undefined ? undefined : { deleted: last.change === 'deleted', revision: last.revision };
  const change = changeKindOf(before, { deleted: row.deleted === true, revision: row.revision });
  if (change === undefined) return undefined;
  return {
    connection,
    id: row.id,
    change,
    type: row.type,
    revision: row.revision,
    previousRevision: last?.revision ?? null,
    syncedAt: row.syncedAt,
    src: MEND_SOURCE,
    srcAt: Math.floor(startedAt / 1000),
  };
}

interface LastChange {
  change: ChangeKind;
  revision: string;
  syncedAt: string;
}

/** Each id's last change kept in the feed (not expired at `nowSeconds`), and the retention its rows were written with. */
async function lastChanges(log: ChangesLog, connection: string, nowSeconds: number): Promise<{ last: Map<string, LastChange>; retentionDays: number | undefined }> {
  const last = new Map<string, LastChange>();
  let retentionDays: number | undefined;
  const head = await log.head(connection);
  if (!head) return { last, retentionDays };
  let from = 1;
  while (from <= head.head) {
    const records = await log.range(connection, from, head.head, PAGE);
    if (records.length === 0) break;
    for (const record of records) {
      if (record.expiresAt <= nowSeconds) continue;
      last.set(record.id, { change: record.change, revision: record.revision, syncedAt: record.syncedAt });
      const days = Math.round((record.expiresAt * 1000 - Date.parse(record.syncedAt)) / (24 * HOUR_MS));
      if (Number.isFinite(days) && days > 0) retentionDays = Math.max(retentionDays ?? 0, days);
    }
    from = records[records.length - 1]!.seq + 1;
  }
  return { last, retentionDays };
}
