/**
 * Discovery (docs/discovery.md): a folder item that lists its children (context `childrenPath`)
 * makes the sync send the children it does not hold yet to the reconcile queue, in the background
 * lane, so that a whole tree is mirrored from its roots. Part of the core: no AWS import; it talks
 * to the items table, the items bucket and the reconcile queue through ports.
 *
 * When: only when a folder's row is about to be written (new, a new revision, live again after a
 * tombstone) or tombstoned (the provider answered 404), and when an unchanged folder's row still
 * carries `childrenPending` (below). An unchanged folder otherwise reads and sends nothing, so
 * cycles and repeated paths end by themselves.
 *
 * What is sent, always as ids of the folder's connection, never an id whose sync is in flight in
 * this batch (a finished one is sent as any other: the strongly consistent read below sees its row,
 * if it wrote one):
 * - when the folder had a live row: every child of its previous list that is not in the new one
 *   (the previous copy read from the row, or from the items bucket for a large folder), BEFORE the
 *   row is written: checked directly, since a delete is only ever written after the provider
 *   answers 404 for the item;
 * - when that row still carries `childrenPending` and the new list cannot be read: the children of
 *   the previous list as afterWrite would have sent them (compared with the table), BEFORE the row
 *   is written (the new row, naming no child, is not marked);
 * - when the folder is tombstoned: every child of its last list, before the tombstone;
 * - every child in the list with no row, a tombstone, or (with `childRevisionPath`) a revision in
 *   the entry other than the stored one (or none to compare), AFTER the row is written: one
 *   strongly consistent read of the children's stored revisions (ItemStore.getRevisions, in
 *   chunks). Write first, read second: of two folders listing each other (a cycle closing, or two
 *   new folders synced at once), the one whose read comes later sees the other's row, so at most
 *   one sends the other; a folder whose children are in flight has its row, so a child listing it
 *   back does not send it.
 *
 * Crash safety: the row is written with `childrenPending` (true) when its list names any child;
 * the attribute is removed once they are sent, on condition that the row still is the version
 * written. If any id cannot be sent, this throws a TransientError: the record is retried; the
 * children that left the list go before the row is written, so their failure leaves the row as it
 * was. An unchanged folder whose row carries the marker (the invocation ended between the write and
 * the sends, or the sends failed) sends its listed children and removes the marker. A marked row
 * that is replaced or tombstoned has its children sent first (those that left the new list, all of
 * them when the new list cannot be read, or all of its last list for a tombstone: the rest are the
 * new marked row's); a marked row whose previous copy cannot be read (its object gone from the
 * items bucket) is replaced all the same, with a warning: the children only that copy named are not
 * sent (nothing else names them; retrying would hold the folder for ever). Duplicates are only extra
 * checks.
 *
 * A list is read as far as it goes: entries that are not objects, have no string id at
 * `childIdPath`, an invalid id, name the folder itself or repeat an earlier id are skipped, counted
 * and logged (one line per folder); a value at `childrenPath` that is not an array is a listing
 * that cannot be read (counted, logged); no value there (or null) is an empty list. A list shorter
 * than the total at `childrenTotalPath` is counted and logged as truncated.
 */
import { TransientError } from '../shared/errors.js';
import { getPath, isLosslessNumber, isObject, jsonType, parseJson } from '../shared/json.js';
import type { Log } from '../shared/ports.js';
import { revisionText } from './item.js';
import { itemIdProblem } from './message.js';
import type { DiscoverySink, ItemKey, ItemObjectStore, ItemStore, StoredRevision } from './ports.js';

/** Where a folder item lists its children (SyncConfig.discovery without the queue). */
export interface DiscoverySettings {
  childrenPath: string;
  childIdPath: string;
  childRevisionPath?: string;
  childrenTotalPath?: string;
}

export interface DiscoveryPorts {
  store: Pick<ItemStore, 'getRevisions' | 'getItem' | 'clearChildrenPending'>;
  objects: Pick<ItemObjectStore, 'get'>;
  sink: DiscoverySink;
  log: Log;
}

/** The batch's discovery counters (part of SyncCounts). */
export interface DiscoveryCounts {
  /** Child ids sent for checking (new, changed, left the list, of a deleted folder). */
  childrenDiscovered: number;
  /** Entries skipped (not an object, no or an invalid id, the folder itself, a duplicate) and lists that are not arrays. */
  childrenSkipped: number;
  /** Folders whose list is shorter than their total. */
  listingsTruncated: number;
}

/** One usable entry of a folder's list. */
export interface Child {
  id: string;
  /** The entry's revision as text (at `childRevisionPath`), when configured and present. */
  revision?: string;
}

/** A folder's list of children as read. */
export interface Listing {
  /** `listed`: an array (or no value: an empty list); `unreadable`: a value that is not an array. */
  kind: 'listed' | 'unreadable';
  /** The usable entries, each id once, in list order. */
  children: Child[];
  /** What was skipped: the entry's index (none for the list itself), and why. */
  skipped: Array<{ index?: number; why: string }>;
  /** Set when the list holds fewer entries than the folder's total (`childrenTotalPath`). */
  truncated?: { listed: number; total: number };
  /** Why the total could not be read, when it is there but not a whole number. */
  badTotal?: string;
}

/** Most skipped entries a log line names (the count has them all). */
export const MAX_LOGGED_SKIPS = 10;

/** The children a folder item lists (`folderId` is the folder's own id: an entry naming it is skipped). */
export function readListing(item: Record<string, unknown>, folderId: string, settings: DiscoverySettings): Listing {
  const listing: Listing = { kind: 'listed', children: [], skipped: [] };
  const raw = getPath(item, settings.childrenPath);
  if (raw === undefined || raw === null) return listing;
  if (!Array.isArray(raw)) {
    listing.kind = 'unreadable';
    listing.skipped.push({ why: `the value at "${settings.childrenPath}" is ${jsonType(raw)}, not an array` });
    return listing;
  }
  const seen = new Map<string, number>();
  raw.forEach((entry: unknown, index) => {
    const why = entryProblem(entry, settings, folderId, seen);
    if (why !== undefined) {
      listing.skipped.push({ index, why });
      return;
    }
    const id = getPath(entry, settings.childIdPath) as string;
    seen.set(id, index);
    const revision = settings.childRevisionPath !== undefined ? revisionText(getPath(entry, settings.childRevisionPath)) : undefined;
    listing.children.push(revision !== undefined ? { id, revision } : { id });
  });
  if (settings.childrenTotalPath !== undefined) {
    const total = getPath(item, settings.childrenTotalPath);
    if (total !== undefined && total !== null) {
      const count = wholeNumber(total);
      if (count === undefined) listing.badTotal = `the value at "${settings.childrenTotalPath}" is ${jsonType(total)}, not a whole number`;
      else if (raw.length < count) listing.truncated = { listed: raw.length, total: count };
    }
  }
  return listing;
}

/** Why an entry is skipped, or undefined when it is a usable child. Never quotes the entry. */
function entryProblem(entry: unknown, settings: DiscoverySettings, folderId: string, seen: ReadonlyMap<string, number>): string | undefined {
  if (!isObject(entry)) return `the entry is ${jsonType(entry)}, not an object`;
  const id = getPath(entry, settings.childIdPath);
  if (typeof id !== 'string') return `the entry has no string id at "${settings.childIdPath}" (found ${jsonType(id)})`;
  const idProblem = itemIdProblem(id);
  if (idProblem !== undefined) return `the entry's id is not a valid item id (${idProblem})`;
  if (id === folderId) return 'the entry names the folder itself';
  const earlier = seen.get(id);
  if (earlier !== undefined) return `the entry repeats the id of the entry at index ${earlier}`;
  return undefined;
}

function wholeNumber(value: unknown): number | undefined {
  const number = isLosslessNumber(value) ? Number(value.toString()) : value;
  return typeof number === 'number' && Number.isSafeInteger(number) && number >= 0 ? number : undefined;
}

/**
 * The children to send for checking: those without a row, with a tombstone, or (when the entries'
 * revisions are compared) whose entry's revision is not the stored one, or missing.
 */
export function childrenToCheck(children: readonly Child[], stored: ReadonlyMap<string, StoredRevision> | undefined, compareRevisions: boolean): string[] {
  return children
    .filter((child) => {
      const row = stored?.get(child.id);
      if (row === undefined || row.deleted) return true;
      return compareRevisions && child.revision !== row.revision;
    })
    .map((child) => child.id);
}

/** The ids of `previous` that `current` no longer lists. */
export function childrenThatLeft(previous: readonly Child[], current: readonly Child[]): string[] {
  const now = new Set(current.map((child) => child.id));
  return previous.filter((child) => !now.has(child.id)).map((child) => child.id);
}

/** A row version a folder's write made: what removing its `childrenPending` is conditional on. */
export interface WrittenRow {
  revision: string;
  syncedAt: string;
}

/** The children of a folder's stored copy, and whether its row still carries `childrenPending`. */
export interface PreviousList {
  children: Child[];
  pending: boolean;
}

/**
 * The crawl of one batch: what a folder's write or tombstone sends. `inBatch` tells the ids of the
 * folder's connection whose sync is in flight in this batch: they are not sent, being checked here.
 * An id whose sync has ended is not among them: the strongly consistent read of the children's rows
 * sees what it wrote, and one that ended with no row (the provider answered 404 before the folder
 * listed it) must be sent, or nothing would check it again.
 */
export class Discovery {
  constructor(
    private readonly ports: DiscoveryPorts,
    private readonly settings: DiscoverySettings,
    private readonly counts: DiscoveryCounts,
    private readonly inBatch: (key: ItemKey) => boolean = () => false,
  ) {}

  /**
   * Before the row of folder `key` is written with `item`: reads its list (counted, logged) and,
   * when it had a live row (`current`), sends the children that left the list (read from the
   * previous copy: once the row is replaced they cannot be told); when that row still carries
   * `childrenPending` and the new list cannot be read, the previous list's children the table does
   * not hold (what its writer left unsent: the new row names none). Returns the listed children, to
   * send once the row is written (afterWrite): the row is written with `childrenPending` when
   * there is any. `sent` holds the ids already sent for this folder in this invocation (a lost
   * write race decides again): they are not sent twice. Throws TransientError when any id could
   * not be sent, or a read fails: the row is not written.
   */
  async beforeWrite(key: ItemKey, item: Record<string, unknown>, current: StoredRevision | undefined, sent: Set<string>): Promise<Child[]> {
    const listing = readListing(item, key.id, this.settings);
    this.report(key, listing);
    if (current !== undefined && !current.deleted) {
      // A list that cannot be read needs the previous copy only when the row is marked.
      const previous = await this.previousList(key, listing.kind === 'unreadable');
      if (listing.kind === 'listed') {
        // The children still listed are the new row's to send (it is marked when there is any).
        await this.send(key, { listed: [], left: childrenThatLeft(previous.children, listing.children) }, sent);
      } else if (previous.pending) {
        // A list that cannot be read says nothing about who left it, and the new row names no
        // child: the marked row's children go now, as its writer would have sent them.
        await this.sendUnknown(key, previous.children, sent);
      }
    }
    return listing.children;
  }

  /**
   * Once folder `key`'s row `written` is written with `childrenPending`: reads its children's
   * stored revisions (strongly consistent: a row written before this read is seen, so of two
   * folders listing each other at most one sends the other), sends those to check, then removes
   * the marker, on condition that the row still is `written` (a newer write owns it otherwise).
   * Throws TransientError when any id could not be sent, or the read fails: the marker stays.
   */
  async afterWrite(key: ItemKey, children: readonly Child[], written: WrittenRow, sent: Set<string>): Promise<void> {
    await this.sendUnknown(key, children, sent);
    await this.clearMarker(key, written);
  }

  /**
   * An unchanged folder whose row (`stored`) still carries `childrenPending` (its writer ended
   * between the write and the sends): sends the children of its list, as afterWrite, and removes
   * the marker.
   */
  async pending(key: ItemKey, item: Record<string, unknown>, stored: WrittenRow, sent: Set<string>): Promise<void> {
    this.ports.log.info('folder written without its children sent; sending them now', { connection: key.connection, itemId: key.id, revision: stored.revision, syncedAt: stored.syncedAt });
    await this.afterWrite(key, readListing(item, key.id, this.settings).children, stored, sent);
  }

  /** Before folder `key`'s live row is tombstoned (the provider answered 404): sends the children of its last list. */
  async beforeTombstone(key: ItemKey, sent: Set<string>): Promise<void> {
    const previous = await this.previousList(key);
    await this.send(key, { listed: [], left: previous.children.map((child) => child.id) }, sent);
  }

  /**
   * Reads `children`'s stored revisions (strongly consistent) and sends those to check (no row, a
   * tombstone, another revision): TransientError when the read fails or any id could not be sent.
   */
  private async sendUnknown(key: ItemKey, children: readonly Child[], sent: Set<string>): Promise<void> {
    if (children.length === 0) return;
    const stored = await this.ports.store.getRevisions(
      children.map((child) => ({ connection: key.connection, id: child.id })),
      { consistent: true },
    );
    const toCheck = childrenToCheck(children, stored.get(key.connection), this.settings.childRevisionPath !== undefined);
    await this.send(key, { listed: toCheck, left: [] }, sent);
  }

  /** Best effort: a marker left only makes the folder's next check send its children again. */
  private async clearMarker(key: ItemKey, written: WrittenRow): Promise<void> {
    try {
      await this.ports.store.clearChildrenPending(key, written);
    } catch (error) {
      this.ports.log.warn('folder children sent, but the childrenPending marker could not be removed; the next check of the folder sends them again', {
        connection: key.connection,
        itemId: key.id,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      });
    }
  }

  /**
   * The children of the stored copy of `key` when it is a live folder (inline, or its object in the
   * items bucket), and whether its row carries `childrenPending`. A copy that cannot be read is an
   * empty list (logged; for a marked row, the children only it named are not sent: a retry cannot
   * bring the copy back, and would hold the folder for ever). With
   * `onlyPending`, an unmarked row's children are not read (none, and no object fetched).
   */
  private async previousList(key: ItemKey, onlyPending = false): Promise<PreviousList> {
    const row = await this.ports.store.getItem(key);
    if (row === undefined || row.deleted || row.type !== 'folder') return { children: [], pending: false };
    const pending = row.childrenPending === true;
    if (onlyPending && !pending) return { children: [], pending };
    let item = row.item;
    if (item === undefined && row.objectKey !== undefined) {
      const bytes = await this.ports.objects.get(row.objectKey);
      const parsed = bytes === undefined ? undefined : parseObject(bytes);
      if (parsed === undefined) {
        const reason = bytes === undefined ? 'no such object' : 'not a JSON object';
        const where = { connection: key.connection, itemId: key.id, objectKey: row.objectKey, reason };
        if (pending) {
          // Retrying cannot bring a copy back (no such object, not JSON): a folder held for it would never
          // update again. The children its new list names go as always; those only the lost copy named
          // are left to their own checks (an id with a row: the reconciler's).
          this.ports.log.warn("the folder's previous copy could not be read from the items bucket, and its row still carries childrenPending; the children only that copy named are not sent", where);
          return { children: [], pending };
        }
        this.ports.log.warn('the folder\'s previous copy could not be read from the items bucket; the children that left its list are not sent', where);
        return { children: [], pending };
      }
      item = parsed;
    }
    return { children: item === undefined ? [] : readListing(item, key.id, this.settings).children, pending };
  }

  /**
   * Sends the ids not sent yet and not synced in this batch; one log line when any was sent;
   * TransientError when any could not be.
   */
  private async send(key: ItemKey, ids: { listed: readonly string[]; left: readonly string[] }, sent: Set<string>): Promise<void> {
    const unique = [...new Set([...ids.listed, ...ids.left])].filter((id) => !sent.has(id) && !this.inBatch({ connection: key.connection, id }));
    if (unique.length === 0) return;
    const failed = await this.ports.sink.send(key.connection, unique);
    const failedIds = new Set(failed.map((failure) => failure.id));
    for (const id of unique) if (!failedIds.has(id)) sent.add(id);
    this.counts.childrenDiscovered += unique.length - failedIds.size;
    this.ports.log.info('folder children sent for checking', {
      connection: key.connection,
      itemId: key.id,
      sent: unique.length - failedIds.size,
      listed: ids.listed.length,
      left: ids.left.length,
      ...(failed.length > 0 ? { failed: failed.length } : {}),
    });
    if (failed.length > 0) {
      throw new TransientError(
        `${failed.length} of the folder's ${unique.length} children could not be sent for checking (${failed[0]!.error}); the folder's record is retried until they are`,
      );
    }
  }

  /** Counts and logs (one line each) what the listing skipped and its truncation. */
  private report(key: ItemKey, listing: Listing): void {
    const where = { connection: key.connection, itemId: key.id };
    if (listing.skipped.length > 0 || listing.badTotal !== undefined) {
      this.counts.childrenSkipped += listing.skipped.length;
      this.ports.log.warn(listing.kind === 'unreadable' ? 'folder listing cannot be read; no child read from it' : 'folder listing entries skipped', {
        ...where,
        skipped: listing.skipped.length,
        entries: listing.skipped.slice(0, MAX_LOGGED_SKIPS),
        ...(listing.badTotal !== undefined ? { total: listing.badTotal } : {}),
      });
    }
    if (listing.truncated !== undefined) {
      this.counts.listingsTruncated += 1;
      this.ports.log.warn('folder listing truncated; only the children it lists are found', { ...where, ...listing.truncated });
    }
  }
}

function parseObject(bytes: Uint8Array): Record<string, unknown> | undefined {
  try {
    const parsed = parseJson(new TextDecoder().decode(bytes));
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}
