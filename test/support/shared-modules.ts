/**
 * Which test files share their modules, and which run isolated.
 *
 * A test file run isolated gets a fresh process and loads every module it imports (the AWS SDK,
 * aws-cdk-lib, the harness) again: about a second of CPU for a small file, more than most of its
 * tests. So test files share their modules (`isolate: false`, vitest.config.mts): in each worker a
 * module is evaluated once, for every file that worker runs, and the files that synthesize the app
 * warm aws-cdk-lib up once and synthesize each context once (test/infra/helpers.ts
 * `synthTemplates`).
 *
 * A file that changes a module for every file after it in its worker runs isolated. `isolatedFiles`
 * finds them, so no list is kept by hand: a file that replaces a module (`vi.mock`), loads every
 * module again (`vi.resetModules`), stubs the environment, a global or the timers, or stubs an AWS
 * SDK client class (aws-sdk-client-mock's `mockClient` given a class replaces that class's `send`
 * until restored); or that imports a test helper that does one of these, or that registers a hook
 * at its top level (with shared modules a helper runs once a worker: its hook would serve the first
 * file only). A file that synthesizes in child processes (`cdk synth`) gains nothing from shared modules
 * and is isolated too (ISOLATED_SYNTH_FILES): then it is scheduled with the other long files.
 * test/infra/shared-modules.test.ts holds the finder to these rules.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, relative } from 'node:path';
import { rmSync } from 'node:fs';

/** The test files that synthesize the app. */
export const SYNTH_FILES: readonly string[] = ['test/infra/**/*.test.ts', 'test/docs/**/*.test.ts', 'test/dev/cost/**/*.test.ts'];

/** Files among SYNTH_FILES that run isolated though they change no module: the `cdk synth` one. */
export const ISOLATED_SYNTH_FILES: readonly string[] = ['test/infra/cli.test.ts'];

/** Why a file changes a module for the files after it, or undefined. */
export function ownReason(text: string, helper: boolean): string | undefined {
  if (/\bvi\.(mock|doMock|hoisted)\(/.test(text)) return 'replaces a module (vi.mock)';
  if (/\bvi\.resetModules\(/.test(text)) return 'loads every module again (vi.resetModules)';
  if (/\bvi\.(stubEnv|stubGlobal|useFakeTimers)\(/.test(text)) return 'changes the environment, a global or the timers (vi.stubEnv, vi.stubGlobal, vi.useFakeTimers)';
  if (/\bmockClient\(\s*[A-Z]\w*\s*\)/.test(text)) return 'stubs an AWS SDK client class (mockClient)';
  if (helper && /^(beforeAll|afterAll|beforeEach|afterEach)\(/m.test(text)) return 'registers a hook at its top level';
  return undefined;
}

/** The test files below test/ (relative to `root`) that must run isolated, each with why. */
export function isolatedFiles(root: string): Map<string, string> {
  const files = (readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' }) as string[])
    .filter((file) => file.endsWith('.ts'))
    .map((file) => `test/${file.split('\\').join('/')}`);
  const known = new Set(files);
  const texts = new Map(files.map((file) => [file, readFileSync(join(root, file), 'utf8')]));
  // The test helpers a file imports (relative imports of .ts files under test/).
  const importsOf = (file: string): string[] =>
    [...texts.get(file)!.matchAll(/\bfrom\s+'(\.{1,2}\/[^']+)\.js'/g)]
      .map((match) => relative(root, normalize(join(root, dirname(file), `${match[1]!}.ts`))).split('\\').join('/'))
      .filter((target) => known.has(target));
  const reasons = new Map<string, string | undefined>();
  const reasonOf = (file: string, seen: Set<string>): string | undefined => {
    if (reasons.has(file)) return reasons.get(file);
    if (seen.has(file)) return undefined;
    seen.add(file);
    let reason = ownReason(texts.get(file)!, !file.endsWith('.test.ts'));
    for (const helper of importsOf(file)) {
      if (reason) break;
      const inner = reasonOf(helper, seen);
      if (inner) reason = `imports ${helper}, which ${inner.replace(/^imports /, 'imports ')}`;
    }
    reasons.set(file, reason);
    return reason;
  };
  const isolated = new Map<string, string>();
  for (const file of files.filter((name) => name.endsWith('.test.ts'))) {
    const reason = reasonOf(file, new Set());
    if (reason) isolated.set(file, reason);
  }
  return isolated;
}

/**
 * Where this process's apps synthesize. Created when an app is built; removed after every test file
 * (test/setup.ts), since with shared modules a helper's own `afterAll` would run after the first file only.
 */
export const SYNTH_DIR = join(tmpdir(), `content-sync-synth-${process.pid}`);

export function removeSynthDir(): void {
  rmSync(SYNTH_DIR, { recursive: true, force: true });
}
