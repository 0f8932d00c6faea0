import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';
import { HANG_GUARD_MS } from './test/support/hang-guard.js';
import LongFirstSequencer from './test/support/sequencer.js';
import { ISOLATED_SYNTH_FILES, isolatedFiles, SYNTH_FILES } from './test/support/shared-modules.js';

// Test files share their modules, each worker loading a module once for every file it runs; a file
// that changes a module for the files after it runs isolated (test/support/shared-modules.ts).
const isolated = [...isolatedFiles(import.meta.dirname).keys()];
const isolatedSynth = [...ISOLATED_SYNTH_FILES, ...isolated.filter((file) => /^test\/(infra|docs)\//.test(file))];

export default defineConfig({
  test: {
    // The files that synthesize the app in one project (aws-cdk-lib loaded and each context
    // synthesized once a worker), every other file sharing its modules in another, and the files
    // that must not share in the last two.
    // Each project inherits the root's settings but not its global setup: the root's runs once for
    // the whole run (one DynamoDB Local), and the projects get what it provides.
    projects: [
      { extends: true, test: { name: 'synth', include: [...SYNTH_FILES], exclude: [...configDefaults.exclude, ...isolatedSynth], isolate: false, globalSetup: [] } },
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...SYNTH_FILES, ...isolated], isolate: false, globalSetup: [] } },
      { extends: true, test: { name: 'isolated', include: isolated.filter((file) => !isolatedSynth.includes(file)), globalSetup: [] } },
      { extends: true, test: { name: 'synth-isolated', include: isolatedSynth, globalSetup: [] } },
    ],
    // One DynamoDB Local for the whole run (test/support/dynamodb-global.ts).
    globalSetup: ['test/support/dynamodb-global.ts'],
    setupFiles: ['test/setup.ts'],
    // The projects of a few long files first; within each, the files that run long for their size (test/support/sequencer.ts).
    sequence: { sequencer: LongFirstSequencer },
    reporters: ['default', './test/support/summary-reporter.ts'],
    environment: 'node',
    // A hang guard, not a speed limit (test/support/hang-guard.ts): no test or hook sets its own.
    testTimeout: HANG_GUARD_MS,
    hookTimeout: HANG_GUARD_MS,
    pool: 'forks',
    // One worker per CPU and one more: the local run's files (test/dev/local) wait on real time for
    // most of their minute, and would otherwise hold both of CI's two cores idle while they wait.
    maxWorkers: availableParallelism() + 1,
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
