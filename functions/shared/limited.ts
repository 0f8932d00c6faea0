/** Bounded concurrency for work that is one awaited call per element. No I/O of its own. */

/** Runs `fn` over `items` in their order, with at most `limit` at once (at least one). `fn` must not throw. */
export async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next]!;
      next += 1;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
