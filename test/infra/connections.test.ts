/**
 * The connections in both templates (docs/connections.md, "Where credentials live"): the
 * connections table (key schema, on demand, PITR, its stream of new and old images, deletion
 * protection, retained) under the customer-managed key (rotation on, retained, SSE with its ARN),
 * their outputs; each function's exact statements on the table and the key (the refresher reads
 * and updates, the item sync gets and updates, the change-events function updates two attributes
 * only and reads the stream, the changes writer gets two attributes only, the client API gets,
 * lists and updates, the eraser gets, updates and deletes, the reconciler nothing), and the key
 * called directly only by the three that seal or
 * open tokens, only for a context of `connection` alone; the environment that names the table and
 * the key.
 */
import { Stack } from 'aws-cdk-lib';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { CONNECTIONS_TABLE_PARTITION_KEY } from '../../infra/connections/connections-table.js';
import { CONNECTION_TOKEN_ACTIONS, CONNECTION_TOKEN_CONDITIONS } from '../../infra/connections/grants.js';
import { CHANGE_EVENTS_CONNECTION_ATTRIBUTES } from '../../infra/change-events/change-events.js';
import { CHANGES_WRITER_CONNECTION_ATTRIBUTES } from '../../functions/changes-writer/adapters/dynamodb-erase-state.js';
import { fnArn, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
const ids: Record<string, string> = {};
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates();
  const f = t.statefulTemplate;
  ids.table = logicalId(f, 'AWS::DynamoDB::Table', 'ConnectionsTable');
  ids.key = logicalId(f, 'AWS::KMS::Key', 'ConnectionsKey');
  imports.tableName = importOf(f, { Ref: ids.table });
  imports.tableArn = importOf(f, fnArn(ids.table));
  imports.keyArn = importOf(f, fnArn(ids.key));
  imports.streamArn = importOf(f, { 'Fn::GetAtt': [ids.table, 'StreamArn'] });
});

/** The key statement every role that may use the table gets: through DynamoDB of the stack's region only. */
const keyStatement = (action: string | string[] = ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey']) => ({
  Sid: 'ConnectionsKey',
  Effect: 'Allow',
  Action: action,
  Resource: imports.keyArn,
  Condition: {
    StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } },
  },
});

/**
 * The statement of the roles that seal or open tokens: the key called directly (not through
 * DynamoDB), a data key or a decrypt only, only with the encryption context `connection` alone.
 */
const tokensStatement = () => ({
  Sid: 'ConnectionTokens',
  Effect: 'Allow',
  Action: ['kms:Decrypt', 'kms:GenerateDataKey'],
  Resource: imports.keyArn,
  Condition: {
    'ForAllValues:StringEquals': { 'kms:EncryptionContextKeys': ['connection'] },
    Null: { 'kms:EncryptionContextKeys': 'false' },
  },
});

/** The statements of `rolePrefix`'s policy that name the connections table or its key. */
function connectionStatements(rolePrefix: string): unknown[] {
  const roleId = logicalId(t.statelessTemplate, 'AWS::IAM::Role', rolePrefix);
  return roleStatements(t.statelessTemplate, roleId).filter((statement) => {
    const text = JSON.stringify(statement);
    return text.includes(imports.tableArn!['Fn::ImportValue']) || text.includes(imports.keyArn!['Fn::ImportValue']);
  });
}

describe('the connections table and its key (stateful)', () => {
  it('the table: partition key connection (string) only, on demand, PITR, a stream of new and old images, deletion protection, retained, no name', () => {
    const table = resource(t.statefulTemplate, 'AWS::DynamoDB::Table', 'ConnectionsTable');
    expect(CONNECTIONS_TABLE_PARTITION_KEY).toBe('connection');
    expect(table.Properties).toEqual({
      KeySchema: [{ AttributeName: 'connection', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'connection', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      // The account lifecycle events (test/infra/change-events.test.ts).
      StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS', KMSMasterKeyId: fnArn(ids.key!) },
      DeletionProtectionEnabled: true,
    });
    expect(table.DeletionPolicy).toBe('Retain');
    expect(table.UpdateReplacePolicy).toBe('Retain');
  });

  it('the stream is the stack\'s ConnectionsResources.streamArn, exported to the functions\' stack, read by the change-events function only', () => {
    expect(Stack.of(t.stateful).resolve(t.stateful.connections.streamArn)).toEqual({ 'Fn::GetAtt': [ids.table, 'StreamArn'] });
    const readers = Object.entries(t.statelessTemplate.findResources('AWS::IAM::Policy'))
      .filter(([, body]) => JSON.stringify(body.Properties).includes(imports.streamArn!['Fn::ImportValue']))
      .map(([id]) => id.replace(/[0-9A-F]{8}$/, ''));
    expect(readers).toEqual(['ChangeEventsRoleDefaultPolicy']);
  });

  it('the key: customer-managed, symmetric, rotation on, described, retained; its policy leaves access to IAM in the account, grants to AWS services', () => {
    t.statefulTemplate.resourceCountIs('AWS::KMS::Key', 1);
    t.statefulTemplate.resourceCountIs('AWS::KMS::Alias', 0);
    const key = resource(t.statefulTemplate, 'AWS::KMS::Key', 'ConnectionsKey');
    expect(key.Properties['EnableKeyRotation']).toBe(true);
    expect(key.Properties['Description']).toMatch(/connections table/);
    expect(key.Properties).not.toHaveProperty('KeySpec');
    expect(key.Properties).not.toHaveProperty('PendingWindowInDays');
    expect(key.DeletionPolicy).toBe('Retain');
    expect(key.UpdateReplacePolicy).toBe('Retain');
    const account = { AWS: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':root']] } };
    // Grants: test/infra/key-policy.test.ts (CT.KMS.PR.3).
    expect(key.Properties['KeyPolicy']).toEqual({
      Version: '2012-10-17',
      Statement: [
        { Sid: 'AccountIamPolicies', Effect: 'Allow', NotAction: 'kms:CreateGrant', Principal: account, Resource: '*' },
        {
          Sid: 'AccountGrantsForAwsResources',
          Effect: 'Allow',
          Action: 'kms:CreateGrant',
          Principal: account,
          Resource: '*',
          Condition: { Bool: { 'kms:GrantIsForAWSResource': true } },
        },
        {
          Sid: 'DenyGrantsNotForAwsServices',
          Effect: 'Deny',
          Action: 'kms:CreateGrant',
          Principal: { AWS: '*' },
          Resource: '*',
          Condition: { BoolIfExists: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' } },
        },
      ],
    });
  });

  it('outputs: ConnectionsTableName and ConnectionsKeyArn', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown; Description?: string }>;
    expect(outputs['ConnectionsTableName']!.Value).toEqual({ Ref: ids.table });
    expect(outputs['ConnectionsKeyArn']!.Value).toEqual(fnArn(ids.key!));
  });
});

describe('who may do what on the connections table (stateless)', () => {
  it('the token grant: decrypt and generate data keys, under a context whose only key is connection (and that has one)', () => {
    expect(CONNECTION_TOKEN_ACTIONS).toEqual(['kms:Decrypt', 'kms:GenerateDataKey']);
    expect(CONNECTION_TOKEN_CONDITIONS).toEqual({
      'ForAllValues:StringEquals': { 'kms:EncryptionContextKeys': ['connection'] },
      Null: { 'kms:EncryptionContextKeys': 'false' },
    });
  });

  it('token refresher: GetItem, Scan and UpdateItem on the table; the key through DynamoDB; the tokens it opens and seals', () => {
    expect(connectionStatements('TokenRefresherRole')).toEqual([
      { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem'], Resource: imports.tableArn },
      keyStatement(),
      tokensStatement(),
    ]);
  });

  it('item sync: GetItem and UpdateItem on the table (tokens on demand, lastUsedAt); the key through DynamoDB; the tokens it opens and seals', () => {
    expect(connectionStatements('ItemSyncRole')).toEqual([
      { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'], Resource: imports.tableArn },
      keyStatement(),
      tokensStatement(),
    ]);
  });

  it('client API: GetItem, Scan and UpdateItem on the table (no PutItem, no DeleteItem); the key through DynamoDB; the tokens it seals', () => {
    expect(connectionStatements('ClientApiRole')).toEqual([
      { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem'], Resource: imports.tableArn },
      keyStatement(),
      tokensStatement(),
    ]);
  });

  it('eraser: GetItem, UpdateItem and DeleteItem on the table; the key through DynamoDB only (it never opens a token)', () => {
    expect(connectionStatements('ConnectionEraserRole')).toEqual([
      { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'], Resource: imports.tableArn },
      keyStatement(),
    ]);
  });

  it('change events: UpdateItem of connection, idsKnown and lastWriteAt only, returning nothing; the key through DynamoDB', () => {
    expect(CHANGE_EVENTS_CONNECTION_ATTRIBUTES).toEqual(['connection', 'idsKnown', 'lastWriteAt']);
    expect(connectionStatements('ChangeEventsRole')).toEqual([
      {
        Sid: 'Connections',
        Effect: 'Allow',
        Action: 'dynamodb:UpdateItem',
        Resource: imports.tableArn,
        Condition: {
          'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['connection', 'idsKnown', 'lastWriteAt'] },
          StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
        },
      },
      keyStatement(),
    ]);
  });

  it('changes writer: GetItem of connection and erase only, as a projection (no token, no status); the key through DynamoDB, to decrypt only (a read)', () => {
    // The attributes its GetItem projects are the ones the role may read (functions/changes-writer/adapters/dynamodb-erase-state.ts).
    expect(CHANGES_WRITER_CONNECTION_ATTRIBUTES).toEqual(['connection', 'erase']);
    expect(connectionStatements('ChangesWriterRole')).toEqual([
      {
        Sid: 'Connections',
        Effect: 'Allow',
        Action: 'dynamodb:GetItem',
        Resource: imports.tableArn,
        Condition: {
          'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['connection', 'erase'] },
          StringEqualsIfExists: { 'dynamodb:Select': 'SPECIFIC_ATTRIBUTES' },
        },
      },
      keyStatement('kms:Decrypt'),
    ]);
  });

  it('reconciler: nothing on the table or the key', () => {
    expect(connectionStatements('ReconcilerRole')).toEqual([]);
  });

  it('no other role and no resource policy names the table or the key', () => {
    const template = t.statelessTemplate.toJSON();
    const naming = Object.entries(template.Resources as Record<string, { Type: string; Properties: unknown }>)
      .filter(([, body]) => body.Type === 'AWS::IAM::Policy' || body.Type === 'AWS::IAM::Role')
      .filter(([, body]) => {
        const text = JSON.stringify(body.Properties);
        return text.includes(imports.tableArn!['Fn::ImportValue']) || text.includes(imports.keyArn!['Fn::ImportValue']);
      })
      .map(([id]) => id.replace(/[0-9A-F]{8}$/, ''));
    expect(naming.sort()).toEqual([
      'ChangeEventsRoleDefaultPolicy',
      'ChangesWriterRoleDefaultPolicy',
      'ClientApiRoleDefaultPolicy',
      'ConnectionEraserRoleDefaultPolicy',
      'ItemSyncRoleDefaultPolicy',
      'TokenRefresherRoleDefaultPolicy',
    ]);
    // The key called directly (the ConnectionTokens statement): the three that seal or open tokens only.
    const direct = Object.entries(template.Resources as Record<string, { Type: string; Properties: { PolicyDocument?: { Statement: Array<{ Sid?: string }> } } }>)
      .filter(([, body]) => body.Type === 'AWS::IAM::Policy' && body.Properties.PolicyDocument!.Statement.some((statement) => statement.Sid === 'ConnectionTokens'))
      .map(([id]) => id.replace(/[0-9A-F]{8}$/, ''));
    expect(direct.sort()).toEqual(['ClientApiRoleDefaultPolicy', 'ItemSyncRoleDefaultPolicy', 'TokenRefresherRoleDefaultPolicy']);
    // The key's policy is the stateful stack's own and names no role: access is granted in IAM.
    const keyPolicy = JSON.stringify(resource(t.statefulTemplate, 'AWS::KMS::Key', 'ConnectionsKey').Properties['KeyPolicy']);
    expect(keyPolicy).not.toMatch(/Role/);
  });
});

describe('the environment that names the connections table and its key', () => {
  const variables = (prefix: string) => resource(t.statelessTemplate, 'AWS::Lambda::Function', prefix).Properties['Environment'].Variables as Record<string, unknown>;

  it('CONNECTIONS_TABLE_NAME is the table name on every function but the reconciler', () => {
    for (const prefix of ['TokenRefresherFunction', 'ItemSyncFunction', 'ChangeEventsFunction', 'ChangesWriterFunction', 'ClientApiFunction', 'ConnectionEraserFunction']) {
      expect(variables(prefix)[ENV.connectionsTableName], prefix).toEqual(imports.tableName);
    }
    expect(variables('ReconcilerFunction')).not.toHaveProperty(ENV.connectionsTableName);
  });

  it('CONNECTIONS_KEY_ARN is the key ARN on the three that seal or open tokens only', () => {
    expect(ENV.connectionsKeyArn).toBe('CONNECTIONS_KEY_ARN');
    for (const prefix of ['TokenRefresherFunction', 'ItemSyncFunction', 'ClientApiFunction']) {
      expect(variables(prefix)[ENV.connectionsKeyArn], prefix).toEqual(imports.keyArn);
    }
    for (const prefix of ['ChangeEventsFunction', 'ChangesWriterFunction', 'ConnectionEraserFunction', 'ReconcilerFunction']) {
      expect(variables(prefix), prefix).not.toHaveProperty(ENV.connectionsKeyArn);
    }
  });
});
