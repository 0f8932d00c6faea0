/**
 * The changes writer's handler, built from its dependencies (handler.ts builds it once per
 * container from the environment). Fed by the items table's stream (a DynamoDB event source:
 * ReportBatchItemFailures, bisect on error, retried until the records leave the stream, which
 * sends their range to the on-failure queue: infra/changes-writer). It numbers each connection's
 * changes into the changes table (functions/shared/changes/sequencer.ts; docs/changes.md):
 *
 * - each record is read as its row's change by the change events' own rule
 *   (functions/change-events/change.ts `rowChangeOf`); a write that changes nothing, and a REMOVE,
 *   number nothing;
 * - a record that cannot be read as a change (a row the sync did not write) numbers nothing and is
 *   not handed back, so that it never holds its shard's other accounts: an error is logged with its
 *   connection, id and sequence number, and counted (ChangesUnreadable, which alarms); the feed is
 *   mended from the table (docs/changes.md);
 * - a connection whose erase runs or ran numbers nothing more (its log is being deleted): the gate
 *   is read with each batch (a connection found open is taken as open for CHANGES_WRITER_OPEN_KEPT_MS
 *   by the container: kept-open-gate.ts), and again, always read, before a log is started (an erase
 *   may have deleted it meanwhile);
 * - the batch's connections are numbered side by side, each in stream order; a connection whose
 *   changes could not all be numbered for a reason that passes (DynamoDB failing, another writer
 *   holding its head until the deadline) has its first record reported in `batchItemFailures`:
 *   Lambda delivers the batch again from the lowest one reported, and what was numbered is found
 *   numbered. One no retry mends (a head no writer wrote: PermanentError) numbers nothing for that
 *   connection and is counted and logged as unreadable records are, never handed back.
 *
 * One log line per batch; metrics per batch, zeros included (CHANGES_WRITER_METRIC_NAMES).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { MappingError, rowChangeOf } from '../change-events/change.js';
import type { StreamRecord } from '../change-events/ports.js';
import { DynamoDbChangesWriter } from '../shared/adapters/dynamodb-changes-writer.js';
import { ChangeSequencer, type ChangesLogWriter, type StreamedChange } from '../shared/changes/sequencer.js';
import { PermanentError } from '../shared/errors.js';
import type { ChangesWriterConfig } from '../shared/config.js';
import { forEachLimited } from '../shared/limited.js';
import { CHANGES_WRITER_METRIC_NAMES, CHANGES_WRITER_SERVICE } from '../shared/metric-names.js';
import { createLogger, createMetrics, describeError } from '../shared/observability.js';
import { systemClock, type Clock } from '../shared/ports.js';
import { DynamoDbConnectionGate } from './adapters/dynamodb-erase-state.js';
import { KeptOpenGate } from './kept-open-gate.js';
import { CHANGES_WRITER_OPEN_KEPT_MS, CHANGES_WRITER_STALE_AFTER_MS } from './limits.js';
import type { ConnectionGate } from './ports.js';

/** Connections of one batch numbered at once. */
export const CONNECTIONS_IN_FLIGHT = 8;
/** Time kept back from the invocation's remaining time: no wait for a head ends within it. */
export const DEFAULT_SAFETY_MARGIN_MS = 5_000;

export interface ChangesWriterHandlerDeps {
  config: ChangesWriterConfig;
  /** The client of the changes table and the connections table. */
  dynamodb: DynamoDBClient;
  /** Default: the changes table through `dynamodb`. */
  writer?: ChangesLogWriter;
  /** Default: the connections table through `dynamodb` (the row's `erase` only). */
  connections?: ConnectionGate;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  logger?: ReturnType<typeof createLogger>;
  metrics?: ReturnType<typeof createMetrics>;
  /** Kept back from the remaining time; default the smaller of 5 s and a quarter of the remaining time. */
  safetyMarginMs?: number;
}

export type ChangesWriterHandler = (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse>;

/** What one batch came to (the metrics, by CHANGES_WRITER_METRIC_NAMES' keys). */
export type ChangesWriterCounts = Record<keyof typeof CHANGES_WRITER_METRIC_NAMES, number>;

export function createChangesWriterHandler(deps: ChangesWriterHandlerDeps): ChangesWriterHandler {
  const { config } = deps;
  const logger = deps.logger ?? createLogger(CHANGES_WRITER_SERVICE);
  const metrics = deps.metrics ?? createMetrics(CHANGES_WRITER_SERVICE, { stage: config.stage });
  const clock = deps.clock ?? systemClock;
  const now = (): number => clock.now().getTime();
  const writer = deps.writer ?? new DynamoDbChangesWriter(deps.dynamodb, { tableName: config.changesTableName, retentionDays: config.changesRetentionDays });
  const connections = deps.connections ?? new DynamoDbConnectionGate(deps.dynamodb, config.connectionsTableName);
  const batchGate = new KeptOpenGate(connections, now, CHANGES_WRITER_OPEN_KEPT_MS);
  const sequencer = new ChangeSequencer({
    writer,
    now,
    sleep: deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
    random: deps.random ?? Math.random,
    staleAfterMs: CHANGES_WRITER_STALE_AFTER_MS,
  });

  return async function handler(event: DynamoDBStreamEvent, context: Context): Promise<DynamoDBBatchResponse> {
    logger.addContext(context);
    const records: StreamRecord[] = event?.Records ?? [];
    const counts: ChangesWriterCounts = { numbered: 0, already: 0, erased: 0, unreadable: 0, retried: 0 };
    try {
      const remaining = context.getRemainingTimeInMillis();
      const margin = deps.safetyMarginMs ?? Math.min(DEFAULT_SAFETY_MARGIN_MS, Math.floor(remaining / 4));
      const deadline = now() + remaining - margin;
      const byConnection = new Map<string, { changes: StreamedChange[]; first: number }>();
      const unreadable: Array<{ index: number; record: StreamRecord; reason: string }> = [];
      records.forEach((record, index) => {
        const change = streamedChangeOf(record, (reason) => unreadable.push({ index, record, reason }));
        if (!change) return;
        const entry = byConnection.get(change.connection) ?? { changes: [], first: index };
        entry.changes.push(change);
        byConnection.set(change.connection, entry);
      });
      const failedAt: number[] = [];
      await forEachLimited([...byConnection], CONNECTIONS_IN_FLIGHT, async ([connection, { changes, first }]) => {
        try {
          if (!(await batchGate.open(connection))) {
            counts.erased += changes.length;
            logger.info('changes not numbered: the connection is erased or being erased', { connection, records: changes.length });
            return;
          }
          const outcome = await sequencer.append(connection, changes, { deadline, mayStart: () => connections.open(connection) });
          counts.numbered += outcome.numbered;
          counts.already += outcome.already;
          counts.erased += outcome.refused;
          if (outcome.refused > 0) logger.info('changes not numbered: the connection is erased or being erased', { connection, records: outcome.refused });
        } catch (error) {
          if (error instanceof PermanentError) {
            counts.unreadable += changes.length;
            logger.error('changes not numbered: the changes table refused them for good', { connection, records: changes.length, error: describeError(error) });
            return;
          }
          failedAt.push(first);
          logger.warn('changes not numbered yet: handed back to the event source', { connection, records: changes.length, error: describeError(error) });
        }
      });
      const lowest = failedAt.length > 0 ? Math.min(...failedAt) : undefined;
      counts.retried = lowest === undefined ? 0 : records.length - lowest;
      // Those the batch hands back come again: logged and counted then, once.
      for (const { index, record, reason } of unreadable) {
        if (lowest !== undefined && index >= lowest) continue;
        counts.unreadable += 1;
        logger.error('stream record not numbered: it cannot be read as a change', { ...keyOf(record), sequenceNumber: record.dynamodb?.SequenceNumber, reason });
      }
      publishCounts(metrics, counts);
      logger.info('batch done', { records: records.length, connections: byConnection.size, ...counts });
      return { batchItemFailures: lowest === undefined ? [] : [{ itemIdentifier: records[lowest]!.dynamodb?.SequenceNumber ?? '' }] };
    } catch (error) {
      // The core decides every record itself; this is the last resort: hand the whole batch back.
      logger.error('batch failed unexpectedly; every record will be retried', { error: describeError(error) });
      publishCounts(metrics, { ...counts, retried: records.length });
      return { batchItemFailures: records.length > 0 ? [{ itemIdentifier: records[0]!.dynamodb?.SequenceNumber ?? '' }] : [] };
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}

/** The change `record` makes, as the sequencer numbers it; undefined when it makes none, or cannot be read (`unreadable` says why). */
export function streamedChangeOf(record: StreamRecord, unreadable: (reason: string) => void): StreamedChange | undefined {
  let change;
  try {
    change = rowChangeOf(record);
  } catch (error) {
    if (!(error instanceof MappingError)) throw error;
    unreadable(error.message);
    return undefined;
  }
  if (change === undefined) return undefined;
  const src = record.dynamodb?.SequenceNumber;
  const srcAt = record.dynamodb?.ApproximateCreationDateTime;
  if (src === undefined || !/^\d+$/.test(src) || srcAt === undefined || !Number.isFinite(srcAt)) {
    unreadable('the record has no SequenceNumber or ApproximateCreationDateTime');
    return undefined;
  }
  const { detail } = change;
  return {
    connection: detail.connection,
    id: detail.id,
    change: change.kind,
    type: detail.type,
    revision: detail.revision,
    previousRevision: detail.previousRevision,
    syncedAt: detail.syncedAt,
    src,
    srcAt: Math.floor(srcAt),
  };
}

/** The record's row key, as far as it is text: never an item's data. */
function keyOf(record: StreamRecord): { connection?: string; id?: string } {
  const keys = record.dynamodb?.Keys;
  return {
    ...(keys?.['connection']?.S !== undefined ? { connection: keys['connection'].S } : {}),
    ...(keys?.['id']?.S !== undefined ? { id: keys['id'].S } : {}),
  };
}

function publishCounts(metrics: ReturnType<typeof createMetrics>, counts: ChangesWriterCounts): void {
  for (const [counter, name] of Object.entries(CHANGES_WRITER_METRIC_NAMES) as Array<[keyof ChangesWriterCounts, string]>) {
    metrics.addMetric(name, MetricUnit.Count, counts[counter]);
  }
}
