/**
 * The benchmark: the real item-sync handler (createSyncHandler, real adapters) against the provider
 * simulator (latency L) and dynalite, on warm containers:
 *
 *   - wall time of one invocation for batches of N = 10 and N = 100 records, for new items (no row
 *     yet), unchanged items (same revision) and changed items (revision bumped at the provider),
 *     with the in-batch concurrency C (SYNC_FETCH_CONCURRENCY, default 10) and, in the same run, a
 *     sequential baseline (the same handler built with C = 1);
 *   - the ideal time of a batch: ⌈N/C⌉·L + the DynamoDB round trips the sync must make in sequence,
 *     measured against the same dynalite in the same run: one BatchGetItem for the batch, then per
 *     wave of C items one provider fetch and (new or changed items) one conditional PutItem;
 *   - DynamoDB requests and writes per item, and GetSecretValue calls per 1,000 records;
 *   - the size of each deployed bundle and its cold import time (bundles.ts).
 *
 * Secrets Manager and SQS are answered in process (support/aws-fakes.ts): the sync reads the token
 * once per container per ACCESS_TOKEN_CACHE_SECONDS, and SQS is only called for dead letters and
 * Retry-After, which a benchmark batch does not produce.
 */
import { randomUUID } from 'node:crypto';
import { BatchGetItemCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent } from 'aws-lambda';
import { createSyncHandler, type SyncHandler } from '../../functions/item-sync/app.js';
import { DEFAULTS, loadSyncConfig } from '../../functions/shared/config.js';
import { generateItemTree } from '../simulator/item-tree.js';
import { ProviderSimulator } from '../simulator/provider-simulator.js';
import { attachFakeSqs, DynamoMeter, FakeSecrets, instrumentDynamo, type SqsBackend, type SqsCalls } from '../fakes/aws-fakes.js';
import { measureBundles, type BundleResult } from './support/bundles.js';
import { AWS_CREDENTIALS, AWS_REGION, createItemsTable, dynamoClient, startDynalite, type Dynalite } from './support/dynalite.js';
import { n, table } from './support/format.js';
import { BENCH_DIR } from './support/machine.js';
import { OutputCapture } from '../fakes/output-capture.js';
import { formatSummary, median, summarize, type Summary } from './support/stats.js';

export interface BenchOptions {
  /** Provider latency per request, ms. */
  latencyMs: number;
  /** Runs per measurement; the table shows their median, min and max. */
  runs: number;
  batchSizes: number[];
  /** In-batch concurrency C of the measured handler (SYNC_FETCH_CONCURRENCY). */
  concurrency: number;
  /** Also measure the bundles and their cold import (slower: builds with esbuild, loads aws-cdk-lib). */
  bundles: boolean;
  seed: number;
  dynalite: 'child' | 'in-process';
  progress?: (line: string) => void;
}

export const BENCH_DEFAULTS: Omit<BenchOptions, 'progress'> = {
  latencyMs: 50,
  runs: 5,
  batchSizes: [10, 100],
  concurrency: DEFAULTS.fetchConcurrency,
  bundles: true,
  seed: 1,
  dynalite: 'child',
};

export type Scenario = 'new' | 'unchanged' | 'changed';

/**
 * DynamoDB round trips measured in the run: BatchGetItem by number of keys, one conditional PutItem,
 * and a wave of k conditional PutItems sent at once (until the last answer) by k. dynalite serves one
 * request at a time, so a wave of 10 takes about 10 single round trips; DynamoDB would not.
 */
export interface DynamoRtt {
  batchGetItem: Record<string, number>;
  putItem: number;
  putItemWave: Record<string, number>;
}
export const SCENARIOS: Scenario[] = ['new', 'unchanged', 'changed'];

export interface BatchResult {
  batchSize: number;
  scenario: Scenario;
  /** SQS event source: the batching window a batch of this size needs (Lambda requires ≥ 1 s above 10). */
  batchingWindowSeconds: number;
  concurrency: number;
  wallMs: Summary;
  sequentialWallMs: Summary;
  idealMs: number;
  sequentialIdealMs: number;
  /** wallMs.median / idealMs. */
  ratioToIdeal: number;
  sequentialRatioToIdeal: number;
  /** sequentialWallMs.median / wallMs.median. */
  speedUp: number;
  /** How the ideal is made up: waves × L, one BatchGetItem, writeWaves × (a wave of min(C, N) PutItems at once). */
  ideal: { waves: number; providerMs: number; batchGetMs: number; writeWaves: number; putWaveMs: number; putMs: number };
  /** DynamoDB requests per item by operation, and writes per item (median over the runs, C = concurrency). */
  perItem: { requests: Record<string, number>; totalRequests: number; writes: number };
}

export interface BenchReport {
  options: Omit<BenchOptions, 'progress'>;
  startedAt: string;
  durationMs: number;
  /** Measured against dynalite in this run, median of 20 calls each. */
  dynamodbRttMs: DynamoRtt;
  /** Provider round trip measured with fetch in this run (L plus HTTP on loopback), median of 20. */
  providerRttMs: number;
  batches: BatchResult[];
  secrets: { getSecretValueCalls: number; records: number; perThousandRecords: number; containers: number; tokenCacheSeconds: number; benchSeconds: number };
  bundles: BundleResult[];
  /** Anything that makes a figure suspect (a record not done, a write count that is not what the scenario needs). */
  warnings: string[];
}

const TABLE_NAME = 'content-sync-bench-items';
const ACCESS_TOKEN_SECRET_ID = 'content-sync/provider-access-token';
const QUEUE_ARN = 'arn:aws:sqs:eu-west-1:000000000000:content-sync-sync-queue';
const DLQ_URL = 'https://sqs.eu-west-1.amazonaws.com/000000000000/content-sync-dead-letters';

/** The batching window the SQS event source needs for a batch size (as the stateless stack sets it). */
export function batchingWindowSeconds(batchSize: number): number {
  return batchSize > 10 ? 1 : 0;
}

export async function runBench(input: Partial<BenchOptions> = {}): Promise<BenchReport> {
  const o: BenchOptions = { ...BENCH_DEFAULTS, ...input };
  const say = (line: string): void => o.progress?.(line);
  const startedAt = new Date();
  const t0 = performance.now();
  const warnings: string[] = [];

  // Enough items for every run: fresh ids for "new" per run, batch size and handler; + warm-up.
  const perRun = o.batchSizes.reduce((sum, size) => sum + size, 0) * 2;
  const tree = generateItemTree({ count: perRun * o.runs + Math.max(...o.batchSizes) * 2, seed: o.seed });
  const freshIds = tree.map((item) => item.id);
  let nextFresh = 0;
  const takeIds = (count: number): string[] => {
    const ids = freshIds.slice(nextFresh, nextFresh + count);
    nextFresh += count;
    if (ids.length < count) throw new Error('bench: ran out of item ids');
    return ids;
  };

  const sim = await ProviderSimulator.start({ latencyMs: o.latencyMs, items: tree, seed: o.seed });
  const clients: Array<{ destroy(): void }> = [];
  const capture = new OutputCapture();
  let dynalite: Dynalite | undefined;
  try {
    dynalite = await startDynalite(o.dynalite);
    const endpoint = dynalite.endpoint;
    await createItemsTable(endpoint, TABLE_NAME);
    const secrets = new FakeSecrets();
    secrets.set(ACCESS_TOKEN_SECRET_ID, JSON.stringify({ accessToken: sim.issueAccessToken(), refreshedAt: new Date().toISOString() }));
    const deadLetters: string[] = [];
    const sqsBackend: SqsBackend = {
      queueUrl: (name) => `https://sqs.eu-west-1.amazonaws.com/000000000000/${name}`,
      sendMessages: (_url, entries) => entries.map((entry) => (deadLetters.push(entry.MessageBody), { Id: entry.Id, MessageId: randomUUID() })),
      changeVisibility: (_url, entries) => entries.map((entry) => ({ Id: entry.Id })),
    };
    const sqsCalls: SqsCalls = {};
    const meter = new DynamoMeter();

    const env = {
      PROVIDER_BASE_URL: sim.baseUrl,
      ACCESS_TOKEN_SECRET_ID,
      ITEMS_TABLE_NAME: TABLE_NAME,
      REVISION_FIELD: 'revision',
      DEAD_LETTER_QUEUE_URL: DLQ_URL,
    };
    const makeHandler = (concurrency: number): SyncHandler => {
      const dynamodb = instrumentDynamo(dynamoClient(endpoint), meter);
      const sqs = attachFakeSqs(new SQSClient({ region: AWS_REGION, credentials: AWS_CREDENTIALS }), sqsBackend, sqsCalls);
      const secretsClient = secrets.attach(new SecretsManagerClient({ region: AWS_REGION, credentials: AWS_CREDENTIALS }));
      clients.push(dynamodb, sqs, secretsClient);
      return createSyncHandler({
        config: loadSyncConfig({ ...env, SYNC_FETCH_CONCURRENCY: String(concurrency) }),
        dynamodb,
        sqs,
        secrets: secretsClient,
      });
    };
    const handlers = { concurrent: makeHandler(o.concurrency), sequential: makeHandler(1) };
    const tokenCacheSeconds = loadSyncConfig(env).tokenCacheSeconds;
    let records = 0;

    const invoke = async (handler: SyncHandler, ids: string[], what: string): Promise<{ wallMs: number; requests: Record<string, number>; writes: number }> => {
      meter.reset();
      const event = sqsEvent(ids);
      const started = performance.now();
      const answer = await handler(event, lambdaContext());
      const wallMs = performance.now() - started;
      records += ids.length;
      if (answer.batchItemFailures.length > 0) warnings.push(`${what}: ${answer.batchItemFailures.length} records not done`);
      return { wallMs, requests: { ...meter.requests }, writes: meter.writes.length };
    };

    // The functions' logs go to the capture (a JSON line per record would drown the table).
    capture.start();
    const print = (line: string): void => capture.released(() => say(line));

    // Round trips of the DynamoDB calls the sync makes, against this dynalite, now.
    const rttClient = dynamoClient(endpoint);
    clients.push(rttClient);
    const dynamodbRttMs = await measureDynamoRtt(rttClient, o.batchSizes, o.concurrency);
    const providerRttMs = await measureProviderRtt(sim);
    print(
      `  round trips: provider ${providerRttMs.toFixed(1)} ms (L = ${o.latencyMs}), PutItem ${dynamodbRttMs.putItem.toFixed(1)} ms, ` +
        Object.entries(dynamodbRttMs.batchGetItem).map(([size, ms]) => `BatchGetItem ${size} keys ${ms.toFixed(1)} ms`).join(', '),
    );

    // Warm containers: the token read, connection pools and JIT are not part of a batch's time.
    for (const [handler, size] of [[handlers.concurrent, Math.max(...o.batchSizes)], [handlers.sequential, Math.min(...o.batchSizes)]] as const) {
      const ids = takeIds(size);
      await invoke(handler, ids, 'warm-up');
      await invoke(handler, ids, 'warm-up');
    }

    type Sample = { wallMs: number[]; seqWallMs: number[]; requests: Array<Record<string, number>>; writes: number[] };
    const samples = new Map<string, Sample>();
    const sample = (size: number, scenario: Scenario): Sample => {
      const key = `${size}/${scenario}`;
      let s = samples.get(key);
      if (!s) samples.set(key, (s = { wallMs: [], seqWallMs: [], requests: [], writes: [] }));
      return s;
    };
    const expectedWrites: Record<Scenario, number> = { new: 1, unchanged: 0, changed: 1 };

    for (let run = 1; run <= o.runs; run += 1) {
      for (const size of o.batchSizes) {
        for (const which of ['concurrent', 'sequential'] as const) {
          const ids = takeIds(size);
          for (const scenario of SCENARIOS) {
            if (scenario === 'changed') for (const id of ids) sim.bumpRevision(id);
            const what = `run ${run}, N=${size}, ${scenario}, ${which}`;
            const result = await invoke(handlers[which], ids, what);
            const s = sample(size, scenario);
            if (which === 'concurrent') {
              s.wallMs.push(result.wallMs);
              s.requests.push(result.requests);
              s.writes.push(result.writes);
            } else {
              s.seqWallMs.push(result.wallMs);
            }
            if (result.writes !== expectedWrites[scenario] * size) {
              warnings.push(`${what}: ${result.writes} writes for ${size} items (expected ${expectedWrites[scenario] * size})`);
            }
          }
          sim.resetRequests();
        }
        print(
          `  run ${run}/${o.runs} N=${size}: ` +
            SCENARIOS.map((scenario) => {
              const s = sample(size, scenario);
              return `${scenario} ${s.wallMs.at(-1)!.toFixed(0)} ms (C=1: ${s.seqWallMs.at(-1)!.toFixed(0)} ms)`;
            }).join(', '),
        );
      }
    }
    const benchSeconds = (performance.now() - t0) / 1000;

    const batches: BatchResult[] = [];
    for (const size of o.batchSizes) {
      for (const scenario of SCENARIOS) {
        const s = sample(size, scenario);
        const wallMs = summarize(s.wallMs);
        const sequentialWallMs = summarize(s.seqWallMs);
        const ideal = idealMs(size, o.concurrency, o.latencyMs, scenario, dynamodbRttMs);
        const sequentialIdeal = idealMs(size, 1, o.latencyMs, scenario, dynamodbRttMs);
        const operations = [...new Set(s.requests.flatMap((r) => Object.keys(r)))].sort();
        const requests: Record<string, number> = {};
        for (const op of operations) requests[op] = round(median(s.requests.map((r) => r[op] ?? 0)) / size, 3);
        const totalRequests = round(median(s.requests.map((r) => Object.values(r).reduce((a, b) => a + b, 0))) / size, 3);
        batches.push({
          batchSize: size,
          scenario,
          batchingWindowSeconds: batchingWindowSeconds(size),
          concurrency: o.concurrency,
          wallMs,
          sequentialWallMs,
          idealMs: round(ideal.total, 2),
          sequentialIdealMs: round(sequentialIdeal.total, 2),
          ratioToIdeal: round(wallMs.median / ideal.total, 3),
          sequentialRatioToIdeal: round(sequentialWallMs.median / sequentialIdeal.total, 3),
          speedUp: round(sequentialWallMs.median / wallMs.median, 2),
          ideal: ideal.parts,
          perItem: { requests, totalRequests, writes: round(median(s.writes) / size, 3) },
        });
      }
    }

    capture.stop();
    if (deadLetters.length > 0) warnings.push(`${deadLetters.length} records were dead-lettered`);
    const secretsFigures = {
      getSecretValueCalls: secrets.calls.GetSecretValue,
      records,
      perThousandRecords: round((secrets.calls.GetSecretValue * 1000) / records, 2),
      containers: 2,
      tokenCacheSeconds,
      benchSeconds: round(benchSeconds, 1),
    };

    let bundles: BundleResult[] = [];
    if (o.bundles) {
      say('  bundling (esbuild, the construct\'s options) and cold imports');
      bundles = await measureBundles(`${BENCH_DIR}/bundles`, o.runs, say);
    }
    const { progress: _progress, ...options } = o;
    return {
      options,
      startedAt: startedAt.toISOString(),
      durationMs: round(performance.now() - t0, 0),
      dynamodbRttMs,
      providerRttMs: round(providerRttMs, 2),
      batches,
      secrets: secretsFigures,
      bundles,
      warnings,
    };
  } finally {
    capture.stop();
    for (const client of clients) client.destroy();
    await sim.close();
    await dynalite?.close();
  }
}

/**
 * ⌈N/C⌉·L plus the DynamoDB round trips in sequence: one BatchGetItem for the batch, then one
 * conditional PutItem per wave when the items are written (new or changed). Each of the C workers
 * runs fetch → write for one item after another, so a batch is ⌈N/C⌉ waves of (fetch + write).
 */
export function idealMs(
  batchSize: number,
  concurrency: number,
  latencyMs: number,
  scenario: Scenario,
  rtt: DynamoRtt,
): { total: number; parts: BatchResult['ideal'] } {
  const atOnce = Math.max(1, Math.min(concurrency, batchSize));
  const waves = Math.ceil(batchSize / atOnce);
  const writeWaves = scenario === 'unchanged' ? 0 : waves;
  const batchGetMs = rtt.batchGetItem[String(batchSize)] ?? Math.max(...Object.values(rtt.batchGetItem));
  const putWaveMs = rtt.putItemWave[String(atOnce)] ?? atOnce * rtt.putItem;
  const providerMs = waves * latencyMs;
  const putMs = writeWaves * putWaveMs;
  return {
    total: providerMs + batchGetMs + putMs,
    parts: { waves, providerMs, batchGetMs: round(batchGetMs, 2), writeWaves, putWaveMs: round(putWaveMs, 2), putMs: round(putMs, 2) },
  };
}

async function measureDynamoRtt(client: DynamoDBClient, sizes: number[], concurrency: number): Promise<DynamoRtt> {
  const rows = Math.max(...sizes, concurrency);
  const ids = Array.from({ length: rows }, (_, i) => `rtt-${String(i).padStart(4, '0')}`);
  const item = (id: string, revision: number) => ({
    id: { S: id },
    type: { S: 'file' },
    revision: { S: String(revision) },
    item: { M: { id: { S: id }, type: { S: 'file' }, name: { S: 'report-final-v2.docx' }, size: { N: '123456' }, revision: { N: String(revision) } } },
    syncedAt: { S: new Date().toISOString() },
  });
  const revisions = new Map<string, number>();
  for (const id of ids) {
    await client.send(new PutItemCommand({ TableName: TABLE_NAME, Item: item(id, 1) }));
    revisions.set(id, 1);
  }
  // A conditional PutItem as the sync sends it for a changed item (the condition holds).
  const putOne = async (id: string): Promise<void> => {
    const current = revisions.get(id)!;
    revisions.set(id, current + 1);
    await client.send(
      new PutItemCommand({
        TableName: TABLE_NAME,
        Item: item(id, current + 1),
        ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
        ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
        ExpressionAttributeValues: { ':expected': { S: String(current) } },
      }),
    );
  };
  const timeIt = async (fn: () => Promise<unknown>): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < 25; i += 1) {
      const started = performance.now();
      await fn();
      times.push(performance.now() - started);
    }
    return round(median(times.slice(5)), 2);
  };
  let next = 0;
  const putItem = await timeIt(() => putOne(ids[next++ % ids.length]!));
  const putItemWave: Record<string, number> = { '1': putItem };
  for (const atOnce of new Set(sizes.map((size) => Math.min(concurrency, size)))) {
    if (atOnce > 1) putItemWave[String(atOnce)] = await timeIt(() => Promise.all(ids.slice(0, atOnce).map(putOne)));
  }
  const batchGetItem: Record<string, number> = {};
  for (const size of sizes) {
    batchGetItem[String(size)] = await timeIt(() =>
      client.send(
        new BatchGetItemCommand({
          RequestItems: {
            [TABLE_NAME]: {
              Keys: ids.slice(0, Math.min(size, 100)).map((id) => ({ id: { S: id } })),
              ProjectionExpression: '#id, #revision, #deleted',
              ExpressionAttributeNames: { '#id': 'id', '#revision': 'revision', '#deleted': 'deleted' },
            },
          },
        }),
      ),
    );
  }
  return { batchGetItem, putItem, putItemWave };
}

async function measureProviderRtt(sim: ProviderSimulator): Promise<number> {
  const token = sim.issueAccessToken();
  const id = sim.itemIds()[0]!;
  const times: number[] = [];
  for (let i = 0; i < 25; i += 1) {
    const started = performance.now();
    const response = await fetch(`${sim.baseUrl}/items/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${token}` } });
    await response.arrayBuffer();
    times.push(performance.now() - started);
  }
  sim.resetRequests();
  return median(times.slice(5));
}

function sqsEvent(ids: string[]): SQSEvent {
  const now = String(Date.now());
  return {
    Records: ids.map((id) => ({
      messageId: randomUUID(),
      receiptHandle: `rh-${randomUUID()}`,
      body: JSON.stringify({ id }),
      attributes: { ApproximateReceiveCount: '1', SentTimestamp: now, SenderId: 'AIDABENCH', ApproximateFirstReceiveTimestamp: now },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: QUEUE_ARN,
      awsRegion: AWS_REGION,
    })),
  };
}

function lambdaContext(): Context {
  const started = Date.now();
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'content-sync-item-sync',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:000000000000:function:content-sync-item-sync',
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: '/aws/lambda/content-sync-item-sync',
    logStreamName: 'bench',
    getRemainingTimeInMillis: () => Math.max(0, started + 60_000 - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

function round(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}

// ---- printing ------------------------------------------------------------------------------------

export function formatBenchReport(report: BenchReport): string {
  const o = report.options;
  const lines: string[] = [];
  const rtt = report.dynamodbRttMs;
  lines.push(
    `Benchmark — item-sync handler, provider latency L = ${o.latencyMs} ms, in-batch concurrency C = ${o.concurrency}, ` +
      `${o.runs} runs per figure: median [min–max], warm containers — ${(report.durationMs / 1000).toFixed(0)} s`,
  );
  lines.push(
    `Measured in this run: provider round trip ${report.providerRttMs.toFixed(1)} ms; dynalite: ` +
      Object.entries(rtt.batchGetItem).map(([size, ms]) => `BatchGetItem of ${size} keys ${ms.toFixed(1)} ms`).join(', ') +
      `, conditional PutItem ${rtt.putItem.toFixed(1)} ms, ` +
      Object.entries(rtt.putItemWave)
        .filter(([k]) => k !== '1')
        .map(([k, ms]) => `${k} PutItems at once ${ms.toFixed(1)} ms`)
        .join(', ') +
      ' (dynalite answers one request at a time)',
  );
  lines.push(
    'ideal = ⌈N/C⌉·L + the DynamoDB round trips the sync makes in sequence: 1 BatchGetItem for the batch, then per wave of C items one wave of C conditional PutItems at once (new, changed; none when unchanged)',
  );
  lines.push('');
  lines.push('Wall time per batch (one invocation), ms');
  lines.push(
    table(
      ['batch', 'items', 'batching window', `C=${o.concurrency} wall`, 'ideal', 'ratio to ideal', 'C=1 wall (sequential)', 'C=1 ideal (ratio)', 'speed-up'],
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
    ),
  );
  lines.push(
    'batching window: what the SQS event source needs to hand over such a batch (Lambda requires MaximumBatchingWindowInSeconds ≥ 1 above 10 records, as the stack sets it); it adds up to that much delay before the invocation and is not in the wall time',
  );
  lines.push('');
  lines.push('DynamoDB requests and writes per item (median over the runs)');
  const ops = [...new Set(report.batches.flatMap((b) => Object.keys(b.perItem.requests)))].sort();
  lines.push(
    table(
      ['items', 'batch', ...ops.map((op) => `${op}/item`), 'requests/item', 'writes/item'],
      report.batches.map((b) => [
        b.scenario,
        `N=${b.batchSize}`,
        ...ops.map((op) => (b.perItem.requests[op] ?? 0).toFixed(2)),
        b.perItem.totalRequests.toFixed(2),
        b.perItem.writes.toFixed(2),
      ]),
    ),
  );
  const s = report.secrets;
  lines.push('');
  lines.push(
    `GetSecretValue: ${s.getSecretValueCalls} calls for ${n(s.records)} records = ${s.perThousandRecords.toFixed(2)} per 1,000 records ` +
      `(${s.containers} containers over ${s.benchSeconds.toFixed(0)} s; a container reads the token once, then again only after ${s.tokenCacheSeconds} s or a 401)`,
  );
  if (report.bundles.length > 0) {
    lines.push('');
    lines.push(`Deployed bundles (esbuild with the construct's options: ESM, minified, source map without sources, AWS SDK bundled) and cold import, ${o.runs} fresh processes`);
    lines.push(
      table(
        ['function', 'bundle', 'source map', 'cold import()', 'process start + import'],
        report.bundles.map((b) => [
          b.name,
          `${(b.bytes / 1024).toFixed(0)} KiB`,
          `${(b.sourceMapBytes / 1024).toFixed(0)} KiB`,
          formatSummary(b.importMs, 0, ' ms'),
          formatSummary(b.processMs, 0, ' ms'),
        ]),
      ),
    );
  }
  if (report.warnings.length > 0) {
    lines.push('');
    lines.push('WARNINGS (figures may be off):');
    for (const warning of report.warnings) lines.push(`  ${warning}`);
  }
  return lines.join('\n');
}
