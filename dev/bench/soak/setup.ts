/**
 * The soak's world before the first message: the provider simulator with its tree (a few files too
 * large for a row), its faults and the deliberately bad items; the local system as deployed
 * (dev/system: DynamoDB Local with the items table and the connections table, every call taking AWS's
 * latency as dev/fakes/dynamo-latency.ts models it, s3rver with the items bucket, the SQS model in
 * process on a scaled clock) with the simulator's account added as the
 * connection `default` (as the operator CLI adds it) and its injected faults (a share of the
 * handlers' S3 and SQS calls and of their reads of the connections table fail); one sync container
 * per instance (its own clients, connections' cache and random source) and two token refreshers,
 * which run once at the start as the first schedule would.
 */
import { ProvisionedThroughputExceededException, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3ServiceException, type S3Client } from '@aws-sdk/client-s3';
import type { SyncHandler } from '../../../functions/item-sync/app.js';
import { DEFAULT_CONNECTION } from '../../../functions/shared/connections/connection.js';
import { OutputCapture } from '../../fakes/capture-output.js';
import { scaledClock } from '../../fakes/clock.js';
import { dynamoLatency, realSleep, withDynamoLatency } from '../../fakes/dynamo-latency.js';
import { DynamoMeter, instrumentDynamo } from '../../fakes/dynamo-meter.js';
import { MemoryPaceStore } from '../../fakes/memory-pace-store.js';
import { generateItemTree } from '../../simulator/item-tree.js';
import { ProviderSimulator, type Fault, type FaultRule, type SimulatorItem } from '../../simulator/provider-simulator.js';
import { mulberry32 } from '../../simulator/random.js';
import { inProcessAws } from '../../system/aws.js';
import type { BuiltFunction } from '../../system/functions.js';
import { startStorage } from '../../system/storage.js';
import { buildSystem, type LocalSystem } from '../../system/system.js';
import { badMessages, SOAK_MAX_RESPONSE_BYTES, type BadMessage } from './bad-messages.js';
import type { SoakOptions } from './options.js';
import { ProviderTally } from './provider-tally.js';
import { LARGE_FIELD, largeText, NAMES, type InjectedFaults, type SoakWorld } from './world.js';

export async function setUpSoak(o: SoakOptions): Promise<SoakWorld> {
  const startedAt = new Date();
  const t0 = Date.now();
  const { tree, sim, bad, tokens, large } = await startProvider(o);
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
    system = await startSystem(o, sim);
    const faults = injectFaults(o, system);
    const world: SoakWorld = {
      o,
      startedAt,
      t0,
      tree,
      sim,
      bad,
      tokens,
      tally: new ProviderTally(sim),
      capture,
      say: (line) => capture.released(() => o.progress?.(line)),
      system,
      dynamo: system.storage.dynamo,
      s3: system.storage.s3!,
      large,
      sqs: system.aws.sqs,
      queueUrl: system.queues.sync.url,
      deadLetterQueueUrl: system.queues.sync.deadLetterUrl,
      injected: faults,
      calls: { sqs: {}, connections: {} },
      meter: new DynamoMeter(),
      instances: [],
      tokenStats: { rotations: 0, refresherFailures: 0, revocations: 0, refresherRuns: 0, refreshed: 0, skipped: 0, failed: 0 },
      refresh: async () => undefined,
      ageAccessToken: async () => undefined,
      close,
    };
    capture.start();
    world.instances = createInstances(world, clients);
    world.refresh = refreshersOf(world, clients);
    world.ageAccessToken = tokenAger(world, clients);
    await world.refresh('deploy');
    return world;
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * The local system as deployed for the simulator: DynamoDB Local and s3rver, SQS in process on a clock
 * where an SQS second lasts `msPerSecond` real milliseconds (the queues' visibility time-out and
 * maxReceiveCount the soak's options, by default the deployed ones), and the simulator's account
 * as the connection `default`.
 */
async function startSystem(o: SoakOptions, sim: ProviderSimulator): Promise<LocalSystem> {
  const started = await startStorage(NAMES);
  // Every client the system and the soak make takes AWS's latency (its checks read the tables without it).
  const storage = { ...started, dynamo: withDynamoLatency(started.dynamo, dynamoLatency({ factor: o.dynamoLatency })) };
  const system = buildSystem({
    names: NAMES,
    context: {
      baseUrl: sim.baseUrl,
      revisionField: o.revisionField,
      syncBatchSize: o.batchSize,
      // A ceiling above anything the instances ask for: the pace never holds a request back here.
      providerRequestsPerSecond: 100_000,
      // The soak drives the sync queue's event source alone: no reconcile queue, so no background
      // lane, and a batch's backlog of one connection is synced where it is (docs/fairness.md).
      freshnessHours: 0,
    },
    tuning: { providerTimeoutMs: o.providerTimeoutMs, maxResponseBytes: SOAK_MAX_RESPONSE_BYTES },
    aws: inProcessAws({ sqsClock: scaledClock(1000 / o.msPerSecond) }),
    storage,
    queues: { visibilityTimeoutSeconds: o.visibilityTimeoutSeconds, maxReceiveCount: o.maxReceiveCount },
  });
  try {
    await system.connections.putCredentials({ connection: DEFAULT_CONNECTION, clientId: sim.clientId, refreshToken: sim.refreshToken, at: new Date().toISOString() });
  } catch (error) {
    await system.close();
    throw error;
  }
  return system;
}

/** The provider: the tree, the bad items and faults (specific rules first: the first match wins), and every token it issues. */
async function startProvider(
  o: SoakOptions,
): Promise<{ tree: SimulatorItem[]; sim: ProviderSimulator; bad: BadMessage[]; tokens: Set<string>; large: Set<string> }> {
  const tree = generateItemTree({ count: o.ids, seed: o.seed, revisionField: o.revisionField });
  const large = makeLarge(tree, o);
  const sim = await ProviderSimulator.start({ latencyMs: o.latencyMs, rotateRefreshToken: true, revisionField: o.revisionField, items: tree, seed: o.seed });
  const bad = badMessages(o.revisionField);
  for (const message of bad) message.setup?.(sim);
  // A few 429s for certain (the first item requests after the deploy-time refresh), then the random ones.
  if (o.rateLimitRate > 0) {
    sim.addFault({ endpoint: 'items', times: SURE_RATE_LIMITS, fault: { kind: 'status', status: 429, headers: { 'Retry-After': '1' } } });
  }
  addFaults(sim, 'items', providerFaults(o));
  addFaults(sim, 'token', [[o.tokenFailureRate, { kind: 'status', status: 503 }]]);
  // Every token the provider hands out: access tokens, and the refresh tokens rotation makes.
  const tokens = new Set<string>([sim.refreshToken]);
  const issue = sim.issueAccessToken.bind(sim);
  sim.issueAccessToken = (...args: Parameters<ProviderSimulator['issueAccessToken']>) => {
    const token = issue(...args);
    tokens.add(token);
    return token;
  };
  const account = sim.account(DEFAULT_CONNECTION);
  const rotate = account.rotate.bind(account);
  account.rotate = (...args: Parameters<typeof account.rotate>) => {
    const token = rotate(...args);
    tokens.add(token);
    return token;
  };
  return { tree, sim, bad, tokens, large };
}

/** Gives a share of the tree's files (at least 3) the large field; their ids. */
function makeLarge(tree: SimulatorItem[], o: SoakOptions): Set<string> {
  const files = tree.filter((item) => item.type === 'file');
  const random = mulberry32((o.seed ^ 0x1a26e) >>> 0);
  const count = Math.min(files.length, Math.max(3, Math.round(files.length * o.largeItemShare)));
  const large = new Set<string>();
  while (large.size < count) large.add(files[Math.floor(random() * files.length)]!.id);
  for (const item of files) if (large.has(item.id)) item[LARGE_FIELD] = largeText(o.seed);
  return large;
}

/** Rules with effective shares: the simulator tries rules in order, each with its own draw. */
function addFaults(sim: ProviderSimulator, endpoint: FaultRule['endpoint'], shares: Array<[number, Fault]>): void {
  let left = 1;
  for (const [share, fault] of shares) {
    if (share <= 0) continue;
    const probability = Math.min(1, share / left);
    sim.addFault({ endpoint, probability, fault });
    left -= share;
  }
}

function providerFaults(o: SoakOptions): Array<[number, Fault]> {
  const t = o.transientRate;
  const r = o.rateLimitRate;
  return [
    [t * 0.3, { kind: 'status', status: 500 }],
    [t * 0.15, { kind: 'status', status: 502 }],
    [t * 0.25, { kind: 'status', status: 503 }],
    [t * 0.1, { kind: 'status', status: 504 }],
    [t * 0.05, { kind: 'status', status: 408 }],
    [t * 0.15, { kind: 'drop' }],
    // A 429 stops every container for its Retry-After, in real time (the provider pace): short ones,
    // so that the run is not mostly waiting. Long and HTTP-date Retry-Afters are the provider
    // client's and the pace's unit tests'.
    [r * 0.5, { kind: 'status', status: 429, headers: { 'Retry-After': '1' } }],
    [r * 0.2, { kind: 'status', status: 429, headers: { 'Retry-After': '2' } }],
    [r * 0.3, { kind: 'status', status: 429 }],
    [o.slowRate, { kind: 'delay', ms: o.slowMs }],
    [o.hangRate, { kind: 'hang' }],
  ];
}

/** SQS refuses a share of the handlers' calls (the connections table's reads: connectionsFaults). */
function injectFaults(o: SoakOptions, system: LocalSystem): InjectedFaults {
  const injected: InjectedFaults = { deadLetterSendFailures: 0, visibilityChangeFailures: 0, connectionReadFailures: 0, s3PutFailures: 0, s3DeleteFailures: 0 };
  const { sqs } = system.aws;
  const deadLetterQueue = system.queues.sync.deadLetterName;
  const sqsRandom = mulberry32(o.seed ^ 0x5a5);
  sqs.sendFault = ({ queueName }) => {
    if (queueName !== deadLetterQueue || !(o.deadLetterSendFailureRate > 0 && sqsRandom() < o.deadLetterSendFailureRate)) return undefined;
    injected.deadLetterSendFailures += 1;
    return { code: 'InternalError', message: 'We encountered an internal error. Please try again. (injected)', senderFault: false };
  };
  sqs.visibilityFault = () => {
    if (!(o.visibilityFailureRate > 0 && sqsRandom() < o.visibilityFailureRate)) return undefined;
    injected.visibilityChangeFailures += 1;
    return { code: 'InternalError', message: 'We encountered an internal error. (injected)', senderFault: false };
  };
  return injected;
}

/** 429s answered for certain, whatever the draws (each stops every instance for a second). */
const SURE_RATE_LIMITS = 2;

/** The breaker's probe interval in the soak (real time). */
const PROBE_INTERVAL_MS = 200;

/** One sync container per instance, each with its own clients (DynamoDB with its own chaos draws) and random source. */
function createInstances(world: SoakWorld, clients: Array<{ destroy(): void }>): Array<BuiltFunction<SyncHandler>> {
  const { o, system } = world;
  // The control table's pace row, shared by every container: its reads and conditional writes take
  // AWS's latency too, so that the containers race for it as they would in AWS.
  const paceStore = new MemoryPaceStore({ latency: { latency: dynamoLatency({ factor: o.dynamoLatency }), sleep: realSleep } });
  const sureS3: SureS3Faults = { uploadsToFail: SURE_S3_UPLOAD_FAILURES, sparedDeletes: new Set() };
  const sureReads = { left: SURE_CONNECTION_READ_FAILURES };
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms * o.backoffScale)));
  return Array.from({ length: o.instances }, (_, index) => {
    const dynamodb = instrumentDynamo(world.dynamo.client(), world.meter, {
      random: mulberry32(o.seed * 7919 + index),
      throttleRate: o.throttleRate,
      unprocessedRate: o.unprocessedRate,
      lostAckRate: o.lostAckRate,
    });
    countConnectionCalls(dynamodb, world);
    failingConnectionReads(dynamodb, world, mulberry32((o.seed * 6_007 + index) >>> 0), sureReads);
    const s3 = failingS3(world.s3.client(), mulberry32(o.seed * 7_703 + index), o.s3FailureRate, world.injected, sureS3);
    clients.push(dynamodb, s3);
    return system.syncContainer({
      dynamodb,
      sqs: system.aws.sqsClient({ calls: world.calls.sqs }),
      s3,
      paceStoreFor: () => paceStore,
      // SQS time runs faster than the handlers' here, so a record postponed by an open breaker (an
      // outage of failures piling up) is back in milliseconds: the breaker probes as often, not every 20 s.
      paceSettings: { probeIntervalMs: PROBE_INTERVAL_MS },
      random: mulberry32(o.seed * 104_729 + index),
      sleep,
    });
  });
}

/**
 * Two token refreshers, each with its own DynamoDB client (their connections-table requests
 * counted): `refresh` runs both at once, as two schedules' runs that overlap would, and tallies
 * what their refreshes of the connection came to. A run that throws (its scan failed) is run again.
 */
function refreshersOf(world: SoakWorld, clients: Array<{ destroy(): void }>): (trigger: string) => Promise<void> {
  const refreshers = [0, 1].map(() => {
    const dynamodb = world.dynamo.client();
    clients.push(dynamodb);
    countConnectionCalls(dynamodb, world);
    return world.system.refresher({ dynamodb });
  });
  const stats = world.tokenStats;
  const runOne = async (refresher: (typeof refreshers)[number], trigger: string): Promise<void> => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const report = await refresher.handler({ trigger });
        stats.refresherRuns += 1;
        stats.refreshed += report.refreshed;
        stats.skipped += report.skipped;
        stats.failed += report.failed;
        return;
      } catch {
        stats.refresherFailures += 1;
        if (attempt >= 50) throw new Error('the token refresher failed 50 times in a row');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  };
  return async (trigger) => {
    await Promise.all(refreshers.map((refresher) => runOne(refresher, trigger)));
  };
}

/** How old the aged access token is made: past the item sync's on-demand age (tokenRefreshMinutes + 5 minutes) and the refreshers'. */
const AGED_TOKEN_MS = 60 * 60_000;

/** The connection's access token made an old one (world.ageAccessToken), with a client of its own. */
function tokenAger(world: SoakWorld, clients: Array<{ destroy(): void }>): () => Promise<void> {
  const client = world.dynamo.client();
  clients.push(client);
  return async () => {
    await client.send(
      new UpdateItemCommand({
        TableName: world.system.names.connectionsTable,
        Key: { connection: { S: DEFAULT_CONNECTION } },
        UpdateExpression: 'SET refreshedAt = :old',
        ConditionExpression: 'attribute_exists(accessToken)',
        ExpressionAttributeValues: { ':old': { S: new Date(Date.now() - AGED_TOKEN_MS).toISOString() } },
      }),
    ).catch((error: unknown) => {
      if ((error as { name?: string }).name !== 'ConditionalCheckFailedException') throw error;
    });
  };
}

type DynamoMiddleware = (next: (args: { input: Record<string, unknown> }) => Promise<unknown>, context: { commandName?: string }) => (args: { input: Record<string, unknown> }) => Promise<unknown>;

function addMiddleware(client: DynamoDBClient, middleware: DynamoMiddleware, options: { step: string; name: string }): void {
  (client.middlewareStack as unknown as { add(m: DynamoMiddleware, o: { step: string; name: string; priority: string }): void }).add(middleware, { ...options, priority: 'high' });
}

/** Counts the client's requests to the connections table by operation (each one sent, SDK retries included). */
function countConnectionCalls(client: DynamoDBClient, world: SoakWorld): void {
  const table = world.system.names.connectionsTable;
  const calls = world.calls.connections;
  addMiddleware(
    client,
    (next, context) => async (args) => {
      if (args.input['TableName'] === table) {
        const operation = (context.commandName ?? '').replace(/Command$/, '');
        calls[operation] = (calls[operation] ?? 0) + 1;
      }
      return next(args);
    },
    { step: 'deserialize', name: 'soakConnectionCalls' },
  );
}

/**
 * A share of the container's reads of a connection (GetItem on the connections table) is refused
 * with DynamoDB's throttling error before it is sent, above the SDK's retries: the connections'
 * access layer sees it (its records are retried). Whatever the draws, the first read of the run
 * (`sure`, shared by every instance) is refused.
 */
function failingConnectionReads(client: DynamoDBClient, world: SoakWorld, random: () => number, sure: { left: number }): void {
  const table = world.system.names.connectionsTable;
  const rate = world.o.connectionsFailureRate;
  addMiddleware(
    client,
    (next, context) => async (args) => {
      if (context.commandName === 'GetItemCommand' && args.input['TableName'] === table && rate > 0) {
        const sureFailure = sure.left > 0;
        if (sureFailure) sure.left -= 1;
        if (sureFailure || random() < rate) {
          world.injected.connectionReadFailures += 1;
          throw new ProvisionedThroughputExceededException({
            message: 'The level of configured provisioned throughput for the table was exceeded (injected)',
            $metadata: { httpStatusCode: 400 },
          });
        }
      }
      return next(args);
    },
    { step: 'initialize', name: 'soakConnectionReadFaults' },
  );
}

/** Reads of the connections table refused for certain (the first ones of the run). */
const SURE_CONNECTION_READ_FAILURES = 1;

type S3Middleware = (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) => (args: unknown) => Promise<unknown>;

/**
 * A share of PutObject and DeleteObject calls fail before they are sent, above the SDK's retries
 * (the adapter sees the failure): an upload that fails leaves the record to be retried, a delete
 * that fails leaves an object behind, which the sync logs with its key.
 *
 * Whatever the draws, the first upload of the run fails (`sure`, shared by every instance) and the
 * delete the sync then makes of its key goes through: every run meets a failed upload, the
 * redelivery of its record and the deletion of an object, however its instances interleave.
 */
function failingS3(client: S3Client, random: () => number, rate: number, injected: InjectedFaults, sure: SureS3Faults): S3Client {
  const middleware: S3Middleware = (next, context) => async (args) => {
    const operation = (context.commandName ?? '').replace(/Command$/, '');
    const key = String((args as { input?: { Key?: unknown } }).input?.Key ?? '');
    const spared = operation === 'DeleteObject' && sure.sparedDeletes.delete(key);
    const sureFailure = operation === 'PutObject' && rate > 0 && sure.uploadsToFail > 0;
    if (sureFailure) {
      sure.uploadsToFail -= 1;
      sure.sparedDeletes.add(key);
    }
    if (sureFailure || (!spared && (operation === 'PutObject' || operation === 'DeleteObject') && rate > 0 && random() < rate)) {
      if (operation === 'PutObject') injected.s3PutFailures += 1;
      else injected.s3DeleteFailures += 1;
      throw new S3ServiceException({ name: 'SlowDown', $fault: 'server', $metadata: { httpStatusCode: 503 }, message: 'Please reduce your request rate. (injected)' });
    }
    return next(args);
  };
  (client.middlewareStack as unknown as { add(m: S3Middleware, o: { step: string; name: string; priority: string }): void }).add(middleware, {
    step: 'initialize',
    name: 'soakS3Faults',
    priority: 'high',
  });
  return client;
}

/** The S3 faults every run meets (failingS3): uploads still to fail for certain, and the keys whose delete is spared. */
interface SureS3Faults {
  uploadsToFail: number;
  sparedDeletes: Set<string>;
}

/** Uploads that fail for certain (the first ones of the run). */
const SURE_S3_UPLOAD_FAILURES = 1;
