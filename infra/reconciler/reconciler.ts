/**
 * The stateless half of reconciliation (docs/reconciler.md): the reconcile queue as the item sync's
 * second event source; and, unless freshnessHours is 0, the reconciler function, its EventBridge
 * Scheduler schedule (every minute), its permissions, its three alarms and its dashboard row.
 *
 * Fan-out: RECONCILER_WORKERS schedules each invoke the function with `{"worker": i, "workers": n}`;
 * worker i walks the Scan segments s with s mod n = i (docs/reconciler.md, "Scale"). One is enough
 * up to well past 100M ids a day; more is this one constant.
 *
 * Added to the given scope (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { Duration, Validations, type Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { DEFAULTS } from '../../functions/shared/config.js';
import { RECONCILER_METRIC_NAMES, RECONCILER_SERVICE } from '../../functions/shared/metric-names.js';
import { addSchedulerInvokeRole, ContentSyncFunction, functionProps, sqsEventSourceProps } from '../constructs/content-sync-function.js';
import {
  RECONCILER_TIMEOUT_SECONDS,
  reconcilerDeployment,
  scheduleDeliveryDeployment,
  scheduleDeployment,
  syncEventSourceDeployment,
} from '../deployment.js';
import { notifyOnAlarmAndRecovery, serviceMetric } from '../operations/notify.js';
import type { ContentSyncConfig } from '../context.js';

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
 * a lane of 2 would stop at 100: 10M ids need 116 a second in a day (docs/reconciler.md, "Scale").
 * Sweep records that must wait are sent again to the queue they came from: sqs:SendMessage on it.
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
  Validations.of(fn.function).acknowledge({
    id: 'AwsSolutions-L1',
    reason: 'Node.js 22 is the runtime the project targets and tests for; moving to a newer runtime is a deliberate, tested change.',
  });
  Validations.of(fn.role).acknowledge({
    id: 'AwsSolutions-IAM5[Resource::*]',
    reason: 'X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions.',
  });

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

export interface ReconcilerOperationsProps {
  /** Undefined when freshnessHours is 0. */
  readonly reconciler: lambda.IFunction | undefined;
  readonly reconcileQueue: sqs.IQueue;
  readonly reconcileDeadLetterQueue: sqs.IQueue;
  readonly freshnessHours: number;
}

/** Seconds in freshnessHours, as `27.8 h` for a description. */
const hours = (seconds: number): string => `${Math.round((seconds / 3600) * 10) / 10} h`;

/** The description of the projected-pass alarm: what it means, with the arithmetic. */
export function projectedPassDescription(freshnessHours: number): string {
  const example = 10_000_000 / 100;
  return (
    `The projected reconciliation pass is longer than freshnessHours (${freshnessHours} h): the provider's limit cannot keep this many ids this fresh. ` +
    `W = N ÷ rate: N ids known (IdsKnown), rate = ids the sync took off the reconcile queue this pass ÷ the pass's age. ` +
    `Example: 10,000,000 ids at 100 requests/s take ${example.toLocaleString('en-US')} s = ${hours(example)}, over a 24 h target. ` +
    "Raise the provider's limit (providerRequestsPerSecond), raise freshnessHours, or check that the item sync is taking the reconcile queue " +
    '(breaker open? errors?) and how much of the pace users take (docs/reconciler.md).'
  );
}

/**
 * Up to three alarms, each notifying the topic on alarm and on recovery: the reconcile dead-letter
 * queue (always), and with a reconciler its projected pass over freshnessHours and its failing ticks.
 */
export function addReconcilerAlarms(scope: Stack, props: ReconcilerOperationsProps & { topic: sns.ITopic }): cloudwatch.Alarm[] {
  const alarms = [
    new cloudwatch.Alarm(scope, 'ReconcileDeadLetterQueueAlarm', {
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      alarmDescription:
        'Ids are waiting in the reconcile dead-letter queue: the item sync was handed them 5 times without finishing. Read its logs for those ids, fix, then redrive to the reconcile queue (docs/reconciler.md).',
      metric: props.reconcileDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: 'Maximum' }),
      threshold: 1,
      evaluationPeriods: 1,
    }),
  ];
  if (props.reconciler !== undefined) {
    // Two 15-minute averages in a row over the target: a projection, not one noisy tick.
    alarms.push(
      new cloudwatch.Alarm(scope, 'ReconcileProjectedPassAlarm', {
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        alarmDescription: projectedPassDescription(props.freshnessHours),
        metric: reconcilerMetric(RECONCILER_METRIC_NAMES.projectedPass, 'Average', Duration.minutes(15)),
        threshold: props.freshnessHours * 3600,
        evaluationPeriods: 2,
        datapointsToAlarm: 2,
      }),
      new cloudwatch.Alarm(scope, 'ReconcilerErrorsAlarm', {
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        alarmDescription:
          'The reconciler failed 3 ticks or more in 15 minutes (a tick runs every minute; each resumes from the cursor, repeating at most one page): check its logs ("tick failed").',
        metric: props.reconciler.metricErrors({ period: Duration.minutes(15), statistic: 'Sum' }),
        threshold: 3,
        evaluationPeriods: 1,
      }),
    );
  }
  notifyOnAlarmAndRecovery(alarms, props.topic);
  return alarms;
}

/** The dashboard row: the pass (projection against the target, age, number), ids sent, the reconcile queue, the function. */
export function addReconcilerWidgets(dashboard: cloudwatch.Dashboard, props: ReconcilerOperationsProps): void {
  const period = Duration.minutes(5);
  const queueWidget = new cloudwatch.GraphWidget({
    title: 'Reconcile queue',
    width: props.reconciler === undefined ? 24 : 6,
    left: [
      props.reconcileQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
      props.reconcileQueue.metricApproximateNumberOfMessagesNotVisible({ period, statistic: 'Maximum' }),
      props.reconcileDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum', label: 'Reconcile dead-letter queue' }),
    ],
    leftYAxis: { min: 0 },
    right: [props.reconcileQueue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum' })],
    rightYAxis: { min: 0 },
  });
  if (props.reconciler === undefined) {
    dashboard.addWidgets(queueWidget);
    return;
  }
  const names = RECONCILER_METRIC_NAMES;
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Reconciliation pass (s) against freshnessHours',
      width: 6,
      left: [
        reconcilerMetric(names.projectedPass, 'Average', period, 'Projected pass W'),
        reconcilerMetric(names.passAge, 'Maximum', period, 'Pass age'),
        reconcilerMetric(names.passLength, 'Maximum', period, 'Pass length (at its end)'),
      ],
      leftYAxis: { min: 0 },
      leftAnnotations: [{ value: props.freshnessHours * 3600, label: `freshnessHours (${props.freshnessHours} h)` }],
      right: [reconcilerMetric(names.pass, 'Maximum', period, 'Pass number')],
      rightYAxis: { min: 0 },
    }),
    new cloudwatch.GraphWidget({
      title: 'Ids sent by the reconciler, ids known',
      width: 6,
      left: [reconcilerMetric(names.enqueued, 'Sum', period)],
      leftYAxis: { min: 0 },
      right: [reconcilerMetric(names.idsKnown, 'Maximum', period)],
      rightYAxis: { min: 0 },
    }),
    queueWidget,
    new cloudwatch.GraphWidget({
      title: 'Reconciler function',
      width: 6,
      left: [props.reconciler.metricInvocations({ period, statistic: 'Sum' }), props.reconciler.metricErrors({ period, statistic: 'Sum' })],
      leftYAxis: { min: 0 },
      right: [props.reconciler.metricDuration({ period, statistic: 'Maximum' })],
      rightYAxis: { min: 0 },
    }),
  );
}

function reconcilerMetric(metricName: string, statistic: string, period: Duration, label?: string): cloudwatch.Metric {
  return serviceMetric(RECONCILER_SERVICE, metricName, statistic, period, label);
}
