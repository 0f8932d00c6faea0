/**
 * The CDK CLI as an operator runs it: `cdk synth` works offline without AWS credentials or Docker,
 * prints no notices, version or feature-flag messages, and a missing or invalid key (`baseUrl`,
 * `paceScope`) fails the synth with one line naming it, and no stack. Every other key's refusal is
 * the same line from the same check (infra/context.ts), held key by key in process by
 * test/infra/context.test.ts: each run here costs a CLI and an app of its own.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runProcess, type ProcessRun as Run } from '../../dev/fakes/loopback.js';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers.js';

const CDK = join(ROOT, 'node_modules', 'aws-cdk', 'bin', 'cdk');
const dir = mkdtempSync(join(tmpdir(), 'content-sync-cdk-'));

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** `cdk <args>` in the repository, with no AWS credentials, no instance metadata and no version check. */
function cdk(args: string[]): Promise<Run> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('AWS_') || name.startsWith('CDK_')) delete env[name];
  Object.assign(env, {
    CDK_DISABLE_VERSION_CHECK: '1',
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: join(dir, 'no-config'),
    AWS_SHARED_CREDENTIALS_FILE: join(dir, 'no-credentials'),
  });
  return runProcess(process.execPath, [CDK, ...args], { cwd: ROOT, env: env as NodeJS.ProcessEnv });
}

/** Lines that are not the expected progress lines (npm's complaint about this machine's own npmrc aside). */
function unexpectedLines(output: string): string[] {
  return output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .filter((line) => !/^npm warn Unknown (user|env|global|project) config /.test(line))
    .filter((line) => !/^Bundling asset ContentSyncStateless\/[A-Za-z]+\/Function\/Code\/Stage\.\.\.$/.test(line))
    .filter((line) => !line.startsWith('Successfully synthesized to '))
    .filter((line) => !line.startsWith('Supply a stack id (ContentSyncStateful, ContentSyncStateless)'));
}

describe('cdk CLI', () => {
  it('synth --quiet works offline, without credentials, and prints nothing but progress', async () => {
    const out = join(dir, 'cdk.out');
    const run = await cdk(['synth', '-c', 'baseUrl=https://example.com/api', '--quiet', '-o', out]);
    expect(run.stderr).not.toMatch(/notice|newer version|upgrade|telemetry|feature flag|warning/i);
    expect(unexpectedLines(run.stdout + run.stderr)).toEqual([]);
    expect(run.status).toBe(0);
    expect(existsSync(join(out, 'ContentSyncStateful.template.json'))).toBe(true);
    expect(existsSync(join(out, 'ContentSyncStateless.template.json'))).toBe(true);
    const assets = readdirSync(out).filter((name) => name.startsWith('asset.'));
    // The token refresher, the item sync, the change-events function, the changes writer, the reconciler, the client API and the eraser.
    expect(assets.filter((name) => existsSync(join(out, name, 'index.mjs')))).toHaveLength(7);
  });

  it('synth without baseUrl fails with one line naming baseUrl', async () => {
    const run = await cdk(['synth', '--quiet', '-o', join(dir, 'missing')]);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain('content-sync: invalid CDK context: baseUrl: is required');
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('synth with a paceScope other than client or connection exits 1 with one line naming the key', async () => {
    const run = await cdk(['synth', '-c', 'baseUrl=https://example.com/api', '-c', 'paceScope=account', '--quiet', '-o', join(dir, 'bad-pace-scope')]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('content-sync: invalid CDK context: paceScope: must be one of client, connection, got "account"');
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });
});
