/**
 * `npm run bench:reconciler [-- --ids 100000 --segments 8 --page-size 1000 --send-concurrency 10 --row-bytes 400 --json]`:
 * ids sent per second by one reconciler invocation (see reconciler/index.ts). Prints a table and
 * writes the results to .bench/reconciler-<time>.json and .bench/reconciler-latest.json. Not a test.
 */
import '../system/sdk-notice.js';
import { exitUnlessJava } from '../fakes/dynamodb-local.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RECONCILER_BENCH_CLI_OPTIONS, RECONCILER_BENCH_DEFAULTS, runReconcilerBench } from './reconciler/index.js';
import { n, table } from './support/format.js';
import { BENCH_DIR, machineInfo, timestampForFile } from './support/machine.js';
import { DYNAMO_LATENCY_USAGE, factorOption, intOption, parsedOrExit, progressLog } from './support/cli.js';

const d = RECONCILER_BENCH_DEFAULTS;
const USAGE = [
  'usage: npm run bench:reconciler -- [--ids N] [--segments S] [--page-size P] [--send-concurrency C] [--row-bytes B] [--dynamo-latency F] [--json]',
  `defaults: --ids ${d.ids} --segments ${d.segments} --page-size ${d.pageSize} --send-concurrency ${d.sendConcurrency} --row-bytes ${d.rowBytes} --dynamo-latency ${d.dynamoLatency}`,
  DYNAMO_LATENCY_USAGE,
  '',
].join('\n');

const { values } = parsedOrExit(USAGE, () =>
  parseArgs({
    options: RECONCILER_BENCH_CLI_OPTIONS,
    strict: true,
  }),
);

if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
exitUnlessJava('bench:reconciler');


const machine = machineInfo();
const log = progressLog(values.json);
log(`bench:reconciler: ${machine.summary}`);
const report = await runReconcilerBench({
  ids: intOption('ids', values.ids, d.ids, 100, 2_000_000),
  segments: intOption('segments', values.segments, d.segments, 1, 100),
  pageSize: intOption('page-size', values['page-size'], d.pageSize, 10, 10_000),
  sendConcurrency: intOption('send-concurrency', values['send-concurrency'], d.sendConcurrency, 1, 100),
  rowBytes: intOption('row-bytes', values['row-bytes'], d.rowBytes, 150, 300_000),
  dynamoLatency: factorOption('dynamo-latency', values['dynamo-latency'], d.dynamoLatency),
  progress: log,
});

const result = { kind: 'bench:reconciler', machine, ...report };
mkdirSync(BENCH_DIR, { recursive: true });
const file = join(BENCH_DIR, `reconciler-${timestampForFile(new Date(report.startedAt))}.json`);
writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(join(BENCH_DIR, 'reconciler-latest.json'), `${JSON.stringify(result, null, 2)}\n`);

if (values.json) {
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} else {
  process.stdout.write(
    [
      '',
      table(
        ['phase', 'ids', 'seconds', 'ids/s', 'CPU ms'],
        report.phases.map((phase) => [phase.name, n(phase.ids), phase.seconds.toFixed(2), n(phase.idsPerSecond), n(phase.cpuMs)]),
      ),
      '',
      `CPU of the invocation: ${report.lambdaEstimate.cpuMsPer1000Ids} ms per 1,000 ids = ${n(report.lambdaEstimate.idsPerCpuSecond)} ids per CPU second;` +
        ` CPU-bound on Lambda: about ${n(report.lambdaEstimate.atDeployedMemory)} ids/s at ${n(report.lambdaEstimate.deployedMemoryMb)} MB (as deployed), ${n(report.lambdaEstimate.at1769Mb)} at 1,769 MB (one vCPU).`,
      `100M ids a day need ${n(report.neededFor100MPerDay)} ids/s from the reconciler (and as many provider requests a second from the sync).`,
      `table filled in ${report.seedSeconds} s; ${machine.summary}`,
      `results: ${file} (and .bench/reconciler-latest.json)`,
      '',
    ].join('\n'),
  );
}
