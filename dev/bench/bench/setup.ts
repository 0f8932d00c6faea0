/**
 * The bench's world: the local system (dev/system) as deployed for the provider simulator (latency
 * L) with enough items for every run: DynamoDB Local with the items table and the connections table (the
 * simulator's account as the connection `default`, added as the operator CLI adds it), s3rver with
 * the items bucket (the generated items fit in a row: the sync never loads its S3 adapter here),
 * SQS in process (the sync calls it only for dead letters and waiting records, which a bench batch
 * does not produce), and two warm containers of the real sync: in-batch concurrency C, and C = 1
 * (the sequential baseline, SYNC_FETCH_CONCURRENCY tuned to 1). Every DynamoDB client takes AWS's
 * latency as dev/fakes/dynamo-latency.ts models it (`dynamoLatency` scales it). Each container reads the
 * connection's row once per ACCESS_TOKEN_CACHE_SECONDS (and refreshes its first token on demand):
 * those connections-table requests are counted apart from the batches' own.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SyncHandler } from '../../../functions/item-sync/app.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';
import { DEFAULT_CONNECTION } from '../../../functions/shared/connections/connection.js';
import { OutputCapture } from '../../fakes/capture-output.js';
import { dynamoLatency, withDynamoLatency } from '../../fakes/dynamo-latency.js';
import { DynamoMeter, instrumentDynamo } from '../../fakes/dynamo-meter.js';
import type { LocalDynamoDb } from '../../fakes/local-dynamo.js';
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
  dynamo: LocalDynamoDb;
  handlers: { concurrent: BuiltFunction<SyncHandler>; sequential: BuiltFunction<SyncHandler> };
  tokenCacheSeconds: number;
  /** The containers' requests to the connections table, by operation. */
  connectionCalls: CallCounts;
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
    const started = await startStorage(NAMES);
    // Every client the system and the bench make takes AWS's latency (the round trips measured include it).
    const storage = { ...started, dynamo: withDynamoLatency(started.dynamo, dynamoLatency({ factor: o.dynamoLatency })) };
    system = buildSystem({
      names: NAMES,
      // A ceiling above anything a batch asks for: the pace never holds a request back here.
      // The sync queue's event source alone: no reconcile queue (freshnessHours 0), so a batch's ids of
      // the one connection are synced where they are, not moved to a background lane no one drains here.
      context: { baseUrl: sim.baseUrl, providerRequestsPerSecond: 100_000, freshnessHours: 0 },
      aws: inProcessAws(),
      storage,
    });
    await system.connections.putCredentials({ connection: DEFAULT_CONNECTION, clientId: sim.clientId, refreshToken: sim.refreshToken, at: new Date().toISOString() });
    const { meter, ...containers } = containersOf(o, system, clients);
    const queue = eventSourceQueue(system, 'sync', 0);
    const freshIds = tree.map((item) => item.id);
    let nextFresh = 0;
    const local = system;
    const world: BenchWorld = {
      o,
      sim,
      dynamo: storage.dynamo,
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
        const result = await invokeWith(local, queue, meter, containers.connectionCalls, fn, ids);
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

/** The two containers, each with its own clients and connections' cache, sharing the DynamoDB meter and the pace. */
function containersOf(
  o: BenchOptions,
  system: LocalSystem,
  clients: Array<{ destroy(): void }>,
): Pick<BenchWorld, 'handlers' | 'tokenCacheSeconds' | 'connectionCalls'> & { meter: DynamoMeter } {
  const meter = new DynamoMeter();
  const connectionCalls: CallCounts = {};
  // The control table's pace row, in memory and without latency here (a bench batch does not measure the pace).
  const paceStore = new MemoryPaceStore();
  const container = (concurrency: number): BuiltFunction<SyncHandler> => {
    const dynamodb = countTable(instrumentDynamo(system.storage.dynamo.client(), meter), system.names.connectionsTable, connectionCalls);
    clients.push(dynamodb);
    return system.syncContainer({ dynamodb, paceStoreFor: () => paceStore, tuning: { fetchConcurrency: concurrency } });
  };
  const concurrent = container(o.concurrency);
  return {
    handlers: { concurrent, sequential: container(1) },
    tokenCacheSeconds: loadSyncConfig(concurrent.environment).tokenCacheSeconds,
    connectionCalls,
    meter,
  };
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<unknown>;

/** Counts the client's requests to `table` by operation (beside the meter's count of every request, in the same step). */
function countTable(client: DynamoDBClient, table: string, counts: CallCounts): DynamoDBClient {
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      if (args.input['TableName'] === table) {
        const operation = (context.commandName ?? '').replace(/Command$/, '');
        counts[operation] = (counts[operation] ?? 0) + 1;
      }
      return next(args);
    }) as never,
    { step: 'deserialize', priority: 'high', name: 'benchConnectionsTable' },
  );
  return client;
}

/**
 * One invocation with a batch received from the sync queue, as the event source hands it over;
 * timed around the handler only. Its DynamoDB requests leave out the connections table's (a read
 * of the connection once a cache period: counted apart, per 1,000 records).
 */
async function invokeWith(
  system: LocalSystem,
  queue: EventSourceQueue,
  meter: DynamoMeter,
  connectionCalls: CallCounts,
  fn: BuiltFunction<SyncHandler>,
  ids: readonly string[],
): Promise<Invocation & { notDone: number }> {
  const { sqs } = system.aws;
  const queueName = system.queues.sync.name;
  for (const id of ids) sqs.send(queueName, { body: JSON.stringify({ connection: DEFAULT_CONNECTION, id }) });
  const messages = await queue.receive(ids.length);
  meter.reset();
  const before = { ...connectionCalls };
  const event = sqsEvent(messages, queue.arn);
  const started = performance.now();
  const answer = await fn.handler(event, system.context(fn, { logStreamName: 'bench' }));
  const wallMs = performance.now() - started;
  await queue.settle(messages, []);
  sqs.purge(queueName);
  const requests: Record<string, number> = {};
  for (const [operation, count] of Object.entries(meter.requests)) {
    const own = count - ((connectionCalls[operation] ?? 0) - (before[operation] ?? 0));
    if (own > 0) requests[operation] = own;
  }
  return { wallMs, requests, writes: meter.writes.length, notDone: answer.batchItemFailures.length };
}
