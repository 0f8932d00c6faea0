/**
 * The operator CLIs share the stage rule and the stack names with the CDK app (functions/shared/stage.ts)
 * without loading the CDK: neither CLI's module graph reaches aws-cdk-lib or constructs.
 */
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** Every package and every file of the repository `entry` loads, directly or not. */
async function moduleGraph(entry: string): Promise<{ packages: string[]; files: string[] }> {
  const result = await build({ entryPoints: [join(ROOT, entry)], bundle: true, write: false, metafile: true, platform: 'node', format: 'esm', packages: 'external', logLevel: 'silent', absWorkingDir: ROOT });
  const output = Object.values(result.metafile.outputs)[0]!;
  return {
    packages: [...new Set(output.imports.filter((i) => i.external).map((i) => i.path))].sort(),
    files: Object.keys(result.metafile.inputs).sort(),
  };
}

describe.each(['tools/connections/connections.ts', 'tools/enqueue/enqueue.ts'])('%s', (entry) => {
  it('loads the stage rule of functions/shared/stage.ts, and not the CDK', async () => {
    const graph = await moduleGraph(entry);
    expect(graph.files).toContain('functions/shared/stage.ts');
    expect(graph.packages).toContain('@aws-sdk/client-cloudformation');
    expect(graph.packages.filter((name) => /^(aws-cdk-lib|constructs|cdk-nag)(\/|$)/.test(name))).toEqual([]);
  });
});
