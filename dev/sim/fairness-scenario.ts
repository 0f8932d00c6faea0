/**
 * Fairness between connections, in virtual time (system.ts with `accounts` and `reconcile`: the real
 * item-sync handlers on both queues with their deployed concurrency, the real reconciler on its
 * schedule, the real pace, provider client and DynamoDB adapters on DynamoDB Local, the SQS model with
 * fair queues and both redrive policies).
 *
 * Quiet accounts each send one new id a minute to the sync queue, as users do (`{"connection",
 * "id"}` in the connection's message group: the enqueue tool's sending). The reconciler sweeps the
 * rows preloaded for them, pass after pass (its passes back to back: a table whose pass fills the
 * day). After a warm-up (each quiet account's first id: its first token) and `idleMinutes` of that alone
 * (idle), one more account, the connection `default`, backfills `backfillIds` ids at once, in one of
 * three ways (`BackfillLane`):
 * - `background`: as `npm run enqueue -- --backfill` sends it, to the reconcile queue with `lane` =
 *   `background` (the design);
 * - `users`: to the sync queue, in its message group (fair queues alone);
 * - `users-without-groups`: to the sync queue without a message group (neither).
 * The run ends once every backfill id is done (and 10 s more).
 *
 * Measured per run: the quiet accounts' time from send to their record done (its row written), p50
 * and p99, idle and during the backfill; the backfill's throughput and share of L; 429s (and the
 * provider's item requests during the backfill, with those it answered 429); dead letters; the
 * reconciler's ids sent during the backfill.
 */
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { backfillMessages, enqueueMessages, messageBody, type EnqueueMessage } from '../../tools/enqueue/send.js';
import type { ProviderModel } from '../simulator/provider-model.js';
import { batchWrite, itemRows } from './preload.js';
import { quantiles, quietIdDone, quietLeft, quietTimes, sendQuietIds, type QuietWatch } from './quiet-accounts.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { atLimit, startSystem, type SimSystem, type SystemObserver } from './system.js';

const SECOND = 1_000;
const MINUTE = 60_000;

/** How the backfill is sent (above). */
export type BackfillLane = 'background' | 'users' | 'users-without-groups';

export interface FairnessScale {
  /** Accounts that each send one id every `sendEverySeconds`. */
  quietAccounts: number;
  sendEverySeconds: number;
  /** Rows preloaded for each quiet account: what the reconciler sweeps. */
  sweptEach: number;
  /** Ids of the backfilling account (the connection `default`), sent at once. */
  backfillIds: number;
  /** The provider's limit L, requests a second (one bucket, 429 past it). */
  limit: number;
  /** L told to the system (providerRequestsPerSecond); otherwise the pace has to find it. */
  limitKnown: boolean;
  /** Quiet accounts alone (with the sweep) before the backfill, after the warm-up (their first round of ids). */
  idleMinutes: number;
  /** The context key freshnessHours (above 0: the reconciler deployed). */
  freshnessHours: number;
  /**
   * The reconciler's passes back to back (its FRESHNESS_HOURS alone 0, dev/system/tuning.ts): the
   * sweep runs throughout, as in a table whose pass fills `freshnessHours`. Otherwise one pass, then
   * rest.
   */
  passesBackToBack: boolean;
  /** The run stops this long after the backfill started, done or not. */
  maxBackfillMinutes: number;
  /**
   * The backfilling account's own users, from the warm-up on: an id every `everyMs`, and every
   * `burstEverySeconds` a burst of `burstIds` at once, each a new id of that account sent to the sync
   * queue in its message group (busy-scenario.ts). None when undefined.
   */
  busyUsers?: BusyUsers;
  providerLatencyMs: number;
  seed: number;
}

/** The backfilling account's users (FairnessScale.busyUsers). */
export interface BusyUsers {
  everyMs: number;
  burstIds: number;
  burstEverySeconds: number;
}

/** One run: a system, its idle minutes, one backfill. */
export interface FairnessRun {
  lane: BackfillLane;
  /** The quiet accounts' send-to-done times, ms, of the ids sent while idle and during the backfill. */
  idle: Float64Array;
  during: Float64Array;
  /** Quiet ids sent (up to 10 s before the end) and never done. */
  quietLeft: number;
  /** The backfilling account's users' ids (FairnessScale.busyUsers): like the quiet accounts', and those done in the background lane. */
  busy?: { idle: Float64Array; during: Float64Array; left: number; idleInBackground: number; duringInBackground: number };
  backfill: { ids: number; done: number; seconds: number; limitFound?: LimitFound };
  /** Provider answers 429. */
  rateLimited: number;
  /** The provider's item requests while the backfill ran, and those it answered 429. */
  providerDuring: ProviderCounts;
  /** Messages in the sync and reconcile dead-letter queues at the end. */
  deadLettered: number;
  /** Ids the reconciler sent while the backfill ran. */
  reconcilerSentDuring: number;
  virtualMs: number;
  realMs: number;
}

/** The backfill once the pace found the provider's limit (its first 429 during the backfill): from then on, to its last id done. */
export interface LimitFound {
  /** Seconds from the backfill's send to the first 429. */
  after: number;
  /** Backfill ids done from then on, in how many seconds. */
  done: number;
  seconds: number;
}

/** The provider's item requests so far and those it answered 429, as the provider model counts them. */
export interface ProviderCounts {
  requests: number;
  rateLimited: number;
}

/** The send-to-done times and the backfill's progress, as the sync's log lines tell them. */
interface Watch extends QuietWatch {
  /** The backfilling account's users' ids (done in either lane), and when those done in the background lane were sent. */
  busy: QuietWatch & { sentOfBackground: number[] };
  backfillAt: number;
  backfillIds: number;
  backfillDone: Set<string>;
  lastBackfillDoneAt: number;
  /** When each backfill id was done, in order. */
  backfillDoneAt: number[];
  /** The provider's first 429 since the backfill's send. */
  first429At: number | undefined;
  /** The provider's counts now (once the system runs), at the backfill's send and at its last id done. */
  providerCounts: () => ProviderCounts;
  providerAtBackfill: ProviderCounts;
  providerAtBackfillDone: ProviderCounts | undefined;
  /** Each reconciler send: when, how many ids. */
  reconcileSends: Array<{ at: number; ids: number }>;
}

/** One run of `lane`. `progress` gets a line every virtual minute of the backfill. */
export async function fairnessRun(scale: FairnessScale, lane: BackfillLane, progress: (line: string) => void = () => undefined): Promise<FairnessRun> {
  const realStart = Date.now();
  // The warm-up: every quiet account's first id (its connection's first access token), not measured.
  const warmupMs = scale.sendEverySeconds * SECOND;
  const watch: Watch = {
    pending: new Map(),
    quietDone: [],
    busy: { pending: new Map(), quietDone: [], sentOfBackground: [] },
    backfillAt: Number.POSITIVE_INFINITY,
    backfillIds: scale.backfillIds,
    backfillDone: new Set(),
    lastBackfillDoneAt: 0,
    backfillDoneAt: [],
    first429At: undefined,
    providerCounts: () => ({ requests: 0, rateLimited: 0 }),
    providerAtBackfill: { requests: 0, rateLimited: 0 },
    providerAtBackfillDone: undefined,
    reconcileSends: [],
  };
  const sendsEach = Math.ceil((warmupMs + scale.idleMinutes * MINUTE + scale.maxBackfillMinutes * MINUTE) / (scale.sendEverySeconds * SECOND)) + 1;
  const busyIds = scale.busyUsers ? busyIdCount(scale.busyUsers, warmupMs + scale.idleMinutes * MINUTE + scale.maxBackfillMinutes * MINUTE) : 0;
  const system = await startSystem({
    ids: scale.backfillIds + busyIds,
    accounts: { count: scale.quietAccounts, idsEach: sendsEach + scale.sweptEach },
    ...atLimit(scale, scale.limitKnown),
    ...(scale.passesBackToBack ? { tuning: { reconcilerFreshnessHours: 0 } } : {}),
    reconcile: { freshnessHours: scale.freshnessHours, firstTickAfterMs: 0 },
    observe: observer(watch),
  });
  watch.providerCounts = () => providerCounts(system.provider);
  try {
    const quiet = system.connectionIds.filter((connection) => connection !== DEFAULT_CONNECTION);
    await preloadSwept(system, quiet, sendsEach);
    const t0 = system.clock.ms();
    const sqs = system.local.aws.sqsClient();
    const send = { sleep: system.clock.sleep };
    sendQuietIds(system, scale.sendEverySeconds, quiet, sendsEach, watch, t0 + warmupMs, (messages) => void enqueueMessages(sqs, system.queueUrl, messages, send));
    const backfillAt = t0 + warmupMs + scale.idleMinutes * MINUTE;
    const hardStop = backfillAt + scale.maxBackfillMinutes * MINUTE;
    const backfill: EnqueueMessage[] = system.ids.slice(0, scale.backfillIds).map((id) => ({ connection: DEFAULT_CONNECTION, id }));
    if (scale.busyUsers) {
      sendBusyIds(system, scale.busyUsers, system.ids.slice(scale.backfillIds), watch.busy, (messages) => void enqueueMessages(sqs, system.queueUrl, messages, send));
    }
    system.clock.at(backfillAt, () => {
      watch.backfillAt = backfillAt;
      watch.providerAtBackfill = watch.providerCounts();
      if (lane === 'background') void backfillMessages(sqs, system.reconcileQueueUrl, backfill, send);
      else if (lane === 'users') void enqueueMessages(sqs, system.queueUrl, backfill, send);
      else for (const { connection, id } of backfill) system.sqs.send(system.queueUrl, { body: messageBody(id, connection) });
    });
    reportProgress(system, scale, watch, backfillAt, realStart, progress);
    await system.pollUntil(() => {
      const now = system.clock.ms();
      const done = watch.backfillDone.size >= scale.backfillIds && now >= watch.lastBackfillDoneAt + 10 * SECOND;
      return done || now >= hardStop;
    });
    const dead = system.sqs.size(system.dlqUrl) + (system.reconcileDlqUrl ? system.sqs.size(system.reconcileDlqUrl) : 0);
    // The backfill runs from its send to its last id done; what was sent after it is neither idle nor during.
    const backfillEnd = watch.backfillDone.size >= scale.backfillIds ? watch.lastBackfillDoneAt : system.clock.ms();
    const providerAtEnd = watch.providerAtBackfillDone ?? watch.providerCounts();
    return {
      lane,
      idle: quietTimes(watch, t0 + warmupMs, backfillAt),
      during: quietTimes(watch, backfillAt, backfillEnd),
      quietLeft: quietLeft(watch, system.clock.ms()),
      ...(scale.busyUsers
        ? {
            busy: {
              idle: quietTimes(watch.busy, t0 + warmupMs, backfillAt),
              during: quietTimes(watch.busy, backfillAt, backfillEnd),
              left: quietLeft(watch.busy, system.clock.ms()),
              idleInBackground: watch.busy.sentOfBackground.filter((at) => at >= t0 + warmupMs && at < backfillAt).length,
              duringInBackground: watch.busy.sentOfBackground.filter((at) => at >= backfillAt && at < backfillEnd).length,
            },
          }
        : {}),
      backfill: {
        ids: scale.backfillIds,
        done: watch.backfillDone.size,
        seconds: (watch.lastBackfillDoneAt - backfillAt) / SECOND,
        ...(watch.first429At !== undefined && watch.first429At < watch.lastBackfillDoneAt
          ? {
              limitFound: {
                after: (watch.first429At - backfillAt) / SECOND,
                done: watch.backfillDoneAt.filter((at) => at > watch.first429At!).length,
                seconds: (watch.lastBackfillDoneAt - watch.first429At) / SECOND,
              },
            }
          : {}),
      },
      rateLimited: system.provider.rateLimited,
      providerDuring: {
        requests: providerAtEnd.requests - watch.providerAtBackfill.requests,
        rateLimited: providerAtEnd.rateLimited - watch.providerAtBackfill.rateLimited,
      },
      deadLettered: dead,
      reconcilerSentDuring: watch.reconcileSends.filter(({ at }) => at >= backfillAt && at <= backfillEnd).reduce((sum, { ids }) => sum + ids, 0),
      virtualMs: system.clock.ms() - t0,
      realMs: Date.now() - realStart,
    };
  } finally {
    await system.close();
  }
}

/**
 * The sync's `record done` lines: a quiet id's send-to-done time (by when it was sent), a backfill id
 * done (the last one: the provider's counts then).
 */
function observer(watch: Watch): SystemObserver {
  return {
    itemLog(source, message, itemId, at, connection) {
      if (message !== 'record done' || connection === undefined) return;
      if (connection === DEFAULT_CONNECTION) {
        const sentAt = watch.busy.pending.get(`${connection}\n${itemId}`);
        if (sentAt !== undefined) {
          // A busy user's id, done in either lane: one done in the background lane was moved there.
          watch.busy.pending.delete(`${connection}\n${itemId}`);
          watch.busy.quietDone.push({ sentAt, ms: at - sentAt });
          if (source !== 'sync') watch.busy.sentOfBackground.push(sentAt);
          return;
        }
        if (at >= watch.backfillAt && !watch.backfillDone.has(itemId)) {
          watch.backfillDone.add(itemId);
          watch.lastBackfillDoneAt = at;
          watch.backfillDoneAt.push(at);
          if (watch.backfillDone.size === watch.backfillIds) watch.providerAtBackfillDone = watch.providerCounts();
        }
        return;
      }
      quietIdDone(watch, source, itemId, at, connection);
    },
    providerAnswer(_source, _itemId, status, at) {
      if (status === 429 && at >= watch.backfillAt && watch.first429At === undefined) watch.first429At = at;
    },
    reconcileSent(ids, at) {
      watch.reconcileSends.push({ at, ids: ids.length });
    },
  };
}

/** Every account's item requests the provider received so far, and its 429s (the rate limit's). */
function providerCounts(provider: ProviderModel): ProviderCounts {
  let requests = 0;
  for (const account of provider.accountIds()) requests += provider.accountCounters(account).itemRequests;
  return { requests, rateLimited: provider.rateLimited };
}

/**
 * Rows of each quiet account's ids after the first `sendsEach` (the ones its users never send), as
 * after a first sync: the reconciler's sweep.
 */
async function preloadSwept(system: SimSystem, quiet: readonly string[], sendsEach: number): Promise<void> {
  const table = system.local.names.itemsTable;
  const client = system.dynamo.client();
  try {
    for (const connection of quiet) {
      const ids = system.provider.account(connection).itemIds().slice(sendsEach);
      await batchWrite(client, table, await itemRows(system.provider, ids, system.clock.now().toISOString(), table, system.local.config.revisionField, connection));
    }
  } finally {
    client.destroy();
  }
}

/** The ids the busy users send in `ms`: one every `everyMs`, and a burst every `burstEverySeconds`. */
function busyIdCount(users: BusyUsers, ms: number): number {
  return Math.ceil(ms / users.everyMs) + Math.ceil(ms / (users.burstEverySeconds * SECOND)) * users.burstIds + 1;
}

/**
 * The backfilling account's users send `ids` in order: one every `everyMs` and, every
 * `burstEverySeconds` (the first half an interval in), `burstIds` at once; each is watched (`watch`,
 * as the quiet accounts' ids are: quietTimes picks the ones sent in a phase), so that none is taken
 * for a backfill id.
 */
function sendBusyIds(system: SimSystem, users: BusyUsers, ids: readonly string[], watch: QuietWatch, send: (messages: EnqueueMessage[]) => void): void {
  let next = 0;
  const sendIds = (count: number): void => {
    const now = system.clock.ms();
    const messages = ids.slice(next, next + count).map((id) => ({ connection: DEFAULT_CONNECTION, id }));
    next += messages.length;
    if (messages.length === 0) return;
    for (const { id } of messages) watch.pending.set(`${DEFAULT_CONNECTION}\n${id}`, now);
    send(messages);
  };
  const steady = (): void => {
    sendIds(1);
    if (next < ids.length) system.clock.at(system.clock.ms() + users.everyMs, steady);
  };
  const burstMs = users.burstEverySeconds * SECOND;
  const burst = (): void => {
    sendIds(users.burstIds);
    if (next < ids.length) system.clock.at(system.clock.ms() + burstMs, burst);
  };
  system.clock.at(system.clock.ms(), steady);
  system.clock.at(system.clock.ms() + burstMs / 2, burst);
}

/** A line every virtual minute once the backfill started. */
function reportProgress(system: SimSystem, scale: FairnessScale, watch: Watch, backfillAt: number, realStart: number, progress: (line: string) => void): void {
  const look = (): void => {
    if (watch.backfillDone.size >= scale.backfillIds) return;
    const minutes = (system.clock.ms() - backfillAt) / MINUTE;
    progress(
      `${minutes.toFixed(0)} min into the backfill, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: ` +
        `${watch.backfillDone.size.toLocaleString('en-US')} of ${scale.backfillIds.toLocaleString('en-US')} done, ` +
        `sync queue ${system.sqs.size(system.queueUrl)}, reconcile queue ${system.sqs.size(system.reconcileQueueUrl!)}`,
    );
    system.clock.at(system.clock.ms() + MINUTE, look);
  };
  system.clock.at(backfillAt + MINUTE, look);
}

/** 100 quiet accounts (one id a minute each) beside a backfill of 100,000 ids, L = 200/s known; the sweep throughout. */
export const FAIRNESS_FULL: FairnessScale = {
  quietAccounts: 100,
  sendEverySeconds: 60,
  sweptEach: 100,
  backfillIds: 100_000,
  limit: 200,
  limitKnown: true,
  idleMinutes: 5,
  freshnessHours: 24,
  passesBackToBack: true,
  maxBackfillMinutes: 60,
  providerLatencyMs: 50,
  seed: 11,
};

/**
 * What `npm test` runs: 10 quiet accounts sending together twice the full scale's ids (one every 3 s
 * each, so that the short backfill meets 50 of them), a backfill of 1,000 ids at L = 100/s, one pass
 * of the sweep: seconds of real time.
 */
export const FAIRNESS_SHORT: FairnessScale = {
  ...FAIRNESS_FULL,
  quietAccounts: 10,
  sendEverySeconds: 3,
  sweptEach: 20,
  backfillIds: 1_000,
  limit: 100,
  idleMinutes: 0.5,
  passesBackToBack: false,
  maxBackfillMinutes: 10,
  seed: 5,
};

/** The goal: the quiet accounts' p99 during a `--backfill` at most this many times their idle p99. */
export const FAIRNESS_P99_FACTOR = 2;

/** How each lane is named in the figures. */
export const LANE_LABELS: Readonly<Record<BackfillLane, string>> = {
  background: '--backfill (the reconcile queue, background lane)',
  users: 'without --backfill (the sync queue, fair queues alone)',
  'users-without-groups': 'without --backfill and without message groups (the sync queue as before)',
};

/** The scenario: one run per lane (the short scale: `background` only), its figures and checks. */
export function fairnessScenario(
  scale: FairnessScale,
  lanes: readonly BackfillLane[] = ['background', 'users', 'users-without-groups'],
  progress: (line: string) => void = () => undefined,
): Promise<ScenarioResult> {
  const name =
    `fairness: ${scale.quietAccounts} quiet accounts (an id every ${scale.sendEverySeconds} s each) beside a backfill of ` +
    `${scale.backfillIds.toLocaleString('en-US')} ids, L = ${scale.limit}/s ${scale.limitKnown ? 'known' : 'unknown'}`;
  return timed(name, async () => {
    const runs: FairnessRun[] = [];
    for (const lane of lanes) {
      progress(`${LANE_LABELS[lane]}: starting`);
      runs.push(await fairnessRun(scale, lane, (line) => progress(`${lane}: ${line}`)));
    }
    const figures: Record<string, number | string> = {
      'quiet accounts': `${scale.quietAccounts}, one new id each every ${scale.sendEverySeconds} s to the sync queue (${round(scale.quietAccounts / scale.sendEverySeconds, 2)} ids/s together)`,
      backfill: `${scale.backfillIds.toLocaleString('en-US')} ids of one more account, sent at once after ${scale.idleMinutes} idle minutes (and a warm-up: each quiet account's first id)`,
      'provider limit': `${scale.limit}/s, ${scale.limitKnown ? 'known (providerRequestsPerSecond)' : 'unknown (the pace finds it)'}`,
      sweep: `${(scale.quietAccounts * scale.sweptEach).toLocaleString('en-US')} rows of the quiet accounts, freshnessHours ${scale.freshnessHours}, ${scale.passesBackToBack ? 'passes back to back' : 'one pass'}`,
    };
    const checks: Check[] = [];
    for (const run of runs) runFigures(figures, checks, run, scale);
    return { virtualMs: runs.reduce((sum, run) => sum + run.virtualMs, 0), figures, checks };
  });
}

function runFigures(figures: Record<string, number | string>, checks: Check[], run: FairnessRun, scale: FairnessScale): void {
  const label = LANE_LABELS[run.lane];
  const idle = quantiles(run.idle);
  const during = quantiles(run.during);
  const line = (n: number, q: { p50: number; p99: number; max: number }): string => `${n} ids: p50 ${q.p50} s, p99 ${q.p99} s, max ${q.max} s`;
  const ratio = idle.p99 > 0 ? round(during.p99 / idle.p99, 2) : Number.POSITIVE_INFINITY;
  const rate = run.backfill.seconds > 0 ? run.backfill.done / run.backfill.seconds : 0;
  figures[`${label}: quiet ids sent idle, send to done`] = line(run.idle.length, idle);
  figures[`${label}: quiet ids sent during the backfill`] = line(run.during.length, during);
  figures[`${label}: p99 during ÷ p99 idle`] = ratio;
  figures[`${label}: backfill`] =
    `${run.backfill.done.toLocaleString('en-US')} of ${run.backfill.ids.toLocaleString('en-US')} done in ${round(run.backfill.seconds, 1)} s: ` +
    `${round(rate, 1)} ids/s, ${round((rate / scale.limit) * 100, 1)}% of L`;
  figures[`${label}: ids the reconciler sent during the backfill`] = run.reconcilerSentDuring;
  figures[`${label}: 429s`] = run.rateLimited;
  figures[`${label}: dead-lettered`] = run.deadLettered;
  figures[`${label}: real time`] = `${round(run.realMs / 1000, 1)} s`;
  if (run.lane === 'background') {
    checks.push(
      check(
        `--backfill: the quiet accounts' p99 during the backfill at most ${FAIRNESS_P99_FACTOR}× their idle p99`,
        `${during.p99} s against ${idle.p99} s (${ratio}×)`,
        run.idle.length > 0 && run.during.length > 0 && during.p99 <= FAIRNESS_P99_FACTOR * idle.p99,
      ),
    );
  }
  checks.push(
    check(`${label}: every backfill id done`, `${run.backfill.done} of ${run.backfill.ids}`, run.backfill.done === run.backfill.ids),
    check(`${label}: every quiet id done`, `${run.quietLeft} left`, run.quietLeft === 0),
    check(`${label}: nothing dead-lettered`, run.deadLettered, run.deadLettered === 0),
  );
  if (scale.limitKnown) checks.push(check(`${label}: no 429 (the limit is known)`, run.rateLimited, run.rateLimited === 0));
}
