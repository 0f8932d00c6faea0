/**
 * The provider pace, measured in virtual time (system.ts: the real handlers, pace, provider client,
 * DynamoDB adapters on DynamoDB Local, the SQS model with the deployed redrive policy):
 *
 * - unknown limit L: the pace finds it (429s in the first minutes and at steady state, use of L),
 *   L halves (how long 429s go on), L doubles (how long until 80% of the new L);
 * - known limit (providerRequestsPerSecond = L): use of L, 429s;
 * - a long provider outage and a long token revocation: requests a minute while it lasts, ids
 *   dead-lettered or lost, and the drain after recovery. A refused refresh token makes the
 *   connection `failing`: its records wait (CONNECTION_WAIT_SECONDS between looks) and the
 *   refresher tries it again once an hour, which is when it recovers once the provider takes the
 *   token again.
 *
 * Every figure is virtual time; `checks` compares them with the goals.
 */
import { validateItem } from '../../functions/item-sync/item.js';
import { loadSyncConfig } from '../../functions/shared/config.js';
import { FAILING_RETRY_MS } from '../../functions/token-refresher/run.js';
import { ON_DEMAND_GRACE_MS } from '../../functions/shared/connections/connection-access.js';
import { systemConfig } from '../system/config.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { parseJson } from '../../functions/shared/json.js';
import type { RecordedRequest } from '../simulator/provider-model.js';
import { check, timed, type ScenarioResult } from './scenario.js';

export type { Check, ScenarioResult } from './scenario.js';
import { startSystem, type SimSystem, type SystemOptions } from './system.js';


export interface Scale {
  /** The provider's limit L, requests a second. */
  limit: number;
  ids: number;
  /** Sync invocations at once (the context key syncMaxConcurrency). */
  containers: number;
  /** Phase lengths of the unknown-limit scenario, minutes: warm-up, steady, after halving, after doubling. */
  phaseMinutes: [number, number, number, number];
  /** Outage length, minutes. */
  outageMinutes: number;
  seed: number;
}

/** L = 50/s, 2,000 ids, the deployed syncMaxConcurrency, 6-hour outages. */
export const FULL_SCALE: Scale = { limit: 50, ids: 2_000, containers: systemConfig().syncMaxConcurrency, phaseMinutes: [5, 5, 5, 10], outageMinutes: 360, seed: 11 };
/**
 * What `npm test` runs: the same scenarios, shorter and smaller; the outage outlasts, by a minute,
 * the age at which the item sync refreshes a token on demand (tokenRefreshMinutes, as deployed, plus
 * ON_DEMAND_GRACE_MS), so the refreshes an outage makes fail are counted against its requests a minute.
 */
export const SHORT_SCALE: Scale = {
  limit: 20,
  ids: 100,
  containers: 3,
  phaseMinutes: [1, 1, 1, 2],
  outageMinutes: systemConfig().tokenRefreshMinutes + ON_DEMAND_GRACE_MS / 60_000 + 1,
  seed: 5,
};

const MINUTE = 60_000;
const RETRY_AFTER_SECONDS = 1;

function systemOptions(scale: Scale, extra: Partial<SystemOptions> = {}): SystemOptions {
  return {
    ids: scale.ids,
    seed: scale.seed,
    rateLimit: { requestsPerSecond: scale.limit, retryAfterSeconds: RETRY_AFTER_SECONDS },
    syncMaxConcurrency: scale.containers,
    providerLatencyMs: 50,
    ...extra,
  };
}

/** Keeps about `backlog` messages visible in the sync queue (users sending ids, round and round the tree). */
function keepFed(system: SimSystem, backlog: number, until: () => boolean): void {
  let next = 0;
  const tick = (): void => {
    if (until()) return;
    const { visible, delayed } = system.sqs.counts(system.queueUrl);
    for (let n = visible + delayed; n < backlog; n += 1) {
      system.sqs.send(system.queueUrl, { body: JSON.stringify({ id: system.ids[next % system.ids.length] }) });
      next += 1;
    }
    system.clock.at(system.clock.ms() + 500, tick);
  };
  tick();
}

function enqueueAll(system: SimSystem): void {
  for (const id of system.ids) system.sqs.send(system.queueUrl, { body: JSON.stringify({ id }) });
}

function itemRequests(system: SimSystem, from: number, to: number): RecordedRequest[] {
  return system.provider.requests.filter((r) => r.endpoint === 'items' && (r.receivedAt ?? 0) >= from && (r.receivedAt ?? 0) < to);
}

/** Requests that reached the provider inside the Retry-After window of an earlier 429. */
function insideRetryAfter(requests: readonly RecordedRequest[]): number {
  let blockedUntil = 0;
  let inside = 0;
  for (const r of [...requests].sort((a, b) => (a.receivedAt ?? 0) - (b.receivedAt ?? 0))) {
    const at = r.receivedAt ?? 0;
    if (at < blockedUntil) inside += 1;
    if (r.status === 429) blockedUntil = Math.max(blockedUntil, (r.respondedAt ?? at) + RETRY_AFTER_SECONDS * 1000);
  }
  return inside;
}

function minutes(n: number): string {
  return n === 1 ? 'minute' : `${n} minutes`;
}

function share(part: number, whole: number): number {
  return whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 100;
}

/** Answered (not 429) requests a second over [from, to), as a share of `limit`. */
function useOf(requests: readonly RecordedRequest[], from: number, to: number, limit: number): number {
  const served = requests.filter((r) => r.status !== 429 && r.status !== 0).length;
  return share(served / ((to - from) / 1000), limit);
}


/** The unknown limit: found, kept, followed down and up. */
export function unknownLimit(scale: Scale): Promise<ScenarioResult> {
  return timed(`unknown limit L = ${scale.limit}/s`, async () => {
    const system = await startSystem(systemOptions(scale));
    try {
      const t0 = system.clock.ms();
      const [warm, steady, down, up] = scale.phaseMinutes.map((m) => m * MINUTE) as [number, number, number, number];
      const halveAt = t0 + warm + steady;
      const doubleAt = halveAt + down;
      const end = doubleAt + up;
      system.clock.at(halveAt, () => system.provider.setRateLimit({ requestsPerSecond: scale.limit / 2, retryAfterSeconds: RETRY_AFTER_SECONDS }));
      system.clock.at(doubleAt, () => system.provider.setRateLimit({ requestsPerSecond: scale.limit, retryAfterSeconds: RETRY_AFTER_SECONDS }));
      keepFed(system, 200, () => system.clock.ms() >= end);
      await system.pollUntil(() => system.clock.ms() >= end);

      const all = itemRequests(system, t0, end);
      // The goals' windows, as long as the phases allow (a short run's are shorter).
      const firstMinutes = Math.min(5, scale.phaseMinutes[0]);
      const reachMinutes = Math.min(5, scale.phaseMinutes[3]);
      const first5 = itemRequests(system, t0, t0 + firstMinutes * MINUTE);
      const steadyRequests = itemRequests(system, t0 + warm, halveAt);
      const after = itemRequests(system, halveAt, doubleAt);
      const quietAfter = secondsUntilQuiet(after, halveAt);
      const reach = secondsToReach(itemRequests(system, doubleAt, end), doubleAt, 0.8 * scale.limit);
      const dead = system.sqs.size(system.dlqUrl);
      const figures = {
        requests: all.length,
        [`first ${firstMinutes} min: 429s`]: `${share(first5.filter((r) => r.status === 429).length, first5.length)}%`,
        'steady state: use of L': `${useOf(steadyRequests, t0 + warm, halveAt, scale.limit)}%`,
        'steady state: 429s': `${share(steadyRequests.filter((r) => r.status === 429).length, steadyRequests.length)}%`,
        'requests inside a Retry-After window': insideRetryAfter(all),
        'L halves: 429s stop after (s)': quietAfter,
        'L halves, afterwards: 429s': `${share(after.filter((r) => (r.receivedAt ?? 0) >= halveAt + quietAfter * 1000 && r.status === 429).length, after.length)}%`,
        'L doubles: 80% of the new L after (s)': reach === undefined ? 'never' : reach,
        'dead-lettered': dead,
      };
      return {
        virtualMs: end - t0,
        figures,
        checks: [
          check(`first ${minutes(firstMinutes)}: at most 3% of requests answered 429`, figures[`first ${firstMinutes} min: 429s`]!, parse(String(figures[`first ${firstMinutes} min: 429s`])) <= 3),
          check('steady state: at least 85% of L used', figures['steady state: use of L'], parse(figures['steady state: use of L']) >= 85),
          check('steady state: at most 1% answered 429', figures['steady state: 429s'], parse(figures['steady state: 429s']) <= 1),
          check('L halves: 429s stop within 30 s', figures['L halves: 429s stop after (s)'], figures['L halves: 429s stop after (s)'] <= 30),
          check(`L doubles: 80% of the new L within ${minutes(reachMinutes)}`, String(figures['L doubles: 80% of the new L after (s)']), reach !== undefined && reach <= reachMinutes * 60),
          check('no id dead-lettered', dead, dead === 0),
        ],
      };
    } finally {
      await system.close();
    }
  });
}

/** The operator's providerRequestsPerSecond = L. */
export function knownLimit(scale: Scale): Promise<ScenarioResult> {
  return timed(`known limit providerRequestsPerSecond = L = ${scale.limit}/s`, async () => {
    const system = await startSystem(systemOptions(scale, { knownLimit: scale.limit }));
    try {
      const t0 = system.clock.ms();
      const end = t0 + (scale.phaseMinutes[0] + scale.phaseMinutes[1]) * MINUTE;
      keepFed(system, 200, () => system.clock.ms() >= end);
      await system.pollUntil(() => system.clock.ms() >= end);
      const all = itemRequests(system, t0, end);
      const limited = all.filter((r) => r.status === 429).length;
      const use = useOf(all, t0, end, scale.limit);
      return {
        virtualMs: end - t0,
        figures: { requests: all.length, 'use of L': `${use}%`, '429s': limited },
        checks: [check('at least 95% of L used', `${use}%`, use >= 95), check('no 429', limited, limited === 0)],
      };
    } finally {
      await system.close();
    }
  });
}

export type OutageKind = 'provider' | 'token';

/**
 * Every id synced, then an outage (`provider`: every request 503; `token`: the access token revoked
 * and the refresh token refused) while users send every id again and 10% of the items change; then
 * recovery and the drain.
 */
export function outage(scale: Scale, kind: OutageKind): Promise<ScenarioResult> {
  const what = kind === 'provider' ? 'provider outage (every request 503)' : 'token revoked (refresh refused)';
  return timed(`${what} for ${scale.outageMinutes} min`, async () => {
    const system = await startSystem(systemOptions(scale));
    try {
      const t0 = system.clock.ms();
      enqueueAll(system);
      const start = t0 + 2 * MINUTE;
      const stop = start + scale.outageMinutes * MINUTE;
      scheduleOutage(system, kind, start, stop);
      // A failing connection recovers at the refresher's first run an hour after its last refusal.
      const refresherEvery = system.local.deployment.schedule.refresherEveryMinutes * MINUTE;
      const settleMs = kind === 'token' ? FAILING_RETRY_MS + refresherEvery + 60 * MINUTE : 60 * MINUTE;
      const emptySince = await runUntilDrained(system, stop, settleMs);
      const end = system.clock.ms();
      const { figures, checks } = await outageFigures(system, scale, kind, { start, stop, drained: emptySince ?? end });
      return { virtualMs: end - t0, figures, checks };
    } finally {
      await system.close();
    }
  });
}

/** The outage from `start` to `stop`; a minute in, 10% of the items change and users send every id again. */
function scheduleOutage(system: SimSystem, kind: OutageKind, start: number, stop: number): void {
  let clear: () => void = () => undefined;
  system.clock.at(start, () => {
    if (kind === 'provider') {
      clear = system.provider.addFault({ endpoint: 'any', fault: { kind: 'status', status: 503 } });
    } else {
      system.provider.revokeAccessTokens();
      clear = system.provider.addFault({ endpoint: 'token', fault: { kind: 'status', status: 401 } });
    }
  });
  system.clock.at(start + MINUTE, () => {
    for (const id of system.ids.filter((_, n) => n % 10 === 0)) system.provider.bumpRevision(id);
    enqueueAll(system);
  });
  system.clock.at(stop, () => clear());
}

/**
 * Runs the system until, after `stop`, the sync queue has been empty for a minute (or `settleMs`
 * after `stop`). Returns when it last became empty, if it was empty at the end.
 */
async function runUntilDrained(system: SimSystem, stop: number, settleMs: number): Promise<number | undefined> {
  const settleBy = stop + settleMs;
  let emptySince: number | undefined;
  await system.pollUntil(() => {
    const now = system.clock.ms();
    if (now < stop) return false;
    if (system.sqs.size(system.queueUrl) > 0) emptySince = undefined;
    else emptySince ??= now;
    return (emptySince !== undefined && now - emptySince > MINUTE) || now >= settleBy;
  });
  return emptySince;
}

/** Requests during the outage, the drain after it, and the rows at the end, with their checks. */
async function outageFigures(
  system: SimSystem,
  scale: Scale,
  kind: OutageKind,
  times: { start: number; stop: number; drained: number },
): Promise<Omit<ScenarioResult, 'name' | 'realMs' | 'virtualMs'>> {
  const { start, stop, drained } = times;
  const during = system.provider.requests.filter((r) => (r.receivedAt ?? 0) >= start && (r.receivedAt ?? 0) < stop);
  // The minute of the first failure is the detection; the outage proper comes after it.
  const detectedAt = during.find((r) => r.status >= 400 && r.status !== 404 && r.status !== 429)?.receivedAt ?? start;
  const minutes = perMinute(during, detectedAt, stop);
  const firstMinute = minutes[0] ?? 0;
  const laterMinutes = Math.max(0, ...minutes.slice(1));
  const recovered = system.provider.requests.filter((r) => (r.receivedAt ?? 0) >= stop && r.status === 200 && r.endpoint === 'items');
  const firstOk = recovered[0]?.receivedAt ?? stop;
  const served = recovered.length;
  const drainSeconds = Math.max(1, (drained - firstOk) / 1000);
  // The drain's two parts: the seconds in which ids were served (at the pace), and the rest, spent
  // waiting for postponed ids to come back (their delays run on, whatever the provider does).
  const servingSeconds = Math.max(1, new Set(recovered.map((r) => Math.floor(((r.receivedAt ?? 0) - firstOk) / 1000))).size);
  // From the first success on, the backlog comes back within one postponement period (the delay its
  // records were last given: in an outage SYNC_POSTPONE_MAX_SECONDS + 20% jitter; while the
  // connection is failing CONNECTION_WAIT_SECONDS) and is served at the pace: drained within that
  // period plus the backlog at 85% of L.
  const sync = loadSyncConfig(system.functions.sync[0]!.environment);
  const periodSeconds = kind === 'token' ? sync.connectionWaitSeconds : 1.2 * sync.postponeMaxSeconds;
  const drainBound = Math.round(periodSeconds + scale.ids / (0.85 * scale.limit));
  // The token: the connection is active again with the first getToken the provider answers after it.
  const tokenBack = system.provider.requests.find((r) => r.endpoint === 'token' && r.status === 200 && (r.receivedAt ?? 0) >= stop);
  const connection = await system.connections.get(DEFAULT_CONNECTION, { consistent: true });
  const drainTook = Math.round((drained - firstOk) / 1000);
  const dead = system.sqs.size(system.dlqUrl);
  const stale = await staleIds(system);
  const figures = {
    'provider requests during the outage': during.length,
    'requests in the minute of detection': firstMinute,
    'most requests in any later minute': laterMinutes,
    'dead-lettered': dead,
    'ids lost or stale at the end': stale.length,
    'first success after recovery (s)': Math.round((firstOk - stop) / 1000),
    'backlog drained after (s)': Math.round((drained - stop) / 1000),
    'items served during the drain': served,
    'drain rate (req/s)': Math.round((served / drainSeconds) * 10) / 10,
    'drain: seconds from the first success': drainTook,
    'drain: seconds with ids served': servingSeconds,
    'drain: rate in those seconds (req/s)': Math.round((served / servingSeconds) * 10) / 10,
    'drain: bound (one postponement period + backlog at 85% of L)': drainBound,
    'records postponed (re-sent) in all': system.sqs.queue(system.queueUrl).stats.sent - 2 * scale.ids,
    'getToken calls during the outage': during.filter((r) => r.endpoint === 'token').length,
    ...(kind === 'token' ? { 'connection active again after (s)': tokenBack ? Math.round(((tokenBack.respondedAt ?? stop) - stop) / 1000) : 'never' } : {}),
    'connection status at the end': connection?.status ?? 'missing',
  };
  return {
    figures,
    checks: [
      check('no id dead-lettered', dead, dead === 0),
      check('no id lost or stale', stale.length, stale.length === 0),
      check('at most 10 provider requests a minute during the outage (after the minute of detection)', laterMinutes, laterMinutes <= 10),
      check('after recovery the backlog drains within one postponement period plus the backlog at 85% of L', `${drainTook} s ≤ ${drainBound} s`, drainTook <= drainBound),
      check('the connection is active at the end', figures['connection status at the end'], figures['connection status at the end'] === 'active'),
    ],
  };
}

function parse(percent: string): number {
  return Number(percent.replace('%', ''));
}

/** Requests in each minute of [from, to). */
function perMinute(requests: readonly RecordedRequest[], from: number, to: number): number[] {
  const counts = Array.from({ length: Math.ceil((to - from) / MINUTE) }, () => 0);
  for (const r of requests) {
    const minute = Math.floor(((r.receivedAt ?? 0) - from) / MINUTE);
    if (minute >= 0 && minute < counts.length) counts[minute] = (counts[minute] ?? 0) + 1;
  }
  return counts;
}

/**
 * Seconds after `from` until the first 10-second window without a 429: the burst of 429s a fall of
 * the limit causes is over (later 429s are the pace's usual probing at the new limit).
 */
function secondsUntilQuiet(requests: readonly RecordedRequest[], from: number): number {
  const limited = new Set(requests.filter((r) => r.status === 429).map((r) => Math.floor(((r.receivedAt ?? 0) - from) / 10_000)));
  let window = 0;
  while (limited.has(window)) window += 1;
  return window * 10;
}

/** Seconds after `from` until the first 10-second window served at least `rate` a second. */
function secondsToReach(requests: readonly RecordedRequest[], from: number, rate: number): number | undefined {
  const buckets = new Map<number, number>();
  for (const r of requests) {
    if (r.status === 429) continue;
    const window = Math.floor(((r.receivedAt ?? 0) - from) / 10_000);
    buckets.set(window, (buckets.get(window) ?? 0) + 1);
  }
  const windows = [...buckets.keys()].sort((a, b) => a - b);
  for (const w of windows) if ((buckets.get(w) ?? 0) / 10 >= rate) return (w + 1) * 10;
  return undefined;
}

/** Ids whose row is missing or does not hold the provider's revision (checked with the sync's own validation). */
async function staleIds(system: SimSystem): Promise<string[]> {
  const rows = new Map((await system.dynamo.scan(system.local.names.itemsTable)).map((row) => [row['id']?.S ?? '', row]));
  const stale: string[] = [];
  for (const id of system.ids) {
    const item = system.provider.getItem(id);
    if (!item) continue;
    const expected = validateItem(parseJson(JSON.stringify(item)), id, system.local.config.revisionField).revision;
    if (rows.get(id)?.['revision']?.S !== expected) stale.push(id);
  }
  return stale;
}
