/**
 * One token-refresher run, the core (no AWS import): scan every connection, count them by status,
 * and refresh (refresh.ts), at most `refreshConcurrency` at once, the ones that are due:
 * - active with no access token;
 * - active and in use (lastUsedAt within two refresh intervals) whose token would reach
 *   `tokenRefreshMinutes` before the next run (runs are `tokenRefreshMinutes` apart; a margin of
 *   5 minutes covers a late run): the item sync then never has to refresh it on demand;
 * - active and idle whose token is `idleRefreshHours` old: an idle refresh token is kept alive;
 * - failing, once an hour (lastFailureAt an hour old): a grant restored at the provider recovers.
 * One connection's failure never stops another's refresh, and never throws: only a failed scan
 * does. The run starts no refresh once the invocation's remaining time is under the margin; the
 * ones left are the next run's.
 */
import type { Log } from '../shared/ports.js';
import type { ConnectionRecord, ConnectionStatus } from '../shared/connections/connection.js';
import { reasonOf, refreshConnection, type RefreshPorts, type RefreshResult } from '../shared/connections/refresh.js';

/** Margin on the next run: a token in use is refreshed if it would reach the refresh age this long after the next run is due. */
export const NEXT_RUN_MARGIN_MS = 5 * 60_000;
/** A failing connection is tried again once its last failure is this old. */
export const FAILING_RETRY_MS = 60 * 60_000;

export type DueReason = 'in-use' | 'no-token' | 'idle' | 'failing-retry';
/** The order refreshes start in: what the item sync needs first, when a run cannot do them all. */
const PRIORITY: readonly DueReason[] = ['in-use', 'no-token', 'idle', 'failing-retry'];

export interface RunSettings {
  tokenRefreshMinutes: number;
  idleRefreshHours: number;
  refreshConcurrency: number;
  /** Minutes between runs; default tokenRefreshMinutes (the schedule). */
  intervalMinutes?: number;
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

/** Why the connection is due for a refresh now, or undefined. */
export function dueReason(record: ConnectionRecord, now: number, settings: RunSettings): DueReason | undefined {
  const refreshMs = settings.tokenRefreshMinutes * 60_000;
  const intervalMs = (settings.intervalMinutes ?? settings.tokenRefreshMinutes) * 60_000;
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
  if (inUse && age + intervalMs + NEXT_RUN_MARGIN_MS >= refreshMs) return 'in-use';
  if (age >= settings.idleRefreshHours * 3_600_000) return 'idle';
  return undefined;
}

/** The run: throws only when the scan fails. */
export async function runRefresher(ports: RunPorts, settings: RunSettings): Promise<RunReport> {
  const now = ports.clock.now().getTime();
  const connections: Record<ConnectionStatus, number> = { active: 0, paused: 0, failing: 0, removed: 0 };
  const due: Array<{ connection: string; reason: DueReason; status: ConnectionStatus }> = [];
  for await (const record of ports.store.list()) {
    connections[record.status] += 1;
    const reason = dueReason(record, now, settings);
    if (reason !== undefined) due.push({ connection: record.connection, reason, status: record.status });
  }
  due.sort((a, b) => PRIORITY.indexOf(a.reason) - PRIORITY.indexOf(b.reason));

  const report: RunReport = { connections, due: due.length, refreshed: 0, rotated: 0, refused: 0, failed: 0, skipped: 0, left: 0 };
  let next = 0;
  let stopped = false;
  const worker = async (): Promise<void> => {
    while (next < due.length && !stopped) {
      if (ports.remainingMs && ports.remainingMs() < ports.marginMs) {
        stopped = true;
        break;
      }
      const item = due[next++]!;
      await refreshOne(ports, item, report);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(settings.refreshConcurrency, due.length)) }, worker));
  report.left = due.length - next;
  if (report.left > 0) {
    ports.log.warn('time ran short: refreshes left for the next run', { left: report.left, due: report.due });
  }
  return report;
}

async function refreshOne(ports: RunPorts, item: { connection: string; reason: DueReason }, report: RunReport): Promise<void> {
  const { connection, reason: due } = item;
  let result: RefreshResult;
  try {
    result = await refreshConnection(ports, connection, { includeFailing: due === 'failing-retry' });
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
