/**
 * The order the test files start in (test/support/sequencer.ts): the projects in PROJECT_ORDER, each
 * together; within each, the files that run long for their size first, the longest first (in
 * vitest's order among equals), then the others in vitest's order.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LONG_FIRST, longFirst, PROJECT_ORDER } from '../support/sequencer.js';
import { ROOT } from './helpers.js';

describe('the test files’ order', () => {
  it('starts the projects in their order, each together, and the long files of each project first, the longest first', () => {
    const files = [
      ['isolated', 'test/functions/item-sync/sync.integration.test.ts'],
      ['shared', 'test/functions/client-api/refusals.test.ts'],
      ['shared', 'test/dev/sim/connections-scenario.test.ts'],
      ['shared', 'test/dev/sim/changes-scenario.test.ts'],
      ['shared', 'test/dev/sim/pace-scenarios.test.ts'],
      ['shared', 'test/tools/connections/connections.test.ts'],
      ['shared', 'test/dev/local/story.test.ts'],
      ['shared', 'test/dev/fakes/dynamodb-local.test.ts'],
      ['shared', 'test/dev/fakes/sqs-model.test.ts'],
      ['other', 'test/other.test.ts'],
      ['synth', 'test/infra/nag.test.ts'],
      ['synth', 'test/infra/stateless-stack.test.ts'],
      ['synth-isolated', 'test/infra/deployment.test.ts'],
      ['synth-isolated', 'test/infra/cli.test.ts'],
    ] as const;
    expect(longFirst(files, (file) => file[0], (file) => file[1]).map((file) => file[1])).toEqual([
      'test/infra/cli.test.ts',
      'test/infra/deployment.test.ts',
      'test/infra/stateless-stack.test.ts',
      'test/infra/nag.test.ts',
      'test/functions/item-sync/sync.integration.test.ts',
      'test/dev/local/story.test.ts',
      'test/dev/sim/pace-scenarios.test.ts',
      'test/dev/fakes/dynamodb-local.test.ts',
      'test/dev/sim/changes-scenario.test.ts',
      'test/dev/sim/connections-scenario.test.ts',
      'test/functions/client-api/refusals.test.ts',
      'test/tools/connections/connections.test.ts',
      'test/dev/fakes/sqs-model.test.ts',
      'test/other.test.ts',
    ]);
  });

  it('orders every project of vitest.config.mts', () => {
    const config = readFileSync(join(ROOT, 'vitest.config.mts'), 'utf8');
    const projects = [...config.matchAll(/test: \{ name: '([^']+)'/g)].map((match) => match[1]);
    expect(projects.length).toBeGreaterThan(0);
    expect([...PROJECT_ORDER].sort()).toEqual([...projects].sort());
  });

  it('names folders and files that exist', () => {
    for (const pattern of LONG_FIRST) {
      const path = pattern.source.replace(/^\^/, '').replace(/\$$/, '').replace(/\\\//g, '/').replace(/\\\./g, '.');
      expect(existsSync(join(ROOT, path)), path).toBe(true);
    }
  });
});
