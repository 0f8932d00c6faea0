/**
 * Discovery at short scale, in virtual time (dev/sim/discovery-scenario.ts): a tree with a cycle
 * mirrored from its root, sent once as `npm run enqueue` sends it, through the real item sync on
 * both queues, the real pace and adapters, beside quiet accounts. The full-scale figures (`npm run
 * sim -- discovery discovery-cycle`) are in docs/measurements.md.
 */
import { describe, expect, it } from 'vitest';
import { crawlBoundSeconds, REQUESTS_PER_ITEM_GOAL } from '../../../dev/sim/discovery-report.js';
import { DISCOVERY_SHORT, discoveryRun } from '../../../dev/sim/discovery-scenario.js';
import { FAIRNESS_P99_FACTOR } from '../../../dev/sim/fairness-scenario.js';
import { quantiles } from '../../../dev/sim/quiet-accounts.js';
import { simDynamoLatency } from '../../../dev/sim/meters.js';

describe('discovery, short scale: a tree with a cycle from its root, beside quiet accounts', () => {
  it('mirrors every item once, ends by itself, and keeps the quiet accounts’ times', async () => {
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
    // The crawl is the sweep: at most its share of L, and near it, unless the connection's head is
    // slower: one connection's changes commit one after another through its head row, each one
    // transaction's round trip (AWS's latency as modelled), which at L = 200/s is below the sweep's rate.
    expect(run.crawlSeconds).toBeDefined();
    const rate = n / run.crawlSeconds!;
    expect(rate).toBeLessThanOrEqual(run.sweepRate * 1.02);
    const headRate = 1000 / simDynamoLatency().ms('TransactWriteItems');
    expect(run.crawlSeconds!).toBeLessThanOrEqual(crawlBoundSeconds(n, Math.min(run.sweepRate, headRate), DISCOVERY_SHORT.depth, run.batchWindowSeconds));
    // Quiet accounts' ids: all done, in their idle time.
    expect(run.quiet.left).toBe(0);
    expect(run.quiet.idle.length).toBeGreaterThanOrEqual(40);
    expect(run.quiet.during.length).toBeGreaterThanOrEqual(15);
    expect(quantiles(run.quiet.during).p99).toBeLessThanOrEqual(FAIRNESS_P99_FACTOR * quantiles(run.quiet.idle).p99);
    expect(run.deadLettered).toBe(0);
    expect(run.rateLimited).toBe(0);
  });
});
