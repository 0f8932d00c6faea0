import { describe, expect, it } from 'vitest';
import { itemIdProblem, parseMessageBody, validateItemId } from '../../../functions/item-sync/message.js';
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

});

describe('the item id rule: 1 to 1,024 bytes in UTF-8, no control characters', () => {
  it.each([
    ['1,024 ASCII characters', 'x'.repeat(1024)],
    ['512 "é" (2 bytes each)', 'é'.repeat(512)],
    ['256 emoji (4 bytes each)', '🎉'.repeat(256)],
    ['341 CJK characters and one ASCII (3 × 341 + 1 bytes)', `${'日'.repeat(341)}x`],
    ['one character', 'a'],
  ])('accepts %s: exactly at or under the limit', (_name, id) => {
    expect(Buffer.byteLength(id, 'utf8')).toBeLessThanOrEqual(1024);
    expect(itemIdProblem(id)).toBeUndefined();
    expect(validateItemId(id)).toBe(id);
  });

  it.each([
    ['1,025 ASCII characters', 'x'.repeat(1025), 1025],
    ['600 "é" (600 characters)', 'é'.repeat(600), 1200],
    ['300 emoji (300 characters)', '😀'.repeat(300), 1200],
    ['1,000 CJK characters', '日'.repeat(1000), 3000],
    ['513 "é", one byte over', 'é'.repeat(512) + 'x', 1025],
  ])('refuses %s: over 1,024 bytes in UTF-8', (_name, id, bytes) => {
    const reason = `the item id is ${bytes} bytes long in UTF-8; the limit is 1024 bytes`;
    expect(itemIdProblem(id)).toBe(reason);
    expect(() => validateItemId(id)).toThrow(new PermanentError(reason));
    expect(() => parseMessageBody(JSON.stringify({ connection: 'acme', id }))).toThrow(new PermanentError(reason));
  });

  it.each([
    ['a tab', 'a\tb', 'the item id contains a control character (U+0009) at position 1'],
    ['NUL', 'nul\u0000', 'the item id contains a control character (U+0000) at position 3'],
    ['DEL', 'a\u007f', 'the item id contains a control character (U+007F) at position 1'],
    ['a C1 control', 'é\u0085', 'the item id contains a control character (U+0085) at position 1'],
    ['nothing', '', 'the item id is empty'],
    ['a lone surrogate', 'a\ud800', 'the item id is not well-formed Unicode (a lone surrogate)'],
  ])('refuses an id with %s', (_name, id, reason) => {
    expect(itemIdProblem(id)).toBe(reason);
    expect(() => validateItemId(id)).toThrow(new PermanentError(reason));
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
