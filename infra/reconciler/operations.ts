/**
 * Reconciliation's operations (docs/reconciler.md; docs/operations.md): up to three alarms, the
 * reconcile dead-letter queue (always) and, with a reconciler, its projected pass over
 * freshnessHours and its failing ticks; and its dashboard row, the pass against the target, the
 * ids sent, the reconcile queue and the function (the queue alone without a reconciler). The
 * alarms are made on the alarm topic by infra/operations.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { RECONCILER_METRIC_NAMES, RECONCILER_SERVICE } from '../../functions/shared/metric-names.js';
import { serviceMetric } from '../constructs/notify.js';
import type { AlarmDefinition } from '../operations/alarms.js';
import type { DashboardRow } from '../operations/dashboard.js';

export interface ReconcilerOperationsProps {
  /** Undefined when freshnessHours is 0. */
  readonly reconciler: lambda.IFunction | undefined;
  readonly reconcileQueue: sqs.IQueue;
  readonly reconcileDeadLetterQueue: sqs.IQueue;
  readonly freshnessHours: number;
  /** The context key `stage`: the reconciler's metrics' second dimension when given. */
  readonly stage: string | undefined;
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

export interface ReconcilerOperations {
  readonly alarms: AlarmDefinition[];
  /** One row. */
  readonly rows: DashboardRow[];
}

export function reconcilerOperations(props: ReconcilerOperationsProps): ReconcilerOperations {
  return { alarms: reconcilerAlarms(props), rows: [reconcilerRow(props)] };
}

/**
 * Up to three alarms: the reconcile dead-letter queue (always), and with a reconciler its projected
 * pass over freshnessHours and its failing ticks.
 */
function reconcilerAlarms(props: ReconcilerOperationsProps): AlarmDefinition[] {
  const alarms: AlarmDefinition[] = [
    {
      id: 'ReconcileDeadLetterQueueAlarm',
      props: {
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        alarmDescription:
          'Ids are waiting in the reconcile dead-letter queue: the item sync was handed them 5 times without finishing. Read its logs for those ids, fix, then redrive to the reconcile queue (docs/reconciler.md).',
        metric: props.reconcileDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: 'Maximum' }),
        threshold: 1,
        evaluationPeriods: 1,
      },
    },
  ];
  if (props.reconciler !== undefined) {
    // Two 15-minute averages in a row over the target: a projection, not one noisy tick.
    alarms.push(
      {
        id: 'ReconcileProjectedPassAlarm',
        props: {
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
          alarmDescription: projectedPassDescription(props.freshnessHours),
          metric: reconcilerMetric(props.stage, RECONCILER_METRIC_NAMES.projectedPass, 'Average', Duration.minutes(15)),
          threshold: props.freshnessHours * 3600,
          evaluationPeriods: 2,
          datapointsToAlarm: 2,
        },
      },
      {
        id: 'ReconcilerErrorsAlarm',
        props: {
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
          alarmDescription:
            'The reconciler failed 3 ticks or more in 15 minutes (a tick runs every minute; each resumes from the cursor, repeating at most one page): check its logs ("tick failed").',
          metric: props.reconciler.metricErrors({ period: Duration.minutes(15), statistic: 'Sum' }),
          threshold: 3,
          evaluationPeriods: 1,
        },
      },
    );
  }
  return alarms;
}

/** The dashboard row: the pass (projection against the target, age, number), ids sent, the reconcile queue, the function. */
function reconcilerRow(props: ReconcilerOperationsProps): DashboardRow {
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
  if (props.reconciler === undefined) return [queueWidget];
  const names = RECONCILER_METRIC_NAMES;
  return [
    new cloudwatch.GraphWidget({
      title: 'Reconciliation pass (s) against freshnessHours',
      width: 6,
      left: [
        reconcilerMetric(props.stage, names.projectedPass, 'Average', period, 'Projected pass W'),
        reconcilerMetric(props.stage, names.passAge, 'Maximum', period, 'Pass age'),
        reconcilerMetric(props.stage, names.passLength, 'Maximum', period, 'Pass length (at its end)'),
      ],
      leftYAxis: { min: 0 },
      leftAnnotations: [{ value: props.freshnessHours * 3600, label: `freshnessHours (${props.freshnessHours} h)` }],
      right: [reconcilerMetric(props.stage, names.pass, 'Maximum', period, 'Pass number')],
      rightYAxis: { min: 0 },
    }),
    new cloudwatch.GraphWidget({
      title: 'Ids sent by the reconciler, ids known',
      width: 6,
      left: [reconcilerMetric(props.stage, names.enqueued, 'Sum', period)],
      leftYAxis: { min: 0 },
      right: [reconcilerMetric(props.stage, names.idsKnown, 'Maximum', period)],
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
  ];
}

function reconcilerMetric(stage: string | undefined, metricName: string, statistic: string, period: Duration, label?: string): cloudwatch.Metric {
  return serviceMetric({ service: RECONCILER_SERVICE, stage }, metricName, statistic, period, label);
}
