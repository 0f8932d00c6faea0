/**
 * The token refresher's operations (docs/operations.md): its alarm, on failures in consecutive
 * refresh intervals, and its dashboard graph, its metrics (namespace ContentSync, service
 * token-refresher) and its errors. The alarm is made on the alarm topic by infra/operations; the
 * dashboard puts the graph beside the alarm status (infra/stateless-stack.ts).
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { REFRESHER_METRIC_NAMES, REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';
import { serviceMetric } from '../constructs/notify.js';
import type { ContentSyncConfig } from '../context.js';
import { scheduleDeployment } from '../deployment.js';
import type { AlarmDefinition } from '../operations/alarms.js';

export interface TokenRefresherOperations {
  readonly alarms: AlarmDefinition[];
  /** Its one dashboard graph (12 units wide). */
  readonly graph: cloudwatch.IWidget;
}

export function tokenRefresherOperations(refresher: lambda.IFunction, config: ContentSyncConfig): TokenRefresherOperations {
  // The schedule's interval: the alarm's period follows it.
  const tokenRefreshMinutes = scheduleDeployment(config).refresherEveryMinutes;
  // One period per scheduled run: alarm when two runs in a row failed (a single failure that the
  // next run repairs does not page). Intervals over 12 h: one run per day, alarm on the first.
  const twoRuns = tokenRefreshMinutes <= 720;
  const periods = twoRuns ? 2 : 1;
  const errorsAlarm: AlarmDefinition = {
    id: 'TokenRefresherErrorsAlarm',
    props: {
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      alarmDescription: `The token refresher failed ${twoRuns ? 'in two refresh intervals in a row' : 'today'}: check its logs (credentials set? provider reachable?).`,
      metric: refresher.metricErrors({
        period: Duration.minutes(twoRuns ? tokenRefreshMinutes : 1440),
        statistic: 'Sum',
      }),
      threshold: 1,
      evaluationPeriods: periods,
      datapointsToAlarm: periods,
    },
  };

  const period = Duration.minutes(5);
  const graph = new cloudwatch.GraphWidget({
    title: 'Token refresher',
    width: 12,
    left: [
      ...Object.values(REFRESHER_METRIC_NAMES).map((name) => serviceMetric(REFRESHER_SERVICE, name, 'Sum', period)),
      refresher.metricErrors({ period, statistic: 'Sum' }),
    ],
  });
  return { alarms: [errorsAlarm], graph };
}
