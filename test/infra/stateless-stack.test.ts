/**
 * The stateless stack's template: both functions and their Lambda defaults, environment, IAM
 * statements of every role, schedule, deploy-time run, event source, alarms, topic, dashboard and
 * outputs.
 */
import { Capture, Match, type Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { STACK_NAMES } from '../../infra/content-sync-app.js';
import { DEPLOY_RUN_CODE } from '../../infra/token-refresher/deploy-run.js';

/** The published metric names (docs/operations.md, "Logs and metrics"): written out, so a rename in the code fails here. */
const ITEM_SYNC_METRICS = [
  'ItemsFetched',
  'ItemsCreated',
  'ItemsUpdated',
  'ItemsUnchanged',
  'ItemsDeleted',
  'RecordsRetried',
  'RecordsDeadLettered',
  'RecordsPostponed',
  'ProviderRateLimited',
];
const PACE_METRICS = ['ProviderPace', 'BreakerOpen', 'BreakerOpenSeconds', 'PaceFallback'];
const REFRESHER_METRICS = ['TokenRefreshed', 'RefreshTokenRotated', 'TokenRefreshFailed'];
import { expectSchedulerInvokeRole, fnArn, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
/** Logical ids in the stateless template. */
const ids: Record<string, string> = {};
/** `Fn::ImportValue` of each stateful value the stateless stack uses. */
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates({ baseUrl: 'https://provider.example.com/api/v2/' });
  const s = t.statelessTemplate;
  ids.refresher = logicalId(s, 'AWS::Lambda::Function', 'TokenRefresherFunction');
  ids.refresherRole = logicalId(s, 'AWS::IAM::Role', 'TokenRefresherRole');
  ids.refresherLogs = logicalId(s, 'AWS::Logs::LogGroup', 'TokenRefresherLogGroup');
  ids.sync = logicalId(s, 'AWS::Lambda::Function', 'ItemSyncFunction');
  ids.syncRole = logicalId(s, 'AWS::IAM::Role', 'ItemSyncRole');
  ids.syncLogs = logicalId(s, 'AWS::Logs::LogGroup', 'ItemSyncLogGroup');
  ids.deployRun = logicalId(s, 'AWS::Lambda::Function', 'DeployRunFunction');
  ids.deployRunRole = logicalId(s, 'AWS::IAM::Role', 'DeployRunRole');
  ids.deployRunLogs = logicalId(s, 'AWS::Logs::LogGroup', 'DeployRunLogGroup');
  ids.scheduleRole = logicalId(s, 'AWS::IAM::Role', 'TokenRefreshScheduleRole');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
  const f = t.statefulTemplate;
  const ref = (type: string, prefix: string) => ({ Ref: logicalId(f, type, prefix) });
  const arn = (type: string, prefix: string) => ({ 'Fn::GetAtt': [logicalId(f, type, prefix), 'Arn'] });
  imports.credentialsSecret = importOf(f, ref('AWS::SecretsManager::Secret', 'CredentialsSecret'));
  imports.accessTokenSecret = importOf(f, ref('AWS::SecretsManager::Secret', 'AccessTokenSecret'));
  imports.tableName = importOf(f, ref('AWS::DynamoDB::Table', 'ItemsTable'));
  imports.tableArn = importOf(f, arn('AWS::DynamoDB::Table', 'ItemsTable'));
  imports.controlTableName = importOf(f, ref('AWS::DynamoDB::Table', 'ControlTable'));
  imports.controlTableArn = importOf(f, arn('AWS::DynamoDB::Table', 'ControlTable'));
  imports.queueArn = importOf(f, arn('AWS::SQS::Queue', 'SyncQueue'));
  imports.dlqUrl = importOf(f, ref('AWS::SQS::Queue', 'DeadLetterQueue'));
  imports.dlqArn = importOf(f, arn('AWS::SQS::Queue', 'DeadLetterQueue'));
  imports.bucketName = importOf(f, ref('AWS::S3::Bucket', 'ItemsBucket'));
  imports.reconcileQueueArn = importOf(f, arn('AWS::SQS::Queue', 'ReconcileQueue'));
});

const logsStatement = (logGroupId: string) => ({
  Sid: 'WriteOwnLogs',
  Effect: 'Allow',
  Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
  Resource: { 'Fn::GetAtt': [logGroupId, 'Arn'] },
});
const xrayStatement = { Effect: 'Allow', Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], Resource: '*' };
const lambdaAssumeRole = {
  Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
  Version: '2012-10-17',
};

describe('stateless stack', () => {
  it('is named ContentSyncStateless and deploys after the stateful stack', () => {
    expect(t.stateless.stackName).toBe(STACK_NAMES.stateless);
    expect(STACK_NAMES.stateless).toBe('ContentSyncStateless');
    expect(t.stateless.dependencies).toContain(t.stateful);
  });

  describe('Lambda defaults of both functions', () => {
    it.each([
      ['TokenRefresherFunction', 'token-refresher', 256, 30],
      ['ItemSyncFunction', 'item-sync', 512, 60],
    ])('%s: Node.js 22, arm64, ESM bundle entry, tracing, own log group and role, %s', (prefix, service, memory, timeout) => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', prefix);
      const logGroup = prefix.replace('Function', 'LogGroup');
      const role = prefix.replace('Function', 'Role');
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
        MemorySize: memory,
        Timeout: timeout,
        TracingConfig: { Mode: 'Active' },
        LoggingConfig: { LogGroup: { Ref: logicalId(t.statelessTemplate, 'AWS::Logs::LogGroup', logGroup) } },
        Role: { 'Fn::GetAtt': [logicalId(t.statelessTemplate, 'AWS::IAM::Role', role), 'Arn'] },
      });
      expect(fn.Properties['Environment'].Variables).toMatchObject({
        POWERTOOLS_SERVICE_NAME: service,
        POWERTOOLS_LOG_LEVEL: 'INFO',
        NODE_OPTIONS: '--enable-source-maps',
      });
      expect(fn.Properties).not.toHaveProperty('FunctionName');
      expect(fn.Properties).not.toHaveProperty('ReservedConcurrentExecutions');
    });

    it('log groups keep one month and go with the stack', () => {
      for (const prefix of ['TokenRefresherLogGroup', 'ItemSyncLogGroup', 'DeployRunLogGroup']) {
        const logGroup = resource(t.statelessTemplate, 'AWS::Logs::LogGroup', prefix);
        expect(logGroup.Properties).toEqual({ RetentionInDays: 30 });
        expect(logGroup.DeletionPolicy).toBe('Delete');
      }
    });

    it('roles are assumed by Lambda and carry no managed policies', () => {
      for (const id of [ids.refresherRole!, ids.syncRole!, ids.deployRunRole!]) {
        const role = resource(t.statelessTemplate, 'AWS::IAM::Role', id);
        expect(role.Properties['AssumeRolePolicyDocument']).toEqual(lambdaAssumeRole);
        expect(role.Properties).not.toHaveProperty('ManagedPolicyArns');
      }
    });
  });

  describe('token refresher', () => {
    it('environment: exactly the contract variables, secrets by ARN', () => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.refresher!);
      expect(fn.Properties['Environment'].Variables).toEqual({
        [ENV.baseUrl]: 'https://provider.example.com/api/v2',
        [ENV.credentialsSecretId]: imports.credentialsSecret,
        [ENV.accessTokenSecretId]: imports.accessTokenSecret,
        POWERTOOLS_SERVICE_NAME: 'token-refresher',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        NODE_OPTIONS: '--enable-source-maps',
      });
    });

    it('IAM: own logs, X-Ray, read the credentials, write both secrets; nothing else', () => {
      expect(roleStatements(t.statelessTemplate, ids.refresherRole!)).toEqual([
        logsStatement(ids.refresherLogs!),
        xrayStatement,
        { Sid: 'ReadCredentials', Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: imports.credentialsSecret },
        {
          Sid: 'WriteTokens',
          Effect: 'Allow',
          Action: 'secretsmanager:PutSecretValue',
          Resource: [imports.credentialsSecret, imports.accessTokenSecret],
        },
      ]);
    });

    it('runs on an EventBridge Scheduler rate of tokenRefreshMinutes with {"trigger":"schedule"}', () => {
      // The refresher's, and the reconciler's (test/infra/reconciler.test.ts).
      t.statelessTemplate.resourceCountIs('AWS::Scheduler::Schedule', 2);
      const schedules = Object.values(t.statelessTemplate.findResources('AWS::Scheduler::Schedule'));
      expect(schedules.filter((schedule) => JSON.stringify(schedule.Properties.Target.Arn) === JSON.stringify(fnArn(ids.refresher!)))).toHaveLength(1);
      t.statelessTemplate.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: 'rate(30 minutes)',
        FlexibleTimeWindow: { Mode: 'OFF' },
        State: 'ENABLED',
        Target: {
          Arn: fnArn(ids.refresher!),
          RoleArn: fnArn(ids.scheduleRole!),
          Input: JSON.stringify({ trigger: 'schedule' }),
          RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 1800 },
        },
      });
    });

    it.each([
      [1, 'rate(1 minute)'],
      [5, 'rate(5 minutes)'],
      ['1440', 'rate(1440 minutes)'],
    ])('tokenRefreshMinutes=%s schedules %s', (minutes, expression) => {
      const other = synthTemplates({ tokenRefreshMinutes: minutes });
      const expr = new Capture();
      other.statelessTemplate.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: expr,
        Target: Match.objectLike({ Arn: fnArn(logicalId(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction')) }),
      });
      expect([expression, expression.replace('1440 minutes', '1 day')]).toContain(expr.asString());
    });

    it('the schedule role may invoke the refresher (and its versions) only', () => {
      expectSchedulerInvokeRole(t.statelessTemplate, ids.scheduleRole!, ids.refresher!);
    });
  });

  describe('deploy-time run of the refresher', () => {
    it('a CDK trigger runs the deploy-run function synchronously after the refresher, its role and policy exist', () => {
      const trigger = resource(t.statelessTemplate, 'Custom::Trigger', 'DeployRun');
      const versionId = logicalId(t.statelessTemplate, 'AWS::Lambda::Version', 'DeployRunFunctionCurrentVersion');
      expect(trigger.Properties).toMatchObject({
        HandlerArn: { Ref: versionId },
        InvocationType: 'RequestResponse',
        ExecuteOnHandlerChange: true,
        Timeout: '60000',
      });
      const refresherPolicy = logicalId(t.statelessTemplate, 'AWS::IAM::Policy', 'TokenRefresherRoleDefaultPolicy');
      expect(trigger.DependsOn).toEqual(expect.arrayContaining([ids.refresher, ids.refresherRole, refresherPolicy, ids.refresherLogs]));
    });

    it('runs again when baseUrl changes (new handler version), not for unrelated changes', () => {
      const handlerArn = (overrides: Record<string, unknown>) =>
        resource(synthTemplates(overrides).statelessTemplate, 'Custom::Trigger', 'DeployRun').Properties['HandlerArn'];
      const before = resource(t.statelessTemplate, 'Custom::Trigger', 'DeployRun').Properties['HandlerArn'];
      expect(handlerArn({ baseUrl: 'https://provider.example.com/api/v2' })).toEqual(before);
      expect(handlerArn({ baseUrl: 'https://provider.example.com/api/v2', syncBatchSize: 20 })).toEqual(before);
      expect(handlerArn({ baseUrl: 'https://other.example.com/api' })).not.toEqual(before);
    });

    it('the deploy-run function invokes the refresher by name with {"trigger":"deploy"}; it may do nothing else', () => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.deployRun!);
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
        Code: { ZipFile: DEPLOY_RUN_CODE },
        Timeout: 60,
        LoggingConfig: { LogGroup: { Ref: ids.deployRunLogs } },
      });
      expect(fn.Properties['Environment'].Variables).toEqual({
        REFRESHER_FUNCTION_NAME: { Ref: ids.refresher },
        [ENV.baseUrl]: 'https://provider.example.com/api/v2',
      });
      expect(roleStatements(t.statelessTemplate, ids.deployRunRole!)).toEqual([
        logsStatement(ids.deployRunLogs!),
        { Sid: 'InvokeTokenRefresher', Effect: 'Allow', Action: 'lambda:InvokeFunction', Resource: fnArn(ids.refresher!) },
      ]);
    });
  });

  describe('item sync', () => {
    it('environment: exactly the contract variables, secret by ARN, DLQ by URL, control table by name', () => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.sync!);
      // No PROVIDER_REQUESTS_PER_SECOND without providerRequestsPerSecond (the pace finds the limit);
      // PACE_FALLBACK_REQUESTS_PER_SECOND and SYNC_POSTPONE_MAX_SECONDS keep the function's defaults.
      expect(fn.Properties['Environment'].Variables).toEqual({
        [ENV.baseUrl]: 'https://provider.example.com/api/v2',
        [ENV.accessTokenSecretId]: imports.accessTokenSecret,
        [ENV.itemsTableName]: imports.tableName,
        [ENV.itemsBucketName]: imports.bucketName,
        [ENV.revisionField]: 'revision',
        [ENV.deadLetterQueueUrl]: imports.dlqUrl,
        [ENV.controlTableName]: imports.controlTableName,
        // usersReservedPercent's default: always set.
        [ENV.usersReservedPercent]: '20',
        POWERTOOLS_SERVICE_NAME: 'item-sync',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        NODE_OPTIONS: '--enable-source-maps',
      });
    });

    it.each([
      ['50', '50'],
      [1, '1'],
      [' 100000 ', '100000'],
    ])('providerRequestsPerSecond=%j sets PROVIDER_REQUESTS_PER_SECOND=%s on the item sync only', (value, expected) => {
      const other = synthTemplates({ providerRequestsPerSecond: value });
      const sync = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
      const variables = sync.Properties['Environment'].Variables as Record<string, unknown>;
      expect(variables[ENV.providerRequestsPerSecond]).toBe(expected);
      expect(Object.keys(variables).sort()).toEqual(
        [
          ENV.baseUrl,
          ENV.accessTokenSecretId,
          ENV.itemsTableName,
          ENV.itemsBucketName,
          ENV.revisionField,
          ENV.deadLetterQueueUrl,
          ENV.controlTableName,
          ENV.usersReservedPercent,
          ENV.providerRequestsPerSecond,
          'POWERTOOLS_SERVICE_NAME',
          'POWERTOOLS_LOG_LEVEL',
          'NODE_OPTIONS',
        ].sort(),
      );
      const refresher = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction');
      expect(refresher.Properties['Environment'].Variables).not.toHaveProperty(ENV.providerRequestsPerSecond);
    });

    it.each([
      ['0', '0'],
      [35, '35'],
      [' 90 ', '90'],
    ])('usersReservedPercent=%j sets PROVIDER_USERS_RESERVED_PERCENT=%s on the item sync only', (value, expected) => {
      const other = synthTemplates({ usersReservedPercent: value });
      const sync = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
      expect(sync.Properties['Environment'].Variables[ENV.usersReservedPercent]).toBe(expected);
      const refresher = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction');
      expect(refresher.Properties['Environment'].Variables).not.toHaveProperty(ENV.usersReservedPercent);
    });

    it('PROVIDER_USERS_RESERVED_PERCENT is 20 when usersReservedPercent is not in the context at all', () => {
      const other = synthTemplates({ usersReservedPercent: undefined });
      const sync = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
      expect(sync.Properties['Environment'].Variables[ENV.usersReservedPercent]).toBe('20');
    });

    it('REVISION_FIELD follows revisionField', () => {
      const other = synthTemplates({ revisionField: 'meta.rev' });
      other.statelessTemplate.hasResourceProperties('AWS::Lambda::Function', {
        Environment: { Variables: Match.objectLike({ [ENV.revisionField]: 'meta.rev' }) },
      });
    });

    it('IAM: own logs, X-Ray, read the access token, read/write items (no Scan/Delete), the pace row, send back to its queue and to the DLQ, consume its queue', () => {
      expect(roleStatements(t.statelessTemplate, ids.syncRole!)).toEqual([
        logsStatement(ids.syncLogs!),
        xrayStatement,
        { Sid: 'ReadAccessToken', Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: imports.accessTokenSecret },
        {
          Sid: 'ReadWriteItems',
          Effect: 'Allow',
          Action: ['dynamodb:BatchGetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
          Resource: imports.tableArn,
        },
        // The provider pace: one strongly consistent GetItem and conditional PutItem on the control table.
        { Sid: 'ProviderPace', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:PutItem'], Resource: imports.controlTableArn },
        // Waiting records go back to the sync queue with a delay (SendMessageBatch is authorised by sqs:SendMessage).
        { Sid: 'Requeue', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.queueArn },
        { Sid: 'DeadLetter', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.dlqArn },
        // Items too large for a row (test/infra/items-bucket.test.ts): put and delete under items/ only.
        {
          Sid: 'ItemObjects',
          Effect: 'Allow',
          Action: ['s3:PutObject', 's3:DeleteObject'],
          Resource: { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] },
        },
        // The SQS event source's grant; ChangeMessageVisibility is also how the function honours Retry-After.
        {
          Effect: 'Allow',
          Action: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
          Resource: imports.queueArn,
        },
        // The reconcile queue (test/infra/reconciler.test.ts): sweep records that wait go back to it; its event source's grant.
        { Sid: 'RequeueReconcile', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.reconcileQueueArn },
        {
          Effect: 'Allow',
          Action: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
          Resource: imports.reconcileQueueArn,
        },
      ]);
    });

    it('SQS event source: batch size, ReportBatchItemFailures, maximum concurrency', () => {
      // The sync queue's, the items stream's (test/infra/change-events.test.ts) and the reconcile queue's (test/infra/reconciler.test.ts).
      t.statelessTemplate.resourceCountIs('AWS::Lambda::EventSourceMapping', 3);
      const mapping = resource(t.statelessTemplate, 'AWS::Lambda::EventSourceMapping', 'ItemSyncFunctionSqsEventSourceContentSyncStatefulSyncQueue');
      expect(mapping.Properties).toEqual({
        EventSourceArn: imports.queueArn,
        FunctionName: { Ref: ids.sync },
        BatchSize: 10,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 5 },
      });
    });

    it('syncBatchSize over 10 gets a 1 s batching window; syncMaxConcurrency is passed through', () => {
      const other = synthTemplates({ syncBatchSize: '50', syncMaxConcurrency: '2' });
      other.statelessTemplate.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        BatchSize: 50,
        MaximumBatchingWindowInSeconds: 1,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 2 },
      });
    });
  });

  describe('least privilege across the stack', () => {
    it('no Allow statement names a wildcard action; only X-Ray and the stream grant\'s ListStreams have a wildcard resource', () => {
      const template = t.statelessTemplate.toJSON();
      const statements: Array<{ Effect: string; Action: string | string[]; Resource: unknown }> = [];
      for (const body of Object.values(template.Resources as Record<string, { Type: string; Properties: any }>)) {
        if (body.Type === 'AWS::IAM::Policy') statements.push(...body.Properties.PolicyDocument.Statement);
        if (body.Type === 'AWS::IAM::Role') for (const policy of body.Properties.Policies ?? []) statements.push(...policy.PolicyDocument.Statement);
      }
      expect(statements.length).toBeGreaterThan(10);
      for (const statement of statements) {
        const actions = [statement.Action].flat();
        for (const action of actions) expect(action, JSON.stringify(statement)).not.toMatch(/\*/);
        // dynamodb:ListStreams (the DynamoDB event source's grant) has no resource-level permissions.
        if (statement.Resource === '*') expect(actions.every((a) => a.startsWith('xray:')) || JSON.stringify(actions) === '["dynamodb:ListStreams"]').toBe(true);
      }
    });
  });

  describe('operations', () => {
    it('alarm topic enforces TLS; no subscription without alarmEmail', () => {
      t.statelessTemplate.resourceCountIs('AWS::SNS::Topic', 1);
      t.statelessTemplate.hasResourceProperties('AWS::SNS::TopicPolicy', {
        Topics: [{ Ref: ids.topic }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Action: 'sns:Publish', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
      t.statelessTemplate.resourceCountIs('AWS::SNS::Subscription', 0);
    });

    it('alarmEmail subscribes that address', () => {
      const other = synthTemplates({ alarmEmail: 'ops@example.com' });
      other.statelessTemplate.resourceCountIs('AWS::SNS::Subscription', 1);
      other.statelessTemplate.hasResourceProperties('AWS::SNS::Subscription', {
        Protocol: 'email',
        Endpoint: 'ops@example.com',
        TopicArn: { Ref: logicalId(other.statelessTemplate, 'AWS::SNS::Topic', 'AlarmTopic') },
      });
    });

    const actions = () => ({ AlarmActions: [{ Ref: ids.topic }], OKActions: [{ Ref: ids.topic }] });
    const queueName = (prefix: string) =>
      importOf(t.statefulTemplate, { 'Fn::GetAtt': [logicalId(t.statefulTemplate, 'AWS::SQS::Queue', prefix), 'QueueName'] });

    it('ten alarms (two for the change events, three for reconciliation), each notifying the topic on alarm and on recovery', () => {
      t.statelessTemplate.resourceCountIs('AWS::CloudWatch::Alarm', 10);
      for (const alarm of Object.values(t.statelessTemplate.findResources('AWS::CloudWatch::Alarm'))) {
        expect(alarm.Properties).toMatchObject(actions());
        expect(alarm.Properties.AlarmName).toBeUndefined();
      }
    });

    it('dead-letter queue depth ≥ 1', () => {
      t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
        ...actions(),
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [{ Name: 'QueueName', Value: queueName('DeadLetterQueue') }],
        Statistic: 'Maximum',
        Period: 300,
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        EvaluationPeriods: 1,
        TreatMissingData: 'notBreaching',
      });
    });

    it('age of the oldest sync message ≥ 1 h', () => {
      t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
        ...actions(),
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateAgeOfOldestMessage',
        Dimensions: [{ Name: 'QueueName', Value: queueName('SyncQueue') }],
        Statistic: 'Maximum',
        Threshold: 3600,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        EvaluationPeriods: 1,
      });
    });

    it('item sync Errors ≥ 1 in 5 minutes', () => {
      t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
        ...actions(),
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: ids.sync } }],
        Statistic: 'Sum',
        Period: 300,
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        EvaluationPeriods: 1,
      });
    });

    it('token refresher Errors ≥ 1 in two refresh intervals in a row', () => {
      t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
        ...actions(),
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: ids.refresher } }],
        Statistic: 'Sum',
        Period: 1800,
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        EvaluationPeriods: 2,
        DatapointsToAlarm: 2,
        TreatMissingData: 'notBreaching',
      });
    });

    it('provider breaker open ≥ 30 min (BreakerOpenSeconds Maximum over 5 min, one datapoint)', () => {
      const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ProviderBreakerOpenAlarm');
      expect(alarm.Properties).toEqual({
        ...actions(),
        AlarmDescription: alarm.Properties['AlarmDescription'],
        Namespace: 'ContentSync',
        MetricName: 'BreakerOpenSeconds',
        Dimensions: [{ Name: 'service', Value: 'item-sync' }],
        Statistic: 'Maximum',
        Period: 300,
        Threshold: 1800,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        EvaluationPeriods: 1,
        TreatMissingData: 'notBreaching',
      });
      // What it means and what to do: provider down, or no token (the refresher's alarm).
      const description = alarm.Properties['AlarmDescription'] as string;
      expect(description).toMatch(/breaker has been open for 30 min or more/);
      expect(description).toMatch(/provider is down/);
      expect(description).toMatch(/token refresher cannot get a new one \(check the token refresher alarm/);
      expect(description.length).toBeLessThanOrEqual(1024);
    });

    it('token refresher alarm for a refresh interval over 12 h: one day, one period', () => {
      const other = synthTemplates({ tokenRefreshMinutes: 1000 });
      const refresherId = logicalId(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction');
      other.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: refresherId } }],
        Period: 86_400,
        EvaluationPeriods: 1,
        DatapointsToAlarm: 1,
      });
    });

    it('dashboard shows every sync and refresher metric (namespace ContentSync, dimension service)', () => {
      t.statelessTemplate.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
      const body = dashboardBody(t.statelessTemplate);
      const widgets = JSON.parse(body).widgets as Array<{ type: string; properties: { title?: string; metrics?: unknown[][] } }>;
      const metrics = widgets.flatMap((w) => w.properties.metrics ?? []).map((m) => m.filter((part) => typeof part === 'string'));
      for (const name of ITEM_SYNC_METRICS) {
        expect(metrics).toContainEqual(expect.arrayContaining(['ContentSync', name, 'service', 'item-sync']));
      }
      for (const name of PACE_METRICS) {
        expect(metrics).toContainEqual(expect.arrayContaining(['ContentSync', name, 'service', 'item-sync']));
      }
      for (const name of REFRESHER_METRICS) {
        expect(metrics).toContainEqual(expect.arrayContaining(['ContentSync', name, 'service', 'token-refresher']));
      }
      for (const name of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage', 'Invocations', 'Errors', 'Throttles', 'Duration', 'ConcurrentExecutions']) {
        expect(metrics.some((m) => m.includes(name)), name).toBe(true);
      }
      expect(widgets.some((w) => w.type === 'alarm')).toBe(true);
    });

    it('dashboard: a row for the provider pace (rate and 429s, postponed records, breaker and fallback)', () => {
      type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][]; yAxis?: unknown } };
      const widgets = JSON.parse(dashboardBody(t.statelessTemplate)).widgets as Widget[];
      /** Each metric of the widget titled `title` as `name stat [right]`, all of namespace ContentSync, service item-sync. */
      const shown = (title: string) => {
        const widget = widgets.find((w) => w.properties.title === title);
        expect(widget, title).toBeDefined();
        return widget!.properties.metrics!.map((m) => {
          expect(m.slice(0, 4), JSON.stringify(m)).toEqual(['ContentSync', m[1], 'service', 'item-sync']);
          const options = (m[4] ?? {}) as { stat?: string; yAxis?: string };
          return [m[1], options.stat ?? 'Average', options.yAxis ?? 'left'].join(' ');
        });
      };
      expect(shown('Provider pace (requests/s) and 429s')).toEqual([
        'ProviderPace Average left',
        'ProviderPace Minimum left',
        'ProviderRateLimited Sum right',
      ]);
      expect(shown('Records postponed (waiting for the pace or an outage)')).toEqual(['RecordsPostponed Sum left']);
      expect(shown('Breaker and fallback pace')).toEqual(['BreakerOpen Maximum left', 'PaceFallback Maximum left', 'BreakerOpenSeconds Maximum right']);
      const row = widgets.filter((w) => w.properties.title === 'Provider pace (requests/s) and 429s' || w.properties.title?.startsWith('Records postponed') || w.properties.title === 'Breaker and fallback pace');
      expect(new Set(row.map((w) => w.y)).size).toBe(1);
      expect(row.reduce((sum, w) => sum + w.width, 0)).toBe(24);
      // The alarm status widget lists every alarm, the breaker's included.
      const status = widgets.find((w) => w.type === 'alarm') as unknown as { properties: { alarms: unknown[] } };
      expect(status.properties.alarms).toHaveLength(10);
    });

    it('outputs: the function names, the alarm topic and the dashboard', () => {
      const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
      expect(Object.keys(outputs).sort()).toEqual(['AlarmTopicArn', 'ChangeEventsFunctionName', 'DashboardName', 'ItemSyncFunctionName', 'ReconcilerFunctionName', 'TokenRefresherFunctionName']);
      expect(outputs['TokenRefresherFunctionName']!.Value).toEqual({ Ref: ids.refresher });
      expect(outputs['ItemSyncFunctionName']!.Value).toEqual({ Ref: ids.sync });
      expect(outputs['AlarmTopicArn']!.Value).toEqual({ Ref: ids.topic });
    });
  });
});

/** The dashboard body with every `Fn::ImportValue`/`Ref` replaced by a placeholder, as JSON text. */
function dashboardBody(template: Template): string {
  const dashboard = Object.values(template.findResources('AWS::CloudWatch::Dashboard'))[0]!;
  const body = dashboard.Properties.DashboardBody;
  if (typeof body === 'string') return body;
  const parts = (body['Fn::Join'] as [string, unknown[]])[1];
  return parts.map((part) => (typeof part === 'string' ? part : 'TOKEN')).join('');
}
