/**
 * A pass of the local run: ids sent to a work queue (or by the reconciler), drained through the sync
 * by its event source as deployed, and counted from what landed in the table and the dead-letter
 * queues; and how passes are printed.
 */
import type { SyncCounts } from '../../functions/item-sync/sync.js';
import { enqueueIds } from '../../tools/enqueue/enqueue.js';
import { formatDuration } from '../../tools/enqueue/progress.js';
import { diffTables, readTable, type ItemRow } from '../fakes/items-table.js';
import type { DrainProgress, DrainResult } from '../fakes/lambda.js';
import { runSyncEventSource } from '../system/event-sources.js';
import { describe, type LocalRun } from './local-run.js';
import type { Screen } from './screen.js';

/** The sync's own counters of what became of each record, here derived from what landed in the table and the queues. */
export type PassCounts = Pick<SyncCounts, 'created' | 'updated' | 'unchanged' | 'deleted' | 'retried' | 'deadLettered'>;

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

export interface PassLimits {
  timeLimitMs: number;
}

/** The dead-letter queues: the sync's (ids that can never succeed, with their reason) and the reconcile queue's (its redrive policy). */
function deadLetterQueues(run: LocalRun): string[] {
  const { sync, reconcile } = run.system.queues;
  return [sync.deadLetterUrl, ...(reconcile ? [reconcile.deadLetterUrl] : [])];
}

function deadLetterCount(run: LocalRun): number {
  return deadLetterQueues(run).reduce((sum, url) => sum + run.sqsModel.counts(url).total, 0);
}

/** The table's rows now. */
export function readRows(run: LocalRun): Promise<Map<string, ItemRow>> {
  return readTable(run.clients.dynamodb, run.system.names.itemsTable);
}

/** The table and the dead-letter queues before a pass, to count what the pass did. */
export interface PassStart {
  started: number;
  before: ReadonlyMap<string, ItemRow>;
  deadBefore: number;
}

export async function startPass(run: LocalRun): Promise<PassStart> {
  return { started: Date.now(), before: await readRows(run), deadBefore: deadLetterCount(run) };
}

/** What a drained pass of `total` distinct ids did, from what landed in the table and the dead-letter queues. */
export async function countPass(run: LocalRun, name: string, start: PassStart, total: number, drain: DrainResult): Promise<PassSummary> {
  const changes = diffTables(start.before, await readRows(run));
  const deadLettered = deadLetterCount(run) - start.deadBefore;
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

/** Enqueues the ids with the enqueue tool's functions, drains the sync queue through the sync, counts. */
export async function syncPass(run: LocalRun, name: string, ids: readonly string[], limits: PassLimits): Promise<PassSummary> {
  const { screen } = run;
  const start = await startPass(run);
  const { started, deadBefore } = start;

  const sent = await enqueueIds(run.clients.sqs, run.system.queues.sync.url, ids, {
    onProgress: (p) => screen.progress.update(`${name}: enqueuing ${p.sent}/${p.total}`),
  });
  if (sent.failed.length > 0) {
    throw new Error(`${name}: ${sent.failed.length} ids could not be enqueued (${sent.failed[0]!.code}: ${sent.failed[0]!.message})`);
  }
  const total = sent.sent.length;
  const drain = await drainThroughSync(run, 'sync', limits, deadBefore, (p, dead) =>
    `${name}: ${p.done}/${total} synced · ${p.retried} retried · ${dead} dead-lettered · ${p.invocations} invocations · ${formatDuration(Date.now() - started)}`,
  );
  screen.progress.clear();
  return countPass(run, name, start, total, drain);
}

/**
 * Drains a work queue through the sync, as its event source does (the deployed batch size and
 * maximum concurrency, every poller invoking the run's one sync container): invocation errors kept
 * in the run, the progress line `progress` writes (given the drain's progress and the ids
 * dead-lettered since `deadBefore`) on the screen.
 */
export function drainThroughSync(
  run: LocalRun,
  which: 'sync' | 'reconcile',
  limits: PassLimits,
  deadBefore: number,
  progress: (p: DrainProgress, dead: number) => string,
): Promise<DrainResult> {
  const { system, screen } = run;
  return runSyncEventSource(system, which, {
    containers: Array.from({ length: system.deployment.syncEventSource.maxConcurrency }, () => run.handlers.sync),
    timeLimitMs: limits.timeLimitMs,
    onOutcome: (outcome) => {
      if (outcome.error !== undefined) run.invocationErrors.push(describe(outcome.error));
    },
    onProgress: (p) => screen.progress.update(progress(p, deadLetterCount(run) - deadBefore)),
  });
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

export function formatPassTable(passes: readonly PassSummary[]): string[] {
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

export function printPass(screen: Screen, pass: PassSummary): void {
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
export function deadLetterReasons(run: LocalRun, limit = 10): string[] {
  return deadLetterQueues(run)
    .flatMap((url) => run.sqsModel.peek(url))
    .slice(0, limit)
    .map((m) => {
      const reason = m.messageAttributes.error?.StringValue ?? `received ${m.receiveCount} times without success (moved by the redrive policy)`;
      return `${m.body.length > 200 ? `${m.body.slice(0, 200)}…` : m.body}: ${reason}`;
    });
}
