/**
 * The CDK app (cdk.json: `npx tsx infra/app.ts`). An invalid or missing context key ends the
 * synth with one line naming the key, e.g. `content-sync: baseUrl: is required: ...`.
 */
import { App } from 'aws-cdk-lib';
import { ConfigError } from '../functions/shared/errors.js';
import { buildContentSyncApp } from './content-sync-app.js';

const app = new App();
try {
  buildContentSyncApp(app);
  app.synth();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(`content-sync: invalid CDK context: ${error.message}`);
  process.exitCode = 1;
}
