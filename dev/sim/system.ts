/**
 * The whole sync system in virtual time, for scenarios hours long: the real item-sync handlers
 * (createSyncHandler, one per container, each with its own pace client and token cache), the real
 * token refresher on its schedule, the real provider client over the provider model (rate limit,
 * outages), the real DynamoDB adapters on dynalite (items table and control table), and the
 * harness's SQS and Secrets Manager models behind real SDK clients. Lambda's event source mapping
 * polls the sync queue (runEventSource) with the deployed batch size, time-out and concurrency.
 *
 * With `reconcile`, reconciliation as deployed (infra/reconciler): the reconcile queue and its
 * dead-letter queue (the sync queue's redrive policy), the sync's second event source on it (its own
 * containers, `reconcile.containers` of them: its maxConcurrency), and the real reconciler
 * handler (createReconcilerHandler) invoked by its schedule, a virtual timer every minute.
 *
 * Every simulated function has its own SDK clients, so `meter` counts what each does: DynamoDB
 * requests and the capacity units dynalite computes for them (ReturnConsumedCapacity is added to
 * every read and write), SQS calls, the event sources' receives and deletes, invocations and their
 * virtual durations, and, with `meterLogs`, the bytes of the JSON log lines and EMF metrics the real
 * Powertools logger and metrics write.
 */
import { BatchWriteItemCommand, CreateTableCommand, type DynamoDBClient, type PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { Writable } from 'node:stream';
import { DynamoDbItemStore } from '../../functions/item-sync/adapters/dynamodb-item-store.js';
import { createSyncHandler, type SyncHandler } from '../../functions/item-sync/app.js';
import { validateItem } from '../../functions/item-sync/item.js';
import { createReconcilerHandler, type ReconcilerHandler, type ReconcilerTuning } from '../../functions/reconciler/app.js';
import type { TickReport } from '../../functions/reconciler/tick.js';
import { CONTROL_TABLE_KEY } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { loadReconcilerConfig, loadRefresherConfig, loadSyncConfig } from '../../functions/shared/config.js';
import { parseJson } from '../../functions/shared/json.js';
import { RECONCILER_SERVICE, SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import { createLogger, createMetrics } from '../../functions/shared/observability.js';
import { HttpProviderClient } from '../../functions/shared/provider/provider-client.js';
import { createRefresherHandler } from '../../functions/token-refresher/app.js';
import { startDynalite, type Dynalite } from '../fakes/dynalite.js';
import { attachSecrets, attachSqs, InProcessEventSource, type CallCounts } from '../fakes/in-process-aws.js';
import { createContext, functionEnv, runEventSource, type DrainResult, type EventSourceQueue, type SyncHandlerFn } from '../fakes/lambda.js';
import { LOCAL_REGION } from '../fakes/local-aws.js';
import { SecretStore } from '../fakes/secrets-model.js';
import { SqsModel } from '../fakes/sqs-model.js';
import { generateItemTree } from '../simulator/item-tree.js';
import { ProviderModel, type RateLimit } from '../simulator/provider-model.js';
import { modelFetch } from './model-fetch.js';
import { VirtualClock } from './virtual-clock.js';

/** As deployed (infra): maxReceiveCount of the sync queue, its visibility time-out, the function's time-out. */
export const MAX_RECEIVE_COUNT = 5;
export const FUNCTION_TIMEOUT_MS = 60_000;
export const VISIBILITY_TIMEOUT_SECONDS = 6 * 60;
/** As deployed (infra/stateless-stack.ts): the sync's memory. */
export const SYNC_MEMORY_MB = 512;
/**
 * As deployed (infra/reconciler/reconciler.ts): the schedule, the reconciler's time-out and memory.
 * The sync's event source on the reconcile queue has the sync queue's maximum concurrency.
 */
export const RECONCILE_SCHEDULE_MS = 60_000;
export const RECONCILER_TIMEOUT_MS = 60_000;
export const RECONCILER_MEMORY_MB = 512;

/** The sync's two event sources: users' ids (the sync queue) and the sweep (the reconcile queue). */
export type EventSourceName = 'sync' | 'reconcile';

export interface ReconcileOptions {
  /** FRESHNESS_HOURS (the context key freshnessHours). */
  freshnessHours: number;
  /** Sync invocations on the reconcile queue at once (the event source's maxConcurrency). */
  containers: number;
  /** The schedule's first tick this long after the start; default one interval. */
  firstTickAfterMs?: number;
  /** RECONCILE_SEGMENTS; default the function's. */
  segments?: number;
  /** RECONCILE_HIGH_WATER; default the function's. */
  highWater?: number;
  /** Overrides of the reconciler's tuning (app.ts DEFAULT_TUNING). */
  tuning?: Partial<ReconcilerTuning>;
}

/** What a scenario watches as it happens (its own counts, per id). */
export interface SystemObserver {
  /** The provider answered `status` (429 included) to a request for `itemId` from a sync container of `source`. */
  providerAnswer?(source: EventSourceName, itemId: string, status: number, at: number): void;
  /**
   * The sync logged a line about an item (`record done`, `record postponed`, `write race lost; …`:
   * functions/item-sync/sync.ts), at `at`.
   */
  itemLog?(source: EventSourceName, message: string, itemId: string, at: number): void;
  /** The reconciler sent these ids to the reconcile queue (one SendMessageBatch, as SQS accepted it). */
  reconcileSent?(ids: readonly string[], at: number): void;
}

export interface SystemOptions {
  ids: number;
  seed: number;
  /** The provider's limit (unknown to the system unless `knownLimit`). */
  rateLimit?: RateLimit;
  /** The operator's providerRequestsPerSecond. */
  knownLimit?: number;
  /** Sync invocations on the sync queue at once (the event source's maxConcurrency). */
  containers: number;
  providerLatencyMs: number;
  /** Virtual round trip of a DynamoDB call (pace draws and the items table). */
  dynamoRoundTripMs: number;
  tokenRefreshMinutes: number;
  /** Reconciliation as deployed; none when undefined. */
  reconcile?: ReconcileOptions;
  /** dynalite in this process (default) or in a child process (large tables: their memory and DynamoDB's CPU apart). */
  dynalite?: 'in-process' | 'child';
  observe?: SystemObserver;
  /** The real Powertools logger and metrics, writing to counters (meter.logs); default loggers that keep nothing. */
  meterLogs?: boolean;
  /** Keep only this many of the provider model's recorded requests (long runs); default all. */
  recordedRequests?: number;
}

/** DynamoDB requests of one operation on one table. */
export interface DynamoCount {
  requests: number;
  /** Capacity units as dynalite computes them (read units for reads, write units for writes). */
  capacityUnits: number;
  /** Conditional writes refused (DynamoDB charges them as writes). */
  conditionFailures: number;
}

/** The event source mapping's own SQS calls on one queue. */
export interface EventSourceCount {
  /** ReceiveMessage calls (long polls that came back empty included). */
  receives: number;
  emptyReceives: number;
  /** DeleteMessageBatch calls (one per invocation with a record done). */
  deleteBatches: number;
}

export interface InvocationCount {
  invocations: number;
  /** Summed virtual durations, ms. */
  durationMs: number;
  memoryMb: number;
}

export interface LogCount {
  lines: number;
  bytes: number;
}

/** Who did what: `sync` and `reconcile` are the sync's containers of each event source, `reconciler` the reconciler. */
export type MeterSource = EventSourceName | 'reconciler';

export interface SimMeter {
  /** By source, then by `<Operation> <table>`. */
  dynamo: Record<MeterSource, Record<string, DynamoCount>>;
  /** SDK calls of the functions' SQS clients, by source and operation. */
  sqs: Record<MeterSource, CallCounts>;
  eventSource: Record<EventSourceName, EventSourceCount>;
  lambda: Record<MeterSource, InvocationCount>;
  /** Log lines and EMF metric documents written (only with `meterLogs`), by source, then by message (`EMF metrics` for those). */
  logs: Record<MeterSource, Record<string, LogCount>>;
}

/** One reconciler invocation, as its schedule made it. */
export interface TickRecord {
  startedAt: number;
  endedAt: number;
  report?: TickReport;
  error?: string;
}

export interface SimSystem {
  clock: VirtualClock;
  provider: ProviderModel;
  sqs: SqsModel;
  secrets: SecretStore;
  dynamo: Dynalite;
  /** The sync containers' DynamoDB client (users' event source). */
  client: DynamoDBClient;
  ids: string[];
  queueUrl: string;
  dlqUrl: string;
  /** With `reconcile`: the reconcile queue and its dead-letter queue. */
  reconcileQueueUrl: string | undefined;
  reconcileDlqUrl: string | undefined;
  handlers: SyncHandler[];
  /** The reconciler's ticks so far (with `reconcile`). */
  ticks: TickRecord[];
  meter: SimMeter;
  /** Polls the sync queue (and the reconcile queue) until `stop()`, in virtual time; ticks stop then too. */
  pollUntil(stop: () => boolean): Promise<DrainResult>;
  /** Runs the token refresher once (as its schedule does). */
  refresh(): Promise<unknown>;
  /**
   * Writes a row for every provider item, as the sync writes it (the real item store's PutItem rows,
   * sent with BatchWriteItem), before virtual time runs: the table as after a first sync. Sets the
   * table's ItemCount. Returns the rows written.
   */
  preloadItems(): Promise<number>;
  close(): Promise<void>;
}

export const ITEMS_TABLE = 'items';
export const CONTROL_TABLE = 'control';
const QUEUE = 'sync-queue';
const DLQ = 'sync-dlq';
const RECONCILE_QUEUE = 'reconcile-queue';
const RECONCILE_DLQ = 'reconcile-dlq';
const TOKEN_SECRET = 'access-token';
const CREDENTIALS_SECRET = 'credentials';
const REVISION_FIELD = 'revision';
/** The event source mapping's long poll. */
const LONG_POLL_SECONDS = 20;

/**
 * The system's assembly: the provider model, the queues, the secrets, the tables, the functions'
 * clients (one set per source), the sync's containers and the token refresher, the event sources,
 * the schedules (the refresher's and, with `reconcile`, the reconciler's).
 */
export async function startSystem(options: SystemOptions): Promise<SimSystem> {
  const clock = new VirtualClock();
  const { provider, ids } = startProvider(options, clock);
  const queues = createQueues(clock, options.reconcile !== undefined);
  const secretStore = createSecrets(clock, provider);
  const meter = emptyMeter();
  const tables = await startTables(options, clock, meter);
  const wiring = wire({ options, clock, meter, fetch: modelFetch(provider, clock), queues, secretStore, tables });

  const { reconcile } = options;
  const syncContainers = syncContainerFactory(wiring);
  const handlers = syncContainers('sync', options.containers);
  const sweepHandlers = reconcile ? syncContainers('reconcile', reconcile.containers) : undefined;
  const client = tables.clientFor('sync');
  const refresher = createRefresher(wiring);
  const sources = eventSources(wiring, queues.sqs, handlers, sweepHandlers);

  const state: RunState = { running: true, ticking: true };
  scheduleRefresh(clock, refresher, options.tokenRefreshMinutes, state);
  const ticks: TickRecord[] = [];
  if (reconcile) scheduleTicks(wiring, createReconciler(wiring, reconcile), reconcile.firstTickAfterMs ?? RECONCILE_SCHEDULE_MS, state, ticks);

  return {
    clock,
    provider,
    sqs: queues.sqs,
    secrets: secretStore,
    dynamo: tables.dynamo,
    client,
    ids,
    queueUrl: queues.queueUrl,
    dlqUrl: queues.dlqUrl,
    reconcileQueueUrl: queues.reconcileQueueUrl,
    reconcileDlqUrl: queues.reconcileDlqUrl,
    handlers,
    ticks,
    meter,
    pollUntil: (stop) => pollEventSources(clock, queues.sqs, sources, stop, state),
    refresh: () => refresher({ trigger: 'schedule' }),
    preloadItems: () => preloadItems(provider, ids, clock, tables),
    async close() {
      state.running = false;
      await tables.dynamo.close();
    },
  };
}

type Refresher = ReturnType<typeof createRefresherHandler>;

/** What the schedules check before they go on. */
interface RunState {
  /** Until close(): the refresher's and the reconciler's schedules. */
  running: boolean;
  /** Until pollUntil's `stop` says so: the reconciler's schedule. */
  ticking: boolean;
}

interface Queues {
  sqs: SqsModel;
  queueUrl: string;
  dlqUrl: string;
  reconcileQueueUrl: string | undefined;
  reconcileDlqUrl: string | undefined;
}

interface Tables {
  dynamo: Dynalite;
  /** The items table's ItemCount once preloadItems wrote it (DescribeTable answers it). */
  itemCount: number | undefined;
  /** A new metered DynamoDB client in virtual time for `source`. */
  clientFor(source: MeterSource): DynamoDBClient;
}

/** What every simulated function is made from: the clock, the environment, and its source's own clients. */
interface Wiring {
  options: SystemOptions;
  clock: VirtualClock;
  meter: SimMeter;
  env: Record<string, string>;
  /** The provider model's fetch. */
  fetch: typeof globalThis.fetch;
  /** One Secrets Manager client, shared by every function. */
  secrets: SecretsManagerClient;
  dynamoFor(source: MeterSource): DynamoDBClient;
  /** A new SQS client for `source`; `watch` sees it before the model's middleware is added. */
  sqsFor(source: MeterSource, watch?: (client: SQSClient) => void): SQSClient;
  /** Logger and metrics of one function instance of `source`. */
  observability(source: MeterSource): { logger: never; metrics: never };
}

interface EventSource {
  name: EventSourceName;
  queue: EventSourceQueue;
  handlers: SyncHandlerFn[];
}

/** The provider model over the generated item tree; `ids` in the tree's order. */
function startProvider(options: SystemOptions, clock: VirtualClock): { provider: ProviderModel; ids: string[] } {
  const items = generateItemTree({ count: options.ids, seed: options.seed });
  const ids = items.map((item) => item.id);
  const provider = new ProviderModel({
    items,
    latencyMs: options.providerLatencyMs,
    now: () => clock.ms(),
    seed: options.seed,
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
  });
  items.length = 0; // the model holds its own copies
  if (options.recordedRequests !== undefined) provider.limitRecordedRequests(options.recordedRequests);
  return { provider, ids };
}

/** The sync queue and its dead-letter queue; with reconciliation, the reconcile queue and its own. */
function createQueues(clock: VirtualClock, withReconcile: boolean): Queues {
  const sqs = new SqsModel({ clock: clock.asFakeClock() });
  const redrive = (dlq: string): string => JSON.stringify({ deadLetterTargetArn: sqs.queue(dlq).arn, maxReceiveCount: MAX_RECEIVE_COUNT });
  const dlqUrl = sqs.createQueue(DLQ);
  const queueUrl = sqs.createQueue(QUEUE, { VisibilityTimeout: String(VISIBILITY_TIMEOUT_SECONDS), RedrivePolicy: redrive(DLQ) });
  const reconcileDlqUrl = withReconcile ? sqs.createQueue(RECONCILE_DLQ) : undefined;
  const reconcileQueueUrl = withReconcile
    ? sqs.createQueue(RECONCILE_QUEUE, { VisibilityTimeout: String(VISIBILITY_TIMEOUT_SECONDS), RedrivePolicy: redrive(RECONCILE_DLQ) })
    : undefined;
  return { sqs, queueUrl, dlqUrl, reconcileQueueUrl, reconcileDlqUrl };
}

/** The provider's credentials and a valid access token, as after a deployment's first refresh. */
function createSecrets(clock: VirtualClock, provider: ProviderModel): SecretStore {
  const secrets = new SecretStore({ clock: clock.asFakeClock() });
  secrets.set(CREDENTIALS_SECRET, JSON.stringify({ clientId: provider.clientId, refreshToken: provider.refreshToken }));
  secrets.set(TOKEN_SECRET, JSON.stringify({ accessToken: provider.issueAccessToken(), refreshedAt: clock.now().toISOString() }));
  return secrets;
}

/** dynalite with the items table and the control table (created before virtual time runs: a plain client). */
async function startTables(options: SystemOptions, clock: VirtualClock, meter: SimMeter): Promise<Tables> {
  const dynamo = await startDynalite({ proxy: false, where: options.dynalite ?? 'in-process' });
  const tables: Tables = {
    dynamo,
    itemCount: undefined,
    clientFor: (source) => trackedDynamo(dynamo, clock, options.dynamoRoundTripMs, meter.dynamo[source], () => tables.itemCount),
  };
  await dynamo.createItemsTable(ITEMS_TABLE);
  await createControlTable(dynamo.client());
  return tables;
}

/** The functions' environment, as the stacks set it. */
function functionEnvironment(options: SystemOptions, queues: Queues): Record<string, string> {
  const { reconcile } = options;
  return functionEnv({
    baseUrl: 'http://127.0.0.1:1/api/v2',
    accessTokenSecretId: TOKEN_SECRET,
    credentialsSecretId: CREDENTIALS_SECRET,
    itemsTableName: ITEMS_TABLE,
    // Items here are small: the sync never loads its S3 adapter (none is given a client).
    itemsBucketName: 'items-bucket',
    revisionField: REVISION_FIELD,
    deadLetterQueueUrl: queues.dlqUrl,
    controlTableName: CONTROL_TABLE,
    ...(options.knownLimit !== undefined ? { providerRequestsPerSecond: String(options.knownLimit) } : {}),
    ...(reconcile
      ? {
          reconcileQueueUrl: queues.reconcileQueueUrl,
          freshnessHours: String(reconcile.freshnessHours),
          ...(reconcile.segments !== undefined ? { reconcileSegments: String(reconcile.segments) } : {}),
          ...(reconcile.highWater !== undefined ? { reconcileHighWater: String(reconcile.highWater) } : {}),
        }
      : {}),
  });
}

function wire(parts: {
  options: SystemOptions;
  clock: VirtualClock;
  meter: SimMeter;
  fetch: typeof globalThis.fetch;
  queues: Queues;
  secretStore: SecretStore;
  tables: Tables;
}): Wiring {
  const { options, clock, meter, queues } = parts;
  const credentials = { accessKeyId: 'sim', secretAccessKey: 'sim' };
  return {
    options,
    clock,
    meter,
    env: functionEnvironment(options, queues),
    fetch: parts.fetch,
    secrets: attachSecrets(new SecretsManagerClient({ region: LOCAL_REGION, credentials }), parts.secretStore),
    dynamoFor: parts.tables.clientFor,
    sqsFor(source, watch) {
      const made = new SQSClient({ region: LOCAL_REGION, credentials });
      watch?.(made); // before the model answers (same step and priority: the first added runs first)
      return attachSqs(made, queues.sqs, meter.sqs[source]);
    },
    observability(source) {
      const service = source === 'reconciler' ? RECONCILER_SERVICE : SYNC_SERVICE;
      const made = options.meterLogs ? countingObservability(service, meter.logs[source]) : quietLogger();
      if (source !== 'reconciler' && options.observe?.itemLog) watchItemLogs(made.logger, source, clock, options.observe.itemLog);
      return made;
    },
  };
}

/**
 * Makes the sync's containers of one event source: real sync handlers sharing that source's
 * DynamoDB and SQS clients, each with its own provider client (and so its own token cache).
 */
function syncContainerFactory(wiring: Wiring): (source: EventSourceName, count: number) => SyncHandler[] {
  const { clock, options } = wiring;
  const config = loadSyncConfig(wiring.env);
  return (source, count) => {
    const dynamodb = wiring.dynamoFor(source);
    const sqs = wiring.sqsFor(source);
    const observed = observedFetch(wiring.fetch, source, clock, options.observe?.providerAnswer);
    return Array.from({ length: count }, () =>
      createSyncHandler({
        config,
        dynamodb,
        sqs,
        secrets: wiring.secrets,
        provider: new HttpProviderClient({ ...config.provider, fetch: observed }),
        clock,
        sleep: clock.sleep,
        ...wiring.observability(source),
      }),
    );
  };
}

/** The real token refresher (not metered: its logs are kept nowhere). */
function createRefresher(wiring: Wiring): Refresher {
  const quiet = quietLogger();
  const config = loadRefresherConfig(wiring.env);
  return createRefresherHandler({
    config,
    secrets: wiring.secrets,
    provider: new HttpProviderClient({ ...config.provider, fetch: wiring.fetch }),
    clock: wiring.clock,
    logger: quiet.logger,
    metrics: quiet.metrics,
  });
}

/** The sync's event sources: the sync queue, and the reconcile queue when there are sweep containers; both metered. */
function eventSources(wiring: Wiring, sqs: SqsModel, handlers: readonly SyncHandler[], sweepHandlers: readonly SyncHandler[] | undefined): EventSource[] {
  const { clock, meter } = wiring;
  const sources: EventSource[] = [
    { name: 'sync', queue: meteredQueue(new InProcessEventSource(sqs, QUEUE, LONG_POLL_SECONDS), meter.eventSource.sync), handlers: timed(handlers, clock, meter.lambda.sync) },
  ];
  if (sweepHandlers) {
    const queue = new InProcessEventSource(sqs, RECONCILE_QUEUE, LONG_POLL_SECONDS);
    sources.push({ name: 'reconcile', queue: meteredQueue(queue, meter.eventSource.reconcile), handlers: timed(sweepHandlers, clock, meter.lambda.reconcile) });
  }
  return sources;
}

/** The refresher's schedule: every `minutes`, until close(). */
function scheduleRefresh(clock: VirtualClock, refresher: Refresher, minutes: number, state: RunState): void {
  const schedule = (): void => {
    clock.at(clock.ms() + minutes * 60_000, () => {
      if (!state.running) return;
      void refresher({ trigger: 'schedule' }).catch(() => undefined);
      schedule();
    });
  };
  schedule();
}

/** The real reconciler handler with its own metered clients; the reconcile queue's sends told to `observe.reconcileSent`. */
function createReconciler(wiring: Wiring, reconcile: ReconcileOptions): ReconcilerHandler {
  const { clock } = wiring;
  const sent = wiring.options.observe?.reconcileSent;
  const sqs = wiring.sqsFor('reconciler', sent ? (made) => watchReconcileSends(made, clock, sent) : undefined);
  return createReconcilerHandler({
    config: loadReconcilerConfig(wiring.env),
    dynamodb: wiring.dynamoFor('reconciler'),
    sqs,
    clock,
    sleep: clock.sleep,
    ...(reconcile.tuning ? { tuning: reconcile.tuning } : {}),
    ...wiring.observability('reconciler'),
  });
}

/**
 * The reconciler's schedule: the first tick `firstTickAfterMs` from now, then one every
 * RECONCILE_SCHEDULE_MS, each recorded in `ticks` and metered, until close() or pollUntil's stop.
 */
function scheduleTicks(wiring: Wiring, reconciler: ReconcilerHandler, firstTickAfterMs: number, state: RunState, ticks: TickRecord[]): void {
  const { clock, meter } = wiring;
  const tick = (): void => {
    if (!state.running || !state.ticking) return;
    const startedAt = clock.ms();
    const deadline = startedAt + RECONCILER_TIMEOUT_MS;
    const context = createContext('content-sync-reconciler', LOCAL_REGION, RECONCILER_TIMEOUT_MS, { remainingMs: () => deadline - clock.ms() });
    const record: TickRecord = { startedAt, endedAt: startedAt };
    ticks.push(record);
    meter.lambda.reconciler.invocations += 1;
    // As EventBridge Scheduler: every interval, whether or not the last tick is still running.
    void reconciler({ trigger: 'schedule', worker: 0, workers: 1 }, context).then(
      (report) => void (record.report = report),
      (error: unknown) => void (record.error = String(error)),
    ).finally(() => {
      record.endedAt = clock.ms();
      meter.lambda.reconciler.durationMs += record.endedAt - record.startedAt;
    });
    clock.at(startedAt + RECONCILE_SCHEDULE_MS, tick);
  };
  clock.at(clock.ms() + firstTickAfterMs, tick);
}

/**
 * Runs every event source in virtual time until `stop()` (which also stops the reconciler's
 * ticks), then closes the model's long polls and lets the invocations end. The sync queue's result.
 */
async function pollEventSources(clock: VirtualClock, sqs: SqsModel, sources: readonly EventSource[], stop: () => boolean, state: RunState): Promise<DrainResult> {
  const syncContext = (): Context => {
    const deadline = clock.ms() + FUNCTION_TIMEOUT_MS;
    return createContext('content-sync-item-sync', LOCAL_REGION, FUNCTION_TIMEOUT_MS, { remainingMs: () => deadline - clock.ms() });
  };
  const stopping = (): boolean => {
    if (!stop()) return false;
    state.ticking = false;
    return true;
  };
  const results: Array<DrainResult | undefined> = sources.map(() => undefined);
  const runs = sources.map((source, index) =>
    runEventSource({
      queue: source.queue,
      handlers: source.handlers,
      context: syncContext,
      now: () => clock.ms(),
      timeLimitMs: Number.MAX_SAFE_INTEGER / 2,
      stop: stopping,
      finished: () => false,
    }).then((result) => (results[index] = result)),
  );
  const ended = (): boolean => results.every((result) => result !== undefined);
  await clock.run(Number.MAX_SAFE_INTEGER, () => ended() || stopping());
  sqs.close(); // ends the long polls
  await clock.run(clock.ms() + 60_000, ended);
  await Promise.all(runs);
  return results[0]!;
}

/** SimSystem.preloadItems: every provider item's row written as after a first sync; the table's ItemCount set. */
async function preloadItems(provider: ProviderModel, ids: readonly string[], clock: VirtualClock, tables: Tables): Promise<number> {
  const rows = await itemRows(provider, ids, clock.now().toISOString());
  await batchWrite(tables.dynamo.client(), ITEMS_TABLE, rows);
  tables.itemCount = rows.length;
  return rows.length;
}

function emptyMeter(): SimMeter {
  const bySource = <T>(make: () => T): Record<MeterSource, T> => ({ sync: make(), reconcile: make(), reconciler: make() });
  const eventSource = (): EventSourceCount => ({ receives: 0, emptyReceives: 0, deleteBatches: 0 });
  return {
    dynamo: bySource(() => ({})),
    sqs: bySource(() => ({})),
    eventSource: { sync: eventSource(), reconcile: eventSource() },
    lambda: {
      sync: { invocations: 0, durationMs: 0, memoryMb: SYNC_MEMORY_MB },
      reconcile: { invocations: 0, durationMs: 0, memoryMb: SYNC_MEMORY_MB },
      reconciler: { invocations: 0, durationMs: 0, memoryMb: RECONCILER_MEMORY_MB },
    },
    logs: bySource(() => ({})),
  };
}

/**
 * The rows the sync writes for these items (created, as after a first sync at `syncedAt`): the
 * real item store's PutItem `Item`s, taken from a client that only keeps them (no SDK stack: a
 * million rows are made in seconds).
 */
async function itemRows(provider: ProviderModel, ids: readonly string[], syncedAt: string): Promise<Array<Record<string, AttributeValue>>> {
  const rows: Array<Record<string, AttributeValue>> = [];
  const capture = {
    send: async (command: PutItemCommand) => {
      rows.push(command.input.Item!);
      return {};
    },
  } as unknown as DynamoDBClient;
  const store = new DynamoDbItemStore(capture, ITEMS_TABLE);
  for (const id of ids) {
    // As the provider client hands it over (parseJson), validated as the sync does.
    const valid = validateItem(parseJson(JSON.stringify(provider.getItem(id))), id, REVISION_FIELD);
    await store.put({ id, type: valid.type, revision: valid.revision, item: valid.item, syncedAt }, { exists: false });
  }
  return rows;
}

/** BatchWriteItem, 25 rows a call, 16 calls in flight, unprocessed items sent again. */
async function batchWrite(client: DynamoDBClient, table: string, rows: ReadonlyArray<Record<string, AttributeValue>>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < rows.length) {
      const chunk = rows.slice(next, next + 25);
      next += 25;
      let requests = chunk.map((Item) => ({ PutRequest: { Item } }));
      while (requests.length > 0) {
        const output = await client.send(new BatchWriteItemCommand({ RequestItems: { [table]: requests } }));
        requests = (output.UnprocessedItems?.[table] ?? []) as typeof requests;
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

async function createControlTable(client: DynamoDBClient): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: CONTROL_TABLE,
      AttributeDefinitions: [{ AttributeName: CONTROL_TABLE_KEY, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: CONTROL_TABLE_KEY, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;

/** Operations that take ReturnConsumedCapacity. */
const METERED = new Set(['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchGetItem', 'BatchWriteItem', 'Scan', 'Query']);

/**
 * A DynamoDB client whose calls hold virtual time still while dynalite answers, then take
 * `roundTripMs` of it; each call counted into `counts` with the capacity dynalite computed for it.
 * DescribeTable answers `itemCount()` as the table's ItemCount when it is known: DynamoDB refreshes
 * it about every six hours, dynalite never (always 0).
 */
function trackedDynamo(
  dynamo: Dynalite,
  clock: VirtualClock,
  roundTripMs: number,
  counts: Record<string, DynamoCount>,
  itemCount: () => number | undefined,
): DynamoDBClient {
  const client = dynamo.client();
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const operation = (context.commandName ?? '').replace(/Command$/, '');
      const input = METERED.has(operation) ? { ...args.input, ReturnConsumedCapacity: 'TOTAL' } : args.input;
      const table = typeof input['TableName'] === 'string' ? input['TableName'] : Object.keys((input['RequestItems'] as AnyInput | undefined) ?? {}).join(',');
      const count = (counts[`${operation} ${table}`] ??= { requests: 0, capacityUnits: 0, conditionFailures: 0 });
      count.requests += 1;
      try {
        const result = await clock.track(next({ ...args, input }));
        count.capacityUnits += consumed(result.output['ConsumedCapacity']);
        if (operation === 'DescribeTable' && itemCount() !== undefined) {
          const described = result.output['Table'] as AnyInput | undefined;
          if (described && described['TableName'] === ITEMS_TABLE) described['ItemCount'] = itemCount();
        }
        return result;
      } catch (error) {
        if ((error as { name?: string }).name === 'ConditionalCheckFailedException') count.conditionFailures += 1;
        throw error;
      } finally {
        if (roundTripMs > 0) await clock.sleep(roundTripMs);
      }
    }) as never,
    { step: 'initialize', priority: 'high', name: 'virtualTime' },
  );
  return client;
}

function consumed(capacity: unknown): number {
  const list = Array.isArray(capacity) ? capacity : capacity === undefined ? [] : [capacity];
  return list.reduce((sum: number, entry) => sum + (Number((entry as { CapacityUnits?: number }).CapacityUnits) || 0), 0);
}

/** The provider's answers, told to `observe` with the id asked for (the model's fetch for one event source's containers). */
function observedFetch(
  fetch: typeof globalThis.fetch,
  source: EventSourceName,
  clock: VirtualClock,
  observe: SystemObserver['providerAnswer'],
): typeof globalThis.fetch {
  if (!observe) return fetch;
  return async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const marker = url.indexOf('/items/');
    if (marker >= 0) observe(source, decodeURIComponent(url.slice(marker + 7).split('?')[0]!), response.status, clock.ms());
    return response;
  };
}

/** The event source's ReceiveMessage and DeleteMessageBatch calls, counted. */
function meteredQueue(queue: EventSourceQueue, count: EventSourceCount): EventSourceQueue {
  return {
    arn: queue.arn,
    async receive(max) {
      count.receives += 1;
      const messages = await queue.receive(max);
      if (messages.length === 0) count.emptyReceives += 1;
      return messages;
    },
    async settle(succeeded, failed) {
      // Lambda deletes what succeeded with one DeleteMessageBatch (a batch holds at most 10 records).
      if (succeeded.length > 0) count.deleteBatches += Math.ceil(succeeded.length / 10);
      await queue.settle(succeeded, failed);
    },
    remaining: () => queue.remaining(),
  };
}

/** Each handler's invocations and virtual durations, counted. */
function timed(handlers: readonly SyncHandler[], clock: VirtualClock, count: InvocationCount): SyncHandlerFn[] {
  return handlers.map((handler) => async (event, context) => {
    const started = clock.ms();
    count.invocations += 1;
    try {
      return await handler(event, context);
    } finally {
      count.durationMs += clock.ms() - started;
    }
  });
}

/** The ids of every SendMessageBatch entry SQS accepted, told to `observe`. */
function watchReconcileSends(client: SQSClient, clock: VirtualClock, observe: NonNullable<SystemObserver['reconcileSent']>): void {
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const result = await next(args);
      if (context.commandName === 'SendMessageBatchCommand') {
        const entries = (args.input['Entries'] ?? []) as Array<{ Id: string; MessageBody: string }>;
        const accepted = new Set(((result.output['Successful'] ?? []) as Array<{ Id: string }>).map((entry) => entry.Id));
        const sent = entries.filter((entry) => accepted.has(entry.Id)).map((entry) => (JSON.parse(entry.MessageBody) as { id: string }).id);
        observe(sent, clock.ms());
      }
      return result;
    }) as never,
    // Added before attachSqs's middleware (same step and priority): it runs first and sees the model's answer.
    { step: 'initialize', priority: 'high', name: 'watchReconcileSends' },
  );
}

/** Tells `observe` of every line the sync logs about an item (its fields hold `itemId`). */
function watchItemLogs(logger: unknown, source: EventSourceName, clock: VirtualClock, observe: NonNullable<SystemObserver['itemLog']>): void {
  const target = logger as Record<'info' | 'warn' | 'error', (message: string, ...rest: unknown[]) => void>;
  for (const level of ['info', 'warn', 'error'] as const) {
    const original = target[level].bind(target);
    target[level] = (message: string, ...rest: unknown[]) => {
      const itemId = (rest[0] as { itemId?: unknown } | undefined)?.itemId;
      if (typeof itemId === 'string') observe(source, message, itemId, clock.ms());
      original(message, ...rest);
    };
  }
}

/**
 * The real Powertools logger and metrics of `service`, writing to counters instead of standard
 * output: lines and bytes by log message (EMF metric documents as `EMF metrics`).
 */
function countingObservability(service: string, counts: Record<string, LogCount>): { logger: never; metrics: never } {
  const output = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      for (const line of text.split('\n')) {
        if (line === '') continue;
        const key = line.includes('"_aws"') ? 'EMF metrics' : (/"message":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? 'other');
        const count = (counts[key] ??= { lines: 0, bytes: 0 });
        count.lines += 1;
        count.bytes += Buffer.byteLength(line) + 1;
      }
      callback();
    },
  });
  return { logger: createLogger(service, { output }) as never, metrics: createMetrics(service, { output }) as never };
}

/** Logger and metrics that keep nothing: a simulation counts what happens itself. */
function quietLogger(): { logger: never; metrics: never } {
  const noop = (): void => undefined;
  const logger = { debug: noop, info: noop, warn: noop, error: noop, addContext: noop, appendKeys: noop } as unknown as never;
  const metrics = { addMetric: noop, publishStoredMetrics: noop, addDimension: noop } as unknown as never;
  return { logger, metrics };
}
