/**
 * `npm run sim [-- [--short] [scenario...]]`: simulations in virtual time.
 *
 * - `unknown`, `known`, `outage`, `token` (`pace`, the default set): the provider pace's scenarios
 *   (pace-scenarios.ts), at full scale (2,000 ids, L = 50/s, 5 containers, 6-hour outages) or
 *   `--short` (what `npm test` runs).
 * - `reconcile` (named only): a reconciliation pass (reconcile-scenario.ts), at full scale
 *   (1,000,000 ids, L = 200/s, freshnessHours 24; about 2 ms of real time an id, so give it
 *   `--max-old-space-size=8192` and time) or `--short`. `--ids N` sets the number of ids and
 *   `--unknown-limit` keeps L from the system (the pace has to find it). Progress lines go to
 *   standard error.
 * - `accounts` (named only): a reconciliation pass over many accounts (accounts-scenario.ts), at
 *   full scale (10,000 connections × 100 ids, L = 200/s told, freshnessHours 24; give it
 *   `--max-old-space-size=8192` and about an hour) or `--short` (200 × 10, what `npm test` runs).
 * - `connections` (named only): many connections (connections-scenario.ts), at full scale (1,000
 *   connections × 100 ids, one revoked at the provider, two simulated days) or `--short` (50 × 20,
 *   what `npm test` runs). Progress lines go to standard error.
 * - `refresher` (named only): the token refresher at scale (refresher-scenario.ts): 10,000
 *   connections in use for 24 hours (give it time: most of an hour of real time) or `--short` (60
 *   connections for 3 hours, what `npm test` runs). Progress lines go to standard error.
 * - `fairness` (named only): quiet accounts beside one account's backfill (fairness-scenario.ts), at
 *   full scale (100 quiet accounts, a backfill of 100,000 ids at L = 200/s, sent with --backfill,
 *   without it, and without message groups) or `--short` (10 quiet accounts, 1,000 ids, --backfill
 *   only: what `npm test` runs). Progress lines go to standard error.
 * - `discovery`, `discovery-cycle` (named only): a tree mirrored from its root beside quiet accounts
 *   (discovery-scenario.ts): 100,000 items 12 deep (with a cycle: `discovery-cycle`), L = 200/s
 *   told, 100 quiet accounts; or `--short` (2,000 items 6 deep, 5 quiet accounts; with the cycle:
 *   what `npm test` runs). Progress lines go to standard error.
 * - `push` (named only): the push path's cost (push-scenario.ts): users send N ids at once to the
 *   sync queue, unchanged then changed at the provider, L = 200/s told; at full scale (200,000 ids,
 *   about 15 minutes of real time in all) or `--short` (what `npm test` runs). `--ids N` sets the
 *   number of ids, `--batch-size N` the context key syncBatchSize (what the knob costs). Progress
 *   lines go to standard error.
 * - `scope-limits`, `scope-outage` (together `scope`, named only): the pace's scope
 *   (scope-scenarios.ts): paceScope connection with per-account limits that differ (20 accounts,
 *   5 to 50/s), and a provider outage over 200 connections under each scope; or `--short`.
 *
 * Prints each scenario's figures and checks, writes them to .bench/sim-latest.json (or
 * .bench/sim-<name>-latest.json when another scenario ran: sim-reconcile-latest.json...), exits 1 when a check fails.
 */
import '../system/sdk-notice.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NUMBER_RULES } from '../../infra/context.js';
import { BENCH_DIR, machineInfo } from '../bench/support/machine.js';
import { ACCOUNTS_FULL, ACCOUNTS_SHORT, accountsPass } from './accounts-scenario.js';
import { CONNECTIONS_FULL, CONNECTIONS_SHORT, connectionsScenario } from './connections-scenario.js';
import { DISCOVERY_FULL, DISCOVERY_SHORT, discoveryScenario, type DiscoveryScale } from './discovery-scenario.js';
import { FAIRNESS_FULL, FAIRNESS_SHORT, fairnessScenario } from './fairness-scenario.js';
import { FULL_SCALE, knownLimit, outage, SHORT_SCALE, unknownLimit } from './pace-scenarios.js';
import { PUSH_FULL, PUSH_SHORT, pushScenario, type PushScale } from './push-scenario.js';
import { RECONCILE_FULL, RECONCILE_SHORT, reconcilePass, type ReconcileScale } from './reconcile-scenario.js';
import { REFRESHER_FULL, REFRESHER_SHORT, refresherScenario } from './refresher-scenario.js';
import { LIMITS_FULL, LIMITS_SHORT, OUTAGE_FULL, OUTAGE_SHORT, outageByScope, perAccountLimits } from './scope-scenarios.js';
import { judged, type ScenarioResult } from './scenario.js';

interface RunOptions {
  short: boolean;
  ids: number | undefined;
  unknownLimit: boolean;
  /** `--batch-size N` (push only): the context key syncBatchSize the run deploys. */
  batchSize?: number | undefined;
}

const PACE_SCENARIOS: Record<string, (options: RunOptions) => Promise<ScenarioResult>> = {
  unknown: (o) => unknownLimit(o.short ? SHORT_SCALE : FULL_SCALE),
  known: (o) => knownLimit(o.short ? SHORT_SCALE : FULL_SCALE),
  outage: (o) => outage(o.short ? SHORT_SCALE : FULL_SCALE, 'provider'),
  token: (o) => outage(o.short ? SHORT_SCALE : FULL_SCALE, 'token'),
};

const SCOPE_SCENARIOS: Record<string, (options: RunOptions) => Promise<ScenarioResult>> = {
  'scope-limits': (o) => perAccountLimits(o.short ? LIMITS_SHORT : LIMITS_FULL, (line) => process.stderr.write(`  … ${line}\n`)),
  'scope-outage': (o) => outageByScope(o.short ? OUTAGE_SHORT : OUTAGE_FULL),
};

const SCENARIOS: Record<string, (options: RunOptions) => Promise<ScenarioResult>> = {
  ...PACE_SCENARIOS,
  ...SCOPE_SCENARIOS,
  reconcile: (o) => reconcilePass(reconcileScale(o), (line) => process.stderr.write(`  … ${line}\n`)),
  connections: (o) => connectionsScenario(o.short ? CONNECTIONS_SHORT : CONNECTIONS_FULL, (line) => process.stderr.write(`  … ${line}\n`)),
  accounts: (o) => accountsPass(o.short ? ACCOUNTS_SHORT : ACCOUNTS_FULL, (line) => process.stderr.write(`  … ${line}\n`)),
  fairness: (o) =>
    o.short
      ? fairnessScenario(FAIRNESS_SHORT, ['background'], (line) => process.stderr.write(`  … ${line}\n`))
      : fairnessScenario(FAIRNESS_FULL, undefined, (line) => process.stderr.write(`  … ${line}\n`)),
  refresher: (o) => refresherScenario(o.short ? REFRESHER_SHORT : REFRESHER_FULL, (line) => process.stderr.write(`  … ${line}\n`)),
  discovery: (o) => discoveryScenario(discoveryScale(o, false), (line) => process.stderr.write(`  … ${line}\n`)),
  'discovery-cycle': (o) => discoveryScenario(discoveryScale(o, true), (line) => process.stderr.write(`  … ${line}\n`)),
  push: (o) => pushScenario(pushScale(o), (line) => process.stderr.write(`  … ${line}\n`)),
};

/** The push scenario's scale: full or short, `--ids` and `--batch-size` over it. */
export function pushScale(options: Pick<RunOptions, 'short' | 'ids' | 'batchSize'>): PushScale {
  return {
    ...(options.short ? PUSH_SHORT : PUSH_FULL),
    ...(options.ids !== undefined ? { ids: options.ids } : {}),
    ...(options.batchSize !== undefined ? { syncBatchSize: options.batchSize } : {}),
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

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      short: { type: 'boolean', default: false },
      ids: { type: 'string' },
      'unknown-limit': { type: 'boolean', default: false },
      'batch-size': { type: 'string' },
    },
  });
  const ids = values.ids === undefined ? undefined : Number(values.ids);
  if (ids !== undefined && !(Number.isSafeInteger(ids) && ids >= 100)) {
    process.stderr.write(`--ids must be a whole number of at least 100, got ${values.ids}\n`);
    return 2;
  }
  const batchSize = values['batch-size'] === undefined ? undefined : Number(values['batch-size']);
  const { min, max } = NUMBER_RULES.syncBatchSize;
  if (batchSize !== undefined && !(Number.isSafeInteger(batchSize) && batchSize >= min && batchSize <= max)) {
    process.stderr.write(`--batch-size must be a whole number from ${min} to ${max} (syncBatchSize), got ${values['batch-size']}\n`);
    return 2;
  }
  const options: RunOptions = { short: values.short, ids, unknownLimit: values['unknown-limit'], batchSize };
  // `pace` names the provider pace's scenarios together (the default set); `scope` those of its scope.
  const groups: Record<string, string[]> = { pace: Object.keys(PACE_SCENARIOS), scope: Object.keys(SCOPE_SCENARIOS) };
  const names = (positionals.length > 0 ? positionals : ['pace']).flatMap((name) => groups[name] ?? [name]);
  const unknown = names.filter((name) => !(name in SCENARIOS));
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; choose from pace, scope, ${Object.keys(SCENARIOS).join(', ')}\n`);
    return 2;
  }
  const machine = machineInfo();
  const scales = {
    ...(names.some((name) => name in PACE_SCENARIOS) ? { pace: values.short ? SHORT_SCALE : FULL_SCALE } : {}),
    ...(names.includes('reconcile') ? { reconcile: reconcileScale(options) } : {}),
    ...(names.includes('connections') ? { connections: values.short ? CONNECTIONS_SHORT : CONNECTIONS_FULL } : {}),
    ...(names.includes('accounts') ? { accounts: values.short ? ACCOUNTS_SHORT : ACCOUNTS_FULL } : {}),
    ...(names.includes('fairness') ? { fairness: values.short ? FAIRNESS_SHORT : FAIRNESS_FULL } : {}),
    ...(names.includes('refresher') ? { refresher: values.short ? REFRESHER_SHORT : REFRESHER_FULL } : {}),
    ...(names.includes('discovery') ? { discovery: discoveryScale(options, false) } : {}),
    ...(names.includes('discovery-cycle') ? { discoveryCycle: discoveryScale(options, true) } : {}),
    ...(names.includes('push') ? { push: pushScale(options) } : {}),
    ...(names.includes('scope-limits') ? { scopeLimits: values.short ? LIMITS_SHORT : LIMITS_FULL } : {}),
    ...(names.includes('scope-outage') ? { scopeOutage: values.short ? OUTAGE_SHORT : OUTAGE_FULL } : {}),
  };
  process.stdout.write(`simulation, ${values.short ? 'short' : 'full'} scale: ${JSON.stringify(scales)}\n${JSON.stringify(machine)}\n\n`);
  const results: ScenarioResult[] = [];
  for (const name of names) {
    const result = await SCENARIOS[name]!(options);
    results.push(result);
    process.stdout.write(`${formatScenario(result, values.short)}\n\n`);
  }
  mkdirSync(BENCH_DIR, { recursive: true });
  // The pace scenarios' figures go to sim-latest.json, the scope scenarios' to sim-scope-latest.json;
  // another scenario's to sim-<its name>-latest.json.
  const other = names.find((name) => !(name in PACE_SCENARIOS));
  const file = other === undefined ? 'sim-latest.json' : other in SCOPE_SCENARIOS ? 'sim-scope-latest.json' : `sim-${other}-latest.json`;
  writeFileSync(join(BENCH_DIR, file), `${JSON.stringify({ machine, scales, results }, null, 2)}\n`);
  return results.every((result) => result.checks.every((check) => check.ok || !judged(check, values.short))) ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
