/**
 * Ports of the change-events core. The core (change.ts: the mapping of one record of the items
 * table's stream to its event; lifecycle.ts: of one record of the connections table's stream to its
 * lifecycle event; sources.ts: which stream a record comes from; publish.ts: a batch in stream
 * order; stats.ts: each connection's counters) imports these types only; the adapters in
 * ./adapters implement EventPublisher (eventbridge.ts) and ConnectionStats
 * (dynamodb-connection-stats.ts) with the AWS SDK, the tests with fakes or with the real adapters
 * over mocked clients.
 *
 * The stream types are the shape Lambda hands a DynamoDB-stream-fed function (the `aws-lambda`
 * package's DynamoDBRecord is assignable to StreamRecord), written out so the core needs no import.
 */
import type { ConnectionStatus } from '../shared/connections/connection.js';

/** A DynamoDB attribute value as a stream image holds it (numbers as text). */
export interface AttributeValue {
  S?: string;
  N?: string;
  BOOL?: boolean;
  NULL?: boolean;
  M?: { [name: string]: AttributeValue };
  L?: AttributeValue[];
  B?: string;
  SS?: string[];
  NS?: string[];
  BS?: string[];
}

export type StreamImage = { [name: string]: AttributeValue };

/** One record of the items table's or the connections table's stream (view type NEW_AND_OLD_IMAGES). */
export interface StreamRecord {
  /** Unique per stream record; the same on every delivery of that record. */
  eventID?: string;
  eventName?: 'INSERT' | 'MODIFY' | 'REMOVE';
  /** The stream's ARN, `arn:aws:dynamodb:<region>:<account>:table/<table name>/stream/<label>`: which table (sources.ts). */
  eventSourceARN?: string;
  dynamodb?: {
    Keys?: StreamImage;
    OldImage?: StreamImage;
    NewImage?: StreamImage;
    /** When DynamoDB wrote the record, seconds since the epoch (rounded down). */
    ApproximateCreationDateTime?: number;
    /** What the function reports in batchItemFailures. */
    SequenceNumber?: string;
  };
}

/** The `itemObject` row attribute: where a large item lives in S3 (contract, "The items table"). */
export interface ItemObject {
  key: string;
  size: number;
  sha256: string;
}

export type ChangeDetailType = 'ItemCreated' | 'ItemUpdated' | 'ItemDeleted' | 'ItemRestored';

/** The event's `detail` (contract, "Change events"); `itemObject` only when the row has one. */
export interface ChangeDetail {
  /** The connection the row belongs to. */
  connection: string;
  id: string;
  type: string;
  revision: string;
  /** The revision the row held before this change; null when there was no row. */
  previousRevision: string | null;
  syncedAt: string;
  itemObject?: ItemObject;
}

/** One event to put on the bus (`source` is always `content-sync`, added by the publisher). */
export interface ChangeEvent {
  detailType: ChangeDetailType;
  detail: ChangeDetail;
}

/** The account lifecycle events (contract, "Account lifecycle events"): one per status change of a connection. */
export type LifecycleDetailType =
  | 'ConnectionAdded'
  | 'ConnectionCredentialsReplaced'
  | 'ConnectionFailing'
  | 'ConnectionRecovered'
  | 'ConnectionPaused'
  | 'ConnectionResumed'
  | 'ConnectionRemoved'
  | 'ConnectionErased';

/** A connection's status as its row holds it. */
export type LifecycleStatus = ConnectionStatus;

/** A lifecycle event's `detail`: these fields only, never a token nor any other attribute of the row. */
export interface LifecycleDetail {
  connection: string;
  /** The status after the change; null once the row is gone (ConnectionErased). */
  status: LifecycleStatus | null;
  /** The status before the change; null when there was none (a new connection). */
  previousStatus: LifecycleStatus | null;
  /** ConnectionFailing only, when the row has one: the provider's refusal (`lastFailureReason`), at most 1,000 characters. */
  reason?: string;
  /** ISO-8601 UTC time of the change (lifecycle.ts says which). */
  at: string;
}

export interface LifecycleEvent {
  detailType: LifecycleDetailType;
  detail: LifecycleDetail;
}

/** Whatever the function puts on the bus: an item's change or a connection's lifecycle event. */
export type BusEvent = ChangeEvent | LifecycleEvent;

/** How one event of a publish call ended. */
export type PublishOutcome = { published: true } | { published: false; error: string };

export interface EventPublisher {
  /**
   * Puts the events on the bus (at most MAX_EVENTS_PER_CALL, within MAX_CALL_BYTES; the core
   * chunks), re-trying the ones EventBridge refuses a bounded number of times. Never throws: one
   * outcome per event, in the order given.
   */
  publish(events: readonly BusEvent[]): Promise<PublishOutcome[]>;
}

/** What one stream batch changes of a connection's counters in the connections table. */
export interface ConnectionStatsUpdate {
  connection: string;
  /** Rows created (ItemCreated events): added to `idsKnown`. */
  created: number;
  /** The latest `syncedAt` of the connection's row writes in the batch: `lastWriteAt`, if newer than the stored one. */
  lastWriteAt?: string;
}

/**
 * The connections table's `idsKnown` and `lastWriteAt` (docs/connections.md), kept from the items
 * table's stream. A connection without a row (removed and deleted) is never created again.
 */
export interface ConnectionStats {
  /**
   * Applies the update: `written` when something was written, `unchanged` when nothing was (the
   * connection has no row, or nothing newer to write). Throws on any other failure.
   */
  record(update: ConnectionStatsUpdate): Promise<'written' | 'unchanged'>;
}
