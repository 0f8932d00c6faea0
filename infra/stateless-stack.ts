/**
 * Everything that can be torn down and rebuilt without losing data: both functions, their
 * schedule and event source, the deploy-time token refresh, alarms, the alarm topic and the
 * dashboard. The stateful resources come in through typed props.
 *
 * The constructor reads as the list of parts; each part is a method here or a module of its own
 * (infra/deploy-run, infra/operations) that takes what it wires as typed props. Every part adds its
 * resources to this stack under the same ids, so logical ids stay as they are.
 */
import { CfnOutput, Duration, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { ITEM_SYNC_LAZY_MODULES } from '../functions/item-sync/lazy-modules.js';
import { REFRESHER_SERVICE, SYNC_SERVICE } from '../functions/shared/metric-names.js';
import type { ContentSyncConfig } from './context.js';
import { addSchedulerInvokeRole, ContentSyncFunction, functionProps, sqsEventSourceProps } from './constructs/content-sync-function.js';
import {
  deployRunDeployment,
  REFRESHER_TIMEOUT_SECONDS,
  refresherDeployment,
  scheduleDeliveryDeployment,
  scheduleDeployment,
  syncDeployment,
  syncEventSourceDeployment,
  type ResourceNames,
} from './deployment.js';
import { addChangeEvents, addChangeEventsAlarms, addChangeEventsWidgets, type ChangeEventsStateful } from './change-events/change-events.js';
import { addDeployRun } from './deploy-run/deploy-run.js';
import { grantItemObjects } from './items-bucket.js';
import { addAlarms } from './operations/alarms.js';
import { addDashboard } from './operations/dashboard.js';
import { addReconcileEventSource, addReconciler, addReconcilerAlarms, addReconcilerWidgets } from './reconciler/reconciler.js';

export const REFRESHER_TIMEOUT = Duration.seconds(REFRESHER_TIMEOUT_SECONDS);

/** The stateful resources this stack uses. */
export interface StatefulResources {
  readonly table: dynamodb.ITable;
  /** The item sync's shared state (the provider pace row). */
  readonly controlTable: dynamodb.ITable;
  readonly credentialsSecret: secretsmanager.ISecret;
  readonly accessTokenSecret: secretsmanager.ISecret;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  /** The reconciler's queue of known ids (the sync's second event source) and its dead-letter queue. */
  readonly reconcileQueue: sqs.IQueue;
  readonly reconcileDeadLetterQueue: sqs.IQueue;
  /** Items too large for a row (infra/items-bucket.ts). */
  readonly itemsBucket: s3.IBucket;
  /** The change-event bus and the stream event source's failure queue. */
  readonly changeEvents: ChangeEventsStateful;
}

/** The names each function's environment gives the stateful resources (infra/deployment.ts). */
export function resourceNames(stateful: StatefulResources): ResourceNames {
  return {
    itemsTableName: stateful.table.tableName,
    itemsBucketName: stateful.itemsBucket.bucketName,
    controlTableName: stateful.controlTable.tableName,
    deadLetterQueueUrl: stateful.deadLetterQueue.queueUrl,
    reconcileQueueUrl: stateful.reconcileQueue.queueUrl,
    credentialsSecretId: stateful.credentialsSecret.secretArn,
    accessTokenSecretId: stateful.accessTokenSecret.secretArn,
    eventBusName: stateful.changeEvents.bus.eventBusArn,
  };
}

export interface StatelessStackProps extends StackProps {
  readonly config: ContentSyncConfig;
  readonly stateful: StatefulResources;
}

export class StatelessStack extends Stack {
  readonly refresher: ContentSyncFunction;
  readonly sync: ContentSyncFunction;
  /** Sends every known id to the reconcile queue once per pass; undefined when freshnessHours is 0 (infra/reconciler). */
  readonly reconciler: ContentSyncFunction | undefined;
  /** Announces every real change of an items-table row (infra/change-events). */
  readonly changeEvents: ContentSyncFunction;
  readonly alarmTopic: sns.Topic;
  readonly alarms: cloudwatch.Alarm[];

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { config, stateful } = props;

    this.refresher = this.tokenRefresher(config, stateful);
    this.refreshSchedule(this.refresher, config);
    addDeployRun(this, {
      refresher: this.refresher,
      deployment: deployRunDeployment(config, { refresherFunctionName: this.refresher.function.functionName }),
    });

    this.sync = this.itemSync(config, stateful);
    // ---- the items bucket: put and delete item objects (infra/items-bucket.ts) ----
    grantItemObjects(this.sync.role, stateful.itemsBucket);
    this.syncEventSource(this.sync, stateful.queue, config);
    // ---- reconciliation: the reconcile queue feeds the sync too; the reconciler and its schedule (infra/reconciler) ----
    addReconcileEventSource({ sync: this.sync, reconcileQueue: stateful.reconcileQueue, config });
    this.reconciler = addReconciler(this, { config, table: stateful.table, controlTable: stateful.controlTable, reconcileQueue: stateful.reconcileQueue });

    for (const fn of [this.refresher, this.sync]) this.acknowledgeFunctionFindings(fn);

    // ---- change events: the stream-fed function (infra/change-events) ----
    this.changeEvents = addChangeEvents(this, { table: stateful.table, ...stateful.changeEvents });

    const functions = { refresher: this.refresher.function, sync: this.sync.function };
    const queues = { queue: stateful.queue, deadLetterQueue: stateful.deadLetterQueue };
    const operations = addAlarms(this, {
      ...functions,
      ...queues,
      tokenRefreshMinutes: config.tokenRefreshMinutes,
      alarmEmail: config.alarmEmail,
    });
    this.alarmTopic = operations.topic;
    this.alarms = operations.alarms;
    // ---- reconciliation: alarms (in the alarm status widget too) ----
    const reconcilerOperations = {
      reconciler: this.reconciler?.function,
      reconcileQueue: stateful.reconcileQueue,
      reconcileDeadLetterQueue: stateful.reconcileDeadLetterQueue,
      freshnessHours: config.freshnessHours,
    };
    this.alarms.push(...addReconcilerAlarms(this, { ...reconcilerOperations, topic: this.alarmTopic }));
    // ---- change events: alarms (in the alarm status widget too) ----
    const changeEventsOperations = { fn: this.changeEvents.function, failureQueue: stateful.changeEvents.failureQueue };
    this.alarms.push(...addChangeEventsAlarms(this, { ...changeEventsOperations, topic: this.alarmTopic }));
    const dashboard = addDashboard(this, { ...functions, ...queues, alarms: this.alarms });
    // ---- reconciliation: dashboard row ----
    addReconcilerWidgets(dashboard, reconcilerOperations);
    // ---- change events: dashboard row ----
    addChangeEventsWidgets(dashboard, changeEventsOperations);

    this.outputs(dashboard);
  }

  /** The token refresher: reads the credentials, writes both secrets. */
  private tokenRefresher(config: ContentSyncConfig, stateful: StatefulResources): ContentSyncFunction {
    const refresher = new ContentSyncFunction(this, 'TokenRefresher', {
      entry: 'functions/token-refresher/handler.ts',
      serviceName: REFRESHER_SERVICE,
      description: 'content-sync: exchanges the refresh token for a fresh access token',
      ...functionProps(refresherDeployment(config, resourceNames(stateful))),
    });
    refresher.allow({
      sid: 'ReadCredentials',
      actions: ['secretsmanager:GetSecretValue'],
      resources: [stateful.credentialsSecret.secretArn],
    });
    refresher.allow({
      sid: 'WriteTokens',
      actions: ['secretsmanager:PutSecretValue'],
      resources: [stateful.credentialsSecret.secretArn, stateful.accessTokenSecret.secretArn],
    });
    return refresher;
  }

  /** EventBridge Scheduler runs the refresher every `tokenRefreshMinutes` with {"trigger":"schedule"}. */
  private refreshSchedule(refresher: ContentSyncFunction, config: ContentSyncConfig): void {
    const tokenRefreshMinutes = scheduleDeployment(config).refresherEveryMinutes;
    const delivery = scheduleDeliveryDeployment(config).refresher;
    // Our own role for the schedule, so its one finding can be acknowledged on it.
    const scheduleRole = addSchedulerInvokeRole(this, 'TokenRefreshScheduleRole', refresher, 'token refresher');
    new scheduler.Schedule(this, 'TokenRefreshSchedule', {
      description: `content-sync: refresh the provider access token every ${tokenRefreshMinutes} min`,
      schedule: scheduler.ScheduleExpression.rate(Duration.minutes(tokenRefreshMinutes)),
      target: new schedulerTargets.LambdaInvoke(refresher.function, {
        input: scheduler.ScheduleTargetInput.fromObject({ trigger: 'schedule' }),
        // A run the next one supersedes is not worth delivering late.
        maxEventAge: Duration.minutes(delivery.maxEventAgeMinutes),
        retryAttempts: delivery.retryAttempts,
        role: scheduleRole,
      }),
    });
  }

  /**
   * The item sync: reads the access token, reads and writes items, draws on the provider pace in the
   * control table, sends waiting records back to its own queue and dead ones to the dead-letter queue.
   */
  private itemSync(config: ContentSyncConfig, stateful: StatefulResources): ContentSyncFunction {
    const sync = new ContentSyncFunction(this, 'ItemSync', {
      entry: 'functions/item-sync/handler.ts',
      // The S3 client, for items too large for a row only, is a module of its own, loaded when needed.
      lazyModules: ITEM_SYNC_LAZY_MODULES,
      serviceName: SYNC_SERVICE,
      description: 'content-sync: fetches queued item ids from the provider into the items table',
      ...functionProps(syncDeployment(config, resourceNames(stateful))),
    });
    sync.allow({
      sid: 'ReadAccessToken',
      actions: ['secretsmanager:GetSecretValue'],
      resources: [stateful.accessTokenSecret.secretArn],
    });
    sync.allow({
      sid: 'ReadWriteItems',
      actions: ['dynamodb:BatchGetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
      resources: [stateful.table.tableArn],
    });
    sync.allow({
      sid: 'ProviderPace',
      actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
      resources: [stateful.controlTable.tableArn],
    });
    // Records that must wait (pace, provider outage) are sent again, delayed, to the queue they came
    // from (SendMessageBatch is authorised by sqs:SendMessage). The queue is SQS-managed encrypted:
    // no KMS permission is needed.
    sync.allow({
      sid: 'Requeue',
      actions: ['sqs:SendMessage'],
      resources: [stateful.queue.queueArn],
    });
    sync.allow({
      sid: 'DeadLetter',
      actions: ['sqs:SendMessage'],
      resources: [stateful.deadLetterQueue.queueArn],
    });
    return sync;
  }

  /** The sync queue feeds the item sync (partial batch failures reported). */
  private syncEventSource(sync: ContentSyncFunction, queue: sqs.IQueue, config: ContentSyncConfig): void {
    // The event source grants receive/delete/attributes and ChangeMessageVisibility (Retry-After) on the sync queue.
    sync.function.addEventSource(
      new SqsEventSource(queue, sqsEventSourceProps(syncEventSourceDeployment(config))),
    );
  }

  private acknowledgeFunctionFindings(fn: ContentSyncFunction): void {
    Validations.of(fn.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason: 'Node.js 22 is the runtime the project targets and tests for; moving to a newer runtime is a deliberate, tested change.',
    });
    Validations.of(fn.role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions.',
    });
  }

  private outputs(dashboard: cloudwatch.Dashboard): void {
    new CfnOutput(this, 'TokenRefresherFunctionName', {
      description: 'Run it after setting the credentials: aws lambda invoke --function-name <this> --payload \'{"trigger":"manual"}\'',
      value: this.refresher.function.functionName,
    });
    new CfnOutput(this, 'ItemSyncFunctionName', { value: this.sync.function.functionName });
    if (this.reconciler !== undefined) {
      new CfnOutput(this, 'ReconcilerFunctionName', {
        description: 'Sends every known id to the reconcile queue once per pass; its logs ("tick done") show the pass',
        value: this.reconciler.function.functionName,
      });
    }
    new CfnOutput(this, 'ChangeEventsFunctionName', {
      description: 'Publishes the change events from the items table stream (its logs say which records were handed back)',
      value: this.changeEvents.function.functionName,
    });
    new CfnOutput(this, 'AlarmTopicArn', { description: 'SNS topic of every content-sync alarm', value: this.alarmTopic.topicArn });
    new CfnOutput(this, 'DashboardName', { value: dashboard.dashboardName });
  }
}
