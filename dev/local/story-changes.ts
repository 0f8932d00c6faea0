/**
 * What the local story changes at the simulated provider between its passes: in the account
 * `default` (the simulator's methods without an account), the large file that starts too large for
 * a row, new revisions, deletions, a new item, a deleted item restored, a new file deep in the
 * tree; in any account, new revisions of a few files. The simulator's folders embed their children:
 * a change to an item's revision, name or place gives its folders, up to the root, new revisions.
 */
import type { ProviderAccount, ProviderSimulator, SimulatorItem } from '../simulator/provider-simulator.js';

/** A field that makes an item too large for a DynamoDB row (over 400 KB): the sync stores it in the items bucket. */
export const LARGE_FIELD = 'transcript';
export const LARGE_TEXT = 'All work and no play makes a very long transcript. '.repeat(10_000);

/** The file that starts too large for a row: the last file of the tree. */
export function largeFileOf(items: readonly SimulatorItem[]): string | undefined {
  return items.filter((item) => item.type === 'file').at(-1)?.id;
}

/**
 * The provider changes while nobody sends an id: new revisions for about 1% of the items (two at
 * least), one more deletion, and the first item the earlier changes deleted comes back as it was.
 * Only files whose item fits in a row, none the story already singled out while there are enough
 * others (a tree of a few items has not).
 */
export function changeProviderQuietly(
  simulator: ProviderSimulator,
  change: ReturnType<typeof changeProvider>,
  limitedId: string,
  rand: () => number,
): { bumped: string[]; deletedId: string; restoredId: string } {
  const singled = new Set([limitedId, change.shrunk, change.grown, change.newItem.id, ...change.bumped]);
  const files = simulator.itemIds().filter((id) => {
    const item = simulator.getItem(id)!;
    return item.type === 'file' && item[LARGE_FIELD] === undefined;
  });
  const shuffled = [...shuffle(files.filter((id) => !singled.has(id)), rand), ...shuffle(files.filter((id) => singled.has(id)), rand)];
  const bumpCount = Math.max(2, Math.round(simulator.itemIds().length * 0.01));
  const bumped = shuffled.slice(0, bumpCount);
  const deletedId = shuffled[bumpCount]!;
  for (const id of bumped) simulator.bumpRevision(id);
  simulator.deleteItem(deletedId);
  const restored = change.deletedItems[0]!;
  simulator.setItem(restored);
  return { bumped, deletedId, restoredId: restored.id };
}

/** New revisions for about 5% of the items (a folder among them), two files deleted, one new file. */
export function changeProvider(
  simulator: ProviderSimulator,
  ids: readonly string[],
  limitedId: string,
  rand: () => number,
  revisionField: string,
): { bumped: string[]; deletedIds: string[]; deletedItems: SimulatorItem[]; newItem: SimulatorItem; shrunk: string; grown: string } {
  const shrunk = largeFileOf(ids.map((id) => simulator.getItem(id)!))!;
  const files = ids.filter((id) => simulator.getItem(id)?.type === 'file' && id !== limitedId && id !== shrunk);
  const shuffled = shuffle(files, rand);
  const deletedIds = shuffled.slice(0, 2);
  const bumpCount = Math.max(3, Math.round(ids.length * 0.05));
  const folderToBump = ids.find((id) => simulator.getItem(id)?.type === 'folder' && id !== ids[0]) ?? ids[0]!;
  // Among the new revisions: the large file fits in a row again, another file outgrows its row.
  const grown = shuffled[2]!;
  const bumped = [folderToBump, shrunk, grown, ...shuffled.slice(3, bumpCount)];
  const { [LARGE_FIELD]: _dropped, ...small } = simulator.getItem(shrunk)!;
  simulator.setItem(small as SimulatorItem);
  simulator.setItem({ ...simulator.getItem(grown)!, [LARGE_FIELD]: LARGE_TEXT });
  for (const id of bumped) simulator.bumpRevision(id);
  const deletedItems = deletedIds.map((id) => simulator.getItem(id)!);
  for (const id of deletedIds) simulator.deleteItem(id);
  // Shaped like a file still there that fits in a row (in a tree of a few items, shuffled[bumpCount] may not exist).
  const template = [shuffled[bumpCount], ...shuffled.slice(3), limitedId]
    .map((id) => (id === undefined ? undefined : simulator.getItem(id)))
    .find((item) => item?.type === 'file' && item[LARGE_FIELD] === undefined)!;
  const newItem = newFileLike(template, ids, revisionField);
  simulator.setItem(newItem);
  return { bumped, deletedIds, deletedItems, newItem, shrunk, grown };
}

function shuffle<T>(list: readonly T[], rand: () => number): T[] {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * A new file at the provider in `folder` (of the account `default`), shaped like a file there that
 * fits in a row, with an id none of `taken` is (revision 1): nobody sends its id.
 */
export function addFileUnder(simulator: ProviderSimulator, folder: string, taken: readonly string[], revisionField: string): SimulatorItem {
  const template = simulator
    .itemIds()
    .map((id) => simulator.getItem(id)!)
    .find((item) => item.type === 'file' && item[LARGE_FIELD] === undefined)!;
  const item = { ...newFileLike(template, taken, revisionField, 'added deep in the tree'), parentId: folder };
  simulator.setItem(item);
  return item;
}

/** A new file at the provider, shaped like an existing one, with an id no item has (revision 1). */
function newFileLike(template: SimulatorItem, existing: readonly string[], revisionField: string, note = 'added after the first sync'): SimulatorItem {
  const taken = new Set(existing);
  let n = existing.length + 1;
  let id = `fil-${String(n).padStart(4, '0')}`;
  while (taken.has(id)) id = `fil-${String(++n).padStart(4, '0')}`;
  const item: SimulatorItem = { ...structuredClone(template), id, name: `${note} (${n}).txt`, mimeType: 'text/plain' };
  let holder: Record<string, unknown> = item;
  const keys = revisionField.split('.');
  for (const key of keys.slice(0, -1)) {
    if (typeof holder[key] !== 'object' || holder[key] === null) holder[key] = {};
    holder = holder[key] as Record<string, unknown>;
  }
  holder[keys[keys.length - 1]!] = 1;
  return item;
}

/**
 * New revisions for `count` files of an account that fit in a row, picked with `rand`: none of
 * `avoid` while there are enough others (a tree of a few items has not); the ids bumped.
 */
export function bumpFiles(account: ProviderAccount, count: number, rand: () => number, avoid: ReadonlySet<string> = new Set()): string[] {
  const files = account.itemIds().filter((id) => {
    const item = account.getItem(id)!;
    return item.type === 'file' && item[LARGE_FIELD] === undefined;
  });
  const candidates = [...shuffle(files.filter((id) => !avoid.has(id)), rand), ...shuffle(files.filter((id) => avoid.has(id)), rand)];
  const bumped = candidates.slice(0, count);
  for (const id of bumped) account.bumpRevision(id);
  return bumped;
}
