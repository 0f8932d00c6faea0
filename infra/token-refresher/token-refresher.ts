/**
 * The token refresher (docs/connections.md, "Refresh"): the function that keeps the connections'
 * access tokens fresh in the connections table (infra/connections, the stateful half), scanning it
 * and refreshing, a few at a time, the connections whose token is due, each getToken paced by the
 * token endpoint's pace (its rows in the control table); its permissions on that table and its key
 * (the tokens sealed under it), and on its pace rows; its EventBridge Scheduler schedule (every 5
 * minutes, or every tokenRefreshMinutes when shorter, {"trigger":"schedule"}); its output; its
 * alarms and its dashboard graphs (./operations.ts). Memory, time-out, environment and the
 * schedule's numbers come from infra/deployment.ts.
 *
 * Nothing runs at deploy time: connections are added with the operator CLI after the deploy
 * (`npm run connections -- add`), and the first scheduled run, or the item sync on demand,
 * refreshes them.
 *
 * Added to the given stack (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, Duration, type Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import { REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';
import type { ConnectionsResources } from '../connections/connections-table.js';
import { CONNECTION_TOKEN_ACTIONS, grantConnections, grantConnectionTokens, type ConnectionsAccess } from '../connections/grants.js';
import { acknowledgeFunctionFindings, addSchedulerInvokeRole, ContentSyncFunction, functionProps } from '../constructs/content-sync-function.js';
import type { ContentSyncConfig } from '../context.js';
import {
  REFRESHER_TIMEOUT_SECONDS,
  refresherDeployment,
  scheduleDeliveryDeployment,
  scheduleDeployment,
  type ResourceNames,
} from '../deployment.js';
import { tokenRefresherOperations, type TokenRefresherOperations } from './operations.js';

/** infra/deployment.ts, REFRESHER_TIMEOUT_SECONDS. */
export const REFRESHER_TIMEOUT = Duration.seconds(REFRESHER_TIMEOUT_SECONDS);

/**
 * The refresher on the connections table: Scan (every connection, each run), GetItem (one row read
 * again), UpdateItem (the lease, the new tokens and the health, each a conditional update). No
 * PutItem or DeleteItem: connections are created and removed by the operator CLI only.
 */
export const REFRESHER_CONNECTIONS_ACCESS: ConnectionsAccess = {
  actions: ['dynamodb:GetItem', 'dynamodb:Scan', 'dynamodb:UpdateItem'],
};

/**
 * The token endpoint's pace rows in the control table (functions/shared/connections/token-pace.ts,
 * `provider-pace#token#<client id>`; the infra tests check both agree): the refresher may read and
 * write those rows only. Written out here so the CDK app does not load the functions' AWS SDK adapters.
 */
export const TOKEN_PACE_ROWS = 'provider-pace#token#*';

/** The refresher on the control table: GetItem and PutItem (a draw, conditional on the row's version) of its pace rows. */
export const REFRESHER_TOKEN_PACE_ACTIONS: readonly string[] = ['dynamodb:GetItem', 'dynamodb:PutItem'];

export interface TokenRefresherProps {
  readonly config: ContentSyncConfig;
  /** What its environment names (infra/deployment.ts, refresherDeployment). */
  readonly names: ResourceNames;
  /** The connections table and its key (infra/connections). */
  readonly connections: ConnectionsResources;
  /** The control table (infra/storage): the token endpoint's pace rows. */
  readonly controlTable: dynamodb.ITable;
}

export interface TokenRefresher extends TokenRefresherOperations {
  readonly fn: ContentSyncFunction;
}

export function addTokenRefresher(stack: Stack, props: TokenRefresherProps): TokenRefresher {
  const { config } = props;
  const refresher = new ContentSyncFunction(stack, 'TokenRefresher', {
    entry: 'functions/token-refresher/handler.ts',
    serviceName: REFRESHER_SERVICE,
    description: 'content-sync: refreshes the access tokens of the connections in the connections table',
    logLevel: config.logLevel,
    logRetentionDays: config.logRetentionDays,
    stage: config.stage,
    ...functionProps(refresherDeployment(config, props.names)),
  });
  grantConnections(refresher, props.connections, REFRESHER_CONNECTIONS_ACCESS);
  // Opens a connection's refresh token, seals the new tokens (infra/connections/grants.ts).
  grantConnectionTokens(refresher, props.connections, CONNECTION_TOKEN_ACTIONS);
  refresher.allow({
    sid: 'TokenPace',
    actions: [...REFRESHER_TOKEN_PACE_ACTIONS],
    resources: [props.controlTable.tableArn],
    conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [TOKEN_PACE_ROWS] } },
  });
  acknowledgeFunctionFindings(refresher);

  addRefreshSchedule(stack, refresher, config);

  new CfnOutput(stack, 'TokenRefresherFunctionName', {
    description: 'Refreshes the connections\' access tokens every tokenRefreshMinutes; its logs show each run',
    value: refresher.function.functionName,
  });
  return { fn: refresher, ...tokenRefresherOperations(refresher.function, config) };
}

/** EventBridge Scheduler runs the refresher every 5 minutes (or `tokenRefreshMinutes` when shorter) with {"trigger":"schedule"}. */
function addRefreshSchedule(stack: Stack, refresher: ContentSyncFunction, config: ContentSyncConfig): void {
  const runMinutes = scheduleDeployment(config).refresherEveryMinutes;
  const delivery = scheduleDeliveryDeployment(config).refresher;
  // Our own role for the schedule, so its one finding can be acknowledged on it.
  const scheduleRole = addSchedulerInvokeRole(stack, 'TokenRefreshScheduleRole', refresher, 'token refresher');
  new scheduler.Schedule(stack, 'TokenRefreshSchedule', {
    description: `content-sync: refresh the connections' access tokens due, every ${runMinutes} min`,
    schedule: scheduler.ScheduleExpression.rate(Duration.minutes(runMinutes)),
    target: new schedulerTargets.LambdaInvoke(refresher.function, {
      input: scheduler.ScheduleTargetInput.fromObject({ trigger: 'schedule' }),
      // A run the next one supersedes is not worth delivering late.
      maxEventAge: Duration.minutes(delivery.maxEventAgeMinutes),
      retryAttempts: delivery.retryAttempts,
      role: scheduleRole,
    }),
  });
}
