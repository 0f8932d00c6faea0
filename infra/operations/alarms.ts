/**
 * The alarm topic and the five alarms (docs/operations.md, "Alarms" and "Runbook"): records in the dead-letter
 * queue, the token refresher failing, the item sync failing whole invocations, the sync queue's
 * oldest message waiting too long, and the provider breaker staying open. Every alarm notifies the
 * topic on alarm and on recovery.
 *
 * The resources are added to the given scope (the stateless stack) under their own ids, so their
 * logical ids do not depend on where this code lives.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { PACE_METRIC_NAMES, SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import { notifyOnAlarmAndRecovery, serviceMetric } from './notify.js';

/** Alarm when the oldest sync message has waited this long. */
export const OLDEST_MESSAGE_ALARM_SECONDS = 3600;
/** Alarm when the provider breaker has been open this long (every sync record is waiting meanwhile). */
export const BREAKER_OPEN_ALARM_SECONDS = 1800;

export interface AlarmsProps {
  readonly refresher: lambda.IFunction;
  readonly sync: lambda.IFunction;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  /** The schedule's interval: the refresher alarm's period follows it. */
  readonly tokenRefreshMinutes: number;
  /** Subscribed to the topic when set. */
  readonly alarmEmail: string | undefined;
}

export interface Alarms {
  readonly topic: sns.Topic;
  readonly alarms: cloudwatch.Alarm[];
}

export function addAlarms(scope: Construct, props: AlarmsProps): Alarms {
  const topic = alarmTopic(scope, props.alarmEmail);
  const alarms: cloudwatch.Alarm[] = [];
  const alarm = (id: string, alarmProps: cloudwatch.AlarmProps) => {
    const created = new cloudwatch.Alarm(scope, id, alarmProps);
    notifyOnAlarmAndRecovery([created], topic);
    alarms.push(created);
  };
  const fiveMinutes = Duration.minutes(5);
  const common = {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  };

  alarm('DeadLetterQueueAlarm', {
    ...common,
    alarmDescription: 'Records are waiting in the content-sync dead-letter queue: read their "error" attribute, fix, then redrive (README).',
    metric: props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }),
    threshold: 1,
    evaluationPeriods: 1,
  });

  // One period per scheduled run: alarm when two runs in a row failed (a single failure that the
  // next run repairs does not page). Intervals over 12 h: one run per day, alarm on the first.
  const twoRuns = props.tokenRefreshMinutes <= 720;
  const refresherPeriods = twoRuns ? 2 : 1;
  alarm('TokenRefresherErrorsAlarm', {
    ...common,
    alarmDescription: `The token refresher failed ${twoRuns ? 'in two refresh intervals in a row' : 'today'}: check its logs (credentials set? provider reachable?).`,
    metric: props.refresher.metricErrors({
      period: Duration.minutes(twoRuns ? props.tokenRefreshMinutes : 1440),
      statistic: 'Sum',
    }),
    threshold: 1,
    evaluationPeriods: refresherPeriods,
    datapointsToAlarm: refresherPeriods,
  });

  alarm('ItemSyncErrorsAlarm', {
    ...common,
    alarmDescription: 'The item sync function failed whole invocations (crash or time-out); records are redelivered, check its logs.',
    metric: props.sync.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
    threshold: 1,
    evaluationPeriods: 1,
  });

  alarm('SyncQueueAgeAlarm', {
    ...common,
    alarmDescription: `The oldest message on the sync queue has waited ${OLDEST_MESSAGE_ALARM_SECONDS / 60} min or more: the sync is stuck or cannot keep up.`,
    metric: props.queue.metricApproximateAgeOfOldestMessage({ period: fiveMinutes, statistic: 'Maximum' }),
    threshold: OLDEST_MESSAGE_ALARM_SECONDS,
    evaluationPeriods: 1,
  });

  // Each sync container publishes BreakerOpenSeconds after every batch: how long the shared breaker
  // has been open (0 when closed). Waiting records keep batches coming while it is open; with no
  // records there is no data, which is no outage to report.
  alarm('ProviderBreakerOpenAlarm', {
    ...common,
    alarmDescription:
      `The item sync's provider breaker has been open for ${BREAKER_OPEN_ALARM_SECONDS / 60} min or more: no item is fetched (one probe at a time), ` +
      'records wait on the sync queue and are sent again with a delay. Either the provider is down (check its status and the item sync logs) ' +
      'or it refuses the access token and the token refresher cannot get a new one (check the token refresher alarm and its logs: credentials set? refresh token still valid?). ' +
      'The sync resumes by itself once a probe succeeds.',
    metric: serviceMetric(SYNC_SERVICE, PACE_METRIC_NAMES.breakerOpenSeconds, 'Maximum', fiveMinutes),
    threshold: BREAKER_OPEN_ALARM_SECONDS,
    evaluationPeriods: 1,
  });

  return { topic, alarms };
}

function alarmTopic(scope: Construct, alarmEmail: string | undefined): sns.Topic {
  const topic = new sns.Topic(scope, 'AlarmTopic', {
    displayName: 'content-sync alarms',
    enforceSSL: true,
  });
  // Not KMS-encrypted: CloudWatch cannot publish to a topic under the AWS-managed SNS key, and
  // alarm notifications carry alarm names and states only.
  if (alarmEmail !== undefined) {
    topic.addSubscription(new subscriptions.EmailSubscription(alarmEmail));
  }
  return topic;
}
