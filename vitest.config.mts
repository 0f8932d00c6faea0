import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { HANG_GUARD_MS } from './test/support/hang-guard.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    environment: 'node',
    // A hang guard, not a speed limit (test/support/hang-guard.ts): no test or hook sets its own.
    testTimeout: HANG_GUARD_MS,
    hookTimeout: HANG_GUARD_MS,
    pool: 'forks',
    // One worker per CPU (vitest's default leaves one CPU to its main process, which mostly waits):
    // on CI's two cores the test files run two at a time.
    maxWorkers: availableParallelism(),
    env: {
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_DEV: 'false',
      POWERTOOLS_SERVICE_NAME: 'content-sync-test',
      CDK_DISABLE_VERSION_CHECK: '1',
    },
  },
});
