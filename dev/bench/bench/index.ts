/**
 * The benchmark: the real item-sync handler (createSyncHandler, real adapters) against the provider
 * simulator (latency L) and DynamoDB Local, on warm containers:
 *
 *   - wall time of one invocation for batches of N = 10 and N = 100 records, for new items (no row
 *     yet), unchanged items (same revision) and changed items (revision bumped at the provider),
 *     with the in-batch concurrency C (SYNC_FETCH_CONCURRENCY's default unless --concurrency) and, in the same run, a
 *     sequential baseline (the same handler built with C = 1);
 *   - the ideal time of a batch: ⌈N/C⌉·L + the DynamoDB round trips the sync must make in sequence,
 *     measured against the same DynamoDB Local in the same run: one BatchGetItem for the batch, then per
 *     wave of C items one provider fetch and (new or changed items) one conditional PutItem;
 *   - DynamoDB requests and writes per item (the items table and the pace), and the connections
 *     table's GetItem calls per 1,000 records (a container reads a connection's row once per
 *     ACCESS_TOKEN_CACHE_SECONDS);
 *   - the size of each deployed bundle and its cold import time (support/bundles.ts).
 *
 * Steps: setup.ts (the world), round-trips.ts, measure.ts (warm-up, the runs, the medians), report.ts.
 */
import { measureBundles, type BundleResult } from '../support/bundles.js';
import { BENCH_DIR } from '../support/machine.js';
import { round } from '../support/stats.js';
import { batchResults, measureRuns, warmUp } from './measure.js';
import { BENCH_DEFAULTS, type BenchOptions } from './options.js';
import type { BenchReport } from './report.js';
import { measureDynamoRtt, measureProviderRtt } from './round-trips.js';
import { NAMES, setUpBench, type BenchWorld } from './setup.js';

export async function runBench(input: Partial<BenchOptions> = {}): Promise<BenchReport> {
  const o: BenchOptions = { ...BENCH_DEFAULTS, ...input };
  const startedAt = new Date();
  const t0 = performance.now();
  const world = await setUpBench(o);
  let measured: Pick<BenchReport, 'dynamodbRttMs' | 'providerRttMs' | 'batches' | 'connections'>;
  try {
    measured = await measure(world, t0);
  } finally {
    await world.close();
  }
  let bundles: BundleResult[] = [];
  if (o.bundles) {
    o.progress?.("  bundling (esbuild, the construct's options) and cold imports");
    bundles = await measureBundles(`${BENCH_DIR}/bundles`, o.runs, o.progress);
  }
  const { progress: _progress, ...options } = o;
  return { options, startedAt: startedAt.toISOString(), durationMs: round(performance.now() - t0, 0), ...measured, bundles, warnings: world.warnings };
}

/** Everything measured on the handlers, the functions' logs captured (a JSON line per record would drown the table). */
async function measure(world: BenchWorld, t0: number): Promise<Pick<BenchReport, 'dynamodbRttMs' | 'providerRttMs' | 'batches' | 'connections'>> {
  const { o, capture } = world;
  capture.start();
  const print = (line: string): void => capture.released(() => o.progress?.(line));
  const rttClient = world.dynamo.client();
  const dynamodbRttMs = await measureDynamoRtt(rttClient, NAMES.itemsTable, o.batchSizes, o.concurrency);
  rttClient.destroy();
  const providerRttMs = await measureProviderRtt(world.sim);
  print(
    `  round trips: provider ${providerRttMs.toFixed(1)} ms (L = ${o.latencyMs}), PutItem ${dynamodbRttMs.putItem.toFixed(1)} ms, ` +
      Object.entries(dynamodbRttMs.batchGetItem).map(([size, ms]) => `BatchGetItem ${size} keys ${ms.toFixed(1)} ms`).join(', '),
  );
  await warmUp(world);
  const samples = await measureRuns(world, print);
  const benchSeconds = (performance.now() - t0) / 1000;
  capture.stop();
  const deadLetters = world.deadLetters();
  if (deadLetters > 0) world.warnings.push(`${deadLetters} records were dead-lettered`);
  const calls = world.connectionCalls['GetItem'] ?? 0;
  return {
    dynamodbRttMs,
    providerRttMs: round(providerRttMs, 2),
    batches: batchResults(o, samples, dynamodbRttMs),
    connections: {
      getItemCalls: calls,
      otherCalls: Object.fromEntries(Object.entries(world.connectionCalls).filter(([operation]) => operation !== 'GetItem')),
      records: world.records,
      perThousandRecords: round((calls * 1000) / world.records, 2),
      containers: 2,
      tokenCacheSeconds: world.tokenCacheSeconds,
      benchSeconds: round(benchSeconds, 1),
    },
  };
}
