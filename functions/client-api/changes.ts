/**
 * A connection's mirror as the client application reads it from a point on (docs/changes.md):
 *
 * - the changes feed (`GET /connections/{connection}/changes?after=&limit=`): the changes log from
 *   a cursor (functions/shared/changes/feed.ts);
 * - the snapshot (`GET /connections/{connection}/items?cursor=&limit=`): the connection's rows,
 *   page by page in id order, each answered as `GET …/items/{id}` answers it, with the feed cursor
 *   `changesCursor` where its feed continues. The first page reads the head first, then the rows:
 *   every change up to the head is in the rows read after it (but for those DynamoDB was still
 *   applying: `changesCursor` is before the last changes, feed.ts snapshotPlace), every later one
 *   is in the feed after `changesCursor`. A change after it may be in the snapshot already; it is
 *   then read twice, once as a row and once as a change, never missed. Every page of one snapshot
 *   carries the first page's `changesCursor`.
 *
 * No AWS import: the rows, the links and the log are ports.
 */
import { connectionIdProblem } from '../shared/connections/connection.js';
import { servedConnection, type Outcome } from '../shared/connections/operations.js';
import type { ConnectionStore } from '../shared/connections/ports.js';
import { cursorFields, decodeFeedCursor, encodeFeedCursor, readChanges, snapshotPlace, type ChangesLog, type FeedPage, type Sleep } from '../shared/changes/feed.js';
import { itemIdProblem } from '../item-sync/message.js';
import { sleepMs } from '../shared/backoff.js';
import type { Clock } from '../shared/ports.js';
import { answerOf, type ItemAnswer, type ItemRows, type ObjectLinks } from './items.js';

export interface SnapshotPage {
  items: ItemAnswer[];
  /** Where the next page starts; null after the last. */
  cursor: string | null;
  /** Where this snapshot's feed continues. */
  changesCursor: string;
}

export interface ChangesPorts {
  store: ConnectionStore;
  rows: ItemRows;
  links: ObjectLinks;
  log: ChangesLog;
  clock: Clock;
  /** Waits before a missing change is taken for expired (feed.ts SETTLE_WAITS_MS); default real time. */
  sleep?: Sleep;
}

const nowSeconds = (clock: Clock): number => Math.floor(clock.now().getTime() / 1000);

/** The changes of `connection` after the cursor `after` (from its first change when undefined), at most `limit`. */
export async function readFeed(ports: ChangesPorts, connection: string, after: string | undefined, limit: number): Promise<Outcome<FeedPage>> {
  const known = await knownConnection(ports.store, connection);
  if (known) return known;
  return readChanges(ports.log, connection, after, limit, nowSeconds(ports.clock), ports.sleep ?? sleepMs);
}

/** A page of the snapshot of `connection`: the first when `cursor` is undefined. */
export async function readSnapshot(ports: ChangesPorts, connection: string, cursor: string | undefined, limit: number): Promise<Outcome<SnapshotPage>> {
  const known = await knownConnection(ports.store, connection);
  if (known) return known;
  let start: { afterId: string | undefined; changesCursor: string };
  if (cursor === undefined) {
    // The head before the rows: what is committed by now is in the rows read next.
    const place = await snapshotPlace(ports.log, connection, nowSeconds(ports.clock), ports.sleep ?? sleepMs);
    start = { afterId: undefined, changesCursor: encodeFeedCursor(place) };
  } else {
    const decoded = decodeSnapshotCursor(cursor, connection);
    if (!decoded) {
      return { ok: false, code: 'bad-request', message: 'the cursor is not one this API gave for this connection\'s snapshot: pass the previous page\'s cursor as it was' };
    }
    start = decoded;
  }
  const page = await ports.rows.page(connection, start.afterId, limit);
  const items: ItemAnswer[] = [];
  for (const row of page.rows) items.push(await answerOf(row, ports.links));
  const next = page.lastId === undefined ? null : encodeSnapshotCursor(connection, page.lastId, start.changesCursor);
  return { ok: true, value: { items, cursor: next, changesCursor: start.changesCursor }, changed: false };
}

async function knownConnection(store: ConnectionStore, connection: string): Promise<Outcome<never> | undefined> {
  const bad = connectionIdProblem(connection);
  if (bad !== undefined) return { ok: false, code: 'bad-request', message: bad };
  return servedConnection(connection, await store.view(connection, { consistent: true }));
}

function encodeSnapshotCursor(connection: string, afterId: string, changesCursor: string): string {
  return Buffer.from(JSON.stringify({ v: 1, c: connection, k: afterId, f: changesCursor }), 'utf8').toString('base64url');
}

function decodeSnapshotCursor(cursor: string, connection: string): { afterId: string; changesCursor: string } | undefined {
  const fields = cursorFields(cursor, 4096);
  if (!fields) return undefined;
  const { v, c, k, f } = fields;
  if (v !== 1 || c !== connection || typeof k !== 'string' || itemIdProblem(k) !== undefined || typeof f !== 'string') return undefined;
  if (decodeFeedCursor(f)?.connection !== connection) return undefined;
  return { afterId: k, changesCursor: f };
}
