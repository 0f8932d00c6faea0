import { describe, expect, it } from 'vitest';
import { getPath, isLosslessNumber, isObject, jsonNumber, LosslessNumber, parseJson } from '../../../functions/shared/json.js';

describe('parseJson', () => {
  it('keeps integers beyond 2^53 and number forms a JS number would rewrite, as their text', () => {
    const value = parseJson('{"a":12345678901234567891,"b":1.0,"c":1e3,"d":-0,"e":5,"f":0.1,"g":[2]}') as Record<string, unknown>;

    expect(String(value['a'])).toBe('12345678901234567891');
    expect(isLosslessNumber(value['a'])).toBe(true);
    expect(String(value['b'])).toBe('1.0');
    expect(String(value['c'])).toBe('1e3');
    expect(String(value['d'])).toBe('-0');
    expect(value['e']).toBe(5);
    expect(value['f']).toBe(0.1);
    expect(value['g']).toEqual([2]);
  });

  it('keeps "__proto__" as an ordinary key, as JSON.parse does', () => {
    const value = parseJson('{"__proto__":{"polluted":true},"x":1}') as Record<string, unknown>;

    expect(Object.keys(value)).toEqual(['__proto__', 'x']);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it.each(['<html>', '{"a":1}{', '{"a":1,"a":2}', ''])('throws a SyntaxError for %j', (text) => {
    expect(() => parseJson(text)).toThrow(SyntaxError);
  });
});

describe('json helpers', () => {
  it('jsonNumber returns a JS number only when it reads back as the same text', () => {
    expect(jsonNumber('42')).toBe(42);
    expect(jsonNumber('9007199254740993')).toEqual(new LosslessNumber('9007199254740993'));
  });

  it('isObject is true for plain objects only', () => {
    expect(isObject({})).toBe(true);
    expect(isObject([])).toBe(false);
    expect(isObject(null)).toBe(false);
    expect(isObject(new LosslessNumber('1.0'))).toBe(false);
  });

  it('getPath follows a dot path through own properties only', () => {
    const value = { meta: { rev: 3 }, flat: 1 };
    expect(getPath(value, 'meta.rev')).toBe(3);
    expect(getPath(value, 'flat')).toBe(1);
    expect(getPath(value, 'meta.missing')).toBeUndefined();
    expect(getPath(value, 'flat.deeper')).toBeUndefined();
    expect(getPath(value, 'toString')).toBeUndefined();
  });
});
