/**
 * What one batch of the item sync is made of, apart from how it is worked: its records, its
 * counters, its report. The batch (sync.ts), one id's run (item-run.ts) and the outcomes' carrying
 * out (outcome/carry-out.ts) share these; this module imports none of them.
 */
import type { DiscoveryCounts } from './discovery.js';
import type { Outcome } from './outcome/decide.js';

/** The part of an SQS record the core needs. */
export interface SyncRecord {
  messageId: string;
  body: string;
  receiptHandle: string;
  /** The source queue's ARN (eventSourceARN). */
  queueArn: string;
  /** Times this message was postponed before (message attribute `postponements`); default 0. */
  postponements?: number;
  /** Set when the reconciler sent this id (message attribute `reconcilePass`): kept when it is sent again. */
  reconcilePass?: number;
  /**
   * The background lane (message attribute `lane` = `background` or `backlog`, or a `reconcilePass`
   * without it): the reconciler's ids, backfills and users' backlogs, whose requests yield to users'
   * ids (the pace's sweep, or a backlog: sync.ts). Kept when it is sent again.
   */
  background?: boolean;
  /** Of the background lane as a users' backlog (message attribute `lane` = `backlog`): kept when it is sent again. */
  backlog?: boolean;
}

export interface SyncCounts extends DiscoveryCounts {
  fetched: number;
  created: number;
  updated: number;
  unchanged: number;
  deleted: number;
  retried: number;
  deadLettered: number;
  /** Records sent again with a delay: they wait for the pace or for an outage to pass. */
  postponed: number;
  /** Provider answers 429 met by this batch. */
  rateLimited: number;
  /** Records of a connection's backlog in a users' batch, sent to the background lane (sync.ts). */
  movedToBackground: number;
}

export interface BatchReport {
  /** Message ids to report in batchItemFailures, in the order of the batch. */
  failures: string[];
  counts: SyncCounts;
  /** The final outcome of every record, by message id. */
  outcomes: Map<string, Outcome>;
}

export interface BatchOptions {
  /** Epoch milliseconds: no provider work starts after it and requests in flight are aborted at it. */
  deadline: number;
}
