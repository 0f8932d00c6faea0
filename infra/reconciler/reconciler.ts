/**
 * Reconciliation, the stateless half (docs/reconciler.md; the queues, the stateful half:
 * ./reconcile-queues.ts): the reconcile queue as the item sync's second event source; and, unless
 * freshnessHours is 0, the reconciler function, its permissions, its EventBridge Scheduler
 * schedule (every minute) and its output; its alarms and dashboard row (./operations.ts). Memory,
 * time-out, environment, the event source's and the schedule's numbers come from
 * infra/deployment.ts.
 *
 * Fan-out: RECONCILER_WORKERS schedules each invoke the function with `{"worker": i, "workers": n}`;
 * worker i walks the Scan segments s with s mod n = i (docs/reconciler.md, "Fan-out"). One is enough
 * up to well past 100M ids a day; more is this one constant.
 *
 * Added to the given scope (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, Duration, type Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { DEFAULTS } from '../../functions/shared/config.js';
import { RECONCILER_SERVICE } from '../../functions/shared/metric-names.js';
import {
  acknowledgeFunctionFindings,
  addSchedulerInvokeRole,
  ContentSyncFunction,
  functionProps,
  sqsEventSourceProps,
} from '../constructs/content-sync-function.js';
import type { WorkQueueResources } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';
import {
  RECONCILER_TIMEOUT_SECONDS,
  reconcilerDeployment,
  scheduleDeliveryDeployment,
  scheduleDeployment,
  syncEventSourceDeployment,
} from '../deployment.js';
import type { StorageResources } from '../storage/storage.js';
import { reconcilerOperations, type ReconcilerOperations } from './operations.js';

export { RECONCILE_SCHEDULE_MINUTES, RECONCILER_WORKERS } from '../deployment.js';
export const RECONCILER_TIMEOUT = Duration.seconds(RECONCILER_TIMEOUT_SECONDS);
/**
 * The cursor's row key in the control table (functions/reconciler/adapters/dynamodb-cursor-store.ts,
 * RECONCILE_CURSOR_KEY; the infra tests check both agree): the reconciler may touch that row only.
 * Written out here so the CDK app does not load the functions' AWS SDK adapters.
 */
export const RECONCILE_CURSOR_ROW = 'reconcile-cursor';

export interface ReconcileEventSourceProps {
  readonly sync: ContentSyncFunction;
  readonly reconcileQueue: sqs.IQueue;
  readonly config: ContentSyncConfig;
}

/**
 * The reconcile queue feeds the item sync too, with the sync queue's batch size and maximum
 * concurrency. Users' ids come first in the provider pace (functions/shared/pace), not here: the
 * sweep's lane must not cap the sweep below the rate a pass needs. One invocation fetches at most
 * SYNC_FETCH_CONCURRENCY (10) ids at a time, so the lane takes at most
 * syncMaxConcurrency × 10 ÷ provider latency ids a second (5 × 10 ÷ 0.2 s = 250 by default), where
 * a lane of 2 would stop at 100: 10M ids need 116 a second in a day (docs/reconciler.md, "The sweep lane").
 * Sweep records that must wait are sent again to the queue they came from: sqs:SendMessage on it.
 * The same grant lets discovery (context `childrenPath`, docs/discovery.md) send a folder's
 * children there, in the background lane, and a users' batch a connection's backlog
 * (docs/fairness.md); nothing more is granted for them.
 */
export function addReconcileEventSource(props: ReconcileEventSourceProps): void {
  const { sync, reconcileQueue, config } = props;
  sync.allow({
    sid: 'RequeueReconcile',
    actions: ['sqs:SendMessage'],
    resources: [reconcileQueue.queueArn],
  });
  // The event source grants receive/delete/attributes and ChangeMessageVisibility on the reconcile queue.
  sync.function.addEventSource(
    new SqsEventSource(reconcileQueue, sqsEventSourceProps(syncEventSourceDeployment(config))),
  );
}

export interface ReconcilerProps {
  readonly config: ContentSyncConfig;
  readonly table: dynamodb.ITable;
  readonly controlTable: dynamodb.ITable;
  readonly reconcileQueue: sqs.IQueue;
  /** Schedules sharing the segments; default as deployed (scheduleDeployment: RECONCILER_WORKERS). */
  readonly workers?: number;
}

/** The reconciler function, its permissions and its schedules (none of it when freshnessHours is 0). */
export function addReconciler(stack: Stack, props: ReconcilerProps): ContentSyncFunction | undefined {
  const { config } = props;
  const deployment = reconcilerDeployment(config, {
    itemsTableName: props.table.tableName,
    controlTableName: props.controlTable.tableName,
    reconcileQueueUrl: props.reconcileQueue.queueUrl,
  });
  const schedule = scheduleDeployment(config).reconciler;
  if (deployment === undefined || schedule === undefined) return undefined;
  const workers = props.workers ?? schedule.workers;
  if (!Number.isSafeInteger(workers) || workers < 1 || workers > DEFAULTS.reconcileSegments) {
    throw new RangeError(`reconciler workers must be a whole number from 1 to ${DEFAULTS.reconcileSegments} (the Scan segments), got ${workers}`);
  }

  const fn = new ContentSyncFunction(stack, 'Reconciler', {
    entry: 'functions/reconciler/handler.ts',
    serviceName: RECONCILER_SERVICE,
    description: 'content-sync: sends every id the items table knows to the reconcile queue, once per freshnessHours',
    logLevel: config.logLevel,
    logRetentionDays: config.logRetentionDays,
    stage: config.stage,
    ...functionProps(deployment),
  });
  fn.allow({
    sid: 'ScanItemIds',
    actions: ['dynamodb:Scan', 'dynamodb:DescribeTable'],
    resources: [props.table.tableArn],
  });
  fn.allow({
    sid: 'ReconcileCursor',
    actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
    resources: [props.controlTable.tableArn],
    conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [RECONCILE_CURSOR_ROW] } },
  });
  // SendMessageBatch is authorised by sqs:SendMessage; SQS-managed encryption needs no KMS permission.
  fn.allow({
    sid: 'FeedReconcileQueue',
    actions: ['sqs:SendMessage', 'sqs:GetQueueAttributes'],
    resources: [props.reconcileQueue.queueArn],
  });
  acknowledgeFunctionFindings(fn);

  // Our own role for the schedules, so its one finding can be acknowledged on it.
  const scheduleRole = addSchedulerInvokeRole(stack, 'ReconcileScheduleRole', fn, 'reconciler');
  const delivery = scheduleDeliveryDeployment(config).reconciler;
  const every = schedule.everyMinutes === 1 ? 'minute' : `${schedule.everyMinutes} minutes`;
  for (let worker = 0; worker < workers; worker += 1) {
    new scheduler.Schedule(stack, worker === 0 ? 'ReconcileSchedule' : `ReconcileScheduleWorker${worker}`, {
      description: `content-sync: a reconciler tick every ${every}${workers > 1 ? ` (worker ${worker} of ${workers})` : ''}`,
      schedule: scheduler.ScheduleExpression.rate(Duration.minutes(schedule.everyMinutes)),
      target: new schedulerTargets.LambdaInvoke(fn.function, {
        input: scheduler.ScheduleTargetInput.fromObject({ trigger: 'schedule', worker, workers }),
        // A tick the next one supersedes is not worth delivering late, nor again (ticks would overlap).
        maxEventAge: Duration.minutes(delivery.maxEventAgeMinutes),
        retryAttempts: delivery.retryAttempts,
        role: scheduleRole,
      }),
    });
  }
  return fn;
}


export interface ReconciliationProps {
  readonly config: ContentSyncConfig;
  readonly storage: StorageResources;
  /** The reconcile queue and its dead-letter queue (./reconcile-queues.ts). */
  readonly queues: WorkQueueResources;
  /** The item sync, which takes the reconcile queue. */
  readonly sync: ContentSyncFunction;
}

export interface Reconciliation extends ReconcilerOperations {
  /** Undefined when freshnessHours is 0. */
  readonly fn: ContentSyncFunction | undefined;
}

/** The reconcile queue's event source on the item sync; the reconciler, its schedules and its output. */
export function addReconciliation(stack: Stack, props: ReconciliationProps): Reconciliation {
  const { config, storage, queues } = props;
  addReconcileEventSource({ sync: props.sync, reconcileQueue: queues.queue, config });
  const fn = addReconciler(stack, { config, table: storage.table, controlTable: storage.controlTable, reconcileQueue: queues.queue });
  if (fn !== undefined) {
    new CfnOutput(stack, 'ReconcilerFunctionName', {
      description: 'Sends every known id to the reconcile queue once per pass; its logs ("tick done") show the pass',
      value: fn.function.functionName,
    });
  }
  const operations = reconcilerOperations({
    reconciler: fn?.function,
    reconcileQueue: queues.queue,
    reconcileDeadLetterQueue: queues.deadLetterQueue,
    freshnessHours: config.freshnessHours,
    stage: config.stage,
  });
  return { fn, ...operations };
}
