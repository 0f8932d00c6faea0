/**
 * Reading one mirrored item through the client API (`GET /connections/{connection}/items/{id}`,
 * docs/client-api.md): the row as the items table holds it, answered with the item itself, or, for
 * an item held in the items bucket (up to 16 MiB, beyond Lambda's 6 MB response), a presigned URL
 * of its object that expires after ITEM_URL_SECONDS. No AWS import: the rows and the links are ports.
 */
import { sendableIdProblem } from '../item-sync/message.js';
import { connectionIdProblem } from '../shared/connections/connection.js';
import { servedConnection, type Outcome } from '../shared/connections/operations.js';
import type { ConnectionStore } from '../shared/connections/ports.js';

/** How long a presigned URL of an item's object stays valid. */
export const ITEM_URL_SECONDS = 300;

/** A row of the items table, as this route answers it. */
export interface StoredItem {
  connection: string;
  id: string;
  type: string;
  revision: string;
  syncedAt: string;
  deleted?: boolean;
  /** The item as the provider returned it (absent when it is held in the items bucket). */
  item?: Record<string, unknown>;
  /** The key of the object holding the item, when it is held in the items bucket. */
  objectKey?: string;
}

export interface ItemRows {
  /** The connection's row of `id` (strongly consistent), undefined when there is none. */
  get(connection: string, id: string): Promise<StoredItem | undefined>;
  /**
   * The connection's rows in id order after `afterId` (from the first when undefined), strongly
   * consistent, at most `limit` (fewer when a page of the store is full); `lastId` when there may
   * be more.
   */
  page(connection: string, afterId: string | undefined, limit: number): Promise<{ rows: StoredItem[]; lastId?: string }>;
}

export interface ObjectLinks {
  /** A URL that reads the object `key` for `seconds`. */
  urlFor(key: string, seconds: number): Promise<string>;
}

export interface ItemAnswer {
  connection: string;
  id: string;
  type: string;
  revision: string;
  syncedAt: string;
  deleted?: true;
  item?: Record<string, unknown>;
  itemUrl?: string;
}

export async function readItem(ports: { store: ConnectionStore; rows: ItemRows; links: ObjectLinks }, connection: string, id: string): Promise<Outcome<ItemAnswer>> {
  const badConnection = connectionIdProblem(connection);
  if (badConnection !== undefined) return { ok: false, code: 'bad-request', message: badConnection };
  const badId = sendableIdProblem(id);
  if (badId !== undefined) return { ok: false, code: 'bad-request', message: badId };
  const unserved = servedConnection(connection, await ports.store.view(connection, { consistent: true }));
  if (unserved) return unserved;
  const row = await ports.rows.get(connection, id);
  if (!row) return { ok: false, code: 'not-found', message: `connection "${connection}" holds no item of that id` };
  return { ok: true, value: await answerOf(row, ports.links), changed: false };
}

/** A row as the item routes answer it: its item, or a presigned URL of its object. */
export async function answerOf(row: StoredItem, links: ObjectLinks): Promise<ItemAnswer> {
  const { connection, id } = row;
  const answer: ItemAnswer = { connection, id, type: row.type, revision: row.revision, syncedAt: row.syncedAt, ...(row.deleted ? { deleted: true as const } : {}) };
  if (row.objectKey !== undefined) answer.itemUrl = await links.urlFor(row.objectKey, ITEM_URL_SECONDS);
  else if (row.item !== undefined) answer.item = row.item;
  return answer;
}
