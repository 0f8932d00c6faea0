/**
 * The changes scenario's scales (changes-scenario.ts runs them; changes-report.ts reports on them):
 * the full million and the short run `npm test` makes.
 */
export interface ChangesScale {
  connections: number;
  /** Items of each account. */
  itemsEach: number;
  /**
   * Items of one more, busy, connection (the account `default`), changed every round as the others'
   * are, beside them: its changes are busyItems × rounds (0: no busy connection).
   */
  busyItems: number;
  /** Rounds: each changes every item once. */
  rounds: number;
  /** The provider's limit L, requests a second, told to the system. */
  limit: number;
  providerLatencyMs: number;
  /** Share of the live items deleted each round (restored the next). */
  deletes: number;
  /** Share of the ids sent twice each round. */
  sentTwice: number;
  /** Share of the messages SQS delivers twice. */
  sqsDuplicates: number;
  /** Every this-th sync invocation fails after its work. */
  failEvery: number;
  /** Share of the sync's and the changes writer's writes whose answer is lost (the SDK sends them again). */
  lostAcks: number;
  /** Every this-th invocation of the changes writer fails after its work (its stream batch comes again). */
  writerFailEvery: number;
  /** Share of the stream's batches lost by the change-events function's event source. */
  lostStreamBatches: number;
  /** The consumer reads each connection this often. */
  consumerPeriodSeconds: number;
  /** The consumer stops when this round begins (from 0), for stopMinutes. */
  stopAtRound: number;
  stopMinutes: number;
  /** About this many reads right after a commit. */
  probes: number;
  /** A run stops here if it has not ended. */
  maxHours: number;
  meterLogs: boolean;
  /** DynamoDB Local keeps the tables in files (SystemOptions.dynamodbOnDisk), not in its memory. */
  dynamodbOnDisk: boolean;
  seed: number;
}

/**
 * 1,000 connections × 100 items × 10 rounds: 1,000,000 changes, and beside them one busy connection
 * of 10,000 items that changes 100,000 times (each item once a round). L = 300/s keeps the sync within what the stream's one shard reads (100
 * records four times a second): the records do not pile up in memory.
 */
export const CHANGES_FULL: ChangesScale = {
  connections: 1_000,
  itemsEach: 100,
  busyItems: 10_000,
  rounds: 10,
  limit: 300,
  providerLatencyMs: 50,
  deletes: 0.03,
  sentTwice: 0.02,
  sqsDuplicates: 0.01,
  failEvery: 100,
  lostAcks: 0.001,
  writerFailEvery: 50,
  lostStreamBatches: 0.01,
  consumerPeriodSeconds: 60,
  stopAtRound: 2,
  stopMinutes: 30,
  probes: 1_000,
  maxHours: 12,
  meterLogs: false,
  // A million changes' rows (and the items') would otherwise sit in the server's memory.
  dynamodbOnDisk: true,
  seed: 17,
};

/** What `npm test` runs: 12 connections × 20 items and a busy one of 60 items, 3 rounds (900 changes), every hazard met. */
export const CHANGES_SHORT: ChangesScale = {
  ...CHANGES_FULL,
  connections: 12,
  itemsEach: 20,
  busyItems: 60,
  rounds: 3,
  limit: 50,
  sentTwice: 0.05,
  sqsDuplicates: 0.03,
  failEvery: 4,
  lostAcks: 0.02,
  writerFailEvery: 5,
  lostStreamBatches: 0.2,
  consumerPeriodSeconds: 30,
  stopAtRound: 1,
  stopMinutes: 2,
  probes: 20,
  maxHours: 3,
  dynamodbOnDisk: false,
  seed: 5,
};

/** The changes a run makes: every item of every connection (the busy one's too) once a round. */
export function changesExpected(scale: Pick<ChangesScale, 'connections' | 'itemsEach' | 'busyItems' | 'rounds'>): number {
  return (scale.connections * scale.itemsEach + scale.busyItems) * scale.rounds;
}
