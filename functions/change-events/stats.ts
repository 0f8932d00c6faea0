/**
 * Each connection's counters in the connections table (docs/connections.md: `idsKnown`, the ids
 * the items table holds for it; `lastWriteAt`, its last row write), kept from the stream records a
 * batch is done with. No AWS import: the table is the ConnectionStats port.
 *
 * Per connection of the batch, one update: `created` is the number of its ItemCreated events (a
 * row that appears live; nothing else changes the count: the sync never deletes a row), and
 * `lastWriteAt` the latest `syncedAt` of its INSERT and MODIFY records (every row write, an
 * unchanged revision's included). Only the records before the first one handed back count: those
 * are never delivered again, so a retried batch does not count them twice.
 *
 * Best effort: the events are what matter. A failed update is logged as a warning and never fails
 * the batch; it is not tried again (the count is then short by that batch's creations, the last
 * write older than it is).
 */
import type { Log } from '../shared/ports.js';
import { changeOf } from './change.js';
import type { ConnectionStats, ConnectionStatsUpdate, StreamRecord } from './ports.js';

/** Updates in flight at once. */
export const STATS_CONCURRENCY = 10;

export interface StatsDeps {
  stats: ConnectionStats;
  log: Log;
}

export interface StatsReport {
  written: number;
  unchanged: number;
  failed: number;
}

/** The update of every connection the records name, in the order they first appear. */
export function statsOf(records: readonly StreamRecord[]): ConnectionStatsUpdate[] {
  const byConnection = new Map<string, ConnectionStatsUpdate>();
  for (const record of records) {
    if (record.eventName !== 'INSERT' && record.eventName !== 'MODIFY') continue;
    const image = record.dynamodb?.NewImage;
    const connection = image?.['connection']?.S;
    if (connection === undefined) continue;
    let update = byConnection.get(connection);
    if (!update) byConnection.set(connection, (update = { connection, created: 0 }));
    const syncedAt = image?.['syncedAt']?.S;
    // ISO-8601 UTC times of one format compare as text.
    if (syncedAt !== undefined && (update.lastWriteAt === undefined || syncedAt > update.lastWriteAt)) update.lastWriteAt = syncedAt;
    if (createdBy(record)) update.created += 1;
  }
  return [...byConnection.values()].filter((update) => update.created > 0 || update.lastWriteAt !== undefined);
}

/** Applies the counters of `records` (those the batch is done with); never throws. */
export async function keepConnectionStats(records: readonly StreamRecord[], deps: StatsDeps): Promise<StatsReport> {
  const report: StatsReport = { written: 0, unchanged: 0, failed: 0 };
  const updates = statsOf(records);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < updates.length) {
      const update = updates[next++]!;
      try {
        report[await deps.stats.record(update)] += 1;
      } catch (error) {
        report.failed += 1;
        deps.log.warn("a connection's counters were not updated (idsKnown, lastWriteAt); the events are not affected", {
          connection: update.connection,
          created: update.created,
          ...(update.lastWriteAt !== undefined ? { lastWriteAt: update.lastWriteAt } : {}),
          error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(STATS_CONCURRENCY, updates.length) }, worker));
  return report;
}

/** Whether the record announces ItemCreated (a record that cannot be mapped announces nothing here). */
function createdBy(record: StreamRecord): boolean {
  try {
    return changeOf(record)?.detailType === 'ItemCreated';
  } catch {
    return false;
  }
}
