/**
 * The changes writer in both templates (infra/changes-writer; docs/changes.md): its failure queue in
 * the stateful stack (retained, encrypted, TLS-only, no literal name, output); the function (memory,
 * time-out, exact environment), its exact IAM statements (the changes table's four actions, the
 * connections table's two attributes by GetItem only, the items stream's read, the failure queue),
 * its one event source, the items table's stream (TRIM_HORIZON, 1,000 records, factor 1,
 * ReportBatchItemFailures, bisect, retried until the records leave the stream, the failure queue on
 * failure), its output, its three alarms and its dashboard row (after the change events', before
 * the client API's).
 */
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHANGES_WRITER_CONNECTION_ATTRIBUTES } from '../../functions/changes-writer/adapters/dynamodb-erase-state.js';
import { CHANGES_WRITER_STALE_AFTER_MS } from '../../functions/changes-writer/limits.js';
import { ENV } from '../../functions/shared/config.js';
import { CHANGES_WRITER_METRIC_NAMES, CHANGES_WRITER_SERVICE } from '../../functions/shared/metric-names.js';
import { CHANGES_WRITER_CHANGES_ACTIONS, CHANGES_WRITER_CONNECTIONS_ACCESS } from '../../infra/changes-writer/changes-writer.js';
import { CHANGES_WRITER_LAG_ALARM_MS } from '../../infra/changes-writer/operations.js';
import { CHANGES_WRITER_BATCH_SIZE, CHANGES_WRITER_MEMORY_MB, CHANGES_WRITER_TIMEOUT_SECONDS } from '../../infra/deployment.js';
import { dashboardParts, fnArn, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
const ids: Record<string, string> = {};
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates();
  const f = t.statefulTemplate;
  const s = t.statelessTemplate;
  ids.failureQueue = logicalId(f, 'AWS::SQS::Queue', 'ChangesWriterFailureQueue');
  ids.table = logicalId(f, 'AWS::DynamoDB::Table', 'ItemsTable');
  ids.fn = logicalId(s, 'AWS::Lambda::Function', 'ChangesWriterFunction');
  ids.role = logicalId(s, 'AWS::IAM::Role', 'ChangesWriterRole');
  ids.logs = logicalId(s, 'AWS::Logs::LogGroup', 'ChangesWriterLogGroup');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
  imports.failureQueueArn = importOf(f, fnArn(ids.failureQueue));
  imports.failureQueueName = importOf(f, { 'Fn::GetAtt': [ids.failureQueue, 'QueueName'] });
  imports.streamArn = importOf(f, { 'Fn::GetAtt': [ids.table, 'StreamArn'] });
  imports.changesTableName = importOf(f, { Ref: logicalId(f, 'AWS::DynamoDB::Table', 'ChangesTable') });
  imports.changesTableArn = importOf(f, fnArn(logicalId(f, 'AWS::DynamoDB::Table', 'ChangesTable')));
  imports.connectionsTableName = importOf(f, { Ref: logicalId(f, 'AWS::DynamoDB::Table', 'ConnectionsTable') });
  imports.connectionsTableArn = importOf(f, fnArn(logicalId(f, 'AWS::DynamoDB::Table', 'ConnectionsTable')));
  imports.connectionsKeyArn = importOf(f, fnArn(logicalId(f, 'AWS::KMS::Key', 'ConnectionsKey')));
});

describe('changes writer: stateful resources', () => {
  it('the failure queue: SQS-managed encryption, 14 days, retained, no name, refuses requests without TLS', () => {
    const queue = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'ChangesWriterFailureQueue');
    // No QueueName, no visibility time-out, no redrive: an operator reads it, no function consumes it.
    expect(queue.Properties).toEqual({ MessageRetentionPeriod: 14 * 24 * 3600, SqsManagedSseEnabled: true });
    expect(queue.DeletionPolicy).toBe('Retain');
    expect(queue.UpdateReplacePolicy).toBe('Retain');
    const policy = resource(t.statefulTemplate, 'AWS::SQS::QueuePolicy', 'ChangesWriterFailureQueuePolicy');
    expect(policy.Properties).toEqual({
      Queues: [{ Ref: ids.failureQueue }],
      PolicyDocument: {
        Statement: [
          {
            Action: 'sqs:*',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            Effect: 'Deny',
            Principal: { AWS: '*' },
            Resource: fnArn(ids.failureQueue!),
          },
        ],
        Version: '2012-10-17',
      },
    });
  });

  it('a queue of its own, not the change events\' failure queue (each feature mends from its own)', () => {
    expect(ids.failureQueue).not.toBe(logicalId(t.statefulTemplate, 'AWS::SQS::Queue', 'ChangeEventsFailureQueue'));
  });

  it('output: the failure queue URL, its description saying what a message is and where to mend the feed', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown; Description: string }>;
    expect(outputs['ChangesWriterFailureQueueUrl']!.Value).toEqual({ Ref: ids.failureQueue });
    expect(outputs['ChangesWriterFailureQueueUrl']!.Description).toMatch(/shard and sequence numbers/);
    expect(outputs['ChangesWriterFailureQueueUrl']!.Description).toMatch(/docs\/changes\.md/);
  });
});

describe('changes writer: the function', () => {
  it('Node.js 22, arm64, 256 MB, 60 s, no tracing (the context key), own log group (one month) and role (no managed policies)', () => {
    expect([CHANGES_WRITER_MEMORY_MB, CHANGES_WRITER_TIMEOUT_SECONDS]).toEqual([256, 60]);
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties).toMatchObject({
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      MemorySize: 256,
      Timeout: 60,
      LoggingConfig: { LogGroup: { Ref: ids.logs } },
      Role: fnArn(ids.role!),
    });
    expect(fn.Properties).not.toHaveProperty('TracingConfig');
    expect(fn.Properties).not.toHaveProperty('FunctionName');
    // No reserved concurrency: the event source runs one batch per shard at a time (factor 1).
    expect(fn.Properties).not.toHaveProperty('ReservedConcurrentExecutions');
    const logs = resource(t.statelessTemplate, 'AWS::Logs::LogGroup', ids.logs!);
    expect(logs.Properties).toEqual({ RetentionInDays: 30 });
    expect(logs.DeletionPolicy).toBe('Delete');
    const role = resource(t.statelessTemplate, 'AWS::IAM::Role', ids.role!);
    expect(role.Properties['AssumeRolePolicyDocument']).toEqual({
      Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
      Version: '2012-10-17',
    });
    expect(role.Properties).not.toHaveProperty('ManagedPolicyArns');
  });

  it('its time-out is shorter than the age at which the writer takes a head for a dead writer\'s (no live invocation is taken for dead)', () => {
    const timeoutMs = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!).Properties['Timeout'] * 1000;
    expect(timeoutMs).toBe(CHANGES_WRITER_TIMEOUT_SECONDS * 1000);
    expect(CHANGES_WRITER_STALE_AFTER_MS).toBe(120_000);
    expect(timeoutMs).toBeLessThan(CHANGES_WRITER_STALE_AFTER_MS);
  });

  it('environment: the changes table, the changes\' retention (the default 35 days), the connections table; nothing else but the construct defaults', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties['Environment'].Variables).toEqual({
      [ENV.changesTableName]: imports.changesTableName,
      // Each change is written to expire this many days later (test/infra/stateless-stack.test.ts: changesRetentionDays).
      [ENV.changesRetentionDays]: '35',
      // Whether a connection is being erased (no key: it never opens a token).
      [ENV.connectionsTableName]: imports.connectionsTableName,
      POWERTOOLS_SERVICE_NAME: CHANGES_WRITER_SERVICE,
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: '--enable-source-maps',
    });
    expect(CHANGES_WRITER_SERVICE).toBe('changes-writer');
    // Nothing of the items table but its stream: no name, and no bucket.
    expect(fn.Properties['Environment'].Variables).not.toHaveProperty(ENV.itemsTableName);
    expect(fn.Properties['Environment'].Variables).not.toHaveProperty(ENV.connectionsKeyArn);
  });

  it('IAM: own logs, four actions on the changes table, two attributes of a connection by GetItem, send to the failure queue, read the items stream; nothing else', () => {
    expect(CHANGES_WRITER_CHANGES_ACTIONS).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query']);
    expect(CHANGES_WRITER_CONNECTIONS_ACCESS.actions).toEqual(['dynamodb:GetItem']);
    expect(CHANGES_WRITER_CONNECTION_ATTRIBUTES).toEqual(['connection', 'erase']);
    expect(roleStatements(t.statelessTemplate, ids.role!)).toEqual([
      { Sid: 'WriteOwnLogs', Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: fnArn(ids.logs!) },
      // A head (strongly consistent GetItem), a change (PutItem), a head's move (UpdateItem), the last
      // changes when a batch comes again (Query). No Scan, DeleteItem or BatchWriteItem.
      {
        Sid: 'WriteChanges',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query'],
        Resource: imports.changesTableArn,
      },
      // A connection's key and erase, as a projection (test/infra/connections.test.ts): never a token or a status.
      {
        Sid: 'Connections',
        Effect: 'Allow',
        Action: 'dynamodb:GetItem',
        Resource: imports.connectionsTableArn,
        Condition: {
          'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['connection', 'erase'] },
          StringEqualsIfExists: { 'dynamodb:Select': 'SPECIFIC_ATTRIBUTES' },
        },
      },
      // The connections table is encrypted under the connections key: used through DynamoDB only.
      {
        Sid: 'ConnectionsKey',
        Effect: 'Allow',
        // A read: DynamoDB decrypts the table key, nothing more.
        Action: 'kms:Decrypt',
        Resource: imports.connectionsKeyArn,
        Condition: {
          StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } },
        },
      },
      // The on-failure destination's grant (SQS-managed encryption: no kms statement).
      { Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'], Resource: imports.failureQueueArn },
      // The stream event source's grant: ListStreams has no resource-level permissions.
      { Effect: 'Allow', Action: 'dynamodb:ListStreams', Resource: '*' },
      { Effect: 'Allow', Action: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'], Resource: imports.streamArn },
    ]);
  });

  it('the items stream is read by the change-events function and the changes writer only', () => {
    const readers = Object.entries(t.statelessTemplate.findResources('AWS::IAM::Policy'))
      .filter(([, body]) => JSON.stringify(body.Properties).includes(imports.streamArn!['Fn::ImportValue']))
      .map(([id]) => id.replace(/[0-9A-F]{8}$/, ''));
    expect(readers.sort()).toEqual(['ChangeEventsRoleDefaultPolicy', 'ChangesWriterRoleDefaultPolicy']);
  });

  /** The function's event source mappings. */
  const mappings = () =>
    Object.values(t.statelessTemplate.findResources('AWS::Lambda::EventSourceMapping')).filter(
      (body) => JSON.stringify(body.Properties.FunctionName) === JSON.stringify({ Ref: ids.fn }),
    );

  it('one event source, the items stream: TRIM_HORIZON, 1,000 records, ReportBatchItemFailures, bisect, factor 1, the failure queue on failure', () => {
    expect(CHANGES_WRITER_BATCH_SIZE).toBe(1_000);
    const found = mappings();
    expect(found).toHaveLength(1);
    expect(found[0]!.Properties).toEqual({
      EventSourceArn: imports.streamArn,
      FunctionName: { Ref: ids.fn },
      // A mapping created (or created again) starts at the oldest record the stream holds: no write goes unnumbered.
      StartingPosition: 'TRIM_HORIZON',
      BatchSize: 1000,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      // One batch per shard at a time: a shard's records numbered in order.
      ParallelizationFactor: 1,
      DestinationConfig: { OnFailure: { Destination: imports.failureQueueArn } },
    });
  });

  it('retried until the records leave the stream: no MaximumRetryAttempts, no MaximumRecordAgeInSeconds (CloudFormation\'s -1, infinite), no window, no filter', () => {
    const properties = mappings()[0]!.Properties;
    // toEqual above passes an undefined property; these must be absent from the template.
    for (const property of ['MaximumRetryAttempts', 'MaximumRecordAgeInSeconds', 'MaximumBatchingWindowInSeconds', 'TumblingWindowInSeconds', 'FilterCriteria', 'Enabled']) {
      expect(properties, property).not.toHaveProperty(property);
    }
  });

  it('the stream it reads carries new and old images (a change needs both)', () => {
    expect(resource(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ItemsTable').Properties['StreamSpecification']).toEqual({ StreamViewType: 'NEW_AND_OLD_IMAGES' });
  });

  it('output: the function name', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs['ChangesWriterFunctionName']!.Value).toEqual({ Ref: ids.fn });
  });
});

describe('changes writer: operations', () => {
  const actions = () => ({ AlarmActions: [{ Ref: ids.topic }], OKActions: [{ Ref: ids.topic }] });

  it('alarm: ChangesUnreadable ≥ 1 in 5 minutes (records that could not be read as changes)', () => {
    expect(CHANGES_WRITER_METRIC_NAMES.unreadable).toBe('ChangesUnreadable');
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ChangesUnreadableAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'ContentSync',
      MetricName: 'ChangesUnreadable',
      Dimensions: [{ Name: 'service', Value: 'changes-writer' }],
      Statistic: 'Sum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    expect(alarm.Properties['AlarmDescription']).toMatch(/stream record not numbered/);
    expect(alarm.Properties['AlarmDescription']).toMatch(/docs\/changes\.md/);
  });

  it('alarm: the function\'s iterator age an hour or more (Maximum over 5 minutes), long before its records leave the stream (24 hours)', () => {
    expect(CHANGES_WRITER_LAG_ALARM_MS).toBe(3_600_000);
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ChangesWriterLagAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'AWS/Lambda',
      MetricName: 'IteratorAge',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: ids.fn } }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 3_600_000,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    expect(alarm.Properties['Threshold']).toBeLessThan(24 * 3600 * 1000);
    expect(alarm.Properties['AlarmDescription']).toMatch(/changes not numbered yet/);
  });

  it('alarm: a message in its failure queue', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ChangesWriterFailureQueueAlarm');
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
    expect(alarm.Properties['AlarmDescription']).toMatch(/not in the feed/);
    expect(alarm.Properties['AlarmDescription']).toMatch(/docs\/changes\.md/);
  });

  it('dashboard: a row with every changes-writer metric, the function with its iterator age, the failure queue, between the change events\' row and the client API\'s', () => {
    type Widget = { type: string; width: number; height: number; y: number; properties: { title?: string; metrics?: unknown[][]; alarms?: unknown[] } };
    const { widgets, tokens } = dashboard(t.statelessTemplate);
    const titled = (title: string) => {
      const widget = (widgets as Widget[]).find((w) => w.properties.title === title);
      expect(widget, title).toBeDefined();
      return widget!;
    };
    /** A metric as `namespace name dimension value`, a token's value as its JSON. */
    const names = (widget: Widget) =>
      widget.properties.metrics!.map((m) =>
        m
          .filter((part) => typeof part === 'string')
          .slice(0, 4)
          .map((part) => (tokens.has(part as string) ? JSON.stringify(tokens.get(part as string)) : part))
          .join(' '),
      );
    expect(names(titled('Changes feed: numbered'))).toEqual(
      ['ChangesNumbered', 'ChangesAlreadyNumbered', 'ChangesOfErasedSkipped', 'ChangesUnreadable', 'ChangeRecordsRetried'].map((name) => `ContentSync ${name} service changes-writer`),
    );
    expect(Object.values(CHANGES_WRITER_METRIC_NAMES)).toEqual(['ChangesNumbered', 'ChangesAlreadyNumbered', 'ChangesOfErasedSkipped', 'ChangesUnreadable', 'ChangeRecordsRetried']);
    const fn = JSON.stringify({ Ref: ids.fn });
    const lag = titled('Changes writer and stream lag');
    expect(names(lag)).toEqual([`AWS/Lambda Invocations FunctionName ${fn}`, `AWS/Lambda Errors FunctionName ${fn}`, `AWS/Lambda IteratorAge FunctionName ${fn}`]);
    // The iterator age on the right axis, as its alarm reads it (Maximum).
    expect(lag.properties.metrics!.at(-1)!.at(-1)).toEqual({ label: 'Iterator age (ms)', stat: 'Maximum', yAxis: 'right' });
    expect(names(titled('Changes-writer failure queue'))).toEqual([`AWS/SQS ApproximateNumberOfMessagesVisible QueueName ${JSON.stringify(imports.failureQueueName)}`]);
    const row = ['Changes feed: numbered', 'Changes writer and stream lag', 'Changes-writer failure queue'].map(titled);
    expect(new Set(row.map((w) => w.y)).size).toBe(1);
    expect(row.reduce((sum, w) => sum + w.width, 0)).toBe(24);
    // Right after the change events' row, right before the client API's (infra/stateless-stack.ts).
    const changeEvents = titled('Change events');
    expect(row[0]!.y).toBe(changeEvents.y + changeEvents.height);
    expect(titled('Client API requests').y).toBe(row[0]!.y + row[0]!.height);
  });

  it('its three alarms in the status widget, after the change events\' and before the eraser\'s', () => {
    const parts = dashboardParts(t.statelessTemplate);
    const alarmId = (prefix: string) => logicalId(t.statelessTemplate, 'AWS::CloudWatch::Alarm', prefix);
    const listed = parts
      .filter((part): part is { 'Fn::GetAtt': [string, string] } => typeof part === 'object' && part !== null && 'Fn::GetAtt' in part)
      .map((part) => part['Fn::GetAtt'][0]);
    const at = listed.indexOf(alarmId('ChangesUnreadableAlarm'));
    expect(listed.slice(at - 1, at + 4)).toEqual(
      ['ChangeEventsFailureQueueAlarm', 'ChangesUnreadableAlarm', 'ChangesWriterLagAlarm', 'ChangesWriterFailureQueueAlarm', 'EraseDeadLetterQueueAlarm'].map(alarmId),
    );
  });
});


/** The dashboard's widgets, each token of the body replaced by a placeholder (`TOKEN<n>`), and what each placeholder stands for. */
function dashboard(template: Template): { widgets: unknown[]; tokens: Map<string, unknown> } {
  const tokens = new Map<string, unknown>();
  const body = dashboardParts(template)
    .map((part) => {
      if (typeof part === 'string') return part;
      const placeholder = `TOKEN${tokens.size}`;
      tokens.set(placeholder, part);
      return placeholder;
    })
    .join('');
  return { widgets: JSON.parse(body).widgets as unknown[], tokens };
}
