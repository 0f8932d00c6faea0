/**
 * The stateful stack's template: items table, control table, changes table, no secret (the connections table and
 * its key: test/infra/connections.test.ts), the sync queue and its DLQ, outputs, retention on
 * deletion and the absence of physical names.
 */
import { Capture, Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_TABLE_KEY } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { STACK_NAMES } from '../../infra/content-sync-app.js';
import { CONTROL_TABLE_PARTITION_KEY } from '../../infra/stateful-stack.js';
import { CHANGES_TABLE_PARTITION_KEY, CHANGES_TABLE_SORT_KEY, CHANGES_TABLE_TTL_ATTRIBUTE } from '../../infra/storage/changes-table.js';
import { ITEMS_TABLE_PARTITION_KEY, ITEMS_TABLE_SORT_KEY } from '../../infra/storage/storage.js';
import { logicalId, resource, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
beforeAll(() => {
  t = synthTemplates();
});

describe('stateful stack', () => {
  it('is named ContentSyncStateful', () => {
    expect(t.stateful.stackName).toBe(STACK_NAMES.stateful);
    expect(STACK_NAMES.stateful).toBe('ContentSyncStateful');
  });

  it('items table: partition key connection, sort key id (both strings), on demand, PITR, new-and-old-image stream, retained', () => {
    // The items table, the control table, the changes table and the connections table (test/infra/connections.test.ts).
    t.statefulTemplate.resourceCountIs('AWS::DynamoDB::Table', 4);
    const itemsTableId = logicalId(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ItemsTable');
    t.statefulTemplate.hasResource('AWS::DynamoDB::Table', {
      Properties: {
        KeySchema: [
          { AttributeName: 'connection', KeyType: 'HASH' },
          { AttributeName: 'id', KeyType: 'RANGE' },
        ],
        AttributeDefinitions: [
          { AttributeName: 'connection', AttributeType: 'S' },
          { AttributeName: 'id', AttributeType: 'S' },
        ],
        BillingMode: 'PAY_PER_REQUEST',
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
        DeletionProtectionEnabled: true,
        SSESpecification: { SSEEnabled: true },
        TableName: Match.absent(),
        ProvisionedThroughput: Match.absent(),
        GlobalSecondaryIndexes: Match.absent(),
      },
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
    });
    // That table is the items table, under its logical id of old (CloudFormation replaces it; the old one is retained).
    expect(itemsTableId).toMatch(/^ItemsTable[0-9A-F]{8}$/);
    expect(resource(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ItemsTable').Properties['KeySchema']).toEqual([
      { AttributeName: ITEMS_TABLE_PARTITION_KEY, KeyType: 'HASH' },
      { AttributeName: ITEMS_TABLE_SORT_KEY, KeyType: 'RANGE' },
    ]);
  });

  it('control table: partition key pk (string) only, as the pace store uses it; on demand, PITR, no stream, retained', () => {
    expect(CONTROL_TABLE_PARTITION_KEY).toBe(CONTROL_TABLE_KEY);
    const table = resource(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ControlTable');
    expect(table.Properties).toEqual({
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
      DeletionProtectionEnabled: true,
    });
    expect(table.DeletionPolicy).toBe('Retain');
    expect(table.UpdateReplacePolicy).toBe('Retain');
  });

  it('changes table: partition key connection (string), sort key seq (number), on demand, TTL on expiresAt, PITR, no stream or index, retained', () => {
    const table = resource(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ChangesTable');
    expect(table.id).toMatch(/^ChangesTable[0-9A-F]{8}$/);
    expect(table.Properties).toEqual({
      KeySchema: [
        { AttributeName: 'connection', KeyType: 'HASH' },
        { AttributeName: 'seq', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: [
        { AttributeName: 'connection', AttributeType: 'S' },
        { AttributeName: 'seq', AttributeType: 'N' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      // A change row expires changesRetentionDays after it is written (epoch seconds).
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      // Encryption and deletion protection as the items table's.
      SSESpecification: { SSEEnabled: true },
      DeletionProtectionEnabled: true,
    });
    // No StreamSpecification, GlobalSecondaryIndexes, LocalSecondaryIndexes, TableName or ProvisionedThroughput (toEqual above).
    expect([table.DeletionPolicy, table.UpdateReplacePolicy]).toEqual(['Retain', 'Retain']);
    // The same settings as the items table, but for its keys, its TTL and its stream.
    const items = resource(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ItemsTable');
    for (const setting of ['BillingMode', 'PointInTimeRecoverySpecification', 'SSESpecification', 'DeletionProtectionEnabled']) {
      expect(table.Properties[setting], setting).toEqual(items.Properties[setting]);
    }
    expect([items.DeletionPolicy, items.UpdateReplacePolicy]).toEqual([table.DeletionPolicy, table.UpdateReplacePolicy]);
    // The names the local harness creates the table with (dev/fakes/local-dynamo.ts) are these.
    expect([CHANGES_TABLE_PARTITION_KEY, CHANGES_TABLE_SORT_KEY, CHANGES_TABLE_TTL_ATTRIBUTE]).toEqual(['connection', 'seq', 'expiresAt']);
  });

  it('holds no secret: credentials and tokens live in the connections table', () => {
    t.statefulTemplate.resourceCountIs('AWS::SecretsManager::Secret', 0);
    t.statefulTemplate.resourceCountIs('AWS::SecretsManager::RotationSchedule', 0);
    t.statelessTemplate.resourceCountIs('AWS::SecretsManager::Secret', 0);
    for (const template of [t.statefulTemplate, t.statelessTemplate]) {
      expect(JSON.stringify(template.toJSON())).not.toMatch(/secretsmanager|SecretName|SECRET_ID/i);
    }
  });

  it('dead-letter queue: SQS-managed encryption, 14 days, retained', () => {
    const dlq = resource(t.statefulTemplate, 'AWS::SQS::Queue', 'DeadLetterQueue');
    expect(dlq.Properties).toEqual({ MessageRetentionPeriod: 14 * 24 * 3600, SqsManagedSseEnabled: true });
    expect(dlq.DeletionPolicy).toBe('Retain');
    expect(dlq.UpdateReplacePolicy).toBe('Retain');
  });

  it('sync queue: SQS-managed encryption, redrive to the DLQ after 5 receives, visibility 6× the sync time-out, retained', () => {
    const dlqId = logicalId(t.statefulTemplate, 'AWS::SQS::Queue', 'DeadLetterQueue');
    const visibility = new Capture();
    t.statefulTemplate.hasResource('AWS::SQS::Queue', {
      Properties: {
        SqsManagedSseEnabled: true,
        KmsMasterKeyId: Match.absent(),
        QueueName: Match.absent(),
        MessageRetentionPeriod: 4 * 24 * 3600,
        VisibilityTimeout: visibility,
        RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [dlqId, 'Arn'] }, maxReceiveCount: 5 },
      },
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
    });
    const syncTimeout = resource(t.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction').Properties['Timeout'];
    expect(syncTimeout).toBe(60);
    expect(visibility.asNumber()).toBeGreaterThanOrEqual(6 * syncTimeout);
    expect(visibility.asNumber()).toBe(360);
  });

  it('the visibility time-out follows a larger batch (and its longer sync time-out)', () => {
    const big = synthTemplates({ syncBatchSize: '1000' });
    const timeout = resource(big.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction').Properties['Timeout'];
    expect(timeout).toBe(600);
    big.statefulTemplate.hasResourceProperties('AWS::SQS::Queue', { VisibilityTimeout: 6 * 600, RedrivePolicy: Match.anyValue() });
  });

  it('both queues refuse requests without TLS', () => {
    for (const prefix of ['SyncQueue', 'DeadLetterQueue']) {
      const queueId = logicalId(t.statefulTemplate, 'AWS::SQS::Queue', prefix);
      t.statefulTemplate.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: queueId }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Action: 'sqs:*',
              Principal: { AWS: '*' },
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
              Resource: { 'Fn::GetAtt': [queueId, 'Arn'] },
            }),
          ]),
        },
      });
    }
  });

  it('outputs: queue URL and ARN, DLQ URL and ARN, table name and stream, control and changes table names, connections table name and key ARN', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    const named = Object.keys(outputs).filter((id) => !id.startsWith('ExportsOutput'));
    expect(named.sort()).toEqual(
      [
        'ChangeEventBusArn',
        'ChangeEventBusName',
        'ChangeEventsFailureQueueUrl',
        // The changes table's name (each connection's changes feed).
        'ChangesTableName',
        // The changes writer's failure queue (test/infra/changes-writer.test.ts).
        'ChangesWriterFailureQueueUrl',
        'ControlTableName',
        // The connections (test/infra/connections.test.ts).
        'ConnectionsKeyArn',
        'ConnectionsTableName',
        'DeadLetterQueueArn',
        'DeadLetterQueueUrl',
        // The erase queue (test/infra/eraser.test.ts).
        'EraseDeadLetterQueueArn',
        'EraseDeadLetterQueueUrl',
        'EraseQueueArn',
        'EraseQueueUrl',
        // The items bucket (test/infra/items-bucket.test.ts): its name, and its ARN as a named export.
        'ExportContentSyncStatefulItemsBucketArn',
        'ItemsBucketName',
        'ItemsTableName',
        'ItemsTableStreamArn',
        'QueueArn',
        'QueueUrl',
        // Reconciliation (test/infra/reconciler.test.ts).
        'ReconcileDeadLetterQueueArn',
        'ReconcileDeadLetterQueueUrl',
        'ReconcileQueueArn',
        'ReconcileQueueUrl',
      ].sort(),
    );
    const id = (type: string, prefix: string) => logicalId(t.statefulTemplate, type, prefix);
    expect(outputs['QueueUrl']!.Value).toEqual({ Ref: id('AWS::SQS::Queue', 'SyncQueue') });
    expect(outputs['QueueArn']!.Value).toEqual({ 'Fn::GetAtt': [id('AWS::SQS::Queue', 'SyncQueue'), 'Arn'] });
    expect(outputs['DeadLetterQueueUrl']!.Value).toEqual({ Ref: id('AWS::SQS::Queue', 'DeadLetterQueue') });
    expect(outputs['DeadLetterQueueArn']!.Value).toEqual({ 'Fn::GetAtt': [id('AWS::SQS::Queue', 'DeadLetterQueue'), 'Arn'] });
    expect(outputs['ItemsTableName']!.Value).toEqual({ Ref: id('AWS::DynamoDB::Table', 'ItemsTable') });
    expect(outputs['ItemsTableStreamArn']!.Value).toEqual({ 'Fn::GetAtt': [id('AWS::DynamoDB::Table', 'ItemsTable'), 'StreamArn'] });
    expect(outputs['ControlTableName']!.Value).toEqual({ Ref: id('AWS::DynamoDB::Table', 'ControlTable') });
    expect(outputs['ChangesTableName']!.Value).toEqual({ Ref: id('AWS::DynamoDB::Table', 'ChangesTable') });
  });

  it('holds only the stateful resources', () => {
    const types = Object.values(t.statefulTemplate.toJSON().Resources as Record<string, { Type: string }>).map((r) => r.Type);
    expect(types.sort()).toEqual(
      [
        'AWS::DynamoDB::Table',
        'AWS::DynamoDB::Table',
        // The changes table.
        'AWS::DynamoDB::Table',
        'AWS::SQS::Queue',
        'AWS::SQS::Queue',
        'AWS::SQS::QueuePolicy',
        'AWS::SQS::QueuePolicy',
        // The connections table and its key (test/infra/connections.test.ts).
        'AWS::DynamoDB::Table',
        'AWS::KMS::Key',
        // The items bucket (test/infra/items-bucket.test.ts) with its TLS-only policy.
        'AWS::S3::Bucket',
        'AWS::S3::BucketPolicy',
        // Change events (test/infra/change-events.test.ts): the bus and the failure queue with its TLS policy.
        'AWS::Events::EventBus',
        'AWS::SQS::Queue',
        'AWS::SQS::QueuePolicy',
        // The changes writer (test/infra/changes-writer.test.ts): its failure queue with its TLS policy.
        'AWS::SQS::Queue',
        'AWS::SQS::QueuePolicy',
        // Reconciliation (test/infra/reconciler.test.ts): the reconcile queue and its dead-letter queue, with their TLS policies.
        'AWS::SQS::Queue',
        'AWS::SQS::Queue',
        'AWS::SQS::QueuePolicy',
        'AWS::SQS::QueuePolicy',
        // The erase (test/infra/eraser.test.ts): the erase queue and its dead-letter queue, with their TLS policies.
        'AWS::SQS::Queue',
        'AWS::SQS::Queue',
        'AWS::SQS::QueuePolicy',
        'AWS::SQS::QueuePolicy',
      ].sort(),
    );
  });
});

describe('no hard-coded physical names in either stack', () => {
  const NAME_PROPERTIES = ['TableName', 'QueueName', 'Name', 'FunctionName', 'RoleName', 'LogGroupName', 'TopicName', 'DashboardName', 'ScheduleName', 'PolicyName'];

  it('no resource sets a literal name (references to generated names are fine)', () => {
    for (const template of [t.statefulTemplate, t.statelessTemplate]) {
      const resources = template.toJSON().Resources as Record<string, { Type: string; Properties?: Record<string, unknown> }>;
      for (const [id, body] of Object.entries(resources)) {
        for (const property of NAME_PROPERTIES) {
          // IAM inline/default policies need a PolicyName; CDK derives it from the logical id.
          if (property === 'PolicyName' && body.Type === 'AWS::IAM::Policy') continue;
          expect(typeof body.Properties?.[property], `${id}.${property}`).not.toBe('string');
        }
      }
    }
  });
});
