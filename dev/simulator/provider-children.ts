/**
 * Folders that embed their children (the option `children` of the provider model), as Box's folder
 * object does: a folder's answer carries
 *
 *   item_collection: { entries: [{ id, type, name, etag }, ...], total_count, offset: 0, limit: cap }
 *
 * its children being the account's items whose `parentId` is the folder's id, and the ids of its
 * `extraChildren` field the account holds (a folder listed somewhere else than under its parent: how
 * a cycle is made), at most `cap` entries ordered by id, `total_count` all of them. An entry's `etag`
 * is the child's revision as text (a number in its JSON form, a string as is; null when it has
 * neither), so that it compares equal to the revision the system stores.
 *
 * One index per account, kept up to date by its setItem and deleteItem: the children of a parent and
 * the folders listing an id as an extra child, so that serving a folder costs its children only, and
 * the folders whose list an item's change touches are found without a scan. The account
 * (provider-accounts.ts) bumps those folders' revisions (placement, below, says where an item is
 * listed and as what).
 */
import { isRecord } from './provider-answers.js';
import type { SimulatorItem } from './provider-types.js';

export interface ChildrenSettings {
  /** At most this many entries in a folder's list. */
  cap: number;
}

/** What the option says when it is not given a cap. */
export const DEFAULT_CHILDREN_CAP = 1_000;

/** The option as validated: undefined when folders do not embed their children. */
export function childrenSettings(option: { cap?: number } | undefined): ChildrenSettings | undefined {
  if (option === undefined) return undefined;
  if (!isRecord(option)) throw new TypeError('children must be an object ({ cap?: number })');
  const cap = option.cap ?? DEFAULT_CHILDREN_CAP;
  if (!Number.isInteger(cap) || cap < 1) throw new RangeError(`children.cap must be a positive integer, got ${String(cap)}`);
  return { cap };
}

/** One child as its folder lists it. */
export interface ChildEntry {
  id: string;
  type: unknown;
  name?: string;
  etag: string | null;
}

/** Where an item is listed (the folders whose list holds it) and its entry there, as JSON. */
export interface Placement {
  containers: string[];
  entry: string;
}

/** The revision as text, as the system keeps it: a finite number in its JSON form, a non-empty string as is. */
export function revisionText(value: unknown): string | null {
  if (typeof value === 'number' && Number.isFinite(value)) return JSON.stringify(value);
  if (typeof value === 'string' && value !== '') return value;
  return null;
}

function valueAt(item: Record<string, unknown>, path: readonly string[]): unknown {
  let value: unknown = item;
  for (const key of path) {
    if (!isRecord(value)) return undefined;
    value = value[key];
  }
  return value;
}

function parentOf(item: SimulatorItem): string | undefined {
  return typeof item.parentId === 'string' ? item.parentId : undefined;
}

/** A folder's `extraChildren`: the ids it lists besides its own children (checked when stored). */
function extrasOf(item: SimulatorItem): readonly string[] {
  return item.type === 'folder' && Array.isArray(item.extraChildren) ? (item.extraChildren as string[]) : [];
}

function addTo(index: Map<string, Set<string>>, key: string, value: string): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(value);
}

function removeFrom(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}

/** The children index of one account's items (`has` says whether the account holds an id). */
export class FolderLists {
  /** Parent id -> the ids of the items whose parentId it is. */
  private readonly byParent = new Map<string, Set<string>>();
  /** Id -> the folders whose extraChildren name it. */
  private readonly listedBy = new Map<string, Set<string>>();

  constructor(
    readonly settings: ChildrenSettings,
    private readonly revisionPath: readonly string[],
    private readonly has: (id: string) => boolean,
  ) {}

  /** Throws unless the item's `extraChildren` is absent or an array of strings. */
  static check(id: string, item: SimulatorItem): void {
    const extras = item.extraChildren;
    if (extras !== undefined && !(Array.isArray(extras) && extras.every((e) => typeof e === 'string'))) {
      throw new TypeError(`extraChildren of item ${JSON.stringify(id)} must be an array of ids`);
    }
  }

  /** Indexes an item stored under `id`. */
  add(id: string, item: SimulatorItem): void {
    const parent = parentOf(item);
    if (parent !== undefined) addTo(this.byParent, parent, id);
    for (const extra of extrasOf(item)) addTo(this.listedBy, extra, id);
  }

  /** Forgets an item that was stored under `id` (before it is replaced or deleted). */
  remove(id: string, item: SimulatorItem): void {
    const parent = parentOf(item);
    if (parent !== undefined) removeFrom(this.byParent, parent, id);
    for (const extra of extrasOf(item)) removeFrom(this.listedBy, extra, id);
  }

  /** The folders whose list holds the item stored under `id` (the account decides which are
   *  folders), and its entry there. */
  placement(id: string, item: SimulatorItem): Placement {
    const containers = new Set<string>();
    const parent = parentOf(item);
    if (parent !== undefined) containers.add(parent);
    for (const folder of this.listedBy.get(id) ?? []) containers.add(folder);
    return { containers: [...containers], entry: JSON.stringify(this.entry(id, item)) };
  }

  entry(id: string, item: SimulatorItem): ChildEntry {
    const etag = revisionText(valueAt(item, this.revisionPath));
    return typeof item.name === 'string' ? { id, type: item.type, name: item.name, etag } : { id, type: item.type, etag };
  }

  /** The ids a folder stored under `id` lists, ordered by id (UTF-16 code units). */
  childIds(id: string, item: SimulatorItem): string[] {
    const ids = new Set(this.byParent.get(id));
    for (const extra of extrasOf(item)) if (this.has(extra)) ids.add(extra);
    return [...ids].sort();
  }

  /** The item as the items endpoint answers it: without `extraChildren`, and a folder with its list. */
  served(id: string, item: SimulatorItem, child: (id: string) => SimulatorItem): Record<string, unknown> {
    const { extraChildren: _extras, ...body } = item;
    if (item.type !== 'folder') return body;
    const ids = this.childIds(id, item);
    const cap = this.settings.cap;
    const entries = (ids.length > cap ? ids.slice(0, cap) : ids).map((childId) => this.entry(childId, child(childId)));
    return { ...body, item_collection: { entries, total_count: ids.length, offset: 0, limit: cap } };
  }
}
