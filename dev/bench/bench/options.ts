/** The bench's knobs and their defaults (`npm run bench` takes a few of them from the command line). */
import { DEFAULTS } from '../../../functions/shared/config.js';

export interface BenchOptions {
  /** Provider latency per request, ms. */
  latencyMs: number;
  /** Scales AWS's DynamoDB latency injected into every call (dev/fakes/dynamo-latency.ts): 0 turns it off. */
  dynamoLatency: number;
  /** Runs per measurement; the table shows their median, min and max. */
  runs: number;
  batchSizes: number[];
  /** In-batch concurrency C of the measured handler (SYNC_FETCH_CONCURRENCY). */
  concurrency: number;
  /** Also measure the bundles and their cold import (slower: builds with esbuild, loads aws-cdk-lib). */
  bundles: boolean;
  seed: number;
  progress?: (line: string) => void;
}

export const BENCH_DEFAULTS: Omit<BenchOptions, 'progress'> = {
  latencyMs: 50,
  dynamoLatency: 1,
  runs: 5,
  batchSizes: [10, 100],
  concurrency: DEFAULTS.fetchConcurrency,
  bundles: true,
  seed: 1,
};

export type Scenario = 'new' | 'unchanged' | 'changed';

export const SCENARIOS: Scenario[] = ['new', 'unchanged', 'changed'];

/** `npm run bench`'s command line, as parseArgs reads it (test/docs holds the docs to it). */
export const BENCH_CLI_OPTIONS = {
  latency: { type: 'string' },
  'dynamo-latency': { type: 'string' },
  runs: { type: 'string' },
  concurrency: { type: 'string' },
  seed: { type: 'string' },
  'no-bundles': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;
