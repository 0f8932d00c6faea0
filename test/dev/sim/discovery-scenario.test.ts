/**
 * Discovery at short scale, in virtual time (dev/sim/discovery-scenario.ts): a tree with a cycle
 * mirrored from its root, sent once as `npm run enqueue` sends it, through the real item sync on
 * both queues, the real pace and adapters, beside quiet accounts and the account's own users (an id
 * every 200 ms of items no folder lists). The full-scale figures (`npm run
 * sim -- discovery discovery-cycle`) are in docs/measurements.md.
 */
import { describe, expect, it } from 'vitest';
import { BUSY_USERS_FACTOR } from '../../../dev/sim/busy-scenario.js';
import { crawlBoundSeconds, crawlFigures, REQUESTS_PER_ITEM_GOAL } from '../../../dev/sim/discovery-report.js';
import { DISCOVERY_SHORT, discoveryRun } from '../../../dev/sim/discovery-scenario.js';
import { FAIRNESS_P99_FACTOR } from '../../../dev/sim/fairness-scenario.js';
import { quantiles } from '../../../dev/sim/quiet-accounts.js';

describe("discovery, short scale: a tree with a cycle from its root, beside quiet accounts and the account's own users", () => {
  it('mirrors every item once, ends by itself, and keeps the quiet accounts’ and its own users’ times', async () => {
    expect(DISCOVERY_SHORT.cycle).toBe(true);
    const run = await discoveryRun(DISCOVERY_SHORT);
    const n = DISCOVERY_SHORT.items;

    // Every item has its row, holding the revision the provider serves.
    expect(run).toMatchObject({ rows: n, missing: 0, mismatched: 0 });
    // The lists name one id more than the tree's children: the ancestor the cycle lists again.
    expect(run.listedEntries).toBe(n);
    // Each child was sent for checking once, and fetched once: the cycle's ancestor was not sent again.
    expect(run.metrics['ChildrenDiscovered']).toBe(n - 1);
    expect(run.metrics['ChildrenSkipped']).toBe(0);
    expect(run.metrics['ListingsTruncated']).toBe(0);
    expect(run.itemRequests / n).toBeLessThanOrEqual(REQUESTS_PER_ITEM_GOAL);
    expect(run.doneAgain).toBe(0);
    // Nothing sent back that the table held or that was being synced; nothing fetched twice.
    expect([run.sentHeld, run.sentInFlight, run.fetchedTwice, run.fetchedAgain]).toEqual([0, 0, 0, 0]);
    // The crawl ends: nothing of it left on either queue, and the provider is asked nothing more.
    expect(run.reconcileQueueLeft).toBe(0);
    expect(run.syncQueueLeft).toBe(0);
    expect(run.requestsAfterDrain).toBe(0);
    expect(run.reconcilerSent).toBe(0);
    // The crawl is the sweep: at most its share of L, and near it (each change a single-item write,
    // numbered from the stream: no head a connection's writes queue behind).
    expect(run.crawlSeconds).toBeDefined();
    const rate = n / run.crawlSeconds!;
    expect(rate).toBeLessThanOrEqual(run.sweepRate * 1.02);
    expect(run.crawlSeconds!).toBeLessThanOrEqual(crawlBoundSeconds(n, run.sweepRate, DISCOVERY_SHORT.depth, run.batchWindowSeconds));
    // Quiet accounts' ids: all done, in their idle time.
    expect(run.quiet.left).toBe(0);
    expect(run.quiet.idle.length).toBeGreaterThanOrEqual(40);
    expect(run.quiet.during.length).toBeGreaterThanOrEqual(15);
    expect(quantiles(run.quiet.during).p99).toBeLessThanOrEqual(FAIRNESS_P99_FACTOR * quantiles(run.quiet.idle).p99);
    // The account's own users (an id every 200 ms, items no folder lists): all done, none put behind
    // their own account's crawl (done in the background lane), within BUSY_USERS_FACTOR of idle.
    const own = run.own!;
    expect(DISCOVERY_SHORT.ownUsers).toEqual({ everyMs: 200 });
    expect(own.left).toBe(0);
    expect(own.inBackground).toEqual({ idle: 0, during: 0 });
    expect(own.idle.length).toBeGreaterThanOrEqual(100);
    expect(own.during.length).toBeGreaterThanOrEqual(40);
    expect(quantiles(own.during).p50).toBeLessThanOrEqual(BUSY_USERS_FACTOR * quantiles(own.idle).p50);
    expect(quantiles(own.during).p99).toBeLessThanOrEqual(BUSY_USERS_FACTOR * quantiles(own.idle).p99);
    const { checks } = crawlFigures(run);
    expect(checks.filter((c) => c.what.startsWith("the account's own users") || c.what.startsWith("every id of the account's own")).map((c) => [c.what, c.ok])).toEqual([
      [`the account's own users: p50 and p99 during its crawl at most ${BUSY_USERS_FACTOR}× idle`, true],
      ["the account's own users: no id sent during the crawl put behind it (done in the background lane)", true],
      ["every id of the account's own users done", true],
    ]);
    expect(run.deadLettered).toBe(0);
    expect(run.rateLimited).toBe(0);
  });
});
