/**
 * Reconciliation in the stacks: the reconcile queue and its dead-letter queue (stateful), the sync's
 * second event source, the reconciler function with its exact permissions, its schedule, alarms,
 * dashboard row and output (stateless); freshnessHours validated at synth, 0 leaving the reconciler
 * out; fan-out over several schedules.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { RECONCILE_CURSOR_KEY } from '../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { DEFAULT_TUNING } from '../../functions/reconciler/app.js';
import { ENV } from '../../functions/shared/config.js';
import { ConfigError } from '../../functions/shared/errors.js';
import { readContentSyncConfig } from '../../infra/context.js';
import { projectedPassDescription } from '../../infra/reconciler/operations.js';
import { addReconciler, RECONCILE_CURSOR_ROW } from '../../infra/reconciler/reconciler.js';
import { buildApp, dashboardBody, dashboardParts, expectSchedulerInvokeRole, fnArn, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
const ids: Record<string, string> = {};
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates();
  const s = t.statelessTemplate;
  const f = t.statefulTemplate;
  ids.reconciler = logicalId(s, 'AWS::Lambda::Function', 'ReconcilerFunction');
  ids.role = logicalId(s, 'AWS::IAM::Role', 'ReconcilerRole');
  ids.logs = logicalId(s, 'AWS::Logs::LogGroup', 'ReconcilerLogGroup');
  ids.scheduleRole = logicalId(s, 'AWS::IAM::Role', 'ReconcileScheduleRole');
  ids.sync = logicalId(s, 'AWS::Lambda::Function', 'ItemSyncFunction');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
  ids.queue = logicalId(f, 'AWS::SQS::Queue', 'ReconcileQueue');
  ids.dlq = logicalId(f, 'AWS::SQS::Queue', 'ReconcileDeadLetterQueue');
  imports.queueArn = importOf(f, { 'Fn::GetAtt': [ids.queue, 'Arn'] });
  imports.queueUrl = importOf(f, { Ref: ids.queue });
  imports.queueName = importOf(f, { 'Fn::GetAtt': [ids.queue, 'QueueName'] });
  imports.dlqName = importOf(f, { 'Fn::GetAtt': [ids.dlq, 'QueueName'] });
  imports.tableArn = importOf(f, { 'Fn::GetAtt': [logicalId(f, 'AWS::DynamoDB::Table', 'ItemsTable'), 'Arn'] });
  imports.tableName = importOf(f, { Ref: logicalId(f, 'AWS::DynamoDB::Table', 'ItemsTable') });
  imports.controlArn = importOf(f, { 'Fn::GetAtt': [logicalId(f, 'AWS::DynamoDB::Table', 'ControlTable'), 'Arn'] });
  imports.controlName = importOf(f, { Ref: logicalId(f, 'AWS::DynamoDB::Table', 'ControlTable') });
});

const actions = () => ({ AlarmActions: [{ Ref: ids.topic }], OKActions: [{ Ref: ids.topic }] });

describe('the reconcile queue (stateful)', () => {
  it('as the sync queue: SQS-managed encryption, 4 days, visibility 6× the sync time-out, redrive to its own dead-letter queue after 5 receives, retained', () => {
    const queue = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'ReconcileQueue');
    expect(queue.Properties).toEqual({
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 4 * 24 * 3600,
      VisibilityTimeout: 360,
      RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [ids.dlq, 'Arn'] }, maxReceiveCount: 5 },
    });
    expect([queue.DeletionPolicy, queue.UpdateReplacePolicy]).toEqual(['Retain', 'Retain']);
    const sync = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'SyncQueue');
    expect(queue.Properties['RedrivePolicy'].maxReceiveCount).toBe(sync.Properties['RedrivePolicy'].maxReceiveCount);
    expect(queue.Properties['MessageRetentionPeriod']).toBe(sync.Properties['MessageRetentionPeriod']);
    expect(queue.Properties['VisibilityTimeout']).toBe(sync.Properties['VisibilityTimeout']);
  });

  it('its dead-letter queue as the sync’s: 14 days, retained', () => {
    const dlq = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'ReconcileDeadLetterQueue');
    expect(dlq.Properties).toEqual({ MessageRetentionPeriod: 14 * 24 * 3600, SqsManagedSseEnabled: true });
    expect([dlq.DeletionPolicy, dlq.UpdateReplacePolicy]).toEqual(['Retain', 'Retain']);
  });

  it('both refuse requests without TLS', () => {
    for (const queueId of [ids.queue!, ids.dlq!]) {
      t.statefulTemplate.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: queueId }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } }, Resource: { 'Fn::GetAtt': [queueId, 'Arn'] } }),
          ]),
        },
      });
    }
  });

  it('outputs: both URLs and ARNs', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown; Description?: string }>;
    expect(outputs['ReconcileQueueUrl']!.Value).toEqual({ Ref: ids.queue });
    expect(outputs['ReconcileQueueArn']!.Value).toEqual({ 'Fn::GetAtt': [ids.queue, 'Arn'] });
    expect(outputs['ReconcileDeadLetterQueueUrl']!.Value).toEqual({ Ref: ids.dlq });
    expect(outputs['ReconcileDeadLetterQueueArn']!.Value).toEqual({ 'Fn::GetAtt': [ids.dlq, 'Arn'] });
    expect(outputs['ReconcileQueueUrl']!.Description).toContain('reconcilePass');
    // Where a backfill goes (npm run enqueue -- --backfill --reconcile-queue-url).
    expect(outputs['ReconcileQueueUrl']!.Description).toContain('--backfill');
  });

  it('the queue follows a larger batch’s sync time-out, as the sync queue does', () => {
    const big = synthTemplates({ syncBatchSize: '1000' });
    expect(resource(big.statefulTemplate, 'AWS::SQS::Queue', 'ReconcileQueue').Properties['VisibilityTimeout']).toBe(3600);
  });
});

describe('the item sync takes the reconcile queue too', () => {
  it('a second SQS event source: the sync batch size, ReportBatchItemFailures, the sync’s maximum concurrency', () => {
    const mapping = resource(t.statelessTemplate, 'AWS::Lambda::EventSourceMapping', 'ItemSyncFunctionSqsEventSourceContentSyncStatefulReconcileQueue');
    expect(mapping.Properties).toEqual({
      EventSourceArn: imports.queueArn,
      FunctionName: { Ref: ids.sync },
      BatchSize: 100,
      MaximumBatchingWindowInSeconds: 1,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: 2 },
    });
    const big = synthTemplates({ syncBatchSize: '50', syncMaxConcurrency: '30' });
    expect(resource(big.statelessTemplate, 'AWS::Lambda::EventSourceMapping', 'ItemSyncFunctionSqsEventSourceContentSyncStatefulReconcileQueue').Properties).toMatchObject({
      BatchSize: 50,
      MaximumBatchingWindowInSeconds: 1,
      ScalingConfig: { MaximumConcurrency: 30 },
    });
  });

  it('may send waiting sweep records back to it, and consume it', () => {
    const statements = roleStatements(t.statelessTemplate, logicalId(t.statelessTemplate, 'AWS::IAM::Role', 'ItemSyncRole'));
    expect(statements).toContainEqual({ Sid: 'RequeueReconcile', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.queueArn });
    expect(statements).toContainEqual({
      Effect: 'Allow',
      Action: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
      Resource: imports.queueArn,
    });
  });
});

describe('the reconciler function', () => {
  it('Node.js 22, arm64, 512 MB, 60 s (a tick runs up to 50 s), no tracing (the context key), its own log group and role', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.reconciler!);
    expect(fn.Properties).toMatchObject({
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      MemorySize: 512,
      Timeout: 60,
      LoggingConfig: { LogGroup: { Ref: ids.logs } },
      Role: fnArn(ids.role!),
    });
    expect(DEFAULT_TUNING.tickBudgetMs + DEFAULT_TUNING.safetyMarginMs).toBeLessThanOrEqual(fn.Properties['Timeout'] * 1000);
    expect(fn.Properties).not.toHaveProperty('ReservedConcurrentExecutions');
    expect(resource(t.statelessTemplate, 'AWS::Logs::LogGroup', ids.logs!).Properties).toEqual({ RetentionInDays: 30 });
  });

  it('environment: the tables by name, the queue by URL, FRESHNESS_HOURS; segments and high-water mark keep their defaults', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.reconciler!);
    expect(fn.Properties['Environment'].Variables).toEqual({
      [ENV.itemsTableName]: imports.tableName,
      [ENV.controlTableName]: imports.controlName,
      [ENV.reconcileQueueUrl]: imports.queueUrl,
      [ENV.freshnessHours]: '24',
      POWERTOOLS_SERVICE_NAME: 'reconciler',
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: '--enable-source-maps',
    });
  });

  it('IAM: own logs, Scan and DescribeTable on the items table, the cursor row only, send to and count the reconcile queue; nothing else', () => {
    expect(RECONCILE_CURSOR_ROW).toBe(RECONCILE_CURSOR_KEY);
    expect(roleStatements(t.statelessTemplate, ids.role!)).toEqual([
      { Sid: 'WriteOwnLogs', Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: fnArn(ids.logs!) },
      { Sid: 'ScanItemIds', Effect: 'Allow', Action: ['dynamodb:Scan', 'dynamodb:DescribeTable'], Resource: imports.tableArn },
      {
        Sid: 'ReconcileCursor',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        Resource: imports.controlArn,
        Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['reconcile-cursor'] } },
      },
      { Sid: 'FeedReconcileQueue', Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes'], Resource: imports.queueArn },
    ]);
    const role = resource(t.statelessTemplate, 'AWS::IAM::Role', ids.role!);
    expect(role.Properties['AssumeRolePolicyDocument']).toEqual({
      Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
      Version: '2012-10-17',
    });
    expect(role.Properties).not.toHaveProperty('ManagedPolicyArns');
  });

  it('runs every minute on EventBridge Scheduler as worker 0 of 1, never retried nor delivered late', () => {
    const schedules = Object.values(t.statelessTemplate.findResources('AWS::Scheduler::Schedule')).filter(
      (schedule) => JSON.stringify(schedule.Properties.Target.Arn) === JSON.stringify(fnArn(ids.reconciler!)),
    );
    expect(schedules).toHaveLength(1);
    expect(schedules[0]!.Properties).toMatchObject({
      ScheduleExpression: 'rate(1 minute)',
      FlexibleTimeWindow: { Mode: 'OFF' },
      State: 'ENABLED',
      Target: {
        Arn: fnArn(ids.reconciler!),
        RoleArn: fnArn(ids.scheduleRole!),
        Input: JSON.stringify({ trigger: 'schedule', worker: 0, workers: 1 }),
        RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 },
      },
    });
  });

  it('the schedule role may invoke the reconciler (and its versions) only', () => {
    expectSchedulerInvokeRole(t.statelessTemplate, ids.scheduleRole!, ids.reconciler!);
  });

  it('output: its name', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs['ReconcilerFunctionName']!.Value).toEqual({ Ref: ids.reconciler });
  });
});

describe('reconciliation alarms and dashboard', () => {
  it('projected pass longer than freshnessHours: two 15-minute averages in a row, the description giving the arithmetic', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ReconcileProjectedPassAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: projectedPassDescription(24),
      Namespace: 'ContentSync',
      MetricName: 'ProjectedPassSeconds',
      Dimensions: [{ Name: 'service', Value: 'reconciler' }],
      Statistic: 'Average',
      Period: 900,
      Threshold: 24 * 3600,
      ComparisonOperator: 'GreaterThanThreshold',
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
      TreatMissingData: 'notBreaching',
    });
    const description = alarm.Properties['AlarmDescription'] as string;
    expect(description).toContain("longer than freshnessHours (24 h): the provider's limit cannot keep this many ids this fresh");
    expect(description).toContain('W = N ÷ rate');
    expect(description).toContain('10,000,000 ids at 100 requests/s take 100,000 s = 27.8 h');
    expect(description.length).toBeLessThanOrEqual(1024);
  });

  it('the threshold follows freshnessHours', () => {
    const other = synthTemplates({ freshnessHours: '12' });
    const alarm = resource(other.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ReconcileProjectedPassAlarm');
    expect(alarm.Properties['Threshold']).toBe(43_200);
    expect(alarm.Properties['AlarmDescription']).toContain('freshnessHours (12 h)');
    const fn = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ReconcilerFunction');
    expect(fn.Properties['Environment'].Variables[ENV.freshnessHours]).toBe('12');
  });

  it('failing ticks: 3 errors or more in 15 minutes', () => {
    expect(resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ReconcilerErrorsAlarm').Properties).toMatchObject({
      ...actions(),
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: ids.reconciler } }],
      Statistic: 'Sum',
      Period: 900,
      Threshold: 3,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
  });

  it('the reconcile dead-letter queue, as the sync’s: one message is enough', () => {
    expect(resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ReconcileDeadLetterQueueAlarm').Properties).toMatchObject({
      ...actions(),
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: imports.dlqName }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
    });
  });

  it('a dashboard row: the pass against freshnessHours, ids sent and known, the reconcile queue, the function; every alarm in the status widget', () => {
    type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][]; annotations?: unknown; alarms?: unknown[] } };
    const widgets = JSON.parse(dashboardBody(t.statelessTemplate)).widgets as Widget[];
    const titles = ['Reconciliation pass (s) against freshnessHours', 'Ids sent by the reconciler, ids known', 'Reconcile queue', 'Reconciler function'];
    const row = titles.map((title) => widgets.find((w) => w.properties.title === title)!);
    expect(row.every(Boolean)).toBe(true);
    expect(new Set(row.map((w) => w.y)).size).toBe(1);
    expect(row.reduce((sum, w) => sum + w.width, 0)).toBe(24);
    const shown = (widget: Widget) =>
      widget.properties.metrics!.map((m) => {
        const options = (m[m.length - 1] ?? {}) as { stat?: string; yAxis?: string };
        return [m.filter((part) => typeof part === 'string').slice(0, 4).join(' '), options.stat ?? 'Average', options.yAxis ?? 'left'].join(' ');
      });
    expect(shown(row[0]!)).toEqual([
      'ContentSync ProjectedPassSeconds service reconciler Average left',
      'ContentSync PassAgeSeconds service reconciler Maximum left',
      'ContentSync PassLengthSeconds service reconciler Maximum left',
      'ContentSync PassNumber service reconciler Maximum right',
    ]);
    expect(row[0]!.properties.annotations).toEqual({ horizontal: [{ value: 86_400, label: 'freshnessHours (24 h)', yAxis: 'left' }] });
    expect(shown(row[1]!)).toEqual(['ContentSync IdsEnqueued service reconciler Sum left', 'ContentSync IdsKnown service reconciler Maximum right']);
    // The alarm status widget names each of the three alarms (by its ARN).
    const statusWidget = dashboardParts(t.statelessTemplate).slice(dashboardParts(t.statelessTemplate).findIndex((part) => typeof part === 'string' && part.includes('"type":"alarm"')));
    for (const prefix of ['ReconcileProjectedPassAlarm', 'ReconcilerErrorsAlarm', 'ReconcileDeadLetterQueueAlarm']) {
      const id = logicalId(t.statelessTemplate, 'AWS::CloudWatch::Alarm', prefix);
      expect(statusWidget.some((part) => JSON.stringify(part) === JSON.stringify({ 'Fn::GetAtt': [id, 'Arn'] })), prefix).toBe(true);
    }
  });
});

describe('freshnessHours', () => {
  const read = (context: Record<string, unknown>) => readContentSyncConfig({ tryGetContext: (key) => ({ baseUrl: 'https://example.com/api', ...context })[key] });

  it('defaults to 24; takes 0 to 8760 from cdk.json (numbers) or -c (strings)', () => {
    expect(read({}).freshnessHours).toBe(24);
    expect(read({ freshnessHours: 0 }).freshnessHours).toBe(0);
    expect(read({ freshnessHours: '0' }).freshnessHours).toBe(0);
    expect(read({ freshnessHours: ' 168 ' }).freshnessHours).toBe(168);
    expect(read({ freshnessHours: 8760 }).freshnessHours).toBe(8760);
  });

  it.each([['abc'], ['-1'], [8761], ['1.5'], [2.5], ['24h'], [true]])('%j fails the synth with a ConfigError naming freshnessHours', (value) => {
    let caught: unknown;
    try {
      buildApp({ freshnessHours: value });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).key).toBe('freshnessHours');
    expect((caught as ConfigError).message).toMatch(/^freshnessHours: must be (a whole number from 0 to 8760|a single value)/);
  });

  it('0: no reconciler, schedule, projected-pass or reconciler alarm, widgets or output; the queue, its dead-letter alarm and the sync’s event source stay', () => {
    const off = synthTemplates({ freshnessHours: '0' });
    const s = off.statelessTemplate;
    expect(Object.keys(s.findResources('AWS::Lambda::Function')).filter((id) => id.startsWith('Reconciler'))).toEqual([]);
    expect(Object.keys(s.findResources('AWS::IAM::Role')).filter((id) => id.startsWith('Reconcile'))).toEqual([]);
    const schedules = Object.values(s.findResources('AWS::Scheduler::Schedule'));
    expect(schedules).toHaveLength(1); // the token refresher's
    expect(Object.keys(s.findResources('AWS::CloudWatch::Alarm')).filter((id) => id.startsWith('Reconcil'))).toEqual([
      logicalId(s, 'AWS::CloudWatch::Alarm', 'ReconcileDeadLetterQueueAlarm'),
    ]);
    expect(Object.keys(s.toJSON().Outputs)).not.toContain('ReconcilerFunctionName');
    resource(s, 'AWS::Lambda::EventSourceMapping', 'ItemSyncFunctionSqsEventSourceContentSyncStatefulReconcileQueue');
    resource(off.statefulTemplate, 'AWS::SQS::Queue', 'ReconcileQueue');
    // A backfill still has its queue, its output and the sync's containers on it.
    expect(Object.keys(off.statefulTemplate.toJSON().Outputs)).toContain('ReconcileQueueUrl');
    const widgets = JSON.parse(dashboardBody(s)).widgets as Array<{ width: number; properties: { title?: string } }>;
    expect(widgets.filter((w) => /reconcil/i.test(w.properties.title ?? '')).map((w) => [w.properties.title, w.width])).toEqual([['Reconcile queue', 24]]);
  });
});

describe('fan-out', () => {
  function stackWith(workers: number) {
    // No bundling: the function's code is not under test here.
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const state = new Stack(app, 'State');
    const table = new dynamodb.Table(state, 'Items', { partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING } });
    const control = new dynamodb.Table(state, 'Control', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
    const queue = new sqs.Queue(state, 'Reconcile');
    const stack = new Stack(app, 'Functions');
    const config = readContentSyncConfig({ tryGetContext: (key) => ({ baseUrl: 'https://example.com/api' })[key as 'baseUrl'] });
    addReconciler(stack, { config, table, controlTable: control, reconcileQueue: queue, workers });
    return stack;
  }

  it('n workers: n schedules, worker i of n each, on the one function', () => {
    const template = Template.fromStack(stackWith(3));
    const inputs = Object.values(template.findResources('AWS::Scheduler::Schedule')).map((schedule) => JSON.parse(schedule.Properties.Target.Input));
    expect(inputs).toEqual([0, 1, 2].map((worker) => ({ trigger: 'schedule', worker, workers: 3 })));
    template.resourceCountIs('AWS::Lambda::Function', 1);
  });

  it('no more workers than Scan segments', () => {
    expect(() => stackWith(9)).toThrow('reconciler workers must be a whole number from 1 to 8');
    expect(() => stackWith(0)).toThrow(RangeError);
  });
});
