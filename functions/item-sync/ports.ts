/**
 * Ports of the item sync core beyond the shared ones in functions/shared/ports.ts. The core (sync.ts
 * and its helpers) imports these types only; the adapters in ./adapters implement them with the AWS
 * SDK (dynamodb-item-store.ts: ItemStore; s3-item-object-store.ts: ItemObjectStore; sqs.ts:
 * DeadLetterSink, MessageVisibility, MessageRequeue and DiscoverySink), the tests with fakes or
 * with the real adapters over mocked clients.
 */

/**
 * A row's key in the items table: partition key `connection`, sort key `id` (two connections may
 * hold the same item id; each has its own row).
 */
export interface ItemKey {
  connection: string;
  id: string;
}

/** Stored revisions by connection, then by item id. */
export type StoredRevisions = Map<string, Map<string, StoredRevision>>;

/** What the items table holds about an item of a connection, as far as the sync decision needs it. */
export interface StoredRevision {
  /** The `revision` attribute: the revision as text. */
  revision: string;
  /** True when the row is a tombstone (`deleted` is true). */
  deleted: boolean;
  /**
   * The `itemObject` key, when the row holds one: the object a write replacing this row leaves
   * behind, to delete once the row no longer points to it (also when the write's answer was lost).
   */
  objectKey?: string;
  /** The `syncedAt` attribute: with the revision, what tells one write's row version from another's. */
  syncedAt?: string;
  /**
   * True when the row carries `childrenPending`: a folder written with discovery on whose listed
   * children may not all have been sent for checking yet (docs/discovery.md, "Crash safety").
   */
  childrenPending?: boolean;
}

/**
 * Where an item too large for a row is kept (the row's `itemObject` attribute, contract "The items
 * table"): an object in the items bucket holding the item's JSON.
 */
export interface ItemObjectRef {
  /** The object's key in the items bucket. */
  key: string;
  /** The object's length in bytes. */
  size: number;
  /** SHA-256 of the object's bytes, lowercase hex. */
  sha256: string;
}

interface RowFields {
  /** The connection the row belongs to (partition key). */
  connection: string;
  /** The item id (sort key). */
  id: string;
  type: 'file' | 'folder';
  revision: string;
  /** ISO-8601 UTC. */
  syncedAt: string;
  /**
   * Written as `childrenPending` = true: a folder whose listed children are sent for checking once
   * this row is written, the attribute removed then (ItemStore.clearChildrenPending).
   */
  childrenPending?: true;
}

/**
 * A row as docs/configuration.md describes it ("The items table"; `deleted` is never part of a put: a put makes
 * the row live): the item itself in `item`, or, for an item too large for a row, `itemObject` in its
 * place.
 */
export type ItemRow =
  | (RowFields & {
      /** The provider's item exactly as it was returned. */
      item: Record<string, unknown>;
      itemObject?: never;
    })
  | (RowFields & { itemObject: ItemObjectRef; item?: never });

/**
 * The state a conditional write expects to find: the one the decision was made on (the condition is
 * on `revision` and `deleted`, and, when the write commits a change, on `objectKey`: what the row
 * held besides, as it was read).
 */
export type ExpectedRow = { exists: false } | { exists: true; revision: string; deleted: boolean; objectKey?: string };

/** `conflict`: the stored row no longer is the one the decision was made on (the condition failed). */
export type WriteResult = 'written' | 'conflict';

/** How a put ended. */
export type PutResult =
  /** Written. `replacedObjectKey`: the `itemObject` key of the row it replaced, when that row had one. */
  | { result: 'written'; replacedObjectKey?: string }
  /** The condition failed: nothing written. */
  | { result: 'conflict' }
  /**
   * The row would be over DynamoDB's item size limit (by the size estimate, then nothing was sent;
   * or DynamoDB refused it for its size): nothing written. Only for a row holding `item`.
   */
  | { result: 'too-large'; bytes: number };

/**
 * A row as it is now, as far as telling what a write that did not answer `written` did needs it: the
 * write's own row (its answer was lost), or another's.
 */
export type RowState = StoredRevision;

export interface ItemStore {
  /**
   * The stored revision (and object key, `syncedAt`, `childrenPending`) of every key that has a row, by connection then id (keys
   * without a row are absent); the keys may mix connections. `consistent` asks for a strongly
   * consistent read (used after a lost write race). Throws TransientError when DynamoDB keeps
   * failing or throttling.
   */
  getRevisions(keys: readonly ItemKey[], options?: { consistent?: boolean }): Promise<StoredRevisions>;
  /**
   * Writes the whole row (live: no `deleted`), on condition that the stored row is `expected`.
   * Throws PermanentError when the row can never be stored (rejected by validation; a row holding
   * `itemObject` that is still too large), TransientError when DynamoDB keeps failing or throttling
   * (the write may then have been applied or not).
   */
  put(row: ItemRow, expected: ExpectedRow): Promise<PutResult>;
  /**
   * Marks the live row `deleted` (keeping its last copy, `item` or `itemObject`), sets `syncedAt`
   * and removes `childrenPending` (the tombstone sends the children of the last list), on condition that it still holds `expectedRevision` and is not deleted yet.
   */
  markDeleted(key: ItemKey, expectedRevision: string, syncedAt: string): Promise<WriteResult>;
  /**
   * Removes `childrenPending` from the row of `key`, on condition that it still is the row version
   * `written` (its revision and `syncedAt`) and carries it; `conflict` when not (another write owns
   * the row now, or the attribute is gone already). The row's other attributes are left as they are.
   * Throws TransientError.
   */
  clearChildrenPending(key: ItemKey, written: { revision: string; syncedAt: string }): Promise<WriteResult>;
  /** The row of `key` now (strongly consistent), undefined when there is none. Throws TransientError. */
  rowState(key: ItemKey): Promise<RowState | undefined>;
  /**
   * The stored copy of `key` (strongly consistent), undefined when there is no row: the item
   * inline, or the pointer to its object in the items bucket. Discovery reads it for a folder's
   * previous list of children (docs/discovery.md). Throws TransientError.
   */
  getItem(key: ItemKey): Promise<StoredItem | undefined>;
}

/** A row's stored copy, as discovery reads it (ItemStore.getItem). */
export interface StoredItem {
  /** The `type` attribute (undefined when the row has none). */
  type: string | undefined;
  revision: string;
  deleted: boolean;
  /** The item as stored in the row; absent when the row holds `itemObject`. */
  item?: Record<string, unknown>;
  /** The `itemObject` key: the item is the object's JSON in the items bucket. */
  objectKey?: string;
  /** True when the row carries `childrenPending` (its writer may not have sent all its listed children). */
  childrenPending?: boolean;
}

/**
 * The items bucket: objects holding items too large for a row. Every object is written under a key
 * no other write uses, before the row that points to it.
 */
export interface ItemObjectStore {
  /**
   * Stores `body` under `key`; the store checks the bytes against `sha256` (lowercase hex) on arrival.
   * Throws TransientError on any failure (nothing points to the key yet: the record is retried).
   */
  put(key: string, body: Uint8Array, sha256: string): Promise<void>;
  /** Deletes the object (deleting a key that does not exist is no error). Throws TransientError. */
  delete(key: string): Promise<void>;
  /** The object's bytes, undefined when there is no such key. Throws TransientError on any other failure. */
  get(key: string): Promise<Uint8Array | undefined>;
}

/**
 * The background lane (the reconcile queue): each id a background-lane message of its connection.
 * Discovery sends the children it finds there (docs/discovery.md), and a users' batch the backlog
 * of a connection beyond what it syncs (sync.ts).
 */
export interface BackgroundLane {
  /**
   * Sends every id as `{"connection", "id"}`; never throws. Returns the ids that could not be sent,
   * with why (a folder is then retried: its row is not written; a backlog's id is synced where it is).
   */
  send(connection: string, ids: readonly string[]): Promise<Array<{ id: string; error: string }>>;
}

/** Where discovery sends the children it finds: the background lane. */
export type DiscoverySink = BackgroundLane;

/** A message that can never succeed as sent. */
export interface DeadLetter {
  /** The original message body, unchanged. */
  body: string;
  /** A sentence that says why (message attribute `error`). */
  reason: string;
  /** The SQS message id of the original message (message attribute `sourceMessageId`). */
  sourceMessageId: string;
  /** The connection the body named, when it could be read: the letter's MessageGroupId. */
  connection?: string;
}

export interface DeadLetterSink {
  /**
   * Sends every letter; never throws. Returns the letters that could not be sent (with why), so
   * that their records are retried rather than dropped.
   */
  send(letters: readonly DeadLetter[]): Promise<Array<{ sourceMessageId: string; error: string }>>;
}

/** A request to make one delivered message visible again only after `delaySeconds`. */
export interface PostponeRequest {
  messageId: string;
  receiptHandle: string;
  /** ARN of the queue the message came from (the record's eventSourceARN). */
  queueArn: string;
  delaySeconds: number;
}

export interface MessageVisibility {
  /** Best effort; never throws. Returns the message ids whose visibility could not be changed. */
  postpone(requests: readonly PostponeRequest[]): Promise<Array<{ messageId: string; error: string }>>;
}

/** A delivered message to send again to its queue with a delay: it waits (pace, outage), it did not fail. */
export interface RequeueRequest {
  messageId: string;
  /** The original body, unchanged. */
  body: string;
  /** ARN of the queue the message came from (the record's eventSourceARN). */
  queueArn: string;
  delaySeconds: number;
  /** Postponements so far, this one included (message attribute `postponements`). */
  postponements: number;
  /** Kept from the original (message attribute `reconcilePass`). */
  reconcilePass?: number;
  /** The original was the background lane's (message attribute `lane` = `background` or `backlog`): it stays in it. */
  background?: boolean;
  /** …as a users' backlog (`lane` = `backlog`). */
  backlog?: boolean;
  /** The record's connection, when its body could be read: the message's MessageGroupId. */
  connection?: string;
}

export interface MessageRequeue {
  /** Best effort; never throws. Returns the message ids that could not be sent again (with why). */
  requeue(requests: readonly RequeueRequest[]): Promise<Array<{ messageId: string; error: string }>>;
}
