/**
 * The names the docs use, against the code, both ways: every error code, route, context key,
 * environment variable, CLI flag and metric name that README.md or a page of docs/ names exists in
 * the code, and every one the code defines is named by a page; the context keys and the functions'
 * variables each have exactly one defining row (docs/configuration.md's tables). The lists are the
 * code's own (the modules' exports, docs/openapi.json, which test/functions/client-api/openapi.test.ts
 * holds to the handler, and the sources' text): nothing here re-types a name. No synth: it reads
 * files and imports modules. And the docs state no count of tests, which no test could keep true.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as CHANGE_EVENTS_METRIC_MODULE from '../../functions/change-events/metric-names.js';
import { errorResponse, type ErrorCode } from '../../functions/client-api/routes.js';
import { ENV } from '../../functions/shared/config.js';
import * as SHARED_METRIC_MODULE from '../../functions/shared/metric-names.js';
import { METRICS_NAMESPACE } from '../../functions/shared/metric-names.js';
import { CONTEXT_KEYS } from '../../infra/context.js';
import { BENCH_CLI_OPTIONS } from '../../dev/bench/bench/options.js';
import { RECONCILER_BENCH_CLI_OPTIONS } from '../../dev/bench/reconciler/index.js';
import { SOAK_CLI_OPTIONS } from '../../dev/bench/soak/options.js';
import { SERVE_OPTIONS } from '../../dev/local/serve-command.js';
import { START_OPTIONS } from '../../dev/local/start-command.js';
import { OPTIONS as SIM_OPTIONS } from '../../dev/sim/run.js';
import { COMMANDS as CONNECTIONS_COMMANDS, DEPLOYMENT_OPTIONS as CONNECTIONS_DEPLOYMENT_OPTIONS, OPTIONS as CONNECTIONS_OPTIONS } from '../../tools/connections/connections.js';
import { ENQUEUE_OPTIONS } from '../../tools/enqueue/enqueue.js';
import { ROOT } from '../infra/helpers.js';
import { codeSpans, DOC_PAGES, flat, page, withoutCodeBlocks } from './markdown.js';
import {
  codeBlockLines,
  commandsOf,
  commentOf,
  declaredConstants,
  environmentReads,
  everyTable,
  flagOf,
  proseSpans,
  sourceFiles,
  UPPER_SNAKE,
  withoutComment,
  words,
  type Span,
} from './names.js';

// ---- what the docs hold ---------------------------------------------------------------------------------

const SPANS: readonly Span[] = proseSpans();
const CODE_LINES = codeBlockLines();
/** The shell lines of the code blocks (bash, sh, or no language given). */
const SHELL_LINES = CODE_LINES.filter((line) => ['bash', 'sh', 'shell', ''].includes(line.language));
const TABLES = everyTable();
const SOURCES = sourceFiles();

/** A problem as the failure lists it: the page, then what is wrong. */
type Problems = string[];

function unique<T>(values: Iterable<T>): T[] {
  return [...new Set(values)];
}

// ---- CLI flags ------------------------------------------------------------------------------------------

type OptionSpec = { readonly type: 'string' | 'boolean'; readonly short?: string };
type Options = Readonly<Record<string, OptionSpec>>;

/** Each CLI of package.json's scripts, as the docs run it, and the options its parseArgs reads. */
const CLIS: Readonly<Record<string, Options>> = {
  'npm start': START_OPTIONS,
  'npm run serve': SERVE_OPTIONS,
  'npm run enqueue': ENQUEUE_OPTIONS,
  'npm run connections': CONNECTIONS_OPTIONS,
  'npm run bench': BENCH_CLI_OPTIONS,
  'npm run bench:reconciler': RECONCILER_BENCH_CLI_OPTIONS,
  'npm run soak': SOAK_CLI_OPTIONS,
  'npm run sim': SIM_OPTIONS,
};

/** package.json's scripts that are not one of CLIS, and why: their arguments are another program's. */
const OTHER_SCRIPTS: Readonly<Record<string, string>> = {
  test: 'its arguments go to vitest (dev/test-run.ts)',
  typecheck: 'tsc --noEmit, no arguments',
  synth: "cdk synth: the CDK CLI's flags (its -c gives the context keys, checked below)",
  'cost:idle': 'dev/cost/idle-cost.ts: context values only, `-c key=value` as for cdk (the keys checked below)',
};

const SCRIPTS: Readonly<Record<string, string>> = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts;

/** The CLI a script is: `tour` is `npm start -- --tour`. */
function cliOfScript(script: string): string {
  return script === 'start' || script === 'tour' ? 'npm start' : `npm run ${script}`;
}

/**
 * Flags that the docs name in their prose alone, not on a command line, and that are another
 * program's (none of our CLIs reads them). Kept small: a flag on a command line of another program
 * (`aws …`, `curl …`, `npx cdk …`) is that program's without being listed here, and so is one named
 * alone on a page that shows it on such a command line.
 */
const OTHER_PROGRAMS_FLAGS: Readonly<Record<string, string>> = {
  c: "the CDK CLI's context flag (`-c key=value`): its keys are held to the code below",
  'cloudformation-execution-policies': "`cdk bootstrap`'s, in the README's first deployment",
  'enable-source-maps': "Node.js's, which the stacks set in NODE_OPTIONS",
  'max-old-space-size': "Node.js's heap limit, for the long simulations (NODE_OPTIONS)",
  'XX:TieredStopAtLevel': "the JVM's, with which DynamoDB Local runs",
  Xmx: "the JVM's heap limit for DynamoDB Local",
  cors: "DynamoDB Local's own",
};

/** The first words of command lines that are other programs' (their flags are theirs): the AWS CLI, curl and the docs' curl function `api`, the shell's. */
const OTHER_PROGRAMS = new Set(['aws', 'curl', 'api', 'npx', 'cdk', 'jq', 'printf', 'apt-get', 'free', '/usr/bin/time', 'tsc', 'node', 'java', 'git', 'eval', 'chmod', 'cat', 'group', 'out', 'for', 'do', 'done']);

/** The flags of other programs' command lines on each page (`npx cdk deploy --exclusively …`). */
function otherProgramsFlagsByPage(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const { path, text } of [...SHELL_LINES, ...SPANS]) {
    for (const command of commandsOf(text)) {
      const ws = words(command.replace(/^\$ /, ''));
      if (!OTHER_PROGRAMS.has(ws[0] ?? '')) continue;
      for (const word of ws.slice(1)) {
        const flag = flagOf(word);
        if (flag !== undefined) out.set(path, new Set([...(out.get(path) ?? []), flag]));
      }
    }
  }
  return out;
}

/** A flag as named on a page: on one CLI's command line (`cli`), or alone in the prose (`cli` undefined). */
interface FlagUse {
  path: string;
  where: string;
  flag: string;
  /** `--` (long) or `-` (short). */
  dashes: '--' | '-';
  cli?: string;
  /** `npm run connections -- remove …`: the command. */
  command?: string;
}

/** The CLI of a command line's words (`npm run enqueue -- …`), with the words after `--`; undefined for another program. */
function ourCommand(ws: readonly string[]): { cli: string; args: string[]; script: string } | undefined {
  if (ws[0] !== 'npm') return undefined;
  let script: string;
  let rest: string[];
  if (ws[1] === 'start' || ws[1] === 'test') [script, rest] = [ws[1], ws.slice(2)];
  else if (ws[1] === 'run' && ws[2] !== undefined) [script, rest] = [ws[2], ws.slice(3)];
  else return undefined;
  // Words before `--` are npm's own; after it, the script's.
  return { cli: cliOfScript(script), script, args: rest[0] === '--' ? rest.slice(1) : [] };
}

/** The flags and positional words of a CLI's arguments, a string option's value skipped. */
function argsOf(args: readonly string[], options: Options | undefined): { flags: Array<{ flag: string; dashes: '--' | '-' }>; positionals: string[] } {
  const flags: Array<{ flag: string; dashes: '--' | '-' }> = [];
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i += 1) {
    const word = args[i]!;
    const flag = flagOf(word);
    if (flag === undefined) {
      positionals.push(word);
      continue;
    }
    const dashes = word.startsWith('--') ? '--' : '-';
    flags.push({ flag, dashes });
    const spec = options === undefined ? undefined : dashes === '--' ? options[flag] : Object.values(options).find((o) => o.short === flag);
    if (spec?.type === 'string' && !word.includes('=')) i += 1;
  }
  return { flags, positionals };
}

/** The flags of a command line of ours, attributed to its CLI (and, for `npm run connections`, its command). */
function usesOfCommand(path: string, where: string, ws: readonly string[]): { uses: FlagUse[]; script?: string } {
  const ours = ourCommand(ws);
  if (ours === undefined) return { uses: [] };
  const options = CLIS[ours.cli];
  const { flags, positionals } = argsOf(ours.args, options);
  const command = ours.cli === 'npm run connections' ? positionals[0] : undefined;
  const uses = flags.map(({ flag, dashes }) => ({ path, where, flag, dashes, cli: ours.cli, ...(command !== undefined ? { command } : {}) }));
  return { uses, script: ours.script };
}

/** Every flag the docs name, and every npm script they run. */
function flagUses(): { uses: FlagUse[]; scripts: Array<{ path: string; script: string }> } {
  const uses: FlagUse[] = [];
  const scripts: Array<{ path: string; script: string }> = [];
  const command = (path: string, where: string, text: string): void => {
    for (const part of commandsOf(text)) {
      const found = usesOfCommand(path, where, words(part));
      uses.push(...found.uses);
      if (found.script !== undefined) scripts.push({ path, script: found.script });
    }
  };
  for (const line of SHELL_LINES) command(line.path, line.text, line.text);
  for (const span of SPANS) {
    const ws = words(span.text.replace(/^\$ /, ''));
    const first = ws[0] ?? '';
    if (first === 'npm' || /^[A-Z][A-Z0-9_]*=/.test(first)) command(span.path, span.text, span.text);
    else if (first === '--' || flagOf(first) !== undefined) {
      // Alone in the prose: `--stage <stage>`, `-- --help`.
      for (const { flag, dashes } of argsOf(first === '--' ? ws.slice(1) : ws, undefined).flags) uses.push({ path: span.path, where: span.text, flag, dashes });
    } else if (first in CONNECTIONS_COMMANDS) {
      // `remove --purge`, `list --json`: a command of npm run connections.
      for (const { flag, dashes } of argsOf(ws.slice(1), CONNECTIONS_OPTIONS).flags) uses.push({ path: span.path, where: span.text, flag, dashes, cli: 'npm run connections', command: first });
    } else if (!OTHER_PROGRAMS.has(first)) {
      for (const { flag, dashes } of argsOf(ws.slice(1), undefined).flags) uses.push({ path: span.path, where: span.text, flag, dashes });
    }
  }
  // A table of commands (`| command | options (defaults) |`): the flags of a row are its command's.
  for (const { path, table } of TABLES.filter(({ table }) => table.header[0] === 'command')) {
    for (const row of table.rows) {
      const ours = ourCommand(words(codeSpans(row[0]!)[0] ?? ''));
      if (ours === undefined || !(ours.cli in CLIS)) continue;
      for (const cell of row.slice(1)) {
        for (const span of codeSpans(cell)) {
          const ws = words(span);
          if (flagOf(ws[0] ?? '') === undefined) continue;
          for (const { flag, dashes } of argsOf(ws, CLIS[ours.cli]).flags) uses.push({ path, where: `${ours.cli} row: ${span}`, flag, dashes, cli: ours.cli });
        }
      }
    }
  }
  return { uses, scripts };
}

function hasOption(options: Options, flag: string, dashes: '--' | '-'): boolean {
  return dashes === '--' ? flag in options : Object.values(options).some((o) => o.short === flag);
}

/** The CLIs a page runs or names (`npm run soak`, `npm start -- …`): its prose flags are theirs. */
function clisOfPage(path: string, uses: readonly FlagUse[], scripts: ReadonlyArray<{ path: string; script: string }>): string[] {
  const named = [...flat(page(path)).matchAll(/`npm (?:start|run ([\w:-]+))/g)].map((m) => cliOfScript(m[1] ?? 'start'));
  return unique([...named, ...scripts.filter((s) => s.path === path).map((s) => cliOfScript(s.script)), ...uses.filter((u) => u.path === path && u.cli).map((u) => u.cli!)]).filter(
    (cli) => cli in CLIS,
  );
}

describe('CLI flags', () => {
  const { uses, scripts } = flagUses();

  it("knows every CLI of package.json's scripts, and the docs run no script package.json lacks", () => {
    const known = unique(Object.keys(SCRIPTS).filter((script) => !(script in OTHER_SCRIPTS)).map(cliOfScript)).sort();
    expect(known).toEqual(Object.keys(CLIS).sort());
    const missing = scripts.filter(({ script }) => !(script in SCRIPTS)).map(({ path, script }) => `${path}: npm run ${script}`);
    expect(unique(missing)).toEqual([]);
    expect(scripts.length).toBeGreaterThan(50);
  });

  it('names on a command line of ours only the options its CLI reads (and a command of npm run connections only what that command takes)', () => {
    const problems: Problems = [];
    for (const use of uses.filter((u) => u.cli !== undefined && u.cli in CLIS)) {
      const options = CLIS[use.cli!]!;
      // "give Node.js `--max-old-space-size=8192`" in a row of npm run sim: Node.js's flag, not the CLI's.
      if (use.flag in OTHER_PROGRAMS_FLAGS) continue;
      if (!hasOption(options, use.flag, use.dashes)) {
        problems.push(`${use.path}: ${use.dashes}${use.flag} is not an option of ${use.cli} (${use.where})`);
        continue;
      }
      if (use.command !== undefined) {
        const spec = CONNECTIONS_COMMANDS[use.command];
        const long = use.dashes === '--' ? use.flag : Object.entries(CONNECTIONS_OPTIONS).find(([, o]) => 'short' in o && o.short === use.flag)![0];
        if (spec === undefined) problems.push(`${use.path}: npm run connections has no command ${use.command} (${use.where})`);
        else if (!spec.options.includes(long as never) && !CONNECTIONS_DEPLOYMENT_OPTIONS.includes(long as never)) {
          problems.push(`${use.path}: npm run connections -- ${use.command} takes no --${long} (${use.where})`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(uses.filter((u) => u.cli !== undefined).length).toBeGreaterThan(50);
  });

  it("names in its prose only flags a CLI the page runs reads, or another program's (on its command line on the page, or one of a few listed with why)", () => {
    const problems: Problems = [];
    const others = otherProgramsFlagsByPage();
    for (const use of uses.filter((u) => u.cli === undefined)) {
      if (use.flag in OTHER_PROGRAMS_FLAGS || others.get(use.path)?.has(use.flag)) continue;
      const pageClis = clisOfPage(use.path, uses, scripts);
      const candidates = pageClis.length > 0 ? pageClis : Object.keys(CLIS);
      if (!candidates.some((cli) => hasOption(CLIS[cli]!, use.flag, use.dashes))) {
        problems.push(`${use.path}: ${use.dashes}${use.flag} is an option of none of ${candidates.join(', ')} (${use.where})`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('names every option of every CLI: on its command line, in its row, or on a page that runs it', () => {
    const missing: string[] = [];
    for (const [cli, options] of Object.entries(CLIS)) {
      for (const option of Object.keys(options)) {
        const named = uses.some(
          (use) => use.dashes === '--' && use.flag === option && (use.cli === cli || (use.cli === undefined && clisOfPage(use.path, uses, scripts).includes(cli))),
        );
        if (!named) missing.push(`${cli} --${option}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("lists only other programs' flags that a page names alone, away from their command line", () => {
    const others = otherProgramsFlagsByPage();
    for (const flag of Object.keys(OTHER_PROGRAMS_FLAGS)) {
      expect(Object.values(CLIS).some((options) => flag in options), `--${flag} is an option of ours`).toBe(false);
      expect(uses.some((use) => use.flag === flag && use.cli === undefined && !others.get(use.path)?.has(flag)), `${flag} is not needed in the list`).toBe(true);
    }
  });
});

// ---- context keys -----------------------------------------------------------------------------------------

const KEYS: readonly string[] = Object.values(CONTEXT_KEYS);

/** Edits between two names (insertions, deletions, substitutions). */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * Every name a page uses as a context key: after `-c` on a command line, as `name=value` in a code
 * span, named "context key(s)" in a sentence, in the first column of a table headed `key`, and any
 * camelCase code span within two edits of a key (a key misspelt, or renamed by a letter). A name the
 * same page shows refused (`changesRetentionDay: is not a context key of this app`) is the page's
 * example of a mistake; `key` in `-c key=value` is a placeholder.
 */
function contextKeyUses(): Array<{ path: string; name: string; where: string }> {
  const out: Array<{ path: string; name: string; where: string }> = [];
  const add = (path: string, name: string, where: string): void => {
    if (name !== 'key' && !page(path).includes(`${name}: is not a context key`)) out.push({ path, name, where });
  };
  for (const { path, text } of [...SHELL_LINES, ...SPANS]) {
    const ws = words(withoutComment(text));
    ws.forEach((word, i) => {
      if (word === '-c' && ws[i + 1] !== undefined) add(path, ws[i + 1]!.split('=')[0]!, text);
    });
  }
  for (const { path, text, context } of SPANS) {
    const assignment = /^([a-z][A-Za-z0-9]*)=/.exec(text);
    if (assignment) add(path, assignment[1]!, text);
    if (/^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$/.test(text) && !KEYS.includes(text) && KEYS.some((key) => distance(key, text) <= 2)) add(path, text, context);
    // "the context key `logLevel`", "context keys (`childrenPath`, …)"
    for (const m of context.matchAll(/context keys? \(?((?:`[^`]+`(?:,? (?:and |or )?|\s)?)+)/g)) {
      for (const name of codeSpans(m[1]!)) if (name === text && /^[a-z][A-Za-z0-9]*$/.test(name)) add(path, name, context);
    }
  }
  for (const { path, table } of TABLES.filter(({ table }) => table.header[0] === 'key')) {
    for (const row of table.rows) for (const name of codeSpans(row[0]!)) add(path, name, `table row ${row[0]}`);
  }
  return out;
}

describe('context keys', () => {
  const uses = contextKeyUses();

  it('names only keys infra/context.ts reads', () => {
    const unknown = uses.filter(({ name }) => !KEYS.includes(name)).map(({ path, name, where }) => `${path}: ${name} (${where})`);
    expect(unique(unknown)).toEqual([]);
    expect(uses.length).toBeGreaterThan(KEYS.length);
  });

  it('names every key the code reads', () => {
    const named = new Set(SPANS.map((span) => span.text.split('=')[0]!));
    expect(KEYS.filter((key) => !named.has(key))).toEqual([]);
  });

  it('defines each key in exactly one row of a table of keys (docs/configuration.md)', () => {
    const rows = new Map<string, string[]>();
    for (const { path, table } of TABLES.filter(({ table }) => table.header[0] === 'key' && table.header.includes('meaning'))) {
      for (const row of table.rows) for (const name of codeSpans(row[0]!)) rows.set(name, [...(rows.get(name) ?? []), path]);
    }
    const notOnce = KEYS.filter((key) => rows.get(key)?.length !== 1).map((key) => `${key}: ${rows.get(key)?.join(', ') ?? 'no row'}`);
    expect(notOnce).toEqual([]);
    expect([...rows.keys()].filter((name) => !KEYS.includes(name))).toEqual([]);
  });
});

// ---- environment variables ---------------------------------------------------------------------------------

/** The functions' variables (functions/shared/config.ts ENV; client-config.ts reads the same names). */
const FUNCTION_VARIABLES: readonly string[] = Object.values(ENV);

/** What the stacks set on every function beside ENV's (infra/constructs/content-sync-function.ts). */
function stackSetVariables(): string[] {
  const text = SOURCES.get('infra/constructs/content-sync-function.ts')!;
  const environment = /\benvironment: \{\n([\s\S]*?)\n\s*\},/.exec(text)?.[1] ?? '';
  return [...environment.matchAll(/^\s*([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
}

/** Every variable the code reads or sets: the functions', the stacks', and those the CLIs and the harness read by name. */
const READS = environmentReads(SOURCES);
const CODE_VARIABLES = new Set([...FUNCTION_VARIABLES, ...stackSetVariables(), ...READS.keys()]);

/** Variables the code reads that are no setting of ours, so no page need name them. */
const NOT_SETTINGS: Readonly<Record<string, string>> = {
  PATH: "the system's search path, handed as it is to a child process (dev/bench/support/bundles.ts)",
  AWS_DEFAULT_REGION: "the AWS CLI's and SDK's fallback region: the local emulator and the client fall back to it as they do",
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "the AWS SDK's own switch, which the CLIs turn on to keep the SDK's notice about Node.js versions off their output",
};

/**
 * UPPER_SNAKE names the docs use that are neither a variable of the code nor a constant of its
 * sources: other programs' own. Kept small, each with why.
 */
const OTHER_PROGRAMS_NAMES: Readonly<Record<string, string>> = {
  AWS_PROFILE: "the AWS CLI's and SDK's profile",
  AWS_ENDPOINT_URL_DYNAMODB: "the AWS SDK's endpoint variable for DynamoDB: the SDK reads it, not our code",
  AWS_ENDPOINT_URL_EVENTBRIDGE: "the AWS SDK's endpoint variable for EventBridge: the SDK reads it, not our code",
  AES_256: "S3's name for server-side encryption with its own keys",
  AWS_IAM: "API Gateway's name for routes authorized by IAM",
};

/**
 * Every UPPER_SNAKE name the docs use: a code span's leading name (`PROVIDER_BASE_URL`,
 * `CONNECTION_WAIT_SECONDS=2`, `PROVIDER_BASE_URL: is required…`) and any `NAME=` in it, and in a
 * code block a variable set on a command line (`export REVISION_FIELD=meta.rev`). A shell variable a
 * code block reads (`$REFRESH_TOKEN`) is the example's own.
 */
function upperSnakeUses(): Array<{ path: string; name: string; where: string }> {
  const out: Array<{ path: string; name: string; where: string }> = [];
  for (const { path, text } of SPANS) {
    const leading = /^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w(])/.exec(text);
    if (leading) out.push({ path, name: leading[1]!, where: text });
    for (const m of text.matchAll(/(?<![\w$.{])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)=/g)) out.push({ path, name: m[1]!, where: text });
  }
  for (const { path, text } of SHELL_LINES) {
    for (const m of text.matchAll(/(?<![\w$.{])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)=/g)) out.push({ path, name: m[1]!, where: text });
  }
  return out;
}

describe('environment variables', () => {
  const uses = upperSnakeUses();
  const constants = declaredConstants(SOURCES);

  it('finds what the code reads', () => {
    expect(stackSetVariables()).toEqual(expect.arrayContaining(['POWERTOOLS_SERVICE_NAME', 'NODE_OPTIONS']));
    expect([...READS.keys()]).toEqual(expect.arrayContaining(['CONTENT_SYNC_CLIENT_ID', 'CONTENT_SYNC_REFRESH_TOKEN']));
    expect(uses.length).toBeGreaterThan(100);
  });

  it("names only variables the code reads or sets, constants its sources declare, or another program's few names (each listed with why)", () => {
    const unknown = uses
      .filter(({ name }) => !CODE_VARIABLES.has(name) && !constants.has(name) && !(name in OTHER_PROGRAMS_NAMES))
      .map(({ path, name, where }) => `${path}: ${name} (${where})`);
    expect(unique(unknown)).toEqual([]);
    for (const name of Object.keys(OTHER_PROGRAMS_NAMES)) {
      expect(CODE_VARIABLES.has(name) || constants.has(name), `${name} is the code's own now: drop it from the list`).toBe(false);
      expect(uses.some((use) => use.name === name), `${name} is named by no page: drop it from the list`).toBe(true);
    }
  });

  it('names every variable the code reads or sets but the few that are no setting', () => {
    const named = new Set(uses.map(({ name }) => name));
    const missing = [...CODE_VARIABLES].filter((name) => !(name in NOT_SETTINGS) && !named.has(name)).map((name) => `${name} (${READS.get(name) ?? 'functions/shared/config.ts ENV'})`);
    expect(missing).toEqual([]);
    for (const name of Object.keys(NOT_SETTINGS)) expect(CODE_VARIABLES.has(name), `${name} is not read any more: drop it from the list`).toBe(true);
  });

  it("defines each of the functions' variables in exactly one row of a table of variables (docs/configuration.md), the SDK's own endpoint variables in its prose", () => {
    const rows = new Map<string, string[]>();
    for (const { path, table } of TABLES.filter(({ table }) => table.header[0] === 'variable' && table.header.includes('meaning'))) {
      for (const row of table.rows) for (const name of codeSpans(row[0]!)) rows.set(name, [...(rows.get(name) ?? []), path]);
    }
    const ours = FUNCTION_VARIABLES.filter((name) => !name.startsWith('AWS_'));
    expect(ours.filter((name) => !rows.has(name))).toEqual([]);
    expect([...rows].filter(([, paths]) => paths.length !== 1).map(([name, paths]) => `${name}: ${paths.join(', ')}`)).toEqual([]);
    expect([...rows.keys()].filter((name) => !CODE_VARIABLES.has(name))).toEqual([]);
  });

  it('finds the constants the sources declare', () => {
    // The finder itself: a few constants the pages name.
    for (const name of ['ITEM_URL_SECONDS', 'CHUNK_SIZE', 'RECONCILER_WORKERS', 'DYNAMODB_LOCAL_HEAP_MB']) expect(constants.has(name), name).toBe(true);
    expect(uses.every(({ name }) => UPPER_SNAKE.test(name))).toBe(true);
  });
});

// ---- routes and error codes (docs/openapi.json) ------------------------------------------------------------

interface OpenApiDoc {
  paths: Record<string, Record<string, { parameters?: Array<{ $ref?: string; name?: string; in?: string }>; responses?: Record<string, { $ref?: string }> }>>;
  components: { parameters: Record<string, { name: string; in: string }>; responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>; schemas: Record<string, any> };
}

const OPENAPI: OpenApiDoc = JSON.parse(readFileSync(join(ROOT, 'docs/openapi.json'), 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

interface Operation {
  method: string;
  path: string;
  query: string[];
}

const OPERATIONS: readonly Operation[] = Object.entries(OPENAPI.paths).flatMap(([path, item]) =>
  Object.entries(item)
    .filter(([method]) => METHODS.includes(method))
    .map(([method, operation]) => ({
      method: method.toUpperCase(),
      path,
      query: (operation.parameters ?? [])
        .map((p) => (p.$ref ? OPENAPI.components.parameters[p.$ref.split('/').pop()!]! : p))
        .filter((p) => p.in === 'query')
        .map((p) => p.name!),
    })),
);

const ref = (pointer: string | undefined): string | undefined => pointer?.split('/').pop();

/** Each error code of the document, with the statuses it answers (a response's schema `{"error": {"code": <enum>}}`). */
function errorCodes(): Map<string, Set<number>> {
  const out = new Map<string, Set<number>>();
  for (const item of Object.values(OPENAPI.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const named = ref(response.$ref);
        const schema = named ? ref(OPENAPI.components.responses[named]?.content?.['application/json']?.schema?.$ref) : undefined;
        const codes: string[] | undefined = schema ? OPENAPI.components.schemas[schema]?.properties?.error?.properties?.code?.enum : undefined;
        for (const code of codes ?? []) out.set(code, new Set([...(out.get(code) ?? []), Number(status)]));
      }
    }
  }
  return out;
}

const ERROR_CODES = errorCodes();

/** A path's segments; a placeholder (`{connection}`, `<id>`, `…`) stands for any one segment. */
function segments(path: string): string[] {
  return path.replace(/^\/+/, '').split('/');
}

const PLACEHOLDER = /^(?:\{[^}]*\}|<[^>]*>|…)$/;

/** The operations a route as a page writes it may be: `…/items/{id}` stands for any path ending so. */
function operationsOf(method: string, path: string): Operation[] {
  const suffix = path.startsWith('…');
  const doc = segments(path.replace(/^…/, ''));
  return OPERATIONS.filter((op) => {
    if (op.method !== method) return false;
    const mine = segments(op.path);
    const compared = suffix ? mine.slice(mine.length - doc.length) : mine;
    if (compared.length !== doc.length) return false;
    return compared.every((segment, i) => {
      const written = doc[i]!;
      if (PLACEHOLDER.test(written)) return PLACEHOLDER.test(segment) || written === '…';
      return written === segment || /^\{[^}]*\}$/.test(segment);
    });
  });
}

/**
 * Every route the docs name: a code span `METHOD /path[?query]` (the provider's own, `GET
 * {baseUrl}/…`, left out: docs/provider-api.md) and every curl line of the client API (`curl -X POST
 * "$API/connections/acme/pause"`, the docs' shell function `api` too).
 */
function routeUses(): Array<{ path: string; method: string; route: string; query: string[]; where: string; curl: boolean }> {
  const out: Array<{ path: string; method: string; route: string; query: string[]; where: string; curl: boolean }> = [];
  for (const { path, text } of SPANS) {
    const m = /^(GET|PUT|POST|DELETE|PATCH|HEAD|OPTIONS)\s+(\S+)$/.exec(text.trim());
    if (!m || m[2]!.startsWith('{baseUrl}')) continue;
    const [route, query = ''] = m[2]!.split('?') as [string, string | undefined];
    // A query written as a template (`?status=&limit=`) names the parameters; one with values is an example.
    const template = query !== '' && query.split('&').every((pair) => pair.endsWith('='));
    out.push({ path, method: m[1]!, route, query: template ? query.split('&').map((pair) => pair.slice(0, -1)) : [], where: text, curl: false });
  }
  for (const { path, text } of [...SHELL_LINES, ...SPANS]) {
    for (const command of commandsOf(text)) {
      const ws = words(command);
      if (ws[0] !== 'curl' && ws[0] !== 'api') continue;
      const url = /(?:\$API\/|\$\{API\}|:<port>\/|(?<=\s)['"])(connections(?:\/[^\s'"?]*)?)/.exec(command);
      if (!url) continue;
      const method = /(?:^|\s)-X\s+([A-Z]+)/.exec(command)?.[1] ?? 'GET';
      out.push({ path, method, route: `/${url[1]!}`, query: [], where: command, curl: true });
    }
  }
  return out;
}

describe('routes of the client API', () => {
  const uses = routeUses();

  it('names only operations docs/openapi.json documents, and only their query parameters', () => {
    const problems: Problems = [];
    for (const use of uses) {
      const ops = operationsOf(use.method, use.route);
      if (ops.length !== 1) problems.push(`${use.path}: ${use.method} ${use.route} is ${ops.length === 0 ? 'no' : 'more than one'} operation of docs/openapi.json (${use.where})`);
      for (const name of use.query) if (!ops.some((op) => op.query.includes(name))) problems.push(`${use.path}: ${use.method} ${use.route} takes no ?${name}`);
    }
    expect(problems).toEqual([]);
    expect(uses.filter((use) => use.curl).length).toBeGreaterThan(10);
  });

  it('names every operation of docs/openapi.json, and docs/client-api.md lists each in its table of routes', () => {
    const named = (op: Operation) => uses.some((use) => !use.curl && operationsOf(use.method, use.route).includes(op));
    expect(OPERATIONS.filter((op) => !named(op)).map((op) => `${op.method} ${op.path}`)).toEqual([]);
    const listed = TABLES.filter(({ path, table }) => path === 'docs/client-api.md' && table.header.join(' | ') === 'route | body | answer').flatMap(({ table }) =>
      table.rows.map((row) => codeSpans(row[0]!)[0]!),
    );
    const rowsOf = (op: Operation) => listed.filter((route) => {
      const [method, path] = route.split(/\s+/) as [string, string];
      return operationsOf(method, path.split('?')[0]!).includes(op);
    });
    expect(OPERATIONS.filter((op) => rowsOf(op).length === 0).map((op) => `${op.method} ${op.path}`)).toEqual([]);
  });
});

/**
 * Every error code the docs name with its status: a table with a `status` and a `code` column
 * (each code its row's status, in order), "409 `conflict`" in the prose, "# 400 bad-request" in a code
 * block's comment. The dead-letter reasons are sentences, not codes.
 */
function errorCodeUses(): Array<{ path: string; code: string; statuses: number[]; where: string; inTable: boolean }> {
  const out: Array<{ path: string; code: string; statuses: number[]; where: string; inTable: boolean }> = [];
  for (const { path, table } of TABLES) {
    const codeColumn = table.header.indexOf('code');
    const statusColumn = table.header.indexOf('status');
    if (codeColumn < 0 || statusColumn < 0) continue;
    for (const row of table.rows) {
      const codes = codeSpans(row[codeColumn]!);
      const statuses = [...row[statusColumn]!.matchAll(/\b\d{3}\b/g)].map((m) => Number(m[0]));
      codes.forEach((code, i) => out.push({ path, code, statuses: statuses.length === codes.length ? [statuses[i]!] : statuses, where: row.join(' | ').slice(0, 80), inTable: true }));
    }
  }
  for (const path of DOC_PAGES) {
    for (const m of flat(withoutCodeBlocks(page(path))).matchAll(/\b([45]\d\d) `([a-z][a-z0-9]*(?:-[a-z0-9]+)*)`/g)) out.push({ path, code: m[2]!, statuses: [Number(m[1])], where: m[0], inTable: false });
  }
  for (const { path, text } of SHELL_LINES) {
    for (const m of commentOf(text).matchAll(/\b([45]\d\d) ([a-z]+(?:-[a-z]+)+)\b/g)) out.push({ path, code: m[2]!, statuses: [Number(m[1])], where: text, inTable: false });
  }
  return out;
}

describe('error codes of the client API', () => {
  const uses = errorCodeUses();

  it("are the document's, each answered with its status as routes.ts answers it", () => {
    expect([...ERROR_CODES.keys()].length).toBeGreaterThan(5);
    for (const [code, statuses] of ERROR_CODES) {
      if ([...statuses].every((status) => status >= 500)) continue; // app.ts's answers to a failure inside (openapi.test.ts reaches them)
      expect([errorResponse(code as ErrorCode, '').statusCode], code).toEqual([...statuses]);
    }
  });

  it('names only codes the document has, each with a status it answers', () => {
    const problems: Problems = [];
    for (const use of uses) {
      const statuses = ERROR_CODES.get(use.code);
      if (statuses === undefined) problems.push(`${use.path}: ${use.code} is no error code of docs/openapi.json (${use.where})`);
      else if (!use.statuses.some((status) => statuses.has(status))) problems.push(`${use.path}: ${use.code} is answered with ${[...statuses].join(', ')}, not ${use.statuses.join(', ')} (${use.where})`);
    }
    expect(unique(problems)).toEqual([]);
    expect(uses.filter((use) => !use.inTable).length).toBeGreaterThan(3);
  });

  it('names every code, in a table of errors', () => {
    const inTables = new Set(uses.filter((use) => use.inTable).map((use) => use.code));
    expect([...ERROR_CODES.keys()].filter((code) => !inTables.has(code))).toEqual([]);
  });
});

// ---- metric names -----------------------------------------------------------------------------------------

/** Every metric the functions publish: each `…_METRIC_NAMES` of every metric-names.ts. */
const METRICS: ReadonlySet<string> = new Set(
  Object.entries({ ...SHARED_METRIC_MODULE, ...CHANGE_EVENTS_METRIC_MODULE })
    .filter(([name]) => name.endsWith('_METRIC_NAMES'))
    .flatMap(([, names]) => Object.values(names as Record<string, string>)),
);

/** A metric's shape: PascalCase, neither an alarm's name nor the namespace. */
function metricShaped(text: string): boolean {
  return /^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$/.test(text) && !text.endsWith('Alarm') && text !== METRICS_NAMESPACE;
}

/**
 * Every metric the docs name: a code span in the `metric` column of a table; a PascalCase span
 * right after the word metric (`the metric \`RecordsMovedToBackground\``, `metrics \`A\`, \`B\` and
 * \`C\``); one an alarm compares (`\`ChangesUnreadable\` ≥ 1`); and every PascalCase span of a list
 * (`\`A\`, \`B\` and \`C\``) that holds a metric, so that a list of metrics holds no other name (an
 * alarm's name and the namespace aside).
 */
function metricUses(): Array<{ path: string; name: string; where: string; inTable: boolean }> {
  const out: Array<{ path: string; name: string; where: string; inTable: boolean }> = [];
  for (const { path, table } of TABLES) {
    const column = table.header.indexOf('metric');
    if (column < 0) continue;
    for (const row of table.rows) for (const name of codeSpans(row[column]!)) out.push({ path, name, where: row[column]!, inTable: true });
  }
  const contexts = unique(SPANS.map(({ path, context }) => `${path}\n${context}`)).map((key) => key.split('\n') as [string, string]);
  for (const [path, context] of contexts) {
    const add = (names: string[], where: string): void => {
      for (const name of names.filter(metricShaped)) out.push({ path, name, where, inTable: false });
    };
    for (const m of context.matchAll(/\bmetrics? ((?:`[^`]+`(?:,? (?:and|or) |, )?)+)/gi)) add(codeSpans(m[1]!), m[0]);
    for (const m of context.matchAll(/`([^`]+)` ≥/g)) add([m[1]!], m[0]);
    for (const m of context.matchAll(/`[^`]+`(?:(?:,? and |,? or |, )`[^`]+`)+/g)) {
      const names = codeSpans(m[0]);
      if (names.some((name) => METRICS.has(name))) add(names, m[0]);
    }
  }
  return out;
}

describe('metric names', () => {
  const uses = metricUses();

  it('reads every metric-names.ts of the sources', () => {
    const files = [...SOURCES.keys()].filter((path) => path.endsWith('/metric-names.ts')).sort();
    expect(files).toEqual(['functions/change-events/metric-names.ts', 'functions/shared/metric-names.ts']);
    expect(METRICS.size).toBeGreaterThan(30);
  });

  it('names only metrics the functions publish', () => {
    expect(unique(uses.filter(({ name }) => !METRICS.has(name)).map(({ path, name, where }) => `${path}: ${name} (${where})`))).toEqual([]);
  });

  it("lists every metric in docs/operations.md's table of metrics", () => {
    const listed = new Set(uses.filter((use) => use.inTable && use.path === 'docs/operations.md').map((use) => use.name));
    expect([...METRICS].filter((name) => !listed.has(name))).toEqual([]);
  });
});

// ---- counts of tests ----------------------------------------------------------------------------------------

describe('counts of tests', () => {
  it('are stated by no page: they change with every commit, and no test could keep them true', () => {
    const counts = DOC_PAGES.flatMap((path) =>
      [...flat(page(path)).matchAll(/\b\d[\d,]* (?:more |fewer |new )?(?:tests?|test files?|test cases?|assertions?)\b|\b(?:tests?|test files?) (?:more|fewer)\b/gi)].map((m) => `${path}: ${m[0]}`),
    );
    expect(counts).toEqual([]);
  });
});
