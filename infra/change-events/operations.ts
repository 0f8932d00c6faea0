/**
 * The change events' operations (docs/change-events.md; docs/operations.md): two alarms, events
 * the function could not publish and batches in the failure queue; and the dashboard row, events
 * published, failed and ignored, the function and the stream's lag, the failure queue. The alarms
 * are made on the alarm topic by infra/operations.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { CHANGE_EVENTS_METRIC_NAMES, CHANGE_EVENTS_SERVICE } from '../../functions/shared/metric-names.js';
import { serviceMetric } from '../constructs/notify.js';
import type { AlarmDefinition } from '../operations/alarms.js';
import type { DashboardRow } from '../operations/dashboard.js';

export interface ChangeEventsOperationsProps {
  readonly fn: lambda.IFunction;
  readonly failureQueue: sqs.IQueue;
  /** The context key `stage`: the function's metrics' second dimension when given. */
  readonly stage: string | undefined;
}

export interface ChangeEventsOperations {
  readonly alarms: AlarmDefinition[];
  /** One row. */
  readonly rows: DashboardRow[];
}

export function changeEventsOperations(props: ChangeEventsOperationsProps): ChangeEventsOperations {
  return { alarms: changeEventsAlarms(props), rows: [changeEventsRow(props)] };
}

/**
 * Two alarms: events the function could not publish (its records are retried), and batches in the
 * failure queue (given up: their events are not on the bus).
 */
function changeEventsAlarms(props: ChangeEventsOperationsProps): AlarmDefinition[] {
  const fiveMinutes = Duration.minutes(5);
  const common = {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    threshold: 1,
    evaluationPeriods: 1,
  };
  return [
    {
      id: 'ChangeEventsPublishFailedAlarm',
      props: {
        ...common,
        alarmDescription:
          'Change events were refused by EventBridge (or PutEvents kept failing) after the function\'s retries; their stream records are retried. ' +
          'Check the change-events function logs ("change event not published") and the EventBridge PutEvents quota.',
        metric: changeEventsMetric(props.stage, CHANGE_EVENTS_METRIC_NAMES.failed, 'Sum', fiveMinutes),
      },
    },
    {
      id: 'ChangeEventsFailureQueueAlarm',
      props: {
        ...common,
        alarmDescription:
          'Stream batches whose change events could not be published after every retry are in the change-events failure queue: those events are not on the bus. ' +
          'Each message names the shard and sequence range; read them from the stream within 24 h, or have consumers re-read the ids (docs/change-events.md).',
        metric: props.failureQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }),
      },
    },
  ];
}

/** The dashboard row: events published, failed and ignored; the stream's lag and the function; the failure queue. */
function changeEventsRow(props: ChangeEventsOperationsProps): DashboardRow {
  const period = Duration.minutes(5);
  return [
    new cloudwatch.GraphWidget({
      title: 'Change events',
      width: 8,
      left: Object.values(CHANGE_EVENTS_METRIC_NAMES).map((name) => changeEventsMetric(props.stage, name, 'Sum', period)),
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
  ];
}

function changeEventsMetric(stage: string | undefined, metricName: string, statistic: string, period: Duration): cloudwatch.Metric {
  return serviceMetric({ service: CHANGE_EVENTS_SERVICE, stage }, metricName, statistic, period);
}
