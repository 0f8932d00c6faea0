/** The reconciliation scenario's scales: full (what `npm run sim -- reconcile` runs) and short (`npm test`). */
import { systemConfig } from '../system/config.js';

export interface ReconcileScale {
  ids: number;
  /** The provider's limit L, requests a second. */
  limit: number;
  /** Tell the system L (providerRequestsPerSecond); otherwise the pace has to find it. */
  knownLimit: boolean;
  freshnessHours: number;
  /**
   * Sync invocations at once on each queue (the context key syncMaxConcurrency, the maximum
   * concurrency of both event sources); undefined: the deployed one.
   */
  syncMaxConcurrency?: number;
  /** RECONCILE_HIGH_WATER; undefined: the function's default (the deployed value). */
  highWater?: number;
  /** The reconciler's projection warm-up; undefined: the function's default (10 min). */
  projectionWarmupMs?: number;
  usersPerSecond: number;
  /** Share of the items that change at the provider during the pass. */
  changedShare: number;
  /** Users' baseline before the reconciler's schedule starts, minutes. */
  idleMinutes: number;
  providerLatencyMs: number;
  /** Gives up this long after the first tick when the pass has not been checked through. */
  maxPassHours: number;
  /** The real Powertools logger and metrics writing to byte counters (log ingestion in the cost). */
  meterLogs: boolean;
  seed: number;
}


/** 1,000,000 ids, L = 200/s told to the system, everything else as deployed (freshnessHours 24). */
export const RECONCILE_FULL: ReconcileScale = {
  ids: 1_000_000,
  limit: 200,
  knownLimit: true,
  freshnessHours: systemConfig().freshnessHours,
  usersPerSecond: 1,
  changedShare: 0.01,
  idleMinutes: 10,
  providerLatencyMs: 50,
  maxPassHours: 6,
  meterLogs: true,
  seed: 11,
};

/**
 * What `npm test` runs: 2,400 ids at L = 50/s known (a pass of about a minute, over two ticks), so the
 * high-water mark (600: what the sweep takes in 15 s) and the projection's warm-up (20 s) are scaled
 * down with it; the users' baseline is one minute; everything else as in full. At this L the pace's
 * share of the cost per id is larger than at full scale (its draws are smaller): the cost goal is
 * judged at full scale.
 */
export const RECONCILE_SHORT: ReconcileScale = {
  ...RECONCILE_FULL,
  ids: 2_400,
  limit: 50,
  highWater: 600,
  projectionWarmupMs: 20_000,
  idleMinutes: 1,
  maxPassHours: 1,
  meterLogs: false,
  seed: 5,
};

