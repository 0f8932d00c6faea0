import { describe, expect, it } from 'vitest';
import { forEachLimited } from '../../../functions/shared/limited.js';

/** A call that ends when the test says so. */
interface Pending {
  item: number;
  end: () => void;
}

/** Lets every promise callback that is due run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** forEachLimited over `items` with calls the test ends one by one; what started, and the run. */
function controlled(items: number[], limit: number): { started: Pending[]; running: () => number; done: Promise<void> } {
  const started: Pending[] = [];
  let running = 0;
  const done = forEachLimited(items, limit, (item) => {
    running += 1;
    return new Promise<void>((resolve) => {
      started.push({
        item,
        end: () => {
          running -= 1;
          resolve();
        },
      });
    });
  });
  return { started, running: () => running, done };
}

describe('forEachLimited', () => {
  it('runs at most `limit` calls at once, starting the next one as one ends, in the order of the list', async () => {
    const run = controlled([1, 2, 3, 4, 5], 2);
    await settle();
    expect(run.started.map((call) => call.item)).toEqual([1, 2]);
    run.started[1]!.end();
    await settle();
    expect(run.started.map((call) => call.item)).toEqual([1, 2, 3]);
    expect(run.running()).toBe(2);
    run.started[0]!.end();
    run.started[2]!.end();
    await settle();
    expect(run.started.map((call) => call.item)).toEqual([1, 2, 3, 4, 5]);
    expect(run.running()).toBe(2);
    run.started[3]!.end();
    run.started[4]!.end();
    await run.done;
    expect(run.running()).toBe(0);
  });

  it('starts every call at once when the limit is the list or more', async () => {
    const run = controlled([1, 2, 3], 10);
    await settle();
    expect(run.started.map((call) => call.item)).toEqual([1, 2, 3]);
    for (const call of run.started) call.end();
    await run.done;
  });

  it('runs one call at a time at a limit below one', async () => {
    const run = controlled([1, 2], 0);
    await settle();
    expect(run.started.map((call) => call.item)).toEqual([1]);
    run.started[0]!.end();
    await settle();
    expect(run.started.map((call) => call.item)).toEqual([1, 2]);
    run.started[1]!.end();
    await run.done;
  });

  it('ends at once over an empty list', async () => {
    const run = controlled([], 3);
    await run.done;
    expect(run.started).toEqual([]);
  });
});
