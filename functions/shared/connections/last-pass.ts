/**
 * A connection's last reconciliation pass, as its view shows it (view.ts), from the reconciler's cursor (one
 * control-table row: the pass running or last ended, and the one before it). A pass scans the
 * whole items table once, every connection's rows together: a pass that started after a
 * connection was added and has ended re-checked every id the connection held when it started. So
 * a connection's last pass is the latest such pass the cursor still records; none when the
 * connection was added after the last ended pass began (or reconciliation is off).
 */
import type { Cursor, PassRecord } from '../../reconciler/ports.js';

export interface LastPass {
  pass: number;
  /** ISO-8601. */
  startedAt: string;
  endedAt: string;
}

/** The ended passes the cursor records, the latest first. */
function endedPasses(cursor: Cursor | undefined): Array<Omit<PassRecord, 'ids'>> {
  if (cursor === undefined) return [];
  const passes: Array<Omit<PassRecord, 'ids'>> = [];
  if (cursor.endedAt !== undefined) passes.push({ pass: cursor.pass, startedAt: cursor.startedAt, endedAt: cursor.endedAt });
  if (cursor.previous !== undefined) passes.push(cursor.previous);
  return passes;
}

/** The connection's last pass: the latest ended pass that started at or after `createdAt` (ISO-8601). */
export function lastPassOf(createdAt: string, cursor: Cursor | undefined): LastPass | undefined {
  const created = Date.parse(createdAt);
  if (Number.isNaN(created)) return undefined;
  const pass = endedPasses(cursor).find((p) => p.startedAt >= created);
  return pass && { pass: pass.pass, startedAt: new Date(pass.startedAt).toISOString(), endedAt: new Date(pass.endedAt).toISOString() };
}
