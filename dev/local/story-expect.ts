/**
 * What the local story expects of each step: the token refresher's counts, a pass's counts per
 * connection, and what a pass that brings a connection up to date with its account must change,
 * read from the provider itself (its folders' revisions change with their lists, up to the root,
 * so the rows a change touches are more than the items the story changed).
 */
import type { ItemRow } from '../fakes/items-table.js';
import { rowKey } from '../fakes/items-table.js';
import type { ProviderSimulator } from '../simulator/provider-simulator.js';
import { accountItems } from './accounts.js';
import type { ConnectionCounts, PassSummary } from './passes.js';
import { asTheSyncReadsIt } from './table-check.js';

export function expectRefresh(problems: string[], label: string, report: { refreshed: number; refused: number; failed: number }, refreshed: number, refused: number): void {
  if (report.refreshed !== refreshed || report.refused !== refused || report.failed !== 0) {
    problems.push(`${label}: the token refresher refreshed ${report.refreshed}, refused ${report.refused}, failed ${report.failed}; expected ${refreshed}, ${refused}, 0`);
  }
}

/** One connection's counts in a pass must be these. */
export function expectConnection(problems: string[], pass: PassSummary, connection: string, expected: Partial<ConnectionCounts>): void {
  const counts = pass.byConnection[connection];
  if (!counts) {
    problems.push(`${pass.name}: nothing counted for ${connection}`);
    return;
  }
  for (const [key, value] of Object.entries(expected) as Array<[keyof ConnectionCounts, number]>) {
    if (counts[key] !== value) problems.push(`${pass.name}: expected ${value} ${key === 'deadLettered' ? 'dead-lettered' : key} for ${connection}, counted ${counts[key]}`);
  }
}

/** What bringing a connection's rows up to date with its account changes: the ids of each kind. */
export interface Due {
  /** Items the account holds that have no row. */
  created: string[];
  /** Items whose row holds another revision, or is a tombstone. */
  updated: string[];
  /** Live rows of items the account no longer holds. */
  deleted: string[];
}

/**
 * The rows of `connection` (in `rows`) against its account's items as the provider serves them and
 * the sync reads them: what a pass that checks them all must create, update and delete.
 */
export function dueChanges(simulator: ProviderSimulator, connection: string, rows: ReadonlyMap<string, ItemRow>, revisionField: string): Due {
  const due: Due = { created: [], updated: [], deleted: [] };
  const held = new Set<string>();
  for (const item of accountItems(simulator, connection)) {
    held.add(item.id);
    const row = rows.get(rowKey(connection, item.id));
    const read = asTheSyncReadsIt(item, revisionField);
    const revision = typeof read === 'string' ? undefined : read.revision;
    if (!row) due.created.push(item.id);
    else if (row.deleted === true || row.revision !== revision) due.updated.push(item.id);
  }
  for (const row of rows.values()) {
    if (row.connection === connection && row.deleted !== true && !held.has(row.id)) due.deleted.push(row.id);
  }
  return due;
}

/** The folders among `ids` of the account (for the screen: the folders a change reached). */
export function foldersAmong(simulator: ProviderSimulator, connection: string, ids: readonly string[]): string[] {
  const account = simulator.account(connection);
  return ids.filter((id) => account.getItem(id)?.type === 'folder');
}
