/**
 * The item sync's handler, built from its dependencies (handler.ts builds it once per container from
 * the environment). Fed by the sync queue (SQS event source with ReportBatchItemFailures). Thin:
 * build the adapters (the core's ports) and its settings once per container, hand the batch to the
 * core with a deadline taken from the invocation's remaining time, publish the batch's metrics and
 * answer `{"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}`. The one exception: a
 * configuration that no request can succeed with (ConfigError) fails the invocation, with the reason.
 *
 * Powertools' BatchProcessor is not used: it processes records one by one, while this batch needs
 * whole-batch work (duplicate ids share one fetch, one gate per connection, one BatchGetItem for
 * all stored revisions, one SendMessageBatch for the dead), and it would throw on a batch where
 * every record failed instead of answering with the partial-failure response.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { DynamoDbItemStore } from './adapters/dynamodb-item-store.js';
import { LazyItemObjectStore } from './adapters/lazy-item-object-store.js';
import {
  BACKGROUND_LANE,
  BACKLOG_LANE,
  LANE_ATTRIBUTE,
  POSTPONEMENTS_ATTRIBUTE,
  QueueUrls,
  RECONCILE_PASS_ATTRIBUTE,
  SqsDeadLetterSink,
  SqsBackgroundLane,
  SqsMessageRequeue,
  SqsMessageVisibility,
} from './adapters/sqs.js';
import { DynamoDbPaceStore } from '../shared/adapters/dynamodb-pace-store.js';
import { BoundedMap } from '../shared/bounded-map.js';
import { DEFAULT_PACE_SETTINGS, type PaceSettings } from '../shared/provider/pace/pace-state.js';
import { PaceBreaker, ProviderPace, type PaceSnapshot, type PaceStore } from '../shared/provider/pace/provider-pace.js';
import type { SyncConfig } from '../shared/config.js';
import type { DiscoverySettings } from './discovery.js';
import type { ConnectionAccess } from '../shared/connections/ports.js';
import { ConfigError } from '../shared/errors.js';
import { PACE_METRIC_NAMES, SYNC_METRIC_NAMES, SYNC_SERVICE } from '../shared/metric-names.js';
import { createLogger, createMetrics, describeError } from '../shared/observability.js';
import { systemClock, type Clock, type ProviderClient } from '../shared/ports.js';
import { HttpProviderClient } from '../shared/provider/provider-client.js';
import {
  DEFAULT_FETCH_BACKOFF,
  DEFAULT_WRITE_ROUNDS,
  syncBatch,
  type SyncCounts,
  type SyncPorts,
  type SyncRecord,
  type SyncSettings,
} from './sync.js';

/** Metric name per counter, published once per batch (zeros included, so alarms see every batch). */
const METRIC_NAMES: Readonly<Record<keyof SyncCounts, string>> = SYNC_METRIC_NAMES;

/** Time kept back from the invocation's remaining time for writes, dead-lettering and the answer. */
export const DEFAULT_SAFETY_MARGIN_MS = 5_000;

/** Most provider paces a container keeps (one per pace key it met); the least recently used goes first. */
export const MAX_PACES_PER_CONTAINER = 1_000;

/**
 * PACE_SCOPE=connection: how long a record waits within its invocation for a slot of its
 * connection's pace before it is postponed. A batch mixes connections; one connection slowed by its
 * own limit or Retry-After must not hold the batch, and with it the other connections' records. A
 * batch takes of each connection what its pace serves within the hold and sends the others back at
 * once (ProviderPace.admits, bookReturn). 1 s: with 2 invocations a queue and batches of 100, a batch
 * that ends every second or so keeps every account near its own limit (docs/measurements.md).
 */
export const CONNECTION_PACE_HOLD_MS = 1_000;

export interface SyncHandlerDeps {
  config: SyncConfig;
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  /**
   * The connections' access layer (functions/shared/connections/access.ts): each connection's gate
   * (its token and its pace key, or why its records wait or are dead) and what to do after a 401.
   */
  connections: ConnectionAccess;
  /**
   * The items bucket's client (ITEMS_BUCKET_NAME: items too large for a row); default one of the
   * S3 adapter's own with the SDK's standard configuration (path-style at a configured endpoint:
   * SyncConfig.s3Endpoint). Either is made when the first large item comes (the adapter module is
   * loaded then: lazy-modules.ts).
   */
  s3?: S3Client;
  /** The random part of an item object's key; default from the system's random source. */
  objectKeySuffix?: () => string;
  provider?: ProviderClient;
  /** The shared state of a pace key's pace; default its row of the control table (CONTROL_TABLE_NAME, `provider-pace#<pace key>`). */
  paceStoreFor?: (paceKey: string) => PaceStore;
  /** Overrides of the pace's settings (a harness whose time runs faster than the wall clock). */
  paceSettings?: Partial<PaceSettings>;
  clock?: Clock;
  logger?: ReturnType<typeof createLogger>;
  metrics?: ReturnType<typeof createMetrics>;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Kept back from the remaining time; default the smaller of 5 s and a quarter of the remaining time. */
  safetyMarginMs?: number;
}

export type SyncHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/**
 * A sync container draws a quarter of a second of the pace's rate at a time (50 requests at 200 a
 * second; the pace's own default is a tenth): a draw is a read and a conditional write of the
 * shared row, and with two containers a lane, larger leases cost fewer of them, while a 429 or a
 * breaker that opens is still seen by every container within a quarter of a second.
 */
export const SYNC_PACE_LEASE_SECONDS = 0.25;

export function createSyncHandler(deps: SyncHandlerDeps): SyncHandler {
  const logger = deps.logger ?? createLogger(SYNC_SERVICE, { logLevel: deps.config.logLevel, bufferDebug: true });
  const metrics = deps.metrics ?? createMetrics(SYNC_SERVICE, { stage: deps.config.stage });
  const clock = deps.clock ?? systemClock;
  const random = deps.random ?? Math.random;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const { config } = deps;
  // Per container: the queue-URL cache and the paces (their leases, what they know of their
  // breakers) live as long as the handler; the connections' token cache is the access layer's.
  const queueUrls = new QueueUrls(deps.sqs);
  const paceStoreFor = (paceKey: string): PaceStore =>
    deps.paceStoreFor?.(paceKey) ?? new DynamoDbPaceStore(deps.dynamodb, config.controlTableName, paceKey);
  const paces = new PaceMap(
    (paceKey, breaker) =>
      new ProviderPace(
        paceStoreFor(paceKey),
        clock,
        logger,
        {
          settings: {
            ...DEFAULT_PACE_SETTINGS,
            leaseSeconds: SYNC_PACE_LEASE_SECONDS,
            ...(config.providerRequestsPerSecond !== undefined ? { maxRate: config.providerRequestsPerSecond } : {}),
            userShare: config.usersReservedPercent / 100,
            ...deps.paceSettings,
          },
          fallbackRate: config.paceFallbackRate,
          concurrency: config.fetchConcurrency,
          random,
          // A pace of one connection among others (its breaker is the client id's): it holds no batch for long.
          ...(breaker ? { maxHoldMs: CONNECTION_PACE_HOLD_MS } : {}),
        },
        breaker,
      ),
    MAX_PACES_PER_CONTAINER,
    (breakerKey) => new PaceBreaker(paceStoreFor(breakerKey)),
  );
  const ports: SyncPorts = {
    connections: deps.connections,
    paceFor: (paceKey, breakerKey) => paces.get(paceKey, breakerKey),
    provider: deps.provider ?? new HttpProviderClient(config.provider),
    store: new DynamoDbItemStore(deps.dynamodb, config.itemsTableName, { sleep, random }),
    objects: new LazyItemObjectStore(async () => {
      // The literal is S3_ITEM_OBJECT_STORE_MODULE (lazy-modules.ts): the bundle keeps this import.
      const { createS3ItemObjectStore } = await import('./adapters/s3-item-object-store.js');
      return createS3ItemObjectStore(config.itemsBucketName, deps.s3, config.s3Endpoint);
    }),
    ...(deps.objectKeySuffix ? { objectKeySuffix: deps.objectKeySuffix } : {}),
    deadLetters: new SqsDeadLetterSink(deps.sqs, config.deadLetterQueueUrl, { sleep }),
    visibility: new SqsMessageVisibility(deps.sqs, queueUrls),
    requeue: new SqsMessageRequeue(deps.sqs, queueUrls, { sleep }),
    // Discovery on (CHILDREN_PATH): a folder's children go to the reconcile queue, in the background lane.
    ...(config.discovery !== undefined ? { discovery: new SqsBackgroundLane(deps.sqs, config.discovery.queueUrl, { sleep }) } : {}),
    // A connection's backlog in a users' batch goes to the background lane (the reconcile queue).
    ...(config.backgroundQueueUrl !== undefined ? { background: new SqsBackgroundLane(deps.sqs, config.backgroundQueueUrl, { sleep }, BACKLOG_LANE) } : {}),
    clock,
    log: logger,
    random,
    sleep,
  };
  const settings: SyncSettings = {
    revisionField: config.revisionField,
    fetchConcurrency: config.fetchConcurrency,
    fetchAttempts: config.fetchAttempts,
    rateLimitMinDelaySeconds: config.rateLimitMinDelaySeconds,
    postponeMaxSeconds: config.postponeMaxSeconds,
    writeRounds: DEFAULT_WRITE_ROUNDS,
    backoff: DEFAULT_FETCH_BACKOFF,
    backlogOwnsPace: config.paceScope === 'connection',
    ...(config.discovery !== undefined ? { discovery: discoverySettings(config.discovery) } : {}),
  };

  return async function handler(event: SQSEvent, context: Context): Promise<SQSBatchResponse> {
    logger.addContext(context);
    const records: SyncRecord[] = (event?.Records ?? []).map((record) => ({
      messageId: record.messageId,
      body: record.body ?? '',
      receiptHandle: record.receiptHandle,
      queueArn: record.eventSourceARN,
      postponements: postponementsOf(record),
      ...laneOf(record),
    }));
    try {
      const remaining = context.getRemainingTimeInMillis();
      const margin = deps.safetyMarginMs ?? Math.min(DEFAULT_SAFETY_MARGIN_MS, Math.floor(remaining / 4));
      const deadline = clock.now().getTime() + remaining - margin;
      const report = await syncBatch(records, ports, settings, { deadline });
      for (const [counter, name] of Object.entries(METRIC_NAMES) as Array<[keyof SyncCounts, string]>) {
        metrics.addMetric(name, MetricUnit.Count, report.counts[counter]);
      }
      publishPace(metrics, paces.snapshots(), clock.now().getTime());
      logger.info('batch done', { records: records.length, ...report.counts });
      return { batchItemFailures: report.failures.map((itemIdentifier) => ({ itemIdentifier })) };
    } catch (error) {
      if (error instanceof ConfigError) {
        // Nothing can succeed as configured: fail the invocation (the function's Errors alarm), with the reason.
        logger.error('batch failed: the configuration is wrong; the invocation fails and every record will be retried', {
          error: describeError(error),
        });
        metrics.addMetric(METRIC_NAMES.retried, MetricUnit.Count, records.length);
        throw error;
      }
      // The core decides every record itself; this is the last resort: hand the whole batch back.
      logger.error('batch failed unexpectedly; every record will be retried', { error: describeError(error) });
      metrics.addMetric(METRIC_NAMES.retried, MetricUnit.Count, records.length);
      return { batchItemFailures: records.map((record) => ({ itemIdentifier: record.messageId })) };
    } finally {
      metrics.publishStoredMetrics();
      // The invocation's buffered DEBUG lines (createLogger's bufferDebug) end with it.
      logger.clearBuffer();
    }
  };
}

/** Where a folder item lists its children: the configuration's paths (the queue is the sink's). */
function discoverySettings(discovery: NonNullable<SyncConfig['discovery']>): DiscoverySettings {
  const { childrenPath, childIdPath, childRevisionPath, childrenTotalPath } = discovery;
  return {
    childrenPath,
    childIdPath,
    ...(childRevisionPath !== undefined ? { childRevisionPath } : {}),
    ...(childrenTotalPath !== undefined ? { childrenTotalPath } : {}),
  };
}

/** The `postponements` attribute of a message this function sent again; 0 for any other. */
function postponementsOf(record: SQSEvent['Records'][number]): number {
  const value = Number(record.messageAttributes?.[POSTPONEMENTS_ATTRIBUTE]?.stringValue);
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}

/**
 * The record's lane: the `reconcilePass` attribute of a message the reconciler sent (a whole number
 * from 0), and whether it is the background lane's (`lane` = `background` or `backlog`, or a
 * `reconcilePass` sent before `lane` existed) and a users' backlog there (`backlog`). Anything else is users'.
 */
function laneOf(record: SQSEvent['Records'][number]): { reconcilePass?: number; background?: true; backlog?: true } {
  const raw = record.messageAttributes?.[RECONCILE_PASS_ATTRIBUTE]?.stringValue;
  const value = Number(raw);
  const pass = raw !== undefined && Number.isSafeInteger(value) && value >= 0 ? { reconcilePass: value } : {};
  const lane = record.messageAttributes?.[LANE_ATTRIBUTE]?.stringValue;
  const backlog = lane === BACKLOG_LANE;
  const background = lane === BACKGROUND_LANE || backlog || 'reconcilePass' in pass;
  return { ...pass, ...(background ? { background: true } : {}), ...(backlog ? { backlog: true } : {}) };
}

/**
 * The provider paces of one container, one per pace key, made on first use, and the container's
 * view of each breaker. A pace whose breaker key is its own pace key (PACE_SCOPE=client: the client
 * id's pace) keeps its breaker in its own row; the paces of one breaker key that is not theirs
 * (PACE_SCOPE=connection: the connections of one client id) share one PaceBreaker over that key's
 * row, so that when one of them learns the breaker is open, all of them answer outage. At most
 * `max` paces (and as many breakers) are kept: the one used least recently is dropped first (its
 * lease's few tokens expire; its row stays, and is read again when the key comes back).
 */
export class PaceMap {
  private readonly paces: BoundedMap<string, { pace: ProviderPace; breakerKey: string }>;
  private readonly breakers: BoundedMap<string, PaceBreaker>;

  constructor(
    private readonly create: (paceKey: string, breaker: PaceBreaker | undefined) => ProviderPace,
    max = MAX_PACES_PER_CONTAINER,
    /** The view of a breaker kept in another row than its paces'; without it, every pace keeps its own. */
    private readonly createBreaker?: (breakerKey: string) => PaceBreaker,
  ) {
    this.paces = new BoundedMap(max);
    this.breakers = new BoundedMap(max);
  }

  /** The pace of `paceKey`, guarded by the breaker of `breakerKey` (default the pace's own). */
  get(paceKey: string, breakerKey: string = paceKey): ProviderPace {
    const known = this.paces.use(paceKey);
    if (known && known.breakerKey === breakerKey) return known.pace;
    // New, or its connection now has another client id (and so another breaker).
    const entry = { pace: this.create(paceKey, this.breakerFor(paceKey, breakerKey)), breakerKey };
    this.paces.set(paceKey, entry);
    return entry.pace;
  }

  /** The snapshot of every pace the container holds. */
  snapshots(): PaceSnapshot[] {
    return [...this.paces.values()].map((entry) => entry.pace.snapshot());
  }

  private breakerFor(paceKey: string, breakerKey: string): PaceBreaker | undefined {
    if (breakerKey === paceKey || !this.createBreaker) return undefined;
    const known = this.breakers.use(breakerKey);
    if (known) return known;
    const breaker = this.createBreaker(breakerKey);
    this.breakers.set(breakerKey, breaker);
    return breaker;
  }
}

/**
 * The paces as this container sees them after the batch, together (no dimension per pace key): the
 * sum of their rates, the breaker open when any is open (for as long as the longest), the fallback
 * when any runs on it. Before the container has used a pace: no rate, the breaker closed, no fallback.
 */
function publishPace(metrics: ReturnType<typeof createMetrics>, snapshots: readonly PaceSnapshot[], now: number): void {
  if (snapshots.length > 0) {
    const rate = snapshots.reduce((sum, snapshot) => sum + snapshot.rate, 0);
    metrics.addMetric(PACE_METRIC_NAMES.rate, MetricUnit.CountPerSecond, Math.round(rate * 100) / 100);
  }
  const openSince = snapshots.flatMap((snapshot) => (snapshot.breakerOpenSince !== undefined ? [snapshot.breakerOpenSince] : []));
  metrics.addMetric(PACE_METRIC_NAMES.breakerOpen, MetricUnit.Count, openSince.length > 0 ? 1 : 0);
  metrics.addMetric(
    PACE_METRIC_NAMES.breakerOpenSeconds,
    MetricUnit.Seconds,
    openSince.length > 0 ? Math.max(0, Math.round((now - Math.min(...openSince)) / 1000)) : 0,
  );
  metrics.addMetric(PACE_METRIC_NAMES.fallback, MetricUnit.Count, snapshots.some((snapshot) => snapshot.fallback) ? 1 : 0);
}
