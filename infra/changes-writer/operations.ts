/**
 * The changes writer's operations (docs/changes.md; docs/operations.md): three alarms, records it
 * could not read as changes, the stream's age past an hour, and ranges in the failure queue; and
 * the dashboard row. The alarms are made on the alarm topic by infra/operations.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { CHANGES_WRITER_METRIC_NAMES, CHANGES_WRITER_SERVICE } from '../../functions/shared/metric-names.js';
import { serviceMetric } from '../constructs/notify.js';
import type { AlarmDefinition } from '../operations/alarms.js';
import type { DashboardRow } from '../operations/dashboard.js';

/** The writer's iterator age that alarms: an hour behind, 23 before its records would leave the stream. */
export const CHANGES_WRITER_LAG_ALARM_MS = 3_600_000;

export interface ChangesWriterOperationsProps {
  readonly fn: lambda.IFunction;
  readonly failureQueue: sqs.IQueue;
  /** The context key `stage`: the function's metrics' second dimension when given. */
  readonly stage: string | undefined;
}

export interface ChangesWriterOperations {
  readonly alarms: AlarmDefinition[];
  /** One row. */
  readonly rows: DashboardRow[];
}

export function changesWriterOperations(props: ChangesWriterOperationsProps): ChangesWriterOperations {
  return { alarms: changesWriterAlarms(props), rows: [changesWriterRow(props)] };
}

function changesWriterAlarms(props: ChangesWriterOperationsProps): AlarmDefinition[] {
  const fiveMinutes = Duration.minutes(5);
  const common = {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    evaluationPeriods: 1,
  };
  return [
    {
      id: 'ChangesUnreadableAlarm',
      props: {
        ...common,
        threshold: 1,
        alarmDescription:
          'Items-table stream records could not be read as changes (a row the sync did not write): their changes are not in the feed. ' +
          'The changes writer logs name each record ("stream record not numbered"); mend the connection\'s feed from the table (docs/changes.md).',
        metric: serviceMetric({ service: CHANGES_WRITER_SERVICE, stage: props.stage }, CHANGES_WRITER_METRIC_NAMES.unreadable, 'Sum', fiveMinutes),
      },
    },
    {
      id: 'ChangesWriterLagAlarm',
      props: {
        ...common,
        threshold: CHANGES_WRITER_LAG_ALARM_MS,
        alarmDescription:
          'The changes writer is more than an hour behind the items table stream, which holds records 24 hours: changes are late in the feed, and lost if it falls 24 hours behind. ' +
          'Check its logs ("changes not numbered yet") and errors.',
        metric: props.fn.metric('IteratorAge', { period: fiveMinutes, statistic: 'Maximum' }),
      },
    },
    {
      id: 'ChangesWriterFailureQueueAlarm',
      props: {
        ...common,
        threshold: 1,
        alarmDescription:
          'Items-table stream records left the stream before the changes writer numbered them: the range is in the changes-writer failure queue and those changes are not in the feed. ' +
          'Mend the connections\' feeds from the table (docs/changes.md).',
        metric: props.failureQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }),
      },
    },
  ];
}

function changesWriterRow(props: ChangesWriterOperationsProps): DashboardRow {
  const period = Duration.minutes(5);
  return [
    new cloudwatch.GraphWidget({
      title: 'Changes feed: numbered',
      width: 8,
      left: Object.values(CHANGES_WRITER_METRIC_NAMES).map((name) => serviceMetric({ service: CHANGES_WRITER_SERVICE, stage: props.stage }, name, 'Sum', period)),
      leftYAxis: { min: 0 },
    }),
    new cloudwatch.GraphWidget({
      title: 'Changes writer and stream lag',
      width: 8,
      left: [props.fn.metricInvocations({ period, statistic: 'Sum' }), props.fn.metricErrors({ period, statistic: 'Sum' })],
      leftYAxis: { min: 0 },
      right: [props.fn.metric('IteratorAge', { period, statistic: 'Maximum', label: 'Iterator age (ms)' })],
      rightYAxis: { min: 0 },
    }),
    new cloudwatch.GraphWidget({
      title: 'Changes-writer failure queue',
      width: 8,
      left: [props.failureQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' })],
      leftYAxis: { min: 0 },
    }),
  ];
}
