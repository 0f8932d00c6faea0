/**
 * The alarm topic, and the alarms of every feature on it (docs/operations.md, "Alarms" and
 * "Runbook"). Each feature defines its own alarms (its operations.ts); they are made here, on the
 * stack under their own ids (so their logical ids do not depend on where this code lives), each
 * notifying the topic on alarm and on recovery, in the order given: the alarm-status widget
 * (./dashboard.ts) lists them so.
 */
import { CfnOutput, type Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { notifyOnAlarmAndRecovery } from '../constructs/notify.js';

/** One alarm a feature asks for: made on the stack under `id`. */
export interface AlarmDefinition {
  readonly id: string;
  readonly props: cloudwatch.AlarmProps;
}

export interface AlarmsProps {
  /** Subscribed to the topic when set. */
  readonly alarmEmail: string | undefined;
  /** Every feature's alarms, in the order the alarm-status widget lists them. */
  readonly alarms: readonly AlarmDefinition[];
}

export interface Alarms {
  readonly topic: sns.Topic;
  readonly alarms: cloudwatch.Alarm[];
}

/** The alarm topic (with its output), then every alarm, notifying it. */
export function addAlarms(stack: Stack, props: AlarmsProps): Alarms {
  const topic = alarmTopic(stack, props.alarmEmail);
  const alarms = props.alarms.map(({ id, props: alarmProps }) => {
    const alarm = new cloudwatch.Alarm(stack, id, alarmProps);
    notifyOnAlarmAndRecovery([alarm], topic);
    return alarm;
  });
  new CfnOutput(stack, 'AlarmTopicArn', { description: 'SNS topic of every content-sync alarm', value: topic.topicArn });
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
