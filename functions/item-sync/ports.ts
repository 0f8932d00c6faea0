/**
 * Ports of the item sync core beyond the shared ones in functions/shared/ports.ts. The core (sync.ts
 * and its helpers) imports these types only; the adapters in ./adapters implement them with the AWS
 * SDK (dynamodb-item-store.ts: ItemStore; sqs.ts: DeadLetterSink, MessageVisibility and
 * MessageRequeue), the tests with fakes or with the real adapters over mocked clients.
 */

/** What the items table holds about an id, as far as the sync decision needs it. */
export interface StoredRevision {
  /** The `revision` attribute: the revision as text. */
  revision: string;
  /** True when the row is a tombstone (`deleted` is true). */
  deleted: boolean;
}

/** A row as the README describes it ("The items table"; `deleted` is never part of a put: a put makes the row live). */
export interface ItemRow {
  id: string;
  type: 'file' | 'folder';
  revision: string;
  /** The provider's item exactly as it was returned. */
  item: Record<string, unknown>;
  /** ISO-8601 UTC. */
  syncedAt: string;
}

/** The state a conditional write expects to find: the one the decision was made on. */
export type ExpectedRow = { exists: false } | { exists: true; revision: string; deleted: boolean };

/** `conflict`: the stored row no longer is the one the decision was made on (the condition failed). */
export type WriteResult = 'written' | 'conflict';

export interface ItemStore {
  /**
   * The stored revision of every id that has a row (ids without a row are absent from the map).
   * `consistent` asks for a strongly consistent read (used after a lost write race).
   * Throws TransientError when DynamoDB keeps failing or throttling.
   */
  getRevisions(ids: readonly string[], options?: { consistent?: boolean }): Promise<Map<string, StoredRevision>>;
  /**
   * Writes the whole row (live: no `deleted`), on condition that the stored row is `expected`.
   * Throws PermanentError when the row can never be stored (too large, rejected by validation),
   * TransientError when DynamoDB keeps failing or throttling.
   */
  put(row: ItemRow, expected: ExpectedRow): Promise<WriteResult>;
  /**
   * Marks the live row `deleted` (keeping its last copy) and sets `syncedAt`, on condition that it
   * still holds `expectedRevision` and is not deleted yet.
   */
  markDeleted(id: string, expectedRevision: string, syncedAt: string): Promise<WriteResult>;
}

/** A message that can never succeed as sent. */
export interface DeadLetter {
  /** The original message body, unchanged. */
  body: string;
  /** A sentence that says why (message attribute `error`). */
  reason: string;
  /** The SQS message id of the original message (message attribute `sourceMessageId`). */
  sourceMessageId: string;
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
  /** Kept from the original (message attribute `reconcilePass`): a sweep record stays one. */
  reconcilePass?: number;
}

export interface MessageRequeue {
  /** Best effort; never throws. Returns the message ids that could not be sent again (with why). */
  requeue(requests: readonly RequeueRequest[]): Promise<Array<{ messageId: string; error: string }>>;
}
