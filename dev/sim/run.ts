/**
 * `npm run sim`: the provider pace's scenarios in virtual time (pace-scenarios.ts), at full scale
 * (2,000 ids, L = 50/s, 5 containers, 6-hour outages) or `--short` (what `npm test` runs). Prints each
 * scenario's figures and checks, writes them to .bench/sim-latest.json, exits 1 when a check fails.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_DIR, machineInfo } from '../bench/support/machine.js';
import { FULL_SCALE, knownLimit, outage, SHORT_SCALE, unknownLimit, type ScenarioResult, type Scale } from './pace-scenarios.js';

const SCENARIOS: Record<string, (scale: Scale) => Promise<ScenarioResult>> = {
  unknown: unknownLimit,
  known: knownLimit,
  outage: (scale) => outage(scale, 'provider'),
  token: (scale) => outage(scale, 'token'),
};

export function formatScenario(result: ScenarioResult): string {
  const lines = [`${result.name} (${(result.virtualMs / 3_600_000).toFixed(2)} h virtual, ${(result.realMs / 1000).toFixed(1)} s real)`];
  for (const [name, value] of Object.entries(result.figures)) lines.push(`  ${name}: ${value}`);
  for (const check of result.checks) lines.push(`  ${check.ok ? 'ok  ' : 'FAIL'} ${check.what}: ${check.value}`);
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { short: { type: 'boolean', default: false } } });
  const scale = values.short ? SHORT_SCALE : FULL_SCALE;
  const names = positionals.length > 0 ? positionals : Object.keys(SCENARIOS);
  const unknown = names.filter((name) => !(name in SCENARIOS));
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; choose from ${Object.keys(SCENARIOS).join(', ')}\n`);
    return 2;
  }
  const machine = machineInfo();
  process.stdout.write(`provider pace simulation, ${values.short ? 'short' : 'full'} scale: ${JSON.stringify(scale)}\n${JSON.stringify(machine)}\n\n`);
  const results: ScenarioResult[] = [];
  for (const name of names) {
    const result = await SCENARIOS[name]!(scale);
    results.push(result);
    process.stdout.write(`${formatScenario(result)}\n\n`);
  }
  mkdirSync(BENCH_DIR, { recursive: true });
  writeFileSync(join(BENCH_DIR, 'sim-latest.json'), `${JSON.stringify({ machine, scale, results }, null, 2)}\n`);
  return results.every((result) => result.checks.every((check) => check.ok)) ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
