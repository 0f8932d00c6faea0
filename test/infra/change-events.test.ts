/**
 * The change events in both templates (docs/change-events.md): the bus and the failure queue in the
 * stateful stack (retained, encrypted, TLS-only, no literal names, outputs), the change-events
 * function, its two stream event sources, the items table's and the connections table's (the
 * account lifecycle events), each TRIM_HORIZON, ReportBatchItemFailures, bisect, bounded retries,
 * on-failure destination, parallelization factor 1; its exact IAM statements (the connections
 * table's two attributes among them, both streams' reads, no direct use of the connections key),
 * its two alarms and its dashboard row.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { dashboardBody, dashboardParts, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
const ids: Record<string, string> = {};
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates();
  const f = t.statefulTemplate;
  const s = t.statelessTemplate;
  ids.bus = logicalId(f, 'AWS::Events::EventBus', 'ChangeEventBus');
  ids.failureQueue = logicalId(f, 'AWS::SQS::Queue', 'ChangeEventsFailureQueue');
  ids.table = logicalId(f, 'AWS::DynamoDB::Table', 'ItemsTable');
  ids.fn = logicalId(s, 'AWS::Lambda::Function', 'ChangeEventsFunction');
  ids.role = logicalId(s, 'AWS::IAM::Role', 'ChangeEventsRole');
  ids.logs = logicalId(s, 'AWS::Logs::LogGroup', 'ChangeEventsLogGroup');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
  imports.busArn = importOf(f, { 'Fn::GetAtt': [ids.bus, 'Arn'] });
  imports.failureQueueArn = importOf(f, { 'Fn::GetAtt': [ids.failureQueue, 'Arn'] });
  imports.failureQueueName = importOf(f, { 'Fn::GetAtt': [ids.failureQueue, 'QueueName'] });
  imports.streamArn = importOf(f, { 'Fn::GetAtt': [ids.table, 'StreamArn'] });
  imports.connectionsStreamArn = importOf(f, { 'Fn::GetAtt': [logicalId(f, 'AWS::DynamoDB::Table', 'ConnectionsTable'), 'StreamArn'] });
  imports.connectionsTableName = importOf(f, { Ref: logicalId(f, 'AWS::DynamoDB::Table', 'ConnectionsTable') });
  imports.connectionsTableArn = importOf(f, { 'Fn::GetAtt': [logicalId(f, 'AWS::DynamoDB::Table', 'ConnectionsTable'), 'Arn'] });
  imports.connectionsKeyArn = importOf(f, { 'Fn::GetAtt': [logicalId(f, 'AWS::KMS::Key', 'ConnectionsKey'), 'Arn'] });
});

describe('change events: stateful resources', () => {
  it('the bus: named after the stack (EventBridge requires a name; none is written out), described, retained, no policy', () => {
    const bus = resource(t.statefulTemplate, 'AWS::Events::EventBus', 'ChangeEventBus');
    expect(bus.Properties).toEqual({
      Name: { 'Fn::Join': ['', [{ Ref: 'AWS::StackName' }, '-change-events']] },
      Description: 'content-sync change events (source content-sync): ItemCreated, ItemUpdated, ItemDeleted, ItemRestored',
    });
    expect(bus.DeletionPolicy).toBe('Retain');
    expect(bus.UpdateReplacePolicy).toBe('Retain');
    t.statefulTemplate.resourceCountIs('AWS::Events::EventBus', 1);
    t.statefulTemplate.resourceCountIs('AWS::Events::EventBusPolicy', 0);
  });

  it('the failure queue: SQS-managed encryption, 14 days, retained, refuses requests without TLS', () => {
    const queue = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'ChangeEventsFailureQueue');
    expect(queue.Properties).toEqual({ MessageRetentionPeriod: 14 * 24 * 3600, SqsManagedSseEnabled: true });
    expect(queue.DeletionPolicy).toBe('Retain');
    expect(queue.UpdateReplacePolicy).toBe('Retain');
    const policy = resource(t.statefulTemplate, 'AWS::SQS::QueuePolicy', 'ChangeEventsFailureQueuePolicy');
    expect(policy.Properties).toEqual({
      Queues: [{ Ref: ids.failureQueue }],
      PolicyDocument: {
        Statement: [
          {
            Action: 'sqs:*',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            Effect: 'Deny',
            Principal: { AWS: '*' },
            Resource: { 'Fn::GetAtt': [ids.failureQueue, 'Arn'] },
          },
        ],
        Version: '2012-10-17',
      },
    });
  });

  it('outputs: the bus name and ARN, the failure queue URL', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs['ChangeEventBusName']!.Value).toEqual({ Ref: ids.bus });
    expect(outputs['ChangeEventBusArn']!.Value).toEqual({ 'Fn::GetAtt': [ids.bus, 'Arn'] });
    expect(outputs['ChangeEventsFailureQueueUrl']!.Value).toEqual({ Ref: ids.failureQueue });
  });
});

describe('change events: the function', () => {
  it('Node.js 22, arm64, 256 MB, 30 s, no tracing (the context key), own log group (one month) and role (no managed policies)', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties).toMatchObject({
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      MemorySize: 256,
      Timeout: 30,
      LoggingConfig: { LogGroup: { Ref: ids.logs } },
      Role: { 'Fn::GetAtt': [ids.role, 'Arn'] },
    });
    expect(fn.Properties).not.toHaveProperty('TracingConfig');
    expect(fn.Properties).not.toHaveProperty('FunctionName');
    expect(fn.Properties).not.toHaveProperty('ReservedConcurrentExecutions');
    expect(resource(t.statelessTemplate, 'AWS::Logs::LogGroup', ids.logs!).Properties).toEqual({ RetentionInDays: 30 });
    const role = resource(t.statelessTemplate, 'AWS::IAM::Role', ids.role!);
    expect(role.Properties['AssumeRolePolicyDocument']).toEqual({
      Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
      Version: '2012-10-17',
    });
    expect(role.Properties).not.toHaveProperty('ManagedPolicyArns');
  });

  it('environment: EVENT_BUS_NAME is the bus ARN, CONNECTIONS_TABLE_NAME the connections table, nothing else but the construct defaults', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties['Environment'].Variables).toEqual({
      [ENV.eventBusName]: imports.busArn,
      [ENV.connectionsTableName]: imports.connectionsTableName,
      POWERTOOLS_SERVICE_NAME: 'change-events',
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: '--enable-source-maps',
    });
  });

  it('IAM: own logs, PutEvents on the bus only, two attributes of a connection, send to the failure queue, read both streams; nothing else', () => {
    expect(roleStatements(t.statelessTemplate, ids.role!)).toEqual([
      { Sid: 'WriteOwnLogs', Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: { 'Fn::GetAtt': [ids.logs, 'Arn'] } },
      { Sid: 'PublishChangeEvents', Effect: 'Allow', Action: 'events:PutEvents', Resource: imports.busArn },
      // Each connection's idsKnown and lastWriteAt (test/infra/connections.test.ts): nothing else of its row, never a value back.
      {
        Sid: 'Connections',
        Effect: 'Allow',
        Action: 'dynamodb:UpdateItem',
        Resource: imports.connectionsTableArn,
        Condition: {
          'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['connection', 'idsKnown', 'lastWriteAt'] },
          StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
        },
      },
      {
        Sid: 'ConnectionsKey',
        Effect: 'Allow',
        Action: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'],
        Resource: imports.connectionsKeyArn,
        Condition: {
          StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } },
        },
      },
      // The on-failure destination's grant.
      { Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'], Resource: imports.failureQueueArn },
      // The stream event sources' grant: ListStreams has no resource-level permissions (one statement for both).
      { Effect: 'Allow', Action: 'dynamodb:ListStreams', Resource: '*' },
      { Effect: 'Allow', Action: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'], Resource: imports.streamArn },
      // The connections stream: read as the items stream is, with no kms statement of its own (DynamoDB
      // decrypts it under the ConnectionsKey statement above): the role never calls the key itself.
      { Effect: 'Allow', Action: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'], Resource: imports.connectionsStreamArn },
    ]);
  });

  /** The function's event source mappings, by the stream they read. */
  const mappings = () =>
    Object.entries(t.statelessTemplate.findResources('AWS::Lambda::EventSourceMapping')).filter(
      ([, body]) => JSON.stringify(body.Properties.FunctionName) === JSON.stringify({ Ref: ids.fn }),
    );
  const streamSource = (streamArn: unknown) => ({
    EventSourceArn: streamArn,
    FunctionName: { Ref: ids.fn },
    StartingPosition: 'TRIM_HORIZON',
    BatchSize: 100,
    FunctionResponseTypes: ['ReportBatchItemFailures'],
    BisectBatchOnFunctionError: true,
    MaximumRetryAttempts: 10,
    ParallelizationFactor: 1,
    DestinationConfig: { OnFailure: { Destination: imports.failureQueueArn } },
  });

  it('two streams feed it, the items table\'s and the connections table\'s, nothing else', () => {
    expect(mappings().map(([, body]) => body.Properties.EventSourceArn)).toEqual([imports.streamArn, imports.connectionsStreamArn]);
  });

  it('the items stream feeds it: TRIM_HORIZON, 100 records, ReportBatchItemFailures, bisect, 10 retries, failure queue, factor 1', () => {
    const items = mappings().filter(([, body]) => JSON.stringify(body.Properties.EventSourceArn) === JSON.stringify(imports.streamArn));
    expect(items).toHaveLength(1);
    expect(items[0]![1].Properties).toEqual(streamSource(imports.streamArn));
  });

  it('the connections stream feeds it (the account lifecycle events) with the same settings', () => {
    const connections = mappings().filter(([, body]) => JSON.stringify(body.Properties.EventSourceArn) === JSON.stringify(imports.connectionsStreamArn));
    expect(connections).toHaveLength(1);
    expect(connections[0]![1].Properties).toEqual(streamSource(imports.connectionsStreamArn));
  });

  it('the streams it reads carry old and new images (the mappings need both)', () => {
    for (const prefix of ['ItemsTable', 'ConnectionsTable']) {
      expect(resource(t.statefulTemplate, 'AWS::DynamoDB::Table', prefix).Properties['StreamSpecification'], prefix).toEqual({ StreamViewType: 'NEW_AND_OLD_IMAGES' });
    }
  });

  it('output: the function name', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs['ChangeEventsFunctionName']!.Value).toEqual({ Ref: ids.fn });
  });
});

describe('change events: operations', () => {
  const actions = () => ({ AlarmActions: [{ Ref: ids.topic }], OKActions: [{ Ref: ids.topic }] });

  it('alarm: ChangeEventsFailed ≥ 1 in 5 minutes (events refused after the function\'s retries)', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ChangeEventsPublishFailedAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'ContentSync',
      MetricName: 'ChangeEventsFailed',
      Dimensions: [{ Name: 'service', Value: 'change-events' }],
      Statistic: 'Sum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    expect(alarm.Properties['AlarmDescription']).toMatch(/change event not published/);
  });

  it('alarm: a message in the failure queue', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ChangeEventsFailureQueueAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: imports.failureQueueName }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    expect(alarm.Properties['AlarmDescription']).toMatch(/not on the bus/);
  });

  it('dashboard: a row with every change-events metric, the function with its iterator age, the failure queue; both alarms in the status widget', () => {
    type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][]; alarms?: unknown[] } };
    const widgets = JSON.parse(dashboardBody(t.statelessTemplate)).widgets as Widget[];
    const titled = (title: string) => {
      const widget = widgets.find((w) => w.properties.title === title);
      expect(widget, title).toBeDefined();
      return widget!;
    };
    const names = (widget: Widget) => widget.properties.metrics!.map((m) => m.filter((part) => typeof part === 'string').slice(0, 4).join(' '));
    expect(names(titled('Change events'))).toEqual(
      ['ChangeEventsPublished', 'ChangeEventsFailed', 'StreamRecordsIgnored', 'StreamRecordsRetried'].map((name) => `ContentSync ${name} service change-events`),
    );
    const fn = names(titled('Change-events function and stream lag'));
    expect(fn.map((m) => m.split(' ').slice(0, 2).join(' '))).toEqual(['AWS/Lambda Invocations', 'AWS/Lambda Errors', 'AWS/Lambda IteratorAge']);
    expect(names(titled('Change-events failure queue'))).toEqual(['AWS/SQS ApproximateNumberOfMessagesVisible QueueName TOKEN']);
    const row = ['Change events', 'Change-events function and stream lag', 'Change-events failure queue'].map(titled);
    expect(new Set(row.map((w) => w.y)).size).toBe(1);
    expect(row.reduce((sum, w) => sum + w.width, 0)).toBe(24);
    const status = widgets.find((w) => w.type === 'alarm')!;
    const alarmArns = JSON.stringify(status.properties.alarms);
    expect(alarmArns.match(/TOKEN/g)?.length).toBe(status.properties.alarms!.length);
    const body = dashboardParts(t.statelessTemplate);
    for (const prefix of ['ChangeEventsPublishFailedAlarm', 'ChangeEventsFailureQueueAlarm']) {
      expect(body).toContainEqual({ 'Fn::GetAtt': [logicalId(t.statelessTemplate, 'AWS::CloudWatch::Alarm', prefix), 'Arn'] });
    }
  });
});
