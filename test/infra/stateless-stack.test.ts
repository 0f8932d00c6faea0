/**
 * The stateless stack's template: the refresher and the item sync with their Lambda defaults,
 * environment, IAM statements of every role, schedule, event source; no deploy-time run; least
 * privilege across the stack; outputs. Alarms, topic and dashboard: test/infra/operations.test.ts;
 * the client API and the eraser: test/infra/client-api.test.ts and test/infra/eraser.test.ts; the
 * changes writer: test/infra/changes-writer.test.ts.
 */
import { Capture, Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { STACK_NAMES } from '../../infra/content-sync-app.js';

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
  ids.scheduleRole = logicalId(s, 'AWS::IAM::Role', 'TokenRefreshScheduleRole');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
  const f = t.statefulTemplate;
  const ref = (type: string, prefix: string) => ({ Ref: logicalId(f, type, prefix) });
  const arn = (type: string, prefix: string) => ({ 'Fn::GetAtt': [logicalId(f, type, prefix), 'Arn'] });
  imports.connectionsTableName = importOf(f, ref('AWS::DynamoDB::Table', 'ConnectionsTable'));
  imports.connectionsTableArn = importOf(f, arn('AWS::DynamoDB::Table', 'ConnectionsTable'));
  imports.connectionsKeyArn = importOf(f, arn('AWS::KMS::Key', 'ConnectionsKey'));
  imports.tableName = importOf(f, ref('AWS::DynamoDB::Table', 'ItemsTable'));
  imports.tableArn = importOf(f, arn('AWS::DynamoDB::Table', 'ItemsTable'));
  imports.controlTableName = importOf(f, ref('AWS::DynamoDB::Table', 'ControlTable'));
  imports.controlTableArn = importOf(f, arn('AWS::DynamoDB::Table', 'ControlTable'));
  imports.changesTableName = importOf(f, ref('AWS::DynamoDB::Table', 'ChangesTable'));
  imports.changesTableArn = importOf(f, arn('AWS::DynamoDB::Table', 'ChangesTable'));
  imports.queueArn = importOf(f, arn('AWS::SQS::Queue', 'SyncQueue'));
  imports.dlqUrl = importOf(f, ref('AWS::SQS::Queue', 'DeadLetterQueue'));
  imports.dlqArn = importOf(f, arn('AWS::SQS::Queue', 'DeadLetterQueue'));
  imports.bucketName = importOf(f, ref('AWS::S3::Bucket', 'ItemsBucket'));
  imports.reconcileQueueArn = importOf(f, arn('AWS::SQS::Queue', 'ReconcileQueue'));
  imports.reconcileQueueUrl = importOf(f, ref('AWS::SQS::Queue', 'ReconcileQueue'));
});

const logsStatement = (logGroupId: string) => ({
  Sid: 'WriteOwnLogs',
  Effect: 'Allow',
  Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
  Resource: { 'Fn::GetAtt': [logGroupId, 'Arn'] },
});
const xrayStatement = { Effect: 'Allow', Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], Resource: '*' };
/** The key statement of every role that uses the connections table (test/infra/connections.test.ts). */
const connectionsKeyStatement = () => ({
  Sid: 'ConnectionsKey',
  Effect: 'Allow',
  Action: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'],
  Resource: imports.connectionsKeyArn,
  Condition: {
    StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } },
  },
});
/** The key called directly by the roles that seal or open tokens (test/infra/connections.test.ts). */
const connectionTokensStatement = () => ({
  Sid: 'ConnectionTokens',
  Effect: 'Allow',
  Action: ['kms:Decrypt', 'kms:GenerateDataKey'],
  Resource: imports.connectionsKeyArn,
  Condition: {
    'ForAllValues:StringEquals': { 'kms:EncryptionContextKeys': ['connection'] },
    Null: { 'kms:EncryptionContextKeys': 'false' },
  },
});
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
      ['TokenRefresherFunction', 'token-refresher', 256, 300],
      ['ItemSyncFunction', 'item-sync', 256, 60],
    ])('%s: Node.js 22, arm64, ESM bundle entry, no tracing, own log group and role, %s', (prefix, service, memory, timeout) => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', prefix);
      const logGroup = prefix.replace('Function', 'LogGroup');
      const role = prefix.replace('Function', 'Role');
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
        MemorySize: memory,
        Timeout: timeout,
        LoggingConfig: { LogGroup: { Ref: logicalId(t.statelessTemplate, 'AWS::Logs::LogGroup', logGroup) } },
        Role: { 'Fn::GetAtt': [logicalId(t.statelessTemplate, 'AWS::IAM::Role', role), 'Arn'] },
      });
      expect(fn.Properties['Environment'].Variables).toMatchObject({
        POWERTOOLS_SERVICE_NAME: service,
        POWERTOOLS_LOG_LEVEL: 'INFO',
        NODE_OPTIONS: '--enable-source-maps',
      });
      // X-Ray's active tracing is the context key `tracing`, off by default.
      expect(fn.Properties).not.toHaveProperty('TracingConfig');
      expect(fn.Properties).not.toHaveProperty('FunctionName');
      expect(fn.Properties).not.toHaveProperty('ReservedConcurrentExecutions');
    });

    it('tracing true: every function traced (Active), and its role may write traces (the one wildcard X-Ray needs)', () => {
      const traced = synthTemplates({ tracing: 'true' });
      const functions = Object.entries(traced.statelessTemplate.findResources('AWS::Lambda::Function')).filter(([id]) => !id.startsWith('LogRetention'));
      expect(functions.map(([id]) => id.replace(/[0-9A-F]{8}$/, '')).sort()).toEqual([
        'ChangeEventsFunction',
        'ChangesWriterFunction',
        'ClientApiFunction',
        'ConnectionEraserFunction',
        'ItemSyncFunction',
        'ReconcilerFunction',
        'TokenRefresherFunction',
      ]);
      for (const [id, body] of functions) {
        expect(body.Properties.TracingConfig, id).toEqual({ Mode: 'Active' });
        const roleId = (body.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
        expect(roleStatements(traced.statelessTemplate, roleId), id).toContainEqual(xrayStatement);
      }
      // Default (false): no function has the X-Ray statement.
      for (const id of [ids.refresherRole!, ids.syncRole!]) expect(roleStatements(t.statelessTemplate, id)).not.toContainEqual(xrayStatement);
    });

    it('syncMemorySize is the item sync\'s memory (128 to 10,240 MB)', () => {
      const other = synthTemplates({ syncMemorySize: '1024' });
      expect(resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction').Properties.MemorySize).toBe(1024);
      expect(resource(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction').Properties.MemorySize).toBe(256);
    });

    it('log groups keep one month and go with the stack', () => {
      for (const prefix of ['TokenRefresherLogGroup', 'ItemSyncLogGroup']) {
        const logGroup = resource(t.statelessTemplate, 'AWS::Logs::LogGroup', prefix);
        expect(logGroup.Properties).toEqual({ RetentionInDays: 30 });
        expect(logGroup.DeletionPolicy).toBe('Delete');
      }
    });

    it('roles are assumed by Lambda and carry no managed policies', () => {
      for (const id of [ids.refresherRole!, ids.syncRole!]) {
        const role = resource(t.statelessTemplate, 'AWS::IAM::Role', id);
        expect(role.Properties['AssumeRolePolicyDocument']).toEqual(lambdaAssumeRole);
        expect(role.Properties).not.toHaveProperty('ManagedPolicyArns');
      }
    });
  });

  describe('token refresher', () => {
    it('environment: exactly the contract variables, the connections table and key and the control table, the refresh interval', () => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.refresher!);
      // REFRESH_CONCURRENCY, IDLE_REFRESH_HOURS and TOKEN_REQUESTS_PER_SECOND keep the function's defaults.
      expect(fn.Properties['Environment'].Variables).toEqual({
        [ENV.baseUrl]: 'https://provider.example.com/api/v2',
        [ENV.connectionsTableName]: imports.connectionsTableName,
        [ENV.connectionsKeyArn]: imports.connectionsKeyArn,
        [ENV.controlTableName]: imports.controlTableName,
        [ENV.tokenRefreshMinutes]: '30',
        POWERTOOLS_SERVICE_NAME: 'token-refresher',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        NODE_OPTIONS: '--enable-source-maps',
      });
    });

    it('IAM: own logs, get, scan and update connections (the key through DynamoDB, and directly for the tokens), get and put its token pace rows only; nothing else', () => {
      expect(roleStatements(t.statelessTemplate, ids.refresherRole!)).toEqual([
        logsStatement(ids.refresherLogs!),
        { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem'], Resource: imports.connectionsTableArn },
        connectionsKeyStatement(),
        // Opens the refresh token, seals the new tokens: a data key per connection, bound to its id.
        connectionTokensStatement(),
        // The token endpoint's pace: a strongly consistent GetItem and a conditional PutItem of the rows `provider-pace#token#<client id>`.
        {
          Sid: 'TokenPace',
          Effect: 'Allow',
          Action: ['dynamodb:GetItem', 'dynamodb:PutItem'],
          Resource: imports.controlTableArn,
          Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['provider-pace#token#*'] } },
        },
      ]);
    });

    it('TOKEN_REFRESH_MINUTES follows tokenRefreshMinutes on the refresher and the item sync', () => {
      const other = synthTemplates({ tokenRefreshMinutes: '45' });
      for (const prefix of ['TokenRefresherFunction', 'ItemSyncFunction']) {
        const fn = resource(other.statelessTemplate, 'AWS::Lambda::Function', prefix);
        expect(fn.Properties['Environment'].Variables[ENV.tokenRefreshMinutes], prefix).toBe('45');
      }
    });

    it('runs every 5 minutes (EventBridge Scheduler) with {"trigger":"schedule"}; a run older than that is not delivered', () => {
      // The refresher's, and the reconciler's (test/infra/reconciler.test.ts).
      t.statelessTemplate.resourceCountIs('AWS::Scheduler::Schedule', 2);
      const schedules = Object.values(t.statelessTemplate.findResources('AWS::Scheduler::Schedule'));
      expect(schedules.filter((schedule) => JSON.stringify(schedule.Properties.Target.Arn) === JSON.stringify(fnArn(ids.refresher!)))).toHaveLength(1);
      t.statelessTemplate.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: 'rate(5 minutes)',
        FlexibleTimeWindow: { Mode: 'OFF' },
        State: 'ENABLED',
        Target: {
          Arn: fnArn(ids.refresher!),
          RoleArn: fnArn(ids.scheduleRole!),
          Input: JSON.stringify({ trigger: 'schedule' }),
          RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 300 },
        },
      });
    });

    it.each([
      [1, 'rate(1 minute)'],
      [3, 'rate(3 minutes)'],
      [5, 'rate(5 minutes)'],
      ['1440', 'rate(5 minutes)'],
    ])('tokenRefreshMinutes=%s schedules %s (every 5 minutes, or every tokenRefreshMinutes when shorter)', (minutes, expression) => {
      const other = synthTemplates({ tokenRefreshMinutes: minutes });
      const expr = new Capture();
      other.statelessTemplate.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: expr,
        Target: Match.objectLike({ Arn: fnArn(logicalId(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction')) }),
      });
      expect(expr.asString()).toBe(expression);
    });

    it('the schedule role may invoke the refresher (and its versions) only', () => {
      expectSchedulerInvokeRole(t.statelessTemplate, ids.scheduleRole!, ids.refresher!);
    });
  });

  describe('no deploy-time run', () => {
    it('no trigger, no function but the seven, no custom resource: connections are added after the deploy', () => {
      t.statelessTemplate.resourceCountIs('Custom::Trigger', 0);
      t.statelessTemplate.resourceCountIs('AWS::Lambda::Function', 7);
      const types = Object.values(t.statelessTemplate.toJSON().Resources as Record<string, { Type: string }>).map((r) => r.Type);
      expect(types.filter((type) => type.startsWith('Custom::') || type === 'AWS::CloudFormation::CustomResource')).toEqual([]);
    });
  });

  describe('item sync', () => {
    it('environment: exactly the contract variables, the connections table and control table by name, DLQ by URL', () => {
      const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.sync!);
      // No PROVIDER_REQUESTS_PER_SECOND without providerRequestsPerSecond (the pace finds the limit);
      // PACE_FALLBACK_REQUESTS_PER_SECOND and SYNC_POSTPONE_MAX_SECONDS keep the function's defaults.
      expect(fn.Properties['Environment'].Variables).toEqual({
        [ENV.baseUrl]: 'https://provider.example.com/api/v2',
        // CONNECTION_WAIT_SECONDS keeps the function's default.
        [ENV.connectionsTableName]: imports.connectionsTableName,
        [ENV.connectionsKeyArn]: imports.connectionsKeyArn,
        [ENV.tokenRefreshMinutes]: '30',
        [ENV.paceScope]: 'client',
        [ENV.itemsTableName]: imports.tableName,
        [ENV.itemsBucketName]: imports.bucketName,
        // No CHANGES_TABLE_NAME or CHANGES_RETENTION_DAYS: the changes writer numbers the changes from
        // the items table's stream (test/infra/changes-writer.test.ts).
        [ENV.revisionField]: 'revision',
        [ENV.deadLetterQueueUrl]: imports.dlqUrl,
        [ENV.controlTableName]: imports.controlTableName,
        // usersReservedPercent's default: always set.
        [ENV.usersReservedPercent]: '20',
        // The background lane, where a users' batch sends a connection's backlog.
        [ENV.reconcileQueueUrl]: imports.reconcileQueueUrl,
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
          ENV.connectionsTableName,
          ENV.connectionsKeyArn,
          ENV.tokenRefreshMinutes,
          ENV.paceScope,
          ENV.itemsTableName,
          ENV.itemsBucketName,
          ENV.revisionField,
          ENV.deadLetterQueueUrl,
          ENV.controlTableName,
          ENV.usersReservedPercent,
          ENV.reconcileQueueUrl,
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

    it.each([
      [undefined, '35'],
      [1, '1'],
      [' 90 ', '90'],
      ['3650', '3650'],
    ])('changesRetentionDays=%j sets CHANGES_RETENTION_DAYS=%s on the changes writer only, the item sync included among the others (the feed reads each change\'s own expiry)', (value, expected) => {
      const other = synthTemplates({ changesRetentionDays: value });
      // The changes writer writes each change with its expiry (test/infra/changes-writer.test.ts).
      for (const prefix of ['ChangesWriterFunction']) {
        const fn = resource(other.statelessTemplate, 'AWS::Lambda::Function', prefix);
        expect(fn.Properties['Environment'].Variables[ENV.changesRetentionDays], prefix).toBe(expected);
      }
      for (const prefix of ['TokenRefresherFunction', 'ItemSyncFunction', 'ChangeEventsFunction', 'ReconcilerFunction', 'ConnectionEraserFunction', 'ClientApiFunction']) {
        const fn = resource(other.statelessTemplate, 'AWS::Lambda::Function', prefix);
        expect(fn.Properties['Environment'].Variables, prefix).not.toHaveProperty(ENV.changesRetentionDays);
      }
    });

    it('CHANGES_TABLE_NAME: the changes writer, the client API and the eraser only, each the changes table\'s imported name', () => {
      for (const prefix of ['ChangesWriterFunction', 'ClientApiFunction', 'ConnectionEraserFunction']) {
        const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', prefix);
        expect(fn.Properties['Environment'].Variables[ENV.changesTableName], prefix).toEqual(imports.changesTableName);
      }
      // The item sync no longer writes the changes: the changes writer numbers them from the items table's stream.
      for (const prefix of ['TokenRefresherFunction', 'ItemSyncFunction', 'ChangeEventsFunction', 'ReconcilerFunction']) {
        const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', prefix);
        expect(fn.Properties['Environment'].Variables, prefix).not.toHaveProperty(ENV.changesTableName);
      }
    });

    it('only the changes writer, the client API and the eraser may touch the changes table, with exactly their actions', () => {
      const arn = JSON.stringify(imports.changesTableArn);
      const onChanges: Array<{ role: string; sid: string; actions: string[] }> = [];
      for (const [, body] of Object.entries(t.statelessTemplate.findResources('AWS::IAM::Policy'))) {
        const role = (body.Properties.Roles as Array<{ Ref: string }>)[0]!.Ref.replace(/[0-9A-F]{8}$/, '');
        for (const statement of body.Properties.PolicyDocument.Statement as Array<{ Sid?: string; Action: string | string[]; Resource: unknown }>) {
          if ([statement.Resource].flat().some((resource) => JSON.stringify(resource).includes(arn.slice(1, -1)))) {
            onChanges.push({ role, sid: statement.Sid ?? '', actions: [statement.Action].flat() });
          }
        }
      }
      expect(onChanges.sort((a, b) => (a.role < b.role ? -1 : 1))).toEqual([
        // A head (strongly consistent), a change, a head's move, the last changes when a batch comes again (test/infra/changes-writer.test.ts).
        { role: 'ChangesWriterRole', sid: 'WriteChanges', actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query'] },
        { role: 'ClientApiRole', sid: 'ReadChanges', actions: ['dynamodb:GetItem', 'dynamodb:Query'] },
        { role: 'ConnectionEraserRole', sid: 'EraseChanges', actions: ['dynamodb:Query', 'dynamodb:BatchWriteItem'] },
      ]);
    });

    it('PROVIDER_USERS_RESERVED_PERCENT is 20 when usersReservedPercent is not in the context at all', () => {
      const other = synthTemplates({ usersReservedPercent: undefined });
      const sync = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
      expect(sync.Properties['Environment'].Variables[ENV.usersReservedPercent]).toBe('20');
    });

    it.each([
      ['connection', 'connection'],
      [' client ', 'client'],
    ])('paceScope=%j sets PACE_SCOPE=%s on the item sync only', (value, expected) => {
      const other = synthTemplates({ paceScope: value });
      const sync = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
      expect(sync.Properties['Environment'].Variables[ENV.paceScope]).toBe(expected);
      for (const prefix of ['TokenRefresherFunction', 'ChangeEventsFunction', 'ChangesWriterFunction', 'ReconcilerFunction', 'ClientApiFunction', 'ConnectionEraserFunction']) {
        const fn = resource(other.statelessTemplate, 'AWS::Lambda::Function', prefix);
        expect(fn.Properties['Environment'].Variables, prefix).not.toHaveProperty(ENV.paceScope);
      }
    });

    it.each([
      [undefined, 'INFO'],
      ['DEBUG', 'DEBUG'],
      ['warn', 'WARN'],
      ['ERROR', 'ERROR'],
    ])('logLevel=%j sets POWERTOOLS_LOG_LEVEL=%s on every function', (value, expected) => {
      const other = synthTemplates({ logLevel: value });
      const functions = Object.entries(other.statelessTemplate.findResources('AWS::Lambda::Function') as Record<string, { Properties: { Environment?: { Variables?: Record<string, unknown> } } }>)
        // CDK's own functions (log retention, bucket notifications, custom resources) have no Powertools.
        .filter(([, body]) => body.Properties.Environment?.Variables?.['POWERTOOLS_SERVICE_NAME'] !== undefined);
      expect(functions.map(([id]) => id.replace(/[0-9A-F]{8}$/, '')).sort()).toEqual([
        'ChangeEventsFunction',
        'ChangesWriterFunction',
        'ClientApiFunction',
        'ConnectionEraserFunction',
        'ItemSyncFunction',
        'ReconcilerFunction',
        'TokenRefresherFunction',
      ]);
      for (const [id, body] of functions) expect(body.Properties.Environment!.Variables!['POWERTOOLS_LOG_LEVEL'], id).toBe(expected);
    });

    it('PACE_SCOPE is client when paceScope is not in the context at all', () => {
      const other = synthTemplates({ paceScope: undefined });
      const sync = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
      expect(sync.Properties['Environment'].Variables[ENV.paceScope]).toBe('client');
    });

    it('REVISION_FIELD follows revisionField', () => {
      const other = synthTemplates({ revisionField: 'meta.rev' });
      other.statelessTemplate.hasResourceProperties('AWS::Lambda::Function', {
        Environment: { Variables: Match.objectLike({ [ENV.revisionField]: 'meta.rev' }) },
      });
    });

    it('IAM: own logs, read/write items (no Scan/Delete), the pace rows, send back to its queue and to the DLQ, get and update connections, consume its queue; nothing on the changes table', () => {
      expect(roleStatements(t.statelessTemplate, ids.syncRole!)).toEqual([
        logsStatement(ids.syncLogs!),
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
        // A connection's tokens, refreshed on demand, and lastUsedAt (test/infra/connections.test.ts).
        { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'], Resource: imports.connectionsTableArn },
        connectionsKeyStatement(),
        // Opens the access token; seals the tokens of an on-demand refresh.
        connectionTokensStatement(),
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
      // The sync queue's, the items and connections streams' (test/infra/change-events.test.ts), the
      // items stream's again for the changes writer (test/infra/changes-writer.test.ts), the reconcile
      // queue's (test/infra/reconciler.test.ts) and the erase queue's (test/infra/eraser.test.ts).
      t.statelessTemplate.resourceCountIs('AWS::Lambda::EventSourceMapping', 6);
      const mapping = resource(t.statelessTemplate, 'AWS::Lambda::EventSourceMapping', 'ItemSyncFunctionSqsEventSourceContentSyncStatefulSyncQueue');
      expect(mapping.Properties).toEqual({
        EventSourceArn: imports.queueArn,
        FunctionName: { Ref: ids.sync },
        BatchSize: 100,
        MaximumBatchingWindowInSeconds: 1,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 2 },
      });
    });

    it('syncBatchSize over 10 gets a 1 s batching window; syncMaxConcurrency is passed through', () => {
      const other = synthTemplates({ syncBatchSize: '50', syncMaxConcurrency: '7' });
      other.statelessTemplate.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        BatchSize: 50,
        MaximumBatchingWindowInSeconds: 1,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 7 },
      });
    });

    it('syncBatchSize 10 or less: no batching window (each batch is one receive)', () => {
      const other = synthTemplates({ syncBatchSize: '10' });
      const mappings = Object.values(other.statelessTemplate.findResources('AWS::Lambda::EventSourceMapping')).filter((m) => m.Properties.BatchSize === 10);
      expect(mappings).toHaveLength(2);
      for (const mapping of mappings) expect(mapping.Properties).not.toHaveProperty('MaximumBatchingWindowInSeconds');
    });
  });

  describe('least privilege across the stack', () => {
    it.each([
      ['default', {}],
      ['tracing true', { tracing: 'true' }],
    ])('no Allow statement names a wildcard action; only X-Ray and the stream grant\'s ListStreams have a wildcard resource (%s)', (_name, overrides) => {
      const template = synthTemplates(overrides).statelessTemplate.toJSON();
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

  it('outputs: the function names, the client API\'s URL and ARN, the alarm topic and the dashboard', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(Object.keys(outputs).sort()).toEqual([
      'AlarmTopicArn',
      // The client API (test/infra/client-api.test.ts).
      'ApiExecuteArn',
      'ApiUrl',
      'ChangeEventsFunctionName',
      // The changes writer (test/infra/changes-writer.test.ts).
      'ChangesWriterFunctionName',
      'ClientApiFunctionName',
      // The eraser (test/infra/eraser.test.ts).
      'ConnectionEraserFunctionName',
      'DashboardName',
      'ItemSyncFunctionName',
      'ReconcilerFunctionName',
      'TokenRefresherFunctionName',
    ]);
    expect(outputs['TokenRefresherFunctionName']!.Value).toEqual({ Ref: ids.refresher });
    expect(outputs['ItemSyncFunctionName']!.Value).toEqual({ Ref: ids.sync });
    expect(outputs['AlarmTopicArn']!.Value).toEqual({ Ref: ids.topic });
  });
});
