/**
 * The soak's world before the first message: the provider simulator with its tree (a few files too
 * large for a row), its faults and the deliberately bad items; dynalite with the items table;
 * s3rver with the items bucket (a share of the handlers' S3 calls fail, injected); the SQS and Secrets Manager models in
 * process with their injected faults; one sync handler per instance (each its own container: its
 * own clients, token cache and random source) and the token refresher, which runs once as the
 * deployment would.
 */
import { S3ServiceException, type S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { createSyncHandler, type SyncHandler } from '../../../functions/item-sync/app.js';
import { loadRefresherConfig, loadSyncConfig } from '../../../functions/shared/config.js';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { OutputCapture } from '../../fakes/capture-output.js';
import { scaledClock } from '../../fakes/clock.js';
import { DynamoMeter, instrumentDynamo } from '../../fakes/dynamo-meter.js';
import type { Dynalite } from '../../fakes/dynalite.js';
import { attachSecrets, attachSqs, type CallCounts } from '../../fakes/in-process-aws.js';
import { functionEnv } from '../../fakes/lambda.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../fakes/local-aws.js';
import { MemoryPaceStore } from '../../fakes/memory-pace-store.js';
import type { LocalS3 } from '../../fakes/s3.js';
import { SecretStore } from '../../fakes/secrets-model.js';
import { ServiceError } from '../../fakes/service-error.js';
import { SqsModel } from '../../fakes/sqs-model.js';
import { generateItemTree, mulberry32 } from '../../simulator/item-tree.js';
import { ProviderSimulator, type Fault, type FaultRule, type SimulatorItem } from '../../simulator/provider-simulator.js';
import { startStorage } from '../support/storage.js';
import { badMessages, SOAK_MAX_RESPONSE_BYTES, type BadMessage } from './bad-messages.js';
import type { SoakOptions } from './options.js';
import { ProviderTally } from './provider-tally.js';

export const NAMES = {
  table: 'content-sync-items',
  bucket: 'content-sync-items',
  controlTable: 'content-sync-control',
  queue: 'content-sync-sync-queue',
  deadLetterQueue: 'content-sync-dead-letters',
  credentialsSecret: 'content-sync/provider-credentials',
  accessTokenSecret: 'content-sync/provider-access-token',
} as const;

/** Faults injected into the handlers' AWS calls, as counted when they happen. */
interface InjectedFaults {
  deadLetterSendFailures: number;
  visibilityChangeFailures: number;
  secretsFailures: number;
  s3PutFailures: number;
  s3DeleteFailures: number;
}

interface TokenStats {
  rotations: number;
  refresherFailures: number;
  revocations: number;
}

export interface SoakWorld {
  o: SoakOptions;
  startedAt: Date;
  /** Date.now() when the soak began. */
  t0: number;
  tree: SimulatorItem[];
  sim: ProviderSimulator;
  bad: BadMessage[];
  /** Every token the provider issued (refresh tokens included). */
  tokens: Set<string>;
  tally: ProviderTally;
  capture: OutputCapture;
  /** A progress line, around the capture. */
  say(line: string): void;
  dynalite: Dynalite;
  /** s3rver with the items bucket; `s3.client()` makes clients that reach it. */
  s3: LocalS3;
  /** Files that carry the large field now (the change feed makes some cross the row limit). */
  large: Set<string>;
  secrets: SecretStore;
  sqs: SqsModel;
  queueUrl: string;
  deadLetterQueueUrl: string;
  injected: InjectedFaults;
  calls: { sqs: CallCounts; secrets: CallCounts };
  meter: DynamoMeter;
  /** One handler per instance (container). */
  instances: SyncHandler[];
  tokenStats: TokenStats;
  /** Runs the refresher until it succeeds (the scheduler would run it again; here at once). */
  refresh(trigger: string): Promise<void>;
  close(): Promise<void>;
}

export async function setUpSoak(o: SoakOptions): Promise<SoakWorld> {
  const startedAt = new Date();
  const t0 = Date.now();
  const { tree, sim, bad, tokens, large } = await startProvider(o);
  const capture = new OutputCapture();
  const clients: Array<{ destroy(): void }> = [];
  const { dynalite, s3, close } = await startStorage({ sim, capture, clients }, { where: o.dynalite, table: NAMES.table, bucket: NAMES.bucket });
  try {
    const aws = awsModels(o, sim);
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
      dynalite,
      s3,
      large,
      ...aws,
      calls: { sqs: {}, secrets: {} },
      meter: new DynamoMeter(),
      instances: [],
      tokenStats: { rotations: 0, refresherFailures: 0, revocations: 0 },
      refresh: async () => undefined,
      close,
    };
    capture.start();
    world.instances = createInstances(world, clients);
    world.refresh = refresherOf(world, clients);
    await world.refresh('deploy');
    return world;
  } catch (error) {
    await close();
    throw error;
  }
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
  const tokens = new Set<string>([sim.refreshToken]);
  const issue = sim.issueAccessToken.bind(sim);
  sim.issueAccessToken = () => {
    const token = issue();
    tokens.add(token);
    return token;
  };
  return { tree, sim, bad, tokens, large };
}

/** The field that makes an item too large for a row: about 450 KB of text (over DynamoDB's 400 KB). */
export const LARGE_FIELD = 'transcript';

export function largeText(seed: number): string {
  return `transcript ${seed}: `.padEnd(450 * 1024, 'All work and no play. ');
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

/**
 * Secrets Manager with the provider's credentials, and SQS with the sync queue (its redrive policy)
 * and the dead-letter queue, on a clock where an SQS second lasts `msPerSecond` real milliseconds;
 * both refuse a share of the handlers' calls.
 */
function awsModels(o: SoakOptions, sim: ProviderSimulator): Pick<SoakWorld, 'secrets' | 'sqs' | 'queueUrl' | 'deadLetterQueueUrl' | 'injected'> {
  const injected: InjectedFaults = { deadLetterSendFailures: 0, visibilityChangeFailures: 0, secretsFailures: 0, s3PutFailures: 0, s3DeleteFailures: 0 };
  const secrets = new SecretStore({ region: LOCAL_REGION });
  const secretsRandom = mulberry32(o.seed ^ 0x5ec2e75);
  secrets.getFault = () => {
    if (!(o.secretsFailureRate > 0 && secretsRandom() < o.secretsFailureRate)) return undefined;
    injected.secretsFailures += 1;
    return new ServiceError('ThrottlingException', 'Rate exceeded (injected)');
  };
  secrets.set(NAMES.credentialsSecret, JSON.stringify({ clientId: sim.clientId, refreshToken: sim.refreshToken }));
  secrets.set(NAMES.accessTokenSecret, JSON.stringify({ accessToken: '', refreshedAt: '' }));

  const sqs = new SqsModel({ region: LOCAL_REGION, clock: scaledClock(1000 / o.msPerSecond) });
  const deadLetterQueueUrl = sqs.createQueue(NAMES.deadLetterQueue);
  const queueUrl = sqs.createQueue(NAMES.queue, {
    VisibilityTimeout: String(o.visibilityTimeoutSeconds),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: sqs.queue(NAMES.deadLetterQueue).arn, maxReceiveCount: o.maxReceiveCount }),
  });
  const sqsRandom = mulberry32(o.seed ^ 0x5a5);
  sqs.sendFault = ({ queueName }) => {
    if (queueName !== NAMES.deadLetterQueue || !(o.deadLetterSendFailureRate > 0 && sqsRandom() < o.deadLetterSendFailureRate)) return undefined;
    injected.deadLetterSendFailures += 1;
    return { code: 'InternalError', message: 'We encountered an internal error. Please try again. (injected)', senderFault: false };
  };
  sqs.visibilityFault = () => {
    if (!(o.visibilityFailureRate > 0 && sqsRandom() < o.visibilityFailureRate)) return undefined;
    injected.visibilityChangeFailures += 1;
    return { code: 'InternalError', message: 'We encountered an internal error. (injected)', senderFault: false };
  };
  return { secrets, sqs, queueUrl, deadLetterQueueUrl, injected };
}

/** 429s answered for certain, whatever the draws (each stops every instance for a second). */
const SURE_RATE_LIMITS = 2;

/** The breaker's probe interval in the soak (real time). */
const PROBE_INTERVAL_MS = 200;

/** One sync handler per instance, each with its own clients (DynamoDB with its own chaos draws) and random source. */
function createInstances(world: SoakWorld, clients: Array<{ destroy(): void }>): SyncHandler[] {
  const { o } = world;
  const config = loadSyncConfig(
    functionEnv({
      baseUrl: world.sim.baseUrl,
      accessTokenSecretId: NAMES.accessTokenSecret,
      itemsTableName: NAMES.table,
      itemsBucketName: NAMES.bucket,
      controlTableName: NAMES.controlTable,
      revisionField: o.revisionField,
      deadLetterQueueUrl: world.deadLetterQueueUrl,
      timeoutMs: String(o.providerTimeoutMs),
      maxResponseBytes: String(SOAK_MAX_RESPONSE_BYTES),
      providerRequestsPerSecond: '100000',
    }),
  );
  // The control table's pace row, shared by every container.
  const paceStore = new MemoryPaceStore();
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms * o.backoffScale)));
  return Array.from({ length: o.instances }, (_, index) => {
    const dynamodb = instrumentDynamo(world.dynalite.client(), world.meter, {
      random: mulberry32(o.seed * 7919 + index),
      throttleRate: o.throttleRate,
      unprocessedRate: o.unprocessedRate,
      lostAckRate: o.lostAckRate,
    });
    const sqs = attachSqs(new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), world.sqs, world.calls.sqs);
    const secrets = attachSecrets(new SecretsManagerClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), world.secrets, world.calls.secrets);
    const s3 = failingS3(world.s3.client(), mulberry32(o.seed * 7_703 + index), o.s3FailureRate, world.injected);
    clients.push(dynamodb, sqs, secrets, s3);
    return createSyncHandler({
      config,
      dynamodb,
      sqs,
      secrets,
      s3,
      paceStore,
      // SQS time runs faster than the handlers' here, so a record postponed by an open breaker (a token
      // rotation's revoked token) is back in milliseconds: the breaker probes as often, not every 20 s.
      paceSettings: { probeIntervalMs: PROBE_INTERVAL_MS },
      random: mulberry32(o.seed * 104_729 + index),
      sleep,
    });
  });
}

function refresherOf(world: SoakWorld, clients: Array<{ destroy(): void }>): (trigger: string) => Promise<void> {
  const secrets = attachSecrets(new SecretsManagerClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), world.secrets, world.calls.secrets);
  clients.push(secrets);
  const refresher = createRefresherHandler({
    config: loadRefresherConfig(
      functionEnv({ baseUrl: world.sim.baseUrl, credentialsSecretId: NAMES.credentialsSecret, accessTokenSecretId: NAMES.accessTokenSecret }),
    ),
    secrets,
  });
  return async (trigger) => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await refresher({ trigger });
        world.tokens.add(world.sim.refreshToken);
        return;
      } catch {
        world.tokenStats.refresherFailures += 1;
        if (attempt >= 50) throw new Error('the token refresher failed 50 times in a row');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  };
}

type S3Middleware = (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) => (args: unknown) => Promise<unknown>;

/**
 * A share of PutObject and DeleteObject calls fail before they are sent, above the SDK's retries
 * (the adapter sees the failure): an upload that fails leaves the record to be retried, a delete
 * that fails leaves an object behind, which the sync logs with its key.
 */
function failingS3(client: S3Client, random: () => number, rate: number, injected: InjectedFaults): S3Client {
  const middleware: S3Middleware = (next, context) => async (args) => {
    const operation = (context.commandName ?? '').replace(/Command$/, '');
    if ((operation === 'PutObject' || operation === 'DeleteObject') && rate > 0 && random() < rate) {
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
