/**
 * The whole sync system in virtual time, for scenarios hours long: the local system (dev/system)
 * as deployed, with the deployment's numbers from infra/deployment.ts, on a virtual clock. The real
 * item-sync handlers (one per container, each with its own provider client and its own cache of the
 * connections' rows), the real token refresher on its schedule, the real provider client over the
 * provider model (its accounts, rate limit, outages), the real DynamoDB adapters on DynamoDB Local (the
 * items, control and connections tables), and the SQS model behind real SDK clients. Lambda's event
 * source mapping polls the sync queue with the deployed batch size, time-out and maximum
 * concurrency.
 *
 * Connections: the provider's account `default` (its `ids` items; with `tree`, a deep tree) is the
 * connection `default`; with `accounts`, that many more accounts, each its own connection (its id the account's). Each
 * is added to the connections table through the store before virtual time runs, as the operator's
 * `add` does: no access token yet, so the item sync refreshes one on first use.
 *
 * With `reconcile`, reconciliation as deployed (freshnessHours above 0): the reconcile queue and its
 * dead-letter queue, the sync's second event source on it (its own containers, as many as on the
 * sync queue), and the real reconciler invoked by its schedule, a virtual timer every minute.
 * Without it, the deployment of freshnessHours 0: no reconciler, no reconcile queue.
 *
 * With `discovery`, the four context keys of discovery (docs/discovery.md), given as `-c key=value`
 * would give them: the sync sends a folder's children to the reconcile queue; with `children`, the
 * provider's folders embed their children.
 *
 * Every source has its own SDK clients, so `meter` (meters.ts) counts what each does.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SyncHandler } from '../../functions/item-sync/app.js';
import type { ReconcilerHandler } from '../../functions/reconciler/app.js';
import type { TickReport } from '../../functions/reconciler/tick.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import type { ConnectionStore } from '../../functions/shared/connections/ports.js';
import type { ChangeEventsHandler } from '../../functions/change-events/app.js';
import type { ChangesWriterHandler } from '../../functions/changes-writer/app.js';
import { changeEventSourceDeployment, changesWriterEventSourceDeployment } from '../../infra/deployment.js';
import { CHANGE_EVENTS_SERVICE, CHANGES_WRITER_SERVICE, RECONCILER_SERVICE, REFRESHER_SERVICE, SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import type { RefresherResult } from '../../functions/token-refresher/app.js';
import type { LocalDynamoDb } from '../fakes/local-dynamo.js';
import { runEventSource, type DrainResult } from '../fakes/lambda.js';
import type { SqsModel } from '../fakes/sqs-model.js';
import type { ProviderModel } from '../simulator/provider-model.js';
import { mulberry32 } from '../simulator/random.js';
import { inProcessAws } from '../system/aws.js';
import { batchingOf, eventSourceQueue } from '../system/event-sources.js';
import { buildChangeEvents, type BuiltFunction, type RefresherHandler } from '../system/functions.js';
import { localNames } from '../system/names.js';
import { countingObservability, quietObservability, type Observability } from '../system/observability.js';
import { every } from '../system/schedules.js';
import { startStorage } from '../system/storage.js';
import { buildSystem, type LocalSystem } from '../system/system.js';
import type { Tuning } from '../system/tuning.js';
import {
  emptyMeter,
  meteredQueue,
  observedFetch,
  timed,
  tableWrites,
  trackedDynamo,
  watchItemLogs,
  watchMetrics,
  watchQueueSends,
  watchReconcileSends,
  type EventSourceName,
  type MeterSource,
  type SimMeter,
} from './meters.js';
import { ItemsStream, meteredEventBridge, pollStream } from './items-stream.js';
import { modelFetch } from './model-fetch.js';
import { batchWrite, itemRows } from './preload.js';
import { addConnections, startProvider } from './sim-provider.js';
import type { SyncFaults, SystemOptions } from './system-options.js';
import { VirtualClock } from './virtual-clock.js';

export type { DynamoCount, EventSourceName, InvocationCount, MeterSource, SimMeter } from './meters.js';
export { atLimit, type DiscoveryContext, type LimitScale, type ReconcileOptions, type SyncFaults, type SystemObserver, type SystemOptions } from './system-options.js';

export interface RefreshRun {
  startedAt: number;
  endedAt: number;
  result?: RefresherResult;
  error?: string;
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
  /** The local system it runs: its configuration, its deployment, its queues. */
  local: LocalSystem;
  sqs: SqsModel;
  /** The connections table, as the operator CLI writes it (not metered). */
  connections: ConnectionStore;
  /** Every connection added, `default` first when it has items, then the accounts' in order. */
  connectionIds: string[];
  dynamo: LocalDynamoDb;
  /** The sync containers' DynamoDB client (users' event source). */
  client: DynamoDBClient;
  /** The account `default`'s item ids (the connection `default`'s). */
  ids: string[];
  queueUrl: string;
  dlqUrl: string;
  /** With `reconcile`: the reconcile queue and its dead-letter queue. */
  reconcileQueueUrl: string | undefined;
  reconcileDlqUrl: string | undefined;
  /** The functions as built: the sync's containers on each queue, the reconciler (with `reconcile`), the refresher. */
  functions: {
    sync: Array<BuiltFunction<SyncHandler>>;
    sweep: Array<BuiltFunction<SyncHandler>>;
    reconciler: BuiltFunction<ReconcilerHandler> | undefined;
    refresher: BuiltFunction<RefresherHandler>;
  };
  handlers: SyncHandler[];
  /** With `changeEvents`: the items table's stream and the change-events function on it. */
  changeEvents: { stream: ItemsStream; fn: BuiltFunction<ChangeEventsHandler> } | undefined;
  /** With `changesWriter`: the items table's stream (a reader of its own) and the changes writer on it. */
  changesWriter: { stream: ItemsStream; fn: BuiltFunction<ChangesWriterHandler> } | undefined;
  /** The reconciler's ticks so far (with `reconcile`). */
  ticks: TickRecord[];
  /** The token refresher's runs so far. */
  refreshRuns: RefreshRun[];
  meter: SimMeter;
  /** Polls the sync queue (and the reconcile queue) until `stop()`, in virtual time; ticks stop then too. */
  pollUntil(stop: () => boolean): Promise<DrainResult>;
  /** Runs the token refresher once (as its schedule does), metered and recorded in `refreshRuns`. */
  refresh(): Promise<RefreshRun>;
  /**
   * Writes a row for every item of the connection `default` (or of every connection named), as the
   * sync writes it, before virtual time runs: the table as after a first sync. Sets the table's
   * ItemCount. Returns the rows written.
   */
  preloadItems(connections?: readonly string[]): Promise<number>;
  close(): Promise<void>;
}

/** The tables by their plain names: the cost figures name them (`DynamoDB Scan items`, `PutItem control`, `GetItem connections`, `TransactWriteItems changes`). */
const NAMES = { ...localNames('sim'), itemsTable: 'items', controlTable: 'control', connectionsTable: 'connections', changesTable: 'changes' };

/** The context and tuning a simulation's options make (what differs from cdk.json's deployment). */
export function simDeploymentInput(options: SystemOptions): { context: Record<string, number | string>; tuning: Tuning } {
  const { reconcile } = options;
  return {
    context: {
      freshnessHours: reconcile ? reconcile.freshnessHours : 0,
      ...(options.syncMaxConcurrency !== undefined ? { syncMaxConcurrency: options.syncMaxConcurrency } : {}),
      ...(options.syncBatchSize !== undefined ? { syncBatchSize: options.syncBatchSize } : {}),
      ...(options.tokenRefreshMinutes !== undefined ? { tokenRefreshMinutes: options.tokenRefreshMinutes } : {}),
      ...(options.knownLimit !== undefined ? { providerRequestsPerSecond: options.knownLimit } : {}),
      ...(options.paceScope !== undefined ? { paceScope: options.paceScope } : {}),
      ...options.discovery,
    },
    tuning: {
      ...options.tuning,
      ...(reconcile?.segments !== undefined ? { reconcileSegments: reconcile.segments } : {}),
      ...(reconcile?.highWater !== undefined ? { reconcileHighWater: reconcile.highWater } : {}),
    },
  };
}

/**
 * The provider model, the local system on the virtual clock (queues, tables, the connections added
 * as the operator adds them), the functions with their sources' metered clients, the event sources
 * and the schedules (the refresher's and, with `reconcile`, the reconciler's).
 */
export async function startSystem(options: SystemOptions): Promise<SimSystem> {
  const clock = new VirtualClock();
  const { provider, ids, connectionIds } = startProvider(options, clock);
  const aws = inProcessAws({ sqsClock: clock.asFakeClock() });
  const tablesFolder = options.dynamodbOnDisk ? mkdtempSync(join(tmpdir(), 'content-sync-sim-')) : undefined;
  // The folder goes with the server, however the run ends (Ctrl-C included).
  const storage = await startStorage(NAMES, { noBucket: true, ...(tablesFolder ? { dynamodbPath: tablesFolder, dynamodbTemporary: true } : {}) }).catch((error: unknown) => {
    if (tablesFolder) rmSync(tablesFolder, { recursive: true, force: true });
    throw error;
  });
  if (tablesFolder && storage.dynamodbStorage !== 'disk') {
    await storage.close();
    rmSync(tablesFolder, { recursive: true, force: true });
    throw new Error(`DynamoDB Local could not keep its tables in ${tablesFolder}`);
  }
  const input = simDeploymentInput(options);
  const local = buildSystem({
    names: NAMES,
    context: input.context,
    tuning: input.tuning,
    aws,
    storage,
    now: () => clock.ms(),
  });
  try {
    await addConnections(local.connections, provider, connectionIds, clock.now().toISOString());
  } catch (error) {
    await local.close();
    throw error;
  }
  const deployment = local.deployment;
  const meter = emptyMeter({
    sync: deployment.sync.memoryMb,
    reconcile: deployment.sync.memoryMb,
    reconciler: deployment.reconciler?.memoryMb ?? 0,
    refresher: deployment.refresher.memoryMb,
    changeEvents: deployment.changeEvents.memoryMb,
    changesWriter: deployment.changesWriter.memoryMb,
  });
  let itemCount: number | undefined;
  const dynamoFor = (source: MeterSource, faults?: SyncFaults['dynamo']): DynamoDBClient =>
    trackedDynamo(storage.dynamo, {
      clock,
      counts: meter.dynamo[source],
      itemsTable: NAMES.itemsTable,
      itemCount: () => itemCount,
      ...(faults ? { faults } : {}),
    });
  const fetch = modelFetch(provider, clock);
  const observability = (source: MeterSource): Observability => {
    const service =
      source === 'reconciler' ? RECONCILER_SERVICE : source === 'refresher' ? REFRESHER_SERVICE : source === 'changeEvents' ? CHANGE_EVENTS_SERVICE : source === 'changesWriter' ? CHANGES_WRITER_SERVICE : SYNC_SERVICE;
    const made = options.meterLogs ? countingObservability(service, meter.logs[source]) : quietObservability();
    const itemLog = options.observe?.itemLog;
    if ((source === 'sync' || source === 'reconcile') && itemLog) {
      watchItemLogs(made.logger, clock, (message, itemId, at, connection) => itemLog(source, message, itemId, at, connection));
    }
    const metric = options.observe?.metric;
    if (metric) watchMetrics(made.metrics, clock, (name, value, at) => metric(source, name, value, at));
    return made;
  };

  // The event source on the items table's own stream (DynamoDB Local's), read in virtual time.
  const stream = options.changeEvents
    ? new ItemsStream({ dynamo: storage.dynamo, tableName: NAMES.itemsTable, clock, count: meter.stream, writes: () => tableWrites(storage.dynamo, NAMES.itemsTable) })
    : undefined;
  // The functions' jitter (the paces', the backoffs'): seeded, one stream drawn in the order the
  // simulated code draws, so that a seed gives the same run every time.
  const random = mulberry32(options.seed ^ 0x6a177e5);
  /** The sync's containers of one event source: its source's DynamoDB and SQS clients, each container its own provider client. */
  const containers = (source: EventSourceName): Array<BuiltFunction<SyncHandler>> => {
    const dynamodb = dynamoFor(source, options.faults?.dynamo);
    options.observe?.syncDynamo?.(dynamodb, source);
    const sent = options.observe?.syncSent;
    const sqs = aws.sqsClient({
      calls: meter.sqs[source],
      ...(sent ? { watch: (made) => watchQueueSends(made, clock, (queueUrl, messages, at) => sent(source, queueUrl, messages, at)) } : {}),
    });
    const answer = options.observe?.providerAnswer;
    const observed = observedFetch(fetch, clock, answer && ((itemId, status, at) => answer(source, itemId, status, at)));
    return Array.from({ length: deployment.syncEventSource.maxConcurrency }, () =>
      local.syncContainer({ dynamodb, sqs, fetch: observed, clock, sleep: clock.sleep, random, ...observability(source) }),
    );
  };
  const sync = containers('sync');
  const sweep = options.reconcile ? containers('reconcile') : [];
  const refresher = local.refresher({ dynamodb: dynamoFor('refresher'), fetch, clock, sleep: clock.sleep, random, ...observability('refresher') });
  const reconciler = options.reconcile ? createReconciler(local, options, dynamoFor('reconciler'), meter, clock, observability('reconciler')) : undefined;

  const changeEvents =
    stream && options.changeEvents
      ? {
          stream,
          fn: buildChangeEvents(deployment.changeEvents, {
            eventbridge: meteredEventBridge(clock, options.changeEvents.eventBridgeRoundTripMs, meter.eventBridge),
            dynamodb: dynamoFor('changeEvents'),
            clock,
            sleep: clock.sleep,
            ...observability('changeEvents'),
          }),
        }
      : undefined;

  const changesWriter = options.changesWriter
    ? (() => {
        const dynamodb = dynamoFor('changesWriter', options.faults?.writerDynamo);
        options.observe?.writerDynamo?.(dynamodb);
        return {
          stream: new ItemsStream({ dynamo: storage.dynamo, tableName: NAMES.itemsTable, clock, count: meter.writerStream, writes: () => tableWrites(storage.dynamo, NAMES.itemsTable) }),
          fn: local.changesWriter({ dynamodb, clock, sleep: clock.sleep, random, ...observability('changesWriter') }),
        };
      })()
    : undefined;

  const refreshRuns: RefreshRun[] = [];
  const refresh = (): Promise<RefreshRun> => runRefresher(local, refresher, clock, meter, refreshRuns);
  const refreshing = every(clock.asFakeClock(), deployment.schedule.refresherEveryMinutes * 60_000, () => void refresh());
  const ticks: TickRecord[] = [];
  const ticking = reconciler ? scheduleTicks(local, reconciler, clock, meter, ticks, options.reconcile?.firstTickAfterMs) : undefined;

  const sources = [
    { name: 'sync' as const, functions: sync },
    ...(sweep.length > 0 ? [{ name: 'reconcile' as const, functions: sweep }] : []),
  ];
  return {
    clock,
    provider,
    local,
    sqs: aws.sqs,
    connections: local.connections,
    connectionIds,
    dynamo: storage.dynamo,
    client: dynamoFor('sync'),
    ids,
    queueUrl: local.queues.sync.url,
    dlqUrl: local.queues.sync.deadLetterUrl,
    reconcileQueueUrl: local.queues.reconcile?.url,
    reconcileDlqUrl: local.queues.reconcile?.deadLetterUrl,
    functions: { sync, sweep, reconciler, refresher },
    handlers: sync.map((fn) => fn.handler),
    changeEvents,
    changesWriter,
    ticks,
    refreshRuns,
    meter,
    async pollUntil(stop) {
      let stopped = false;
      let streamEnded = changeEvents === undefined;
      let writerEnded = changesWriter === undefined;
      const writing = changesWriter
        ? pollStream({
            ...changesWriter,
            batchSize: changesWriterEventSourceDeployment().batchSize,
            context: () => local.context(changesWriter.fn),
            clock,
            invocations: meter.lambda.changesWriter,
            ...(options.faults?.writerFailsAfterWork ? { failAfter: options.faults.writerFailsAfterWork } : {}),
            stopped: () => stopped,
          }).finally(() => void (writerEnded = true))
        : undefined;
      const streaming = changeEvents
        ? pollStream({
            ...changeEvents,
            batchSize: changeEventSourceDeployment().batchSize,
            context: () => local.context(changeEvents.fn),
            clock,
            invocations: meter.lambda.changeEvents,
            ...(options.faults?.loseStreamBatch ? { lose: options.faults.loseStreamBatch } : {}),
            stopped: () => stopped,
          }).finally(() => void (streamEnded = true))
        : undefined;
      const result = await pollEventSources(local, clock, meter, sources, options.faults?.invocation, () => {
        if (!stop()) return false;
        ticking?.stop();
        stopped = true;
        return true;
      });
      stopped = true;
      // The streams' event sources end after their current read or invocation.
      await clock.run(clock.ms() + 60_000, () => streamEnded && writerEnded);
      await streaming;
      await writing;
      return result;
    },
    refresh,
    async preloadItems(connections = [DEFAULT_CONNECTION]) {
      const client = storage.dynamo.client();
      let written = 0;
      try {
        for (const connection of connections) {
          const accountIds = connection === DEFAULT_CONNECTION ? ids : provider.account(connection).itemIds();
          const rows = await itemRows(provider, accountIds, clock.now().toISOString(), NAMES.itemsTable, local.config.revisionField, connection);
          await batchWrite(client, NAMES.itemsTable, rows);
          written += rows.length;
        }
        // The rows as after a first sync: written before the stream's event source starts, never its records.
        if (stream) await clock.during(stream.skipToLatest());
        if (changesWriter) await clock.during(changesWriter.stream.skipToLatest());
      } finally {
        client.destroy();
      }
      itemCount = written;
      return written;
    },
    async close() {
      refreshing.stop();
      ticking?.stop();
      stream?.close();
      changesWriter?.stream.close();
      await local.close();
    },
  };
}

/** One run of the token refresher with its invocation's context (its deployed time-out, in virtual time), timed and recorded. */
export async function runRefresher(
  local: LocalSystem,
  refresher: BuiltFunction<RefresherHandler>,
  clock: VirtualClock,
  meter: SimMeter,
  runs: RefreshRun[],
): Promise<RefreshRun> {
  const run: RefreshRun = { startedAt: clock.ms(), endedAt: clock.ms() };
  runs.push(run);
  meter.lambda.refresher.invocations += 1;
  try {
    run.result = await refresher.handler({ trigger: 'schedule' }, local.context(refresher));
  } catch (error) {
    run.error = String(error);
  } finally {
    run.endedAt = clock.ms();
    meter.lambda.refresher.durationMs += run.endedAt - run.startedAt;
  }
  return run;
}

/** The real reconciler with its own metered clients; the reconcile queue's sends told to `observe.reconcileSent`. */
function createReconciler(
  local: LocalSystem,
  options: SystemOptions,
  dynamodb: DynamoDBClient,
  meter: SimMeter,
  clock: VirtualClock,
  observability: Observability,
): BuiltFunction<ReconcilerHandler> {
  const sent = options.observe?.reconcileSent;
  const sqs = local.aws.sqsClient({ calls: meter.sqs.reconciler, ...(sent ? { watch: (made) => watchReconcileSends(made, clock, sent) } : {}) });
  const tuning = options.reconcile?.tuning;
  return local.reconciler({ dynamodb, sqs, clock, sleep: clock.sleep, ...(tuning ? { tuning } : {}), ...observability });
}

/**
 * The reconciler's schedule: the first tick `firstTickAfterMs` from now (default one interval), then
 * one every interval, as EventBridge Scheduler (whether or not the last tick still runs), each
 * recorded in `ticks` and metered.
 */
function scheduleTicks(
  local: LocalSystem,
  reconciler: BuiltFunction<ReconcilerHandler>,
  clock: VirtualClock,
  meter: SimMeter,
  ticks: TickRecord[],
  firstTickAfterMs: number | undefined,
): { stop(): void } {
  const schedule = local.deployment.schedule.reconciler!;
  const everyMs = schedule.everyMinutes * 60_000;
  return every(
    clock.asFakeClock(),
    everyMs,
    () => {
      const startedAt = clock.ms();
      const record: TickRecord = { startedAt, endedAt: startedAt };
      ticks.push(record);
      meter.lambda.reconciler.invocations += 1;
      void reconciler
        .handler({ trigger: 'schedule', worker: 0, workers: schedule.workers }, local.context(reconciler))
        .then(
          (report) => void (record.report = report),
          (error: unknown) => void (record.error = String(error)),
        )
        .finally(() => {
          record.endedAt = clock.ms();
          meter.lambda.reconciler.durationMs += record.endedAt - record.startedAt;
        });
    },
    firstTickAfterMs ?? everyMs,
  );
}

/**
 * Runs every event source in virtual time until `stop()`, then closes the model's long polls and
 * lets the invocations end. The sync queue's result.
 */
async function pollEventSources(
  local: LocalSystem,
  clock: VirtualClock,
  meter: SimMeter,
  sources: ReadonlyArray<{ name: EventSourceName; functions: ReadonlyArray<BuiltFunction<SyncHandler>> }>,
  wrap: SyncFaults['invocation'],
  stop: () => boolean,
): Promise<DrainResult> {
  const results: Array<DrainResult | undefined> = sources.map(() => undefined);
  const runs = sources.map((source, index) =>
    runEventSource({
      queue: meteredQueue(eventSourceQueue(local, source.name), meter.eventSource[source.name]),
      handlers: source.functions.map((fn) => timed(wrap ? wrap(fn.handler, source.name) : fn.handler, clock, meter.lambda[source.name])),
      ...batchingOf(local),
      context: () => local.context(source.functions[0]!),
      now: () => clock.ms(),
      timeLimitMs: Number.MAX_SAFE_INTEGER / 2,
      stop,
      finished: () => false,
    }).then((result) => (results[index] = result)),
  );
  const ended = (): boolean => results.every((result) => result !== undefined);
  await clock.run(Number.MAX_SAFE_INTEGER, () => ended() || stop());
  local.aws.sqs.close(); // ends the long polls
  await clock.run(clock.ms() + 60_000, ended);
  await Promise.all(runs);
  return results[0]!;
}
