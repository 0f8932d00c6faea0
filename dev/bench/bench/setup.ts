/**
 * The bench's world: the provider simulator (latency L) with enough items for every run, dynalite
 * with the items table, s3rver with the items bucket (the generated items fit in a row: the sync
 * never loads its S3 adapter here), Secrets Manager and SQS in process (in-process-aws.ts: the sync reads the
 * token once per container per ACCESS_TOKEN_CACHE_SECONDS, and calls SQS only for dead letters and
 * waiting records, which a bench batch does not produce), and two warm containers of the real sync
 * handler: in-batch concurrency C, and C = 1 (the sequential baseline).
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { createSyncHandler, type SyncHandler } from '../../../functions/item-sync/app.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';
import { OutputCapture } from '../../fakes/capture-output.js';
import { DynamoMeter, instrumentDynamo } from '../../fakes/dynamo-meter.js';
import type { Dynalite } from '../../fakes/dynalite.js';
import { attachSecrets, attachSqs, InProcessEventSource, type CallCounts } from '../../fakes/in-process-aws.js';
import { createContext, functionEnv, sqsEvent } from '../../fakes/lambda.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../fakes/local-aws.js';
import { MemoryPaceStore } from '../../fakes/memory-pace-store.js';
import type { LocalS3 } from '../../fakes/s3.js';
import { SecretStore } from '../../fakes/secrets-model.js';
import { SqsModel } from '../../fakes/sqs-model.js';
import { generateItemTree } from '../../simulator/item-tree.js';
import { ProviderSimulator } from '../../simulator/provider-simulator.js';
import { startStorage } from '../support/storage.js';
import type { BenchOptions } from './options.js';

export const NAMES = {
  table: 'content-sync-bench-items',
  bucket: 'content-sync-bench-items',
  controlTable: 'content-sync-bench-control',
  queue: 'content-sync-sync-queue',
  deadLetterQueue: 'content-sync-dead-letters',
  accessTokenSecret: 'content-sync/provider-access-token',
} as const;

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
  handlers: { concurrent: SyncHandler; sequential: SyncHandler };
  tokenCacheSeconds: number;
  secretsCalls: CallCounts;
  capture: OutputCapture;
  /** Anything that makes a figure suspect. */
  warnings: string[];
  /** Records handed to the handlers so far. */
  records: number;
  /** Item ids no run has used yet ("new" items). */
  takeIds(count: number): string[];
  /** One invocation of `handler` with a batch of these ids, timed. */
  invoke(handler: SyncHandler, ids: readonly string[], what: string): Promise<Invocation>;
  deadLetters(): number;
  close(): Promise<void>;
}

export async function setUpBench(o: BenchOptions): Promise<BenchWorld> {
  // Enough items for every run: fresh ids for "new" per run, batch size and handler; + warm-up.
  const perRun = o.batchSizes.reduce((sum, size) => sum + size, 0) * 2;
  const tree = generateItemTree({ count: perRun * o.runs + Math.max(...o.batchSizes) * 2, seed: o.seed });
  const sim = await ProviderSimulator.start({ latencyMs: o.latencyMs, items: tree, seed: o.seed });
  const clients: Array<{ destroy(): void }> = [];
  const capture = new OutputCapture();
  const { dynalite, s3, close } = await startStorage({ sim, capture, clients }, { where: o.dynalite, table: NAMES.table, bucket: NAMES.bucket });
  try {
    const secrets = new SecretStore({ region: LOCAL_REGION });
    secrets.set(NAMES.accessTokenSecret, JSON.stringify({ accessToken: sim.issueAccessToken(), refreshedAt: new Date().toISOString() }));
    const sqs = new SqsModel({ region: LOCAL_REGION });
    sqs.createQueue(NAMES.deadLetterQueue);
    sqs.createQueue(NAMES.queue);
    const { meter, ...containers } = containersOf(o, { sim, dynalite, s3, secrets, sqs }, clients);
    const queue = new InProcessEventSource(sqs, NAMES.queue, 0);
    const freshIds = tree.map((item) => item.id);
    let nextFresh = 0;
    const world: BenchWorld = {
      o,
      sim,
      dynalite,
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
      async invoke(handler, ids, what) {
        const result = await invokeWith(sqs, queue, meter, handler, ids);
        world.records += ids.length;
        if (result.notDone > 0) world.warnings.push(`${what}: ${result.notDone} records not done`);
        return result;
      },
      deadLetters: () => sqs.size(NAMES.deadLetterQueue),
      close,
    };
    return world;
  } catch (error) {
    await close();
    throw error;
  }
}

/** The two handlers, each a container of its own (clients, token cache), sharing the DynamoDB meter. */
function containersOf(
  o: BenchOptions,
  aws: { sim: ProviderSimulator; dynalite: Dynalite; s3: LocalS3; secrets: SecretStore; sqs: SqsModel },
  clients: Array<{ destroy(): void }>,
): Pick<BenchWorld, 'handlers' | 'tokenCacheSeconds' | 'secretsCalls'> & { meter: DynamoMeter } {
  const meter = new DynamoMeter();
  const secretsCalls: CallCounts = {};
  const env = functionEnv({
    baseUrl: aws.sim.baseUrl,
    accessTokenSecretId: NAMES.accessTokenSecret,
    itemsTableName: NAMES.table,
    itemsBucketName: NAMES.bucket,
    controlTableName: NAMES.controlTable,
    revisionField: 'revision',
    deadLetterQueueUrl: aws.sqs.queue(NAMES.deadLetterQueue).url,
    // A ceiling above anything a batch asks for: the pace never holds a request back here.
    providerRequestsPerSecond: '100000',
  });
  const paceStore = new MemoryPaceStore();
  const makeHandler = (concurrency: number): SyncHandler => {
    const dynamodb = instrumentDynamo(aws.dynalite.client(), meter);
    const sqs = attachSqs(new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), aws.sqs);
    const secrets = attachSecrets(new SecretsManagerClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), aws.secrets, secretsCalls);
    const s3 = aws.s3.client();
    clients.push(dynamodb, sqs, secrets, s3);
    return createSyncHandler({ config: loadSyncConfig({ ...env, ...functionEnv({ fetchConcurrency: String(concurrency) }) }), dynamodb, sqs, secrets, s3, paceStore });
  };
  return {
    handlers: { concurrent: makeHandler(o.concurrency), sequential: makeHandler(1) },
    tokenCacheSeconds: loadSyncConfig(env).tokenCacheSeconds,
    secretsCalls,
    meter,
  };
}

/** One invocation with a batch received from the sync queue, as the event source hands it over; timed around the handler only. */
async function invokeWith(
  sqs: SqsModel,
  queue: InProcessEventSource,
  meter: DynamoMeter,
  handler: SyncHandler,
  ids: readonly string[],
): Promise<Invocation & { notDone: number }> {
  for (const id of ids) sqs.send(NAMES.queue, { body: JSON.stringify({ id }) });
  const messages = await queue.receive(ids.length);
  meter.reset();
  const event = sqsEvent(messages, queue.arn);
  const started = performance.now();
  const answer = await handler(event, createContext('content-sync-item-sync', LOCAL_REGION, 60_000, { logStreamName: 'bench' }));
  const wallMs = performance.now() - started;
  await queue.settle(messages, []);
  sqs.purge(NAMES.queue);
  return { wallMs, requests: { ...meter.requests }, writes: meter.writes.length, notDone: answer.batchItemFailures.length };
}
