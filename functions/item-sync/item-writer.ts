/**
 * Writing an item's row: the item inline in `item`, or, when the row would be over DynamoDB's item
 * size limit, the item whole in the items bucket and `itemObject` (key, size, SHA-256) in the row
 * in its place (contract, "The items table"). Part of the core: no AWS import.
 *
 * The decision is the items table's own: the store answers `too-large` for a row its size estimate
 * (DynamoDB's rules, as it has always refused such rows) puts over 400 KB, without sending it, and
 * for a row DynamoDB refuses for its size. Nothing else about the write changes: one conditional
 * PutItem on the state the decision was made on.
 *
 * The object holds the item as the sync parsed it, serialized again as JSON: the same value the
 * `item` attribute would hold (every field, nested values, numbers with their exact digits; the
 * parse is lossless and refuses duplicate keys), compact, UTF-8. Whitespace and key order of the
 * provider's text carry no meaning in JSON and are not kept (the `item` map keeps none either). The
 * SHA-256 and the size are those of the object's bytes.
 *
 * Objects and rows, and why no row ever points to nothing:
 * - every write uses a key of its own: `items/<connection>/<SHA-256 of the id>/<revision>/<SHA-256
 *   of the object>-<random>.json`, so racing writers never write the same key, and deleting a key only
 *   ever removes the object of the write that chose it;
 * - the object is written before the row; a row DynamoDB refused (validation) means the object is
 *   deleted; a row write that lost (condition failed) or failed otherwise is followed by a strongly
 *   consistent read of the row: the object is deleted only when the row neither points to it (a
 *   write whose answer was lost and that the SDK sent again may have been applied) nor is still in
 *   the state the write expected (a failed write might yet be applied); otherwise it is kept;
 * - after a row write, the object of the row it replaced (DynamoDB returns the old row) is deleted:
 *   an item going back inline, or a newer large revision; a tombstone keeps its object (the last
 *   copy is kept).
 *
 * A write whose answer was lost: DynamoDB applied it, then the caller saw a failure (the SDK's
 * second send then meets the condition its own first send broke, or the failure outlasts the SDK's
 * retries). Every write that does not answer `written` (row or tombstone) is therefore followed by
 * a strongly consistent read of the row: a row that is this write's own (its object key; or its
 * revision, liveness and `syncedAt`) means the write was applied and is counted as what it did.
 *
 * The object of the row the write expected to replace (the expected row's `objectKey`, read before
 * the write) is that row version's own: once the row read back no longer points to it, no row ever
 * will again, whoever replaced the row (this write, its answer lost, even if another writer has
 * replaced this write's row since; or another writer, which deletes it too: a second delete is
 * harmless). So it is deleted then; kept while the row still points to it; and logged as left when
 * the row cannot be read back.
 *
 * What can be left behind: an object no row points to. It costs storage, never correctness, and is
 * found by comparing the keys under items/ with the rows' itemObject keys (infra/storage/items-bucket.ts).
 * - the process ends between the object write and the row write (time-out, crash): nothing logs it;
 * - a delete fails, the row cannot be read back after a failed write (this write's object, and the
 *   object of the row it expected to replace), or a failed row write might still be applied: logged
 *   as "item object left in the bucket" with the key;
 * - an upload fails and so does the delete that follows it (whatever of it may have arrived):
 *   logged as "item object upload failed" with the key (there may be no object at all).
 */
import { createHash, randomBytes } from 'node:crypto';
import { stringify } from 'lossless-json';
import { ConfigError, PermanentError } from '../shared/errors.js';
import type { Log } from '../shared/ports.js';
import type { ExpectedRow, ItemKey, ItemObjectRef, ItemObjectStore, ItemRow, ItemStore, PutResult, RowState, StoredRevision, WriteResult } from './ports.js';

/** Every item object's key starts with this. */
export const ITEM_OBJECT_PREFIX = 'items/';

export interface ItemWriterDeps {
  store: ItemStore;
  objects: ItemObjectStore;
  log: Log;
  /** The random part of an object key; default 16 hex digits from the system's random source. */
  uniqueSuffix?: () => string;
}

/** A row with its item inline: what the sync has to write. */
export type InlineRow = Extract<ItemRow, { item: Record<string, unknown> }>;

export class ItemWriter {
  private readonly uniqueSuffix: () => string;

  constructor(private readonly deps: ItemWriterDeps) {
    this.uniqueSuffix = deps.uniqueSuffix ?? (() => randomBytes(8).toString('hex'));
  }

  /** Writes the row on condition that the stored one is `expected`: inline, or through an object. */
  async write(row: InlineRow, expected: ExpectedRow): Promise<WriteResult> {
    let inline: PutResult;
    try {
      inline = await this.deps.store.put(row, expected);
    } catch (error) {
      if (!(error instanceof PermanentError) && (await this.ownRowAfterAll(row, expected))) return 'written';
      throw error;
    }
    switch (inline.result) {
      case 'written':
        await this.dropReplaced(row, inline.replacedObjectKey);
        return 'written';
      case 'conflict':
        return (await this.ownRowAfterAll(row, expected)) ? 'written' : 'conflict';
      case 'too-large':
        return this.writeThroughObject(row, expected, inline.bytes);
    }
  }

  /** Marks the row `expected` deleted (it keeps its copy, and its object), on condition that it still is. */
  async tombstone(item: ItemKey, expected: StoredRevision, syncedAt: string): Promise<WriteResult> {
    let written: WriteResult;
    try {
      written = await this.deps.store.markDeleted(item, expected.revision, syncedAt);
    } catch (error) {
      if (!(error instanceof PermanentError) && (await this.ownTombstoneAfterAll(item, expected.revision, syncedAt))) return 'written';
      throw error;
    }
    if (written === 'written') return written;
    return (await this.ownTombstoneAfterAll(item, expected.revision, syncedAt)) ? 'written' : 'conflict';
  }

  private async writeThroughObject(row: InlineRow, expected: ExpectedRow, rowBytes: number): Promise<WriteResult> {
    const body = Buffer.from(itemJson(row.item), 'utf8');
    const sha256 = createHash('sha256').update(body).digest('hex');
    const key = itemObjectKey(row.connection, row.id, row.revision, sha256, this.uniqueSuffix());
    const ref: ItemObjectRef = { key, size: body.byteLength, sha256 };
    this.deps.log.info('item too large for a row; storing it in the items bucket', {
      ...logKey(row),
      rowBytes,
      objectKey: ref.key,
      objectBytes: ref.size,
    });
    await this.putObject(row, ref.key, body, ref.sha256);
    const { item: _item, ...fields } = row;
    let written;
    try {
      written = await this.deps.store.put({ ...fields, itemObject: ref }, expected);
    } catch (error) {
      if (error instanceof PermanentError) {
        // DynamoDB refused the row: it was not written, and never will be.
        await this.deleteObject(row, ref.key, `its row was refused (${describe(error)})`);
      } else if ((await this.settle(row, ref.key, expected, `the row write failed (${describe(error)})`)) === 'written') {
        return 'written';
      }
      throw error;
    }
    switch (written.result) {
      case 'written':
        await this.dropReplaced(row, written.replacedObjectKey, ref.key);
        return 'written';
      case 'conflict':
        return this.settle(row, ref.key, expected, 'the row write lost a race');
      case 'too-large':
        await this.deleteObject(row, ref.key, 'its row was refused');
        throw new PermanentError(`item too large to store: even the row pointing to its object is ${written.bytes} bytes, over DynamoDB's 400 KB`);
    }
  }

  /**
   * Stores the object. When that fails, whatever may have arrived is removed (nothing points to the
   * key, no other write uses it); a store that cannot be reached as configured (ConfigError) took
   * nothing, and is not asked again.
   */
  private async putObject(item: ItemKey, key: string, body: Uint8Array, sha256: string): Promise<void> {
    try {
      await this.deps.objects.put(key, body, sha256);
    } catch (error) {
      if (error instanceof ConfigError) throw error;
      const why = `its upload failed (${describe(error)})`;
      try {
        await this.deps.objects.delete(key);
        this.deps.log.info('item object deleted', { ...logKey(item), objectKey: key, reason: why });
      } catch (deleteError) {
        // Not "left in the bucket": the upload did not succeed, so there may well be nothing there.
        this.deps.log.warn('item object upload failed', {
          ...logKey(item),
          objectKey: key,
          reason: `${why}, and deleting whatever of it may have arrived failed too (${describe(deleteError)})`,
        });
      }
      throw error;
    }
  }

  /**
   * After a row write through an object that did not answer `written`: a row pointing to the object
   * is this write's own (`written`: its answer was lost); otherwise the object stays if the row is
   * still the one the write expected (the write may yet be applied), and is deleted if not (nothing
   * can ever point to it).
   */
  private async settle(item: ItemKey, key: string, expected: ExpectedRow, why: string): Promise<WriteResult> {
    const state = await this.readBack(item);
    if (isUnreadable(state)) {
      this.left(item, key, `${why}, and reading the row back failed (${state.unreadable})`);
      this.replacedUnknown(item, expected, state);
      return 'conflict';
    }
    if (state?.objectKey === key) {
      this.deps.log.warn('item object kept: its row was written after all (the answer to the write was lost)', { ...logKey(item), objectKey: key });
      await this.dropReplaced(item, expectedObjectKey(expected), key, LOST_ANSWER);
      return 'written';
    }
    if (isExpected(state, expected)) {
      this.left(item, key, `${why}, and the row is still the one the write expected (the write may yet be applied)`);
    } else {
      await this.deleteObject(item, key, `${why}; the row points elsewhere`);
    }
    await this.dropUnreferenced(item, expected, state);
    return 'conflict';
  }

  /**
   * After an inline row write that did not answer `written`: whether the row now is its own (this
   * revision, live, no object, this `syncedAt`), i.e. it was applied and its answer lost. Then the
   * object of the row it replaced is deleted. A row that cannot be read counts as not written.
   */
  private async ownRowAfterAll(row: InlineRow, expected: ExpectedRow): Promise<boolean> {
    const state = await this.readBack(row);
    if (isUnreadable(state)) {
      this.replacedUnknown(row, expected, state);
      return false;
    }
    const own = state !== undefined && !state.deleted && state.objectKey === undefined && state.revision === row.revision && state.syncedAt === row.syncedAt;
    if (own) {
      this.deps.log.warn('row written after all (the answer to the write was lost)', { ...logKey(row), revision: row.revision });
      await this.dropReplaced(row, expectedObjectKey(expected), undefined, LOST_ANSWER);
    } else {
      await this.dropUnreferenced(row, expected, state);
    }
    return own;
  }

  /** The same for a tombstone: the row is deleted at the expected revision with this `syncedAt` (a tombstone keeps its object). */
  private async ownTombstoneAfterAll(item: ItemKey, revision: string, syncedAt: string): Promise<boolean> {
    const state = await this.readBack(item);
    const own = state !== undefined && !isUnreadable(state) && state.deleted && state.revision === revision && state.syncedAt === syncedAt;
    if (own) this.deps.log.warn('row written after all (the answer to the write was lost)', { ...logKey(item), revision, deleted: true });
    return own;
  }

  /** The row as it is now (strongly consistent), or why it could not be read. */
  private async readBack(item: ItemKey): Promise<RowState | undefined | Unreadable> {
    try {
      return await this.deps.store.rowState(item);
    } catch (error) {
      return { unreadable: describe(error) };
    }
  }

  /**
   * After a write that did not answer `written`, the row read back: the object of the row the write
   * expected to replace is deleted once the row no longer points to it (that key was that row
   * version's own: nothing will point to it again, whoever replaced the row).
   */
  private async dropUnreferenced(item: ItemKey, expected: ExpectedRow, state: RowState | undefined): Promise<void> {
    const key = expectedObjectKey(expected);
    if (key === undefined || state?.objectKey === key) return;
    await this.deleteObject(item, key, 'the row pointing to it was replaced');
  }

  /** The row could not be read back: the object of the row the write expected to replace may be left, its key logged. */
  private replacedUnknown(item: ItemKey, expected: ExpectedRow, state: Unreadable): void {
    const key = expectedObjectKey(expected);
    if (key === undefined) return;
    this.left(
      item,
      key,
      `a write that may have replaced the row pointing to it did not answer, and reading the row back failed (${state.unreadable}); if the row no longer points to it, nothing will`,
    );
  }

  /** The object of the row a write replaced, unless the new row points to the same one. */
  private async dropReplaced(item: ItemKey, replacedKey: string | undefined, newKey?: string, note = ''): Promise<void> {
    if (replacedKey === undefined || replacedKey === newKey) return;
    await this.deleteObject(item, replacedKey, `the row pointing to it was replaced${note}`);
  }

  /** Best effort: a failure leaves the object behind, logged. */
  private async deleteObject(item: ItemKey, key: string, why: string): Promise<void> {
    try {
      await this.deps.objects.delete(key);
      this.deps.log.info('item object deleted', { ...logKey(item), objectKey: key, reason: why });
    } catch (error) {
      this.left(item, key, `${why}, but deleting it failed (${describe(error)})`);
    }
  }

  private left(item: ItemKey, key: string, why: string): void {
    this.deps.log.warn('item object left in the bucket', { ...logKey(item), objectKey: key, reason: why });
  }
}

/** The item as the object holds it: compact JSON, numbers with their exact digits. */
export function itemJson(item: Record<string, unknown>): string {
  const text = stringify(item);
  if (text === undefined) throw new PermanentError('the item cannot be written as JSON');
  return text;
}

/**
 * `items/<connection>/<SHA-256 of the id>/<revision>/<SHA-256 of the object>-<suffix>.json`: the
 * connection id as it is (its characters are plain: connection.ts); the revision as it is when it
 * is short and plain (letters, digits, `.`, `_`, `-`), else `h` and the start of its SHA-256. The
 * suffix makes the key one write's own.
 */
export function itemObjectKey(connection: string, id: string, revision: string, sha256: string, suffix: string): string {
  const plain = /^[A-Za-z0-9._-]{1,64}$/.test(revision) && revision !== '.' && revision !== '..';
  const revisionPart = plain ? revision : `h${sha256Hex(revision).slice(0, 32)}`;
  return `${itemObjectPrefix(connection)}${sha256Hex(id)}/${revisionPart}/${sha256}-${suffix}.json`;
}

/** `items/<connection>/`: every object of the connection's items is under it (what a purge deletes). */
export function itemObjectPrefix(connection: string): string {
  return `${ITEM_OBJECT_PREFIX}${connection}/`;
}

/** The fields a log line names an item by: its connection beside its id. */
function logKey(item: ItemKey): { connection: string; itemId: string } {
  return { connection: item.connection, itemId: item.id };
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** A row read back that failed, and why. */
interface Unreadable {
  readonly unreadable: string;
}

function isUnreadable(state: RowState | undefined | Unreadable): state is Unreadable {
  return state !== undefined && 'unreadable' in state;
}

/** Said of a replaced object when the write that replaced its row lost its answer. */
const LOST_ANSWER = ' (the answer to that write was lost)';

function expectedObjectKey(expected: ExpectedRow): string | undefined {
  return expected.exists ? expected.objectKey : undefined;
}

function isExpected(state: RowState | undefined, expected: ExpectedRow): boolean {
  if (!expected.exists) return state === undefined;
  return state !== undefined && state.revision === expected.revision && state.deleted === expected.deleted;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
