/**
 * Fairness beside a backlog, at a provider limit told to the system or not (fairness-scenario.ts's
 * runs: the real item-sync handlers on both queues with their deployed concurrency, the real
 * reconciler on its schedule, the real pace, provider client and DynamoDB adapters on DynamoDB Local, the
 * SQS model with fair queues and both redrive policies, in virtual time).
 *
 * Quiet accounts each send one new id every `sendEverySeconds` to the sync queue, in their
 * connection's message group (the enqueue tool's sending). After a warm-up (each quiet account's
 * first id) and `idleMinutes` of that alone (idle), one more account, the connection `default`,
 * sends a backlog of `backfillIds` ids at once. One run for each limit L of `limits`, each of
 * `limitKnown` (L told to the system as providerRequestsPerSecond, or not: the provider still
 * answers 429 past L and the pace has to find it) and each lane of `lanes`:
 * - `users`: to the sync queue, in its message group, as `npm run enqueue` sends it;
 * - `background`: as `npm run enqueue -- --backfill` sends it, to the reconcile queue with `lane` =
 *   `background`.
 * The reconciler is deployed (the background lane is its queue) but its sweep is all but off: a few
 * preloaded rows of each quiet account (`sweptEach`), one pass, at the start; the ids it sends
 * during the backlog are a figure.
 *
 * Measured per run: the quiet accounts' time from send to their record done, p50 and p99, idle and
 * during the backlog, and the ratio of the p99s; the backlog's throughput as a share of L; the share
 * of the provider's item requests during the backlog it answered 429; dead letters; every id done.
 * The checks are the goals: the quiet p99 during the backlog at most BACKLOG_P99_FACTOR × the idle
 * p99 in every run, every id done, nothing dead-lettered, no 429 when L is told.
 */
import { quantiles } from './quiet-accounts.js';
import { fairnessRun, type BackfillLane, type FairnessRun, type FairnessScale } from './fairness-scenario.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';

/** The backlog's lanes (above). */
export type BacklogLane = Extract<BackfillLane, 'users' | 'background'>;

export interface BacklogScale extends Omit<FairnessScale, 'limit' | 'limitKnown'> {
  /** The provider's limits L, requests a second: the runs at each. */
  limits: readonly number[];
  /** L told to the system (true), not told (false): the runs with each. */
  limitKnown: readonly boolean[];
  lanes: readonly BacklogLane[];
}

/** One run: its limit, whether the system is told it, its lane, and fairness-scenario.ts's figures. */
export interface BacklogRun {
  limit: number;
  limitKnown: boolean;
  lane: BacklogLane;
  run: FairnessRun;
}

/** The goal: the quiet accounts' p99 during the backlog at most this many times their idle p99. */
export const BACKLOG_P99_FACTOR = 1.5;

/**
 * 20 quiet accounts (an id every 5 s each) beside a backlog of 5,000 ids, at L = 30/s and 200/s,
 * told and not told, in both lanes: 8 runs.
 */
export const BACKLOG_FULL: BacklogScale = {
  quietAccounts: 20,
  sendEverySeconds: 5,
  sweptEach: 5,
  backfillIds: 5_000,
  limits: [30, 200],
  limitKnown: [true, false],
  lanes: ['users', 'background'],
  idleMinutes: 3,
  freshnessHours: 24,
  passesBackToBack: false,
  maxBackfillMinutes: 30,
  providerLatencyMs: 50,
  seed: 11,
};

/**
 * What `npm test` runs: 5 quiet accounts (an id every 2 s each) beside a backlog of 300 ids at L =
 * 30/s not told, in both lanes: 2 runs, seconds of real time each.
 */
export const BACKLOG_SHORT: BacklogScale = {
  ...BACKLOG_FULL,
  quietAccounts: 5,
  sendEverySeconds: 2,
  sweptEach: 2,
  backfillIds: 300,
  limits: [30],
  limitKnown: [false],
  idleMinutes: 0.5,
  maxBackfillMinutes: 10,
  seed: 5,
};

/** How each lane is named in the figures. */
const LANE_NAMES: Readonly<Record<BacklogLane, string>> = {
  users: 'sync queue',
  background: '--backfill',
};

/** A run's name in the figures and checks: `L = 30/s unknown, sync queue`. */
export function backlogLabel(limit: number, limitKnown: boolean, lane: BacklogLane): string {
  return `L = ${limit}/s ${limitKnown ? 'told' : 'unknown'}, ${LANE_NAMES[lane]}`;
}

/** One run of the scale at `limit`, told to the system or not, in `lane`. */
export async function backlogRun(
  scale: BacklogScale,
  limit: number,
  limitKnown: boolean,
  lane: BacklogLane,
  progress: (line: string) => void = () => undefined,
): Promise<BacklogRun> {
  return { limit, limitKnown, lane, run: await fairnessRun({ ...scale, limit, limitKnown }, lane, progress) };
}

/** The scenario: one run per limit, per limit told or not, per lane; their figures and checks. */
export function backlogScenario(scale: BacklogScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const name =
    `backlog: ${scale.quietAccounts} quiet accounts (an id every ${scale.sendEverySeconds} s each) beside a backlog of ` +
    `${scale.backfillIds.toLocaleString('en-US')} ids, L = ${scale.limits.join(' and ')}/s, told and not`;
  return timed(name, async () => {
    const runs: BacklogRun[] = [];
    for (const limit of scale.limits) {
      for (const limitKnown of scale.limitKnown) {
        for (const lane of scale.lanes) {
          const label = backlogLabel(limit, limitKnown, lane);
          progress(`${label}: starting`);
          runs.push(await backlogRun(scale, limit, limitKnown, lane, (line) => progress(`${label}: ${line}`)));
        }
      }
    }
    return { virtualMs: runs.reduce((sum, { run }) => sum + run.virtualMs, 0), ...backlogReport(scale, runs) };
  });
}

/** The runs' figures and checks. */
export function backlogReport(scale: BacklogScale, runs: readonly BacklogRun[]): { figures: Record<string, number | string>; checks: Check[] } {
  const figures: Record<string, number | string> = {
    'quiet accounts': `${scale.quietAccounts}, one new id each every ${scale.sendEverySeconds} s to the sync queue (${round(scale.quietAccounts / scale.sendEverySeconds, 2)} ids/s together)`,
    backlog: `${scale.backfillIds.toLocaleString('en-US')} ids of one more account, sent at once after ${scale.idleMinutes} idle minutes (and a warm-up: each quiet account's first id)`,
    sweep: `${(scale.quietAccounts * scale.sweptEach).toLocaleString('en-US')} rows of the quiet accounts, freshnessHours ${scale.freshnessHours}, ${scale.passesBackToBack ? 'passes back to back' : 'one pass'}`,
  };
  const checks: Check[] = [];
  for (const run of runs) runFigures(figures, checks, run);
  return { figures, checks };
}

function runFigures(figures: Record<string, number | string>, checks: Check[], { limit, limitKnown, lane, run }: BacklogRun): void {
  const label = backlogLabel(limit, limitKnown, lane);
  const idle = quantiles(run.idle);
  const during = quantiles(run.during);
  const line = (n: number, q: { p50: number; p99: number; max: number }): string => `${n} ids: p50 ${q.p50} s, p99 ${q.p99} s, max ${q.max} s`;
  const ratio = idle.p99 > 0 ? round(during.p99 / idle.p99, 2) : Number.POSITIVE_INFINITY;
  const rate = run.backfill.seconds > 0 ? run.backfill.done / run.backfill.seconds : 0;
  const { requests, rateLimited } = run.providerDuring;
  figures[`${label}: quiet ids sent idle, send to done`] = line(run.idle.length, idle);
  figures[`${label}: quiet ids sent during the backlog`] = line(run.during.length, during);
  figures[`${label}: p99 during ÷ p99 idle`] = ratio;
  figures[`${label}: backlog`] =
    `${run.backfill.done.toLocaleString('en-US')} of ${run.backfill.ids.toLocaleString('en-US')} done in ${round(run.backfill.seconds, 1)} s: ` +
    `${round(rate, 1)} ids/s, ${round((rate / limit) * 100, 1)}% of L`;
  figures[`${label}: 429s during the backlog`] =
    `${rateLimited.toLocaleString('en-US')} of ${requests.toLocaleString('en-US')} provider requests (${requests > 0 ? round((rateLimited / requests) * 100, 2) : 0}%)`;
  figures[`${label}: 429s in the whole run`] = run.rateLimited;
  figures[`${label}: ids the reconciler sent during the backlog`] = run.reconcilerSentDuring;
  figures[`${label}: dead-lettered`] = run.deadLettered;
  figures[`${label}: real time`] = `${round(run.realMs / 1000, 1)} s`;
  checks.push(
    check(
      `${label}: the quiet accounts' p99 during the backlog at most ${BACKLOG_P99_FACTOR}× their idle p99`,
      `${during.p99} s against ${idle.p99} s (${ratio}×)`,
      run.idle.length > 0 && run.during.length > 0 && during.p99 <= BACKLOG_P99_FACTOR * idle.p99,
    ),
    check(`${label}: every backlog id done`, `${run.backfill.done} of ${run.backfill.ids}`, run.backfill.done === run.backfill.ids),
    check(`${label}: every quiet id done`, `${run.quietLeft} left`, run.quietLeft === 0),
    check(`${label}: nothing dead-lettered`, run.deadLettered, run.deadLettered === 0),
  );
  if (limitKnown) checks.push(check(`${label}: no 429 (the limit is told)`, run.rateLimited, run.rateLimited === 0));
}
