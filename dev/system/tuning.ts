/**
 * Tuning: the variables the functions read (functions/shared/config.ts) that the stacks leave at
 * the functions' defaults, set by a scenario on top of the deployed environment. The one place a
 * local environment departs from the deployed one, and each departure is named by its variable.
 */
import { ENV } from '../../functions/shared/config.js';

/** The variables a scenario may tune (every other variable is exactly as deployed). */
export const TUNABLE = {
  providerTimeoutMs: ENV.timeoutMs,
  maxResponseBytes: ENV.maxResponseBytes,
  fetchConcurrency: ENV.fetchConcurrency,
  tokenCacheSeconds: ENV.tokenCacheSeconds,
  fetchAttempts: ENV.fetchAttempts,
  rateLimitMinDelaySeconds: ENV.rateLimitMinDelaySeconds,
  paceFallbackRate: ENV.paceFallbackRate,
  postponeMaxSeconds: ENV.postponeMaxSeconds,
  connectionWaitSeconds: ENV.connectionWaitSeconds,
  refreshConcurrency: ENV.refreshConcurrency,
  idleRefreshHours: ENV.idleRefreshHours,
  reconcileSegments: ENV.reconcileSegments,
  reconcileHighWater: ENV.reconcileHighWater,
  /**
   * The reconciler's FRESHNESS_HOURS only (the stacks set it from freshnessHours, where 0 means no
   * reconciler at all): 0 here runs each pass right after the last (the local run).
   */
  reconcilerFreshnessHours: ENV.freshnessHours,
  /**
   * The client API's safety wait before an erase (the stack sets it from the sync's time-out): a
   * local run that erases once its sync is idle waits less.
   */
  eraseSettleSeconds: ENV.eraseSettleSeconds,
} as const;

export type Tuning = Partial<Record<keyof typeof TUNABLE, number>>;

/** `environment` with the tuning's variables set, for the variables the function takes (the others left out). */
export function tuned(environment: Readonly<Record<string, string>>, tuning: Tuning, reads: ReadonlySet<string>): Record<string, string> {
  const out: Record<string, string> = { ...environment };
  for (const [key, value] of Object.entries(tuning) as Array<[keyof typeof TUNABLE, number | undefined]>) {
    const name = TUNABLE[key];
    if (value !== undefined && reads.has(name)) out[name] = String(value);
  }
  return out;
}
