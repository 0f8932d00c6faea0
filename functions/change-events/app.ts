/**
 * The change-events handler, built from its dependencies (handler.ts builds it once per container
 * from the environment). Fed by two streams, the items table's (item change events) and the
 * connections table's (account lifecycle events), each a DynamoDB event source with
 * ReportBatchItemFailures, bisect on error, bounded retries and an on-failure destination. Thin:
 * hand the batch to the core with a deadline taken from the invocation's remaining time (each
 * record mapped by its stream: sources.ts), then the connections' counters of the items table's
 * records it is done with (best effort: stats.ts), publish the batch's metrics and answer
 * `{"batchItemFailures": [{"itemIdentifier": "<sequence number>"}, ...]}`.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { CHANGE_EVENTS_METRIC_NAMES, CHANGE_EVENTS_SERVICE } from '../shared/metric-names.js';
import { createLogger, createMetrics, describeError } from '../shared/observability.js';
import { systemClock, type Clock } from '../shared/ports.js';
import { DynamoDbConnectionStats } from './adapters/dynamodb-connection-stats.js';
import { EventBridgePublisher } from './adapters/eventbridge.js';
import type { ChangeEventsConfig } from '../shared/config.js';
import { LIFECYCLE_METRIC_NAMES } from './metric-names.js';
import type { ConnectionStats, EventPublisher, StreamRecord } from './ports.js';
import { announceBatch, type BatchCounts } from './publish.js';
import { eventRouter, sourceOf } from './sources.js';
import { keepConnectionStats } from './stats.js';

/** Time kept back from the invocation's remaining time: no PutEvents call starts within it. */
export const DEFAULT_SAFETY_MARGIN_MS = 5_000;

export interface ChangeEventsHandlerDeps {
  config: ChangeEventsConfig;
  eventbridge: EventBridgeClient;
  /** The connections table's client (each connection's `idsKnown` and `lastWriteAt`). */
  dynamodb: DynamoDBClient;
  /** Default: PutEvents on config.eventBusName through `eventbridge`. */
  publisher?: EventPublisher;
  /** Default: UpdateItem on config.connectionsTableName through `dynamodb`. */
  connectionStats?: ConnectionStats;
  clock?: Clock;
  logger?: ReturnType<typeof createLogger>;
  metrics?: ReturnType<typeof createMetrics>;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /** Kept back from the remaining time; default the smaller of 5 s and a quarter of the remaining time. */
  safetyMarginMs?: number;
}

export type ChangeEventsHandler = (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse>;

export function createChangeEventsHandler(deps: ChangeEventsHandlerDeps): ChangeEventsHandler {
  const logger = deps.logger ?? createLogger(CHANGE_EVENTS_SERVICE);
  const metrics = deps.metrics ?? createMetrics(CHANGE_EVENTS_SERVICE, { stage: deps.config.stage });
  const clock = deps.clock ?? systemClock;
  const publisher =
    deps.publisher ??
    new EventBridgePublisher(deps.eventbridge, deps.config.eventBusName, {
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
      ...(deps.random ? { random: deps.random } : {}),
    });
  const connectionStats = deps.connectionStats ?? new DynamoDbConnectionStats(deps.dynamodb, deps.config.connectionsTableName);
  const connectionsTable = deps.config.connectionsTableName;
  const eventOf = eventRouter({ connectionsTable, now: () => clock.now().getTime() });

  return async function handler(event: DynamoDBStreamEvent, context: Context): Promise<DynamoDBBatchResponse> {
    logger.addContext(context);
    const records: StreamRecord[] = event?.Records ?? [];
    try {
      const remaining = context.getRemainingTimeInMillis();
      const margin = deps.safetyMarginMs ?? Math.min(DEFAULT_SAFETY_MARGIN_MS, Math.floor(remaining / 4));
      const deadline = clock.now().getTime() + remaining - margin;
      const report = await announceBatch(records, { publisher, log: logger, now: () => clock.now().getTime(), deadline, eventOf });
      // Only the items table's records the batch is done with: the others come again.
      const done = records.slice(0, report.done).filter((record) => sourceOf(record, connectionsTable) === 'items');
      const stats = await keepConnectionStats(done, { stats: connectionStats, log: logger });
      publishCounts(metrics, report.counts);
      logger.info('batch done', { records: records.length, ...report.counts, connectionStats: stats });
      return { batchItemFailures: report.failures.map((itemIdentifier) => ({ itemIdentifier })) };
    } catch (error) {
      // The core decides every record itself; this is the last resort: hand the whole batch back.
      logger.error('batch failed unexpectedly; every record will be retried', { error: describeError(error) });
      publishCounts(metrics, { published: 0, lifecycle: 0, failed: 0, ignored: 0, retried: records.length });
      return { batchItemFailures: records.map((record) => ({ itemIdentifier: record.dynamodb?.SequenceNumber ?? '' })) };
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}

function publishCounts(metrics: ReturnType<typeof createMetrics>, counts: BatchCounts): void {
  const names = { ...CHANGE_EVENTS_METRIC_NAMES, ...LIFECYCLE_METRIC_NAMES };
  for (const [counter, name] of Object.entries(names) as Array<[keyof BatchCounts, string]>) {
    metrics.addMetric(name, MetricUnit.Count, counts[counter]);
  }
}
