/**
 * One token-refresher run, the core (no AWS import): scan every connection, count them by status,
 * and refresh (refresh.ts), at most `refreshConcurrency` at once, the ones that are due:
 * - active with no access token;
 * - active and in use (lastUsedAt within two refresh intervals) whose token is older than
 *   `tokenRefreshMinutes` minus 5 minutes (SCHEDULED_LEAD_MS): with runs `tokenRefreshMinutes`
 *   apart, the token each run stores is renewed by the next one, so a token in use is never much
 *   older than `tokenRefreshMinutes`; the item sync refreshes on demand only past
 *   `tokenRefreshMinutes` plus 5 minutes (a late or failed run), and a token it refreshed a moment
 *   ago is not refreshed again here;
 * - active and idle whose token is `idleRefreshHours` old: an idle refresh token is kept alive;
 * - failing, once an hour (lastFailureAt an hour old): a grant restored at the provider recovers.
 * Each refresh is told the token the scan saw: one another refresh (the item sync, a run that
 * overlaps) stored meanwhile is kept, without a getToken. One connection's failure never stops
 * another's refresh, and never throws: only a failed scan does. The run starts no refresh once the
 * invocation's remaining time is under the margin; the ones left are the next run's. A refresh's
 * result write is tried again until the invocation's end is near (RESULT_DEADLINE_MARGIN_MS).
 */
import type { Log } from '../shared/ports.js';
import type { ConnectionRecord, ConnectionStatus } from '../shared/connections/connection.js';
import { reasonOf, refreshConnection, type RefreshPorts, type RefreshResult, type SeenToken } from '../shared/connections/refresh.js';

/** A token in use is refreshed once older than `tokenRefreshMinutes` minus this (the item sync waits until plus 5 minutes: connection-access.ts). */
export const SCHEDULED_LEAD_MS = 5 * 60_000;
/** Kept back from the invocation's end when a refresh's result write is tried again: the run's report and metrics. */
export const RESULT_DEADLINE_MARGIN_MS = 2_000;
/** A failing connection is tried again once its last failure is this old. */
export const FAILING_RETRY_MS = 60 * 60_000;

export type DueReason = 'in-use' | 'no-token' | 'idle' | 'failing-retry';
/** The order refreshes start in: what the item sync needs first, when a run cannot do them all. */
const PRIORITY: readonly DueReason[] = ['in-use', 'no-token', 'idle', 'failing-retry'];

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
  refreshed: number;
  /** Of the refreshed, those whose refresh token the provider rotated. */
  rotated: number;
  refused: number;
  failed: number;
  /** Due but not refreshed by this run for a reason that is not a failure: another held the lease, the status or credentials changed meanwhile. */
  skipped: number;
  /** Due but not started: the invocation's time ran short. */
  left: number;
}

/** A connection the scan found due, and the token the scan saw. */
interface DueConnection {
  connection: string;
  reason: DueReason;
  status: ConnectionStatus;
  seen: SeenToken;
}

/** Why the connection is due for a refresh now, or undefined. */
export function dueReason(record: ConnectionRecord, now: number, settings: RunSettings): DueReason | undefined {
  const refreshMs = settings.tokenRefreshMinutes * 60_000;
  if (record.status === 'failing') {
    const lastFailure = time(record.health.lastFailureAt);
    return lastFailure === undefined || now - lastFailure >= FAILING_RETRY_MS ? 'failing-retry' : undefined;
  }
  if (record.status !== 'active') return undefined;
  const refreshedAt = time(record.refreshedAt);
  if (record.accessToken === undefined || refreshedAt === undefined) return 'no-token';
  const age = now - refreshedAt;
  const lastUsed = time(record.lastUsedAt);
  const inUse = lastUsed !== undefined && now - lastUsed <= 2 * refreshMs;
  if (inUse && age >= refreshMs - SCHEDULED_LEAD_MS) return 'in-use';
  if (age >= settings.idleRefreshHours * 3_600_000) return 'idle';
  return undefined;
}

/** The run: throws only when the scan fails. */
export async function runRefresher(ports: RunPorts, settings: RunSettings): Promise<RunReport> {
  const now = ports.clock.now().getTime();
  const connections: Record<ConnectionStatus, number> = { active: 0, paused: 0, failing: 0, removed: 0 };
  const due: DueConnection[] = [];
  for await (const record of ports.store.list()) {
    connections[record.status] += 1;
    const reason = dueReason(record, now, settings);
    if (reason === undefined) continue;
    const seen: SeenToken = {
      ...(record.accessToken !== undefined ? { token: record.accessToken } : {}),
      ...(record.refreshedAt !== undefined ? { refreshedAt: record.refreshedAt } : {}),
    };
    due.push({ connection: record.connection, reason, status: record.status, seen });
  }
  due.sort((a, b) => PRIORITY.indexOf(a.reason) - PRIORITY.indexOf(b.reason));

  const report: RunReport = { connections, due: due.length, refreshed: 0, rotated: 0, refused: 0, failed: 0, skipped: 0, left: 0 };
  let next = 0;
  let stopped = false;
  const worker = async (): Promise<void> => {
    while (next < due.length && !stopped) {
      const remaining = ports.remainingMs?.();
      if (remaining !== undefined && remaining < ports.marginMs) {
        stopped = true;
        break;
      }
      const item = due[next++]!;
      const deadline = remaining === undefined ? undefined : ports.clock.now().getTime() + remaining - RESULT_DEADLINE_MARGIN_MS;
      await refreshOne(ports, item, deadline, report);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(settings.refreshConcurrency, due.length)) }, worker));
  report.left = due.length - next;
  if (report.left > 0) {
    ports.log.warn('time ran short: refreshes left for the next run', { left: report.left, due: report.due });
  }
  return report;
}

async function refreshOne(ports: RunPorts, item: DueConnection, deadline: number | undefined, report: RunReport): Promise<void> {
  const { connection, reason: due } = item;
  let result: RefreshResult;
  try {
    result = await refreshConnection(ports, connection, {
      includeFailing: due === 'failing-retry',
      seen: item.seen,
      ...(deadline !== undefined ? { deadline } : {}),
    });
  } catch (error) {
    report.failed += 1;
    ports.log.warn('token refresh', { connection, due, outcome: 'failed', reason: reasonOf(error, []) });
    return;
  }
  switch (result.kind) {
    case 'refreshed':
      report.refreshed += 1;
      if (result.rotated) report.rotated += 1;
      ports.log.info('token refresh', { connection, due, outcome: 'refreshed', rotated: result.rotated, ...(result.previousStatus === 'failing' ? { recovered: true } : {}) });
      return;
    case 'refused':
      report.refused += 1;
      ports.log.warn('token refresh', { connection, due, outcome: 'refused', reason: result.reason });
      if (result.previousStatus !== 'failing') {
        ports.log.warn('connection is now failing: the provider refused its refresh token', { connection, reason: result.reason });
      }
      return;
    case 'failed':
      report.failed += 1;
      ports.log.warn('token refresh', { connection, due, outcome: 'failed', reason: result.reason });
      return;
    case 'busy':
      report.skipped += 1;
      ports.log.info('token refresh', { connection, due, outcome: 'busy', leaseUntil: new Date(result.until).toISOString() });
      return;
    case 'not-refreshable':
      report.skipped += 1;
      ports.log.info('token refresh', { connection, due, outcome: 'not-refreshable', status: result.status });
      return;
    case 'current':
    case 'missing':
    case 'superseded':
      report.skipped += 1;
      ports.log.info('token refresh', { connection, due, outcome: result.kind });
      return;
  }
}

function time(iso: string | undefined): number | undefined {
  if (iso === undefined) return undefined;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
}
