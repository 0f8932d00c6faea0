/**
 * A pass of the local run: ids of each connection sent to a work queue (or by the reconciler) as
 * `{"connection","id"}`, drained through the sync by its event sources as deployed (the sync queue's,
 * and the reconcile queue's, where discovery sends the children of the folders written), and counted
 * per connection from what landed in the table, the dead-letter queues and the queues themselves (the
 * messages that wait: a failing connection's); and how passes are printed.
 */
import type { SyncCounts } from '../../functions/item-sync/sync.js';
import { POSTPONEMENTS_ATTRIBUTE } from '../../functions/item-sync/adapters/sqs.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { enqueueIds } from '../../tools/enqueue/enqueue.js';
import { formatDuration } from '../../tools/enqueue/progress.js';
import { diffTables, readTable, type ItemRow } from '../fakes/items-table.js';
import type { DrainProgress, DrainResult } from '../fakes/lambda.js';
import type { StoredMessage } from '../fakes/sqs-model.js';
import { runSyncEventSource } from '../system/event-sources.js';
import { describe, type LocalRun } from './local-run.js';
import type { Screen } from './screen.js';

/** The sync's own counters of what became of each record, here derived from what landed in the table and the queues. */
export type PassCounts = Pick<SyncCounts, 'created' | 'updated' | 'unchanged' | 'deleted' | 'retried' | 'deadLettered'> & {
  /** Rows created for ids nobody sent in the pass: found by discovery, in a folder's list. */
  found: number;
};

/** One connection's part of a pass. */
export interface ConnectionCounts extends Omit<PassCounts, 'retried'> {
  /** Distinct ids of the connection sent in the pass (by hand or by the reconciler). */
  ids: number;
  /** Its messages still in the queue at the end of the pass (they wait). */
  waiting: number;
}

export interface PassSummary extends PassCounts {
  name: string;
  /** Distinct ids sent (every connection's). */
  ids: number;
  invocations: number;
  elapsedMs: number;
  /** False when the queue was not empty at the end (the time limit, or a pass that leaves a connection's messages waiting). */
  drained: boolean;
  /** Messages still in the queue at the end (0 when drained). */
  remaining: number;
  /** The same counts per connection, by connection id. */
  byConnection: Record<string, ConnectionCounts>;
  /** Set on a pass meant to end with a connection's messages waiting (its `remaining` is no problem). */
  waitingExpected?: boolean;
}

export interface PassLimits {
  timeLimitMs: number;
}

/** Ids of one connection. */
export interface ConnectionIds {
  connection: string;
  ids: readonly string[];
}

/** The connection a message body names (`default` when none; the sync's own reading for bodies it accepts). */
export function connectionOfBody(body: string): string {
  try {
    const parsed = JSON.parse(body) as { connection?: unknown };
    return typeof parsed?.connection === 'string' ? parsed.connection : DEFAULT_CONNECTION;
  } catch {
    return DEFAULT_CONNECTION;
  }
}

/** The id a message body names (the body itself when it is not JSON: a bare id). */
export function idOfBody(body: string): string {
  try {
    const parsed = JSON.parse(body) as { id?: unknown };
    return typeof parsed?.id === 'string' ? parsed.id : body.trim();
  } catch {
    return body.trim();
  }
}

/** Times a message was postponed (its `postponements` attribute; 0 when it never was). */
export function postponementsOf(message: StoredMessage): number {
  return Number(message.messageAttributes[POSTPONEMENTS_ATTRIBUTE]?.StringValue ?? 0);
}

/** The dead-letter queues: the sync's (ids that can never succeed, with their reason) and the reconcile queue's (its redrive policy). */
function deadLetterQueues(run: LocalRun): string[] {
  const { sync, reconcile } = run.system.queues;
  return [sync.deadLetterUrl, ...(reconcile ? [reconcile.deadLetterUrl] : [])];
}

/** The work queues (sync, reconcile). */
function workQueues(run: LocalRun): string[] {
  const { sync, reconcile } = run.system.queues;
  return [sync.url, ...(reconcile ? [reconcile.url] : [])];
}

function deadLetterCount(run: LocalRun): number {
  return deadLetterQueues(run).reduce((sum, url) => sum + run.sqsModel.counts(url).total, 0);
}

/** Messages of each connection in these queues now. */
function countByConnection(run: LocalRun, urls: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of urls.flatMap((url) => run.sqsModel.peek(url))) {
    const connection = connectionOfBody(message.body);
    counts.set(connection, (counts.get(connection) ?? 0) + 1);
  }
  return counts;
}

/** The messages waiting in the work queues now (visible, in flight or delayed). */
export function waitingMessages(run: LocalRun): StoredMessage[] {
  return workQueues(run).flatMap((url) => run.sqsModel.peek(url));
}

/** The table's rows now, keyed by `<connection>/<id>`. */
export function readRows(run: LocalRun): Promise<Map<string, ItemRow>> {
  return readTable(run.clients.dynamodb, run.system.names.itemsTable);
}

/** The ids the table holds, per connection (what `npm run enqueue -- --connection <id> --resync-table` sends). */
export function idsByConnection(rows: ReadonlyMap<string, ItemRow>): Map<string, string[]> {
  const ids = new Map<string, string[]>();
  for (const row of rows.values()) {
    const list = ids.get(row.connection);
    if (list) list.push(row.id);
    else ids.set(row.connection, [row.id]);
  }
  return ids;
}

/** The table and the dead-letter queues before a pass, to count what the pass did. */
export interface PassStart {
  started: number;
  before: ReadonlyMap<string, ItemRow>;
  deadBefore: number;
  deadByConnection: ReadonlyMap<string, number>;
}

export async function startPass(run: LocalRun): Promise<PassStart> {
  return {
    started: Date.now(),
    before: await readRows(run),
    deadBefore: deadLetterCount(run),
    deadByConnection: countByConnection(run, deadLetterQueues(run)),
  };
}

/** `<connection>/<id>` → its connection (a connection id holds no `/`). */
function connectionOfKey(key: string): string {
  return key.slice(0, key.indexOf('/'));
}

/**
 * What a pass did, from what landed in the table, the dead-letter queues and the queues: `sent` the
 * distinct ids of each connection sent in the pass; a row created for an id not among them was found
 * by discovery. The ids checked are those sent and those found; unchanged, the rest of them.
 */
export async function countPass(
  run: LocalRun,
  name: string,
  start: PassStart,
  sent: ReadonlyMap<string, ReadonlySet<string>>,
  drain: DrainResult,
): Promise<PassSummary> {
  const changes = diffTables(start.before, await readRows(run));
  const dead = countByConnection(run, deadLetterQueues(run));
  const waiting = countByConnection(run, workQueues(run));
  const byConnection: Record<string, ConnectionCounts> = {};
  const of = (connection: string): ConnectionCounts =>
    (byConnection[connection] ??= { ids: 0, found: 0, created: 0, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0, waiting: 0 });
  for (const [connection, ids] of sent) of(connection).ids = ids.size;
  for (const kind of ['created', 'updated', 'deleted'] as const) for (const key of changes[kind]) of(connectionOfKey(key))[kind] += 1;
  for (const key of changes.created) {
    const connection = connectionOfKey(key);
    if (!sent.get(connection)?.has(key.slice(connection.length + 1))) of(connection).found += 1;
  }
  for (const [connection, count] of dead) of(connection).deadLettered = count - (start.deadByConnection.get(connection) ?? 0);
  for (const [connection, count] of waiting) of(connection).waiting = count;
  for (const counts of Object.values(byConnection)) {
    counts.unchanged = Math.max(0, counts.ids + counts.found - counts.created - counts.updated - counts.deleted - counts.deadLettered - counts.waiting);
  }
  const sum = (key: keyof ConnectionCounts): number => Object.values(byConnection).reduce((total, counts) => total + counts[key], 0);
  return {
    name,
    ids: sum('ids'),
    found: sum('found'),
    created: sum('created'),
    updated: sum('updated'),
    deleted: sum('deleted'),
    unchanged: sum('unchanged'),
    retried: drain.retried,
    deadLettered: deadLetterCount(run) - start.deadBefore,
    invocations: drain.invocations,
    elapsedMs: Date.now() - start.started,
    drained: drain.drained,
    remaining: drain.remaining,
    byConnection: sortedByKey(byConnection),
  };
}

function sortedByKey<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export interface PassOptions {
  /** Ends the sync queue's drain early once true (checked before every receive): a pass that leaves messages waiting. */
  stop?: () => boolean;
}

/** The ids of each connection, as sets. */
export function sentSets(sends: readonly ConnectionIds[]): Map<string, Set<string>> {
  const sets = new Map<string, Set<string>>();
  for (const { connection, ids } of sends) {
    const set = sets.get(connection) ?? new Set<string>();
    for (const id of ids) set.add(id);
    sets.set(connection, set);
  }
  return sets;
}

/**
 * Enqueues each connection's ids with the enqueue tool's functions (`{"connection","id"}`), drains
 * the sync queue and the reconcile queue through the sync, counts.
 */
export async function syncPass(run: LocalRun, name: string, sends: readonly ConnectionIds[], limits: PassLimits, options: PassOptions = {}): Promise<PassSummary> {
  const { screen } = run;
  const start = await startPass(run);
  const total = sends.reduce((sum, send) => sum + new Set(send.ids).size, 0);
  let sentSoFar = 0;
  for (const { connection, ids: connectionIds } of sends) {
    const sent = await enqueueIds(run.clients.sqs, run.system.queues.sync.url, connectionIds, {
      connection,
      onProgress: (p) => screen.progress.update(`${name}: enqueuing ${sentSoFar + p.sent}/${total}`),
    });
    if (sent.failed.length > 0) {
      throw new Error(`${name}: ${sent.failed.length} ids of ${connection} could not be enqueued (${sent.failed[0]!.code}: ${sent.failed[0]!.message})`);
    }
    sentSoFar += sent.sent.length;
  }
  return drainPass(run, name, start, sentSets(sends), limits, options);
}

/**
 * Drains what the sync queue holds (sent earlier), and meanwhile the reconcile queue (the children
 * discovery sends there), as the two event sources do, until both are empty (the sync queue's drain
 * may stop early: `options.stop`); counts it as a pass of the ids `sent` per connection.
 */
export async function drainPass(
  run: LocalRun,
  name: string,
  start: PassStart,
  sent: ReadonlyMap<string, ReadonlySet<string>>,
  limits: PassLimits,
  options: PassOptions = {},
): Promise<PassSummary> {
  const total = [...sent.values()].reduce((sum, ids) => sum + ids.size, 0);
  const progress = { sync: noProgress(), reconcile: noProgress() };
  const line = (dead: number): string => {
    const { sync, reconcile } = progress;
    return `${name}: ${total} ids sent · ${sync.done + reconcile.done} deliveries handled (${reconcile.done} from discovery) · ${sync.retried + reconcile.retried} retried · ${dead} dead-lettered · ${sync.invocations + reconcile.invocations} invocations · ${formatDuration(Date.now() - start.started)}`;
  };
  const drain = await drainBoth(run, limits, start.deadBefore, (which, p, dead) => {
    progress[which] = p;
    return line(dead);
  }, options.stop);
  run.screen.progress.clear();
  return countPass(run, name, start, sent, drain);
}

function noProgress(): DrainProgress {
  return { done: 0, retried: 0, invocations: 0, failedInvocations: 0, remaining: 0 };
}

/**
 * The sync queue's event source and, alongside, the reconcile queue's (when the system has one),
 * which ends once the sync queue's has and its queue is empty: what discovery sends while the sync
 * queue drains is drained too. The two results summed.
 */
async function drainBoth(
  run: LocalRun,
  limits: PassLimits,
  deadBefore: number,
  progress: (which: 'sync' | 'reconcile', p: DrainProgress, dead: number) => string,
  stop?: () => boolean,
): Promise<DrainResult> {
  const started = Date.now();
  let syncDone = false;
  const sync = drainThroughSync(run, 'sync', limits, deadBefore, (p, dead) => progress('sync', p, dead), stop).finally(() => {
    syncDone = true;
  });
  const reconcile = run.system.queues.reconcile
    ? drainThroughSync(run, 'reconcile', { timeLimitMs: Math.max(1, limits.timeLimitMs) }, deadBefore, (p, dead) => progress('reconcile', p, dead), undefined, () => syncDone)
    : Promise.resolve(undefined);
  const [a, b] = await Promise.all([sync, reconcile]);
  if (!b) return a;
  return {
    done: a.done + b.done,
    retried: a.retried + b.retried,
    invocations: a.invocations + b.invocations,
    failedInvocations: a.failedInvocations + b.failedInvocations,
    remaining: a.remaining + b.remaining,
    drained: a.drained && b.drained,
    elapsedMs: Date.now() - started,
  };
}

/**
 * Drains a work queue through the sync, as its event source does (the deployed batch size and
 * maximum concurrency, every poller invoking the run's sync container for that queue): invocation errors kept
 * in the run, the progress line `progress` writes (given the drain's progress and the ids
 * dead-lettered since `deadBefore`) on the screen; until the queue is empty and `finished()` holds.
 */
export function drainThroughSync(
  run: LocalRun,
  which: 'sync' | 'reconcile',
  limits: PassLimits,
  deadBefore: number,
  progress: (p: DrainProgress, dead: number) => string,
  stop?: () => boolean,
  finished?: () => boolean,
): Promise<DrainResult> {
  const { system, screen } = run;
  return runSyncEventSource(system, which, {
    containers: Array.from({ length: system.deployment.syncEventSource.maxConcurrency }, () => (which === 'sync' ? run.handlers.sync : run.handlers.sweep)),
    timeLimitMs: limits.timeLimitMs,
    ...(stop ? { stop } : {}),
    ...(finished ? { finished } : {}),
    onOutcome: (outcome) => {
      if (outcome.error !== undefined) run.invocationErrors.push(describe(outcome.error));
    },
    onProgress: (p) => screen.progress.update(progress(p, deadLetterCount(run) - deadBefore)),
  });
}

const COLUMNS: Array<[keyof PassCounts | 'ids', string]> = [
  ['ids', 'ids'],
  ['found', 'found'],
  ['created', 'created'],
  ['updated', 'updated'],
  ['unchanged', 'unchanged'],
  ['deleted', 'deleted'],
  ['retried', 'retried'],
  ['deadLettered', 'dead-lettered'],
];

/** The passes as a table; the column `found` (ids discovery found) only when discovery is on. */
export function formatPassTable(passes: readonly PassSummary[], discovery: boolean): string[] {
  const columns = discovery ? COLUMNS : COLUMNS.filter(([key]) => key !== 'found');
  const nameWidth = Math.max(4, ...passes.map((p) => p.name.length));
  const header = ['pass'.padEnd(nameWidth), ...columns.map(([, title]) => title.padStart(Math.max(7, title.length))), 'waiting', '     time'].join('  ');
  const rows = passes.map((p) =>
    [
      p.name.padEnd(nameWidth),
      ...columns.map(([key, title]) => String(p[key]).padStart(Math.max(7, title.length))),
      String(p.remaining).padStart(7),
      formatDuration(p.elapsedMs).padStart(9),
    ].join('  '),
  );
  return [header, ...rows];
}

/** One connection's counts in one line. */
export function connectionLine(connection: string, counts: ConnectionCounts, width = 8): string {
  const parts = [`${counts.created} created`, `${counts.updated} updated`, `${counts.unchanged} unchanged`, `${counts.deleted} deleted`, `${counts.deadLettered} dead-lettered`];
  if (counts.waiting > 0) parts.push(`${counts.waiting} waiting`);
  const found = counts.found > 0 ? ` (+ ${counts.found} found by discovery)` : '';
  return `${connection.padEnd(width)} ${String(counts.ids).padStart(4)} ids${found}: ${parts.join(', ')}`;
}

export function printPass(screen: Screen, pass: PassSummary): void {
  screen.line(`   ${pass.ids} ids, ${pass.retried} retried, ${pass.invocations} invocations, ${formatDuration(pass.elapsedMs)}:`);
  const width = Math.max(8, ...Object.keys(pass.byConnection).map((c) => c.length));
  for (const [connection, counts] of Object.entries(pass.byConnection)) screen.line(`      ${connectionLine(connection, counts, width)}`);
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
