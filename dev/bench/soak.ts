/**
 * `npm run soak [-- --ids 10000 --seed 1 --instances 5 --latency 2 --json]`: the chaos soak (see
 * soak/index.ts). Prints the checks and the faults met, writes the report to .bench/soak-<time>.json
 * and .bench/soak-latest.json and the captured function output to .bench/soak-latest.log; exits 1
 * when any figure is off.
 */
import '../system/sdk-notice.js';
import { exitUnlessJava } from '../fakes/dynamodb-local.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runSoak } from './soak/index.js';
import { SOAK_CLI_OPTIONS, SOAK_DEFAULTS } from './soak/options.js';
import { formatSoakReport } from './soak/report.js';
import { BENCH_DIR, machineInfo, timestampForFile } from './support/machine.js';
import { DYNAMO_LATENCY_USAGE, factorOption, intOption, parsedOrExit } from './support/cli.js';

const USAGE = [
  'usage: npm run soak -- [--ids N] [--seed N] [--instances N] [--latency MS] [--dynamo-latency F] [--batch-size N] [--rotations N] [--max-receive-count N] [--json]',
  `defaults: --ids ${SOAK_DEFAULTS.ids} --seed ${SOAK_DEFAULTS.seed} --instances ${SOAK_DEFAULTS.instances} ` +
    `--latency ${SOAK_DEFAULTS.latencyMs} --dynamo-latency ${SOAK_DEFAULTS.dynamoLatency} --batch-size ${SOAK_DEFAULTS.batchSize} --rotations ${SOAK_DEFAULTS.rotations} ` +
    `--max-receive-count ${SOAK_DEFAULTS.maxReceiveCount}`,
  DYNAMO_LATENCY_USAGE,
  '--json prints the report as JSON instead of the table (it is always written under .bench/).',
  '',
].join('\n');

const { values } = parsedOrExit(USAGE, () =>
  parseArgs({
    options: SOAK_CLI_OPTIONS,
    strict: true,
  }),
);

if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
exitUnlessJava('soak');


const started = new Date();
const stamp = timestampForFile(started);
const logFile = join(BENCH_DIR, 'soak-latest.log');
const report = await runSoak({
  ids: intOption('ids', values.ids, SOAK_DEFAULTS.ids, 1),
  seed: intOption('seed', values.seed, SOAK_DEFAULTS.seed, 0),
  instances: intOption('instances', values.instances, SOAK_DEFAULTS.instances, 1),
  latencyMs: intOption('latency', values.latency, SOAK_DEFAULTS.latencyMs, 0),
  dynamoLatency: factorOption('dynamo-latency', values['dynamo-latency'], SOAK_DEFAULTS.dynamoLatency),
  batchSize: intOption('batch-size', values['batch-size'], SOAK_DEFAULTS.batchSize, 1),
  rotations: intOption('rotations', values.rotations, SOAK_DEFAULTS.rotations, 0),
  maxReceiveCount: intOption('max-receive-count', values['max-receive-count'], SOAK_DEFAULTS.maxReceiveCount, 1),
  logFile,
  progress: values.json ? undefined : (line) => process.stdout.write(`${line}\n`),
});

const machine = machineInfo(started);
const result = { kind: 'soak', machine, ...report };
mkdirSync(BENCH_DIR, { recursive: true });
writeFileSync(join(BENCH_DIR, `soak-${stamp}.json`), `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(join(BENCH_DIR, 'soak-latest.json'), `${JSON.stringify(result, null, 2)}\n`);

if (values.json) {
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} else {
  process.stdout.write(`\n${formatSoakReport(report)}\n`);
  process.stdout.write(`\n${machine.summary}\n`);
  process.stdout.write(`report: ${join(BENCH_DIR, `soak-${stamp}.json`)} (and soak-latest.json); function output: ${logFile}\n`);
}
process.exitCode = report.ok ? 0 : 1;
