import { describe, expect, it } from 'vitest';
import { BoundedMap } from '../../../functions/shared/bounded-map.js';

/** A map of `limit` holding `keys` set in that order, each key's value its upper case. */
function mapOf(limit: number, ...keys: string[]): BoundedMap<string, string> {
  const map = new BoundedMap<string, string>(limit);
  for (const key of keys) map.set(key, key.toUpperCase());
  return map;
}

const keysOf = (map: BoundedMap<string, string>): string[] => [...map.entries()].map(([key]) => key);

describe('BoundedMap', () => {
  it('holds at most its limit, dropping the entry stored least recently', () => {
    const map = mapOf(3, 'a', 'b', 'c', 'd');
    expect(map.size).toBe(3);
    expect(keysOf(map)).toEqual(['b', 'c', 'd']);
    expect(map.get('a')).toBeUndefined();
    map.set('e', 'E');
    expect(keysOf(map)).toEqual(['c', 'd', 'e']);
  });

  it('reads with get without changing which entry goes first', () => {
    const map = mapOf(2, 'a', 'b');
    expect(map.get('a')).toBe('A');
    map.set('c', 'C');
    expect(keysOf(map)).toEqual(['b', 'c']);
  });

  it('makes an entry read with use the most recent, so that the one used least recently goes first', () => {
    const map = mapOf(2, 'a', 'b');
    expect(map.use('a')).toBe('A');
    map.set('c', 'C');
    expect(keysOf(map)).toEqual(['a', 'c']);
    expect(map.use('b')).toBeUndefined();
    expect(keysOf(map)).toEqual(['a', 'c']);
  });

  it('makes an entry stored again the most recent, with its new value, and drops nothing for it', () => {
    const map = mapOf(3, 'a', 'b', 'c');
    map.set('a', 'A2');
    expect(keysOf(map)).toEqual(['b', 'c', 'a']);
    expect(map.get('a')).toBe('A2');
    map.set('d', 'D');
    expect(keysOf(map)).toEqual(['c', 'a', 'd']);
  });

  it('keeps a value that is falsy as any other', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('zero', 0);
    map.set('one', 1);
    expect(map.use('zero')).toBe(0);
    map.set('two', 2);
    expect([...map.entries()]).toEqual([
      ['zero', 0],
      ['two', 2],
    ]);
  });

  it('makes room again after a delete', () => {
    const map = mapOf(2, 'a', 'b');
    expect(map.delete('a')).toBe(true);
    expect(map.delete('a')).toBe(false);
    map.set('c', 'C');
    expect(keysOf(map)).toEqual(['b', 'c']);
    expect([...map.values()]).toEqual(['B', 'C']);
  });

  it('holds one entry at a limit of one', () => {
    const map = mapOf(1, 'a', 'b');
    expect(keysOf(map)).toEqual(['b']);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses a limit of %s', (limit) => {
    expect(() => new BoundedMap(limit)).toThrow(RangeError);
  });
});
