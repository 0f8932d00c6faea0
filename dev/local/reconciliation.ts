/**
 * The reconciler's pass in the local run: its ticks back to back (as the schedule's would come)
 * while the sync drains the reconcile queue, its second event source; every connection's rows in
 * one pass, counted per connection.
 */
import type { TickReport } from '../../functions/reconciler/tick.js';
import { formatDuration } from '../../tools/enqueue/progress.js';
import { rowKey } from '../fakes/items-table.js';
import type { DrainResult } from '../fakes/lambda.js';
import type { LocalRun } from './local-run.js';
import { countPass, drainThroughSync, idsByConnection, readRows, startPass, type PassLimits, type PassStart, type PassSummary } from './passes.js';

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

/** Ticks a pass may take before the run gives up on it (each sends up to the high-water mark). */
const MAX_TICKS = 100;

/**
 * One reconciliation pass, as deployed but with the schedule's ticks back to back: the reconciler
 * handler (its config from the stack's environment, FRESHNESS_HOURS 0) is invoked until a tick
 * ends the pass, while the reconcile queue is drained through the sync handler, its second event
 * source (the records carry `reconcilePass`, so the sync takes them as the sweep). Nothing is
 * enqueued by hand. Counted as syncPass counts.
 */
export async function reconciliationPass(run: LocalRun, name: string, limits: PassLimits): Promise<{ pass: PassSummary; reconciler: ReconcilerRun }> {
  const start = await startPass(run);
  const ticks = await startTicks(run, name);
  const drain = await drainSweep(run, name, start, limits, ticks);
  const ended = await ticks.ended;
  if ('error' in ended) throw ended.error;

  // The ticks send every row's id once, tombstones included: each connection's rows at the start.
  const perConnection = new Map([...idsByConnection(start.before)].map(([connection, ids]) => [connection, new Set(ids)]));
  const pass = await countPass(run, name, start, perConnection, drain);
  const after = await readRows(run);
  const restored = [...after.values()].filter((row) => !row.deleted && start.before.get(rowKey(row.connection, row.id))?.deleted === true).length;
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
    const { reconciler } = run.handlers;
    const workers = run.system.deployment.schedule.reconciler?.workers ?? 1;
    const report = await reconciler.handler({ trigger: 'schedule', worker: 0, workers }, run.system.context(reconciler));
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
  const deadline = start.started + limits.timeLimitMs;
  const total: DrainResult = { done: 0, retried: 0, invocations: 0, failedInvocations: 0, remaining: 0, drained: false, elapsedMs: 0 };
  for (;;) {
    const before = { ...total };
    const sendsMore = ticks.sending();
    const round = await drainThroughSync(run, 'reconcile', { timeLimitMs: Math.max(1, deadline - Date.now()) }, start.deadBefore, (p, dead) =>
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
export function reconcilerLine(run: ReconcilerRun): string {
  return `Reconciler: pass ${run.pass}, ${run.idsSent} ids sent in ${run.ticks} tick${run.ticks === 1 ? '' : 's'} (the pass took ${run.passSeconds.toFixed(1)} s); the sync checked them all in ${formatDuration(run.elapsedMs)}, ${run.restored} deleted item${run.restored === 1 ? '' : 's'} restored`;
}

