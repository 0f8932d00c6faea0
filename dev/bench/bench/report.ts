/** The bench's report, as data and as the tables `npm run bench` prints. */
import type { BundleResult } from '../support/bundles.js';
import { dynamoLatencyLabel, n, table } from '../support/format.js';
import { formatSummary } from '../support/stats.js';
import type { BatchResult } from './measure.js';
import type { BenchOptions } from './options.js';
import type { DynamoRtt } from './round-trips.js';

export interface BenchReport {
  options: Omit<BenchOptions, 'progress'>;
  startedAt: string;
  durationMs: number;
  /** Measured against DynamoDB Local in this run, median of 20 calls each. */
  dynamodbRttMs: DynamoRtt;
  /** Provider round trip measured with fetch in this run (L plus HTTP on loopback), median of 20. */
  providerRttMs: number;
  batches: BatchResult[];
  /**
   * The connections table, as the containers used it over the whole bench (warm-up included):
   * GetItem calls (a connection's row read once per ACCESS_TOKEN_CACHE_SECONDS per container) per
   * 1,000 records, and its other requests (the first token's refresh lease and result, lastUsedAt).
   */
  connections: {
    getItemCalls: number;
    otherCalls: Record<string, number>;
    records: number;
    perThousandRecords: number;
    containers: number;
    tokenCacheSeconds: number;
    benchSeconds: number;
  };
  bundles: BundleResult[];
  /** Anything that makes a figure suspect (a record not done, a write count that is not what the scenario needs). */
  warnings: string[];
}

export function formatBenchReport(report: BenchReport): string {
  return [
    ...header(report),
    '',
    'Wall time per batch (one invocation), ms',
    wallTimeTable(report),
    'batching window: what the SQS event source needs to hand over such a batch (Lambda requires MaximumBatchingWindowInSeconds ≥ 1 above 10 records, as the stack sets it); it adds up to that much delay before the invocation and is not in the wall time',
    '',
    'DynamoDB requests and writes per item (median over the runs; the connections table apart, below)',
    requestsTable(report),
    '',
    connectionsLine(report),
    ...bundlesSection(report),
    ...(report.warnings.length > 0 ? ['', 'WARNINGS (figures may be off):', ...report.warnings.map((warning) => `  ${warning}`)] : []),
  ].join('\n');
}

function header(report: BenchReport): string[] {
  const o = report.options;
  const rtt = report.dynamodbRttMs;
  return [
    `Benchmark — item-sync handler, provider latency L = ${o.latencyMs} ms, in-batch concurrency C = ${o.concurrency}, ` +
      `${o.runs} runs per figure: median [min–max], warm containers — ${(report.durationMs / 1000).toFixed(0)} s`,
    `Measured in this run: provider round trip ${report.providerRttMs.toFixed(1)} ms; DynamoDB Local with ${dynamoLatencyLabel(o.dynamoLatency)}: ` +
      Object.entries(rtt.batchGetItem).map(([size, ms]) => `BatchGetItem of ${size} keys ${ms.toFixed(1)} ms`).join(', ') +
      `, conditional PutItem ${rtt.putItem.toFixed(1)} ms, ` +
      Object.entries(rtt.putItemWave)
        .filter(([k]) => k !== '1')
        .map(([k, ms]) => `${k} PutItems at once ${ms.toFixed(1)} ms`)
        .join(', ') +
      '',
    'ideal = ⌈N/C⌉·L + the DynamoDB round trips the sync makes in sequence: 1 BatchGetItem for the batch, then per wave of C items one wave of C conditional PutItems at once (new, changed; none when unchanged)',
  ];
}

function wallTimeTable(report: BenchReport): string {
  const c = report.options.concurrency;
  return table(
    ['batch', 'items', 'batching window', `C=${c} wall`, 'ideal', 'ratio to ideal', 'C=1 wall (sequential)', 'C=1 ideal (ratio)', 'speed-up'],
    report.batches.map((b) => [
      `N=${b.batchSize}`,
      b.scenario,
      `${b.batchingWindowSeconds} s`,
      formatSummary(b.wallMs),
      b.idealMs.toFixed(0),
      `${b.ratioToIdeal.toFixed(2)}× ideal`,
      formatSummary(b.sequentialWallMs),
      `${b.sequentialIdealMs.toFixed(0)} (${b.sequentialRatioToIdeal.toFixed(2)}× ideal)`,
      `${b.speedUp.toFixed(1)}×`,
    ]),
  );
}

function requestsTable(report: BenchReport): string {
  const ops = [...new Set(report.batches.flatMap((b) => Object.keys(b.perItem.requests)))].sort();
  return table(
    ['items', 'batch', ...ops.map((op) => `${op}/item`), 'requests/item', 'writes/item'],
    report.batches.map((b) => [
      b.scenario,
      `N=${b.batchSize}`,
      ...ops.map((op) => (b.perItem.requests[op] ?? 0).toFixed(2)),
      b.perItem.totalRequests.toFixed(2),
      b.perItem.writes.toFixed(2),
    ]),
  );
}

function connectionsLine(report: BenchReport): string {
  const c = report.connections;
  const other = Object.entries(c.otherCalls).map(([operation, count]) => `${count} ${operation}`).join(', ');
  return (
    `Connections table: ${c.getItemCalls} GetItem calls for ${n(c.records)} records = ${c.perThousandRecords.toFixed(2)} per 1,000 records ` +
    `(${c.containers} containers over ${c.benchSeconds.toFixed(0)} s; a container reads a connection's row once, then again only after ${c.tokenCacheSeconds} s or a 401)` +
    (other ? `; besides: ${other} (the first token's refresh lease and result, lastUsedAt)` : '')
  );
}

function bundlesSection(report: BenchReport): string[] {
  if (report.bundles.length === 0) return [];
  return [
    '',
    `Deployed bundles (esbuild with the construct's options: ESM, minified, source map without sources, AWS SDK bundled) and cold import, ${report.options.runs} fresh processes`,
    table(
      ['function', 'bundle', 'source map', 'cold import()', 'process start + import'],
      report.bundles.map((b) => [
        b.name,
        `${(b.bytes / 1024).toFixed(0)} KiB${b.lazyModules.map((m) => ` (+ ${(m.bytes / 1024).toFixed(0)} KiB ${m.module}, loaded when needed)`).join('')}`,
        `${(b.sourceMapBytes / 1024).toFixed(0)} KiB`,
        formatSummary(b.importMs, 0, ' ms'),
        formatSummary(b.processMs, 0, ' ms'),
      ]),
    ),
  ];
}
