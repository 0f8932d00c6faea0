/**
 * The mapping from one record of the items table's stream to the one change event it announces, if
 * any (docs/change-events.md). Pure: no AWS import, no clock, no I/O.
 *
 * A row is live when `deleted` is absent or false, a tombstone when `deleted` is true. The images
 * decide, not the record's eventName (but for REMOVE).
 *
 * INSERT and MODIFY records are mapped by the rule of functions/shared/changes/transition.ts (the
 * one the changes feed uses): created → ItemCreated (previousRevision null without an old image),
 * updated → ItemUpdated, deleted → ItemDeleted, restored → ItemRestored, none → no event. A REMOVE
 * announces nothing.
 *
 * REMOVE: the sync never deletes a row (a provider delete keeps the row as a tombstone, which is
 * announced as ItemDeleted). A REMOVE is an operator's act outside the contract (a clean-up, a
 * restore into a new table), not a change of the mirrored item, so it announces nothing; the
 * function logs and counts it (StreamRecordsIgnored).
 *
 * `detail` is built from the new image: `connection`, `id`, `type`, `revision` and `syncedAt`
 * (required: a row the sync writes always has them), `previousRevision` from the old image (null
 * without one), and `itemObject` when the new row has one. Revisions are compared, and published, as text: a revision
 * stored as a number (N) is its text. A record that cannot be mapped (a MODIFY without its old
 * image, a new image without a required attribute, a malformed itemObject) throws MappingError: the
 * caller hands it back to the event source rather than dropping it.
 */
import { changeKindOf, type ChangeKind } from '../shared/changes/transition.js';
import type { AttributeValue, ChangeEvent, ItemObject, StreamImage, StreamRecord } from './ports.js';

/** Every event's `source`. */
export const EVENT_SOURCE = 'content-sync';

/** A stream record that cannot be turned into its event (the message says why; it holds no item data but the key). */
export class MappingError extends Error {
  override readonly name = 'MappingError';
}

/** The row as far as the events need it. */
interface RowState {
  connection: string | undefined;
  id: string | undefined;
  type: string | undefined;
  revision: string | undefined;
  syncedAt: string | undefined;
  deleted: boolean;
  itemObject: ItemObject | undefined;
}

/** The event `record` announces, or undefined when it announces nothing. Throws MappingError. */
export function changeOf(record: StreamRecord): ChangeEvent | undefined {
  const change = rowChangeOf(record);
  if (change === undefined) return undefined;
  const { detail } = change;
  // An event names the row's type (the contract's detail); only the feed takes a row without one.
  const type = requireText(detail.type, 'type', rowName(detail));
  return { detailType: DETAIL_TYPES[change.kind], detail: { ...detail, type } };
}

/** What a change says of its row: an event's detail, its `type` undefined when the row has none. */
export type RowChangeDetail = Omit<ChangeEvent['detail'], 'type'> & { type: string | undefined };

/**
 * The change `record` makes to its row (the one rule of transition.ts) with what the event and the
 * changes feed say of it, or undefined when it makes none. Throws MappingError (a row without `type`
 * is the event's to refuse: the feed takes it, as null).
 */
export function rowChangeOf(record: StreamRecord): { kind: ChangeKind; detail: RowChangeDetail } | undefined {
  const eventName = record.eventName;
  if (eventName === 'REMOVE') return undefined;
  if (eventName !== 'INSERT' && eventName !== 'MODIFY') {
    throw new MappingError(`unknown stream eventName ${JSON.stringify(eventName ?? null)}`);
  }
  const newImage = record.dynamodb?.NewImage;
  if (!newImage) throw new MappingError(`${eventName} record without a new image (the stream must be NEW_AND_OLD_IMAGES)`);
  const oldImage = eventName === 'MODIFY' ? record.dynamodb?.OldImage : undefined;
  if (eventName === 'MODIFY' && !oldImage) {
    throw new MappingError('MODIFY record without an old image (the stream must be NEW_AND_OLD_IMAGES)');
  }

  const after = rowOf(newImage);
  const before = oldImage ? rowOf(oldImage) : undefined;
  const kind = changeKindOf(before, after);
  if (kind === undefined) return undefined;

  const where = rowName(after);
  const detail: RowChangeDetail = {
    connection: requireText(after.connection, 'connection', where),
    id: requireText(after.id, 'id', where),
    type: after.type,
    revision: requireText(after.revision, 'revision', where),
    previousRevision: before?.revision ?? null,
    syncedAt: requireText(after.syncedAt, 'syncedAt', where),
  };
  if (after.itemObject) detail.itemObject = after.itemObject;
  return { kind, detail };
}

/** Each change's event type. */
const DETAIL_TYPES: Record<ChangeKind, ChangeEvent['detailType']> = {
  created: 'ItemCreated',
  updated: 'ItemUpdated',
  deleted: 'ItemDeleted',
  restored: 'ItemRestored',
};

function rowOf(image: StreamImage): RowState {
  const connection = text(image['connection']);
  const id = text(image['id']);
  return {
    connection,
    id,
    type: text(image['type']),
    revision: text(image['revision']),
    syncedAt: text(image['syncedAt']),
    deleted: image['deleted']?.BOOL === true,
    itemObject: image['itemObject'] === undefined ? undefined : itemObjectOf(image['itemObject'], rowName({ connection, id })),
  };
}

/** How a message names a row: `row "<id>" of connection "<connection>"`, as far as they are known. */
function rowName(row: Pick<RowState, 'connection' | 'id'>): string {
  if (row.id === undefined) return row.connection === undefined ? 'a row' : `a row of connection ${JSON.stringify(row.connection)}`;
  return `row ${JSON.stringify(row.id)}${row.connection === undefined ? '' : ` of connection ${JSON.stringify(row.connection)}`}`;
}

/** A string attribute as is, a number attribute as its text; anything else is no text. */
function text(value: AttributeValue | undefined): string | undefined {
  if (value?.S !== undefined) return value.S;
  if (value?.N !== undefined) return value.N;
  return undefined;
}

function requireText(value: string | undefined, attribute: string, where: string): string {
  if (value === undefined) throw new MappingError(`${where} has no text attribute "${attribute}"`);
  return value;
}

/** `{"key": S, "size": N, "sha256": S}`; `size` becomes a JSON number. */
function itemObjectOf(value: AttributeValue, where: string): ItemObject {
  const map = value.M;
  if (!map) throw new MappingError(`${where}: itemObject is not a map`);
  const key = map['key']?.S;
  const sha256 = map['sha256']?.S;
  const rawSize = map['size']?.N;
  const size = rawSize !== undefined && /^\d+$/.test(rawSize) ? Number(rawSize) : Number.NaN;
  if (key === undefined || sha256 === undefined || !Number.isSafeInteger(size) || size < 0) {
    throw new MappingError(`${where}: itemObject needs key (S), size (N, a whole number) and sha256 (S)`);
  }
  return { key, size, sha256 };
}
