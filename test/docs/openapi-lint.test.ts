/**
 * The client API's OpenAPI document (docs/openapi.json) passes Redocly CLI's lint with the
 * repository's redocly.yaml (the recommended rules): no error, no warning. The CLI runs as a child
 * process, offline: no telemetry, no update check, and every connection it might open refused and
 * reported (a preloaded module), so a lint that needs the network fails here instead of passing
 * by luck on a machine that has one.
 */
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runProcess } from '../../dev/fakes/loopback.js';

const ROOT = resolve(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);
const CLI_PACKAGE = require.resolve('@redocly/cli/package.json');
const CLI = join(dirname(CLI_PACKAGE), (require(CLI_PACKAGE) as { bin: Record<string, string> }).bin['redocly']!);

const NETWORK_MARK = 'network use refused:';
/** Loaded before the CLI: every socket connection is reported on stderr and refused. */
const NO_NETWORK = `import net from 'node:net';
net.Socket.prototype.connect = function (...args) {
  process.stderr.write(${JSON.stringify(NETWORK_MARK)} + ' ' + JSON.stringify(args[0]) + '\\n');
  this.destroy(new Error('no network in the lint'));
  return this;
};`;

/** Redocly's notice on stderr that Node.js 20 is near its end: about the runtime, not the document. */
const isRuntimeNotice = (line: string): boolean => /^\s*[╔║╚]/.test(line);

describe('docs/openapi.json', () => {
  it('passes `redocly lint` (recommended rules), offline: exit 0, no error, no warning', async () => {
    const run = await runProcess(
      process.execPath,
      ['--import', `data:text/javascript,${encodeURIComponent(NO_NETWORK)}`, CLI, 'lint', 'docs/openapi.json', '--config', 'redocly.yaml', '--format', 'json'],
      { cwd: ROOT, env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } },
    );
    expect(run.stderr).not.toContain(NETWORK_MARK);
    const report = JSON.parse(run.stdout) as { totals: Record<string, number>; problems: unknown[] };
    expect(report.problems).toEqual([]);
    expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
    const lines = run.stderr.split('\n').filter((line) => !isRuntimeNotice(line));
    expect(lines.filter((line) => /warn|error|problem/i.test(line))).toEqual([]);
    expect(lines.join('\n')).toContain('Your API description is valid');
    expect(run.status).toBe(0);
  });
});
