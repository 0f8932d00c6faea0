/**
 * Reconciliation measured in virtual time (system.ts with `reconcile`: the real reconciler handler
 * on its one-minute schedule, the sync's two event sources with their deployed concurrency, the
 * real pace, provider client and DynamoDB adapters on dynalite, the SQS model with both redrive
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
import { revisionText } from '../../functions/item-sync/item.js';
import { DEFAULTS } from '../../functions/shared/config.js';
import { ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { NUMBER_RULES } from '../../infra/context.js';
import { mulberry32 } from '../simulator/item-tree.js';
import { check, timed, type Check, type ScenarioResult } from './pace-scenarios.js';
import {
  ITEMS_TABLE,
  startSystem,
  type DynamoCount,
  type InvocationCount,
  type MeterSource,
  type SimMeter,
  type SimSystem,
  type SystemObserver,
  type SystemOptions,
} from './system.js';

export interface ReconcileScale {
  ids: number;
  /** The provider's limit L, requests a second. */
  limit: number;
  /** Tell the system L (providerRequestsPerSecond); otherwise the pace has to find it. */
  knownLimit: boolean;
  freshnessHours: number;
  /** Sync invocations on the sync queue at once (syncMaxConcurrency; deployed default 5). */
  containers: number;
  /** On the reconcile queue (deployed: syncMaxConcurrency too). */
  reconcileContainers: number;
  /** RECONCILE_HIGH_WATER; undefined: the function's default (the deployed value). */
  highWater?: number;
  /** The reconciler's projection warm-up; undefined: the function's default (10 min). */
  projectionWarmupMs?: number;
  usersPerSecond: number;
  /** Share of the items that change at the provider during the pass. */
  changedShare: number;
  /** Users' baseline before the reconciler's schedule starts, minutes. */
  idleMinutes: number;
  providerLatencyMs: number;
  /** Gives up this long after the first tick when the pass has not been checked through. */
  maxPassHours: number;
  dynalite: 'in-process' | 'child';
  /** The real Powertools logger and metrics writing to byte counters (log ingestion in the cost). */
  meterLogs: boolean;
  seed: number;
}

/**
 * The stacks' default syncMaxConcurrency (infra/context.ts): the maximum concurrency of both the
 * sync queue's event source and the reconcile queue's (infra/reconciler/reconciler.ts).
 */
const DEPLOYED_SYNC_MAX_CONCURRENCY = NUMBER_RULES.syncMaxConcurrency.fallback;

/** 1,000,000 ids, L = 200/s told to the system, freshnessHours 24, everything else as deployed. */
export const RECONCILE_FULL: ReconcileScale = {
  ids: 1_000_000,
  limit: 200,
  knownLimit: true,
  freshnessHours: 24,
  containers: DEPLOYED_SYNC_MAX_CONCURRENCY,
  reconcileContainers: DEPLOYED_SYNC_MAX_CONCURRENCY,
  usersPerSecond: 1,
  changedShare: 0.01,
  idleMinutes: 10,
  providerLatencyMs: 50,
  maxPassHours: 6,
  dynalite: 'child',
  meterLogs: true,
  seed: 11,
};

/**
 * What `npm test` runs: 2,400 ids at L = 50/s known (a pass of about a minute, over two ticks), so the
 * high-water mark (600: what the sweep takes in 15 s) and the projection's warm-up (20 s) are scaled
 * down with it; the users' baseline is one minute; everything else as in full. At this L the pace's
 * share of the cost per id is larger than at full scale (its draws are smaller): the cost goal is
 * judged at full scale.
 */
export const RECONCILE_SHORT: ReconcileScale = {
  ...RECONCILE_FULL,
  ids: 2_400,
  limit: 50,
  highWater: 600,
  projectionWarmupMs: 20_000,
  idleMinutes: 1,
  maxPassHours: 1,
  dynalite: 'in-process',
  meterLogs: false,
  seed: 5,
};

/**
 * Public us-east-1 prices (USD) the cost uses: DynamoDB on-demand request units, SQS standard
 * requests (each 64 KB of payload is one request), Lambda on Arm (the functions' architecture),
 * CloudWatch Logs ingestion (standard class), X-Ray traces recorded, EventBridge Scheduler
 * invocations. Free tiers left out.
 */
export const PRICES = {
  dynamoReadRequestUnitPerMillion: 0.125,
  dynamoWriteRequestUnitPerMillion: 0.625,
  sqsRequestPerMillion: 0.4,
  lambdaRequestPerMillion: 0.2,
  lambdaArmGbSecond: 0.0000133334,
  logsIngestedPerGb: 0.5,
  xrayTracePerMillion: 5,
  schedulerInvocationPerMillion: 1,
} as const;

/** X-Ray's default sampling: the first request each second and 5% of the others. */
const XRAY_RESERVOIR_PER_SECOND = 1;
const XRAY_FIXED_RATE = 0.05;

const MINUTE = 60_000;
const HOUR = 3_600_000;
/** Provider answers that are a check of the item: the item, or that it is gone. */
const CHECKED = new Set([200, 404]);
const READS = new Set(['GetItem', 'BatchGetItem', 'Scan', 'Query']);
const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);

export interface CostLine {
  what: string;
  requests: number;
  units: string;
  usd: number;
}

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

/** What the scenario counts as the system runs: per id (by its index in system.ids), and users' ids. */
interface PassWatch {
  n: number;
  index: Map<string, number>;
  /** When each id was last checked (a provider answer that is a check), up to the pass end; -1: never. */
  lastCheck: Float64Array;
  /** When each id was first checked in the pass; -1: not yet. */
  firstInPass: Float64Array;
  /** Checks in the pass by the sync on the reconcile queue, and by the sync on the sync queue. */
  sweepChecks: Uint16Array;
  userChecks: Uint16Array;
  /** Records of each id the sync on the reconcile queue logged in the pass. */
  sweepDeliveries: Uint16Array;
  /** 1: the sweep lost a write race on the id in the pass. */
  races: Uint8Array;
  /** Times the reconciler sent each id (at most 255). */
  sent: Uint8Array;
  firstTickAt: number;
  /** Ids checked in the pass so far. */
  checked: number;
  /** When the last id was first checked in the pass. */
  passEndAt: number | undefined;
  /** Each id's age of its last check at passEndAt. */
  ages: Float64Array | undefined;
  rateLimited: number;
  /** Users' ids sent and not done yet, and when they were sent. */
  userSent: Map<string, number>;
  userDone: Array<{ sentAt: number; ms: number }>;
}

/** One run of the pass, once the event sources stopped. */
interface PassRun {
  scale: ReconcileScale;
  system: SimSystem;
  watch: PassWatch;
  /** Virtual start and stop. */
  t0: number;
  end: number;
  /** Rows preloaded and the real time it took. */
  preload: { rows: number; ms: number };
}

function newPassWatch(n: number): PassWatch {
  return {
    n,
    index: new Map(),
    lastCheck: new Float64Array(n).fill(-1),
    firstInPass: new Float64Array(n).fill(-1),
    sweepChecks: new Uint16Array(n),
    userChecks: new Uint16Array(n),
    sweepDeliveries: new Uint16Array(n),
    races: new Uint8Array(n),
    sent: new Uint8Array(n),
    firstTickAt: Number.POSITIVE_INFINITY,
    checked: 0,
    passEndAt: undefined,
    ages: undefined,
    rateLimited: 0,
    userSent: new Map(),
    userDone: [],
  };
}

function inPass(watch: PassWatch, at: number): boolean {
  return at >= watch.firstTickAt && (watch.passEndAt === undefined || at <= watch.passEndAt);
}

/** The system's observer, counting into `watch`. */
function passObserver(watch: PassWatch): SystemObserver {
  const { index, lastCheck, firstInPass, sweepChecks, userChecks, sweepDeliveries, races, sent } = watch;
  return {
    providerAnswer(source, itemId, status, at) {
      if (status === 429) watch.rateLimited += 1;
      const i = index.get(itemId);
      if (i === undefined || !CHECKED.has(status)) return;
      if (watch.passEndAt === undefined || at <= watch.passEndAt) lastCheck[i] = at;
      if (!inPass(watch, at)) return;
      if (source === 'reconcile') sweepChecks[i] = (sweepChecks[i] ?? 0) + 1;
      else userChecks[i] = (userChecks[i] ?? 0) + 1;
      if (firstInPass[i]! < 0) {
        firstInPass[i] = at;
        watch.checked += 1;
        if (watch.checked === watch.n) {
          watch.passEndAt = at;
          watch.ages = lastCheck.map((last) => at - last);
        }
      }
    },
    itemLog(source, message, itemId, at) {
      const i = index.get(itemId);
      if (i === undefined) return;
      if (source === 'sync' && message === 'record done') {
        const sentAt = watch.userSent.get(itemId);
        if (sentAt !== undefined) {
          watch.userDone.push({ sentAt, ms: at - sentAt });
          watch.userSent.delete(itemId);
        }
      }
      if (source === 'reconcile' && inPass(watch, at)) {
        if (message.startsWith('record ')) sweepDeliveries[i] = (sweepDeliveries[i] ?? 0) + 1;
        if (message.startsWith('write race lost')) races[i] = 1;
      }
    },
    reconcileSent(ids) {
      for (const id of ids) {
        const i = index.get(id);
        if (i !== undefined) sent[i] = Math.min(255, (sent[i] ?? 0) + 1);
      }
    },
  };
}

function reconcileSystemOptions(scale: ReconcileScale, observe: SystemObserver): SystemOptions {
  return {
    ids: scale.ids,
    seed: scale.seed,
    rateLimit: { requestsPerSecond: scale.limit, retryAfterSeconds: 1 },
    ...(scale.knownLimit ? { knownLimit: scale.limit } : {}),
    containers: scale.containers,
    providerLatencyMs: scale.providerLatencyMs,
    dynamoRoundTripMs: 5,
    tokenRefreshMinutes: 30,
    dynalite: scale.dynalite,
    meterLogs: scale.meterLogs,
    recordedRequests: 1_000,
    reconcile: {
      freshnessHours: scale.freshnessHours,
      containers: scale.reconcileContainers,
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
  // The sweep's share of L: what PROVIDER_USERS_RESERVED_PERCENT (here its default) leaves it.
  const expectedPassMs = (n / (scale.limit * (1 - DEFAULTS.usersReservedPercent / 100))) * 1000;
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

/** The pass's own figures: its length, every id's check, and its projected length W. */
interface PassTiming {
  /** Pass 1 as the reconciler's reports have it. */
  pass: { startedAt?: number; endedAt?: number };
  passStart: number;
  /** Until every id was checked. */
  passMs: number | undefined;
  checkedInPass: number;
  projections: Array<{ at: number; seconds: number }>;
  wMid: number | undefined;
  wLast: number | undefined;
  wWhich: string;
  p99Age: number | undefined;
}

/** Ids checked more than once by the sweep, and why; ids sent more than once by the reconciler. */
interface SweepRepeats {
  twice: number;
  sentAgain: number;
  redelivered: number;
  raced: number;
  unexplained: number;
  alsoByUsers: number;
  sentIds: number;
  sentTwice: number;
}

/** The rows against the provider at the end, and the changes made during the run. */
interface RowsAgainstProvider {
  mismatched: Set<number>;
  changedBeforeCheck: number;
  changedAfterCheck: number;
  changedStale: number;
  otherStale: number;
  changesMade: number;
}

/** Users' send-to-done times (ms): idle (before the first tick) and during the pass. */
interface UserTimes {
  idle: number[];
  during: number[];
  idleP99: number;
  passP99: number;
}

interface PassMeasures {
  timing: PassTiming;
  repeats: SweepRepeats;
  rows: RowsAgainstProvider;
  users: UserTimes;
  cost: ReturnType<typeof passCost>;
  perMillion: number;
  dead: number;
}

async function measurePass(run: PassRun, changed: ReadonlyMap<number, number>): Promise<PassMeasures> {
  const { scale, system, end } = run;
  const timing = passTiming(run);
  const repeats = sweepRepeats(run.watch);
  const rows = await rowsAgainstProvider(run, changed);
  const users = userTimes(run.watch, timing.passStart);
  const passSeconds = (timing.passMs ?? end - timing.passStart) / 1000;
  const cost = passCost(system.meter, passSeconds, scale.meterLogs);
  const perMillion = (cost.total - cost.changedWrites) * (1_000_000 / scale.ids);
  const dead = system.sqs.size(system.dlqUrl) + system.sqs.size(system.reconcileDlqUrl!);
  return { timing, repeats, rows, users, cost, perMillion, dead };
}

function passTiming({ system, watch }: PassRun): PassTiming {
  const { passEndAt } = watch;
  const pass = passOf(system);
  const passStart = pass.startedAt ?? watch.firstTickAt;
  let checkedInPass = 0;
  for (const at of watch.firstInPass) if (at >= passStart) checkedInPass += 1;
  const passMs = passEndAt !== undefined ? passEndAt - passStart : undefined;
  const projections = projectionsOf(system, 1);
  // No projection while the pass ran (shorter than the warm-up): the length it published at its end.
  const published = pass.endedAt === undefined ? undefined : (pass.endedAt - passStart) / 1000;
  const wLast = projections.at(-1)?.seconds ?? published;
  const wWhich = projections.length > 0 ? 'the last projection while the pass ran' : 'the pass length published at its end (no projection ran)';
  const wMid = passEndAt === undefined ? undefined : projections.find((p) => p.at >= passStart + (passEndAt - passStart) / 2)?.seconds;
  const p99Age = watch.ages === undefined ? undefined : percentile(watch.ages, 0.99) / 1000;
  return { pass, passStart, passMs, checkedInPass, projections, wMid, wLast, wWhich, p99Age };
}

function sweepRepeats(watch: PassWatch): SweepRepeats {
  const { sent, sweepChecks, userChecks, sweepDeliveries, races } = watch;
  const counts: SweepRepeats = { twice: 0, sentAgain: 0, redelivered: 0, raced: 0, unexplained: 0, alsoByUsers: 0, sentIds: 0, sentTwice: 0 };
  for (let i = 0; i < watch.n; i += 1) {
    if (sent[i]! > 0) counts.sentIds += 1;
    if (sent[i]! > 1) counts.sentTwice += 1;
    if (sweepChecks[i]! > 0 && userChecks[i]! > 0) counts.alsoByUsers += 1;
    if (sweepChecks[i]! < 2) continue;
    counts.twice += 1;
    if (sent[i]! > 1) counts.sentAgain += 1;
    else if (sweepDeliveries[i]! > 1) counts.redelivered += 1;
    else if (races[i]! > 0) counts.raced += 1;
    else counts.unexplained += 1;
  }
  return counts;
}

async function rowsAgainstProvider({ system, watch, end }: PassRun, changed: ReadonlyMap<number, number>): Promise<RowsAgainstProvider> {
  const mismatched = await mismatchedRows(system);
  let changedBeforeCheck = 0;
  let changedAfterCheck = 0;
  let changedStale = 0;
  let otherStale = 0;
  for (const [i, at] of changed) {
    if (at > end) continue;
    const late = !(watch.lastCheck[i]! > at) && !(watch.firstInPass[i]! > at);
    if (late) changedAfterCheck += 1;
    else changedBeforeCheck += 1;
    if (mismatched.has(i) && !late) changedStale += 1;
  }
  for (const i of mismatched) if (!changed.has(i)) otherStale += 1;
  const changesMade = [...changed.values()].filter((at) => at <= end).length;
  return { mismatched, changedBeforeCheck, changedAfterCheck, changedStale, otherStale, changesMade };
}

function userTimes(watch: PassWatch, passStart: number): UserTimes {
  const { userDone, passEndAt } = watch;
  const idle = userDone.filter((u) => u.sentAt < watch.firstTickAt).map((u) => u.ms);
  const during = userDone.filter((u) => u.sentAt >= passStart && (passEndAt === undefined || u.sentAt <= passEndAt)).map((u) => u.ms);
  const idleP99 = percentile(Float64Array.from(idle), 0.99) / 1000;
  const passP99 = percentile(Float64Array.from(during), 0.99) / 1000;
  return { idle, during, idleP99, passP99 };
}

/** The figures of the pass, in the order they are printed (`real time` comes last, from the caller). */
function passFigures(run: PassRun, measures: PassMeasures): Record<string, number | string> {
  const { scale, system, watch, t0, preload } = run;
  const { timing, repeats, rows, users } = measures;
  const n = scale.ids;
  const { passStart, passMs } = timing;
  const hours = (ms: number | undefined): string => (ms === undefined ? 'not reached' : `${(ms / HOUR).toFixed(3)} h (${Math.round(ms / 1000)} s)`);
  const seconds = (s: number | undefined): string => (s === undefined ? 'none' : `${s.toFixed(0)} s (${(s / 3600).toFixed(3)} h)`);
  const figures: Record<string, number | string> = {
    ids: n,
    'provider limit': `${scale.limit}/s, ${scale.knownLimit ? 'known (providerRequestsPerSecond)' : 'unknown to the system'}`,
    'deployed settings': `sync queue ${scale.containers} containers, reconcile queue ${scale.reconcileContainers}, batch 10, reconciler every minute, high water ${scale.highWater ?? 'default'}`,
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

function passChecks(run: PassRun, measures: PassMeasures): Check[] {
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
    check('cost of a pass per million unchanged ids ≤ $1', `$${perMillion.toFixed(4)}`, perMillion <= 1),
    check('nothing dead-lettered', dead, dead === 0),
  ];
}

/** The cost of the sweep (the reconciler and the sync's containers on the reconcile queue) at PRICES. */
export function passCost(meter: SimMeter, passSeconds: number, logsMetered: boolean): { lines: CostLine[]; total: number; changedWrites: number } {
  const lines: CostLine[] = [];
  const sweep: MeterSource[] = ['reconciler', 'reconcile'];
  let changedWrites = 0;
  for (const source of sweep) {
    for (const [key, count] of Object.entries(meter.dynamo[source]) as Array<[string, DynamoCount]>) {
      const [operation = '', table = ''] = key.split(' ');
      const read = READS.has(operation);
      const write = WRITES.has(operation);
      if (!read && !write) {
        lines.push({ what: `DynamoDB ${key} (${who(source)})`, requests: count.requests, units: 'no request units', usd: 0 });
        continue;
      }
      // A refused conditional write is charged as a write (at least one unit).
      const units = count.capacityUnits + (write ? count.conditionFailures : 0);
      const usd = (units / 1e6) * (read ? PRICES.dynamoReadRequestUnitPerMillion : PRICES.dynamoWriteRequestUnitPerMillion);
      const refused = write && count.conditionFailures > 0 ? ` (${count.conditionFailures.toLocaleString('en-US')} refused by their condition)` : '';
      lines.push({ what: `DynamoDB ${key} (${who(source)})`, requests: count.requests, units: `${round(units, 1)} ${read ? 'RRU' : 'WRU'}${refused}`, usd });
      if (source === 'reconcile' && table === ITEMS_TABLE && write) changedWrites += usd;
    }
  }
  for (const source of sweep) {
    for (const [operation, calls] of Object.entries(meter.sqs[source])) {
      lines.push({ what: `SQS ${operation} (${who(source)})`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
    }
  }
  const events = meter.eventSource.reconcile;
  for (const [what, calls] of [
    ['ReceiveMessage', events.receives],
    ['DeleteMessageBatch', events.deleteBatches],
  ] as const) {
    lines.push({ what: `SQS ${what} (event source on the reconcile queue)`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
  }
  for (const source of sweep) {
    const lambda: InvocationCount = meter.lambda[source];
    const gbSeconds = (lambda.durationMs / 1000) * (lambda.memoryMb / 1024);
    lines.push({
      what: `Lambda ${who(source)} (${lambda.memoryMb} MB, Arm)`,
      requests: lambda.invocations,
      units: `${round(gbSeconds, 1)} GB-s`,
      usd: (lambda.invocations / 1e6) * PRICES.lambdaRequestPerMillion + gbSeconds * PRICES.lambdaArmGbSecond,
    });
    const traces = Math.min(lambda.invocations, XRAY_RESERVOIR_PER_SECOND * passSeconds);
    const traced = traces + XRAY_FIXED_RATE * Math.max(0, lambda.invocations - traces);
    lines.push({ what: `X-Ray traces ${who(source)} (default sampling, estimated)`, requests: Math.round(traced), units: `${Math.round(traced)} traces`, usd: (traced / 1e6) * PRICES.xrayTracePerMillion });
  }
  lines.push({
    what: 'EventBridge Scheduler (reconciler ticks)',
    requests: meter.lambda.reconciler.invocations,
    units: `${meter.lambda.reconciler.invocations} invocations`,
    usd: (meter.lambda.reconciler.invocations / 1e6) * PRICES.schedulerInvocationPerMillion,
  });
  if (logsMetered) {
    const bytes = sweep.reduce((sum, source) => sum + Object.values(meter.logs[source]).reduce((total, count) => total + count.bytes, 0), 0);
    lines.push({ what: 'CloudWatch Logs ingestion (log lines and EMF metrics of both)', requests: 0, units: `${round(bytes / 1e6, 1)} MB`, usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb });
  }
  return { lines, total: lines.reduce((sum, line) => sum + line.usd, 0), changedWrites };
}

function who(source: MeterSource): string {
  return source === 'reconciler' ? 'reconciler' : source === 'reconcile' ? 'sync on the reconcile queue' : 'sync on the sync queue';
}

/** Pass 1 as the reconciler's tick reports have it. */
function passOf(system: SimSystem): { startedAt?: number; endedAt?: number } {
  const reports = system.ticks.flatMap((t) => (t.report && t.report.pass === 1 ? [t.report] : []));
  const started = reports[0]?.passStartedAt;
  const ended = reports.find((r) => r.passLengthSeconds !== undefined);
  return {
    ...(started !== undefined ? { startedAt: started } : {}),
    ...(started !== undefined && ended ? { endedAt: started + ended.passLengthSeconds! * 1000 } : {}),
  };
}

/** The projected pass lengths W published while pass `pass` was running (seconds), in order. */
function projectionsOf(system: SimSystem, pass: number): Array<{ at: number; seconds: number }> {
  return system.ticks.flatMap((t) =>
    t.report && t.report.pass === pass && t.report.state === 'running' && t.report.projectedPassSeconds !== undefined
      ? [{ at: t.endedAt, seconds: t.report.projectedPassSeconds }]
      : [],
  );
}

function lastProjection(system: SimSystem, pass: number): number | undefined {
  return projectionsOf(system, pass).at(-1)?.seconds;
}

/** Indexes (in system.ids) of the rows whose revision (or liveness) is not the provider's. */
async function mismatchedRows(system: SimSystem): Promise<Set<number>> {
  const client = system.dynamo.client();
  const rows = new Map<string, { revision?: string; deleted: boolean }>();
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new ScanCommand({
        TableName: ITEMS_TABLE,
        ConsistentRead: true,
        ProjectionExpression: '#id, #revision, #deleted',
        ExpressionAttributeNames: { '#id': 'id', '#revision': 'revision', '#deleted': 'deleted' },
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const row of page.Items ?? []) {
      const revision = row['revision']?.S;
      rows.set(row['id']?.S ?? '', { ...(revision !== undefined ? { revision } : {}), deleted: row['deleted']?.BOOL === true });
    }
    start = page.LastEvaluatedKey;
  } while (start);
  client.destroy();
  const stale = new Set<number>();
  system.ids.forEach((id, i) => {
    const item = system.provider.getItem(id);
    const row = rows.get(id);
    const live = item !== undefined;
    if (row === undefined || row.deleted === live || (live && row.revision !== revisionText(item['revision']))) stale.add(i);
  });
  return stale;
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

/** Nearest-rank percentile; 0 for no values. */
export function percentile(values: Float64Array, p: number): number {
  if (values.length === 0) return 0;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
