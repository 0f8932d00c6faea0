/**
 * The deploy-time run of the token refresher: a small function (code in ./deploy-run-handler.ts) that a CDK
 * trigger runs during every deploy that changes it, after the refresher, its role and its policy
 * exist. A new provider address changes the function (see its environment), so the deploy that
 * changes it fetches a token from the new address at once.
 *
 * The resources are added to the given scope (the stateless stack) under their own ids, so their
 * logical ids do not depend on where this code lives.
 */
import { readFileSync } from 'node:fs';
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as triggers from 'aws-cdk-lib/triggers';
import type { Construct } from 'constructs';
import { transformSync } from 'esbuild';
import { LOG_RETENTION, type ContentSyncFunction } from '../constructs/content-sync-function.js';
import type { FunctionDeployment } from '../deployment.js';

const HANDLER_FILE = new URL('./deploy-run-handler.ts', import.meta.url);

/**
 * ./deploy-run-handler.ts compiled to CommonJS, deployed inline as `index.js`. Not bundled: it uses the SDK of
 * the Node.js runtime. Type-checked with the rest of the repository; compiled without minifying, so
 * the code in the template reads like the source.
 */
export const DEPLOY_RUN_CODE = transformSync(readFileSync(HANDLER_FILE, 'utf8'), {
  loader: 'ts',
  format: 'cjs',
  platform: 'node',
  target: 'node22',
  // esbuild names the module's export object after it (handler_exports): kept as first deployed,
  // so that moving the file changes neither the code nor the function's version.
  sourcefile: 'handler.ts',
}).code;

export interface DeployRunProps {
  /** The function the deploy runs. */
  readonly refresher: ContentSyncFunction;
  /**
   * Its memory, time-out (the refresher's and a margin: it waits for the answer) and environment
   * (infra/deployment.ts, deployRunDeployment).
   */
  readonly deployment: FunctionDeployment;
}

/** Adds the deploy-run function, its log group and role, and the trigger that runs it; returns the trigger. */
export function addDeployRun(scope: Construct, props: DeployRunProps): triggers.Trigger {
  const { deployment } = props;
  const timeout = Duration.seconds(deployment.timeoutSeconds);
  const logGroup = new logs.LogGroup(scope, 'DeployRunLogGroup', { retention: LOG_RETENTION, removalPolicy: RemovalPolicy.DESTROY });
  const role = new iam.Role(scope, 'DeployRunRole', {
    assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    description: 'Execution role of the deploy-time token refresh',
  });
  role.addToPolicy(
    new iam.PolicyStatement({
      sid: 'WriteOwnLogs',
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: [logGroup.logGroupArn],
    }),
  );
  role.addToPolicy(
    new iam.PolicyStatement({
      sid: 'InvokeTokenRefresher',
      actions: ['lambda:InvokeFunction'],
      resources: [props.refresher.function.functionArn],
    }),
  );
  const fn = new lambda.Function(scope, 'DeployRunFunction', {
    description: 'content-sync: runs the token refresher once per deploy that changes it',
    runtime: lambda.Runtime.NODEJS_22_X,
    architecture: lambda.Architecture.ARM_64,
    code: lambda.Code.fromInline(DEPLOY_RUN_CODE),
    handler: 'index.handler',
    memorySize: deployment.memoryMb,
    timeout,
    role,
    logGroup,
    environment: { ...deployment.environment },
  });
  Validations.of(fn).acknowledge({
    id: 'AwsSolutions-L1',
    reason: 'Node.js 22 is the runtime the project targets and tests for (same as the functions it deploys).',
  });
  const trigger = new triggers.Trigger(scope, 'DeployRun', {
    handler: fn,
    invocationType: triggers.InvocationType.REQUEST_RESPONSE,
    timeout,
    executeOnHandlerChange: true,
  });
  // After the refresher, its role and policy exist (the secrets are in the stateful stack, deployed first).
  trigger.executeAfter(props.refresher);
  return trigger;
}
