/**
 * The stateless half of the change events (docs/change-events.md): the change-events function fed
 * by the items table's stream, its permissions, its two alarms and its dashboard row.
 *
 * The stream event source:
 * - TRIM_HORIZON: a mapping that is created (first deploy) or re-created starts at the oldest
 *   record the stream still holds (24 hours), so no write made before it existed goes unannounced.
 *   LATEST would skip every write between the table's stream and the mapping, silently.
 * - ReportBatchItemFailures: the function reports the first record it could not announce (and every
 *   one after it) by sequence number; Lambda checkpoints before it and tries again from there.
 * - Bisect on error, at most CHANGE_EVENTS_RETRY_ATTEMPTS retries, then the failure queue gets the
 *   batch's shard and sequence range and the shard moves on (bounded, never stuck for a day).
 * - Parallelization factor 1 (one batch per shard at a time): an item's records are in one shard,
 *   in order, and the function puts an item's event only after its earlier one was accepted. Lambda
 *   would keep that per-key order with a higher factor too; one is the default and the table's write
 *   rate (bounded by the provider pace) needs no more.
 *
 * Added to the given scope (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { Duration, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as events from 'aws-cdk-lib/aws-events';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { CHANGE_EVENTS_METRIC_NAMES, CHANGE_EVENTS_SERVICE } from '../../functions/shared/metric-names.js';
import { ContentSyncFunction, functionProps } from '../constructs/content-sync-function.js';
import { CHANGE_EVENTS_TIMEOUT_SECONDS, changeEventSourceDeployment, changeEventsDeployment } from '../deployment.js';
import { notifyOnAlarmAndRecovery, serviceMetric } from '../operations/notify.js';

export { CHANGE_EVENTS_BATCH_SIZE, CHANGE_EVENTS_RETRY_ATTEMPTS } from '../deployment.js';
export const CHANGE_EVENTS_TIMEOUT = Duration.seconds(CHANGE_EVENTS_TIMEOUT_SECONDS);

/** What the stateful stack holds for the change events (infra/change-events/change-event-resources.ts). */
export interface ChangeEventsStateful {
  readonly bus: events.IEventBus;
  /** The stream event source's on-failure destination. */
  readonly failureQueue: sqs.IQueue;
}

export interface ChangeEventsProps extends ChangeEventsStateful {
  /** The items table; its stream (NEW_AND_OLD_IMAGES) feeds the function. */
  readonly table: dynamodb.ITable;
}

/** The change-events function, its stream event source and its permissions. */
export function addChangeEvents(scope: Construct, props: ChangeEventsProps): ContentSyncFunction {
  const fn = new ContentSyncFunction(scope, 'ChangeEvents', {
    entry: 'functions/change-events/handler.ts',
    serviceName: CHANGE_EVENTS_SERVICE,
    description: 'content-sync: announces every real change of an items-table row on the change-event bus',
    ...functionProps(changeEventsDeployment({ eventBusName: props.bus.eventBusArn })),
  });
  fn.allow({
    sid: 'PublishChangeEvents',
    actions: ['events:PutEvents'],
    resources: [props.bus.eventBusArn],
  });
  // The event source grants the stream read (and ListStreams) and, for the on-failure destination,
  // sqs:SendMessage on the failure queue (SQS-managed encryption: no KMS permission is needed).
  const source = changeEventSourceDeployment();
  fn.function.addEventSource(
    new DynamoEventSource(props.table, {
      startingPosition: lambda.StartingPosition[source.startingPosition],
      batchSize: source.batchSize,
      parallelizationFactor: source.parallelizationFactor,
      reportBatchItemFailures: source.reportBatchItemFailures,
      bisectBatchOnError: source.bisectBatchOnError,
      retryAttempts: source.retryAttempts,
      onFailure: new SqsDlq(props.failureQueue),
    }),
  );

  Validations.of(fn.function).acknowledge({
    id: 'AwsSolutions-L1',
    reason: 'Node.js 22 is the runtime the project targets and tests for; moving to a newer runtime is a deliberate, tested change.',
  });
  Validations.of(fn.role).acknowledge({
    id: 'AwsSolutions-IAM5[Resource::*]',
    reason:
      'X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) and the stream event source grant (dynamodb:ListStreams) support no resource-level permissions; the stream read itself is on the items table stream only.',
  });
  return fn;
}

export interface ChangeEventsOperationsProps {
  readonly fn: lambda.IFunction;
  readonly failureQueue: sqs.IQueue;
  readonly topic: sns.ITopic;
}

/**
 * Two alarms, each notifying the topic on alarm and on recovery: events the function could not
 * publish (its records are retried), and batches in the failure queue (given up: their events are
 * not on the bus).
 */
export function addChangeEventsAlarms(scope: Construct, props: ChangeEventsOperationsProps): cloudwatch.Alarm[] {
  const fiveMinutes = Duration.minutes(5);
  const common = {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    threshold: 1,
    evaluationPeriods: 1,
  };
  const alarms = [
    new cloudwatch.Alarm(scope, 'ChangeEventsPublishFailedAlarm', {
      ...common,
      alarmDescription:
        'Change events were refused by EventBridge (or PutEvents kept failing) after the function\'s retries; their stream records are retried. ' +
        'Check the change-events function logs ("change event not published") and the EventBridge PutEvents quota.',
      metric: changeEventsMetric(CHANGE_EVENTS_METRIC_NAMES.failed, 'Sum', fiveMinutes),
    }),
    new cloudwatch.Alarm(scope, 'ChangeEventsFailureQueueAlarm', {
      ...common,
      alarmDescription:
        'Stream batches whose change events could not be published after every retry are in the change-events failure queue: those events are not on the bus. ' +
        'Each message names the shard and sequence range; read them from the stream within 24 h, or have consumers re-read the ids (docs/change-events.md).',
      metric: props.failureQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }),
    }),
  ];
  notifyOnAlarmAndRecovery(alarms, props.topic);
  return alarms;
}

/** The dashboard row: events published, failed and ignored; the stream's lag and the function; the failure queue. */
export function addChangeEventsWidgets(dashboard: cloudwatch.Dashboard, props: Omit<ChangeEventsOperationsProps, 'topic'>): void {
  const period = Duration.minutes(5);
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Change events',
      width: 8,
      left: Object.values(CHANGE_EVENTS_METRIC_NAMES).map((name) => changeEventsMetric(name, 'Sum', period)),
      leftYAxis: { min: 0 },
    }),
    new cloudwatch.GraphWidget({
      title: 'Change-events function and stream lag',
      width: 8,
      left: [
        props.fn.metricInvocations({ period, statistic: 'Sum' }),
        props.fn.metricErrors({ period, statistic: 'Sum' }),
      ],
      leftYAxis: { min: 0 },
      right: [props.fn.metric('IteratorAge', { period, statistic: 'Maximum', label: 'Iterator age (ms)' })],
      rightYAxis: { min: 0 },
    }),
    new cloudwatch.GraphWidget({
      title: 'Change-events failure queue',
      width: 8,
      left: [props.failureQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' })],
      leftYAxis: { min: 0 },
    }),
  );
}

function changeEventsMetric(metricName: string, statistic: string, period: Duration): cloudwatch.Metric {
  return serviceMetric(CHANGE_EVENTS_SERVICE, metricName, statistic, period);
}
