/** The reconciliation pass's figures (as printed) and its checks against the goals. */
import { PRICES } from '../cost/prices.js';
import type { PassMeasures } from './reconcile-measures.js';
import type { PassRun } from './reconcile-watch.js';
import { check, percentile, round, type Check } from './scenario.js';
import type { SimMeter } from './system.js';

const HOUR = 3_600_000;

/** The figures of the pass, in the order they are printed (`real time` comes last, from the caller). */
export function passFigures(run: PassRun, measures: PassMeasures): Record<string, number | string> {
  const { scale, system, watch, t0, preload } = run;
  const { timing, repeats, rows, users } = measures;
  const n = scale.ids;
  const { passStart, passMs } = timing;
  const hours = (ms: number | undefined): string => (ms === undefined ? 'not reached' : `${(ms / HOUR).toFixed(3)} h (${Math.round(ms / 1000)} s)`);
  const seconds = (s: number | undefined): string => (s === undefined ? 'none' : `${s.toFixed(0)} s (${(s / 3600).toFixed(3)} h)`);
  const figures: Record<string, number | string> = {
    ids: n,
    'provider limit': `${scale.limit}/s, ${scale.knownLimit ? 'known (providerRequestsPerSecond)' : 'unknown to the system'}`,
    'deployed settings': deployedSettings(run),
    'preload (real)': `${(preload.ms / 1000).toFixed(1)} s for ${preload.rows.toLocaleString('en-US')} rows`,
    'pass started (virtual, after the users-only baseline)': hours(passStart - t0),
    'reconciler: last page sent after': timing.pass.endedAt === undefined ? 'not yet' : hours(timing.pass.endedAt - passStart),
    'pass time (every id checked)': hours(passMs),
    'achieved sweep rate (ids/s)': passMs === undefined ? '-' : round(n / (passMs / 1000), 1),
    'reconciler ticks': system.ticks.length,
    'failed ticks': system.ticks.filter((t) => t.error !== undefined).length,
    'W projected: first (after warm-up)': seconds(timing.projections[0]?.seconds),
    'W projected: at half the pass': seconds(timing.wMid),
    'W projected: last before the pass ended': seconds(timing.wLast),
    'p99 age of the last check at the pass end': seconds(timing.p99Age),
    'ids sent by the reconciler': repeats.sentIds,
    'ids sent twice by the reconciler': repeats.sentTwice,
    'ids checked twice by the sweep': repeats.twice,
    '… of which sent twice (a page repeated)': repeats.sentAgain,
    '… of which delivered twice': repeats.redelivered,
    '… of which fetched again after a lost write race': repeats.raced,
    'ids checked by the sweep and by users': repeats.alsoByUsers,
    'changed at the provider during the run': rows.changesMade,
    '… before their check in the pass': rows.changedBeforeCheck,
    '… after their check (left for the next pass)': rows.changedAfterCheck,
    'rows not matching the provider at the end': rows.mismatched.size,
    'users: ids sent': watch.userDone.length + watch.userSent.size,
    'users: p50 / p99 send to done, idle (s)': `${round(percentile(Float64Array.from(users.idle), 0.5) / 1000, 2)} / ${round(users.idleP99, 2)} (${users.idle.length} ids)`,
    'users: p50 / p99 send to done, during the pass (s)': `${round(percentile(Float64Array.from(users.during), 0.5) / 1000, 2)} / ${round(users.passP99, 2)} (${users.during.length} ids)`,
    'provider 429s': watch.rateLimited,
    'dead-lettered': measures.dead,
    'prices (USD, us-east-1)': JSON.stringify(PRICES),
  };
  if (scale.meterLogs) Object.assign(figures, sweepLogFigures(system.meter, n));
  for (const line of measures.cost.lines) figures[`cost: ${line.what}`] = `${line.requests.toLocaleString('en-US')} requests, ${line.units} → $${line.usd.toFixed(4)}`;
  figures['cost of the pass (USD)'] = round(measures.cost.total, 4);
  figures['… of which writing the changed rows'] = round(measures.cost.changedWrites, 4);
  figures['cost per million unchanged ids (USD)'] = round(measures.perMillion, 4);
  return figures;
}

/** The five log messages of the sweep (reconciler and sync on the reconcile queue) with the most bytes. */
function sweepLogFigures(meter: SimMeter, n: number): Record<string, string> {
  const logs = new Map<string, { lines: number; bytes: number }>();
  for (const source of ['reconciler', 'reconcile'] as const) {
    for (const [message, count] of Object.entries(meter.logs[source])) {
      const sum = logs.get(message) ?? { lines: 0, bytes: 0 };
      logs.set(message, { lines: sum.lines + count.lines, bytes: sum.bytes + count.bytes });
    }
  }
  const figures: Record<string, string> = {};
  for (const [message, count] of [...logs].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 5)) {
    figures[`logs: "${message}"`] = `${count.lines.toLocaleString('en-US')} lines, ${round(count.bytes / n, 1)} bytes an id`;
  }
  return figures;
}

export function passChecks(run: PassRun, measures: PassMeasures): Check[] {
  const n = run.scale.ids;
  const { timing, repeats, rows, users, perMillion, dead } = measures;
  const { p99Age, wLast } = timing;
  return [
    check('every id checked in the pass', `${timing.checkedInPass} of ${n}`, timing.checkedInPass === n),
    check(
      'no id checked twice by the sweep in the pass beyond duplicated deliveries',
      `${repeats.twice} twice: ${repeats.sentAgain} sent again, ${repeats.redelivered} delivered again, ${repeats.raced} write races, ${repeats.unexplained} unexplained`,
      repeats.unexplained === 0,
    ),
    check(
      'the items that changed before their check match the provider at the end (and every other row)',
      `${rows.changedStale} changed and stale, ${rows.otherStale} other rows stale, ${rows.changedAfterCheck} changed after their check`,
      rows.changedStale === 0 && rows.otherStale === 0 && rows.mismatched.size === rows.changedAfterCheck,
    ),
    check(
      'p99 age of the last check at the pass end ≤ 1.1 × the projected W',
      `${p99Age === undefined ? '-' : p99Age.toFixed(0)} s ≤ ${wLast === undefined ? '-' : (1.1 * wLast).toFixed(0)} s (W: ${timing.wWhich})`,
      p99Age !== undefined && wLast !== undefined && p99Age <= 1.1 * wLast,
    ),
    check(
      "users' p99 send to done during the pass ≤ idle p99 + 5 s",
      `${round(users.passP99, 2)} s ≤ ${round(users.idleP99 + 5, 2)} s`,
      users.during.length > 0 && users.idle.length > 0 && users.passP99 <= users.idleP99 + 5,
    ),
    // At short scale the pace's draws are smaller, so their share of the cost per id is larger (reconcile-scale.ts).
    check('cost of a pass per million unchanged ids ≤ $1', `$${perMillion.toFixed(4)}`, perMillion <= 1, { fullScaleOnly: true }),
    check('nothing dead-lettered', dead, dead === 0),
  ];
}


/** The deployment the pass ran with: event sources, batch, schedule, high-water mark. */
function deployedSettings({ system, scale }: PassRun): string {
  const { syncEventSource, schedule } = system.local.deployment;
  const every = schedule.reconciler?.everyMinutes;
  return (
    `sync queue ${system.functions.sync.length} containers, reconcile queue ${system.functions.sweep.length}, batch ${syncEventSource.batchSize}, ` +
    `reconciler every ${every === 1 ? 'minute' : `${every} minutes`}, high water ${scale.highWater ?? 'default'}`
  );
}
