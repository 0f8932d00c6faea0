/**
 * Ports of the reconciler's core (tick.ts) beyond the shared ones in functions/shared/ports.ts. The
 * adapters in ./adapters implement them with the AWS SDK (dynamodb-item-ids.ts: ItemIds;
 * dynamodb-cursor-store.ts: CursorStore; sqs-reconcile-queue.ts: ReconcileQueue), the tests with
 * fakes or with the real adapters over mocked clients and DynamoDB Local.
 */

/**
 * An items-table row's key: partition key `connection`, sort key `id` (contract, "The items
 * table"). What the reconciler walks and sends.
 */
export interface ItemKey {
  connection: string;
  id: string;
}

/** One parallel-Scan segment's place in the current pass. */
export interface SegmentCursor {
  /** The last key of the last page sent (that page's LastEvaluatedKey); absent before the first page and once done. */
  after?: ItemKey;
  /** The segment has been scanned to its end in this pass. */
  done: boolean;
  /** Raised by every advance: a tick advances the segment only if it still holds the version it read. */
  version: number;
  /** Ids sent from this segment in this pass. */
  ids: number;
}

/** A pass that ended. Times are epoch milliseconds. */
export interface PassRecord {
  pass: number;
  startedAt: number;
  endedAt: number;
  /** Ids sent in the pass. */
  ids: number;
}

/** The reconcile cursor: the control table's row `reconcile-cursor`. Times are epoch milliseconds. */
export interface Cursor {
  /** 1 for the first pass. */
  pass: number;
  startedAt: number;
  /** One per segment (TotalSegments is their number, fixed for the pass). */
  segments: SegmentCursor[];
  /** Set once every segment is done. */
  endedAt?: number;
  /** The pass before this one. */
  previous?: PassRecord;
}

/** `conflict`: the row no longer is the one the write was decided on (its condition failed). */
export type WriteResult = 'written' | 'conflict';

export interface CursorStore {
  /** The cursor (strongly consistent read); undefined when there is none yet. Throws when the row is not a cursor. */
  read(): Promise<Cursor | undefined>;
  /** Writes `cursor` (a new pass) over the cursor of pass `expectedPass`; undefined: only if there is no cursor yet. */
  startPass(cursor: Cursor, expectedPass: number | undefined): Promise<WriteResult>;
  /**
   * Replaces segment `segment` of pass `pass` with `next`, on condition that the pass is still `pass`
   * and the segment still holds `expectedVersion`.
   */
  advance(pass: number, segment: number, next: SegmentCursor, expectedVersion: number): Promise<WriteResult>;
  /** Sets `endedAt` of pass `pass`, on condition that it is still the pass and has not ended yet. */
  endPass(pass: number, endedAt: number): Promise<WriteResult>;
}

export interface PageRequest {
  segment: number;
  totalSegments: number;
  /** Start after this key (the segment's last LastEvaluatedKey); undefined: from the segment's start. */
  after?: ItemKey;
  /** Most rows the page reads (Scan's Limit). */
  limit: number;
}

export interface Page {
  keys: ItemKey[];
  /** The page's LastEvaluatedKey; undefined when the segment has no more rows. */
  after?: ItemKey;
}

/** The items table's keys (connection and id), walked by parallel Scan segments. */
export interface ItemIds {
  page(request: PageRequest): Promise<Page>;
  /** The table's item count as DynamoDB last computed it (about every six hours); undefined when unknown. */
  approximateCount(): Promise<number | undefined>;
}

export interface SendResult {
  /** Keys SQS refused as the sender's fault: they can never be sent (with why). */
  refused: Array<ItemKey & { reason: string }>;
}

/** The reconcile queue. */
export interface ReconcileQueue {
  /** Messages on the queue: visible, in flight and delayed (SQS's approximate counts). */
  backlog(): Promise<number>;
  /**
   * Sends `{"connection": "<connection>", "id": "<id>"}` for every key, with the message attributes
   * `reconcilePass` and `lane` (`background`), its connection as its MessageGroupId. Throws when a key could not be sent for a reason that may pass (the page is
   * then sent again by a later tick).
   */
  send(keys: readonly ItemKey[], pass: number): Promise<SendResult>;
}
