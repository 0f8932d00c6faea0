/**
 * Reconciliation measured in virtual time (system.ts with `reconcile`: the real reconciler handler
 * on its deployed schedule, the sync's two event sources with their deployed concurrency, the
 * real pace, provider client and DynamoDB adapters on DynamoDB Local, the SQS model with both redrive
 * policies).
 *
 * The items table starts as after a first sync of the N ids (rows written as the sync writes them).
 * Users send one id a second to the sync queue throughout. For `idleMinutes` nothing else happens
 * (users' baseline); then the reconciler's schedule starts and its first tick starts pass 1. During
 * the pass, `changedShare` of the items change at the provider at random times and nobody sends
 * their ids. The pass is over, for this measurement, when every id has had a provider request
 * answered since it started (the reconciler ends it earlier, once its last page is sent).
 *
 * Measured: every id checked; ids checked more than once by the sweep, and why; rows against the
 * provider at the end; the p99 age of each id's last check at the pass end against the projected
 * pass length W the reconciler published; users' send-to-done time, idle and during the pass; the
 * AWS requests of the pass and their cost at public us-east-1 prices.
 */
import { loadSyncConfig } from '../../functions/shared/config.js';
import { mulberry32 } from '../simulator/random.js';
import { lastProjection, measurePass } from './reconcile-measures.js';
import { passChecks, passFigures } from './reconcile-report.js';
import type { ReconcileScale } from './reconcile-scale.js';
import { newPassWatch, passObserver, type PassRun, type PassWatch } from './reconcile-watch.js';
import { timed, type ScenarioResult } from './scenario.js';
import { atLimit, startSystem, type SimSystem, type SystemObserver, type SystemOptions } from './system.js';

export { RECONCILE_FULL, RECONCILE_SHORT, type ReconcileScale } from './reconcile-scale.js';
export { passCost, type CostLine } from './reconcile-cost.js';
export { PRICES } from '../cost/prices.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** The reconciliation pass, measured. `progress` gets a line every 10 virtual minutes. */
export function reconcilePass(scale: ReconcileScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const name = `reconciliation pass: ${scale.ids.toLocaleString('en-US')} ids, L = ${scale.limit}/s ${scale.knownLimit ? 'known' : 'unknown'}, freshnessHours ${scale.freshnessHours}`;
  return timed(name, async () => {
    const realStart = Date.now();
    const watch = newPassWatch(scale.ids);
    const system = await startSystem(reconcileSystemOptions(scale, passObserver(watch)));
    try {
      system.ids.forEach((id, i) => watch.index.set(id, i));
      const t0 = system.clock.ms();
      watch.firstTickAt = t0 + scale.idleMinutes * MINUTE;
      const preloadStart = Date.now();
      const rows = await system.preloadItems();
      const preload = { rows, ms: Date.now() - preloadStart };
      progress(`preloaded ${rows} rows in ${(preload.ms / 1000).toFixed(1)} s real`);

      const { changed, users } = scheduleChanges(system, scale, watch.firstTickAt);
      const end = await runPass(system, scale, watch, users, { t0, realStart }, progress);
      const run: PassRun = { scale, system, watch, t0, end, preload };
      const measures = await measurePass(run, changed);
      const figures = passFigures(run, measures);
      figures['real time'] = `${((Date.now() - realStart) / 1000).toFixed(0)} s (${(((Date.now() - realStart) / scale.ids) * 1000).toFixed(0)} µs an id)`;
      return { virtualMs: end - t0, figures, checks: passChecks(run, measures) };
    } finally {
      await system.close();
    }
  });
}

export function reconcileSystemOptions(scale: ReconcileScale, observe: SystemObserver): SystemOptions {
  return {
    ids: scale.ids,
    ...atLimit(scale, scale.knownLimit),
    ...(scale.syncMaxConcurrency !== undefined ? { syncMaxConcurrency: scale.syncMaxConcurrency } : {}),
    reconcile: {
      freshnessHours: scale.freshnessHours,
      firstTickAfterMs: scale.idleMinutes * MINUTE,
      ...(scale.highWater !== undefined ? { highWater: scale.highWater } : {}),
      ...(scale.projectionWarmupMs !== undefined ? { tuning: { projectionWarmupMs: scale.projectionWarmupMs } } : {}),
    },
    observe,
  };
}

/**
 * The ids that change (`changedShare` of them), each at a random time over the pass as the sweep's
 * share of L would make it: when, by index. The other ids, in a seeded order, are the users'.
 */
function scheduleChanges(system: SimSystem, scale: ReconcileScale, firstTickAt: number): { changed: Map<number, number>; users: Uint32Array } {
  const n = scale.ids;
  const random = mulberry32(scale.seed ^ 0x5eed);
  const order = shuffled(n, random);
  const changedCount = Math.round(n * scale.changedShare);
  const changed = new Map<number, number>();
  // The sweep's share of L: what PROVIDER_USERS_RESERVED_PERCENT (as deployed) leaves it.
  const reserved = loadSyncConfig(system.functions.sync[0]!.environment).usersReservedPercent;
  const expectedPassMs = (n / (scale.limit * (1 - reserved / 100))) * 1000;
  for (const i of order.subarray(0, changedCount)) {
    const at = firstTickAt + Math.floor(random() * 0.9 * expectedPassMs);
    changed.set(i, at);
    system.clock.at(at, () => system.provider.bumpRevision(system.ids[i]!));
  }
  return { changed, users: order.subarray(changedCount) };
}

/**
 * Runs the system: users send their ids, one each, at `usersPerSecond` from a second after `t0`;
 * progress every 10 virtual minutes from the first tick; until the pass is checked through (and
 * 30 s more) with the reconcile queue empty, or `maxPassHours` after the first tick. Returns the
 * virtual time it stopped at.
 */
async function runPass(
  system: SimSystem,
  scale: ReconcileScale,
  watch: PassWatch,
  users: Uint32Array,
  started: { t0: number; realStart: number },
  progress: (line: string) => void,
): Promise<number> {
  const { t0, realStart } = started;
  const hardStop = watch.firstTickAt + scale.maxPassHours * HOUR;
  let stopped = false;
  let nextUser = 0;
  const userEvery = 1000 / scale.usersPerSecond;
  const sendUser = (): void => {
    if (stopped || nextUser >= users.length) return;
    const id = system.ids[users[nextUser++]!]!;
    watch.userSent.set(id, system.clock.ms());
    system.sqs.send(system.queueUrl, { body: JSON.stringify({ id }) });
    system.clock.at(system.clock.ms() + userEvery, sendUser);
  };
  system.clock.at(t0 + 1_000, sendUser);
  const report = (): void => {
    if (stopped) return;
    const now = system.clock.ms();
    const w = lastProjection(system, 1);
    progress(
      `${((now - t0) / HOUR).toFixed(2)} h virtual, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: ` +
        `${watch.checked.toLocaleString('en-US')} of ${scale.ids.toLocaleString('en-US')} checked in the pass, ` +
        `reconcile queue ${system.sqs.size(system.reconcileQueueUrl!)}, W ${w === undefined ? '-' : `${(w / 3600).toFixed(2)} h`}`,
    );
    system.clock.at(now + 10 * MINUTE, report);
  };
  system.clock.at(watch.firstTickAt, report);

  await system.pollUntil(() => {
    const now = system.clock.ms();
    const through = watch.passEndAt !== undefined && now >= watch.passEndAt + 30_000 && system.sqs.size(system.reconcileQueueUrl!) === 0;
    stopped = through || now >= hardStop;
    return stopped;
  });
  return system.clock.ms();
}


/** A seeded permutation of 0..n-1. */
function shuffled(n: number, random: () => number): Uint32Array {
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i += 1) order[i] = i;
  for (let i = n - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    const t = order[i]!;
    order[i] = order[j]!;
    order[j] = t;
  }
  return order;
}

