/**
 * Everything that can be torn down and rebuilt without losing data: both functions, their
 * schedule and event source, the deploy-time token refresh, alarms, the alarm topic and the
 * dashboard. The stateful resources come in through typed props.
 */
import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import * as triggers from 'aws-cdk-lib/triggers';
import type { Construct } from 'constructs';
import { ENV } from '../functions/shared/config.js';
import {
  METRICS_NAMESPACE,
  REFRESHER_METRIC_NAMES,
  REFRESHER_SERVICE,
  SYNC_METRIC_NAMES,
  SYNC_SERVICE,
} from '../functions/shared/metric-names.js';
import type { ContentSyncConfig } from './context.js';
import { ContentSyncFunction, LOG_RETENTION } from './constructs/content-sync-function.js';

export const REFRESHER_TIMEOUT = Duration.seconds(30);
/** Alarm when the oldest sync message has waited this long. */
export const OLDEST_MESSAGE_ALARM_SECONDS = 3600;
export { REFRESHER_SERVICE, SYNC_SERVICE };
export const ITEM_SYNC_METRICS = Object.values(SYNC_METRIC_NAMES);
export const REFRESHER_METRICS = Object.values(REFRESHER_METRIC_NAMES);

/** The stateful resources this stack uses. */
export interface StatefulResources {
  readonly table: dynamodb.ITable;
  readonly credentialsSecret: secretsmanager.ISecret;
  readonly accessTokenSecret: secretsmanager.ISecret;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
}

export interface StatelessStackProps extends StackProps {
  readonly config: ContentSyncConfig;
  readonly stateful: StatefulResources;
}

/**
 * Run by the deploy (a CDK trigger): invokes the token refresher with `{"trigger":"deploy"}` and
 * fails, and with it the deploy, when the refresher fails. The refresher itself answers `skipped`
 * while the credentials secret still holds the placeholder. Uses the SDK of the Node.js runtime.
 */
export const DEPLOY_RUN_CODE = `
const { LambdaClient, InvokeCommand } = require('@aws-sdk/client-lambda');
const client = new LambdaClient({ maxAttempts: 8 });
exports.handler = async () => {
  const out = await client.send(new InvokeCommand({
    FunctionName: process.env.REFRESHER_FUNCTION_NAME,
    InvocationType: 'RequestResponse',
    Payload: Buffer.from(JSON.stringify({ trigger: 'deploy' })),
  }));
  const text = out.Payload ? Buffer.from(out.Payload).toString('utf8').slice(0, 2000) : '';
  if (out.FunctionError) throw new Error('token refresher failed at deploy time: ' + text);
  console.log(JSON.stringify({ message: 'token refresher ran at deploy time', result: text }));
  return text;
};
`;

export class StatelessStack extends Stack {
  readonly refresher: ContentSyncFunction;
  readonly sync: ContentSyncFunction;
  readonly alarmTopic: sns.Topic;
  readonly alarms: cloudwatch.Alarm[] = [];

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { config, stateful } = props;

    // ---- token refresher -------------------------------------------------------------------
    this.refresher = new ContentSyncFunction(this, 'TokenRefresher', {
      entry: 'functions/token-refresher/handler.ts',
      serviceName: REFRESHER_SERVICE,
      description: 'content-sync: exchanges the refresh token for a fresh access token',
      memorySize: 256,
      timeout: REFRESHER_TIMEOUT,
      environment: {
        [ENV.baseUrl]: config.baseUrl,
        [ENV.credentialsSecretId]: stateful.credentialsSecret.secretArn,
        [ENV.accessTokenSecretId]: stateful.accessTokenSecret.secretArn,
      },
    });
    this.refresher.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadCredentials',
        actions: ['secretsmanager:GetSecretValue'],
        resources: [stateful.credentialsSecret.secretArn],
      }),
    );
    this.refresher.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteTokens',
        actions: ['secretsmanager:PutSecretValue'],
        resources: [stateful.credentialsSecret.secretArn, stateful.accessTokenSecret.secretArn],
      }),
    );

    // Our own role for the schedule, so its one finding can be acknowledged on it.
    const scheduleRole = new iam.Role(this, 'TokenRefreshScheduleRole', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': this.account } },
      }),
      description: 'Lets EventBridge Scheduler invoke the token refresher',
    });
    const refresherLogicalId = this.getLogicalId(this.refresher.function.node.defaultChild as lambda.CfnFunction);
    Validations.of(scheduleRole).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${refresherLogicalId}.Arn>:*]`,
      reason: "LambdaInvoke's grant: lambda:InvokeFunction on the token refresher and its versions/aliases (ARN:*), that one function only.",
    });
    new scheduler.Schedule(this, 'TokenRefreshSchedule', {
      description: `content-sync: refresh the provider access token every ${config.tokenRefreshMinutes} min`,
      schedule: scheduler.ScheduleExpression.rate(Duration.minutes(config.tokenRefreshMinutes)),
      target: new schedulerTargets.LambdaInvoke(this.refresher.function, {
        input: scheduler.ScheduleTargetInput.fromObject({ trigger: 'schedule' }),
        // A run the next one supersedes is not worth delivering late.
        maxEventAge: Duration.minutes(Math.max(1, Math.min(config.tokenRefreshMinutes, 1440))),
        retryAttempts: 2,
        role: scheduleRole,
      }),
    });

    this.deployRun(config);

    // ---- item sync -------------------------------------------------------------------------
    this.sync = new ContentSyncFunction(this, 'ItemSync', {
      entry: 'functions/item-sync/handler.ts',
      serviceName: SYNC_SERVICE,
      description: 'content-sync: fetches queued item ids from the provider into the items table',
      memorySize: 512,
      timeout: Duration.seconds(config.syncTimeoutSeconds),
      environment: {
        [ENV.baseUrl]: config.baseUrl,
        [ENV.accessTokenSecretId]: stateful.accessTokenSecret.secretArn,
        [ENV.itemsTableName]: stateful.table.tableName,
        [ENV.revisionField]: config.revisionField,
        [ENV.deadLetterQueueUrl]: stateful.deadLetterQueue.queueUrl,
      },
    });
    this.sync.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadAccessToken',
        actions: ['secretsmanager:GetSecretValue'],
        resources: [stateful.accessTokenSecret.secretArn],
      }),
    );
    this.sync.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadWriteItems',
        actions: ['dynamodb:BatchGetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        resources: [stateful.table.tableArn],
      }),
    );
    this.sync.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'DeadLetter',
        actions: ['sqs:SendMessage'],
        resources: [stateful.deadLetterQueue.queueArn],
      }),
    );
    // The event source grants receive/delete/attributes and ChangeMessageVisibility (Retry-After) on the sync queue.
    this.sync.function.addEventSource(
      new SqsEventSource(stateful.queue, {
        batchSize: config.syncBatchSize,
        // SQS requires a batching window for batches over 10.
        ...(config.syncBatchSize > 10 ? { maxBatchingWindow: Duration.seconds(1) } : {}),
        reportBatchItemFailures: true,
        maxConcurrency: config.syncMaxConcurrency,
      }),
    );

    for (const fn of [this.refresher, this.sync]) {
      this.acknowledgeFunctionFindings(fn.function, fn.role);
    }

    // ---- operations ------------------------------------------------------------------------
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
      displayName: 'content-sync alarms',
      enforceSSL: true,
    });
    // Not KMS-encrypted: CloudWatch cannot publish to a topic under the AWS-managed SNS key, and
    // alarm notifications carry alarm names and states only.
    if (config.alarmEmail !== undefined) {
      this.alarmTopic.addSubscription(new subscriptions.EmailSubscription(config.alarmEmail));
    }
    this.createAlarms(config, stateful);
    this.createDashboard(stateful);

    new CfnOutput(this, 'TokenRefresherFunctionName', {
      description: 'Run it after setting the credentials: aws lambda invoke --function-name <this> --payload \'{"trigger":"manual"}\'',
      value: this.refresher.function.functionName,
    });
    new CfnOutput(this, 'ItemSyncFunctionName', { value: this.sync.function.functionName });
    new CfnOutput(this, 'AlarmTopicArn', { description: 'SNS topic of every content-sync alarm', value: this.alarmTopic.topicArn });
  }

  /** The deploy-time run of the refresher (see DEPLOY_RUN_CODE). */
  private deployRun(config: ContentSyncConfig): void {
    const logGroup = new logs.LogGroup(this, 'DeployRunLogGroup', { retention: LOG_RETENTION, removalPolicy: RemovalPolicy.DESTROY });
    const role = new iam.Role(this, 'DeployRunRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'Execution role of the deploy-time token refresh',
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteOwnLogs',
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'InvokeTokenRefresher',
        actions: ['lambda:InvokeFunction'],
        resources: [this.refresher.function.functionArn],
      }),
    );
    const fn = new lambda.Function(this, 'DeployRunFunction', {
      description: 'content-sync: runs the token refresher once per deploy that changes it',
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      code: lambda.Code.fromInline(DEPLOY_RUN_CODE),
      handler: 'index.handler',
      memorySize: 128,
      timeout: REFRESHER_TIMEOUT.plus(Duration.seconds(30)),
      role,
      logGroup,
      environment: {
        REFRESHER_FUNCTION_NAME: this.refresher.function.functionName,
        // Not read by the code: a new provider address changes this function, so the deploy
        // that changes it fetches a token from the new address at once.
        [ENV.baseUrl]: config.baseUrl,
      },
    });
    Validations.of(fn).acknowledge({
      id: 'AwsSolutions-L1',
      reason: 'Node.js 22 is the runtime the project targets and tests for (same as the functions it deploys).',
    });
    const trigger = new triggers.Trigger(this, 'DeployRun', {
      handler: fn,
      invocationType: triggers.InvocationType.REQUEST_RESPONSE,
      timeout: REFRESHER_TIMEOUT.plus(Duration.seconds(30)),
      executeOnHandlerChange: true,
    });
    // After the refresher, its role and policy exist (the secrets are in the stateful stack, deployed first).
    trigger.executeAfter(this.refresher);
  }

  private acknowledgeFunctionFindings(fn: lambda.IFunction, role: iam.Role): void {
    Validations.of(fn).acknowledge({
      id: 'AwsSolutions-L1',
      reason: 'Node.js 22 is the runtime the project targets and tests for; moving to a newer runtime is a deliberate, tested change.',
    });
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions.',
    });
  }

  private alarm(id: string, props: cloudwatch.AlarmProps): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, id, props);
    alarm.addAlarmAction(new cwActions.SnsAction(this.alarmTopic));
    alarm.addOkAction(new cwActions.SnsAction(this.alarmTopic));
    this.alarms.push(alarm);
    return alarm;
  }

  private createAlarms(config: ContentSyncConfig, stateful: StatefulResources): void {
    const fiveMinutes = Duration.minutes(5);
    const common = {
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    };

    this.alarm('DeadLetterQueueAlarm', {
      ...common,
      alarmDescription: 'Records are waiting in the content-sync dead-letter queue: read their "error" attribute, fix, then redrive (README).',
      metric: stateful.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }),
      threshold: 1,
      evaluationPeriods: 1,
    });

    // One period per scheduled run: alarm when two runs in a row failed (a single failure that the
    // next run repairs does not page). Intervals over 12 h: one run per day, alarm on the first.
    const twoRuns = config.tokenRefreshMinutes <= 720;
    const refresherPeriods = twoRuns ? 2 : 1;
    this.alarm('TokenRefresherErrorsAlarm', {
      ...common,
      alarmDescription: `The token refresher failed ${twoRuns ? 'in two refresh intervals in a row' : 'today'}: check its logs (credentials set? provider reachable?).`,
      metric: this.refresher.function.metricErrors({
        period: Duration.minutes(twoRuns ? config.tokenRefreshMinutes : 1440),
        statistic: 'Sum',
      }),
      threshold: 1,
      evaluationPeriods: refresherPeriods,
      datapointsToAlarm: refresherPeriods,
    });

    this.alarm('ItemSyncErrorsAlarm', {
      ...common,
      alarmDescription: 'The item sync function failed whole invocations (crash or time-out); records are redelivered, check its logs.',
      metric: this.sync.function.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
      threshold: 1,
      evaluationPeriods: 1,
    });

    this.alarm('SyncQueueAgeAlarm', {
      ...common,
      alarmDescription: `The oldest message on the sync queue has waited ${OLDEST_MESSAGE_ALARM_SECONDS / 60} min or more: the sync is stuck or cannot keep up.`,
      metric: stateful.queue.metricApproximateAgeOfOldestMessage({ period: fiveMinutes, statistic: 'Maximum' }),
      threshold: OLDEST_MESSAGE_ALARM_SECONDS,
      evaluationPeriods: 1,
    });
  }

  private createDashboard(stateful: StatefulResources): void {
    const period = Duration.minutes(5);
    const custom = (service: string, metricName: string) =>
      new cloudwatch.Metric({
        namespace: METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service },
        statistic: 'Sum',
        period,
      });
    const syncFn = this.sync.function;
    const dashboard = new cloudwatch.Dashboard(this, 'Dashboard', { defaultInterval: Duration.hours(6) });
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Items',
        width: 12,
        left: ITEM_SYNC_METRICS.filter((name) => name.startsWith('Items')).map((name) => custom(SYNC_SERVICE, name)),
      }),
      new cloudwatch.GraphWidget({
        title: 'Records retried / dead-lettered',
        width: 12,
        left: ITEM_SYNC_METRICS.filter((name) => name.startsWith('Records')).map((name) => custom(SYNC_SERVICE, name)),
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Sync queue',
        width: 12,
        left: [
          stateful.queue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
          stateful.queue.metricApproximateNumberOfMessagesNotVisible({ period, statistic: 'Maximum' }),
          stateful.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum', label: 'Dead-letter queue' }),
        ],
        right: [stateful.queue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum' })],
      }),
      new cloudwatch.GraphWidget({
        title: 'Item sync function',
        width: 12,
        left: [
          syncFn.metricInvocations({ period, statistic: 'Sum' }),
          syncFn.metricErrors({ period, statistic: 'Sum' }),
          syncFn.metricThrottles({ period, statistic: 'Sum' }),
          syncFn.metric('ConcurrentExecutions', { period, statistic: 'Maximum' }),
        ],
        right: [syncFn.metricDuration({ period, statistic: 'p95' }), syncFn.metricDuration({ period, statistic: 'Maximum' })],
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Token refresher',
        width: 12,
        left: [
          ...REFRESHER_METRICS.map((name) => custom(REFRESHER_SERVICE, name)),
          this.refresher.function.metricErrors({ period, statistic: 'Sum' }),
        ],
      }),
      new cloudwatch.AlarmStatusWidget({ title: 'Alarms', width: 12, alarms: this.alarms }),
    );
    new CfnOutput(this, 'DashboardName', { value: dashboard.dashboardName });
  }
}
