/**
 * `npm run sim`'s command line: what it asks for, the usage (made from the scenario list), and the
 * exit statuses of the usage and of a mistake. No scenario runs here.
 */
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runProcess } from '../../../dev/fakes/loopback.js';
import { main, parseCommandLine, pushScale, simUsage } from '../../../dev/sim/run.js';
import { PUSH_FULL } from '../../../dev/sim/push-scenario.js';

const ROOT = resolve(import.meta.dirname, '../../..');

const SCENARIOS = [
  'unknown',
  'known',
  'outage',
  'token',
  'scope-limits',
  'scope-accounts',
  'scope-outage',
  'reconcile',
  'connections',
  'accounts',
  'fairness',
  'backlog',
  'busy',
  'refresher',
  'discovery',
  'discovery-cycle',
  'changes',
  'push',
];

const FULL = { short: false, ids: undefined, unknownLimit: false, batchSize: undefined };

/** The names listed under `heading` in the usage text, in order. */
function listed(usage: string, heading: string): string[] {
  const section = usage.split(`${heading}:\n`)[1]!.split('\n\n')[0]!;
  return [...section.matchAll(/^ {2}([^\s,]+(?:, \S+)?)/gm)].map((match) => match[1]!);
}

/** The lines of a scenario's entry in the usage text. */
function entry(usage: string, name: string): string {
  return usage.match(new RegExp(`^ {2}${name} .*\\n(?: {5,}.*\\n)*`, 'm'))![0];
}

function captured(): { stdout: string; stderr: string; io: { stdout: { write(text: string): boolean }; stderr: { write(text: string): boolean } } } {
  const out = {
    stdout: '',
    stderr: '',
    io: {
      stdout: { write: (text: string) => ((out.stdout += text), true) },
      stderr: { write: (text: string) => ((out.stderr += text), true) },
    },
  };
  return out;
}

describe('the command line', () => {
  it('runs the pace scenarios at full scale when no scenario is named', () => {
    expect(parseCommandLine([])).toEqual({ names: ['unknown', 'known', 'outage', 'token'], options: FULL });
  });

  it('takes groups and scenarios in the order given, with their options', () => {
    expect(parseCommandLine(['--short', 'scope', 'push', '--ids', '600', '--batch-size', '10'])).toEqual({
      names: ['scope-limits', 'scope-accounts', 'scope-outage', 'push'],
      options: { short: true, ids: 600, unknownLimit: false, batchSize: 10 },
    });
    expect(parseCommandLine(['reconcile', '--unknown-limit'])).toEqual({ names: ['reconcile'], options: { ...FULL, unknownLimit: true } });
  });

  it('takes --limit for the push scenario: its L, told to the system', () => {
    expect(parseCommandLine(['push', '--limit', '5000'])).toEqual({ names: ['push'], options: { ...FULL, limit: 5000 } });
    expect(pushScale({ short: false, ids: undefined, limit: 5000 })).toEqual({ ...PUSH_FULL, limit: 5000 });
  });

  it('takes --dynamo-latency for every scenario, any factor from 0 to 100', () => {
    expect(parseCommandLine(['known', '--dynamo-latency', '0'])).toEqual({ names: ['known'], options: { ...FULL, dynamoLatency: 0 } });
    expect(parseCommandLine(['push', '--dynamo-latency', '2.5'])).toEqual({ names: ['push'], options: { ...FULL, dynamoLatency: 2.5 } });
  });

  it('accepts every scenario the usage lists, and only those', () => {
    const usage = simUsage();
    expect(listed(usage, 'Scenarios')).toEqual(SCENARIOS);
    for (const name of SCENARIOS) expect(parseCommandLine([name])).toEqual({ names: [name], options: FULL });
    expect(listed(usage, 'Groups')).toEqual(['pace', 'scope']);
  });

  it('asks for the usage with --help or -h, whatever else is given', () => {
    expect(parseCommandLine(['--help'])).toEqual({ help: true });
    expect(parseCommandLine(['reconcile', '-h', '--short'])).toEqual({ help: true });
  });

  it.each([
    [['--bogus'], 'unknown option --bogus'],
    [['known', '-x'], 'unknown option -x'],
    [['known', 'nosuch'], 'unknown scenario nosuch'],
    [['reconcile', '--ids'], "Option '--ids <value>' argument missing"],
    [['--short=yes'], "Option '--short' does not take an argument"],
    [['reconcile', '--ids', '99'], '--ids must be a whole number of at least 100, got 99'],
    [['push', '--batch-size', '0'], '--batch-size must be a whole number from 1 to 10000 (syncBatchSize), got 0'],
    [['push', '--limit', '0.5'], '--limit must be a whole number of at least 1 (requests a second), got 0.5'],
    [['busy', '--limit', '500'], '--limit is read by push only'],
    [['known', '--ids', '1000'], '--ids is read by reconcile and push only'],
    [['push', '--unknown-limit'], '--unknown-limit is read by reconcile only'],
    [['known', '--dynamo-latency', '101'], '--dynamo-latency must be a number from 0 to 100, got 101'],
    [['known', '--dynamo-latency', 'fast'], '--dynamo-latency must be a number from 0 to 100, got fast'],
  ])('names the mistake in %j in one line', (argv, mistake) => {
    expect(parseCommandLine(argv)).toEqual({ mistake });
  });
});

describe('the usage', () => {
  const usage = simUsage();

  it("gives each scenario's sizes and the options it reads", () => {
    expect(entry(usage, 'reconcile')).toContain('options: --ids N, --unknown-limit\n');
    expect(entry(usage, 'push')).toContain('options: --ids N, --batch-size N, --limit N\n');
    expect(entry(usage, 'known')).not.toContain('options:');
    for (const name of SCENARIOS) expect(entry(usage, name)).toMatch(/\n {5,}full: [^]+\n {5,}--short: /);
  });

  it('names every option, with the scenarios that read it', () => {
    expect(listed(usage, 'Options')).toEqual(['--short', '--ids', '--unknown-limit', '--batch-size', '--limit', '--dynamo-latency', '-h, --help']);
    expect(usage).toMatch(/\n {2}--ids N +the number of ids, at least 100 \(reconcile, push\)\n/);
    expect(usage).toMatch(/\n {2}--unknown-limit +.* \(reconcile\)\n/);
    // Every scenario reads it: no list of readers.
    expect(usage).toMatch(/\n {2}--dynamo-latency F +scales AWS's DynamoDB latency [^(]+\n/);
  });

  it('keeps its lines within 100 characters', () => {
    const long = usage.split('\n').filter((line) => line.length > 100);
    expect(long).toEqual([]);
  });
});

describe('main', () => {
  it('prints the usage on standard output and returns 0 for --help', async () => {
    const out = captured();
    expect(await main(['--help'], out.io)).toBe(0);
    expect(out.stdout).toBe(simUsage());
    expect(out.stderr).toBe('');
  });

  it('prints the mistake and the usage on standard error and returns 2, running nothing', async () => {
    const out = captured();
    expect(await main(['known', '--bogus'], out.io)).toBe(2);
    expect(out.stderr).toBe(`unknown option --bogus\n\n${simUsage()}`);
    expect(out.stdout).toBe('');
  });

  it('prints the usage and exits 0 when run as `npm run sim -- --help`', async () => {
    const result = await runProcess(join(ROOT, 'node_modules', '.bin', 'tsx'), [join(ROOT, 'dev/sim/run.ts'), '--help'], { cwd: ROOT, env: process.env });
    expect(result).toEqual({ status: 0, stdout: simUsage(), stderr: '' });
  });
});
