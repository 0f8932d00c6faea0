/**
 * The erase in both templates (infra/connection-eraser; docs/connections.md, "Erase"): the erase
 * queue and its dead-letter queue in the stateful stack (SQS-managed encryption, TLS only, retained,
 * visibility 6× the eraser's time-out, redrive after 5 receives, outputs); the eraser (memory,
 * time-out, exact environment, exact IAM statements, no grant on the key but DynamoDB's), its event
 * source (one message at a time, partial batch failures, at most two at once), its alarm on the
 * dead-letter queue, its dashboard row and its output.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { ERASER_SERVICE } from '../../functions/shared/metric-names.js';
import { ERASER_CHANGES_ACTIONS, ERASER_CONNECTIONS_ACCESS, ERASER_ITEMS_ACTIONS } from '../../infra/connection-eraser/eraser.js';
import { ERASER_MAX_CONCURRENCY, ERASER_MEMORY_MB, ERASER_TIMEOUT_SECONDS, VISIBILITY_FACTOR } from '../../infra/deployment.js';
import { fnArn, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
const ids: Record<string, string> = {};
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates();
  const s = t.statelessTemplate;
  const f = t.statefulTemplate;
  ids.queue = logicalId(f, 'AWS::SQS::Queue', 'EraseQueue');
  ids.dlq = logicalId(f, 'AWS::SQS::Queue', 'EraseDeadLetterQueue');
  ids.fn = logicalId(s, 'AWS::Lambda::Function', 'ConnectionEraserFunction');
  ids.role = logicalId(s, 'AWS::IAM::Role', 'ConnectionEraserRole');
  ids.logs = logicalId(s, 'AWS::Logs::LogGroup', 'ConnectionEraserLogGroup');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
  const ref = (type: string, prefix: string) => importOf(f, { Ref: logicalId(f, type, prefix) });
  const arn = (type: string, prefix: string) => importOf(f, fnArn(logicalId(f, type, prefix)));
  imports.queueUrl = importOf(f, { Ref: ids.queue });
  imports.queueArn = importOf(f, fnArn(ids.queue));
  imports.dlqName = importOf(f, { 'Fn::GetAtt': [ids.dlq, 'QueueName'] });
  imports.connectionsTableName = ref('AWS::DynamoDB::Table', 'ConnectionsTable');
  imports.connectionsTableArn = arn('AWS::DynamoDB::Table', 'ConnectionsTable');
  imports.connectionsKeyArn = arn('AWS::KMS::Key', 'ConnectionsKey');
  imports.itemsTableName = ref('AWS::DynamoDB::Table', 'ItemsTable');
  imports.itemsTableArn = arn('AWS::DynamoDB::Table', 'ItemsTable');
  imports.bucketName = ref('AWS::S3::Bucket', 'ItemsBucket');
  imports.changesTableName = ref('AWS::DynamoDB::Table', 'ChangesTable');
  imports.changesTableArn = arn('AWS::DynamoDB::Table', 'ChangesTable');
});

describe('the erase queue and its dead-letter queue (stateful)', () => {
  it('the queue: SQS-managed encryption, 4 days, visibility 6× the eraser\'s time-out (1,800 s), redrive after 5 receives, retained, no name', () => {
    expect([ERASER_TIMEOUT_SECONDS, VISIBILITY_FACTOR]).toEqual([300, 6]);
    const queue = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'EraseQueue');
    expect(queue.Properties).toEqual({
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 4 * 24 * 3600,
      VisibilityTimeout: 1800,
      RedrivePolicy: { deadLetterTargetArn: fnArn(ids.dlq!), maxReceiveCount: 5 },
    });
    expect([queue.DeletionPolicy, queue.UpdateReplacePolicy]).toEqual(['Retain', 'Retain']);
    const eraserTimeout = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!).Properties['Timeout'];
    expect(queue.Properties['VisibilityTimeout']).toBe(VISIBILITY_FACTOR * eraserTimeout);
  });

  it('its dead-letter queue: SQS-managed encryption, 14 days, retained', () => {
    const dlq = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'EraseDeadLetterQueue');
    expect(dlq.Properties).toEqual({ MessageRetentionPeriod: 14 * 24 * 3600, SqsManagedSseEnabled: true });
    expect([dlq.DeletionPolicy, dlq.UpdateReplacePolicy]).toEqual(['Retain', 'Retain']);
  });

  it('both refuse requests without TLS', () => {
    for (const id of [ids.queue!, ids.dlq!]) {
      const policy = Object.values(t.statefulTemplate.findResources('AWS::SQS::QueuePolicy')).find(
        (body) => JSON.stringify(body.Properties.Queues) === JSON.stringify([{ Ref: id }]),
      );
      expect(policy?.Properties.PolicyDocument, id).toEqual({
        Statement: [
          { Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } }, Effect: 'Deny', Principal: { AWS: '*' }, Resource: fnArn(id) },
        ],
        Version: '2012-10-17',
      });
    }
  });

  it('outputs: both URLs and ARNs; the queue\'s description gives the message', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown; Description: string }>;
    expect(outputs['EraseQueueUrl']!.Value).toEqual({ Ref: ids.queue });
    expect(outputs['EraseQueueArn']!.Value).toEqual(fnArn(ids.queue!));
    expect(outputs['EraseDeadLetterQueueUrl']!.Value).toEqual({ Ref: ids.dlq });
    expect(outputs['EraseDeadLetterQueueArn']!.Value).toEqual(fnArn(ids.dlq!));
    expect(outputs['EraseQueueUrl']!.Description).toContain('{"connection": "<connection id>", "startedAt": "<ISO-8601>"}');
    expect(outputs['EraseQueueArn']!.Description).toMatch(/--destination-arn/);
    expect(outputs['EraseDeadLetterQueueArn']!.Description).toMatch(/--source-arn/);
  });
});

describe('the eraser (stateless)', () => {
  it('Node.js 22, arm64, 256 MB, 300 s, no tracing, own log group and role (no managed policies)', () => {
    expect(ERASER_MEMORY_MB).toBe(256);
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties).toMatchObject({
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      MemorySize: 256,
      Timeout: 300,
      LoggingConfig: { LogGroup: { Ref: ids.logs } },
      Role: fnArn(ids.role!),
    });
    expect(fn.Properties).not.toHaveProperty('TracingConfig');
    expect(fn.Properties).not.toHaveProperty('FunctionName');
    expect(resource(t.statelessTemplate, 'AWS::Logs::LogGroup', ids.logs!).Properties).toEqual({ RetentionInDays: 30 });
    const role = resource(t.statelessTemplate, 'AWS::IAM::Role', ids.role!);
    expect(role.Properties['AssumeRolePolicyDocument']).toEqual({
      Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
      Version: '2012-10-17',
    });
    expect(role.Properties).not.toHaveProperty('ManagedPolicyArns');
  });

  it('environment: exactly the connections, items and changes tables, the bucket and the erase queue (no key: it never opens a token)', () => {
    expect(resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!).Properties['Environment'].Variables).toEqual({
      [ENV.connectionsTableName]: imports.connectionsTableName,
      [ENV.itemsTableName]: imports.itemsTableName,
      [ENV.itemsBucketName]: imports.bucketName,
      // Its name only: a connection's whole feed goes, whatever its age.
      [ENV.changesTableName]: imports.changesTableName,
      [ENV.eraseQueueUrl]: imports.queueUrl,
      POWERTOOLS_SERVICE_NAME: ERASER_SERVICE,
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: '--enable-source-maps',
    });
    expect(ERASER_SERVICE).toBe('connection-eraser');
  });

  it('IAM: own logs; query and delete items; list and delete objects under items/; query and delete changes; get, update and delete a connection row (the key through DynamoDB only); send to the erase queue; consume it', () => {
    expect(ERASER_ITEMS_ACTIONS).toEqual(['dynamodb:Query', 'dynamodb:BatchWriteItem']);
    expect(ERASER_CHANGES_ACTIONS).toEqual(['dynamodb:Query', 'dynamodb:BatchWriteItem']);
    expect(ERASER_CONNECTIONS_ACCESS.actions).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem']);
    const objects = { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] };
    expect(roleStatements(t.statelessTemplate, ids.role!)).toEqual([
      { Sid: 'WriteOwnLogs', Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: fnArn(ids.logs!) },
      { Sid: 'EraseItems', Effect: 'Allow', Action: ['dynamodb:Query', 'dynamodb:BatchWriteItem'], Resource: imports.itemsTableArn },
      // test/infra/items-bucket.test.ts.
      {
        Sid: 'ListItemObjects',
        Effect: 'Allow',
        Action: 's3:ListBucket',
        Resource: { 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' },
        Condition: { StringLike: { 's3:prefix': 'items/*' } },
      },
      { Sid: 'EraseItemObjects', Effect: 'Allow', Action: 's3:DeleteObject', Resource: objects },
      // The connection's changes feed (its head row and its changes): BatchWriteItem's DeleteRequests, no DeleteItem.
      { Sid: 'EraseChanges', Effect: 'Allow', Action: ['dynamodb:Query', 'dynamodb:BatchWriteItem'], Resource: imports.changesTableArn },
      // test/infra/connections.test.ts.
      { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'], Resource: imports.connectionsTableArn },
      {
        Sid: 'ConnectionsKey',
        Effect: 'Allow',
        Action: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'],
        Resource: imports.connectionsKeyArn,
        Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } } },
      },
      // The rest of a run cut short, sent again.
      { Sid: 'ContinueErase', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.queueArn },
      // The SQS event source's grant.
      {
        Effect: 'Allow',
        Action: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
        Resource: imports.queueArn,
      },
    ]);
  });

  it('the erase queue feeds it: one message at a time, ReportBatchItemFailures, at most two at once', () => {
    expect(ERASER_MAX_CONCURRENCY).toBe(2);
    const mappings = Object.values(t.statelessTemplate.findResources('AWS::Lambda::EventSourceMapping')).filter(
      (body) => JSON.stringify(body.Properties.FunctionName) === JSON.stringify({ Ref: ids.fn }),
    );
    expect(mappings.map((mapping) => mapping.Properties)).toEqual([
      {
        EventSourceArn: imports.queueArn,
        FunctionName: { Ref: ids.fn },
        BatchSize: 1,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 2 },
      },
    ]);
  });

  it('output: the function name', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs['ConnectionEraserFunctionName']!.Value).toEqual({ Ref: ids.fn });
  });
});

describe('the eraser: operations', () => {
  it('alarm: an erase in the dead-letter queue (≥ 1 visible, 5 minutes), on the alarm topic on alarm and on recovery', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'EraseDeadLetterQueueAlarm');
    expect(alarm.Properties).toEqual({
      AlarmActions: [{ Ref: ids.topic }],
      OKActions: [{ Ref: ids.topic }],
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: imports.dlqName }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    expect(alarm.Properties['AlarmDescription']).toMatch(/failed it 5 runs in a row.*redrive to the erase queue/);
  });

  it('dashboard: a row with the erase queue (and its dead-letter queue) and the function; the alarm in the status widget, last', () => {
    type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][]; alarms?: unknown[] } };
    const dashboard = Object.values(t.statelessTemplate.findResources('AWS::CloudWatch::Dashboard'))[0]!;
    const parts = dashboard.Properties.DashboardBody['Fn::Join'][1] as unknown[];
    const widgets = JSON.parse(parts.map((part) => (typeof part === 'string' ? part : 'TOKEN')).join('')).widgets as Widget[];
    const titled = (title: string) => {
      const widget = widgets.find((w) => w.properties.title === title);
      expect(widget, title).toBeDefined();
      return widget!;
    };
    const names = (widget: Widget) => widget.properties.metrics!.map((m) => m.filter((part) => typeof part === 'string').slice(0, 2).join(' '));
    const queue = titled('Erase queue');
    expect(names(queue)).toEqual([
      'AWS/SQS ApproximateNumberOfMessagesVisible',
      'AWS/SQS ApproximateNumberOfMessagesNotVisible',
      'AWS/SQS ApproximateNumberOfMessagesVisible',
      'AWS/SQS ApproximateAgeOfOldestMessage',
    ]);
    const fn = titled('Connection eraser function');
    expect(names(fn)).toEqual(['AWS/Lambda Invocations', 'AWS/Lambda Errors', 'AWS/Lambda Duration']);
    expect(new Set([queue.y, fn.y]).size).toBe(1);
    expect(queue.width + fn.width).toBe(24);
    // The last row of the dashboard.
    expect(queue.y).toBe(Math.max(...widgets.map((w) => w.y)));
    const alarmArn = { 'Fn::GetAtt': [logicalId(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'EraseDeadLetterQueueAlarm'), 'Arn'] };
    // The status widget's alarms, in order (every alarm ARN of the body): the eraser's comes last.
    const alarms = parts.filter((part) => typeof part === 'object' && part !== null && 'Fn::GetAtt' in part && /Alarm/.test(JSON.stringify(part)));
    // Every alarm of the stack (how many: test/infra/operations.test.ts).
    expect(alarms).toHaveLength(Object.keys(t.statelessTemplate.findResources('AWS::CloudWatch::Alarm')).length);
    expect(alarms.at(-1)).toEqual(alarmArn);
  });
});
