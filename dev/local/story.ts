/**
 * The local run (`npm start`), as functions the CLI (dev/local/run.ts) and the tests call. Both
 * stories run on one skeleton (runStory): the local AWS side (dev/local/stack.ts), the deployed
 * handlers built from config objects the config module's loaders validate, the two secrets, then
 * the story's own steps.
 *
 * - runLocalStory: no configuration at all. A provider simulator with a seeded tree of files and
 *   folders (one of them too large for a DynamoDB row), DynamoDB (dynalite), S3 (s3rver) and
 *   SQS / Secrets Manager (local emulator) on 127.0.0.1, and the deployed handlers through a whole
 *   story: refresh the token, sync every id, change items at the provider (new revisions, one
 *   large item shrinking back into its row and one growing past the row limit, deletions, a new
 *   item), refresh again, sync again; then change the provider again (new revisions, a deletion, a
 *   deleted item restored) without sending any id, and let the reconciler's ticks send every id
 *   the table knows to the reconcile queue, which the sync drains as its second event source;
 *   then check that the table equals the provider, by the sync's own reading of an item (from the
 *   items bucket for a row that points there), and that the bucket holds exactly the objects rows
 *   point to.
 * - runAgainstProvider: the same local AWS side against a real provider (PROVIDER_BASE_URL), for
 *   the ids given, so a user can try their credentials before deploying.
 *
 * The handlers' JSON logs and metrics go to a log file (their logger and metrics write there), not
 * the screen. Nothing printed holds a token: the run never reads the access token, and the
 * credentials are only handed to the secret.
 */
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Writable } from 'node:stream';
import { isDeepStrictEqual } from 'node:util';
import { CreateSecretCommand, GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { createSyncHandler, type SyncHandler } from '../../functions/item-sync/app.js';
import { createReconcilerHandler, type ReconcilerHandler } from '../../functions/reconciler/app.js';
import type { TickReport } from '../../functions/reconciler/tick.js';
import { validateItem, type ValidItem } from '../../functions/item-sync/item.js';
import type { SyncCounts } from '../../functions/item-sync/sync.js';
import { ENV, loadReconcilerConfig, loadRefresherConfig, loadSyncConfig, type Env } from '../../functions/shared/config.js';
import { DynamoDbPaceStore } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { parseJson } from '../../functions/shared/json.js';
import { RECONCILER_SERVICE, REFRESHER_SERVICE, SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import { createLogger, createMetrics } from '../../functions/shared/observability.js';
import type { Credentials } from '../../functions/shared/ports.js';
import { createRefresherHandler } from '../../functions/token-refresher/app.js';
import { ITEM_OBJECT_PREFIX } from '../../functions/item-sync/item-writer.js';
import { enqueueIds, scanTableIds } from '../../tools/enqueue/enqueue.js';
import { createProgress, formatDuration, type Progress } from '../../tools/enqueue/progress.js';
import { diffTables, readTable, type ItemRow } from '../fakes/items-table.js';
import { itemObjectOf, listObjects, readItemObject, type ItemObjectRead } from '../fakes/s3.js';
import { createContext, drainQueue, type DrainProgress, type DrainResult } from '../fakes/lambda.js';
import { generateItemTree, mulberry32 } from '../simulator/item-tree.js';
import { ProviderSimulator, type SimulatorItem } from '../simulator/provider-simulator.js';
import { startLocalStack, type LocalStack } from './stack.js';

// ---- output -------------------------------------------------------------------------------------

export interface Writer {
  write(text: string): void;
  isTTY?: boolean;
  columns?: number;
}

interface Screen {
  line(text?: string): void;
  progress: Progress;
}

const terminal: Writer = {
  write: (text) => void process.stdout.write(text),
  get isTTY() {
    return process.stdout.isTTY === true;
  },
  get columns() {
    return process.stdout.columns;
  },
};

function screenFor(writer: Writer | undefined): Screen {
  if (!writer) return { line() {}, progress: createProgress({ write: () => true } as unknown as NodeJS.WritableStream, { silent: true }) };
  const stream = {
    write: (text: string) => {
      writer.write(text);
      return true;
    },
    isTTY: writer.isTTY,
    get columns() {
      return writer.columns;
    },
  } as unknown as NodeJS.WritableStream & { isTTY?: boolean };
  return { line: (text = '') => writer.write(`${text}\n`), progress: createProgress(stream) };
}

function display(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

/** The log file the handlers write to (JSON lines, as in CloudWatch), emptied first. Writes are synchronous. */
function openLog(file: string): { stream: Writable; close(): void } {
  const fd = openSync(file, 'w');
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      try {
        writeSync(fd, chunk);
        done();
      } catch (error) {
        done(error as Error);
      }
    },
  });
  return { stream, close: () => closeSync(fd) };
}

// ---- the skeleton both stories share ------------------------------------------------------------

interface Handlers {
  refresher: ReturnType<typeof createRefresherHandler>;
  sync: SyncHandler;
  reconciler: ReconcilerHandler;
}

/** The provider a run talks to, the credentials it puts in the credentials secret, and how to stop it. */
interface ProviderSide {
  baseUrl: string;
  credentials: Credentials;
  close(): Promise<void>;
}

interface StoryPlan {
  dataDir: string;
  inMemory: boolean | undefined;
  /** Starts with an empty table (the table is kept between runs otherwise). */
  fresh: boolean;
  revisionField: string;
  visibilityTimeoutSeconds: number;
  /** Tunables of the functions beyond the environment the stack gives them. */
  tunables?: Env;
  output: Writer | undefined;
  quiet: boolean | undefined;
  /** Starts the provider (the simulator) or names it (a real one). */
  provider(): Promise<ProviderSide>;
  /** The lines that open the run, once the local AWS side is up. */
  header(run: LocalRun): void;
  /** The story's own steps, once the secrets exist. Problems go to `run.problems`. */
  play(run: LocalRun): Promise<void>;
}

interface LocalRun {
  dataDir: string;
  logFile: string;
  snapshotFile: string;
  screen: Screen;
  problems: string[];
  stack: LocalStack;
  handlers: Handlers;
  /** Failures of a sync invocation as a whole (it threw instead of answering). */
  invocationErrors: string[];
}

interface RunOutcome {
  problems: string[];
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
}

/**
 * The skeleton of both stories: files under `dataDir`, the provider, the local AWS side, the
 * handlers, the secrets, then `plan.play`. Whatever throws ends the run as one problem; everything
 * started is stopped.
 */
async function runStory(plan: StoryPlan): Promise<RunOutcome> {
  mkdirSync(plan.dataDir, { recursive: true });
  const logFile = join(plan.dataDir, 'handlers.log');
  const snapshotFile = join(plan.dataDir, 'items.json');
  const log = openLog(logFile);
  const screen = screenFor(plan.quiet ? undefined : (plan.output ?? terminal));
  const problems: string[] = [];
  let provider: ProviderSide | undefined;
  let stack: LocalStack | undefined;
  try {
    provider = await plan.provider();
    stack = await startLocalStack({
      ...(plan.inMemory ? {} : { dynamodbPath: join(plan.dataDir, 'dynamodb'), s3Path: join(plan.dataDir, 's3') }),
      fresh: plan.fresh,
      providerBaseUrl: provider.baseUrl,
      revisionField: plan.revisionField,
      visibilityTimeoutSeconds: plan.visibilityTimeoutSeconds,
    });
    const handlers = buildHandlers(stack, log.stream, plan.tunables ?? {});
    const run: LocalRun = { dataDir: plan.dataDir, logFile, snapshotFile, screen, problems, stack, handlers, invocationErrors: [] };
    plan.header(run);
    await createSecret(stack, stack.credentialsSecretId, provider.credentials);
    await createSecret(stack, stack.accessTokenSecretId);
    await plan.play(run);
  } catch (error) {
    screen.progress.clear();
    problems.push(describe(error));
    screen.line(`FAILED: ${problems[problems.length - 1]}`);
    screen.line(`Handler logs: ${display(logFile)}`);
  } finally {
    await stack?.close().catch(() => undefined);
    await provider?.close().catch(() => undefined);
    log.close();
  }
  return { problems, logFile, snapshotFile, dynamodbStorage: stack?.dynamodbStorage ?? 'memory' };
}

/**
 * The deployed handlers, built as handler.ts builds them but from the local environment object
 * (validated by the same loaders) and with their logs and metrics written to `log`.
 */
function buildHandlers(stack: LocalStack, log: Writable, tunables: Env): Handlers {
  const env: Env = { ...stack.env, ...tunables };
  /** The function's logger and metrics, both written to `log`. */
  const observability = (service: string) => ({ logger: createLogger(service, { output: log }), metrics: createMetrics(service, { output: log }) });
  const refresher = createRefresherHandler({ config: loadRefresherConfig(env), secrets: stack.secrets, ...observability(REFRESHER_SERVICE) });
  const sync = createSyncHandler({
    config: loadSyncConfig(env),
    dynamodb: stack.dynamodb,
    sqs: stack.sqs,
    secrets: stack.secrets,
    s3: stack.s3,
    ...observability(SYNC_SERVICE),
  });
  const reconciler = createReconcilerHandler({ config: loadReconcilerConfig(env), dynamodb: stack.dynamodb, sqs: stack.sqs, ...observability(RECONCILER_SERVICE) });
  return { refresher, sync, reconciler };
}

async function createSecret(stack: LocalStack, name: string, value?: Credentials): Promise<void> {
  await stack.secrets.send(new CreateSecretCommand({ Name: name, ...(value ? { SecretString: JSON.stringify(value) } : {}) }));
}

function describe(error: unknown): string {
  const e = error as Error;
  return `${e?.name ?? 'Error'}: ${e?.message ?? String(error)}`;
}

async function refresh(run: LocalRun, label: string): Promise<{ rotated: boolean }> {
  const result = await run.handlers.refresher({}, createContext('content-sync-token-refresher-local', run.stack.region, 30_000));
  if (result.status !== 'refreshed') throw new Error(`${label}: the token refresher skipped: ${result.reason}`);
  run.screen.line(
    `   access token refreshed at ${result.refreshedAt}${result.rotated ? '; the provider rotated the refresh token and the new one was stored' : ''}`,
  );
  return { rotated: result.rotated };
}

function writeSnapshot(file: string, rows: ReadonlyMap<string, ItemRow>): void {
  const sorted = [...rows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  writeFileSync(file, `${JSON.stringify(sorted, null, 2)}\n`);
}

// ---- passes -------------------------------------------------------------------------------------

/** The sync's own counters of what became of each record, here derived from what landed in the table and the queues. */
type PassCounts = Pick<SyncCounts, 'created' | 'updated' | 'unchanged' | 'deleted' | 'retried' | 'deadLettered'>;

export interface PassSummary extends PassCounts {
  name: string;
  /** Distinct ids sent to the queue. */
  ids: number;
  invocations: number;
  elapsedMs: number;
  /** False when the queue was not empty when the time limit came. */
  drained: boolean;
  /** Messages still in the queue at the end (0 when drained). */
  remaining: number;
}

interface PassLimits {
  timeLimitMs: number;
  concurrency: number;
}

/** The dead-letter queues: the sync's (ids that can never succeed, with their reason) and the reconcile queue's (its redrive policy). */
function deadLetterQueues(stack: LocalStack): string[] {
  return [stack.deadLetterQueueUrl, stack.reconcileDeadLetterQueueUrl];
}

function deadLetterCount(stack: LocalStack): number {
  return deadLetterQueues(stack).reduce((sum, url) => sum + stack.emulator.sqs.counts(url).total, 0);
}

/** The table and the dead-letter queues before a pass, to count what the pass did. */
interface PassStart {
  started: number;
  before: ReadonlyMap<string, ItemRow>;
  deadBefore: number;
}

async function startPass(stack: LocalStack): Promise<PassStart> {
  return { started: Date.now(), before: await readTable(stack.dynamodb, stack.tableName), deadBefore: deadLetterCount(stack) };
}

/** What a drained pass of `total` distinct ids did, from what landed in the table and the dead-letter queues. */
async function countPass(run: LocalRun, name: string, start: PassStart, total: number, drain: DrainResult): Promise<PassSummary> {
  const { stack } = run;
  const changes = diffTables(start.before, await readTable(stack.dynamodb, stack.tableName));
  const deadLettered = deadLetterCount(stack) - start.deadBefore;
  const changed = changes.created.length + changes.updated.length + changes.deleted.length;
  return {
    name,
    ids: total,
    created: changes.created.length,
    updated: changes.updated.length,
    deleted: changes.deleted.length,
    unchanged: Math.max(0, total - changed - deadLettered - drain.remaining),
    retried: drain.retried,
    deadLettered,
    invocations: drain.invocations,
    elapsedMs: Date.now() - start.started,
    drained: drain.drained,
    remaining: drain.remaining,
  };
}

/** Enqueues the ids with the enqueue tool's functions, drains the queue through the sync handler, counts. */
async function syncPass(run: LocalRun, name: string, ids: readonly string[], limits: PassLimits): Promise<PassSummary> {
  const { stack, screen } = run;
  const start = await startPass(stack);
  const { started, deadBefore } = start;

  const sent = await enqueueIds(stack.sqs, stack.queueUrl, ids, {
    onProgress: (p) => screen.progress.update(`${name}: enqueuing ${p.sent}/${p.total}`),
  });
  if (sent.failed.length > 0) {
    throw new Error(`${name}: ${sent.failed.length} ids could not be enqueued (${sent.failed[0]!.code}: ${sent.failed[0]!.message})`);
  }
  const total = sent.sent.length;
  const queue = { url: stack.queueUrl, arn: stack.queueArn };
  const drain = await drainThroughSync(run, queue, limits, deadBefore, (p, dead) =>
    `${name}: ${p.done}/${total} synced · ${p.retried} retried · ${dead} dead-lettered · ${p.invocations} invocations · ${formatDuration(Date.now() - started)}`,
  );
  screen.progress.clear();
  return countPass(run, name, start, total, drain);
}

/**
 * Drains a queue through the sync handler, as its event source does: invocation errors kept in the
 * run, the progress line `progress` writes (given the drain's progress and the ids dead-lettered
 * since `deadBefore`) on the screen.
 */
function drainThroughSync(
  run: LocalRun,
  queue: { url: string; arn: string },
  limits: PassLimits,
  deadBefore: number,
  progress: (p: DrainProgress, dead: number) => string,
): Promise<DrainResult> {
  const { stack, screen } = run;
  return drainQueue({
    sqs: stack.sqs,
    queueUrl: queue.url,
    queueArn: queue.arn,
    region: stack.region,
    handler: run.handlers.sync,
    concurrency: limits.concurrency,
    timeLimitMs: limits.timeLimitMs,
    onInvocationError: (error) => run.invocationErrors.push(describe(error)),
    onProgress: (p) => screen.progress.update(progress(p, deadLetterCount(stack) - deadBefore)),
  });
}

// ---- reconciliation -----------------------------------------------------------------------------

/** The pass table's row for the reconciler's pass. */
export const RECONCILIATION = 'reconciliation';

/** The reconciler's side of a pass. */
export interface ReconcilerRun {
  /** The pass number (1 on a fresh table). */
  pass: number;
  /** Ticks (invocations, as the schedule would make them) until one ended the pass. */
  ticks: number;
  /** Ids the ticks sent to the reconcile queue: every id the table knows, tombstones included. */
  idsSent: number;
  /** The pass's length by its cursor: from its start to the tick that sent its last page, seconds. */
  passSeconds: number;
  /** Tombstones the sweep brought back (counted among the updated rows too). */
  restored: number;
  /** From the first tick until the sync had checked the last id, ms. */
  elapsedMs: number;
}

const RECONCILER_FUNCTION = 'content-sync-reconciler-local';
/** Ticks a pass may take before the run gives up on it (each sends up to the high-water mark). */
const MAX_TICKS = 100;

/**
 * One reconciliation pass, as deployed but with the schedule's ticks back to back: the reconciler
 * handler (its config from the stack's environment, FRESHNESS_HOURS 0) is invoked until a tick
 * ends the pass, while the reconcile queue is drained through the sync handler, its second event
 * source (the records carry `reconcilePass`, so the sync takes them as the sweep). Nothing is
 * enqueued by hand. Counted as syncPass counts.
 */
async function reconciliationPass(run: LocalRun, name: string, limits: PassLimits): Promise<{ pass: PassSummary; reconciler: ReconcilerRun }> {
  const { stack } = run;
  const start = await startPass(stack);
  const ticks = await startTicks(run, name);
  const drain = await drainSweep(run, name, start, limits, ticks);
  const ended = await ticks.ended;
  if ('error' in ended) throw ended.error;

  const pass = await countPass(run, name, start, ticks.idsSent(), drain);
  const after = await readTable(stack.dynamodb, stack.tableName);
  const restored = [...after.values()].filter((row) => !row.deleted && start.before.get(row.id)?.deleted === true).length;
  return {
    pass,
    reconciler: {
      pass: ended.report.pass,
      ticks: ticks.reports.length,
      idsSent: ticks.idsSent(),
      passSeconds: ended.report.passLengthSeconds ?? ended.report.passAgeSeconds,
      restored,
      elapsedMs: pass.elapsedMs,
    },
  };
}

/** The reconciler's ticks of one pass, back to back. */
interface PassTicks {
  /** Every tick's report so far. */
  reports: TickReport[];
  /** Ids the ticks sent to the reconcile queue so far. */
  idsSent(): number;
  /** Whether ticks may still send. */
  sending(): boolean;
  /** The tick that ended the pass, or why none did. */
  ended: Promise<{ report: TickReport } | { error: unknown }>;
}

/**
 * The first tick, before the event source, so that it finds the queue filled; further ticks (a
 * table larger than the high-water mark) then run until one ends the pass, while the sync drains,
 * as the schedule's would.
 */
async function startTicks(run: LocalRun, name: string): Promise<PassTicks> {
  const reports: TickReport[] = [];
  const tick = async (): Promise<TickReport> => {
    const report = await run.handlers.reconciler({ trigger: 'schedule', worker: 0, workers: 1 }, createContext(RECONCILER_FUNCTION, run.stack.region, 60_000));
    reports.push(report);
    return report;
  };
  const untilEnded = async (last: TickReport): Promise<TickReport> => {
    for (let report = last; ; report = await tick()) {
      if (report.state === 'ended') return report;
      if (report.state === 'waiting') throw new Error(`${name}: the reconciler is waiting for the next pass instead of running one (FRESHNESS_HOURS is not 0?)`);
      if (reports.length >= MAX_TICKS) throw new Error(`${name}: the pass did not end in ${MAX_TICKS} ticks`);
    }
  };

  const first = await tick();
  let ticking = first.state === 'running' || first.state === 'lost';
  const ended = untilEnded(first).then(
    (report) => {
      ticking = false;
      return { report };
    },
    (error: unknown) => {
      ticking = false;
      return { error };
    },
  );
  return { reports, idsSent: () => reports.reduce((sum, report) => sum + report.enqueued, 0), sending: () => ticking, ended };
}

/**
 * Drains the reconcile queue through the sync handler (its second event source) until the ticks
 * have stopped sending and it is empty, or the pass's time limit: the rounds' sums. The event
 * source ends a round when the queue is empty; while ticks may still send, another round follows.
 */
async function drainSweep(run: LocalRun, name: string, start: PassStart, limits: PassLimits, ticks: PassTicks): Promise<DrainResult> {
  const { stack } = run;
  const queue = { url: stack.reconcileQueueUrl, arn: stack.reconcileQueueArn };
  const deadline = start.started + limits.timeLimitMs;
  const total: DrainResult = { done: 0, retried: 0, invocations: 0, failedInvocations: 0, remaining: 0, drained: false, elapsedMs: 0 };
  for (;;) {
    const before = { ...total };
    const sendsMore = ticks.sending();
    const round = await drainThroughSync(run, queue, { concurrency: limits.concurrency, timeLimitMs: Math.max(1, deadline - Date.now()) }, start.deadBefore, (p, dead) =>
      `${name}: ${ticks.reports.length} tick${ticks.reports.length === 1 ? '' : 's'}, ${ticks.idsSent()} ids sent · ${before.done + p.done} synced · ${before.retried + p.retried} retried · ${dead} dead-lettered · ${before.invocations + p.invocations} invocations · ${formatDuration(Date.now() - start.started)}`,
    );
    Object.assign(total, {
      done: before.done + round.done,
      retried: before.retried + round.retried,
      invocations: before.invocations + round.invocations,
      failedInvocations: before.failedInvocations + round.failedInvocations,
      remaining: round.remaining,
      drained: round.drained,
    });
    if ((!sendsMore && round.drained) || Date.now() >= deadline) break;
  }
  run.screen.progress.clear();
  return total;
}

/** The reconciler's pass in one line. */
function reconcilerLine(run: ReconcilerRun): string {
  return `Reconciler: pass ${run.pass}, ${run.idsSent} ids sent in ${run.ticks} tick${run.ticks === 1 ? '' : 's'} (the pass took ${run.passSeconds.toFixed(1)} s); the sync checked them all in ${formatDuration(run.elapsedMs)}, ${run.restored} deleted item${run.restored === 1 ? '' : 's'} restored`;
}

const COLUMNS: Array<[keyof PassCounts | 'ids', string]> = [
  ['ids', 'ids'],
  ['created', 'created'],
  ['updated', 'updated'],
  ['unchanged', 'unchanged'],
  ['deleted', 'deleted'],
  ['retried', 'retried'],
  ['deadLettered', 'dead-lettered'],
];

function formatPassTable(passes: readonly PassSummary[]): string[] {
  const nameWidth = Math.max(4, ...passes.map((p) => p.name.length));
  const header = ['pass'.padEnd(nameWidth), ...COLUMNS.map(([, title]) => title.padStart(Math.max(7, title.length))), '     time'].join('  ');
  const rows = passes.map((p) =>
    [
      p.name.padEnd(nameWidth),
      ...COLUMNS.map(([key, title]) => String(p[key]).padStart(Math.max(7, title.length))),
      formatDuration(p.elapsedMs).padStart(9),
    ].join('  '),
  );
  return [header, ...rows];
}

function printPass(screen: Screen, pass: PassSummary): void {
  const parts = [
    `${pass.created} created`,
    `${pass.updated} updated`,
    `${pass.unchanged} unchanged`,
    `${pass.deleted} deleted`,
    `${pass.retried} retried`,
    `${pass.deadLettered} dead-lettered`,
  ];
  screen.line(`   ${pass.ids} ids: ${parts.join(', ')}; ${pass.invocations} invocations, ${formatDuration(pass.elapsedMs)}`);
  if (!pass.drained) screen.line(`   ! the queue still held ${pass.remaining} messages when the time limit came`);
}

/** Dead-lettered messages with the reason the sync gave (the `error` attribute), for the screen. */
function deadLetterReasons(stack: LocalStack, limit = 10): string[] {
  return deadLetterQueues(stack)
    .flatMap((url) => stack.emulator.sqs.peek(url))
    .slice(0, limit)
    .map((m) => {
      const reason = m.messageAttributes.error?.StringValue ?? `received ${m.receiveCount} times without success (moved by the redrive policy)`;
      return `${m.body.length > 200 ? `${m.body.slice(0, 200)}…` : m.body}: ${reason}`;
    });
}

// ---- the table against the provider -------------------------------------------------------------

/**
 * A provider item as the sync reads it: the JSON text the simulator serves for it (JSON.stringify of
 * the item), through the provider client's parse (numbers kept exact) and the sync's validation
 * (revision text at the dot path). A string says why the sync would refuse it.
 */
function asTheSyncReadsIt(item: SimulatorItem, revisionField: string): ValidItem | string {
  try {
    return validateItem(parseJson(JSON.stringify(item)), item.id, revisionField);
  } catch (error) {
    return (error as Error).message;
  }
}

/** The object of every row that points to the items bucket, read back and checked against its pointer. */
async function readObjects(stack: LocalStack, rows: ReadonlyMap<string, ItemRow>): Promise<Map<string, ItemObjectRead>> {
  const reads = new Map<string, ItemObjectRead>();
  for (const [id, row] of rows) {
    if (row.itemObject === undefined) continue;
    const pointer = itemObjectOf(row);
    reads.set(id, pointer ? await readItemObject(stack.s3, stack.bucketName, pointer) : { kind: 'mismatch', why: 'itemObject is not {key, size, sha256}' });
  }
  return reads;
}

/** The item a row holds: inline, or read from the items bucket; or why it cannot be compared. */
function storedItem(id: string, row: ItemRow, read: ItemObjectRead | undefined): { item: unknown } | { problem: string } {
  if (row.itemObject === undefined) return { item: row.item };
  if (row.item !== undefined) return { problem: `${id}: the row holds both item and itemObject` };
  switch (read?.kind) {
    case 'found':
      return { item: read.item };
    case 'missing':
      return { problem: `${id}: its row points to an object that is not in the items bucket` };
    case 'mismatch':
      return { problem: `${id}: its object in the items bucket is not what the row says (${read.why})` };
    case 'unreadable':
      return { problem: `${id}: its object in the items bucket could not be read (${read.error}); not compared` };
    default:
      return { problem: `${id}: its object was not read` };
  }
}

/** Objects in the items bucket no row points to (or that the bucket could not be listed: then it says so). */
async function checkBucket(stack: LocalStack, rows: ReadonlyMap<string, ItemRow>): Promise<string[]> {
  let keys: Map<string, number>;
  try {
    keys = await listObjects(stack.s3, stack.bucketName, ITEM_OBJECT_PREFIX);
  } catch (error) {
    return [`the items bucket could not be listed (${describe(error)}): objects no row points to were not looked for`];
  }
  const referenced = new Set([...rows.values()].map((row) => itemObjectOf(row)?.key).filter((key) => key !== undefined));
  return [...keys.keys()].filter((key) => !referenced.has(key)).map((key) => `${key}: in the items bucket, but no row points to it`);
}

/** Differences between the table and what the provider holds (empty when they agree). */
function compareWithProvider(
  rows: ReadonlyMap<string, ItemRow>,
  objects: ReadonlyMap<string, ItemObjectRead>,
  providerItems: readonly SimulatorItem[],
  deletedIds: readonly string[],
  revisionField: string,
): string[] {
  const problems: string[] = [];
  const expected = new Set<string>();
  for (const item of providerItems) {
    expected.add(item.id);
    const row = rows.get(item.id);
    const read = asTheSyncReadsIt(item, revisionField);
    if (!row) problems.push(`${item.id}: not in the table`);
    else if (row.deleted) problems.push(`${item.id}: marked deleted, but the provider has it`);
    else if (typeof read === 'string') problems.push(`${item.id}: in the table, but the sync refuses the provider's item: ${read}`);
    else if (row.revision !== read.revision) problems.push(`${item.id}: revision ${row.revision ?? '(none)'} in the table, ${read.revision} at the provider`);
    else if (row.type !== read.type) problems.push(`${item.id}: type ${String(row.type)} in the table, ${read.type} at the provider`);
    else {
      const stored = storedItem(item.id, row, objects.get(item.id));
      if ('problem' in stored) problems.push(stored.problem);
      else if (!isDeepStrictEqual(stored.item, read.item)) problems.push(`${item.id}: the stored item differs from the provider's`);
    }
  }
  for (const id of deletedIds) {
    expected.add(id);
    const row = rows.get(id);
    if (!row) problems.push(`${id}: deleted at the provider, but its row is gone`);
    else if (row.deleted !== true) problems.push(`${id}: deleted at the provider, not marked deleted in the table`);
  }
  for (const id of rows.keys()) if (!expected.has(id)) problems.push(`${id}: in the table, unknown to the provider`);
  return problems;
}

// ---- the story ----------------------------------------------------------------------------------

export interface LocalStoryOptions {
  /** Items in the simulated provider; default 300. */
  itemCount?: number;
  seed?: number;
  /** Dot path of the revision inside an item; default 'revision'. */
  revisionField?: string;
  /** Where the run keeps its files (dynalite data, logs, snapshot); default `.local/demo`. */
  dataDir?: string;
  /** Keeps dynalite in memory instead of `dataDir/dynamodb`. */
  inMemory?: boolean;
  /** Where the run prints; default the terminal. `quiet` prints nothing. */
  output?: Writer;
  quiet?: boolean;
  /** Per sync pass; default 120 s, or 20 ms an item when that is longer. */
  timeLimitMs?: number;
  /** Called once the simulator is up, before anything runs (tests add faults, collect tokens). */
  onSimulatorStarted?: (simulator: ProviderSimulator) => void;
}

export interface StoryResult {
  ok: boolean;
  /** What went wrong, one sentence each (empty when ok). */
  problems: string[];
  passes: PassSummary[];
  dataDir: string;
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
  /** Items at the provider at the end, and rows in the table. */
  providerItems: number;
  tableRows: number;
  /** What the provider saw of each pass: requests, 429s, time. */
  providerLoad: ProviderLoad[];
  /** The reconciler's pass (step 5); absent when the story stopped before it. */
  reconciler?: ReconcilerRun;
}

export const DEFAULT_ITEM_COUNT = 300;
export const DEFAULT_SEED = 20_261_121;

interface StorySettings {
  itemCount: number;
  seed: number;
  revisionField: string;
  limits: PassLimits;
}

/** What the story found, filled in as it goes (a failed step leaves the rest as it was). */
interface StoryFindings {
  /** The reconciler's pass (step 5), once it ran. */
  reconciler?: ReconcilerRun;
  passes: PassSummary[];
  providerItems: number;
  tableRows: number;
  /** What the provider saw in each pass (the simulator's own record). */
  providerLoad: ProviderLoad[];
}

/** The provider's side of a pass: item requests, how many it refused with 429, how fast they came. */
export interface ProviderLoad {
  name: string;
  requests: number;
  rateLimited: number;
  seconds: number;
}

/**
 * The simulator's rate limit: a token bucket of this many requests a second (429 with Retry-After: 1
 * beyond it). The run is not told: the shared pace has to find it, as it would a real provider's.
 */
export const LOCAL_PROVIDER_LIMIT = 40;
/** The bucket's size: how many requests beyond the rate a quiet spell lets through at once. */
const LOCAL_PROVIDER_BURST = 10;

export async function runLocalStory(options: LocalStoryOptions = {}): Promise<StoryResult> {
  const itemCount = Math.max(10, Math.floor(options.itemCount ?? DEFAULT_ITEM_COUNT));
  const seed = options.seed ?? DEFAULT_SEED;
  const revisionField = options.revisionField ?? 'revision';
  const dataDir = options.dataDir ?? join(process.cwd(), '.local', 'demo');
  const settings: StorySettings = {
    itemCount,
    seed,
    revisionField,
    limits: { timeLimitMs: options.timeLimitMs ?? Math.max(120_000, itemCount * 20), concurrency: 5 },
  };
  const findings: StoryFindings = { passes: [], providerItems: 0, tableRows: 0, providerLoad: [] };
  let simulator: ProviderSimulator | undefined;

  const outcome = await runStory({
    dataDir,
    inMemory: options.inMemory,
    fresh: true,
    revisionField,
    // Longer than an invocation may wait for the pace (the function's 60 s), as deployed: no copy is delivered twice.
    visibilityTimeoutSeconds: 60,
    // The story shows one 429 with Retry-After: 1; the deployed minute-long floor would stall it.
    tunables: { [ENV.rateLimitMinDelaySeconds]: '1' },
    output: options.output,
    quiet: options.quiet,
    provider: async () => {
      simulator = await startSimulator(settings);
      options.onSimulatorStarted?.(simulator);
      return simulatorSide(simulator);
    },
    header: (run) => printStoryHeader(run, simulator!, settings.seed),
    play: (run) => playStory(run, simulator!, settings, findings),
  });
  return { ok: outcome.problems.length === 0, ...outcome, dataDir, ...findings };
}

/** A simulated provider holding a generated tree of items, which rotates the refresh token at every refresh. */
async function startSimulator({ itemCount, seed, revisionField }: StorySettings): Promise<ProviderSimulator> {
  const items = generateItemTree({ count: itemCount, seed, revisionField });
  const large = items.find((item) => item.id === largeFileOf(items));
  if (large) large[LARGE_FIELD] = LARGE_TEXT;
  return ProviderSimulator.start({
    items,
    seed,
    revisionField,
    rotateRefreshToken: true,
    prefix: '/api/v2',
    rateLimit: { requestsPerSecond: LOCAL_PROVIDER_LIMIT, burst: LOCAL_PROVIDER_BURST, retryAfterSeconds: 1 },
  });
}

/** A field that makes an item too large for a DynamoDB row (over 400 KB): the sync stores it in the items bucket. */
const LARGE_FIELD = 'transcript';
const LARGE_TEXT = 'All work and no play makes a very long transcript. '.repeat(10_000);

/** The file that starts too large for a row: the last file of the tree. */
function largeFileOf(items: readonly SimulatorItem[]): string | undefined {
  return items.filter((item) => item.type === 'file').at(-1)?.id;
}

function simulatorSide(simulator: ProviderSimulator): ProviderSide {
  return {
    baseUrl: simulator.baseUrl,
    credentials: { clientId: simulator.clientId, refreshToken: simulator.refreshToken },
    close: () => simulator.close(),
  };
}

function printStoryHeader(run: LocalRun, simulator: ProviderSimulator, seed: number): void {
  const { screen, stack } = run;
  const items = simulator.itemIds().map((id) => simulator.getItem(id)!);
  const folders = items.filter((i) => i.type === 'folder').length;
  const storage = stack.dynamodbStorage === 'disk' ? `data in ${display(join(run.dataDir, 'dynamodb'))}` : 'in memory';
  screen.line('content-sync, local run: the deployed handlers against a simulated provider and local AWS services');
  screen.line(`   provider simulator     ${simulator.baseUrl} (${items.length} items: ${folders} folders, ${items.length - folders} files; seed ${seed})`);
  screen.line(`                          rate limit ${LOCAL_PROVIDER_LIMIT} requests/s (429 beyond it): the run is not told, the pace finds it`);
  screen.line(`   DynamoDB (dynalite)    ${stack.dynamodbEndpoint}, table ${stack.tableName}, ${storage}`);
  screen.line(`   S3 (s3rver)            ${stack.s3Endpoint}, items bucket ${stack.bucketName} (items too large for a row)`);
  screen.line(`   SQS, Secrets Manager   ${stack.emulator.endpoint} (local emulator): the sync queue, the reconcile queue, their dead-letter queues`);
  screen.line(`   reconciler             ${ENV.freshnessHours}=${stack.env[ENV.freshnessHours]} (each pass right after the last; the run ticks until its pass ends)`);
  screen.line(`   handler logs           ${display(run.logFile)} (JSON lines, as in CloudWatch)`);
  screen.line();
}

async function playStory(run: LocalRun, simulator: ProviderSimulator, settings: StorySettings, findings: StoryFindings): Promise<void> {
  const { screen, problems } = run;
  const rand = mulberry32(settings.seed ^ 0x5eed);

  // 1. The scheduled token refresh.
  screen.line('1. Refresh the access token (token refresher)');
  await refresh(run, 'refresh');

  // 2. The first sync: every id, one rate-limited answer on the way (429 with Retry-After: 1).
  const ids = simulator.itemIds();
  const limitedId = ids[1 + Math.floor(rand() * (ids.length - 1))]!;
  simulator.addFault({ endpoint: 'items', itemId: limitedId, times: 1, fault: { kind: 'status', status: 429, headers: { 'Retry-After': '1' } } });
  screen.line(`2. Sync every id (the provider answers 429 Too Many Requests, Retry-After: 1, once for ${limitedId})`);
  const first = await measured(simulator, findings, 'initial sync', () => recordPass(run, findings, 'initial sync', ids, settings.limits));
  expectCounts(problems, first, { created: ids.length, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0 });
  const largeId = largeFileOf(ids.map((id) => simulator.getItem(id)!));
  await expectInBucket(run, largeId === undefined ? [] : [largeId], 'initial sync');

  // 3. Changes at the provider: new revisions, deletions, a new item; the next scheduled refresh.
  const change = changeProvider(simulator, ids, limitedId, rand, settings.revisionField);
  screen.line(
    `3. Change the provider: ${change.bumped.length} new revisions (${change.shrunk} shrinks back into a row, ${change.grown} grows past the 400 KB row limit), ${change.deletedIds.length} deletions (${change.deletedIds.join(', ')}), 1 new item (${change.newItem.id}); refresh the token again`,
  );
  await refresh(run, 'second refresh');

  // 4. Sync again: every id the table knows (what `npm run enqueue -- --resync-table` sends) and the new one.
  const known = await scanTableIds(run.stack.dynamodb, run.stack.tableName);
  const secondIds = [...new Set([...known, change.newItem.id])];
  screen.line(`4. Sync again: the ${known.length} ids the table knows and the new one`);
  const second = await measured(simulator, findings, 'after changes', () => recordPass(run, findings, 'after changes', secondIds, settings.limits));
  expectCounts(problems, second, {
    created: 1,
    updated: change.bumped.length,
    deleted: change.deletedIds.length,
    unchanged: secondIds.length - 1 - change.bumped.length - change.deletedIds.length,
    deadLettered: 0,
  });

  await expectInBucket(run, [change.grown], 'after changes');

  // 5. The provider changes and nobody sends an id: the reconciler's pass finds the changes.
  const quiet = changeProviderQuietly(simulator, change, limitedId, rand);
  screen.line(
    `5. Change the provider again and send no id: ${quiet.bumped.length} new revisions (${quiet.bumped.join(', ')}), 1 deletion (${quiet.deletedId}), 1 deleted item restored (${quiet.restoredId}); the reconciler's ticks send every id the table knows to the reconcile queue, and the sync takes them from there`,
  );
  const rowsBefore = (await readTable(run.stack.dynamodb, run.stack.tableName)).size;
  const reconciled = await measured(simulator, findings, RECONCILIATION, () => reconciliationPass(run, RECONCILIATION, settings.limits));
  findings.passes.push(reconciled.pass);
  findings.reconciler = reconciled.reconciler;
  printPass(screen, reconciled.pass);
  screen.line(`   ${reconcilerLine(reconciled.reconciler)}`);
  expectCounts(problems, reconciled.pass, {
    created: 0,
    updated: quiet.bumped.length + 1,
    deleted: 1,
    unchanged: rowsBefore - quiet.bumped.length - 2,
    deadLettered: 0,
  });
  // Every id the table knows, tombstones included, once.
  if (reconciled.reconciler.idsSent !== rowsBefore) {
    problems.push(`${RECONCILIATION}: the reconciler sent ${reconciled.reconciler.idsSent} ids, the table holds ${rowsBefore} rows`);
  }
  if (reconciled.reconciler.restored !== 1) problems.push(`${RECONCILIATION}: expected 1 restored row, found ${reconciled.reconciler.restored}`);

  // 6. The table against the provider.
  const deletedIds = [...change.deletedIds.filter((id) => id !== quiet.restoredId), quiet.deletedId];
  await checkTable(run, simulator, deletedIds, settings.revisionField, findings);
}

/** Runs a pass and records what the provider saw of it. */
async function measured<T>(simulator: ProviderSimulator, findings: StoryFindings, name: string, pass: () => Promise<T>): Promise<T> {
  const from = simulator.requests.length;
  const started = Date.now();
  const result = await pass();
  const requests = simulator.requests.slice(from).filter((r) => r.endpoint === 'items');
  findings.providerLoad.push({
    name,
    requests: requests.length,
    rateLimited: requests.filter((r) => r.status === 429).length,
    seconds: (Date.now() - started) / 1000,
  });
  return result;
}

/** The pace the run found (the control table's row), and what the provider saw of each pass. */
async function paceLines(run: LocalRun, load: readonly ProviderLoad[]): Promise<string[]> {
  const stored = await new DynamoDbPaceStore(run.stack.dynamodb, run.stack.env[ENV.controlTableName]!).read();
  const state = stored?.state as { rate?: number; ceiling?: number } | undefined;
  const found = state?.ceiling ?? state?.rate;
  const lines = [
    `Provider pace: ${state?.rate?.toFixed(1) ?? '?'} requests/s now; ${found === undefined ? 'no 429 met yet' : `last cut at ${found.toFixed(1)}/s, where a 429 came`} (the simulator's unpublished limit: ${LOCAL_PROVIDER_LIMIT}/s, bursts of ${LOCAL_PROVIDER_BURST} let through)`,
  ];
  for (const pass of load) {
    const rate = pass.requests / Math.max(pass.seconds, 0.001);
    lines.push(`   ${pass.name}: ${pass.requests} provider requests, ${rate.toFixed(1)}/s, ${pass.rateLimited} answered 429`);
  }
  return lines;
}

async function recordPass(run: LocalRun, findings: StoryFindings, name: string, ids: readonly string[], limits: PassLimits): Promise<PassSummary> {
  const pass = await syncPass(run, name, ids, limits);
  findings.passes.push(pass);
  printPass(run.screen, pass);
  return pass;
}

function expectCounts(problems: string[], pass: PassSummary, expected: Omit<PassCounts, 'retried'>): void {
  for (const [key, value] of Object.entries(expected) as Array<[keyof PassCounts, number]>) {
    if (pass[key] !== value) problems.push(`${pass.name}: expected ${value} ${key === 'deadLettered' ? 'dead-lettered' : key}, counted ${pass[key]}`);
  }
}

/**
 * The provider changes while nobody sends an id: new revisions for about 1% of the items (two at
 * least), one more deletion, and the first item the earlier changes deleted comes back as it was.
 * Only files whose item fits in a row, and none the story already singled out.
 */
function changeProviderQuietly(
  simulator: ProviderSimulator,
  change: ReturnType<typeof changeProvider>,
  limitedId: string,
  rand: () => number,
): { bumped: string[]; deletedId: string; restoredId: string } {
  const singled = new Set([limitedId, change.shrunk, change.grown, change.newItem.id, ...change.bumped]);
  const files = simulator.itemIds().filter((id) => {
    const item = simulator.getItem(id)!;
    return item.type === 'file' && item[LARGE_FIELD] === undefined && !singled.has(id);
  });
  const shuffled = shuffle(files, rand);
  const bumpCount = Math.max(2, Math.round(simulator.itemIds().length * 0.01));
  const bumped = shuffled.slice(0, bumpCount);
  const deletedId = shuffled[bumpCount]!;
  for (const id of bumped) simulator.bumpRevision(id);
  simulator.deleteItem(deletedId);
  const restored = change.deletedItems[0]!;
  simulator.setItem(restored);
  return { bumped, deletedId, restoredId: restored.id };
}

/** New revisions for about 5% of the items (a folder among them), two files deleted, one new file. */
function changeProvider(
  simulator: ProviderSimulator,
  ids: readonly string[],
  limitedId: string,
  rand: () => number,
  revisionField: string,
): { bumped: string[]; deletedIds: string[]; deletedItems: SimulatorItem[]; newItem: SimulatorItem; shrunk: string; grown: string } {
  const shrunk = largeFileOf(ids.map((id) => simulator.getItem(id)!))!;
  const files = ids.filter((id) => simulator.getItem(id)?.type === 'file' && id !== limitedId && id !== shrunk);
  const shuffled = shuffle(files, rand);
  const deletedIds = shuffled.slice(0, 2);
  const bumpCount = Math.max(3, Math.round(ids.length * 0.05));
  const folderToBump = ids.find((id) => simulator.getItem(id)?.type === 'folder' && id !== ids[0]) ?? ids[0]!;
  // Among the new revisions: the large file fits in a row again, another file outgrows its row.
  const grown = shuffled[2]!;
  const bumped = [folderToBump, shrunk, grown, ...shuffled.slice(3, bumpCount)];
  const { [LARGE_FIELD]: _dropped, ...small } = simulator.getItem(shrunk)!;
  simulator.setItem(small as SimulatorItem);
  simulator.setItem({ ...simulator.getItem(grown)!, [LARGE_FIELD]: LARGE_TEXT });
  for (const id of bumped) simulator.bumpRevision(id);
  const deletedItems = deletedIds.map((id) => simulator.getItem(id)!);
  for (const id of deletedIds) simulator.deleteItem(id);
  const newItem = newFileLike(simulator.getItem(shuffled[bumpCount] ?? shuffled[0]!)!, ids, revisionField);
  simulator.setItem(newItem);
  return { bumped, deletedIds, deletedItems, newItem, shrunk, grown };
}

/** The rows that point to the items bucket must be exactly these ids' (the story's large items). */
async function expectInBucket(run: LocalRun, expected: readonly string[], pass: string): Promise<void> {
  const rows = await readTable(run.stack.dynamodb, run.stack.tableName);
  const inBucket = [...rows.values()].filter((row) => row.itemObject !== undefined).map((row) => row.id);
  if (JSON.stringify([...inBucket].sort()) !== JSON.stringify([...expected].sort())) {
    run.problems.push(`${pass}: expected the rows of ${expected.join(', ') || 'no item'} to point to the items bucket, found ${inBucket.join(', ') || 'none'}`);
  } else if (expected.length > 0) {
    run.screen.line(`   ${expected.join(', ')}: over DynamoDB's 400 KB row limit, stored whole in the items bucket (its row holds itemObject)`);
  }
}

/** The last step: the table against the provider, what went wrong on the way, the verdict. */
async function checkTable(
  run: LocalRun,
  simulator: ProviderSimulator,
  deletedIds: readonly string[],
  revisionField: string,
  findings: StoryFindings,
): Promise<void> {
  const { screen, problems, stack } = run;
  const rows = await readTable(stack.dynamodb, stack.tableName);
  findings.tableRows = rows.size;
  const current = simulator.itemIds().map((id) => simulator.getItem(id)!);
  findings.providerItems = current.length;
  const objects = await readObjects(stack, rows);
  const differences = [...compareWithProvider(rows, objects, current, deletedIds, revisionField), ...(await checkBucket(stack, rows))];
  problems.push(...differences.slice(0, 20));
  if (differences.length > 20) problems.push(`... and ${differences.length - 20} more differences`);
  const inBucket = [...rows.values()].filter((row) => row.itemObject !== undefined).length;
  for (const pass of findings.passes) if (!pass.drained) problems.push(`${pass.name}: ${pass.remaining} messages were still in the queue at the time limit`);
  for (const reason of deadLetterReasons(stack)) problems.push(`dead-lettered ${reason}`);
  for (const error of run.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
  writeSnapshot(run.snapshotFile, rows);

  screen.line();
  for (const line of formatPassTable(findings.passes)) screen.line(line);
  if (findings.reconciler) screen.line(reconcilerLine(findings.reconciler));
  screen.line();
  for (const line of await paceLines(run, findings.providerLoad)) screen.line(line);
  screen.line();
  if (problems.length === 0) {
    screen.line(
      `OK: the table matches the provider: ${current.length} items with their revisions (${inBucket} read from the items bucket, which holds no other object), ${deletedIds.length} marked deleted, nothing dead-lettered.`,
    );
  } else {
    screen.line('FAILED: the run did not behave as expected:');
    for (const problem of problems) screen.line(`   - ${problem}`);
  }
  screen.line(`Table snapshot: ${display(run.snapshotFile)}   Handler logs: ${display(run.logFile)}`);
}

function shuffle<T>(list: readonly T[], rand: () => number): T[] {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A new file at the provider, shaped like an existing one, with an id no item has (revision 1). */
function newFileLike(template: SimulatorItem, existing: readonly string[], revisionField: string): SimulatorItem {
  const taken = new Set(existing);
  let n = existing.length + 1;
  let id = `fil-${String(n).padStart(4, '0')}`;
  while (taken.has(id)) id = `fil-${String(++n).padStart(4, '0')}`;
  const item: SimulatorItem = { ...structuredClone(template), id, name: `added after the first sync (${n}).txt`, mimeType: 'text/plain' };
  let holder: Record<string, unknown> = item;
  const keys = revisionField.split('.');
  for (const key of keys.slice(0, -1)) {
    if (typeof holder[key] !== 'object' || holder[key] === null) holder[key] = {};
    holder = holder[key] as Record<string, unknown>;
  }
  holder[keys[keys.length - 1]!] = 1;
  return item;
}

// ---- against a real provider --------------------------------------------------------------------

export interface ProviderRunOptions {
  baseUrl: string;
  credentials: Credentials;
  ids: readonly string[];
  revisionField: string;
  /** Default `.local/provider`. The table is kept between runs. */
  dataDir?: string;
  inMemory?: boolean;
  output?: Writer;
  quiet?: boolean;
  timeLimitMs?: number;
  /**
   * Called with the new refresh token when the provider rotates it: the caller stores it (never
   * print it). A returned sentence is printed.
   */
  onRefreshTokenRotated?: (refreshToken: string) => string | void | Promise<string | void>;
}

type StoredRow = { id: string; revision?: string; type?: string; deleted?: boolean };

export interface ProviderRunResult {
  ok: boolean;
  problems: string[];
  pass?: PassSummary;
  rows: StoredRow[];
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
  rotated: boolean;
}

export async function runAgainstProvider(options: ProviderRunOptions): Promise<ProviderRunResult> {
  const found: { pass?: PassSummary; rows: StoredRow[]; rotated: boolean } = { rows: [], rotated: false };
  const outcome = await runStory({
    dataDir: options.dataDir ?? join(process.cwd(), '.local', 'provider'),
    inMemory: options.inMemory,
    fresh: false,
    revisionField: options.revisionField,
    // Longer than one invocation can take against a real provider, so a record is never delivered twice at once.
    visibilityTimeoutSeconds: 30,
    output: options.output,
    quiet: options.quiet,
    provider: async () => ({ baseUrl: options.baseUrl, credentials: options.credentials, close: async () => undefined }),
    header: (run) => printProviderHeader(run, options),
    play: (run) => playAgainstProvider(run, options, found),
  });
  return { ok: outcome.problems.length === 0, ...outcome, ...(found.pass ? { pass: found.pass } : {}), rows: found.rows, rotated: found.rotated };
}

function printProviderHeader(run: LocalRun, options: ProviderRunOptions): void {
  const { screen, stack } = run;
  const storage = stack.dynamodbStorage === 'disk' ? `data kept in ${display(join(run.dataDir, 'dynamodb'))}` : 'in memory';
  screen.line(`content-sync, local run against ${options.baseUrl}`);
  screen.line(`   revision field         ${options.revisionField}`);
  screen.line(`   DynamoDB (dynalite)    table ${stack.tableName}, ${storage}`);
  screen.line(`   S3 (s3rver)            items bucket ${stack.bucketName}`);
  screen.line(`   handler logs           ${display(run.logFile)}`);
  screen.line();
}

async function playAgainstProvider(
  run: LocalRun,
  options: ProviderRunOptions,
  found: { pass?: PassSummary; rows: StoredRow[]; rotated: boolean },
): Promise<void> {
  const { screen, problems, stack } = run;
  screen.line('1. Refresh the access token (token refresher)');
  ({ rotated: found.rotated } = await refresh(run, 'refresh'));
  if (found.rotated) await handBackRotatedToken(run, options);

  screen.line(`2. Sync ${new Set(options.ids).size} id${options.ids.length === 1 ? '' : 's'}`);
  const pass = await syncPass(run, 'sync', options.ids, { timeLimitMs: options.timeLimitMs ?? 600_000, concurrency: 5 });
  found.pass = pass;
  printPass(screen, pass);

  const rows = await readTable(stack.dynamodb, stack.tableName);
  writeSnapshot(run.snapshotFile, rows);
  screen.line();
  for (const line of formatPassTable([pass])) screen.line(line);
  screen.line();
  found.rows.push(...printStoredRows(screen, rows, options.ids));
  const dead = deadLetterReasons(stack, 20);
  if (dead.length > 0) {
    screen.line('Dead-lettered (these can never succeed as sent):');
    for (const reason of dead) screen.line(`   ${reason}`);
    problems.push(`${pass.deadLettered} id(s) dead-lettered`);
  }
  for (const error of run.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
  if (!pass.drained) problems.push(`${pass.remaining} messages were still being retried at the time limit`);
  screen.line(`Table snapshot: ${display(run.snapshotFile)}   Handler logs: ${display(run.logFile)}`);
  if (problems.length > 0) {
    screen.line('FAILED:');
    for (const problem of problems) screen.line(`   - ${problem}`);
  }
}

/** The provider rotated the refresh token: the refresher stored the new one; the caller keeps it too. */
async function handBackRotatedToken(run: LocalRun, options: ProviderRunOptions): Promise<void> {
  const stored = await run.stack.secrets.send(new GetSecretValueCommand({ SecretId: run.stack.credentialsSecretId }));
  const value = JSON.parse(stored.SecretString ?? '{}') as { refreshToken?: string };
  const note = value.refreshToken ? await options.onRefreshTokenRotated?.(value.refreshToken) : undefined;
  if (note) run.screen.line(`   ${note}`);
}

/** The stored row of each id given, printed; the rows found. */
function printStoredRows(screen: Screen, rows: ReadonlyMap<string, ItemRow>, ids: readonly string[]): StoredRow[] {
  const found: StoredRow[] = [];
  screen.line('Stored rows for these ids:');
  for (const id of new Set(ids)) {
    const row = rows.get(id);
    if (!row) {
      screen.line(`   ${JSON.stringify(id)}: no row`);
      continue;
    }
    found.push({ id, ...(row.revision !== undefined ? { revision: row.revision } : {}), ...(row.type !== undefined ? { type: row.type } : {}), ...(row.deleted ? { deleted: true } : {}) });
    const pointer = itemObjectOf(row);
    const where = pointer ? `, in the items bucket (${pointer.size} bytes, ${pointer.key})` : '';
    screen.line(`   ${JSON.stringify(id)}: ${row.type ?? '?'}, revision ${row.revision ?? '?'}${where}${row.deleted ? ', deleted at the provider' : ''}, synced ${row.syncedAt ?? '?'}`);
  }
  return found;
}
