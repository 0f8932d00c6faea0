/**
 * The CloudWatch dashboard (docs/operations.md, "Dashboard"): every item-sync, provider-pace and
 * token-refresher metric (namespace ContentSync, dimension `service`), the sync queue, the item sync
 * function and the state of every alarm.
 *
 * Added to the given scope (the stateless stack) under its own id, so its logical id, and with it
 * the dashboard's name, does not depend on where this code lives.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import {
  PACE_METRIC_NAMES,
  REFRESHER_METRIC_NAMES,
  REFRESHER_SERVICE,
  SYNC_METRIC_NAMES,
  SYNC_SERVICE,
} from '../../functions/shared/metric-names.js';
import { serviceMetric } from './notify.js';

const ITEM_SYNC_METRICS = Object.values(SYNC_METRIC_NAMES);
const REFRESHER_METRICS = Object.values(REFRESHER_METRIC_NAMES);

export interface DashboardProps {
  readonly refresher: lambda.IFunction;
  readonly sync: lambda.IFunction;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly alarms: cloudwatch.IAlarm[];
}

export function addDashboard(scope: Construct, props: DashboardProps): cloudwatch.Dashboard {
  const period = Duration.minutes(5);
  const custom = (service: string, metricName: string, statistic = 'Sum', label?: string) =>
    serviceMetric(service, metricName, statistic, period, label);
  const syncMetric = (metricName: string, statistic?: string, label?: string) => custom(SYNC_SERVICE, metricName, statistic, label);
  const { sync, queue } = props;
  const dashboard = new cloudwatch.Dashboard(scope, 'Dashboard', { defaultInterval: Duration.hours(6) });
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Items',
      width: 12,
      left: ITEM_SYNC_METRICS.filter((name) => name.startsWith('Items')).map((name) => custom(SYNC_SERVICE, name)),
    }),
    new cloudwatch.GraphWidget({
      title: 'Records retried / dead-lettered',
      width: 12,
      left: [SYNC_METRIC_NAMES.retried, SYNC_METRIC_NAMES.deadLettered].map((name) => syncMetric(name)),
    }),
  );
  // The provider pace (one per batch from each container): the shared rate against the 429s that
  // shape it, the records sent back to wait, and the breaker and the local fallback.
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Provider pace (requests/s) and 429s',
      width: 8,
      left: [
        syncMetric(PACE_METRIC_NAMES.rate, 'Average', 'Pace (average)'),
        syncMetric(PACE_METRIC_NAMES.rate, 'Minimum', 'Pace (lowest)'),
      ],
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
      left: [
        syncMetric(PACE_METRIC_NAMES.breakerOpen, 'Maximum'),
        syncMetric(PACE_METRIC_NAMES.fallback, 'Maximum'),
      ],
      leftYAxis: { min: 0, max: 1 },
      right: [syncMetric(PACE_METRIC_NAMES.breakerOpenSeconds, 'Maximum')],
      rightYAxis: { min: 0 },
    }),
  );
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Sync queue',
      width: 12,
      left: [
        queue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
        queue.metricApproximateNumberOfMessagesNotVisible({ period, statistic: 'Maximum' }),
        props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum', label: 'Dead-letter queue' }),
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
  );
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Token refresher',
      width: 12,
      left: [
        ...REFRESHER_METRICS.map((name) => custom(REFRESHER_SERVICE, name)),
        props.refresher.metricErrors({ period, statistic: 'Sum' }),
      ],
    }),
    new cloudwatch.AlarmStatusWidget({ title: 'Alarms', width: 12, alarms: props.alarms }),
  );
  return dashboard;
}
