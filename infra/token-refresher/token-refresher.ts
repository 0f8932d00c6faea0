/**
 * The token refresher (its secrets, the stateful half: ./token-secrets.ts): the function that
 * exchanges the refresh token for a fresh access token, reading the credentials and writing both
 * secrets; its EventBridge Scheduler schedule (every tokenRefreshMinutes, {"trigger":"schedule"});
 * its run at deploy time (./deploy-run.ts); its output; its alarm and its dashboard graph
 * (./operations.ts). Memory, time-out, environment and the schedule's numbers come from
 * infra/deployment.ts.
 *
 * Added to the given stack (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, Duration, type Stack } from 'aws-cdk-lib';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import { REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';
import { acknowledgeFunctionFindings, addSchedulerInvokeRole, ContentSyncFunction, functionProps } from '../constructs/content-sync-function.js';
import type { ContentSyncConfig } from '../context.js';
import {
  deployRunDeployment,
  REFRESHER_TIMEOUT_SECONDS,
  refresherDeployment,
  scheduleDeliveryDeployment,
  scheduleDeployment,
  type ResourceNames,
} from '../deployment.js';
import { addDeployRun } from './deploy-run.js';
import { tokenRefresherOperations, type TokenRefresherOperations } from './operations.js';
import type { TokenSecretsResources } from './token-secrets.js';

/** infra/deployment.ts, REFRESHER_TIMEOUT_SECONDS. */
export const REFRESHER_TIMEOUT = Duration.seconds(REFRESHER_TIMEOUT_SECONDS);

export interface TokenRefresherProps {
  readonly config: ContentSyncConfig;
  /** What its environment names (infra/deployment.ts, refresherDeployment). */
  readonly names: ResourceNames;
  readonly secrets: TokenSecretsResources;
}

export interface TokenRefresher extends TokenRefresherOperations {
  readonly fn: ContentSyncFunction;
}

export function addTokenRefresher(stack: Stack, props: TokenRefresherProps): TokenRefresher {
  const { config, secrets } = props;
  const refresher = new ContentSyncFunction(stack, 'TokenRefresher', {
    entry: 'functions/token-refresher/handler.ts',
    serviceName: REFRESHER_SERVICE,
    description: 'content-sync: exchanges the refresh token for a fresh access token',
    ...functionProps(refresherDeployment(config, props.names)),
  });
  refresher.allow({
    sid: 'ReadCredentials',
    actions: ['secretsmanager:GetSecretValue'],
    resources: [secrets.credentialsSecret.secretArn],
  });
  refresher.allow({
    sid: 'WriteTokens',
    actions: ['secretsmanager:PutSecretValue'],
    resources: [secrets.credentialsSecret.secretArn, secrets.accessTokenSecret.secretArn],
  });
  acknowledgeFunctionFindings(refresher);

  addRefreshSchedule(stack, refresher, config);
  addDeployRun(stack, {
    refresher,
    deployment: deployRunDeployment(config, { refresherFunctionName: refresher.function.functionName }),
  });

  new CfnOutput(stack, 'TokenRefresherFunctionName', {
    description: 'Run it after setting the credentials: aws lambda invoke --function-name <this> --payload \'{"trigger":"manual"}\'',
    value: refresher.function.functionName,
  });
  return { fn: refresher, ...tokenRefresherOperations(refresher.function, config) };
}

/** EventBridge Scheduler runs the refresher every `tokenRefreshMinutes` with {"trigger":"schedule"}. */
function addRefreshSchedule(stack: Stack, refresher: ContentSyncFunction, config: ContentSyncConfig): void {
  const tokenRefreshMinutes = scheduleDeployment(config).refresherEveryMinutes;
  const delivery = scheduleDeliveryDeployment(config).refresher;
  // Our own role for the schedule, so its one finding can be acknowledged on it.
  const scheduleRole = addSchedulerInvokeRole(stack, 'TokenRefreshScheduleRole', refresher, 'token refresher');
  new scheduler.Schedule(stack, 'TokenRefreshSchedule', {
    description: `content-sync: refresh the provider access token every ${tokenRefreshMinutes} min`,
    schedule: scheduler.ScheduleExpression.rate(Duration.minutes(tokenRefreshMinutes)),
    target: new schedulerTargets.LambdaInvoke(refresher.function, {
      input: scheduler.ScheduleTargetInput.fromObject({ trigger: 'schedule' }),
      // A run the next one supersedes is not worth delivering late.
      maxEventAge: Duration.minutes(delivery.maxEventAgeMinutes),
      retryAttempts: delivery.retryAttempts,
      role: scheduleRole,
    }),
  });
}
