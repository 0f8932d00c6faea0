/**
 * The mapping from one record of the connections table's stream to the account lifecycle event it
 * announces, if any (contract, "The client API", "Account lifecycle events"). Pure: no AWS import,
 * no I/O; the function's clock is given, for the one case that needs it (below, `at`).
 *
 * A row's `status` is `active`, `paused`, `failing` or `removed`; a row without `status` (only the
 * counters `idsKnown`, `lastWriteAt`) is not a connection (yet). `credentialsAt` is written only
 * when credentials are put (the client API's PUT, the CLI's `add`): a new image whose
 * `credentialsAt` differs from the old image's means the operator or the application replaced the
 * credentials (a provider's rotation of the refresh token raises `credentialsVersion` and leaves
 * `credentialsAt` as it is). The first row of the table that matches decides:
 *
 * | record          | old image's status              | new image's status | credentialsAt changed | event                         |
 * |-----------------|---------------------------------|--------------------|-----------------------|-------------------------------|
 * | INSERT / MODIFY | none (no old image, no status)  | active             | any                   | ConnectionAdded               |
 * | MODIFY          | removed                         | active             | any                   | ConnectionAdded               |
 * | MODIFY          | failing                         | active             | any                   | ConnectionRecovered           |
 * | MODIFY          | active or paused                | active             | yes                   | ConnectionCredentialsReplaced |
 * | MODIFY          | paused                          | active             | no                    | ConnectionResumed             |
 * | INSERT / MODIFY | any but paused (none included)  | paused             | any                   | ConnectionPaused              |
 * | INSERT / MODIFY | any but failing (none included) | failing            | any                   | ConnectionFailing             |
 * | INSERT / MODIFY | any but removed (none included) | removed            | any                   | ConnectionRemoved             |
 * | REMOVE          | removed                         | (row deleted)      | -                     | ConnectionErased              |
 * | REMOVE          | any other, or none              | (row deleted)      | -                     | none (logged and counted)     |
 * | INSERT / MODIFY | any                             | none               | any                   | none (not a connection)       |
 * | MODIFY          | the same as the new one         | that status        | no, or not active     | none                          |
 *
 * So a write that changes no status (and puts no credentials) announces nothing: the counters, a
 * refresh lease taken or released, an access token refreshed, a refresh token rotated,
 * `lastUsedAt`, the refresh health (a failing connection failing again), an erase's progress. The REMOVE of a row whose status was
 * not `removed` (only the purge and the erase delete a row, both of a removed connection) is an
 * operator's act outside the contract: nothing is announced, the function logs and counts it
 * (StreamRecordsIgnored), as it does the items table's REMOVE.
 *
 * `detail` holds exactly `connection` (the image's, else the record's key), `status` (the new
 * image's; null for ConnectionErased: the row is gone), `previousStatus` (the old image's; null
 * when there was none), `reason` (ConnectionFailing only, when the row has one: its
 * `lastFailureReason`, the provider's refusal, at most MAX_REASON_CHARACTERS characters) and `at`:
 * the new image's `updatedAt` (every status write sets it); for a REMOVE, or a new image without
 * `updatedAt`, the record's ApproximateCreationDateTime as ISO-8601 UTC (whole seconds), else the
 * function's clock. Nothing else of the row is read into it: never a token (`refreshToken`,
 * `accessToken`), never the client id.
 *
 * A record that cannot be mapped throws MappingError (the caller hands it back to the event source
 * rather than dropping it): an unknown eventName, an INSERT or MODIFY without its new image, a
 * MODIFY or REMOVE without its old image (the stream must be NEW_AND_OLD_IMAGES), a `status` that is
 * not one of the four (in either image), a row without its connection id. The message names the
 * connection and the attribute, never another value of the row.
 */
import { CONNECTION_STATUSES } from '../shared/connections/connection.js';
import { MappingError } from './change.js';
import type { AttributeValue, BusEvent, LifecycleDetail, LifecycleDetailType, LifecycleEvent, LifecycleStatus, StreamImage, StreamRecord } from './ports.js';

/** `reason` is cut to this many characters (the store writes at most as many). */
export const MAX_REASON_CHARACTERS = 1_000;

/** Every lifecycle detail-type. */
export const LIFECYCLE_DETAIL_TYPES: readonly LifecycleDetailType[] = [
  'ConnectionAdded',
  'ConnectionCredentialsReplaced',
  'ConnectionFailing',
  'ConnectionRecovered',
  'ConnectionPaused',
  'ConnectionResumed',
  'ConnectionRemoved',
  'ConnectionErased',
];

const LIFECYCLE_TYPES: ReadonlySet<string> = new Set(LIFECYCLE_DETAIL_TYPES);

export interface LifecycleOptions {
  /** The function's clock, milliseconds since the epoch: `at` of a record without its own time. */
  now: () => number;
}

/** Whether `event` is a lifecycle event (else an item's change). */
export function isLifecycleEvent(event: BusEvent): event is LifecycleEvent {
  return LIFECYCLE_TYPES.has(event.detailType);
}

/** The lifecycle event `record` announces, or undefined when it announces nothing. Throws MappingError. */
export function lifecycleOf(record: StreamRecord, options: LifecycleOptions): LifecycleEvent | undefined {
  const eventName = record.eventName;
  if (eventName !== 'INSERT' && eventName !== 'MODIFY' && eventName !== 'REMOVE') {
    throw new MappingError(`unknown stream eventName ${JSON.stringify(eventName ?? null)} on the connections table's stream`);
  }
  const oldImage = eventName === 'INSERT' ? undefined : record.dynamodb?.OldImage;
  const newImage = eventName === 'REMOVE' ? undefined : record.dynamodb?.NewImage;
  const image = newImage ?? oldImage;
  const connection = connectionOf(record, image);
  const where = `the row of connection ${JSON.stringify(connection)}`;
  if (eventName !== 'INSERT' && !oldImage) {
    throw new MappingError(`${eventName} record of ${where} without an old image (the stream must be NEW_AND_OLD_IMAGES)`);
  }

  if (eventName === 'REMOVE') {
    if (statusOf(oldImage!, 'old', where) !== 'removed') return undefined;
    return { detailType: 'ConnectionErased', detail: { connection, status: null, previousStatus: 'removed', at: recordTime(record, options) } };
  }

  if (!newImage) throw new MappingError(`${eventName} record of ${where} without a new image (the stream must be NEW_AND_OLD_IMAGES)`);
  const before = oldImage ? statusOf(oldImage, 'old', where) : undefined;
  const after = statusOf(newImage, 'new', where);
  const replaced = textOf(oldImage?.['credentialsAt']) !== textOf(newImage['credentialsAt']);
  const detailType = transition(before, after, replaced);
  if (detailType === undefined || after === undefined) return undefined;

  const reason = detailType === 'ConnectionFailing' ? newImage['lastFailureReason']?.S : undefined;
  const detail: LifecycleDetail = {
    connection,
    status: after,
    previousStatus: before ?? null,
    ...(reason !== undefined ? { reason: capped(reason) } : {}),
    at: newImage['updatedAt']?.S ?? recordTime(record, options),
  };
  return { detailType, detail };
}

/** The event of a status change from `before` to `after` (the table above), or undefined. */
function transition(before: LifecycleStatus | undefined, after: LifecycleStatus | undefined, replaced: boolean): LifecycleDetailType | undefined {
  switch (after) {
    case undefined:
      return undefined;
    case 'active':
      if (before === undefined || before === 'removed') return 'ConnectionAdded';
      if (before === 'failing') return 'ConnectionRecovered';
      if (replaced) return 'ConnectionCredentialsReplaced';
      return before === 'paused' ? 'ConnectionResumed' : undefined;
    case 'paused':
      return before === 'paused' ? undefined : 'ConnectionPaused';
    case 'failing':
      return before === 'failing' ? undefined : 'ConnectionFailing';
    case 'removed':
      return before === 'removed' ? undefined : 'ConnectionRemoved';
  }
}

/** The connection id: the image's `connection`, else the record's key. */
function connectionOf(record: StreamRecord, image: StreamImage | undefined): string {
  const connection = image?.['connection']?.S ?? record.dynamodb?.Keys?.['connection']?.S;
  if (connection === undefined) throw new MappingError('a record of the connections table names no connection (no text attribute "connection")');
  return connection;
}

/** The image's status; undefined when it has none. Throws MappingError for any other value. */
function statusOf(image: StreamImage, which: 'old' | 'new', where: string): LifecycleStatus | undefined {
  const value = image['status'];
  if (value === undefined) return undefined;
  const status = value.S as LifecycleStatus | undefined;
  if (status === undefined || !CONNECTION_STATUSES.includes(status)) {
    const shown = value.S !== undefined ? JSON.stringify(value.S.slice(0, 40)) : `of type ${Object.keys(value)[0] ?? 'none'}`;
    throw new MappingError(`${where}: the ${which} image's status ${shown} is not one of ${CONNECTION_STATUSES.join(', ')}`);
  }
  return status;
}

/** A string attribute as is, a number attribute as its text; anything else is no text. */
function textOf(value: AttributeValue | undefined): string | undefined {
  return value?.S ?? value?.N;
}

/** The record's ApproximateCreationDateTime (seconds) as ISO-8601 UTC, else the function's clock. */
function recordTime(record: StreamRecord, options: LifecycleOptions): string {
  const seconds = record.dynamodb?.ApproximateCreationDateTime;
  const ms = typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : options.now();
  return new Date(ms).toISOString();
}

/** At most MAX_REASON_CHARACTERS characters (code points: a pair of surrogates is never cut). */
function capped(reason: string): string {
  if (reason.length <= MAX_REASON_CHARACTERS) return reason;
  return Array.from(reason).slice(0, MAX_REASON_CHARACTERS).join('');
}
