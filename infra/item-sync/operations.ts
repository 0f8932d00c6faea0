/**
 * The item sync's operations (docs/operations.md, "Alarms", "Runbook" and "Dashboard"): four
 * alarms, records in the dead-letter queue, the item sync failing whole invocations, the sync
 * queue's oldest message waiting too long and the provider breaker staying open; and three
 * dashboard rows, every item-sync and provider-pace metric (namespace ContentSync, service
 * item-sync), the sync queue and the function. The alarms are made on the alarm topic by
 * infra/operations.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { PACE_METRIC_NAMES, SYNC_METRIC_NAMES, SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import { serviceMetric } from '../constructs/notify.js';
import type { WorkQueueResources } from '../constructs/queues.js';
import type { AlarmDefinition } from '../operations/alarms.js';
import type { DashboardRow } from '../operations/dashboard.js';

/** Alarm when the oldest sync message has waited this long. */
export const OLDEST_MESSAGE_ALARM_SECONDS = 3600;
/** Alarm when the provider breaker has been open this long (every sync record is waiting meanwhile). */
export const BREAKER_OPEN_ALARM_SECONDS = 1800;

export interface ItemSyncOperationsProps {
  readonly sync: lambda.IFunction;
  readonly queues: WorkQueueResources;
  /** The context key `stage`: its metrics' second dimension when given. */
  readonly stage: string | undefined;
}

export interface ItemSyncOperations {
  /** Records in the dead-letter queue: the first alarm the alarm-status widget lists. */
  readonly deadLetterAlarm: AlarmDefinition;
  /** The function, the sync queue's age, the provider breaker. */
  readonly alarms: AlarmDefinition[];
  readonly rows: DashboardRow[];
}

export function itemSyncOperations(props: ItemSyncOperationsProps): ItemSyncOperations {
  const { sync, queues } = props;
  const fiveMinutes = Duration.minutes(5);
  const common = {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  };
  const deadLetterAlarm: AlarmDefinition = {
    id: 'DeadLetterQueueAlarm',
    props: {
      ...common,
      alarmDescription: 'Records are waiting in the content-sync dead-letter queue: read their "error" attribute, fix, then redrive (docs/operations.md, "Runbook").',
      metric: queues.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }),
      threshold: 1,
      evaluationPeriods: 1,
    },
  };
  const alarms: AlarmDefinition[] = [
    {
      id: 'ItemSyncErrorsAlarm',
      props: {
        ...common,
        alarmDescription: 'The item sync function failed whole invocations (crash or time-out); records are redelivered, check its logs.',
        metric: sync.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
        threshold: 1,
        evaluationPeriods: 1,
      },
    },
    {
      id: 'SyncQueueAgeAlarm',
      props: {
        ...common,
        alarmDescription: `The oldest message on the sync queue has waited ${OLDEST_MESSAGE_ALARM_SECONDS / 60} min or more: the sync is stuck or cannot keep up.`,
        metric: queues.queue.metricApproximateAgeOfOldestMessage({ period: fiveMinutes, statistic: 'Maximum' }),
        threshold: OLDEST_MESSAGE_ALARM_SECONDS,
        evaluationPeriods: 1,
      },
    },
    // Each sync container publishes BreakerOpenSeconds after every batch: how long the shared
    // breaker has been open (0 when closed). Waiting records keep batches coming while it is open;
    // with no records there is no data, which is no outage to report.
    {
      id: 'ProviderBreakerOpenAlarm',
      props: {
        ...common,
        alarmDescription:
          `The item sync's provider breaker has been open for ${BREAKER_OPEN_ALARM_SECONDS / 60} min or more: no item is fetched (one probe at a time), ` +
          'records wait on the sync queue and are sent again with a delay. The provider is down or cannot be reached: check its status and the item sync logs ' +
          '(a refused token never opens the breaker: it stops only its own connection, see ConnectionsFailingAlarm). ' +
          'The sync resumes by itself once a probe succeeds.',
        metric: serviceMetric({ service: SYNC_SERVICE, stage: props.stage }, PACE_METRIC_NAMES.breakerOpenSeconds, 'Maximum', fiveMinutes),
        threshold: BREAKER_OPEN_ALARM_SECONDS,
        evaluationPeriods: 1,
      },
    },
  ];
  return { deadLetterAlarm, alarms, rows: itemSyncRows(props) };
}

/** Items and records; the provider pace; the sync queue and the function. */
function itemSyncRows({ sync, queues, stage }: ItemSyncOperationsProps): DashboardRow[] {
  const period = Duration.minutes(5);
  const syncMetric = (metricName: string, statistic = 'Sum', label?: string) => serviceMetric({ service: SYNC_SERVICE, stage }, metricName, statistic, period, label);
  const { queue, deadLetterQueue } = queues;
  return [
    [
      new cloudwatch.GraphWidget({
        title: 'Items',
        width: 12,
        left: Object.values(SYNC_METRIC_NAMES)
          .filter((name) => name.startsWith('Items'))
          .map((name) => syncMetric(name)),
      }),
      new cloudwatch.GraphWidget({
        title: 'Records retried / dead-lettered',
        width: 12,
        left: [SYNC_METRIC_NAMES.retried, SYNC_METRIC_NAMES.deadLettered].map((name) => syncMetric(name)),
      }),
    ],
    // The provider pace (one per batch from each container): the shared rate against the 429s
    // that shape it, the records sent back to wait, and the breaker and the local fallback.
    [
      new cloudwatch.GraphWidget({
        title: 'Provider pace (requests/s) and 429s',
        width: 8,
        left: [syncMetric(PACE_METRIC_NAMES.rate, 'Average', 'Pace (average)'), syncMetric(PACE_METRIC_NAMES.rate, 'Minimum', 'Pace (lowest)')],
        leftYAxis: { min: 0 },
        right: [syncMetric(SYNC_METRIC_NAMES.rateLimited)],
        rightYAxis: { min: 0 },
      }),
      new cloudwatch.GraphWidget({
        title: 'Records postponed (waiting for the pace or an outage)',
        width: 8,
        left: [syncMetric(SYNC_METRIC_NAMES.postponed)],
        leftYAxis: { min: 0 },
      }),
      new cloudwatch.GraphWidget({
        title: 'Breaker and fallback pace',
        width: 8,
        left: [syncMetric(PACE_METRIC_NAMES.breakerOpen, 'Maximum'), syncMetric(PACE_METRIC_NAMES.fallback, 'Maximum')],
        leftYAxis: { min: 0, max: 1 },
        right: [syncMetric(PACE_METRIC_NAMES.breakerOpenSeconds, 'Maximum')],
        rightYAxis: { min: 0 },
      }),
    ],
    [
      new cloudwatch.GraphWidget({
        title: 'Sync queue',
        width: 12,
        left: [
          queue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
          queue.metricApproximateNumberOfMessagesNotVisible({ period, statistic: 'Maximum' }),
          deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum', label: 'Dead-letter queue' }),
        ],
        right: [queue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum' })],
      }),
      new cloudwatch.GraphWidget({
        title: 'Item sync function',
        width: 12,
        left: [
          sync.metricInvocations({ period, statistic: 'Sum' }),
          sync.metricErrors({ period, statistic: 'Sum' }),
          sync.metricThrottles({ period, statistic: 'Sum' }),
          sync.metric('ConcurrentExecutions', { period, statistic: 'Maximum' }),
        ],
        right: [sync.metricDuration({ period, statistic: 'p95' }), sync.metricDuration({ period, statistic: 'Maximum' })],
      }),
    ],
  ];
}
