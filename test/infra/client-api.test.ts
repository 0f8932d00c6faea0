/**
 * The client API in the stateless template (infra/client-api; contract, "The client API"): the HTTP
 * API (named from the stack, no CORS, its URL on), its routes (the ten of the contract and
 * `$default`, every one AWS_IAM, all to the one Lambda integration, payload 2.0), the one Lambda
 * permission, the `$default` stage (auto-deployed, throttled, access-logged with no body, header or
 * authorizer field) and its log group; the function (memory, time-out, exact environment, exact
 * IAM statements), the outputs (ApiUrl, ApiExecuteArn and what a caller's policy allows), the
 * dashboard row, and cdk-nag's API Gateway rules met rather than acknowledged.
 */
import { Stack, Validations } from 'aws-cdk-lib';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { API_SERVICE } from '../../functions/shared/metric-names.js';
import { API_ACCESS_LOG_FIELDS, API_BURST_LIMIT, API_CHANGES_ACTIONS, API_CONNECTIONS_ACCESS, API_RATE_LIMIT_PER_SECOND, CLIENT_API_ROUTES } from '../../infra/client-api/client-api.js';
import { CLIENT_API_MEMORY_MB, CLIENT_API_TIMEOUT_SECONDS } from '../../infra/deployment.js';
import { buildApp, fnArn, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
const ids: Record<string, string> = {};
const imports: Record<string, { 'Fn::ImportValue': string }> = {};

beforeAll(() => {
  t = synthTemplates();
  const s = t.statelessTemplate;
  const f = t.statefulTemplate;
  ids.api = logicalId(s, 'AWS::ApiGatewayV2::Api', 'Api');
  ids.fn = logicalId(s, 'AWS::Lambda::Function', 'ClientApiFunction');
  ids.role = logicalId(s, 'AWS::IAM::Role', 'ClientApiRole');
  ids.logs = logicalId(s, 'AWS::Logs::LogGroup', 'ClientApiLogGroup');
  ids.accessLogs = logicalId(s, 'AWS::Logs::LogGroup', 'ApiAccessLogs');
  ids.integration = logicalId(s, 'AWS::ApiGatewayV2::Integration', 'Api');
  const ref = (type: string, prefix: string) => importOf(f, { Ref: logicalId(f, type, prefix) });
  const arn = (type: string, prefix: string) => importOf(f, fnArn(logicalId(f, type, prefix)));
  imports.connectionsTableName = ref('AWS::DynamoDB::Table', 'ConnectionsTable');
  imports.connectionsTableArn = arn('AWS::DynamoDB::Table', 'ConnectionsTable');
  imports.connectionsKeyArn = arn('AWS::KMS::Key', 'ConnectionsKey');
  imports.itemsTableName = ref('AWS::DynamoDB::Table', 'ItemsTable');
  imports.itemsTableArn = arn('AWS::DynamoDB::Table', 'ItemsTable');
  imports.bucketName = ref('AWS::S3::Bucket', 'ItemsBucket');
  imports.controlTableName = ref('AWS::DynamoDB::Table', 'ControlTable');
  imports.controlTableArn = arn('AWS::DynamoDB::Table', 'ControlTable');
  imports.changesTableName = ref('AWS::DynamoDB::Table', 'ChangesTable');
  imports.changesTableArn = arn('AWS::DynamoDB::Table', 'ChangesTable');
  imports.syncQueueUrl = ref('AWS::SQS::Queue', 'SyncQueue');
  imports.syncQueueArn = arn('AWS::SQS::Queue', 'SyncQueue');
  imports.reconcileQueueUrl = ref('AWS::SQS::Queue', 'ReconcileQueue');
  imports.reconcileQueueArn = arn('AWS::SQS::Queue', 'ReconcileQueue');
  imports.eraseQueueUrl = ref('AWS::SQS::Queue', 'EraseQueue');
  imports.eraseQueueArn = arn('AWS::SQS::Queue', 'EraseQueue');
});

afterEach(() => {
  vi.restoreAllMocks();
});

type Resources = Record<string, { Type: string; Properties: Record<string, any> }>;

describe('the HTTP API and its routes', () => {
  it('one HTTP API, named from the stack (no name written out), described, no CORS, its execute-api URL on', () => {
    t.statelessTemplate.resourceCountIs('AWS::ApiGatewayV2::Api', 1);
    expect(resource(t.statelessTemplate, 'AWS::ApiGatewayV2::Api', 'Api').Properties).toEqual({
      Name: { 'Fn::Join': ['', [{ Ref: 'AWS::StackName' }, '-client-api']] },
      Description: 'content-sync client API: connections, ids to sync, items and changes (IAM authorization on every route)',
      ProtocolType: 'HTTP',
    });
    // No REST API, no other API Gateway resource than the API, its routes, integration and stage.
    const types = new Set(Object.values(t.statelessTemplate.toJSON().Resources as Resources).map((r) => r.Type).filter((type) => type.startsWith('AWS::ApiGateway')));
    expect([...types].sort()).toEqual(['AWS::ApiGatewayV2::Api', 'AWS::ApiGatewayV2::Integration', 'AWS::ApiGatewayV2::Route', 'AWS::ApiGatewayV2::Stage']);
  });

  it('the routes are the contract\'s ten and $default', () => {
    expect(CLIENT_API_ROUTES).toEqual([
      'PUT /connections/{connection}',
      'GET /connections/{connection}',
      'GET /connections',
      'POST /connections/{connection}/pause',
      'POST /connections/{connection}/resume',
      'DELETE /connections/{connection}',
      'POST /connections/{connection}/items',
      'GET /connections/{connection}/items/{id}',
      'GET /connections/{connection}/items',
      'GET /connections/{connection}/changes',
    ]);
    const routes = Object.values(t.statelessTemplate.findResources('AWS::ApiGatewayV2::Route') as Resources);
    expect(routes).toHaveLength(11);
    expect(routes.map((route) => route.Properties['RouteKey']).sort()).toEqual([...CLIENT_API_ROUTES, '$default'].sort());
  });

  it('every route is authorized by AWS_IAM (SigV4): none is anonymous, none uses another authorizer', () => {
    const routes = Object.entries(t.statelessTemplate.findResources('AWS::ApiGatewayV2::Route') as Resources);
    for (const [id, route] of routes) {
      expect(route.Properties, id).toEqual({
        ApiId: { Ref: ids.api },
        RouteKey: route.Properties['RouteKey'],
        AuthorizationType: 'AWS_IAM',
        Target: { 'Fn::Join': ['', ['integrations/', { Ref: ids.integration }]] },
      });
    }
    // IAM authorization needs no authorizer resource.
    t.statelessTemplate.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 0);
  });

  it('one integration: the function, AWS_PROXY, payload format 2.0', () => {
    t.statelessTemplate.resourceCountIs('AWS::ApiGatewayV2::Integration', 1);
    expect(resource(t.statelessTemplate, 'AWS::ApiGatewayV2::Integration', 'Api').Properties).toEqual({
      ApiId: { Ref: ids.api },
      IntegrationType: 'AWS_PROXY',
      IntegrationUri: fnArn(ids.fn!),
      PayloadFormatVersion: '2.0',
    });
  });

  it('one Lambda permission: API Gateway may invoke the function from this API only (any stage, method and path)', () => {
    const permissions = Object.values(t.statelessTemplate.findResources('AWS::Lambda::Permission') as Resources);
    expect(permissions.map((permission) => permission.Properties)).toEqual([
      {
        Action: 'lambda:InvokeFunction',
        FunctionName: fnArn(ids.fn!),
        Principal: 'apigateway.amazonaws.com',
        SourceArn: {
          'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':execute-api:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':', { Ref: ids.api }, '/*/*/*']],
        },
      },
    ]);
  });
});

describe('the stage', () => {
  it('$default, auto-deployed, throttled at 50 requests/s with bursts of 100, access-logged to its log group', () => {
    expect([API_RATE_LIMIT_PER_SECOND, API_BURST_LIMIT]).toEqual([50, 100]);
    t.statelessTemplate.resourceCountIs('AWS::ApiGatewayV2::Stage', 1);
    t.statelessTemplate.resourceCountIs('AWS::ApiGatewayV2::Deployment', 0);
    expect(resource(t.statelessTemplate, 'AWS::ApiGatewayV2::Stage', 'ApiStage').Properties).toEqual({
      ApiId: { Ref: ids.api },
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 },
      AccessLogSettings: { DestinationArn: fnArn(ids.accessLogs!), Format: JSON.stringify(API_ACCESS_LOG_FIELDS) },
    });
  });

  it('the access log line: who, what, when and how it ended; only $context fields, none of them a body, a header value or an authorizer claim', () => {
    const format = resource(t.statelessTemplate, 'AWS::ApiGatewayV2::Stage', 'ApiStage').Properties['AccessLogSettings'].Format as string;
    expect(JSON.parse(format)).toEqual({
      requestId: '$context.requestId',
      requestTime: '$context.requestTime',
      httpMethod: '$context.httpMethod',
      routeKey: '$context.routeKey',
      path: '$context.path',
      status: '$context.status',
      responseLength: '$context.responseLength',
      integrationErrorMessage: '$context.integrationErrorMessage',
      caller: '$context.identity.caller',
      userArn: '$context.identity.userArn',
      sourceIp: '$context.identity.sourceIp',
    });
    const variables = format.match(/\$[\w.]+/g) ?? [];
    expect(variables).toHaveLength(11);
    for (const variable of variables) {
      expect(variable).toMatch(/^\$context\./);
      expect(variable).not.toMatch(/body|header|authorizer|authorization|claims|jwt|querystring|input/i);
    }
    expect(format).not.toMatch(/\$input|\$request|\$util|\$stageVariables/);
  });

  it('the access log group keeps its logs logRetentionDays (30 unless given) and goes with the stack', () => {
    const group = resource(t.statelessTemplate, 'AWS::Logs::LogGroup', 'ApiAccessLogs');
    expect(group.Properties).toEqual({ RetentionInDays: 30 });
    expect(group.DeletionPolicy).toBe('Delete');
    const other = synthTemplates({ logRetentionDays: '365' });
    expect(resource(other.statelessTemplate, 'AWS::Logs::LogGroup', 'ApiAccessLogs').Properties).toEqual({ RetentionInDays: 365 });
  });
});

describe('the outputs', () => {
  it('ApiUrl: the $default stage\'s URL; its description says how requests are signed and what a caller is allowed', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown; Description: string }>;
    expect(outputs['ApiUrl']!.Value).toEqual({ 'Fn::Join': ['', ['https://', { Ref: ids.api }, '.execute-api.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }, '/']] });
    expect(outputs['ApiUrl']!.Description).toMatch(/IAM/);
    expect(outputs['ApiUrl']!.Description).toMatch(/SigV4 \(service execute-api\)/);
    expect(outputs['ApiUrl']!.Description).toMatch(/execute-api:Invoke on ApiExecuteArn/);
  });

  it('ApiExecuteArn: arn:<partition>:execute-api:<region>:<account>:<api id>/*, every stage, method and route; its description says execute-api:Invoke', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown; Description: string }>;
    expect(outputs['ApiExecuteArn']!.Value).toEqual({
      'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':execute-api:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':', { Ref: ids.api }, '/*']],
    });
    expect(outputs['ApiExecuteArn']!.Description).toMatch(/allow "execute-api:Invoke" on this ARN/);
  });

  it('ClientApiFunctionName: the function', () => {
    const outputs = t.statelessTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs['ClientApiFunctionName']!.Value).toEqual({ Ref: ids.fn });
  });
});

describe('the function', () => {
  it('Node.js 22, arm64, 256 MB, 10 s (inside API Gateway\'s 30 s), no tracing, own log group and role (no managed policies)', () => {
    expect([CLIENT_API_MEMORY_MB, CLIENT_API_TIMEOUT_SECONDS]).toEqual([256, 10]);
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties).toMatchObject({
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      MemorySize: 256,
      Timeout: 10,
      LoggingConfig: { LogGroup: { Ref: ids.logs } },
      Role: fnArn(ids.role!),
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

  it('environment: exactly the tables, the key, the bucket, the three queues, freshnessHours and the erase\'s safety wait', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', ids.fn!);
    expect(fn.Properties['Environment'].Variables).toEqual({
      [ENV.connectionsTableName]: imports.connectionsTableName,
      [ENV.connectionsKeyArn]: imports.connectionsKeyArn,
      [ENV.itemsTableName]: imports.itemsTableName,
      [ENV.itemsBucketName]: imports.bucketName,
      // The changes feed (each change row carries its own expiry).
      [ENV.changesTableName]: imports.changesTableName,
      [ENV.controlTableName]: imports.controlTableName,
      [ENV.syncQueueUrl]: imports.syncQueueUrl,
      [ENV.reconcileQueueUrl]: imports.reconcileQueueUrl,
      [ENV.eraseQueueUrl]: imports.eraseQueueUrl,
      [ENV.freshnessHours]: '24',
      // The token cache (60 s) + the sync's time-out (60 s) + a 30 s margin.
      [ENV.eraseSettleSeconds]: '150',
      POWERTOOLS_SERVICE_NAME: API_SERVICE,
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: '--enable-source-maps',
    });
    expect([ENV.syncQueueUrl, ENV.eraseQueueUrl, ENV.eraseSettleSeconds, API_SERVICE]).toEqual(['SYNC_QUEUE_URL', 'ERASE_QUEUE_URL', 'ERASE_SETTLE_SECONDS', 'client-api']);
  });

  it('FRESHNESS_HOURS follows freshnessHours (0 too); ERASE_SETTLE_SECONDS follows the sync\'s time-out (syncBatchSize)', () => {
    const other = synthTemplates({ freshnessHours: '0', syncBatchSize: '1000' });
    const variables = resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ClientApiFunction').Properties['Environment'].Variables;
    expect(variables[ENV.freshnessHours]).toBe('0');
    expect(resource(other.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction').Properties['Timeout']).toBe(600);
    expect(variables[ENV.eraseSettleSeconds]).toBe(String(60 + 600 + 30));
  });

  it('IAM: own logs; get, list and update connections (the key through DynamoDB, and directly for the tokens it seals); read items and their objects; read changes; the reconcile cursor; send to the three queues; nothing else', () => {
    expect(API_CONNECTIONS_ACCESS.actions).toEqual(['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem']);
    expect(API_CHANGES_ACTIONS).toEqual(['dynamodb:GetItem', 'dynamodb:Query']);
    expect(roleStatements(t.statelessTemplate, ids.role!)).toEqual([
      { Sid: 'WriteOwnLogs', Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: fnArn(ids.logs!) },
      // No PutItem, no DeleteItem (test/infra/connections.test.ts).
      { Sid: 'Connections', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem'], Resource: imports.connectionsTableArn },
      {
        Sid: 'ConnectionsKey',
        Effect: 'Allow',
        Action: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'],
        Resource: imports.connectionsKeyArn,
        Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } } },
      },
      {
        Sid: 'ConnectionTokens',
        Effect: 'Allow',
        Action: ['kms:Decrypt', 'kms:GenerateDataKey'],
        Resource: imports.connectionsKeyArn,
        Condition: { 'ForAllValues:StringEquals': { 'kms:EncryptionContextKeys': ['connection'] }, Null: { 'kms:EncryptionContextKeys': 'false' } },
      },
      { Sid: 'ReadItems', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Query'], Resource: imports.itemsTableArn },
      {
        Sid: 'ReadItemObjects',
        Effect: 'Allow',
        Action: 's3:GetObject',
        Resource: { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] },
      },
      // The changes feed: a connection's head row, its changes from a cursor. It writes nothing there.
      { Sid: 'ReadChanges', Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Query'], Resource: imports.changesTableArn },
      {
        Sid: 'ReadReconcileCursor',
        Effect: 'Allow',
        Action: 'dynamodb:GetItem',
        Resource: imports.controlTableArn,
        Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['reconcile-cursor'] } },
      },
      { Sid: 'UsersLane', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.syncQueueArn },
      { Sid: 'BackgroundLane', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.reconcileQueueArn },
      { Sid: 'RequestErase', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.eraseQueueArn },
    ]);
  });
});

describe('operations', () => {
  it('a dashboard row: the API\'s requests, 4xx, 5xx and latency; the function\'s invocations, errors, throttles and duration', () => {
    type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][] } };
    const dashboard = Object.values(t.statelessTemplate.findResources('AWS::CloudWatch::Dashboard'))[0]!;
    const body = (dashboard.Properties.DashboardBody['Fn::Join'][1] as unknown[]).map((part) => (typeof part === 'string' ? part : 'TOKEN')).join('');
    const widgets = JSON.parse(body).widgets as Widget[];
    const titled = (title: string) => {
      const widget = widgets.find((w) => w.properties.title === title);
      expect(widget, title).toBeDefined();
      return widget!;
    };
    const names = (widget: Widget) => widget.properties.metrics!.map((m) => m.filter((part) => typeof part === 'string').slice(0, 2).join(' '));
    const requests = titled('Client API requests');
    expect(names(requests)).toEqual(['AWS/ApiGateway Count', 'AWS/ApiGateway 4xx', 'AWS/ApiGateway 5xx', 'AWS/ApiGateway Latency']);
    // Each of the API's metrics is of this API's $default stage.
    for (const metric of requests.properties.metrics!) expect(metric.slice(2, 6)).toEqual(['ApiId', 'TOKEN', 'Stage', '$default']);
    const fn = titled('Client API function');
    expect(names(fn)).toEqual(['AWS/Lambda Invocations', 'AWS/Lambda Errors', 'AWS/Lambda Throttles', 'AWS/Lambda Duration']);
    expect(new Set([requests.y, fn.y]).size).toBe(1);
    expect(requests.width + fn.width).toBe(24);
  });
});

describe('cdk-nag', () => {
  /** AwsSolutions' findings on the API's resources, with every acknowledgement switched off. */
  function apiFindings(change?: (stack: Stack) => void): string[] {
    vi.spyOn(Validations.prototype, 'acknowledge').mockImplementation(() => undefined);
    const built = buildApp();
    change?.(built.stateless);
    return new AwsSolutionsChecks(built.app)
      .validateScope(built.stateless)
      .violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} ${r.constructPath ?? ''}`))
      .filter((finding) => / ContentSyncStateless\/Api/.test(finding));
  }

  it('the API Gateway rules are met, not acknowledged: IAM authorization on every route (APIG4), access logs on (APIG1)', () => {
    expect(apiFindings()).toEqual([]);
  });

  it('a route without authorization would be a finding', () => {
    const findings = apiFindings((stack) => {
      const api = stack.node.findChild('Api') as apigwv2.HttpApi;
      const route = api.node.findAll().find((child) => child instanceof apigwv2.CfnRoute && (child as apigwv2.CfnRoute).routeKey === 'GET /connections') as apigwv2.CfnRoute;
      route.authorizationType = 'NONE';
    });
    expect(findings.some((finding) => finding.startsWith('AwsSolutions-APIG4 '))).toBe(true);
  });
});
