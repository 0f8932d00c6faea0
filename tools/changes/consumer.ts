/**
 * A consumer of a connection's changes feed, as the client application writes one (docs/changes.md
 * and the README show it): the snapshot once, page by page, for the cursor its feed continues from;
 * then from the cursor it kept to the end of the feed, one page at a time, applying a page before it
 * moves on, and hand back where the next read continues. How a request is sent (signed with SigV4
 * in AWS, plain on the local run's loopback API) is the caller's `get`.
 *
 * No dependency on this repository's code but the answer's shape: a client application can copy it.
 */

/** A change as the feed answers it. */
export interface Change {
  change: 'created' | 'updated' | 'deleted' | 'restored';
  id: string;
  type: string | null;
  revision: string;
  previousRevision: string | null;
  syncedAt: string;
  cursor: string;
}

/** A row as the snapshot answers it: the item as stored, or `itemUrl` (presigned) for a large one. */
export interface SnapshotItem {
  connection: string;
  id: string;
  type: string | null;
  revision: string;
  syncedAt: string;
  deleted?: true;
  item?: unknown;
  itemUrl?: string;
}

/** GET of a path under the API's URL: the status and the parsed JSON body. */
export type Get = (path: string) => Promise<{ status: number; body: unknown }>;

/** The cursor's changes are gone (older than changesRetentionDays, or the connection erased): read a snapshot again. */
export class CursorExpired extends Error {
  override readonly name = 'CursorExpired';
}

/**
 * Reads `connection`'s snapshot (its current rows, tombstones included, page by page), calls `apply`
 * with each page in order, and answers the cursor its changes feed continues from: a change made
 * while the pages were read is in the feed after that cursor, so snapshot + feed miss nothing.
 */
export async function readSnapshot(get: Get, connection: string, apply: (items: SnapshotItem[]) => Promise<void>): Promise<string> {
  let changesCursor: string | undefined;
  let page: string | null = null;
  do {
    const query = new URLSearchParams({ limit: '1000', ...(page !== null ? { cursor: page } : {}) });
    const { status, body } = await get(`connections/${encodeURIComponent(connection)}/items?${query}`);
    if (status !== 200) throw new Error(`GET items of connection "${connection}" answered ${status}: ${JSON.stringify(body)}`);
    const answer = body as { items: SnapshotItem[]; cursor: string | null; changesCursor: string };
    changesCursor ??= answer.changesCursor;
    await apply(answer.items);
    page = answer.cursor;
  } while (page !== null);
  return changesCursor;
}

/**
 * Reads `connection`'s changes after `cursor` (from its first change when undefined) to the end,
 * calls `apply` with each page in order, and answers the cursor to continue from. Store the cursor
 * `apply` is given after applying its page: a consumer that stops between the two reads that page
 * again (applied again in order, it leaves the copy as it was).
 */
export async function readChanges(
  get: Get,
  connection: string,
  cursor: string | undefined,
  apply: (changes: Change[], next: string) => Promise<void>,
): Promise<string> {
  for (;;) {
    const query = new URLSearchParams({ limit: '1000', ...(cursor !== undefined ? { after: cursor } : {}) });
    const { status, body } = await get(`connections/${encodeURIComponent(connection)}/changes?${query}`);
    if (status === 410) throw new CursorExpired(`the changes of connection "${connection}" after that cursor are gone: read a snapshot again`);
    if (status !== 200) throw new Error(`GET changes of connection "${connection}" answered ${status}: ${JSON.stringify(body)}`);
    const page = body as { changes: Change[]; next: string };
    if (page.changes.length === 0) return page.next;
    await apply(page.changes, page.next);
    cursor = page.next;
  }
}
