/**
 * A busy account's own users, in virtual time (fairness-scenario.ts's run with `busyUsers`: the real
 * item-sync handlers on both queues with their deployed event sources, the real reconciler, the
 * real pace, provider client and DynamoDB adapters on DynamoDB Local, the SQS model with fair queues).
 *
 * One account, the connection `default`, has its users send a new id every `everyMs` and a burst of
 * `burstIds` every `burstEverySeconds` to the sync queue, from the start; quiet accounts each send
 * an id every `sendEverySeconds`. After a warm-up and `idleMinutes` of that alone (idle), the same
 * account backfills `backfillIds` ids in the background lane (`npm run enqueue -- --backfill`) at
 * a provider limit L the system is not told, while its users go on.
 *
 * Measured: the busy account's users' send-to-done times, p50 and p99, idle and during its own
 * backfill, and how many of their ids were done in the background lane; the quiet accounts' the
 * same way; the backfill's share of L and the share of the provider's requests during it answered
 * 429. The checks are the goals of docs/fairness.md ("A busy account's own users"): the busy
 * account's users' p50 and p99 during the backfill within BUSY_USERS_FACTOR × idle, none of their
 * ids put behind the backfill, the quiet accounts' within BACKLOG_P99_FACTOR × idle; the backfill at
 * least BUSY_SHARE_OF_LIMIT of L once the pace found the limit (its first 429), with at most
 * BUSY_MAX_429_SHARE of its requests answered 429;
 * every id done, nothing dead-lettered.
 */
import { BACKLOG_P99_FACTOR } from './backlog-scenario.js';
import { quantiles } from './quiet-accounts.js';
import { fairnessRun, type FairnessRun, type FairnessScale } from './fairness-scenario.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';

export type BusyScale = FairnessScale & Required<Pick<FairnessScale, 'busyUsers'>>;

/** The goal: the busy account's users' p50 and p99 during its own backfill at most this many times idle. */
export const BUSY_USERS_FACTOR = 2;
/** The goal: one account alone uses at least this share of an unknown L... */
export const BUSY_SHARE_OF_LIMIT = 0.9;
/** ...with at most this share of its requests answered 429. */
export const BUSY_MAX_429_SHARE = 0.01;

/**
 * 3 quiet accounts (an id a second each) beside one account backfilling 10,000 ids at L = 200/s
 * unknown, its users sending an id every 200 ms and a burst of 20 every 30 s.
 */
export const BUSY_FULL: BusyScale = {
  quietAccounts: 3,
  sendEverySeconds: 1,
  sweptEach: 5,
  backfillIds: 10_000,
  limit: 200,
  limitKnown: false,
  idleMinutes: 2,
  freshnessHours: 24,
  passesBackToBack: false,
  maxBackfillMinutes: 20,
  providerLatencyMs: 50,
  busyUsers: { everyMs: 200, burstIds: 20, burstEverySeconds: 30 },
  seed: 11,
};

/** What `npm test` runs: the same account and users beside a backfill of 600 ids, a quarter of a minute idle. */
export const BUSY_SHORT: BusyScale = {
  ...BUSY_FULL,
  backfillIds: 600,
  idleMinutes: 0.25,
  maxBackfillMinutes: 5,
  busyUsers: { everyMs: 200, burstIds: 20, burstEverySeconds: 10 },
  seed: 5,
};

/** The run's figures and checks. */
export function busyReport(scale: BusyScale, run: FairnessRun): { figures: Record<string, number | string>; checks: Check[] } {
  const busy = run.busy!;
  const line = (times: Float64Array): string => {
    const q = quantiles(times);
    return `${times.length} ids: p50 ${q.p50} s, p99 ${q.p99} s, max ${q.max} s`;
  };
  const ratio = (during: number, idle: number): number => (idle > 0 ? round(during / idle, 2) : Number.POSITIVE_INFINITY);
  const busyIdle = quantiles(busy.idle);
  const busyDuring = quantiles(busy.during);
  const quietIdle = quantiles(run.idle);
  const quietDuring = quantiles(run.during);
  const rate = run.backfill.seconds > 0 ? run.backfill.done / run.backfill.seconds : 0;
  const share = rate / scale.limit;
  const found = run.backfill.limitFound;
  const foundRate = found && found.seconds > 0 ? found.done / found.seconds : 0;
  const foundShare = foundRate / scale.limit;
  // An unknown limit is found by the pace first: from its last rate to L at the sweep's growth (5% a
  // second: docs/provider-pace.md), a ramp that costs the same seconds whatever the backfill's size.
  // The goal holds from the limit found on; the whole backfill's share is a figure.
  const steadyShare = found ? foundShare : share;
  const rejected = run.providerDuring.requests > 0 ? run.providerDuring.rateLimited / run.providerDuring.requests : 0;
  const { everyMs, burstIds, burstEverySeconds } = scale.busyUsers;
  const figures: Record<string, number | string> = {
    'busy account': `${scale.backfillIds.toLocaleString('en-US')} ids backfilled in the background lane after ${scale.idleMinutes} idle minutes; its users send an id every ${everyMs} ms and ${burstIds} at once every ${burstEverySeconds} s to the sync queue throughout`,
    'quiet accounts': `${scale.quietAccounts}, an id each every ${scale.sendEverySeconds} s to the sync queue`,
    'provider limit': `${scale.limit}/s, ${scale.limitKnown ? 'told (providerRequestsPerSecond)' : 'unknown (the pace finds it)'}`,
    "busy account's users, idle": line(busy.idle),
    "busy account's users, during its backfill": line(busy.during),
    "busy account's users: p50 during ÷ idle, p99 during ÷ idle": `${ratio(busyDuring.p50, busyIdle.p50)}, ${ratio(busyDuring.p99, busyIdle.p99)}`,
    "busy account's users' ids done in the background lane, of those sent idle and during the backfill": `${busy.idleInBackground}, ${busy.duringInBackground}`,
    'quiet accounts, idle': line(run.idle),
    'quiet accounts, during the backfill': line(run.during),
    'quiet accounts: p50 during ÷ idle, p99 during ÷ idle': `${ratio(quietDuring.p50, quietIdle.p50)}, ${ratio(quietDuring.p99, quietIdle.p99)}`,
    backfill: `${run.backfill.done.toLocaleString('en-US')} of ${run.backfill.ids.toLocaleString('en-US')} in ${round(run.backfill.seconds, 1)} s: ${round(rate, 1)} ids/s, ${round(share * 100, 1)}% of L`,
    'backfill once the limit was found (the first 429)': found
      ? `after ${round(found.after, 1)} s; then ${found.done.toLocaleString('en-US')} ids in ${round(found.seconds, 1)} s: ${round(foundRate, 1)} ids/s, ${round(foundShare * 100, 1)}% of L`
      : 'no 429 during the backfill',
    '429s during the backfill': `${run.providerDuring.rateLimited} of ${run.providerDuring.requests.toLocaleString('en-US')} requests (${round(rejected * 100, 2)}%)`,
    'dead-lettered': run.deadLettered,
    'real time': `${round(run.realMs / 1000, 1)} s`,
  };
  const within = (during: number, idle: number, factor: number): boolean => idle > 0 && during <= factor * idle;
  const checks: Check[] = [
    check(
      `the busy account's users: p50 and p99 during its own backfill at most ${BUSY_USERS_FACTOR}× idle`,
      `p50 ${busyDuring.p50} s against ${busyIdle.p50} s, p99 ${busyDuring.p99} s against ${busyIdle.p99} s`,
      busy.during.length > 0 && within(busyDuring.p50, busyIdle.p50, BUSY_USERS_FACTOR) && within(busyDuring.p99, busyIdle.p99, BUSY_USERS_FACTOR),
    ),
    check("the busy account's users: no id sent during the backfill put behind it (done in the background lane)", busy.duringInBackground, busy.duringInBackground === 0),
    check(
      `the quiet accounts: p50 and p99 during the backfill at most ${BACKLOG_P99_FACTOR}× idle`,
      `p50 ${quietDuring.p50} s against ${quietIdle.p50} s, p99 ${quietDuring.p99} s against ${quietIdle.p99} s`,
      run.during.length > 0 && within(quietDuring.p50, quietIdle.p50, BACKLOG_P99_FACTOR) && within(quietDuring.p99, quietIdle.p99, BACKLOG_P99_FACTOR),
    ),
    check(
      `the backfill uses at least ${BUSY_SHARE_OF_LIMIT * 100}% of L once the pace found it (its first 429; the whole backfill without one)`,
      `${round(steadyShare * 100, 1)}%`,
      steadyShare >= BUSY_SHARE_OF_LIMIT,
      // A short backfill ends while the pace still climbs towards L (600 ids are 3 s of L = 200/s).
      { fullScaleOnly: true },
    ),
    check(`at most ${BUSY_MAX_429_SHARE * 100}% of the requests during the backfill answered 429`, `${round(rejected * 100, 2)}%`, rejected <= BUSY_MAX_429_SHARE),
    check('every id done', `backfill ${run.backfill.done} of ${run.backfill.ids}, busy users' left ${busy.left}, quiet left ${run.quietLeft}`, run.backfill.done === run.backfill.ids && busy.left === 0 && run.quietLeft === 0),
    check('nothing dead-lettered', run.deadLettered, run.deadLettered === 0),
  ];
  return { figures, checks };
}

/** The scenario: one run, its figures and checks. */
export function busyScenario(scale: BusyScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const name =
    `busy: one account's users beside its own backfill of ${scale.backfillIds.toLocaleString('en-US')} ids and ${scale.quietAccounts} quiet accounts, ` +
    `L = ${scale.limit}/s ${scale.limitKnown ? 'told' : 'unknown'}`;
  return timed(name, async () => {
    const run = await fairnessRun(scale, 'background', progress);
    return { virtualMs: run.virtualMs, ...busyReport(scale, run) };
  });
}
