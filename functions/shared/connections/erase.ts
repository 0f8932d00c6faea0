/**
 * Erasing a connection's data (docs/connections.md, "Erase"): the client API's `DELETE
 * /connections/{connection}?erase=true` and the CLI's `remove --purge` ask for it
 * (operations.ts `eraseConnection`); the eraser function (functions/connection-eraser) and the CLI
 * run it with `runErase`. No AWS import.
 *
 * The rule, once: an erase runs only on a removed connection, and not before the safety wait after
 * its removal has passed (`eraseSettleSeconds`: an item sync container that read the connection
 * just before it was removed may use it for ACCESS_TOKEN_CACHE_SECONDS more, and an invocation
 * that began within that time writes until the sync's time-out). It then deletes the connection's
 * rows in the items table, its objects in the items bucket and its changes log, twice (a row or an object written
 * while the first sweep ran, behind its Query or its listing, is caught by the second), writing its
 * progress in the connection's row (the object keys a page of rows names deleted before those rows,
 * so a run cut short loses none), and last deletes that row, only while it is still removed and
 * still holds this erase: a connection put again meanwhile keeps its row and its new credentials
 * (putCredentials clears the erase; rows and objects deleted before that stay deleted).
 * Everything is repeatable: a run cut short (its time, a failure) is run again from its message,
 * and what it deleted is gone.
 */
import type { Clock } from '../ports.js';
import type { EraseProgress } from './connection.js';
import type { ConnectionStore } from './ports.js';

/** Kept beyond the cache and one sync invocation: clocks, the invocation's own writes at its end. */
export const ERASE_MARGIN_SECONDS = 30;

/** The safety wait between a connection's removal and its erase, for a sync of that time-out. */
export function eraseSettleSeconds(syncTimeoutSeconds: number, tokenCacheSeconds: number): number {
  return Math.max(90, tokenCacheSeconds + syncTimeoutSeconds + ERASE_MARGIN_SECONDS);
}

/** Asks for an erase to be run (the erase queue): `delaySeconds` from now at the earliest. */
export interface EraseScheduler {
  schedule(request: EraseRequest, delaySeconds: number): Promise<void>;
}

/** One erase, as its message carries it (`{"connection", "startedAt"}`). */
export interface EraseRequest {
  connection: string;
  startedAt: string;
}

/** A connection's items: its rows in the items table and its objects in the items bucket. */
export interface ItemsEraser {
  /**
   * Deletes the connection's rows, page by page, until there are none or `stop()` says so after a
   * page; `deleted` counts this call's deletes. A page's rows are deleted only once `beforeDelete`
   * has taken the object keys they name (so no key is lost with its row).
   */
  deleteRows(connection: string, options: EraseStep & { beforeDelete(objectKeys: string[]): Promise<void> }): Promise<{ deleted: number; complete: boolean }>;
  /** Deletes these object keys (some may not exist); how many were asked to be deleted. */
  deleteKeys(keys: readonly string[]): Promise<number>;
  /** Deletes every object under `items/<connection>/`, until done or `stop()` says so. */
  deleteObjects(connection: string, options: EraseStep): Promise<{ deleted: number; complete: boolean }>;
  /** Deletes the connection's changes log (its changes and its head), page by page, until there is none or `stop()` says so. */
  deleteChanges(connection: string, options: EraseStep): Promise<{ deleted: number; complete: boolean }>;
}

export interface EraseStep {
  /** Asked after each page: true stops the work there (the invocation's time runs out, the erase is no longer the row's). */
  stop(): boolean;
  /** Told after each page how many it deleted in all so far. */
  onProgress?(deleted: number): Promise<void> | void;
}

export interface ErasePorts {
  store: ConnectionStore;
  items: ItemsEraser;
  clock: Clock;
}

export type EraseRun =
  /** Erased: the connection's rows, objects and row are gone (or were already). */
  | { kind: 'done'; rowsDeleted: number; objectsDeleted: number }
  /** Not yet: the safety wait ends in `seconds`. */
  | { kind: 'wait'; seconds: number }
  /** Cut short by `stop()`: run it again (what it deleted is gone). */
  | { kind: 'unfinished'; rowsDeleted: number; objectsDeleted: number }
  /**
   * This erase is no longer the connection's: put again (its erase cleared), or another erase asked
   * for. `deleted`: rows or objects were deleted before that was seen (a put during the erase).
   */
  | { kind: 'stale'; reason: string; deleted: boolean };

export async function runErase(ports: ErasePorts, request: EraseRequest, stop: () => boolean): Promise<EraseRun> {
  const { connection, startedAt } = request;
  const row = await ports.store.view(connection, { consistent: true });
  if (!row) return { kind: 'done', rowsDeleted: 0, objectsDeleted: 0 };
  if (row.status !== 'removed' || row.erase?.startedAt !== startedAt) {
    return { kind: 'stale', reason: `connection "${connection}" ${row.status !== 'removed' ? `is ${row.status} again` : 'holds another erase or none'}: this erase is not run`, deleted: false };
  }
  const wait = Date.parse(row.erase.notBefore) - ports.clock.now().getTime();
  if (wait > 0) return { kind: 'wait', seconds: Math.ceil(wait / 1000) };

  const progress: EraseProgress = { ...row.erase, state: 'running' };
  // A write that fails means the erase is no longer the row's (put again): it stops at once.
  let stale = false;
  const write = async (): Promise<boolean> => {
    if (!stale && !(await ports.store.updateErase(connection, progress))) stale = true;
    return !stale;
  };
  if (!(await write())) return { kind: 'stale', reason: `connection "${connection}": its erase changed while it started`, deleted: false };
  const halt = (): boolean => stale || stop();
  const putAgain = `connection "${connection}" was put again during its erase: its row and new credentials are kept`;
  let keysDeleted = 0;
  for (let sweep = 0; sweep < 2; sweep++) {
    const rowsBase = progress.rowsDeleted;
    const rows = await ports.items.deleteRows(connection, {
      stop: halt,
      // The keys a page's rows name go before those rows: a run cut short loses none.
      beforeDelete: async (keys) => {
        keysDeleted += await ports.items.deleteKeys(await ownKeys(ports.store, connection, keys));
        progress.objectsDeleted = row.erase!.objectsDeleted + keysDeleted;
      },
      onProgress: async (deleted) => {
        progress.rowsDeleted = rowsBase + deleted;
        await write();
      },
    });
    progress.rowsDeleted = rowsBase + rows.deleted;
    if (stale) return { kind: 'stale', reason: putAgain, deleted: true };
    if (!rows.complete) return (await write()) ? unfinished(progress) : { kind: 'stale', reason: putAgain, deleted: true };
    const objectsBase = progress.objectsDeleted;
    const objects = await ports.items.deleteObjects(connection, {
      stop: halt,
      onProgress: async (deleted) => {
        progress.objectsDeleted = objectsBase + deleted;
        await write();
      },
    });
    progress.objectsDeleted = objectsBase + objects.deleted;
    keysDeleted = progress.objectsDeleted - row.erase.objectsDeleted;
    if (stale) return { kind: 'stale', reason: putAgain, deleted: true };
    if (!objects.complete) return (await write()) ? unfinished(progress) : { kind: 'stale', reason: putAgain, deleted: true };
    // The changes log last: a row written late (a sync already under way) writes its change with it.
    const changes = await ports.items.deleteChanges(connection, { stop: halt });
    if (stale) return { kind: 'stale', reason: putAgain, deleted: true };
    if (!changes.complete) return (await write()) ? unfinished(progress) : { kind: 'stale', reason: putAgain, deleted: true };
  }
  progress.state = 'done';
  if (!(await write())) return { kind: 'stale', reason: putAgain, deleted: true };
  const deleted = await ports.store.delete(connection, { startedAt });
  if (deleted === 'conflict') return { kind: 'stale', reason: putAgain, deleted: true };
  return { kind: 'done', rowsDeleted: progress.rowsDeleted, objectsDeleted: progress.objectsDeleted };
}

/**
 * The object keys the connection's rows named that are its own to delete: not one under another
 * connection's `items/<other>/` (a connection the table holds). Rows imported from a one-account
 * table name keys elsewhere (`items/<hash of the id>/…`): those are the connection's.
 */
async function ownKeys(store: ConnectionStore, connection: string, keys: readonly string[]): Promise<string[]> {
  const others = new Map<string, boolean>();
  const own: string[] = [];
  for (const key of keys) {
    const other = /^items\/([^/]+)\//.exec(key)?.[1];
    if (other !== undefined && other !== connection) {
      if (!others.has(other)) others.set(other, (await store.view(other, { consistent: true })) !== undefined);
      if (others.get(other)) continue;
    }
    own.push(key);
  }
  return own;
}

function unfinished(progress: EraseProgress): EraseRun {
  return { kind: 'unfinished', rowsDeleted: progress.rowsDeleted, objectsDeleted: progress.objectsDeleted };
}
