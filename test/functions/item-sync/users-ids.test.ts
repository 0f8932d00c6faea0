/**
 * What a users' batch keeps of one connection's ids (functions/item-sync/users-ids.ts): a user's
 * sends whole, within what the pace serves in USERS_HOLD_MS; a few of an import's; never under
 * USERS_IDS_PER_CONNECTION.
 */
import { describe, expect, it } from 'vitest';
import { USERS_BURST_IDS, USERS_IDS_PER_CONNECTION, usersIdsKept } from '../../../functions/item-sync/users-ids.js';

describe('usersIdsKept', () => {
  it("keeps a user's ids whole: an id every 200 ms beside a burst of 20, up to USERS_BURST_IDS", () => {
    expect(usersIdsKept(25, 200)).toBe(25);
    expect(usersIdsKept(USERS_BURST_IDS, 200)).toBe(USERS_BURST_IDS);
    expect(usersIdsKept(3, undefined)).toBe(3);
  });

  it("keeps USERS_IDS_PER_CONNECTION of more: an import's batch", () => {
    expect(usersIdsKept(USERS_BURST_IDS + 1, 1_000)).toBe(USERS_IDS_PER_CONNECTION);
    expect(usersIdsKept(100, undefined)).toBe(USERS_IDS_PER_CONNECTION);
  });

  it('keeps no more than the pace serves within the hold, and never fewer than USERS_IDS_PER_CONNECTION', () => {
    expect(usersIdsKept(20, 12)).toBe(12);
    expect(usersIdsKept(20, 2)).toBe(USERS_IDS_PER_CONNECTION);
    expect(usersIdsKept(2, 1)).toBe(2);
  });
});
