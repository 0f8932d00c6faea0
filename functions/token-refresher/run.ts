/**
 * One token-refresher run, the core (no AWS import): scan every connection, count them by status,
 * and refresh (refresh.ts), at most `refreshConcurrency` at once, the ones that are due:
 * - active and in use (lastUsedAt within two refresh intervals) whose token is older than
 *   `tokenRefreshMinutes` minus 5 minutes (SCHEDULED_LEAD_MS): runs are 5 minutes apart at most
 *   (refresh-schedule.ts), so each token in use is renewed by the first run after it reaches that
 *   age, at about `tokenRefreshMinutes` old; the item sync refreshes on demand only past
 *   `tokenRefreshMinutes` plus 5 minutes (a late or failed run), and a token it refreshed a moment
 *   ago is not refreshed again here;
 * - active with no access token;
 * - active and idle whose token is `idleRefreshHours` old: an idle refresh token is kept alive;
 * - failing, once an hour (lastFailureAt an hour old): a grant restored at the provider recovers;
 *   never one failing for `token-unreadable` (its sealed refresh token cannot be opened: only new
 *   credentials help).
 * In that order, and within each the most overdue first: the ones a run could not start are the
 * first of their kind in the next. Spreading: a run with fewer tokens in use due than its share
 * (the tokens in use × the run interval ÷ `tokenRefreshMinutes`) renews early, after all the
 * others, the oldest tokens in use that are at least half `tokenRefreshMinutes` old, up to that
 * share: connections whose tokens were all issued at once (added together, after an outage) come
 * to be spread evenly over the runs within one interval, and a run has about its share to do.
 *
 * Every getToken takes a slot of the token endpoint's pace (token-pace.ts) first: the run waits for
 * slots while it has time. It stops starting refreshes once the invocation's remaining time is under
 * the margin, once the pace has no slot before that (its rate, or a 429's Retry-After), or once the
 * token endpoint is down (the pace's breaker is open), or once the key that seals the tokens is
 * found disabled or pending deletion (`keyUnavailable`: one refresh finds it, the rest wait, no
 * connection turns failing): the ones left are the next run's, first of their kind. A refresh answered 429 is tried again later in the run (the pace holds every caller
 * until its Retry-After). None of these marks a connection failing or counts in its health.
 *
 * Each refresh is told the token the scan saw: one another refresh (the item sync, a run that
 * overlaps) stored meanwhile is kept, without a getToken. One connection's failure never stops
 * another's refresh, and never throws: only a failed scan does. A refresh's result write is tried
 * again until the invocation's end is near (RESULT_DEADLINE_MARGIN_MS).
 */
import type { Log } from '../shared/ports.js';
import type { ConnectionListing, ConnectionStatus } from '../shared/connections/connection.js';
import { refreshConnection, reasonOf, type RefreshPorts, type RefreshResult, type SeenToken } from '../shared/connections/refresh.js';
import { refresherRunMinutes } from '../shared/connections/refresh-schedule.js';
import { TOKEN_UNREADABLE } from '../shared/connections/sealing.js';

/** A token in use is refreshed once older than `tokenRefreshMinutes` minus this (the item sync waits until plus 5 minutes: connection-access.ts). */
export const SCHEDULED_LEAD_MS = 5 * 60_000;
/** Kept back from the invocation's end when a refresh's result write is tried again: the run's report and metrics. */
export const RESULT_DEADLINE_MARGIN_MS = 2_000;
/** A failing connection is tried again once its last failure is this old. */
export const FAILING_RETRY_MS = 60 * 60_000;
/** A token in use may be renewed early (spreading the load) once it is this share of `tokenRefreshMinutes` old. */
export const EARLY_MIN_AGE_SHARE = 0.5;

export type DueReason = 'in-use' | 'no-token' | 'idle' | 'failing-retry';
/** Why a connection is refreshed by a run: due, or early (spreading the load). */
export type RefreshReason = DueReason | 'early';
/** The order refreshes start in: what the item sync needs first, when a run cannot do them all; early ones last. */
const PRIORITY: readonly RefreshReason[] = ['in-use', 'no-token', 'idle', 'failing-retry', 'early'];

export interface RunSettings {
  tokenRefreshMinutes: number;
  idleRefreshHours: number;
  refreshConcurrency: number;
}

export interface RunPorts extends RefreshPorts {
  log: Log;
  /** The invocation's remaining time, ms; none: no limit. */
  remainingMs?: () => number;
  /** No refresh starts with less remaining time than this. */
  marginMs: number;
}

export interface RunReport {
  /** Connections by status, as scanned. */
  connections: Record<ConnectionStatus, number>;
  /** Connections due for a refresh. */
  due: number;
  /** Tokens in use renewed before they were due, to spread the load over the runs. */
  early: number;
  refreshed: number;
  /** Of the refreshed, those whose refresh token the provider rotated. */
  rotated: number;
  refused: number;
  failed: number;
  /** Due but not refreshed by this run for a reason that is not a failure: another held the lease, the status or credentials changed meanwhile. */
  skipped: number;
  /** getToken calls answered 429 (each connection tried again later in the run, or left). */
  rateLimited: number;
  /** Due but not refreshed: the invocation's time ran short, the token pace had no slot in time, the token endpoint is down, or the key that seals the tokens is. */
  left: number;
  /** The run stopped because the key that seals the tokens is disabled or pending deletion. */
  keyUnavailable: boolean;
}

/** A connection the run refreshes, and the token the scan saw. */
interface Planned {
  connection: string;
  clientId: string;
  reason: RefreshReason;
  seen: SeenToken;
  /** Epoch ms it became (or becomes, for an early one) due: the most overdue first. */
  dueAt: number;
  /** Ended one way or another (not left for a later run). */
  done: boolean;
}

/** Why the connection is due for a refresh now, or undefined. */
export function dueReason(record: ConnectionListing, now: number, settings: RunSettings): DueReason | undefined {
  const { reason } = classify(record, now, settings);
  return reason === 'not-yet' ? undefined : reason;
}

/**
 * Why and since when the connection is due; `not-yet`: a token in use old enough to be renewed
 * early, and when it will be due. `inUse`: an active connection in use with a token.
 */
function classify(record: ConnectionListing, now: number, settings: RunSettings): { reason?: DueReason | 'not-yet'; dueAt: number; inUse: boolean } {
  const refreshMs = settings.tokenRefreshMinutes * 60_000;
  if (record.status === 'failing') {
    // Its refresh token can never be opened: only new credentials (a put) make it refreshable.
    if (record.health.lastFailureReason === TOKEN_UNREADABLE) return { dueAt: 0, inUse: false };
    const lastFailure = time(record.health.lastFailureAt);
    if (lastFailure === undefined) return { reason: 'failing-retry', dueAt: 0, inUse: false };
    return now - lastFailure >= FAILING_RETRY_MS ? { reason: 'failing-retry', dueAt: lastFailure + FAILING_RETRY_MS, inUse: false } : { dueAt: 0, inUse: false };
  }
  if (record.status !== 'active') return { dueAt: 0, inUse: false };
  const refreshedAt = time(record.refreshedAt);
  if (record.accessTokenStamp === undefined || refreshedAt === undefined) return { reason: 'no-token', dueAt: time(record.updatedAt) ?? 0, inUse: false };
  const lastUsed = time(record.lastUsedAt);
  const inUse = lastUsed !== undefined && now - lastUsed <= 2 * refreshMs;
  const inUseDueAt = refreshedAt + refreshMs - SCHEDULED_LEAD_MS;
  if (inUse && now >= inUseDueAt) return { reason: 'in-use', dueAt: inUseDueAt, inUse };
  const idleDueAt = refreshedAt + settings.idleRefreshHours * 3_600_000;
  if (now >= idleDueAt) return { reason: 'idle', dueAt: idleDueAt, inUse };
  if (inUse && now - refreshedAt >= EARLY_MIN_AGE_SHARE * refreshMs) return { reason: 'not-yet', dueAt: inUseDueAt, inUse };
  return { dueAt: 0, inUse };
}

/** The run: throws only when the scan fails. */
export async function runRefresher(ports: RunPorts, settings: RunSettings): Promise<RunReport> {
  const now = ports.clock.now().getTime();
  const connections: Record<ConnectionStatus, number> = { active: 0, paused: 0, failing: 0, removed: 0 };
  const due: Planned[] = [];
  const notYet: Planned[] = [];
  let inUse = 0;
  for await (const record of ports.store.list()) {
    connections[record.status] += 1;
    const found = classify(record, now, settings);
    if (found.inUse) inUse += 1;
    if (found.reason === undefined) continue;
    const seen: SeenToken = {
      ...(record.accessTokenStamp !== undefined ? { stamp: record.accessTokenStamp } : {}),
      ...(record.refreshedAt !== undefined ? { refreshedAt: record.refreshedAt } : {}),
    };
    const planned: Planned = { connection: record.connection, clientId: record.clientId, reason: found.reason === 'not-yet' ? 'early' : found.reason, seen, dueAt: found.dueAt, done: false };
    (found.reason === 'not-yet' ? notYet : due).push(planned);
  }
  // This run's share of the tokens in use; the oldest not yet due make up what the due ones lack.
  const share = Math.floor((inUse * refresherRunMinutes(settings.tokenRefreshMinutes)) / settings.tokenRefreshMinutes);
  const dueInUse = due.filter((item) => item.reason === 'in-use').length;
  const early = notYet.sort((a, b) => a.dueAt - b.dueAt).slice(0, Math.max(0, share - dueInUse));
  const plan = [...due, ...early].sort((a, b) => PRIORITY.indexOf(a.reason) - PRIORITY.indexOf(b.reason) || a.dueAt - b.dueAt);

  const report: RunReport = { connections, due: due.length, early: early.length, refreshed: 0, rotated: 0, refused: 0, failed: 0, skipped: 0, rateLimited: 0, left: 0, keyUnavailable: false };
  let next = 0;
  /** Answered 429: tried again, before the others, when the pace allows. */
  const again: Planned[] = [];
  let stopped: StopReason | undefined;
  const worker = async (): Promise<void> => {
    while (stopped === undefined) {
      const item = again.shift() ?? plan[next++];
      if (item === undefined) break;
      const remaining = ports.remainingMs?.();
      if (remaining !== undefined && remaining < ports.marginMs) {
        stopped = 'time';
        break;
      }
      const at = ports.clock.now().getTime();
      const limits =
        remaining === undefined ? {} : { startBy: at + remaining - ports.marginMs, deadline: at + remaining - RESULT_DEADLINE_MARGIN_MS };
      const paced = await refreshOne(ports, item, limits, report);
      if (paced === 'rate-limited') again.push(item);
      else if (paced !== undefined) stopped ??= paced;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(settings.refreshConcurrency, plan.length)) }, worker));
  report.left = due.filter((item) => !item.done).length;
  report.keyUnavailable = stopped === 'key-outage';
  if (report.left > 0) {
    ports.log.warn(STOPPED[stopped ?? 'time'], { left: report.left, due: report.due });
  }
  return report;
}

type StopReason = 'time' | 'pace' | 'retry-after' | 'outage' | 'key-outage';

const STOPPED: Record<StopReason, string> = {
  time: 'time ran short: refreshes left for the next run',
  pace: 'the token pace has no slot before the run ends: refreshes left for the next run',
  'retry-after': "the token endpoint's Retry-After outlasts the run: refreshes left for the next run",
  outage: "the token endpoint is down (its pace's breaker is open): refreshes left for the next run",
  'key-outage': 'the key that seals the tokens (CONNECTIONS_KEY_ARN) is disabled or pending deletion: refreshes wait until it is enabled (docs/operations.md)',
};

/** One refresh, counted and logged; what stops the run (a pace that has no slot in time), or `rate-limited` (try it again). */
async function refreshOne(
  ports: RunPorts,
  item: Planned,
  limits: { startBy?: number; deadline?: number },
  report: RunReport,
): Promise<StopReason | 'rate-limited' | undefined> {
  const { connection, reason: due } = item;
  let result: RefreshResult;
  try {
    result = await refreshConnection(ports, connection, { clientId: item.clientId, includeFailing: due === 'failing-retry', seen: item.seen, ...limits });
  } catch (error) {
    item.done = true;
    report.failed += 1;
    ports.log.warn('token refresh', { connection, due, outcome: 'failed', reason: reasonOf(error, []) });
    return undefined;
  }
  if (result.kind === 'paced') {
    if (result.why !== 'rate-limited') return result.why;
    report.rateLimited += 1;
    ports.log.info('token refresh', { connection, due, outcome: 'rate-limited', retryAt: new Date(result.until!).toISOString() });
    return 'rate-limited';
  }
  item.done = true;
  switch (result.kind) {
    case 'refreshed':
      report.refreshed += 1;
      if (result.rotated) report.rotated += 1;
      ports.log.info('token refresh', { connection, due, outcome: 'refreshed', rotated: result.rotated, ...(result.previousStatus === 'failing' ? { recovered: true } : {}) });
      return undefined;
    case 'refused':
      report.refused += 1;
      ports.log.warn('token refresh', { connection, due, outcome: 'refused', reason: result.reason });
      return undefined;
    case 'failed':
      report.failed += 1;
      ports.log.warn('token refresh', { connection, due, outcome: 'failed', reason: result.reason });
      return undefined;
    case 'busy':
      report.skipped += 1;
      ports.log.info('token refresh', { connection, due, outcome: 'busy', leaseUntil: new Date(result.until).toISOString() });
      return undefined;
    case 'not-refreshable':
      report.skipped += 1;
      ports.log.info('token refresh', { connection, due, outcome: 'not-refreshable', status: result.status });
      return undefined;
    case 'current':
    case 'missing':
    case 'superseded':
      report.skipped += 1;
      ports.log.info('token refresh', { connection, due, outcome: result.kind });
      return undefined;
  }
}

function time(iso: string | undefined): number | undefined {
  if (iso === undefined) return undefined;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
}
