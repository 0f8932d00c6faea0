/**
 * The one construction of the local run, which both local stories (story.ts, against-provider.ts)
 * and `npm run serve` (serve-command.ts) use: files under the data folder, the provider, the local
 * system (dev/system) on the HTTP emulator, DynamoDB Local and s3rver, its functions with their logs
 * and metrics written to the log file (the change-events function on both tables' streams from the
 * start: change-events.ts), the client API on a loopback port; then what the caller does with it
 * (`withLocalRun`): a story's own steps (which add the connections through the client API or with
 * the operator CLI: operator.ts), or serve's keeping it running until it is stopped. Whatever throws
 * ends the run as one problem; everything started is stopped.
 */
import type { KMSClient } from '@aws-sdk/client-kms';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SyncHandler } from '../../functions/item-sync/app.js';
import type { ReconcilerHandler } from '../../functions/reconciler/app.js';
import { API_SERVICE, ERASER_SERVICE, RECONCILER_SERVICE, REFRESHER_SERVICE, SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import { callApi, startLocalApi, type LocalApi, type LocalApiOptions } from './client-api.js';
import { describeLifecycleEvent, startChangeEvents, type LocalChangeEvents } from './change-events.js';
import type { RefresherResult } from '../../functions/token-refresher/app.js';
import type { ItemRow } from '../fakes/items-table.js';
import type { SqsModel } from '../fakes/sqs-model.js';
import type { KeyMaterial } from '../fakes/kms-model.js';
import { emulatorAws } from '../system/aws.js';
import type { ContextOverrides } from '../system/config.js';
import type { ApiHandler, BuiltFunction, EraserHandler, RefresherHandler } from '../system/functions.js';
import type { LocalNames } from '../system/names.js';
import { streamObservability } from '../system/observability.js';
import { startStorage } from '../system/storage.js';
import { buildSystem, type LocalSystem } from '../system/system.js';
import type { Tuning } from '../system/tuning.js';
import { display, openLog, screenFor, terminal, type Screen, type Writer } from './screen.js';

/** A run of seconds: DynamoDB Local's JVM compiles with its first tier only, a third less CPU (docs/development.md). */
export const LOCAL_RUN_JIT = 'quick';

/** The local resources' names (what the stacks name with CloudFormation). */
export const LOCAL_NAMES: LocalNames = {
  itemsTable: 'content-sync-items-local',
  itemsBucket: 'content-sync-items-local',
  controlTable: 'content-sync-control-local',
  changesTable: 'content-sync-changes-local',
  syncQueue: 'content-sync-items-local',
  syncDeadLetterQueue: 'content-sync-items-local-dlq',
  reconcileQueue: 'content-sync-reconcile-local',
  reconcileDeadLetterQueue: 'content-sync-reconcile-local-dlq',
  eraseQueue: 'content-sync-erase-local',
  eraseDeadLetterQueue: 'content-sync-erase-local-dlq',
  connectionsTable: 'content-sync-connections-local',
  eventBus: 'content-sync-change-events-local',
};

/** The functions as the local run invokes them. */
export interface Handlers {
  refresher: BuiltFunction<RefresherHandler>;
  /** The item sync's container that takes the sync queue's records. */
  sync: BuiltFunction<SyncHandler>;
  /**
   * Another container of the item sync, for the reconcile queue's records (the background lane). A
   * container serves one invocation at a time in Lambda, so one never mixes the two lanes' records
   * in its pace's lease: the reconcile queue's event source, polling alongside the sync queue's
   * (discovery's children), gets containers of its own.
   */
  sweep: BuiltFunction<SyncHandler>;
  reconciler: BuiltFunction<ReconcilerHandler>;
  /** The client API's function (served on a loopback port: `api`) and the eraser (fed from the erase queue). */
  api: BuiltFunction<ApiHandler>;
  eraser: BuiltFunction<EraserHandler>;
}

/** The provider a run talks to, and how to stop it (its connections are the story's to add). */
export interface ProviderSide {
  baseUrl: string;
  close(): Promise<void>;
}

/** What a local run is built from. */
export interface RunPlan {
  dataDir: string;
  inMemory: boolean | undefined;
  /** Starts with an empty table (the table is kept between runs otherwise). */
  fresh: boolean;
  revisionField: string;
  /** The work queues' visibility time-out in seconds: how long a retried record waits. */
  visibilityTimeoutSeconds: number;
  /** The functions' tunables beyond the deployed environment. */
  tuning?: Tuning;
  /** Context values over cdk.json's besides the provider's address and the revision field (the story's refresh interval). */
  context?: ContextOverrides;
  output: Writer | undefined;
  quiet: boolean | undefined;
  /** Starts the provider (the simulator) or names it (a real one). */
  provider(): Promise<ProviderSide>;
  /** The client API's port (default a free one) and what it reports of each answer. */
  api?: LocalApiOptions;
}

/** A local story: the run, the lines that open it and its steps. */
export interface StoryPlan extends RunPlan {
  /** The lines that open the run, once the local system is up. */
  header(run: LocalRun): void;
  /** The story's own steps. Problems go to `run.problems`. */
  play(run: LocalRun): Promise<void>;
}

/** The run's own clients (the operator CLI's and the checks': the tables, sending ids, the objects). */
export interface RunClients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  s3: S3Client;
  /** The local KMS model's client: tokens are sealed under its key (system.aws.tokensKeyArn). */
  kms: KMSClient;
}

export interface LocalRun {
  dataDir: string;
  logFile: string;
  snapshotFile: string;
  screen: Screen;
  problems: string[];
  system: LocalSystem;
  clients: RunClients;
  /** The queues' messages, as the emulator holds them. */
  sqsModel: SqsModel;
  handlers: Handlers;
  /** Failures of a sync invocation as a whole (it threw instead of answering). */
  invocationErrors: string[];
  /** The client API on 127.0.0.1 (client-api.ts). */
  api: LocalApi;
  /** The change-events function on both tables' streams, and what it put on the bus (change-events.ts). */
  changeEvents: LocalChangeEvents;
  /** How many of its lifecycle events the run has printed. */
  lifecycleShown: number;
}

export interface RunOutcome {
  problems: string[];
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
}

/**
 * The reconciler's target pass length locally: 0, "the next pass starts as soon as one ends"
 * (docs/reconciler.md), so a run's ticks never wait for a day to pass. A run stops ticking once its
 * pass has ended. The reconciler's FRESHNESS_HOURS only: the deployment is the default one.
 */
export const LOCAL_FRESHNESS_HOURS = 0;

/**
 * The client API's safety wait before an erase, locally: 2 s instead of the deployed 150 (the
 * sync's time-out and the token cache): the local run erases once its sync is idle.
 */
export const LOCAL_ERASE_SETTLE_SECONDS = 2;

/**
 * The account lifecycle events the change-events function put since the last ones printed, once
 * both streams are read through (every write so far has reached the function), printed in order.
 */
export async function showLifecycle(run: LocalRun): Promise<void> {
  await run.changeEvents.readThrough();
  const events = run.changeEvents.lifecycle();
  for (const event of events.slice(run.lifecycleShown)) run.screen.line(`   event ${describeLifecycleEvent(event)}`);
  run.lifecycleShown = events.length;
}

/** Puts a connection's credentials through the client API (the token shown as its variable); throws unless 200. */
export async function putConnection(run: LocalRun, connection: string, clientId: string, refreshToken: string): Promise<void> {
  const answer = await callApi(run.api, run.screen, {
    method: 'PUT',
    path: `connections/${encodeURIComponent(connection)}`,
    body: { clientId, refreshToken },
    shownBody: `{"clientId": "${clientId}", "refreshToken": "$REFRESH_TOKEN"}`,
  });
  if (answer.status !== 200) throw new Error(`PUT /connections/${connection} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  run.screen.line(`     200: ${connection} ${String(answer.body['status'])}`);
  await showLifecycle(run);
}

export function runStory(plan: StoryPlan): Promise<RunOutcome> {
  return withLocalRun(plan, async (run) => {
    plan.header(run);
    await plan.play(run);
  });
}

/**
 * Builds the local run of `plan` and hands it to `use` once everything is up; stops everything it
 * started once `use` has returned or thrown (a problem of the run, as is a failure to start).
 */
export async function withLocalRun(plan: RunPlan, use: (run: LocalRun) => Promise<void>): Promise<RunOutcome> {
  mkdirSync(plan.dataDir, { recursive: true });
  const logFile = join(plan.dataDir, 'handlers.log');
  const snapshotFile = join(plan.dataDir, 'items.json');
  const log = openLog(logFile);
  const screen = screenFor(plan.quiet ? undefined : (plan.output ?? terminal));
  const problems: string[] = [];
  let provider: ProviderSide | undefined;
  let system: LocalSystem | undefined;
  let api: LocalApi | undefined;
  let changeEvents: LocalChangeEvents | undefined;
  let dynamodbStorage: 'disk' | 'memory' = 'memory';
  try {
    provider = await plan.provider();
    system = await startLocalSystem(plan, provider);
    dynamodbStorage = system.storage.dynamodbStorage;
    const observability = (service: string) => streamObservability(service, log.stream);
    const handlers: Handlers = {
      refresher: system.refresher(observability(REFRESHER_SERVICE)),
      sync: system.syncContainer(observability(SYNC_SERVICE)),
      sweep: system.syncContainer(observability(SYNC_SERVICE)),
      reconciler: system.reconciler(observability(RECONCILER_SERVICE)),
      api: system.api({ logger: observability(API_SERVICE).logger }),
      eraser: system.eraser({ logger: observability(ERASER_SERVICE).logger }),
    };
    // Before anything is written: its event sources read every write of the run.
    changeEvents = await startChangeEvents(system, observability, plan.fresh);
    api = await startLocalApi(handlers.api.handler, plan.api);
    const clients = runClients(system);
    const run: LocalRun = {
      dataDir: plan.dataDir,
      logFile,
      snapshotFile,
      screen,
      problems,
      system,
      clients,
      sqsModel: system.aws.sqs,
      handlers,
      invocationErrors: [],
      api,
      changeEvents,
      lifecycleShown: 0,
    };
    await use(run);
  } catch (error) {
    screen.progress.clear();
    problems.push(describe(error));
    screen.line(`FAILED: ${problems[problems.length - 1]}`);
    screen.line(`Handler logs: ${display(logFile)}`);
  } finally {
    await api?.close().catch(() => undefined);
    await changeEvents?.stop().catch(() => undefined);
    await system?.close().catch(() => undefined);
    await provider?.close().catch(() => undefined);
    log.close();
  }
  return { problems, logFile, snapshotFile, dynamodbStorage };
}

/**
 * The local KMS key's material, kept (owner-only) beside the tables on disk: the tokens sealed in
 * one run open in the next. Made on the first run, or after the data folder was cleared.
 */
function localTokensKey(dataDir: string): KeyMaterial {
  const file = join(dataDir, 'kms-key.json');
  if (existsSync(file)) {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { id: string; rootKey: string };
    return { id: saved.id, rootKey: Buffer.from(saved.rootKey, 'base64') };
  }
  const material = { id: randomUUID(), rootKey: randomBytes(32) };
  writeFileSync(file, JSON.stringify({ id: material.id, rootKey: material.rootKey.toString('base64') }), { mode: 0o600 });
  return material;
}

/** The local system: DynamoDB Local (on disk unless `inMemory`) and s3rver under the data folder, the HTTP emulator, the deployment of cdk.json for this provider. */
async function startLocalSystem(plan: RunPlan, provider: ProviderSide): Promise<LocalSystem> {
  const storage = await startStorage(LOCAL_NAMES, {
    ...(plan.inMemory ? {} : { dynamodbPath: join(plan.dataDir, 'dynamodb'), s3Path: join(plan.dataDir, 's3') }),
    fresh: plan.fresh,
    // The local run is on the wall clock: expired changes go as in AWS.
    changesTimeToLive: true,
    jit: LOCAL_RUN_JIT,
  });
  try {
    const aws = await emulatorAws(plan.inMemory ? {} : { tokensKey: localTokensKey(plan.dataDir) });
    const context: ContextOverrides = { ...plan.context, baseUrl: provider.baseUrl, revisionField: plan.revisionField };
    return buildSystem({
      names: LOCAL_NAMES,
      context,
      tuning: { reconcilerFreshnessHours: LOCAL_FRESHNESS_HOURS, eraseSettleSeconds: LOCAL_ERASE_SETTLE_SECONDS, ...plan.tuning },
      aws,
      storage,
      queues: { visibilityTimeoutSeconds: plan.visibilityTimeoutSeconds },
      functionNameSuffix: '-local',
    });
  } catch (error) {
    await storage.close();
    throw error;
  }
}

function runClients(system: LocalSystem): RunClients {
  return { dynamodb: system.storage.dynamo.client(), sqs: system.aws.sqsClient(), s3: system.storage.s3!.client(), kms: system.aws.kmsClient() };
}

export function describe(error: unknown): string {
  const e = error as Error;
  return `${e?.name ?? 'Error'}: ${e?.message ?? String(error)}`;
}

/**
 * One run of the token refresher (as its schedule makes them): every connection due refreshed.
 * Prints what it did; returns its report (the caller judges refusals: one may be the story's).
 */
export async function refresh(run: LocalRun): Promise<RefresherResult> {
  const { refresher } = run.handlers;
  const report = await refresher.handler({}, run.system.context(refresher));
  run.screen.line(`   ${describeRefresh(report)}`);
  return report;
}

/** A run of the token refresher in one line: `token refresher: 3 of 3 connections due, 3 refreshed (...)`. */
export function describeRefresh(report: RefresherResult): string {
  const parts = [`${report.refreshed} refreshed${report.rotated > 0 ? ` (the provider rotated ${report.rotated} refresh token${report.rotated === 1 ? '' : 's'}; the new ones were stored)` : ''}`];
  if (report.refused > 0) parts.push(`${report.refused} refused by the provider`);
  if (report.failed > 0) parts.push(`${report.failed} failed`);
  if (report.skipped > 0) parts.push(`${report.skipped} skipped`);
  const { active, paused, failing } = report.connections;
  return `token refresher: ${report.due} of ${active + paused + failing} connections due, ${parts.join(', ')}`;
}

/** The table's rows, ordered by connection, then id. */
export function writeSnapshot(file: string, rows: ReadonlyMap<string, ItemRow>): void {
  const sorted = [...rows.values()].sort((a, b) => compare(a.connection, b.connection) || compare(a.id, b.id));
  writeFileSync(file, `${JSON.stringify(sorted, null, 2)}\n`);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
