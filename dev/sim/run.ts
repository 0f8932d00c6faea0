/**
 * `npm run sim [-- [--short] [scenario...]]`: simulations in virtual time, each the real handlers on a
 * virtual clock at full scale or `--short` (what `npm test` runs). SCENARIOS below lists them, with
 * what each runs and the options it reads; `npm run sim -- --help` prints that list. With no
 * scenario named, the provider pace's scenarios (`pace`) run.
 *
 * Prints each scenario's figures and checks, writes them to .bench/sim-latest.json (or
 * .bench/sim-<name>-latest.json when another scenario ran: sim-reconcile-latest.json...), exits 1
 * when a check fails and 2 on a mistake in the command line (naming it, with the usage).
 */
import '../system/sdk-notice.js';
import { dynamoLatency } from '../fakes/dynamo-latency.js';
import { missingJava } from '../fakes/dynamodb-local.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NUMBER_RULES } from '../../infra/context.js';
import { isMain } from '../../tools/cli-main.js';
import { commandLineMistake, MAX_LATENCY_FACTOR, parsedFactor } from '../bench/support/cli.js';
import { n } from '../bench/support/format.js';
import { BENCH_DIR, machineInfo } from '../bench/support/machine.js';
import { ACCOUNTS_FULL, ACCOUNTS_SHORT, accountsPass } from './accounts-scenario.js';
import { BACKLOG_FULL, BACKLOG_SHORT, backlogScenario, type BacklogScale } from './backlog-scenario.js';
import { BUSY_FULL, BUSY_SHORT, busyScenario, type BusyScale } from './busy-scenario.js';
import { CHANGES_FULL, CHANGES_SHORT, changesExpected, type ChangesScale } from './changes-scale.js';
import { changesScenario } from './changes-scenario.js';
import { CONNECTIONS_FULL, CONNECTIONS_SHORT, connectionsScenario } from './connections-scenario.js';
import { DISCOVERY_FULL, DISCOVERY_SHORT, discoveryScenario, type DiscoveryScale } from './discovery-scenario.js';
import { FAIRNESS_FULL, FAIRNESS_SHORT, fairnessScenario } from './fairness-scenario.js';
import { FULL_SCALE, knownLimit, outage, SHORT_SCALE, unknownLimit } from './pace-scenarios.js';
import { PUSH_FULL, PUSH_SHORT, pushScenario, type PushScale } from './push-scenario.js';
import { RECONCILE_FULL, RECONCILE_SHORT, reconcilePass, type ReconcileScale } from './reconcile-scenario.js';
import { REFRESHER_FULL, REFRESHER_SHORT, refresherScenario } from './refresher-scenario.js';
import { SCOPE_ACCOUNTS_FULL, SCOPE_ACCOUNTS_SHORT, scopeAccounts } from './scope-accounts-scenario.js';
import { LIMITS_FULL, LIMITS_SHORT, OUTAGE_FULL, OUTAGE_SHORT, outageByScope, perAccountLimits } from './scope-scenarios.js';
import { setSimDynamoLatency } from './meters.js';
import { judged, type ScenarioResult } from './scenario.js';

interface RunOptions {
  short: boolean;
  ids: number | undefined;
  unknownLimit: boolean;
  /** `--batch-size N` (push only): the context key syncBatchSize the run deploys. */
  batchSize?: number | undefined;
  /** `--limit N` (push only): the provider's limit L, told to the system. */
  limit?: number | undefined;
  /** `--dynamo-latency F` (every scenario): scales AWS's DynamoDB latency (dev/fakes/dynamo-latency.ts); 1 when undefined. */
  dynamoLatency?: number | undefined;
}

/** Progress lines of the longer scenarios, on standard error. */
function progress(line: string): void {
  process.stderr.write(`  … ${line}\n`);
}

/** The options a scenario may read besides --short (which every scenario reads). */
type ScenarioOption = 'ids' | 'unknown-limit' | 'batch-size' | 'limit';

/** A scenario: what it runs, at which sizes and with which options (the usage text), and how. */
interface Scenario {
  about: string;
  /** Its size at full scale. */
  full: string;
  /** Its size with --short (what `npm test` runs). */
  short: string;
  /** The options it reads besides --short. */
  options?: readonly ScenarioOption[];
  run: (options: RunOptions) => Promise<ScenarioResult>;
}

/** "a 6-hour" or "a 45-minute". */
function aDuration(minutes: number): string {
  return minutes % 60 === 0 ? `a ${minutes / 60}-hour` : `a ${minutes}-minute`;
}

const paceSize = (scale: typeof FULL_SCALE): string => `${n(scale.ids)} ids, L = ${scale.limit}/s, ${scale.containers} containers`;
const outageSize = (scale: typeof FULL_SCALE): string => `${paceSize(scale)}, ${aDuration(scale.outageMinutes)} outage`;

const PACE_SCENARIOS: Record<string, Scenario> = {
  unknown: {
    about: 'the provider pace finds an unpublished limit L, keeps to it, follows it when it halves and when it doubles',
    full: paceSize(FULL_SCALE),
    short: paceSize(SHORT_SCALE),
    run: (o) => unknownLimit(o.short ? SHORT_SCALE : FULL_SCALE),
  },
  known: {
    about: 'the provider pace told L (providerRequestsPerSecond): use of L, 429s',
    full: paceSize(FULL_SCALE),
    short: paceSize(SHORT_SCALE),
    run: (o) => knownLimit(o.short ? SHORT_SCALE : FULL_SCALE),
  },
  outage: {
    about: 'every id synced, then a provider outage (every request 503) while users send every id again: requests a minute during it, ids lost, the drain after it',
    full: outageSize(FULL_SCALE),
    short: outageSize(SHORT_SCALE),
    run: (o) => outage(o.short ? SHORT_SCALE : FULL_SCALE, 'provider'),
  },
  token: {
    about: 'as outage, with the access token revoked and the refresh token refused instead',
    full: outageSize(FULL_SCALE),
    short: outageSize(SHORT_SCALE),
    run: (o) => outage(o.short ? SHORT_SCALE : FULL_SCALE, 'token'),
  },
};

const SCOPE_SCENARIOS: Record<string, Scenario> = {
  'scope-limits': {
    about: 'paceScope connection: accounts whose limits differ, the fastest one\'s halving; progress on standard error',
    full: `${LIMITS_FULL.accounts} accounts of ${LIMITS_FULL.limits[0]} to ${LIMITS_FULL.limits[1]} requests/s`,
    short: `${LIMITS_SHORT.accounts} accounts of ${LIMITS_SHORT.limits[0]} to ${LIMITS_SHORT.limits[1]} requests/s`,
    run: (o) => perAccountLimits(o.short ? LIMITS_SHORT : LIMITS_FULL, progress),
  },
  'scope-accounts': {
    about: 'paceScope connection as deployed (both queues, batches of 100): accounts whose limits differ, each sending a backlog at once; progress on standard error',
    full: `${SCOPE_ACCOUNTS_FULL.accounts} accounts of ${SCOPE_ACCOUNTS_FULL.limits[0]} to ${SCOPE_ACCOUNTS_FULL.limits[1]} requests/s`,
    short: `${SCOPE_ACCOUNTS_SHORT.accounts} accounts of ${SCOPE_ACCOUNTS_SHORT.limits[0]} and ${SCOPE_ACCOUNTS_SHORT.limits[1]} requests/s`,
    run: (o) => scopeAccounts(o.short ? SCOPE_ACCOUNTS_SHORT : SCOPE_ACCOUNTS_FULL, progress),
  },
  'scope-outage': {
    about: 'a provider outage over many connections, under each paceScope',
    full: `${OUTAGE_FULL.connections} connections × ${OUTAGE_FULL.idsEach} ids, ${aDuration(OUTAGE_FULL.outageMinutes)} outage`,
    short: `${OUTAGE_SHORT.connections} connections × ${OUTAGE_SHORT.idsEach} id, ${aDuration(OUTAGE_SHORT.outageMinutes)} outage`,
    run: (o) => outageByScope(o.short ? OUTAGE_SHORT : OUTAGE_FULL),
  },
};

/** Every scenario by name: the usage text lists them in this order. */
const SCENARIOS: Record<string, Scenario> = {
  ...PACE_SCENARIOS,
  ...SCOPE_SCENARIOS,
  reconcile: {
    about: 'a reconciliation pass: the real reconciler on its schedule sends every id again; progress on standard error',
    full: `${n(RECONCILE_FULL.ids)} ids, L = ${RECONCILE_FULL.limit}/s told, freshnessHours ${RECONCILE_FULL.freshnessHours} (give Node.js --max-old-space-size=8192 and hours: docs/measurements.md has its real time)`,
    short: `${n(RECONCILE_SHORT.ids)} ids, L = ${RECONCILE_SHORT.limit}/s told`,
    options: ['ids', 'unknown-limit'],
    run: (o) => reconcilePass(reconcileScale(o), progress),
  },
  connections: {
    about: 'many connections, one revoked at the provider, then idle connections the refresher keeps alive; progress on standard error',
    full: `${n(CONNECTIONS_FULL.connections)} connections × ${CONNECTIONS_FULL.idsEach} ids, L = ${CONNECTIONS_FULL.limit}/s, ${CONNECTIONS_FULL.days} simulated days`,
    short: `${CONNECTIONS_SHORT.connections} connections × ${CONNECTIONS_SHORT.idsEach} ids, L = ${CONNECTIONS_SHORT.limit}/s, ${CONNECTIONS_SHORT.days} simulated days`,
    run: (o) => connectionsScenario(o.short ? CONNECTIONS_SHORT : CONNECTIONS_FULL, progress),
  },
  accounts: {
    about: 'a reconciliation pass over many accounts: each account\'s own pass, the cost a million ids, the refresher meanwhile; progress on standard error',
    full: `${n(ACCOUNTS_FULL.connections)} connections × ${ACCOUNTS_FULL.idsEach} ids, L = ${ACCOUNTS_FULL.limit}/s told (give Node.js --max-old-space-size=8192 and hours: docs/measurements.md has its real time)`,
    short: `${ACCOUNTS_SHORT.connections} connections × ${ACCOUNTS_SHORT.idsEach} ids, L = ${ACCOUNTS_SHORT.limit}/s told`,
    run: (o) => accountsPass(o.short ? ACCOUNTS_SHORT : ACCOUNTS_FULL, progress),
  },
  fairness: {
    about: 'quiet accounts beside one account\'s backfill, sent with --backfill, without it and without message groups (--short: with --backfill only); progress on standard error',
    full: `${FAIRNESS_FULL.quietAccounts} quiet accounts, a backfill of ${n(FAIRNESS_FULL.backfillIds)} ids, L = ${FAIRNESS_FULL.limit}/s`,
    short: `${FAIRNESS_SHORT.quietAccounts} quiet accounts, a backfill of ${n(FAIRNESS_SHORT.backfillIds)} ids, L = ${FAIRNESS_SHORT.limit}/s`,
    run: (o) => (o.short ? fairnessScenario(FAIRNESS_SHORT, ['background'], progress) : fairnessScenario(FAIRNESS_FULL, undefined, progress)),
  },
  backlog: {
    about: 'quiet accounts beside one account\'s backlog, sent to the sync queue and with --backfill, at each L told and not told; progress on standard error',
    full: backlogSize(BACKLOG_FULL),
    short: backlogSize(BACKLOG_SHORT),
    run: (o) => backlogScenario(o.short ? BACKLOG_SHORT : BACKLOG_FULL, progress),
  },
  busy: {
    about: "one account's users beside its own backfill at an unknown limit, and quiet accounts; progress on standard error",
    full: busySize(BUSY_FULL),
    short: busySize(BUSY_SHORT),
    run: (o) => busyScenario(o.short ? BUSY_SHORT : BUSY_FULL, progress),
  },
  refresher: {
    about: 'the token refresher at scale, against a token endpoint limit the pace has to find; progress on standard error',
    full: `${n(REFRESHER_FULL.connections)} connections in use for ${REFRESHER_FULL.hours} hours (hours of real time: docs/measurements.md)`,
    short: `${REFRESHER_SHORT.connections} connections for ${REFRESHER_SHORT.hours} hour${REFRESHER_SHORT.hours === 1 ? '' : 's'}`,
    run: (o) => refresherScenario(o.short ? REFRESHER_SHORT : REFRESHER_FULL, progress),
  },
  discovery: {
    about: 'a tree mirrored from its root beside quiet accounts; progress on standard error',
    full: discoverySize(DISCOVERY_FULL),
    short: discoverySize(DISCOVERY_SHORT),
    run: (o) => discoveryScenario(discoveryScale(o, false), progress),
  },
  'discovery-cycle': {
    about: 'as discovery, the tree with a cycle; progress on standard error',
    full: discoverySize(DISCOVERY_FULL),
    short: discoverySize(DISCOVERY_SHORT),
    run: (o) => discoveryScenario(discoveryScale(o, true), progress),
  },
  changes: {
    about: 'the changes feed: changes written by the sync, with racing writers, redelivered records, lost answers and stream batches, read by a consumer through the client API that stops and resumes; the cost of a million changes; progress on standard error',
    full: `${changesSize(CHANGES_FULL)} (give Node.js --max-old-space-size=2048; the time and memory it took: docs/changes.md, Measured)`,
    short: changesSize(CHANGES_SHORT),
    run: (o) => changesScenario(o.short ? CHANGES_SHORT : CHANGES_FULL, progress),
  },
  push: {
    about: 'the push path\'s cost: users send N ids at once to the sync queue, unchanged then changed at the provider; progress on standard error',
    full: `${n(PUSH_FULL.ids)} ids, L = ${PUSH_FULL.limit}/s told (about 15 minutes of real time)`,
    short: `${n(PUSH_SHORT.ids)} ids, L = ${PUSH_SHORT.limit}/s told`,
    options: ['ids', 'batch-size', 'limit'],
    run: (o) => pushScenario(pushScale(o), progress),
  },
};

/** Names that run several scenarios: `pace` (the default set) and `scope`. */
const GROUPS: Record<string, string[]> = { pace: Object.keys(PACE_SCENARIOS), scope: Object.keys(SCOPE_SCENARIOS) };
const DEFAULT_GROUP = 'pace';

function busySize(scale: BusyScale): string {
  const users = scale.busyUsers;
  return `a backfill of ${n(scale.backfillIds)} ids, its users an id every ${users.everyMs} ms and ${users.burstIds} every ${users.burstEverySeconds} s, ${scale.quietAccounts} quiet accounts, L = ${scale.limit}/s ${scale.limitKnown ? 'told' : 'unknown'}`;
}

function backlogSize(scale: BacklogScale): string {
  const known = scale.limitKnown.length > 1 ? 'told and not' : scale.limitKnown[0] ? 'told' : 'not told';
  return `${scale.quietAccounts} quiet accounts, a backlog of ${n(scale.backfillIds)} ids, L = ${scale.limits.join(' and ')}/s ${known}, ${scale.lanes.length * scale.limits.length * scale.limitKnown.length} runs`;
}

function changesSize(scale: ChangesScale): string {
  return `${n(changesExpected(scale))} changes: ${n(scale.connections)} connections × ${scale.itemsEach} items and a busy one of ${n(scale.busyItems)}, × ${scale.rounds} rounds, L = ${scale.limit}/s told, read every ${scale.consumerPeriodSeconds} s`;
}

function discoverySize(scale: DiscoveryScale): string {
  return `${n(scale.items)} items ${scale.depth} deep, L = ${scale.limit}/s told, ${scale.quietAccounts} quiet accounts${scale.ownUsers ? `, the account's own users an id every ${scale.ownUsers.everyMs} ms` : ''}`;
}

/** The push scenario's scale: full or short, `--ids`, `--batch-size` and `--limit` over it. */
export function pushScale(options: Pick<RunOptions, 'short' | 'ids' | 'batchSize' | 'limit'>): PushScale {
  return {
    ...(options.short ? PUSH_SHORT : PUSH_FULL),
    ...(options.ids !== undefined ? { ids: options.ids } : {}),
    ...(options.batchSize !== undefined ? { syncBatchSize: options.batchSize } : {}),
    ...(options.limit !== undefined ? { limit: options.limit } : {}),
  };
}

/** The discovery scenario's scale: full or short, with or without the cycle. */
function discoveryScale(options: Pick<RunOptions, 'short'>, cycle: boolean): DiscoveryScale {
  return { ...(options.short ? DISCOVERY_SHORT : DISCOVERY_FULL), cycle };
}

export function reconcileScale(options: RunOptions): ReconcileScale {
  const base = options.short ? RECONCILE_SHORT : RECONCILE_FULL;
  return { ...base, ...(options.ids !== undefined ? { ids: options.ids } : {}), ...(options.unknownLimit ? { knownLimit: false } : {}) };
}

export function formatScenario(result: ScenarioResult, short = false): string {
  const lines = [`${result.name} (${(result.virtualMs / 3_600_000).toFixed(2)} h virtual, ${(result.realMs / 1000).toFixed(1)} s real)`];
  for (const [name, value] of Object.entries(result.figures)) lines.push(`  ${name}: ${value}`);
  for (const check of result.checks) {
    const mark = check.ok ? 'ok  ' : judged(check, short) ? 'FAIL' : 'info';
    lines.push(`  ${mark} ${check.what}: ${check.value}${judged(check, short) ? '' : ' (judged at full scale only)'}`);
  }
  return lines.join('\n');
}

const { min: BATCH_SIZE_MIN, max: BATCH_SIZE_MAX } = NUMBER_RULES.syncBatchSize;

/** The command line's options, as parseArgs reads them (test/docs holds the docs to them). */
export const OPTIONS = {
  short: { type: 'boolean', default: false },
  ids: { type: 'string' },
  'unknown-limit': { type: 'boolean', default: false },
  'batch-size': { type: 'string' },
  limit: { type: 'string' },
  'dynamo-latency': { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** What each option does (the usage text), and the name of its value when it takes one. */
const OPTION_HELP: Record<keyof typeof OPTIONS, { value?: string; about: string }> = {
  short: { about: 'the small scale, what `npm test` runs' },
  ids: { value: 'N', about: 'the number of ids, at least 100' },
  'unknown-limit': { about: 'L is not told to the system: the pace has to find it' },
  'batch-size': { value: 'N', about: `the context key syncBatchSize the run deploys (${BATCH_SIZE_MIN} to ${BATCH_SIZE_MAX}), to price it` },
  limit: { value: 'N', about: "the provider's limit L, requests a second, told to the system (at least 1): a high one shows what one connection commits when the provider does not bound it" },
  'dynamo-latency': { value: 'F', about: "scales AWS's DynamoDB latency every DynamoDB call takes in virtual time (docs/development.md, AWS's latency): 0 turns it off, 2 doubles it; default 1" },
  help: { about: 'this text' },
};

/** The options every scenario reads. */
const EVERY_SCENARIO: ReadonlySet<keyof typeof OPTIONS> = new Set(['short', 'dynamo-latency', 'help']);

/** What the command line asks for: the usage, a run, or neither because of a mistake (one line naming it). */
export type SimCommand = { help: true } | { mistake: string } | { names: string[]; options: RunOptions };

/** Reads the command line; never throws on a mistake in it. */
export function parseCommandLine(argv: string[]): SimCommand {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(argv);
  } catch (error) {
    const mistake = commandLineMistake(error);
    if (mistake === undefined) throw error;
    return { mistake };
  }
  const { values, positionals } = parsed;
  if (values.help) return { help: true };
  const ids = values.ids === undefined ? undefined : Number(values.ids);
  if (ids !== undefined && !(Number.isSafeInteger(ids) && ids >= 100)) {
    return { mistake: `--ids must be a whole number of at least 100, got ${values.ids}` };
  }
  const batchSize = values['batch-size'] === undefined ? undefined : Number(values['batch-size']);
  if (batchSize !== undefined && !(Number.isSafeInteger(batchSize) && batchSize >= BATCH_SIZE_MIN && batchSize <= BATCH_SIZE_MAX)) {
    return {
      mistake: `--batch-size must be a whole number from ${BATCH_SIZE_MIN} to ${BATCH_SIZE_MAX} (syncBatchSize), got ${values['batch-size']}`,
    };
  }
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit >= 1)) {
    return { mistake: `--limit must be a whole number of at least 1 (requests a second), got ${values.limit}` };
  }
  const factor = values['dynamo-latency'] === undefined ? undefined : parsedFactor(values['dynamo-latency']);
  if (values['dynamo-latency'] !== undefined && factor === undefined) {
    return { mistake: `--dynamo-latency must be a number from 0 to ${MAX_LATENCY_FACTOR}, got ${values['dynamo-latency']}` };
  }
  const names = (positionals.length > 0 ? positionals : [DEFAULT_GROUP]).flatMap((name) => GROUPS[name] ?? [name]);
  const unknown = names.filter((name) => !(name in SCENARIOS));
  if (unknown.length > 0) return { mistake: `unknown scenario ${unknown.join(', ')}` };
  const given: ScenarioOption[] = [
    ...(ids !== undefined ? (['ids'] as const) : []),
    ...(values['unknown-limit'] ? (['unknown-limit'] as const) : []),
    ...(batchSize !== undefined ? (['batch-size'] as const) : []),
    ...(limit !== undefined ? (['limit'] as const) : []),
  ];
  const unread = given.find((option) => !names.some((name) => SCENARIOS[name]!.options?.includes(option)));
  if (unread !== undefined) return { mistake: `--${unread} is read by ${readersOf(unread).join(' and ')} only` };
  return { names, options: { short: values.short, ids, unknownLimit: values['unknown-limit'], batchSize, limit, dynamoLatency: factor } };
}

function parseOptions(argv: string[]) {
  return parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
}

/** The scenarios that read `option`. */
function readersOf(option: ScenarioOption): string[] {
  return Object.keys(SCENARIOS).filter((name) => SCENARIOS[name]!.options?.includes(option));
}

const USAGE_WIDTH = 100;

/** The usage text, from SCENARIOS, GROUPS and OPTIONS. */
export function simUsage(): string {
  const optionLabel = (name: keyof typeof OPTIONS): string => {
    const short = 'short' in OPTIONS[name] ? `-${OPTIONS[name].short}, ` : '';
    const value = OPTION_HELP[name].value;
    return `${short}--${name}${value ? ` ${value}` : ''}`;
  };
  const optionNames = Object.keys(OPTIONS) as (keyof typeof OPTIONS)[];
  const labels = [...Object.keys(SCENARIOS), ...Object.keys(GROUPS), ...optionNames.map(optionLabel)];
  const column = 2 + Math.max(...labels.map((label) => label.length)) + 2;
  const entry = (label: string, ...paragraphs: string[]): string[] =>
    paragraphs.flatMap((text, i) => wrapped(text, USAGE_WIDTH - column).map((line, j) => (i === 0 && j === 0 ? `  ${label}`.padEnd(column) : ' '.repeat(column)) + line));
  const scenarioOptions = (scenario: Scenario): string[] =>
    scenario.options === undefined ? [] : [`options: ${scenario.options.map((name) => `--${name}${OPTION_HELP[name].value ? ` ${OPTION_HELP[name].value}` : ''}`).join(', ')}`];
  const optionReaders = (name: keyof typeof OPTIONS): string => (EVERY_SCENARIO.has(name) ? '' : ` (${readersOf(name as ScenarioOption).join(', ')})`);
  return [
    // The options fill the first lines, each whole; the scenarios on a line of their own.
    ...usageLines(
      'usage: npm run sim -- ',
      optionNames.filter((name) => name !== 'help').map((name) => `[${optionLabel(name)}]`),
    ),
    `${' '.repeat('usage: npm run sim -- '.length)}[scenario or group ...]`,
    '',
    ...wrapped(
      'Simulations in virtual time: the real handlers on a virtual clock, at full scale or --short. ' +
        `With no scenario named, ${DEFAULT_GROUP} runs. Prints each scenario's figures and checks, writes them under ` +
        '.bench/ and exits 1 when a check fails, 2 on a mistake in the command line.',
      USAGE_WIDTH,
    ),
    '',
    'Scenarios:',
    ...Object.entries(SCENARIOS).flatMap(([name, scenario]) =>
      entry(name, scenario.about, `full: ${scenario.full}`, `--short: ${scenario.short}`, ...scenarioOptions(scenario)),
    ),
    '',
    'Groups:',
    ...Object.entries(GROUPS).flatMap(([name, members]) => entry(name, `${members.join(', ')}${name === DEFAULT_GROUP ? ' (the default)' : ''}`)),
    '',
    'Options:',
    ...optionNames.flatMap((name) => entry(optionLabel(name), `${OPTION_HELP[name].about}${optionReaders(name)}`)),
    '',
  ].join('\n');
}

/** `text` in lines of at most `width` characters (a longer word stays whole, and so does `L = 50/s`). */
/** `head` then the options, each whole, the lines within USAGE_WIDTH and indented under the first. */
function usageLines(head: string, options: readonly string[]): string[] {
  const lines: string[] = [];
  let line = head.trimEnd();
  for (const option of options) {
    if (line.length + 1 + option.length > USAGE_WIDTH && line.trim() !== '') {
      lines.push(line);
      line = `${' '.repeat(head.length - 1)}`;
    }
    line = `${line} ${option}`;
  }
  return [...lines, line];
}

function wrapped(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/(?<!=) (?!=)/)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  return [...lines, line];
}

/** Where the usage and the scenarios' figures go. */
export interface SimIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** Runs the command line; returns the exit status. */
export async function main(argv: string[], io: SimIo = process): Promise<number> {
  const command = parseCommandLine(argv);
  if ('help' in command) {
    io.stdout.write(simUsage());
    return 0;
  }
  if ('mistake' in command) {
    io.stderr.write(`${command.mistake}\n\n${simUsage()}`);
    return 2;
  }
  const java = missingJava();
  if (java !== undefined) {
    io.stderr.write(`sim: ${java}\n`);
    return 1;
  }
  const { names, options } = command;
  const machine = machineInfo();
  const scales = {
    ...(names.some((name) => name in PACE_SCENARIOS) ? { pace: options.short ? SHORT_SCALE : FULL_SCALE } : {}),
    ...(names.includes('reconcile') ? { reconcile: reconcileScale(options) } : {}),
    ...(names.includes('connections') ? { connections: options.short ? CONNECTIONS_SHORT : CONNECTIONS_FULL } : {}),
    ...(names.includes('accounts') ? { accounts: options.short ? ACCOUNTS_SHORT : ACCOUNTS_FULL } : {}),
    ...(names.includes('fairness') ? { fairness: options.short ? FAIRNESS_SHORT : FAIRNESS_FULL } : {}),
    ...(names.includes('backlog') ? { backlog: options.short ? BACKLOG_SHORT : BACKLOG_FULL } : {}),
    ...(names.includes('refresher') ? { refresher: options.short ? REFRESHER_SHORT : REFRESHER_FULL } : {}),
    ...(names.includes('discovery') ? { discovery: discoveryScale(options, false) } : {}),
    ...(names.includes('discovery-cycle') ? { discoveryCycle: discoveryScale(options, true) } : {}),
    ...(names.includes('push') ? { push: pushScale(options) } : {}),
    ...(names.includes('changes') ? { changes: options.short ? CHANGES_SHORT : CHANGES_FULL } : {}),
    ...(names.includes('scope-limits') ? { scopeLimits: options.short ? LIMITS_SHORT : LIMITS_FULL } : {}),
    ...(names.includes('scope-accounts') ? { scopeAccounts: options.short ? SCOPE_ACCOUNTS_SHORT : SCOPE_ACCOUNTS_FULL } : {}),
    ...(names.includes('scope-outage') ? { scopeOutage: options.short ? OUTAGE_SHORT : OUTAGE_FULL } : {}),
  };
  const factor = options.dynamoLatency ?? 1;
  io.stdout.write(
    `simulation, ${options.short ? 'short' : 'full'} scale, AWS's DynamoDB latency × ${factor}: ${JSON.stringify(scales)}\n${JSON.stringify(machine)}\n\n`,
  );
  const results: ScenarioResult[] = [];
  // Every simulated DynamoDB client of the run takes the model so scaled (meters.ts trackedDynamo).
  const previous = setSimDynamoLatency(dynamoLatency({ factor }));
  try {
    for (const name of names) {
      const result = await SCENARIOS[name]!.run(options);
      results.push(result);
      io.stdout.write(`${formatScenario(result, options.short)}\n\n`);
    }
  } finally {
    setSimDynamoLatency(previous);
  }
  mkdirSync(BENCH_DIR, { recursive: true });
  // The pace scenarios' figures go to sim-latest.json, the scope scenarios' to sim-scope-latest.json;
  // another scenario's to sim-<its name>-latest.json.
  const other = names.find((name) => !(name in PACE_SCENARIOS));
  const file = other === undefined ? 'sim-latest.json' : other in SCOPE_SCENARIOS ? 'sim-scope-latest.json' : `sim-${other}-latest.json`;
  writeFileSync(join(BENCH_DIR, file), `${JSON.stringify({ machine, scales, dynamoLatency: factor, results }, null, 2)}\n`);
  return results.every((result) => result.checks.every((check) => check.ok || !judged(check, options.short))) ? 0 : 1;
}

if (isMain(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
