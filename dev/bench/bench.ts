/**
 * `npm run bench [-- --latency 50 --runs 5 --concurrency 10 --no-bundles --json]`: the benchmark (see
 * bench/index.ts). Prints the tables and writes the results to .bench/results-<time>.json and
 * .bench/latest.json, so that runs can be compared. Not a test: it asserts nothing about time.
 */
import '../system/sdk-notice.js';
import { exitUnlessJava } from '../fakes/dynamodb-local.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runBench } from './bench/index.js';
import { BENCH_CLI_OPTIONS, BENCH_DEFAULTS } from './bench/options.js';
import { formatBenchReport } from './bench/report.js';
import { BENCH_DIR, machineInfo, timestampForFile } from './support/machine.js';
import { DYNAMO_LATENCY_USAGE, factorOption, intOption, parsedOrExit, progressLog } from './support/cli.js';

const USAGE = [
  'usage: npm run bench -- [--latency MS] [--dynamo-latency F] [--runs N] [--concurrency C] [--seed N] [--no-bundles] [--json]',
  `defaults: --latency ${BENCH_DEFAULTS.latencyMs} --dynamo-latency ${BENCH_DEFAULTS.dynamoLatency} --runs ${BENCH_DEFAULTS.runs} --concurrency ${BENCH_DEFAULTS.concurrency} (SYNC_FETCH_CONCURRENCY's default)`,
  DYNAMO_LATENCY_USAGE,
  '--json prints the results as JSON instead of the tables (they are always written under .bench/).',
  '',
].join('\n');

const { values } = parsedOrExit(USAGE, () =>
  parseArgs({
    options: BENCH_CLI_OPTIONS,
    strict: true,
  }),
);

if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
exitUnlessJava('bench');


const machine = machineInfo();
const log = progressLog(values.json);
log(`bench: ${machine.summary}`);
const report = await runBench({
  latencyMs: intOption('latency', values.latency, BENCH_DEFAULTS.latencyMs, 0, 10_000),
  dynamoLatency: factorOption('dynamo-latency', values['dynamo-latency'], BENCH_DEFAULTS.dynamoLatency),
  runs: intOption('runs', values.runs, BENCH_DEFAULTS.runs, 1, 100),
  concurrency: intOption('concurrency', values.concurrency, BENCH_DEFAULTS.concurrency, 1, 100),
  seed: intOption('seed', values.seed, BENCH_DEFAULTS.seed, 0, 2 ** 31),
  bundles: !values['no-bundles'],
  progress: log,
});

const result = { kind: 'bench', machine, ...report };
const stamp = timestampForFile(new Date(report.startedAt));
mkdirSync(BENCH_DIR, { recursive: true });
const file = join(BENCH_DIR, `results-${stamp}.json`);
writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(join(BENCH_DIR, 'latest.json'), `${JSON.stringify(result, null, 2)}\n`);

if (values.json) {
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} else {
  process.stdout.write(`\n${formatBenchReport(report)}\n\n${machine.summary}\nresults: ${file} (and .bench/latest.json)\n`);
}
