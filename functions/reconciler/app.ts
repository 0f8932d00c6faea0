/**
 * The reconciler's handler, built from its dependencies (handler.ts builds it once per container
 * from the environment). EventBridge Scheduler invokes it every minute with
 * `{"trigger": "schedule", "worker": 0, "workers": 1}`; `worker`/`workers` spread the Scan segments
 * over several schedules when one invocation cannot send ids fast enough (fan-out). Thin: wire the
 * adapters, run one tick until its deadline, publish the tick's metrics and answer its report.
 * A tick that fails throws (the invocation fails; the next tick resumes from the cursor).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import type { ReconcilerConfig } from '../shared/config.js';
import { RECONCILER_METRIC_NAMES, RECONCILER_SERVICE } from '../shared/metric-names.js';
import { createLogger, createMetrics, describeError } from '../shared/observability.js';
import { systemClock, type Clock } from '../shared/ports.js';
import { DynamoDbCursorStore } from './adapters/dynamodb-cursor-store.js';
import { DynamoDbItemIds } from './adapters/dynamodb-item-ids.js';
import { SqsReconcileQueue } from './adapters/sqs-reconcile-queue.js';
import type { CursorStore, ItemIds, ReconcileQueue } from './ports.js';
import { runTick, type TickReport, type TickSettings } from './tick.js';

/** How a tick runs; the defaults suit the deployed schedule (every minute, 60 s time-out). */
export interface ReconcilerTuning {
  /** Longest tick; default 50 s (the schedule's interval is 60 s). */
  tickBudgetMs: number;
  /** Kept back from the invocation's remaining time; default 5 s. */
  safetyMarginMs: number;
  /** The schedule's interval; default 60 s. */
  tickIntervalMs: number;
  /** Wait between two top-ups of the queue within a tick; default 5 s. */
  refillWaitMs: number;
  /** Rows per Scan page; default 1000. */
  pageSize: number;
  /** SendMessageBatch calls in flight at once; default 10. */
  sendConcurrency: number;
  /** No projected pass length before the pass is this old; default 10 min. */
  projectionWarmupMs: number;
}

export const DEFAULT_TUNING: ReconcilerTuning = {
  tickBudgetMs: 50_000,
  safetyMarginMs: 5_000,
  tickIntervalMs: 60_000,
  refillWaitMs: 5_000,
  pageSize: 1_000,
  sendConcurrency: 10,
  projectionWarmupMs: 10 * 60_000,
};

export interface ReconcilerHandlerDeps {
  config: ReconcilerConfig;
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
  logger?: ReturnType<typeof createLogger>;
  metrics?: ReturnType<typeof createMetrics>;
  tuning?: Partial<ReconcilerTuning>;
  /** Port overrides (simulations); default the adapters over `dynamodb` and `sqs`. */
  ports?: { cursor?: CursorStore; ids?: ItemIds; queue?: ReconcileQueue };
}

/** The schedule's input. Anything else (or nothing) is worker 0 of 1. */
export interface ReconcilerEvent {
  trigger?: string;
  /** This invocation's share of the segments: segment s when s mod workers = worker. */
  worker?: number;
  workers?: number;
}

export type ReconcilerHandler = (event: ReconcilerEvent | null | undefined, context?: Context) => Promise<TickReport>;

export function createReconcilerHandler(deps: ReconcilerHandlerDeps): ReconcilerHandler {
  const logger = deps.logger ?? createLogger(RECONCILER_SERVICE);
  const metrics = deps.metrics ?? createMetrics(RECONCILER_SERVICE, { stage: deps.config.stage });
  const clock = deps.clock ?? systemClock;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const tuning: ReconcilerTuning = { ...DEFAULT_TUNING, ...deps.tuning };
  const { config } = deps;
  const core = {
    cursor: deps.ports?.cursor ?? new DynamoDbCursorStore(deps.dynamodb, config.controlTableName),
    ids: deps.ports?.ids ?? new DynamoDbItemIds(deps.dynamodb, config.itemsTableName),
    queue: deps.ports?.queue ?? new SqsReconcileQueue(deps.sqs, config.reconcileQueueUrl, { concurrency: tuning.sendConcurrency, sleep }),
    clock,
    sleep,
    log: logger,
  };

  return async function handler(event, context) {
    if (context) logger.addContext(context);
    try {
      const { worker, workers } = workerOf(event);
      const settings: TickSettings = {
        freshnessHours: config.freshnessHours,
        segments: config.segments,
        highWater: config.highWater,
        pageSize: tuning.pageSize,
        worker,
        workers,
        refillWaitMs: tuning.refillWaitMs,
        tickIntervalMs: tuning.tickIntervalMs,
        projectionWarmupMs: tuning.projectionWarmupMs,
      };
      const remaining = context ? context.getRemainingTimeInMillis() - tuning.safetyMarginMs : tuning.tickBudgetMs;
      const deadline = clock.now().getTime() + Math.max(0, Math.min(tuning.tickBudgetMs, remaining));
      const report = await runTick(core, settings, deadline);
      publish(metrics, report);
      logger.info('tick done', { ...report, worker, workers });
      return report;
    } catch (error) {
      logger.error('tick failed; the next tick resumes from the cursor', { error: describeError(error) });
      throw error;
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}

/** `worker` and `workers` from the event: whole numbers, 0 ≤ worker < workers; worker 0 of 1 when absent. */
export function workerOf(event: ReconcilerEvent | null | undefined): { worker: number; workers: number } {
  const worker = event?.worker ?? 0;
  const workers = event?.workers ?? 1;
  if (!Number.isSafeInteger(worker) || !Number.isSafeInteger(workers) || workers < 1 || worker < 0 || worker >= workers) {
    throw new RangeError(`the event's worker and workers must be whole numbers with 0 <= worker < workers, got ${JSON.stringify({ worker, workers })}`);
  }
  return { worker, workers };
}

function publish(metrics: ReturnType<typeof createMetrics>, report: TickReport): void {
  const names = RECONCILER_METRIC_NAMES;
  metrics.addMetric(names.enqueued, MetricUnit.Count, report.enqueued);
  metrics.addMetric(names.pass, MetricUnit.Count, report.pass);
  metrics.addMetric(names.passAge, MetricUnit.Seconds, report.passAgeSeconds);
  metrics.addMetric(names.idsKnown, MetricUnit.Count, report.idsKnown);
  if (report.projectedPassSeconds !== undefined) metrics.addMetric(names.projectedPass, MetricUnit.Seconds, report.projectedPassSeconds);
  if (report.passLengthSeconds !== undefined) metrics.addMetric(names.passLength, MetricUnit.Seconds, report.passLengthSeconds);
}
