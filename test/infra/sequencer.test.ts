/**
 * The order the test files start in (test/support/sequencer.ts): within each project, the files that
 * run long for their size first, in vitest's order, then the others in vitest's order; the projects
 * kept in vitest's order, each together.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LONG_FIRST, longFirst } from '../support/sequencer.js';
import { ROOT } from './helpers.js';

describe('the test files’ order', () => {
  it('starts the long files of each project first, and keeps each project together', () => {
    const files = [
      ['isolated', 'test/functions/item-sync/sync.integration.test.ts'],
      ['shared', 'test/functions/client-api/refusals.test.ts'],
      ['shared', 'test/dev/sim/changes-scenario.test.ts'],
      ['shared', 'test/tools/connections/connections.test.ts'],
      ['shared', 'test/dev/local/story.test.ts'],
      ['shared', 'test/dev/fakes/dynamodb-local.test.ts'],
      ['shared', 'test/dev/fakes/sqs-model.test.ts'],
      ['synth', 'test/infra/nag.test.ts'],
    ] as const;
    expect(longFirst(files, (file) => file[0], (file) => file[1]).map((file) => file[1])).toEqual([
      'test/functions/item-sync/sync.integration.test.ts',
      'test/dev/sim/changes-scenario.test.ts',
      'test/dev/local/story.test.ts',
      'test/dev/fakes/dynamodb-local.test.ts',
      'test/functions/client-api/refusals.test.ts',
      'test/tools/connections/connections.test.ts',
      'test/dev/fakes/sqs-model.test.ts',
      'test/infra/nag.test.ts',
    ]);
  });

  it('names folders and files that exist', () => {
    for (const pattern of LONG_FIRST) {
      const path = pattern.source.replace(/^\^/, '').replace(/\$$/, '').replace(/\\\//g, '/').replace(/\\\./g, '.');
      expect(existsSync(join(ROOT, path)), path).toBe(true);
    }
  });
});
