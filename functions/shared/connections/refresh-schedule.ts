/**
 * How often the token refresher runs (docs/connections.md, "Refresh at scale"): every 5 minutes, or
 * every `tokenRefreshMinutes` when that is shorter. Each run renews the tokens in use that have
 * become due since the run before, so a day's refreshes are spread over 288 runs rather than 48
 * (10,000 connections in use at `tokenRefreshMinutes` 30: about 1,700 a run, not 10,000). The
 * stacks' schedule (infra/deployment.ts) and the refresher's run (functions/token-refresher/run.ts)
 * both take it from here. No imports: the CDK app loads it.
 */

/** The longest interval between two refresher runs, in minutes. */
export const REFRESH_RUN_MINUTES = 5;

/** Minutes between two token refresher runs for `tokenRefreshMinutes`. */
export function refresherRunMinutes(tokenRefreshMinutes: number): number {
  return Math.min(tokenRefreshMinutes, REFRESH_RUN_MINUTES);
}
