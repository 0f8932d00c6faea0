/**
 * What every alarm and dashboard of content-sync builds on: a metric the functions publish
 * (namespace METRICS_NAMESPACE, dimension `service`, and `stage` in a deployment with a stage), used
 * by every feature's alarms and dashboard rows; and alarms that notify the topic on alarm and on
 * recovery (infra/operations/alarms.ts).
 */
import type { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { metricDimensions, METRICS_NAMESPACE } from '../../functions/shared/metric-names.js';

/** Whose metric: a function (its service name) of the deployment with this stage (undefined: none). */
export interface MetricSource {
  readonly service: string;
  /** The context key `stage`: the functions publish it as a dimension only when it is given. */
  readonly stage: string | undefined;
}

/**
 * One of the functions' own metrics: `metricName` of `source`, in METRICS_NAMESPACE, selected by
 * `service` and, in a deployment with a stage, `stage` (the dimensions the functions publish).
 */
export function serviceMetric(source: MetricSource, metricName: string, statistic: string, period: Duration, label?: string): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: metricDimensions(source.service, source.stage),
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
