/**
 * One stream batch, in stream order: each record mapped to its event (change.ts for the items
 * table's stream, lifecycle.ts for the connections table's: sources.ts routes them), the events put
 * on the bus in calls of at most MAX_EVENTS_PER_CALL events and MAX_CALL_BYTES, and the answer
 * Lambda needs to resume at the right record. No AWS import.
 *
 * Order: the records of one item (one connection's id), or of one connection's row, come in stream
 * order, and their event is never put before the event of their earlier record is accepted. A call
 * never holds two events of one item, nor two lifecycle events of one connection, and after a call
 * with an event that stays refused no later call is made: the first record not announced and every
 * record after it are reported in batchItemFailures, so Lambda starts the next try at that record
 * (events of later records that went out in the same call go out again then: delivery is
 * at-least-once). The same happens to a record that cannot be mapped, and to the records left when
 * the invocation is about to run out of time.
 */
import type { Log } from '../shared/ports.js';
import { changeOf, EVENT_SOURCE } from './change.js';
import { isLifecycleEvent } from './lifecycle.js';
import type { BusEvent, EventPublisher, StreamRecord } from './ports.js';

/** PutEvents takes at most 10 entries a call. */
export const MAX_EVENTS_PER_CALL = 10;
/** PutEvents takes at most 256 KB of entries a call (EventBridge's entry size rules). */
export const MAX_CALL_BYTES = 256 * 1024;

export interface BatchCounts {
  /** Events accepted, of both kinds. */
  published: number;
  /** Of `published`, the account lifecycle events. */
  lifecycle: number;
  failed: number;
  ignored: number;
  retried: number;
}

export interface BatchReport {
  counts: BatchCounts;
  /** The batch's first `done` records are done with (announced, or announcing nothing); the rest are handed back. */
  done: number;
  /** The sequence numbers to report in batchItemFailures: the first record not announced and every one after it. */
  failures: string[];
}

export interface BatchDeps {
  publisher: EventPublisher;
  log: Log;
  /** Milliseconds since the epoch. */
  now: () => number;
  /** No call is started at or after this time (ms since the epoch). */
  deadline: number;
  /** A record's event, or undefined when it announces nothing; throws MappingError. Default changeOf (items only). */
  eventOf?: (record: StreamRecord) => BusEvent | undefined;
}

interface Planned {
  /** Index of the record in the batch. */
  index: number;
  event: BusEvent;
  bytes: number;
}

/** Announces the batch's records in order; never throws for a record (a failure is reported). */
export async function announceBatch(records: readonly StreamRecord[], deps: BatchDeps): Promise<BatchReport> {
  const { planned, stopAt: unmappable } = plan(records, deps.eventOf ?? changeOf, deps.log);
  let stopAt = unmappable;
  let published = 0;
  let lifecycle = 0;
  let failed = 0;
  for (const call of calls(planned)) {
    const first = call[0]!.index;
    if (deps.now() >= deps.deadline) {
      deps.log.warn('out of time: the rest of the batch is handed back', { fromRecord: first, records: records.length });
      stopAt = Math.min(stopAt, first);
      break;
    }
    const outcomes = await deps.publisher.publish(call.map((entry) => entry.event));
    let firstRefused: number | undefined;
    call.forEach((entry, position) => {
      const outcome = outcomes[position];
      if (outcome?.published) {
        published += 1;
        if (isLifecycleEvent(entry.event)) lifecycle += 1;
        return;
      }
      failed += 1;
      firstRefused = Math.min(firstRefused ?? entry.index, entry.index);
      deps.log.error('change event not published: the record is handed back', {
        connection: entry.event.detail.connection,
        ...(isLifecycleEvent(entry.event) ? {} : { id: entry.event.detail.id }),
        detailType: entry.event.detailType,
        sequenceNumber: records[entry.index]?.dynamodb?.SequenceNumber,
        error: outcome && !outcome.published ? outcome.error : 'no outcome for the event',
      });
    });
    if (firstRefused !== undefined) {
      stopAt = Math.min(stopAt, firstRefused);
      break;
    }
  }
  const handedBack = records.slice(stopAt);
  const announced = planned.filter((entry) => entry.index < stopAt).length;
  return {
    counts: { published, lifecycle, failed, ignored: stopAt - announced, retried: handedBack.length },
    done: stopAt,
    failures: handedBack.map((record) => record.dynamodb?.SequenceNumber ?? ''),
  };
}

/** The events of the records up to the first one that cannot be mapped (`stopAt`; the batch's length when none). */
function plan(
  records: readonly StreamRecord[],
  eventOf: (record: StreamRecord) => BusEvent | undefined,
  log: Log,
): { planned: Planned[]; stopAt: number } {
  const planned: Planned[] = [];
  for (const [index, record] of records.entries()) {
    let event: BusEvent | undefined;
    try {
      event = eventOf(record);
    } catch (error) {
      log.error('stream record cannot be mapped to a change event: it and the records after it are handed back', {
        eventID: record.eventID,
        eventName: record.eventName,
        sequenceNumber: record.dynamodb?.SequenceNumber,
        error: error instanceof Error ? error.message : String(error),
      });
      return { planned, stopAt: index };
    }
    if (event) planned.push({ index, event, bytes: entryBytes(event) });
    else log.debug('stream record announces nothing', { eventID: record.eventID, eventName: record.eventName });
  }
  return { planned, stopAt: records.length };
}

/**
 * The planned events cut into calls, in order: a new call when the current one is full (count or
 * bytes) or already holds an event of the same item (connection and id), or a lifecycle event of
 * the same connection.
 */
function calls(planned: readonly Planned[]): Planned[][] {
  const out: Planned[][] = [];
  let current: Planned[] = [];
  let bytes = 0;
  const items = new Set<string>();
  for (const entry of planned) {
    const item = orderKey(entry.event);
    const full = current.length >= MAX_EVENTS_PER_CALL || bytes + entry.bytes > MAX_CALL_BYTES || items.has(item);
    if (current.length > 0 && full) {
      out.push(current);
      current = [];
      bytes = 0;
      items.clear();
    }
    current.push(entry);
    bytes += entry.bytes;
    items.add(item);
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** What two events must not share a call by: an item's connection and id; a connection's lifecycle. */
function orderKey(event: BusEvent): string {
  return isLifecycleEvent(event) ? JSON.stringify([event.detail.connection]) : JSON.stringify([event.detail.connection, event.detail.id]);
}

/** EventBridge's size of a PutEvents entry: the UTF-8 bytes of Source, DetailType and Detail (no Time, no Resources). */
export function entryBytes(event: BusEvent): number {
  return Buffer.byteLength(EVENT_SOURCE) + Buffer.byteLength(event.detailType) + Buffer.byteLength(JSON.stringify(event.detail));
}
