/**
 * What a discovery crawl is run at and what it measured: the shapes discovery-scenario.ts makes and
 * discovery-report.ts reports on (apart from both, so that neither imports the other).
 */
import type { Usage } from './connections-cost.js';

export interface DiscoveryScale {
  /** Items of the tree, root included. */
  items: number;
  depth: number;
  /** A folder near the bottom lists an ancestor of its own. */
  cycle: boolean;
  /** At most this many entries in a folder's list (the simulator's children.cap). */
  childrenCap: number;
  /** The provider's limit L, requests a second, told to the system (providerRequestsPerSecond). */
  limit: number;
  /** Accounts that each send one id every `sendEverySeconds` to the sync queue. */
  quietAccounts: number;
  sendEverySeconds: number;
  /**
   * The crawled account's own users: from the start, an id every `everyMs` to the sync queue (the
   * users' lane), each an item of the account that no folder lists (the crawl never reaches it),
   * each sent once; undefined: none.
   */
  ownUsers?: { everyMs: number };
  /** Quiet accounts alone before the root is sent, after the warm-up (their first round of ids). */
  idleMinutes: number;
  /** The run stops this long after the root was sent, crawled or not. */
  maxCrawlMinutes: number;
  /** Once crawled (every row, the reconcile queue empty), the run goes on this long. */
  settleMinutes: number;
  providerLatencyMs: number;
  /** The real Powertools logger and metrics writing to byte counters (log ingestion in the cost). */
  meterLogs: boolean;
  seed: number;
}

export interface DiscoveryRun {
  scale: DiscoveryScale;
  /** L × (1 − usersReservedPercent/100): the sweep's share of the pace, ids a second. */
  sweepRate: number;
  usersReservedPercent: number;
  /** Rows of the connection `default` at the end; those whose revision is not the served item's; items with no row. */
  rows: number;
  mismatched: number;
  missing: number;
  /** Entries in the folders' lists as the provider serves them (N − 1, and one more with the cycle). */
  listedEntries: number;
  /** Provider item requests for the account `default`'s tree (the root's included; its own users' ids not). */
  itemRequests: number;
  /** From the root's send to its last row, s; undefined when not every item got its row. */
  crawlSeconds: number | undefined;
  /** Messages left on the reconcile queue when the run ended, and those of `default` on the sync queue. */
  reconcileQueueLeft: number;
  syncQueueLeft: number;
  /** Item requests for `default` in the settle time (once crawled and the reconcile queue empty). */
  requestsAfterDrain: number | undefined;
  doneAgain: number;
  metrics: Record<string, number>;
  reconcilerSent: number;
  /** The sweep's AWS usage over the crawl (root's send to the drain). */
  usage: Usage | undefined;
  itemsTable: string;
  /** The deployment's X-Ray tracing (the context key `tracing`). */
  tracing: boolean;
  /** The event sources' batching window as deployed, seconds (0: none). */
  batchWindowSeconds: number;
  quiet: { idle: Float64Array; during: Float64Array; left: number };
  /**
   * The crawled account's own users' ids (DiscoveryScale.ownUsers), send to done, idle and during
   * the crawl; those done in the background lane (sent idle, sent during); those never done.
   */
  own?: { idle: Float64Array; during: Float64Array; inBackground: { idle: number; during: number }; left: number };
  rateLimited: number;
  deadLettered: number;
  /** Discovery's sends of an id whose row the table held (written before the send). */
  sentHeld: number;
  /** …of an id whose sync was in flight: requested at the provider, its row not written yet. */
  sentInFlight: number;
  /** Items of `default` requested more than once at the provider since the root was sent. */
  fetchedTwice: number;
  /** Lost write races that fetched the item again (a second request in one delivery). */
  fetchedAgain: number;
  virtualMs: number;
  realMs: number;
}
