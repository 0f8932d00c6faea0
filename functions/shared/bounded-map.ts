/**
 * A per-container map that holds at most `limit` entries. No I/O of its own.
 *
 * Its entries are kept from the oldest to the most recent: `set` makes an entry the most recent
 * (a new one, or one stored again), and so does `use`; `get` reads without changing the order.
 * When `set` leaves more than `limit` entries, the oldest are dropped. A cache that reads with
 * `use` drops the entry used least recently; one that reads with `get` drops the entry stored least
 * recently.
 */
export class BoundedMap<K, V> {
  private readonly map = new Map<K, V>();

  /** `limit`: a whole number, at least 1. */
  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`a bounded map holds at least one entry, got a limit of ${limit}`);
  }

  /** The value of `key`; its place in the order unchanged. */
  get(key: K): V | undefined {
    return this.map.get(key);
  }

  /** The value of `key`, which becomes the most recent entry. */
  use(key: K): V | undefined {
    if (!this.map.has(key)) return undefined;
    const value = this.map.get(key)!;
    this.map.delete(key);
    this.map.set(key, value);
    return value;
  }

  /** Stores `value` as the most recent entry; beyond `limit` entries, the oldest are dropped. */
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    for (const oldest of this.map.keys()) {
      if (this.map.size <= this.limit) break;
      this.map.delete(oldest);
    }
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  get size(): number {
    return this.map.size;
  }

  /** The entries, from the oldest to the most recent. */
  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }

  /** The values, from the oldest to the most recent. */
  values(): IterableIterator<V> {
    return this.map.values();
  }
}
