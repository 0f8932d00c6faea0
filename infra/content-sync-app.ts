/**
 * Builds the content-sync stacks into an App: used by infra/app.ts (the CDK CLI's entry) and by the
 * tests, so both synthesize exactly the same thing.
 */
import { Validations, type App } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { readContentSyncConfig, type ContentSyncConfig } from './context.js';
import { stackNames } from '../functions/shared/stage.js';
import { StatefulStack } from './stateful-stack.js';
import { StatelessStack } from './stateless-stack.js';

/**
 * Stack names (CloudFormation) of the deployment without a stage: what `cdk deploy` lists and what
 * an operator finds in the console. With the context key `stage`, each ends in `-<stage>` (functions/shared/stage.ts).
 */
export { DEFAULT_STACK_NAMES as STACK_NAMES } from '../functions/shared/stage.js';

export interface ContentSyncApp {
  readonly config: ContentSyncConfig;
  readonly stateful: StatefulStack;
  readonly stateless: StatelessStack;
}

/** Reads the context (throws ConfigError naming the key), adds both stacks and the cdk-nag checks. */
export function buildContentSyncApp(app: App): ContentSyncApp {
  const config = readContentSyncConfig(app.node);
  const description = 'content-sync: mirrors a content provider into Amazon DynamoDB';
  const names = stackNames(config.stage);
  const stateful = new StatefulStack(app, names.stateful, {
    description: `${description} (stateful: tables, connections key, bucket, queues, bus; retained on deletion)`,
    config,
  });
  const stateless = new StatelessStack(app, names.stateless, {
    description: `${description} (stateless: functions, client API, schedules, alarms, dashboard)`,
    config,
    stateful: {
      storage: stateful.storage,
      connections: stateful.connections,
      syncQueues: stateful.syncQueues,
      reconcileQueues: stateful.reconcileQueues,
      eraseQueues: stateful.eraseQueues,
      changeEvents: stateful.changeEvents,
      changesWriter: stateful.changesWriter,
    },
  });
  // cdk-nag 3 is a policy-validation plugin: synthesis fails on any unacknowledged finding.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { config, stateful, stateless };
}
