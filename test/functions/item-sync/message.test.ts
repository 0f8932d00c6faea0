import { describe, expect, it } from 'vitest';
import { parseMessageBody, validateItemId } from '../../../functions/item-sync/message.js';
import { validateItem } from '../../../functions/item-sync/item.js';
import { PermanentError } from '../../../functions/shared/errors.js';

describe('message body', () => {
  it.each([
    ['{"id":"abc"}', 'abc'],
    ['  {"id": " spaced "}  ', ' spaced '],
    ['{"id":"a","other":[1,2]}', 'a'],
    ['plain-id', 'plain-id'],
    ['  trimmed\n', 'trimmed'],
    ['[1]', '[1]'],
    ['"quoted"', '"quoted"'],
    ['../getToken', '../getToken'],
    ['日本語 🎉', '日本語 🎉'],
  ])('%j is the id %j of the connection `default`', (body, id) => {
    expect(parseMessageBody(body)).toEqual({ connection: 'default', id });
  });

  it.each([
    ['{"connection":"acme","id":"abc"}', 'acme', 'abc'],
    ['{"id":"abc","connection":"acme"}', 'acme', 'abc'],
    ['  {"connection": "default", "id": " spaced "}  ', 'default', ' spaced '],
    ['{"connection":"A.b_c-9","id":"../getToken"}', 'A.b_c-9', '../getToken'],
    [`{"connection":"${'c'.repeat(64)}","id":"x"}`, 'c'.repeat(64), 'x'],
    ['{"connection":".acme..","id":"x"}', '.acme..', 'x'],
  ])('%j names its connection', (body, connection, id) => {
    expect(parseMessageBody(body)).toEqual({ connection, id });
  });

  it.each([
    ['{"connection":7,"id":"a"}', 'the connection is number, not a string'],
    ['{"connection":null,"id":"a"}', 'the connection is null, not a string'],
    ['{"connection":["acme"],"id":"a"}', 'the connection is an array, not a string'],
    ['{"connection":"","id":"a"}', 'the connection id is empty'],
    [`{"connection":"${'c'.repeat(65)}","id":"a"}`, 'the connection id is 65 characters long; the limit is 64'],
    ['{"connection":"acme corp","id":"a"}', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -'],
    ['{"connection":"a/b","id":"a"}', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -'],
    ['{"connection":".","id":"a"}', 'the connection id may not be made of dots only'],
    ['{"connection":"..","id":"a"}', 'the connection id may not be made of dots only'],
    ['{"connection":"...","id":"a"}', 'the connection id may not be made of dots only'],
  ])('%j is dead with the reason %j (never taken for `default`)', (body, reason) => {
    expect(() => parseMessageBody(body)).toThrow(new PermanentError(reason));
  });

  it('checks the id of a message with a connection as of one without', () => {
    expect(() => parseMessageBody('{"connection":"acme"}')).toThrow('the message body has no "id"');
    expect(() => parseMessageBody('{"connection":"acme","id":""}')).toThrow('the item id is empty');
  });

  it.each(['', '   ', '{', '{"id":1}', '{"id":null}', '{"ID":"x"}', '{"id":""}', '{"id":"a\\u0085b"}', 'a\u007fb'])(
    '%j is a permanent error',
    (body) => {
      expect(() => parseMessageBody(body)).toThrow(PermanentError);
    },
  );

  it('counts the 1,024-character limit in Unicode characters', () => {
    expect(validateItemId('🎉'.repeat(1024))).toHaveLength(2048);
    expect(() => validateItemId('🎉'.repeat(1025))).toThrow('1025 characters long; the limit is 1024');
    expect(validateItemId('x'.repeat(1024))).toHaveLength(1024);
  });
});

describe('item validation', () => {
  it('takes the revision as text: a number in its JSON form, a string as is', () => {
    expect(validateItem({ id: 'a', type: 'file', revision: 7 }, 'a', 'revision').revision).toBe('7');
    expect(validateItem({ id: 'a', type: 'file', revision: 1.5 }, 'a', 'revision').revision).toBe('1.5');
    expect(validateItem({ id: 'a', type: 'folder', revision: '007' }, 'a', 'revision').revision).toBe('007');
    expect(validateItem({ id: 'a', type: 'file', meta: { rev: 3 } }, 'a', 'meta.rev').revision).toBe('3');
  });

  it.each([
    [null, /answer is null, not an item object/],
    ['text', /answer is a string/],
    [{ type: 'file', revision: 1 }, /no string "id"/],
    [{ id: 'b', type: 'file', revision: 1 }, /another item \(id "b"\)/],
    [{ id: 'a', type: 'File', revision: 1 }, /type "File"/],
    [{ id: 'a', type: 3, revision: 1 }, /has a number as "type"/],
    [{ id: 'a', type: 'file', revision: true }, /has a boolean at the revision field/],
    [{ id: 'a', revision: 1 }, /has no "type"/],
    [{ id: 'a', type: 'file', revision: null }, /has null at the revision field/],
    [{ id: 'a', type: 'file', revision: { n: 1 } }, /has an object at the revision field/],
    [{ id: 'a', type: 'file', meta: 5 }, /no value at the revision field "meta.rev"/],
  ])('refuses %j', (body, message) => {
    const path = JSON.stringify(body)?.includes('meta') ? 'meta.rev' : 'revision';
    expect(() => validateItem(body, 'a', path)).toThrow(message);
  });
});
