/**
 * The bench's measurements: warm-up, then per run, batch size and container (C and C = 1) one batch
 * of new items, the same items again (unchanged) and once more after a revision bump at the
 * provider (changed); then the medians and the ideal time of each batch.
 */
import { syncEventSourceDeployment } from '../../../infra/deployment.js';
import { systemConfig } from '../../system/config.js';
import { median, round, summarize, type Summary } from '../support/stats.js';
import { SCENARIOS, type Scenario } from './options.js';
import type { DynamoRtt } from './round-trips.js';
import type { BenchWorld } from './setup.js';

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

/** The batching window the SQS event source needs for a batch size (as deployed with that syncBatchSize). */
export function batchingWindowSeconds(batchSize: number): number {
  return syncEventSourceDeployment(systemConfig({ syncBatchSize: batchSize })).maxBatchingWindowSeconds ?? 0;
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

/** Warm containers: the token read, connection pools and JIT are not part of a batch's time. */
export async function warmUp(world: BenchWorld): Promise<void> {
  const { handlers, o } = world;
  for (const [handler, size] of [[handlers.concurrent, Math.max(...o.batchSizes)], [handlers.sequential, Math.min(...o.batchSizes)]] as const) {
    const ids = world.takeIds(size);
    await world.invoke(handler, ids, 'warm-up');
    await world.invoke(handler, ids, 'warm-up');
  }
}

interface Sample {
  wallMs: number[];
  seqWallMs: number[];
  requests: Array<Record<string, number>>;
  writes: number[];
}

/** Samples by batch size and scenario. */
class Samples {
  private readonly samples = new Map<string, Sample>();

  of(size: number, scenario: Scenario): Sample {
    const key = `${size}/${scenario}`;
    let sample = this.samples.get(key);
    if (!sample) this.samples.set(key, (sample = { wallMs: [], seqWallMs: [], requests: [], writes: [] }));
    return sample;
  }
}

const EXPECTED_WRITES: Record<Scenario, number> = { new: 1, unchanged: 0, changed: 1 };

/** Every run of every batch size, both containers, the three scenarios each; prints a line per run and size. */
export async function measureRuns(world: BenchWorld, print: (line: string) => void): Promise<Samples> {
  const { o } = world;
  const samples = new Samples();
  for (let run = 1; run <= o.runs; run += 1) {
    for (const size of o.batchSizes) {
      for (const which of ['concurrent', 'sequential'] as const) await measureScenarios(world, samples, run, size, which);
      print(
        `  run ${run}/${o.runs} N=${size}: ` +
          SCENARIOS.map((scenario) => {
            const s = samples.of(size, scenario);
            return `${scenario} ${s.wallMs.at(-1)!.toFixed(0)} ms (C=1: ${s.seqWallMs.at(-1)!.toFixed(0)} ms)`;
          }).join(', '),
      );
    }
  }
  return samples;
}

async function measureScenarios(world: BenchWorld, samples: Samples, run: number, size: number, which: 'concurrent' | 'sequential'): Promise<void> {
  const ids = world.takeIds(size);
  for (const scenario of SCENARIOS) {
    if (scenario === 'changed') for (const id of ids) world.sim.bumpRevision(id);
    const what = `run ${run}, N=${size}, ${scenario}, ${which}`;
    const result = await world.invoke(world.handlers[which], ids, what);
    const s = samples.of(size, scenario);
    if (which === 'concurrent') {
      s.wallMs.push(result.wallMs);
      s.requests.push(result.requests);
      s.writes.push(result.writes);
    } else {
      s.seqWallMs.push(result.wallMs);
    }
    if (result.writes !== EXPECTED_WRITES[scenario] * size) {
      world.warnings.push(`${what}: ${result.writes} writes for ${size} items (expected ${EXPECTED_WRITES[scenario] * size})`);
    }
  }
  world.sim.resetRequests();
}

/** The medians of every batch size and scenario, against their ideal. */
export function batchResults(o: BenchWorld['o'], samples: Samples, rtt: DynamoRtt): BatchResult[] {
  return o.batchSizes.flatMap((size) =>
    SCENARIOS.map((scenario): BatchResult => {
      const s = samples.of(size, scenario);
      const wallMs = summarize(s.wallMs);
      const sequentialWallMs = summarize(s.seqWallMs);
      const ideal = idealMs(size, o.concurrency, o.latencyMs, scenario, rtt);
      const sequentialIdeal = idealMs(size, 1, o.latencyMs, scenario, rtt);
      const operations = [...new Set(s.requests.flatMap((r) => Object.keys(r)))].sort();
      const requests: Record<string, number> = {};
      for (const op of operations) requests[op] = round(median(s.requests.map((r) => r[op] ?? 0)) / size, 3);
      const totalRequests = round(median(s.requests.map((r) => Object.values(r).reduce((a, b) => a + b, 0))) / size, 3);
      return {
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
      };
    }),
  );
}
