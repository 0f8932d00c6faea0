/**
 * Each connection's budget of ids kept in users' batches (functions/item-sync/users-budget.ts): a
 * burst at once, refilled by the second, bounded by what the pace serves within USERS_HOLD_MS, never
 * under USERS_IDS_PER_CONNECTION; one connection's spending is never another's.
 */
import { describe, expect, it } from 'vitest';
import { USERS_BURST_IDS, USERS_IDS_PER_CONNECTION, USERS_IDS_PER_SECOND, UsersBudget } from '../../../functions/item-sync/users-budget.js';

function budget(max?: number): { budget: UsersBudget; advance: (ms: number) => void } {
  let now = Date.parse('2026-12-07T06:00:00.000Z');
  return { budget: new UsersBudget({ now: () => new Date(now) }, max), advance: (ms) => (now += ms) };
}

describe('UsersBudget', () => {
  it('keeps a burst at once, then what the refill gave: an import spends it in its first batch', () => {
    const { budget: b, advance } = budget();
    expect(b.take('acme', 100, undefined)).toBe(USERS_BURST_IDS);
    expect(b.take('acme', 100, undefined)).toBe(USERS_IDS_PER_CONNECTION);
    advance(1_000);
    expect(b.take('acme', 100, undefined)).toBe(USERS_IDS_PER_SECOND);
    advance(60_000);
    expect(b.take('acme', 100, undefined)).toBe(USERS_BURST_IDS);
  });

  it("keeps an active user's ids whole: an id every 200 ms and 20 at once every 30 s", () => {
    const { budget: b, advance } = budget();
    for (let second = 0; second < 120; second += 1) {
      // A batch a second with that second's five ids, and the burst's twenty every 30 s.
      const ids = 5 + (second % 30 === 15 ? 20 : 0);
      expect(b.take('acme', ids, undefined)).toBe(ids);
      advance(1_000);
    }
  });

  it("keeps no more than the pace serves within the hold, and never fewer than the floor", () => {
    const { budget: b } = budget();
    expect(b.take('acme', 100, 12)).toBe(12);
    expect(b.take('globex', 100, 2)).toBe(USERS_IDS_PER_CONNECTION);
    expect(b.take('initech', 3, undefined)).toBe(3);
  });

  it("one connection's spending leaves another's budget whole", () => {
    const { budget: b } = budget();
    expect(b.take('acme', 1_000, undefined)).toBe(USERS_BURST_IDS);
    expect(b.take('globex', 1_000, undefined)).toBe(USERS_BURST_IDS);
  });

  it('forgets the connection used least recently beyond its size: a full budget again', () => {
    const { budget: b } = budget(2);
    b.take('a', 1_000, undefined);
    b.take('b', 1_000, undefined);
    b.take('c', 1_000, undefined);
    expect(b.take('a', 1_000, undefined)).toBe(USERS_BURST_IDS);
    expect(b.take('c', 1_000, undefined)).toBe(USERS_IDS_PER_CONNECTION);
  });
});
