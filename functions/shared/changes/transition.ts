/**
 * What a write of an items-table row changes, told from the row before and the row after: the one
 * rule behind both the change events (functions/change-events/change.ts) and the changes feed
 * (docs/changes.md). Pure: no AWS import, no clock, no I/O.
 *
 * A row is live when `deleted` is absent or false, a tombstone when it is true.
 *
 * | before                | after                     | change                                  |
 * |-----------------------|---------------------------|-----------------------------------------|
 * | none                  | live                      | created                                 |
 * | none                  | tombstone                 | deleted                                 |
 * | live                  | live, another revision    | updated                                 |
 * | live                  | live, the same revision   | none (nothing the contract names moved) |
 * | live                  | tombstone                 | deleted                                 |
 * | tombstone             | live (any revision)       | restored                                |
 * | tombstone             | tombstone (any revision)  | none (it was and stays deleted)         |
 */

/** The changes a row can go through (contract: the feed's `change`, the events' `Item…` types). */
export const CHANGE_KINDS = ['created', 'updated', 'deleted', 'restored'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** A row as far as the rule needs it. */
export interface RowSide {
  deleted: boolean;
  /** The revision as text; undefined when the row has none. */
  revision: string | undefined;
}

/** The change from `before` (undefined: no row) to `after`, or undefined when the write changes nothing. */
export function changeKindOf(before: RowSide | undefined, after: RowSide): ChangeKind | undefined {
  if (!before) return after.deleted ? 'deleted' : 'created';
  if (before.deleted) return after.deleted ? undefined : 'restored';
  if (after.deleted) return 'deleted';
  return before.revision === after.revision ? undefined : 'updated';
}
