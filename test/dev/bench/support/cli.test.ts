import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { commandLineMistake } from '../../../../dev/bench/support/cli.js';

/** The mistake parseArgs throws for `args` (options --json and --ids <value>, no positionals). */
function mistakeIn(args: string[]): string | undefined {
  try {
    parseArgs({ args, strict: true, options: { json: { type: 'boolean' }, ids: { type: 'string' } } });
  } catch (error) {
    return commandLineMistake(error);
  }
  throw new Error(`parseArgs took ${JSON.stringify(args)}`);
}

describe('commandLineMistake', () => {
  it.each([
    [['--bogus'], 'unknown option --bogus'],
    [['-x'], 'unknown option -x'],
    [['--ids'], "Option '--ids <value>' argument missing"],
    [['--json=yes'], "Option '--json' does not take an argument"],
    [['extra'], "Unexpected argument 'extra'. This command does not take positional arguments"],
    [['--ids', '--json'], "Option '--ids' argument is ambiguous."],
  ])('tells the mistake in %j in one line', (args, mistake) => {
    expect(mistakeIn(args)).toBe(mistake);
  });

  it('is undefined for an error that is not a mistake in the command line', () => {
    expect(commandLineMistake(new Error('disk full'))).toBeUndefined();
    expect(commandLineMistake(Object.assign(new Error('no such file'), { code: 'ENOENT' }))).toBeUndefined();
    expect(commandLineMistake(undefined)).toBeUndefined();
  });
});
