/**
 * The files that synthesize the app share their modules (test/support/shared-modules.ts): a module
 * is evaluated once a worker for all of them. So none of them may replace a module unless it is
 * listed to run isolated, and no helper of theirs may register a hook at its top level (it would
 * run for the first file only).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ISOLATED_SYNTH_FILES, SYNTH_FILES } from '../support/shared-modules.js';
import { ROOT } from './helpers.js';

/** The .ts files below each directory SYNTH_FILES names (`<dir>/**\/*.test.ts`), relative to the root. */
function filesOfSynthDirectories(): string[] {
  return SYNTH_FILES.flatMap((pattern) => {
    const dir = /^(.+)\/\*\*\/\*\.test\.ts$/.exec(pattern)?.[1];
    if (!dir) throw new Error(`SYNTH_FILES: expected <dir>/**/*.test.ts, got ${pattern}`);
    return (readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' }) as string[])
      .filter((file) => file.endsWith('.ts'))
      .map((file) => `${dir}/${file}`);
  });
}

describe('the test files that share their modules', () => {
  const files = filesOfSynthDirectories();

  it('are found, and the isolated ones exist', () => {
    expect(files).toContain('test/infra/shared-modules.test.ts');
    for (const file of ISOLATED_SYNTH_FILES) expect(existsSync(join(ROOT, file)), file).toBe(true);
  });

  it('replace no module unless they run isolated', () => {
    const mocking = files.filter((file) => /\bvi\.(mock|doMock|hoisted)\(/.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(mocking).toContain('test/infra/deployment.test.ts');
    for (const file of mocking) expect(ISOLATED_SYNTH_FILES, file).toContain(file);
  });

  it('import no helper that registers a hook at its top level', () => {
    const helpers = files.filter((file) => !file.endsWith('.test.ts'));
    expect(helpers).toContain('test/infra/helpers.ts');
    const hooking = helpers.filter((file) => /^(beforeAll|afterAll|beforeEach|afterEach)\(/m.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(hooking).toEqual([]);
  });
});
