/**
 * What every alarm and dashboard of content-sync builds on: a metric the functions publish
 * (namespace METRICS_NAMESPACE, dimension `service`), used by every feature's alarms and dashboard
 * rows; and alarms that notify the topic on alarm and on recovery (infra/operations/alarms.ts).
 */
import type { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { METRICS_NAMESPACE } from '../../functions/shared/metric-names.js';

/** One of the functions' own metrics: `metricName` of `service`, in METRICS_NAMESPACE. */
export function serviceMetric(service: string, metricName: string, statistic: string, period: Duration, label?: string): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { service },
    statistic,
    period,
    ...(label === undefined ? {} : { label }),
  });
}

/** Each alarm notifies the topic on alarm and on recovery. */
export function notifyOnAlarmAndRecovery(alarms: readonly cloudwatch.Alarm[], topic: sns.ITopic): void {
  for (const alarm of alarms) {
    alarm.addAlarmAction(new cwActions.SnsAction(topic));
    alarm.addOkAction(new cwActions.SnsAction(topic));
  }
}
