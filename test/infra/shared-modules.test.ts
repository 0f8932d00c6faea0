/**
 * Test files share their modules (test/support/shared-modules.ts): a module is evaluated once a
 * worker for every file that worker runs. So a file that changes a module for the files after it
 * must run isolated, and `isolatedFiles` must find every such file: one that replaces a module,
 * one that stubs an AWS SDK client class, one that imports a helper that does either or that
 * registers a hook at its top level.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ISOLATED_SYNTH_FILES, isolatedFiles, ownReason } from '../support/shared-modules.js';
import { ROOT } from './helpers.js';

describe('the test files that run isolated', () => {
  const isolated = isolatedFiles(ROOT);

  it('are found for what they do, directly or through a helper', () => {
    expect(isolated.get('test/infra/deployment.test.ts')).toBe('replaces a module (vi.mock)');
    expect(isolated.get('test/functions/shared/errors-copies.test.ts')).toBe('loads every module again (vi.resetModules)');
    expect(isolated.get('test/tools/enqueue.test.ts')).toBe('stubs an AWS SDK client class (mockClient)');
    expect(isolated.get('test/functions/item-sync/sync.integration.test.ts')).toBe(
      'imports test/functions/item-sync/integration-harness.ts, which stubs an AWS SDK client class (mockClient)',
    );
    for (const file of ISOLATED_SYNTH_FILES) expect(existsSync(join(ROOT, file)), file).toBe(true);
  });

  it('leave the others sharing: a stub of one client object is the file’s own', () => {
    for (const file of ['test/functions/changes-writer/app.test.ts', 'test/functions/client-api/changes.test.ts', 'test/dev/sim/changes-scenario.test.ts', 'test/infra/shared-modules.test.ts']) {
      expect(existsSync(join(ROOT, file)), file).toBe(true);
      expect(isolated.has(file), file).toBe(false);
    }
  });

  it('are told by each rule', () => {
    // Written in two pieces, so that this file is not taken for one that does what it names.
    const vi = 'vi.';
    expect(ownReason(`${vi}mock('../x.js', () => ({}));`, false)).toBe('replaces a module (vi.mock)');
    expect(ownReason(`${vi}hoisted(() => 1);`, false)).toBe('replaces a module (vi.mock)');
    expect(ownReason(`${vi}resetModules();`, false)).toBe('loads every module again (vi.resetModules)');
    for (const call of ['stubEnv', 'stubGlobal', 'useFakeTimers']) {
      expect(ownReason(`${vi}${call}('X', '1');`, false)).toBe('changes the environment, a global or the timers (vi.stubEnv, vi.stubGlobal, vi.useFakeTimers)');
    }
    expect(ownReason(`const sqs = ${'mockClient'}(SQSClient);`, false)).toBe('stubs an AWS SDK client class (mockClient)');
    expect(ownReason('const mock = mockClient(client);', false)).toBeUndefined();
    expect(ownReason('beforeEach(() => undefined);', true)).toBe('registers a hook at its top level');
    // A test file's own hooks are its own.
    expect(ownReason('beforeEach(() => undefined);', false)).toBeUndefined();
  });
});
