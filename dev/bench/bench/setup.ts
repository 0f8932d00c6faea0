/**
 * The bench's world: the local system (dev/system) as deployed for the provider simulator (latency
 * L) with enough items for every run: dynalite with the items table, s3rver with the items bucket
 * (the generated items fit in a row: the sync never loads its S3 adapter here), SQS and Secrets
 * Manager in process (the sync reads the token once per container per ACCESS_TOKEN_CACHE_SECONDS,
 * and calls SQS only for dead letters and waiting records, which a bench batch does not produce),
 * and two warm containers of the real sync: in-batch concurrency C, and C = 1 (the sequential
 * baseline, SYNC_FETCH_CONCURRENCY tuned to 1).
 */
import type { SyncHandler } from '../../../functions/item-sync/app.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';
import { OutputCapture } from '../../fakes/capture-output.js';
import { DynamoMeter, instrumentDynamo } from '../../fakes/dynamo-meter.js';
import type { Dynalite } from '../../fakes/dynalite.js';
import type { CallCounts } from '../../fakes/in-process-aws.js';
import { sqsEvent, type EventSourceQueue } from '../../fakes/lambda.js';
import { MemoryPaceStore } from '../../fakes/memory-pace-store.js';
import { generateItemTree } from '../../simulator/item-tree.js';
import { ProviderSimulator } from '../../simulator/provider-simulator.js';
import { inProcessAws } from '../../system/aws.js';
import { eventSourceQueue } from '../../system/event-sources.js';
import type { BuiltFunction } from '../../system/functions.js';
import { localNames } from '../../system/names.js';
import { startStorage } from '../../system/storage.js';
import { buildSystem, type LocalSystem } from '../../system/system.js';
import type { BenchOptions } from './options.js';

export const NAMES = localNames('content-sync-bench');

export interface Invocation {
  wallMs: number;
  /** DynamoDB requests by operation during the invocation. */
  requests: Record<string, number>;
  writes: number;
}

export interface BenchWorld {
  o: BenchOptions;
  sim: ProviderSimulator;
  dynalite: Dynalite;
  handlers: { concurrent: BuiltFunction<SyncHandler>; sequential: BuiltFunction<SyncHandler> };
  tokenCacheSeconds: number;
  secretsCalls: CallCounts;
  capture: OutputCapture;
  /** Anything that makes a figure suspect. */
  warnings: string[];
  /** Records handed to the handlers so far. */
  records: number;
  /** Item ids no run has used yet ("new" items). */
  takeIds(count: number): string[];
  /** One invocation of `fn` with a batch of these ids, timed. */
  invoke(fn: BuiltFunction<SyncHandler>, ids: readonly string[], what: string): Promise<Invocation>;
  deadLetters(): number;
  close(): Promise<void>;
}

export async function setUpBench(o: BenchOptions): Promise<BenchWorld> {
  // Enough items for every run: fresh ids for "new" per run, batch size and handler; + warm-up.
  const perRun = o.batchSizes.reduce((sum, size) => sum + size, 0) * 2;
  const tree = generateItemTree({ count: perRun * o.runs + Math.max(...o.batchSizes) * 2, seed: o.seed });
  const sim = await ProviderSimulator.start({ latencyMs: o.latencyMs, items: tree, seed: o.seed });
  const capture = new OutputCapture();
  const clients: Array<{ destroy(): void }> = [];
  let system: LocalSystem | undefined;
  const close = async (): Promise<void> => {
    capture.stop();
    for (const client of clients) client.destroy();
    await sim.close();
    await system?.close();
  };
  try {
    const storage = await startStorage(NAMES, { where: o.dynalite });
    system = buildSystem({
      names: NAMES,
      // A ceiling above anything a batch asks for: the pace never holds a request back here.
      context: { baseUrl: sim.baseUrl, providerRequestsPerSecond: 100_000 },
      aws: inProcessAws(),
      storage,
      secrets: { accessTokenValue: JSON.stringify({ accessToken: sim.issueAccessToken(), refreshedAt: new Date().toISOString() }) },
    });
    const { meter, ...containers } = containersOf(o, system, clients);
    const queue = eventSourceQueue(system, 'sync', 0);
    const freshIds = tree.map((item) => item.id);
    let nextFresh = 0;
    const local = system;
    const world: BenchWorld = {
      o,
      sim,
      dynalite: storage.dynamo,
      capture,
      warnings: [],
      records: 0,
      ...containers,
      takeIds(count) {
        const ids = freshIds.slice(nextFresh, nextFresh + count);
        nextFresh += count;
        if (ids.length < count) throw new Error('bench: ran out of item ids');
        return ids;
      },
      async invoke(fn, ids, what) {
        const result = await invokeWith(local, queue, meter, fn, ids);
        world.records += ids.length;
        if (result.notDone > 0) world.warnings.push(`${what}: ${result.notDone} records not done`);
        return result;
      },
      deadLetters: () => local.aws.sqs.size(local.queues.sync.deadLetterUrl),
      close,
    };
    return world;
  } catch (error) {
    await close();
    throw error;
  }
}

/** The two containers, each with its own clients and token cache, sharing the DynamoDB meter and the pace. */
function containersOf(
  o: BenchOptions,
  system: LocalSystem,
  clients: Array<{ destroy(): void }>,
): Pick<BenchWorld, 'handlers' | 'tokenCacheSeconds' | 'secretsCalls'> & { meter: DynamoMeter } {
  const meter = new DynamoMeter();
  const secretsCalls: CallCounts = {};
  // The control table's pace row, in memory here (a bench batch does not measure the pace).
  const paceStore = new MemoryPaceStore();
  const container = (concurrency: number): BuiltFunction<SyncHandler> => {
    const dynamodb = instrumentDynamo(system.storage.dynamo.client(), meter);
    clients.push(dynamodb);
    return system.syncContainer({ dynamodb, secrets: system.aws.secretsClient(secretsCalls), paceStore, tuning: { fetchConcurrency: concurrency } });
  };
  const concurrent = container(o.concurrency);
  return {
    handlers: { concurrent, sequential: container(1) },
    tokenCacheSeconds: loadSyncConfig(concurrent.environment).tokenCacheSeconds,
    secretsCalls,
    meter,
  };
}

/** One invocation with a batch received from the sync queue, as the event source hands it over; timed around the handler only. */
async function invokeWith(
  system: LocalSystem,
  queue: EventSourceQueue,
  meter: DynamoMeter,
  fn: BuiltFunction<SyncHandler>,
  ids: readonly string[],
): Promise<Invocation & { notDone: number }> {
  const { sqs } = system.aws;
  const queueName = system.queues.sync.name;
  for (const id of ids) sqs.send(queueName, { body: JSON.stringify({ id }) });
  const messages = await queue.receive(ids.length);
  meter.reset();
  const event = sqsEvent(messages, queue.arn);
  const started = performance.now();
  const answer = await fn.handler(event, system.context(fn, { logStreamName: 'bench' }));
  const wallMs = performance.now() - started;
  await queue.settle(messages, []);
  sqs.purge(queueName);
  return { wallMs, requests: { ...meter.requests }, writes: meter.writes.length, notDone: answer.batchItemFailures.length };
}
