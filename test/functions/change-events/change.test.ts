/**
 * The mapping from one stream record to its change event (contract, "Change events"), over every
 * transition of a row: none → live, none → tombstone, live → live (another / the same revision),
 * live → tombstone, tombstone → live (another / the same revision), tombstone → tombstone, REMOVE;
 * numbers stored as N, an itemObject row, and the records that cannot be mapped.
 */
import { describe, expect, it } from 'vitest';
import { changeOf, EVENT_SOURCE, MappingError } from '../../../functions/change-events/change.js';
import { image, live, record, tombstone, type Row } from './helpers.js';

const T0 = '2026-11-21T10:00:00.000Z';
const T1 = '2026-11-21T10:05:00.000Z';
const OBJECT = { key: 'items/f%2F1/5-3b1f.json', size: 1_048_577, sha256: 'a'.repeat(64) };

describe('changeOf: one event per real change', () => {
  it('the source is content-sync', () => {
    expect(EVENT_SOURCE).toBe('content-sync');
  });

  it('INSERT of a live row: ItemCreated, previousRevision null', () => {
    expect(changeOf(record(undefined, live('f1', '1', T0)))).toEqual({
      detailType: 'ItemCreated',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 },
    });
  });

  it('INSERT of a folder keeps its type', () => {
    expect(changeOf(record(undefined, { ...live('d1', 'r7', T0), type: 'folder' }))).toEqual({
      detailType: 'ItemCreated',
      detail: { connection: 'default', id: 'd1', type: 'folder', revision: 'r7', previousRevision: null, syncedAt: T0 },
    });
  });

  it('INSERT of a tombstone (a row that appears deleted): ItemDeleted, previousRevision null', () => {
    expect(changeOf(record(undefined, tombstone(live('f1', '4'), T1)))).toEqual({
      detailType: 'ItemDeleted',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '4', previousRevision: null, syncedAt: T1 },
    });
  });

  it('live → live with another revision: ItemUpdated with both revisions', () => {
    expect(changeOf(record(live('f1', '1', T0), live('f1', '2', T1)))).toEqual({
      detailType: 'ItemUpdated',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '2', previousRevision: '1', syncedAt: T1 },
    });
  });

  it('live → live with the same revision (only syncedAt or the copy moved): nothing', () => {
    expect(changeOf(record(live('f1', '2', T0), live('f1', '2', T1)))).toBeUndefined();
    expect(changeOf(record(live('f1', '2', T0), live('f1', '2', T0, { item: { id: 'f1', other: true } })))).toBeUndefined();
  });

  it('live → live where deleted is present and false on one side only: the same flag, so nothing', () => {
    expect(changeOf(record(live('f1', '2', T0), { ...live('f1', '2', T1), deleted: false }))).toBeUndefined();
  });

  it('live → tombstone: ItemDeleted, revision and previousRevision the kept one', () => {
    expect(changeOf(record(live('f1', '3', T0), tombstone(live('f1', '3', T0), T1)))).toEqual({
      detailType: 'ItemDeleted',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '3', previousRevision: '3', syncedAt: T1 },
    });
  });

  it('tombstone → live with another revision: ItemRestored', () => {
    expect(changeOf(record(tombstone(live('f1', '3'), T0), live('f1', '4', T1)))).toEqual({
      detailType: 'ItemRestored',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '4', previousRevision: '3', syncedAt: T1 },
    });
  });

  it('tombstone → live with the same revision (the provider has the item again, unchanged): ItemRestored', () => {
    expect(changeOf(record(tombstone(live('f1', '3'), T0), live('f1', '3', T1)))).toEqual({
      detailType: 'ItemRestored',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '3', previousRevision: '3', syncedAt: T1 },
    });
  });

  it('tombstone re-tombstoned (only syncedAt moved): nothing', () => {
    const dead = tombstone(live('f1', '3'), T0);
    expect(changeOf(record(dead, { ...dead, syncedAt: T1 }))).toBeUndefined();
  });

  it('tombstone → tombstone with another revision (an operator write): nothing, it was and stays deleted', () => {
    expect(changeOf(record(tombstone(live('f1', '3'), T0), tombstone(live('f1', '9'), T1)))).toBeUndefined();
  });

  it('REMOVE of a live row or of a tombstone: nothing (the sync never deletes rows)', () => {
    expect(changeOf(record(live('f1', '3'), undefined))).toBeUndefined();
    expect(changeOf(record(tombstone(live('f1', '3')), undefined))).toBeUndefined();
  });

  it("a folder's childrenPending (discovery's marker): its first write announces what any write does, its removal nothing", () => {
    const folder = (revision: string, syncedAt: string, pending: boolean) => ({ ...live('d1', revision, syncedAt, { type: 'folder' }), ...(pending ? { childrenPending: true } : {}) });
    expect(changeOf(record(undefined, folder('1', T0, true)))).toEqual(changeOf(record(undefined, folder('1', T0, false))));
    expect(changeOf(record(undefined, folder('1', T0, true)))?.detail).toEqual({ connection: 'default', id: 'd1', type: 'folder', revision: '1', previousRevision: null, syncedAt: T0 });
    expect(changeOf(record(folder('1', T0, false), folder('2', T1, true)))?.detailType).toBe('ItemUpdated');
    expect(changeOf(record(tombstone(folder('1', T0, false)), folder('1', T1, true)))?.detailType).toBe('ItemRestored');
    // Removed once the children are sent (the row's revision and syncedAt as written): no change.
    expect(changeOf(record(folder('2', T1, true), folder('2', T1, false)))).toBeUndefined();
    // A tombstone written over a marked row removes the marker with it: the delete, as ever.
    expect(changeOf(record(folder('2', T0, true), tombstone(folder('2', T0, false), T1)))?.detailType).toBe('ItemDeleted');
  });

  it('the same write delivered again maps to the same event (consumers dedupe on id, revision, syncedAt)', () => {
    const first = record(live('f1', '1', T0), live('f1', '2', T1));
    expect(changeOf(structuredClone(first))).toEqual(changeOf(first));
  });
});

describe('changeOf: the connection', () => {
  it('the detail names the row\'s connection (its `connection` attribute), first', () => {
    const created = changeOf(record(undefined, live('f1', '1', T0, { connection: 'acme' })));
    expect(created).toEqual({
      detailType: 'ItemCreated',
      detail: { connection: 'acme', id: 'f1', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 },
    });
    expect(JSON.stringify(created!.detail).startsWith('{"connection":"acme","id":"f1",')).toBe(true);
  });

  it('two connections holding the same id: each its own event', () => {
    const acme = changeOf(record(live('same', '1', T0, { connection: 'acme' }), live('same', '2', T1, { connection: 'acme' })));
    const globex = changeOf(record(undefined, live('same', '7', T1, { connection: 'globex' })));
    expect([acme?.detail.connection, acme?.detailType, globex?.detail.connection, globex?.detailType]).toEqual(['acme', 'ItemUpdated', 'globex', 'ItemCreated']);
  });
});

describe('changeOf: values', () => {
  it('numbers as text: a revision stored as N is published as its text and compared as text', () => {
    expect(changeOf(record(undefined, live('f1', 42, T0)))).toEqual({
      detailType: 'ItemCreated',
      detail: { connection: 'default', id: 'f1', type: 'file', revision: '42', previousRevision: null, syncedAt: T0 },
    });
    expect(changeOf(record(live('f1', 41, T0), live('f1', 42, T1)))?.detail).toMatchObject({ revision: '42', previousRevision: '41' });
    // N "42" and S "42" are the same text: no change.
    expect(changeOf(record(live('f1', 42, T0), live('f1', '42', T1)))).toBeUndefined();
    // Text is compared exactly: "1.0" is another revision than "1".
    expect(changeOf(record(live('f1', '1', T0), live('f1', '1.0', T1)))?.detailType).toBe('ItemUpdated');
  });

  it('a large item: itemObject {key, size, sha256} with size a JSON number, in place of item', () => {
    const large: Row = { connection: 'default', id: 'big', type: 'file', revision: '5', syncedAt: T1, itemObject: OBJECT };
    const event = changeOf(record(live('big', '4', T0), large));
    expect(event).toEqual({
      detailType: 'ItemUpdated',
      detail: { connection: 'default', id: 'big', type: 'file', revision: '5', previousRevision: '4', syncedAt: T1, itemObject: OBJECT },
    });
    expect(JSON.stringify(event!.detail)).toBe(
      `{"connection":"default","id":"big","type":"file","revision":"5","previousRevision":"4","syncedAt":"${T1}","itemObject":{"key":"${OBJECT.key}","size":1048577,"sha256":"${OBJECT.sha256}"}}`,
    );
  });

  it('itemObject on every kind of event the new row has it for; none when only the old row had one', () => {
    const large: Row = { connection: 'default', id: 'big', type: 'file', revision: '5', syncedAt: T0, itemObject: OBJECT };
    expect(changeOf(record(undefined, large))?.detail.itemObject).toEqual(OBJECT);
    expect(changeOf(record(large, tombstone(large, T1)))).toEqual({
      detailType: 'ItemDeleted',
      detail: { connection: 'default', id: 'big', type: 'file', revision: '5', previousRevision: '5', syncedAt: T1, itemObject: OBJECT },
    });
    expect(changeOf(record(tombstone(large), { ...large, revision: '6', syncedAt: T1 }))?.detailType).toBe('ItemRestored');
    // Back inline (a later, small revision): the object is gone from the row and from the event.
    const inline = changeOf(record(large, live('big', '6', T1)));
    expect(inline).toEqual({ detailType: 'ItemUpdated', detail: { connection: 'default', id: 'big', type: 'file', revision: '6', previousRevision: '5', syncedAt: T1 } });
    expect(inline!.detail).not.toHaveProperty('itemObject');
  });

  it('the detail holds the contract fields only, in the contract order (no item, no deleted flag)', () => {
    const event = changeOf(record(live('f1', '1', T0), tombstone(live('f1', '1'), T1)));
    expect(Object.keys(event!.detail)).toEqual(['connection', 'id', 'type', 'revision', 'previousRevision', 'syncedAt']);
  });

  it('an old row without a revision (an operator write) gives previousRevision null', () => {
    const { revision: _dropped, ...noRevision } = live('f1', '1', T0);
    expect(changeOf(record(noRevision, live('f1', '2', T1)))?.detail).toMatchObject({ revision: '2', previousRevision: null });
  });
});

describe('changeOf: records that cannot be mapped throw MappingError', () => {
  it('a new row without connection, type, revision or syncedAt', () => {
    for (const attribute of ['type', 'revision', 'syncedAt'] as const) {
      const row: Row = { ...live('f1', '1', T0, { connection: 'acme' }), [attribute]: undefined };
      expect(() => changeOf(record(undefined, row))).toThrow(MappingError);
      expect(() => changeOf(record(undefined, row))).toThrow(`row "f1" of connection "acme" has no text attribute "${attribute}"`);
    }
    const noConnection: Row = { ...live('f1', '1', T0), connection: undefined };
    expect(() => changeOf(record(undefined, noConnection))).toThrow('row "f1" has no text attribute "connection"');
  });

  it('a malformed itemObject', () => {
    const bad = [
      { key: 'k', sha256: 's' },
      { key: 'k', size: -1, sha256: 's' },
      { key: 'k', size: 1.5, sha256: 's' },
      { key: 'k', size: '12', sha256: 's' },
      { size: 1, sha256: 's' },
      'items/f1',
    ];
    for (const itemObject of bad) {
      const row = { ...live('f1', '1', T0), itemObject } as unknown as Row;
      expect(() => changeOf(record(undefined, row)), JSON.stringify(itemObject)).toThrow(MappingError);
    }
  });

  it('a MODIFY without its old image, an INSERT or MODIFY without its new image, an unknown eventName', () => {
    const modify = record(live('f1', '1', T0), live('f1', '2', T1));
    delete modify.dynamodb!.OldImage;
    expect(() => changeOf(modify)).toThrow('MODIFY record without an old image');
    const insert = record(undefined, live('f1', '1', T0));
    delete insert.dynamodb!.NewImage;
    expect(() => changeOf(insert)).toThrow('INSERT record without a new image');
    expect(() => changeOf({ eventName: 'UPSERT' as never, dynamodb: { NewImage: image(live('f1', '1')) } })).toThrow('unknown stream eventName "UPSERT"');
  });

  it('an INSERT that carries an old image is still a creation (the images of an INSERT have no before)', () => {
    const insert = record(undefined, live('f1', '1', T0));
    insert.dynamodb!.OldImage = image(live('f1', '0')) as never;
    expect(changeOf(insert)?.detailType).toBe('ItemCreated');
  });
});
