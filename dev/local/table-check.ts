/**
 * The local run's last check: the table against what the provider holds, connection by connection
 * (each connection's rows against its own account's items, each item as the sync reads it: through
 * the provider client's parse and the sync's validation), a row's item read back from the items
 * bucket when the row points there, and the bucket holding no object no row points to.
 */
import { isDeepStrictEqual } from 'node:util';
import { ITEM_OBJECT_PREFIX } from '../../functions/item-sync/item-writer.js';
import { validateItem, type ValidItem } from '../../functions/item-sync/item.js';
import { parseJson } from '../../functions/shared/json.js';
import { rowKey, type ItemRow } from '../fakes/items-table.js';
import { itemObjectOf, listObjects, readItemObject, type ItemObjectRead } from '../fakes/s3.js';
import type { SimulatorItem } from '../simulator/provider-simulator.js';
import { describe, type LocalRun } from './local-run.js';

/**
 * A provider item as the sync reads it: the JSON text the simulator serves for it (JSON.stringify of
 * the item), through the provider client's parse (numbers kept exact) and the sync's validation
 * (revision text at the dot path). A string says why the sync would refuse it.
 */
export function asTheSyncReadsIt(item: SimulatorItem, revisionField: string): ValidItem | string {
  try {
    return validateItem(parseJson(JSON.stringify(item)), item.id, revisionField);
  } catch (error) {
    return (error as Error).message;
  }
}

/** The object of every row that points to the items bucket, read back and checked against its pointer; by row key. */
export async function readObjects(run: LocalRun, rows: ReadonlyMap<string, ItemRow>): Promise<Map<string, ItemObjectRead>> {
  const reads = new Map<string, ItemObjectRead>();
  for (const [key, row] of rows) {
    if (row.itemObject === undefined) continue;
    const pointer = itemObjectOf(row);
    reads.set(key, pointer ? await readItemObject(run.clients.s3, run.system.names.itemsBucket, pointer) : { kind: 'mismatch', why: 'itemObject is not {key, size, sha256}' });
  }
  return reads;
}

/** The item a row holds: inline, or read from the items bucket; or why it cannot be compared. */
function storedItem(id: string, row: ItemRow, read: ItemObjectRead | undefined): { item: unknown } | { problem: string } {
  if (row.itemObject === undefined) return { item: row.item };
  if (row.item !== undefined) return { problem: `${id}: the row holds both item and itemObject` };
  switch (read?.kind) {
    case 'found':
      return { item: read.item };
    case 'missing':
      return { problem: `${id}: its row points to an object that is not in the items bucket` };
    case 'mismatch':
      return { problem: `${id}: its object in the items bucket is not what the row says (${read.why})` };
    case 'unreadable':
      return { problem: `${id}: its object in the items bucket could not be read (${read.error}); not compared` };
    default:
      return { problem: `${id}: its object was not read` };
  }
}

/** Objects in the items bucket no row points to (or that the bucket could not be listed: then it says so). */
export async function checkBucket(run: LocalRun, rows: ReadonlyMap<string, ItemRow>): Promise<string[]> {
  let keys: Map<string, number>;
  try {
    keys = await listObjects(run.clients.s3, run.system.names.itemsBucket, ITEM_OBJECT_PREFIX);
  } catch (error) {
    return [`the items bucket could not be listed (${describe(error)}): objects no row points to were not looked for`];
  }
  const referenced = new Set([...rows.values()].map((row) => itemObjectOf(row)?.key).filter((key) => key !== undefined));
  return [...keys.keys()].filter((key) => !referenced.has(key)).map((key) => `${key}: in the items bucket, but no row points to it`);
}

/** What one connection's account holds at the provider, and the ids it deleted (their rows must be tombstones). */
export interface AccountHoldings {
  connection: string;
  items: readonly SimulatorItem[];
  deletedIds: readonly string[];
}

/**
 * Differences between the table and what the provider holds (empty when they agree): each
 * connection's rows against its own account's items, and no row of a connection the provider
 * does not hold. A difference names the row as `<connection>/<id>`.
 */
export function compareWithProvider(
  rows: ReadonlyMap<string, ItemRow>,
  objects: ReadonlyMap<string, ItemObjectRead>,
  accounts: readonly AccountHoldings[],
  revisionField: string,
): string[] {
  const problems: string[] = [];
  const expected = new Set<string>();
  for (const { connection, items, deletedIds } of accounts) {
    for (const item of items) {
      const key = rowKey(connection, item.id);
      expected.add(key);
      const row = rows.get(key);
      const read = asTheSyncReadsIt(item, revisionField);
      if (!row) problems.push(`${key}: not in the table`);
      else if (row.deleted) problems.push(`${key}: marked deleted, but the provider has it`);
      else if (typeof read === 'string') problems.push(`${key}: in the table, but the sync refuses the provider's item: ${read}`);
      else if (row.revision !== read.revision) problems.push(`${key}: revision ${row.revision ?? '(none)'} in the table, ${read.revision} at the provider`);
      else if (row.type !== read.type) problems.push(`${key}: type ${String(row.type)} in the table, ${read.type} at the provider`);
      else {
        const stored = storedItem(key, row, objects.get(key));
        if ('problem' in stored) problems.push(stored.problem);
        else if (!isDeepStrictEqual(stored.item, read.item)) problems.push(`${key}: the stored item differs from the provider's`);
      }
    }
    for (const id of deletedIds) {
      const key = rowKey(connection, id);
      expected.add(key);
      const row = rows.get(key);
      if (!row) problems.push(`${key}: deleted at the provider, but its row is gone`);
      else if (row.deleted !== true) problems.push(`${key}: deleted at the provider, not marked deleted in the table`);
    }
  }
  for (const key of rows.keys()) if (!expected.has(key)) problems.push(`${key}: in the table, unknown to the provider`);
  return problems;
}

/**
 * The ids two or more connections hold with different items at the provider, and how many of
 * them have a different stored item in each connection's row (all of them, when every connection
 * keeps its own).
 */
export function sharedIds(rows: ReadonlyMap<string, ItemRow>, objects: ReadonlyMap<string, ItemObjectRead>, accounts: readonly AccountHoldings[]): { shared: number; distinct: number } {
  // Item id -> the connections whose account holds it, with its JSON there.
  const holders = new Map<string, Array<{ connection: string; json: string }>>();
  for (const account of accounts) {
    for (const item of account.items) holders.set(item.id, [...(holders.get(item.id) ?? []), { connection: account.connection, json: JSON.stringify(item) }]);
  }
  let shared = 0;
  let distinct = 0;
  for (const [id, held] of holders) {
    if (held.length < 2 || new Set(held.map((h) => h.json)).size < held.length) continue;
    shared += 1;
    const stored = held.map(({ connection }) => {
      const key = rowKey(connection, id);
      const row = rows.get(key);
      const found = row ? storedItem(key, row, objects.get(key)) : undefined;
      return found && 'item' in found ? JSON.stringify(found.item) : undefined;
    });
    if (stored.every((text) => text !== undefined) && new Set(stored).size === stored.length) distinct += 1;
  }
  return { shared, distinct };
}
