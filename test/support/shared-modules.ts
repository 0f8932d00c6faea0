/**
 * Which test files share their modules, and where their apps synthesize.
 *
 * The files that synthesize the app spend most of their time loading aws-cdk-lib and warming it up
 * with a first synth (about 3 s of CPU a file). They run with `isolate: false` (vitest.config.mts):
 * in each worker, aws-cdk-lib is loaded once, and each context synthesized once
 * (test/infra/helpers.ts `synthTemplates`), for all of them. A module such a file imports is then
 * evaluated once a worker, not once a file; so a file that replaces a module (`vi.mock`) must be
 * isolated: it is listed in ISOLATED_SYNTH_FILES, and test/infra/shared-modules.test.ts holds the
 * others to that. A file that synthesizes in child processes (`cdk synth`) gains nothing from
 * shared modules and is isolated too: then it is scheduled with the other long files, not after the
 * shared ones.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The test files that synthesize the app. */
export const SYNTH_FILES: readonly string[] = ['test/infra/**/*.test.ts', 'test/docs/**/*.test.ts'];

/** Files among SYNTH_FILES that run isolated: every one that replaces a module, and the `cdk synth` one. */
export const ISOLATED_SYNTH_FILES: readonly string[] = ['test/infra/deployment.test.ts', 'test/infra/cli.test.ts'];

/**
 * Where this process's apps synthesize. Created when an app is built; removed after every test file
 * (test/setup.ts), since with shared modules a helper's own `afterAll` would run after the first file only.
 */
export const SYNTH_DIR = join(tmpdir(), `content-sync-synth-${process.pid}`);

export function removeSynthDir(): void {
  rmSync(SYNTH_DIR, { recursive: true, force: true });
}
