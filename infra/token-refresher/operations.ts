/**
 * The token refresher's operations (docs/operations.md): three alarms, the refresher failing in two
 * runs in a row, a connection failing (the provider refused its refresh token, or it does not
 * open), and the key that seals the tokens disabled or pending deletion;
 * and two dashboard graphs, the refresher's counters (namespace ContentSync, service
 * token-refresher) with its errors, and the connections by status as each run counts them. The
 * alarms are made on the alarm topic by infra/operations; the dashboard puts the graphs beside the
 * alarm status (infra/stateless-stack.ts).
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { REFRESHER_METRIC_NAMES, REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';
import { serviceMetric } from '../constructs/notify.js';
import type { ContentSyncConfig } from '../context.js';
import { scheduleDeployment } from '../deployment.js';
import type { AlarmDefinition } from '../operations/alarms.js';

/** Counted once per refresh (by the refresher's runs): summed per period on the dashboard. */
const REFRESH_COUNTERS = [
  REFRESHER_METRIC_NAMES.refreshed,
  REFRESHER_METRIC_NAMES.rotated,
  REFRESHER_METRIC_NAMES.failed,
  REFRESHER_METRIC_NAMES.refused,
] as const;

/** Connections by status, counted by every scheduled run: gauges, shown at their highest per run. */
const CONNECTION_GAUGES = [REFRESHER_METRIC_NAMES.active, REFRESHER_METRIC_NAMES.paused, REFRESHER_METRIC_NAMES.failing] as const;

export interface TokenRefresherOperations {
  readonly alarms: AlarmDefinition[];
  /** Its two dashboard graphs (8 units wide each). */
  readonly graphs: cloudwatch.IWidget[];
}

export function tokenRefresherOperations(refresher: lambda.IFunction, config: ContentSyncConfig): TokenRefresherOperations {
  // The schedule's interval (5 minutes, or tokenRefreshMinutes when shorter): the alarms' periods follow it.
  const runMinutes = scheduleDeployment(config).refresherEveryMinutes;
  const onePeriod = Duration.minutes(runMinutes);
  const source = { service: REFRESHER_SERVICE, stage: config.stage };
  const common = {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    threshold: 1,
  };
  // One period per scheduled run: alarm when two runs in a row failed (a single failure that the
  // next run repairs does not page).
  const errorsAlarm: AlarmDefinition = {
    id: 'TokenRefresherErrorsAlarm',
    props: {
      ...common,
      alarmDescription:
        'The token refresher failed in two runs in a row. A run fails only when it cannot read the connections table ' +
        '(a connection whose refresh fails or is refused does not fail the run: see ConnectionsFailingAlarm). ' +
        'Check its logs: does the connections table exist, may the refresher\'s role read it, is the connections KMS key enabled?',
      metric: refresher.metricErrors({ period: onePeriod, statistic: 'Sum' }),
      evaluationPeriods: 2,
      datapointsToAlarm: 2,
    },
  };
  // Every scheduled run counts the failing connections; one or more in a run's period alarms.
  const failingAlarm: AlarmDefinition = {
    id: 'ConnectionsFailingAlarm',
    props: {
      ...common,
      alarmDescription:
        'A connection is failing: the provider refused its refresh token (or its sealed refresh token does not open: reason token-unreadable), and its messages wait until its credentials are replaced. ' +
        'Find it with npm run connections -- list (status failing, last failure reason); then replace its credentials with ' +
        'npm run connections -- add <id> --client-id <client id> (refresh token on standard input), or remove it with npm run connections -- remove <id> ' +
        '(docs/operations.md, "Runbook").',
      metric: serviceMetric(source, REFRESHER_METRIC_NAMES.failing, 'Maximum', onePeriod),
      evaluationPeriods: 1,
    },
  };

  // A run that found the key that seals the tokens disabled or pending deletion: one alarm for the
  // key, where every connection's refresh waits (none turns failing, no event follows).
  const keyAlarm: AlarmDefinition = {
    id: 'ConnectionsKeyUnavailableAlarm',
    props: {
      ...common,
      alarmDescription:
        'The KMS key that seals the connections\' tokens (stack output ConnectionsKeyArn) is disabled or pending deletion: no token opens, ' +
        'every refresh waits and the item sync\'s messages wait; no connection turns failing. Enable the key (or cancel its deletion, then enable it): ' +
        'the next run refreshes as before (docs/operations.md, "The connections key is unavailable").',
      metric: serviceMetric(source, REFRESHER_METRIC_NAMES.keyUnavailable, 'Maximum', onePeriod),
      evaluationPeriods: 1,
    },
  };

  const period = Duration.minutes(5);
  const refresherGraph = new cloudwatch.GraphWidget({
    title: 'Token refresher',
    width: 8,
    left: [
      ...REFRESH_COUNTERS.map((name) => serviceMetric(source, name, 'Sum', period)),
      refresher.metricErrors({ period, statistic: 'Sum' }),
    ],
    leftYAxis: { min: 0 },
  });
  const connectionsGraph = new cloudwatch.GraphWidget({
    title: 'Connections by status',
    width: 8,
    left: CONNECTION_GAUGES.map((name) => serviceMetric(source, name, 'Maximum', onePeriod)),
    leftYAxis: { min: 0 },
  });
  return { alarms: [errorsAlarm, failingAlarm, keyAlarm], graphs: [refresherGraph, connectionsGraph] };
}
