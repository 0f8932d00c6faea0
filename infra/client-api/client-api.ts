/**
 * The client API (contract, "The client API"; docs/client-api.md): an API Gateway HTTP API for the
 * client application's own code, every route of it (the ten of CLIENT_API_ROUTES and `$default`,
 * which takes any other request to the function, answered 404 in the contract's error shape)
 * authorized by IAM (SigV4), none anonymous; one Lambda function behind every route (payload 2.0);
 * its `$default` stage, throttled (infra/deployment.ts, apiStageDeployment) and access-logged to a
 * log group of its own (API_ACCESS_LOG_FIELDS: no body, no header value, no authorizer claim); the
 * function's permissions; its outputs, the URL and the ARN a caller's IAM policy allows
 * `execute-api:Invoke` on; its dashboard row (./operations.ts). Memory, time-out and environment
 * come from infra/deployment.ts (apiDeployment).
 *
 * HTTP APIs have no resource policy: who may call is decided by the callers' own IAM policies, in
 * this account (a role of another account calls through a role of this one it may assume).
 *
 * Added to the given stack (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CLIENT_API_LAZY_MODULES } from '../../functions/client-api/lazy-modules.js';
import { Aws, CfnOutput, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as logs from 'aws-cdk-lib/aws-logs';
import { API_SERVICE } from '../../functions/shared/metric-names.js';
import type { ConnectionsResources } from '../connections/connections-table.js';
import { CONNECTION_TOKEN_ACTIONS, grantConnections, grantConnectionTokens, type ConnectionsAccess } from '../connections/grants.js';
import { acknowledgeFunctionFindings, ContentSyncFunction, functionProps } from '../constructs/content-sync-function.js';
import type { WorkQueueResources } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';
import { apiDeployment, apiStageDeployment, type ResourceNames } from '../deployment.js';
import { RECONCILE_CURSOR_ROW } from '../reconciler/reconciler.js';
import { grantReadItemObjects } from '../storage/items-bucket.js';
import type { StorageResources } from '../storage/storage.js';
import { clientApiOperations, type ClientApiOperations } from './operations.js';

export { API_BURST_LIMIT, API_RATE_LIMIT_PER_SECOND } from '../deployment.js';

/** The routes (method and path, API Gateway's route keys), each to the function, each AWS_IAM. */
export const CLIENT_API_ROUTES: readonly string[] = [
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
];

/**
 * One JSON line per request in the access log group: who called (the IAM identity and address),
 * what (method, route, path), when, and how it ended (status, length, the integration's error).
 * Only `$context` variables that carry no body and no header value: HTTP API access logs cannot
 * hold a body at all, and no `$context.authorizer` claim is named.
 */
export const API_ACCESS_LOG_FIELDS: Readonly<Record<string, string>> = {
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
};

/**
 * The client API on the connections table: GetItem (a view), Scan (the list), UpdateItem (put,
 * pause, resume, remove, ask for an erase: every write is a conditional update). No PutItem, no
 * DeleteItem: only the eraser deletes a row.
 */
export const API_CONNECTIONS_ACCESS: ConnectionsAccess = {
  actions: ['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem'],
};

export interface ClientApiProps {
  readonly config: ContentSyncConfig;
  /** What its environment names (infra/deployment.ts, apiDeployment). */
  readonly names: ResourceNames;
  readonly storage: StorageResources;
  /** The connections table and its key (infra/connections). */
  readonly connections: ConnectionsResources;
  /** The users' lane (infra/item-sync). */
  readonly syncQueues: WorkQueueResources;
  /** The background lane (infra/reconciler). */
  readonly reconcileQueues: WorkQueueResources;
  /** The erase queue (infra/connection-eraser). */
  readonly eraseQueues: WorkQueueResources;
}

export interface ClientApi extends ClientApiOperations {
  readonly fn: ContentSyncFunction;
  readonly api: apigwv2.HttpApi;
  readonly stage: apigwv2.HttpStage;
  readonly accessLogs: logs.LogGroup;
}

export function addClientApi(stack: Stack, props: ClientApiProps): ClientApi {
  const { config } = props;
  const fn = new ContentSyncFunction(stack, 'ClientApi', {
    entry: 'functions/client-api/handler.ts',
    serviceName: API_SERVICE,
    lazyModules: CLIENT_API_LAZY_MODULES,
    description: 'content-sync: the client API (connections, ids to sync, items, changes), behind API Gateway with IAM authorization',
    logLevel: config.logLevel,
    logRetentionDays: config.logRetentionDays,
    stage: config.stage,
    ...functionProps(apiDeployment(config, props.names)),
  });
  grantClientApi(fn, props);
  acknowledgeFunctionFindings(fn);

  const { api, stage, accessLogs } = addHttpApi(stack, fn, config.logRetentionDays);

  new CfnOutput(stack, 'ApiUrl', {
    description:
      'Client API URL: every route is authorized by IAM, so requests are signed with SigV4 (service execute-api) by a role allowed execute-api:Invoke on ApiExecuteArn (docs/client-api.md)',
    value: stage.url,
  });
  new CfnOutput(stack, 'ApiExecuteArn', {
    description:
      'Client API ARN for IAM policies: allow "execute-api:Invoke" on this ARN in the identity policy of the application\'s role (this account) to let it call every route',
    value: stack.formatArn({ service: 'execute-api', resource: api.apiId, resourceName: '*' }),
  });
  new CfnOutput(stack, 'ClientApiFunctionName', {
    description: 'The client API\'s function: one log line per request (method, route, status, connection, duration)',
    value: fn.function.functionName,
  });
  return { fn, api, stage, accessLogs, ...clientApiOperations({ fn: fn.function, stage }) };
}

/**
 * The client API on the changes table: GetItem (a connection's head row) and Query (its changes, in
 * order from a cursor). It writes nothing there.
 */
export const API_CHANGES_ACTIONS: readonly string[] = ['dynamodb:GetItem', 'dynamodb:Query'];

/**
 * The function's permissions: the connections (the table, the key through DynamoDB, and the key
 * directly for the tokens it seals), the items and their objects (read; Query: the snapshot), the
 * changes feed (read), the reconciler's cursor row (read), and send on the three queues it feeds
 * (SendMessageBatch is authorised by sqs:SendMessage; SQS-managed encryption needs no KMS permission).
 */
function grantClientApi(fn: ContentSyncFunction, props: ClientApiProps): void {
  const { storage } = props;
  grantConnections(fn, props.connections, API_CONNECTIONS_ACCESS);
  // Seals a connection's refresh token when it is put, opens the stored one (infra/connections/grants.ts).
  grantConnectionTokens(fn, props.connections, CONNECTION_TOKEN_ACTIONS);
  fn.allow({ sid: 'ReadItems', actions: ['dynamodb:GetItem', 'dynamodb:Query'], resources: [storage.table.tableArn] });
  grantReadItemObjects(fn.role, storage.itemsBucket);
  fn.allow({ sid: 'ReadChanges', actions: [...API_CHANGES_ACTIONS], resources: [storage.changesTable.tableArn] });
  fn.allow({
    sid: 'ReadReconcileCursor',
    actions: ['dynamodb:GetItem'],
    resources: [storage.controlTable.tableArn],
    conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [RECONCILE_CURSOR_ROW] } },
  });
  fn.allow({ sid: 'UsersLane', actions: ['sqs:SendMessage'], resources: [props.syncQueues.queue.queueArn] });
  fn.allow({ sid: 'BackgroundLane', actions: ['sqs:SendMessage'], resources: [props.reconcileQueues.queue.queueArn] });
  fn.allow({ sid: 'RequestErase', actions: ['sqs:SendMessage'], resources: [props.eraseQueues.queue.queueArn] });
}

/** The HTTP API, its routes (AWS_IAM each), its throttled `$default` stage and its access log group. */
function addHttpApi(stack: Stack, fn: ContentSyncFunction, logRetentionDays: number): Pick<ClientApi, 'api' | 'stage' | 'accessLogs'> {
  const authorizer = new HttpIamAuthorizer();
  // One Lambda permission for the whole API (execute-api ARN <api>/*/*/*), not one per route: every
  // route, `$default` included, reaches the same function.
  const integration = new HttpLambdaIntegration('ClientApiIntegration', fn.function, { scopePermissionToRoute: false });
  const api = new apigwv2.HttpApi(stack, 'Api', {
    // An HTTP API requires a name; it is derived from the stack's, never written out here.
    apiName: `${Aws.STACK_NAME}-client-api`,
    description: 'content-sync client API: connections, ids to sync, items and changes (IAM authorization on every route)',
    // The stage below, throttled and access-logged.
    createDefaultStage: false,
    // `$default`: any other request reaches the function (a 404 in the contract's error shape), signed all the same.
    defaultIntegration: integration,
    defaultAuthorizer: authorizer,
  });
  for (const routeKey of CLIENT_API_ROUTES) {
    const [method, path] = routeKey.split(' ') as [keyof typeof apigwv2.HttpMethod, string];
    api.addRoutes({ path, methods: [apigwv2.HttpMethod[method]], integration, authorizer });
  }

  const accessLogs = new logs.LogGroup(stack, 'ApiAccessLogs', {
    retention: logRetentionDays as logs.RetentionDays,
    // Stateless, like the functions' logs: they expire anyway.
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const throttle = apiStageDeployment();
  const stage = new apigwv2.HttpStage(stack, 'ApiStage', {
    httpApi: api,
    stageName: '$default',
    autoDeploy: true,
    throttle: { rateLimit: throttle.rateLimitPerSecond, burstLimit: throttle.burstLimit },
    accessLogSettings: {
      destination: new apigwv2.LogGroupLogDestination(accessLogs),
      format: AccessLogFormat.custom(JSON.stringify(API_ACCESS_LOG_FIELDS)),
    },
  });
  return { api, stage, accessLogs };
}
