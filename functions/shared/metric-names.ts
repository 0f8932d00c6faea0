/**
 * Service and metric names: what the functions publish (namespace ContentSync, dimension `service`)
 * and what the dashboard and alarms read. Product interface, listed in the README. No imports, so
 * the CDK app can use them without loading the functions.
 */
export const METRICS_NAMESPACE = 'ContentSync';

export const REFRESHER_SERVICE = 'token-refresher';
export const SYNC_SERVICE = 'item-sync';

export const REFRESHER_METRIC_NAMES = {
  refreshed: 'TokenRefreshed',
  rotated: 'RefreshTokenRotated',
  failed: 'TokenRefreshFailed',
} as const;

/** Per sync batch, one per counter of the batch report. */
export const SYNC_METRIC_NAMES = {
  fetched: 'ItemsFetched',
  created: 'ItemsCreated',
  updated: 'ItemsUpdated',
  unchanged: 'ItemsUnchanged',
  deleted: 'ItemsDeleted',
  retried: 'RecordsRetried',
  deadLettered: 'RecordsDeadLettered',
  postponed: 'RecordsPostponed',
  rateLimited: 'ProviderRateLimited',
} as const;

/** The provider pace, as one sync container sees it at the end of each batch. */
export const PACE_METRIC_NAMES = {
  /** The shared pace's rate, requests a second. */
  rate: 'ProviderPace',
  /** 1 while the breaker is open, else 0. */
  breakerOpen: 'BreakerOpen',
  /** Seconds the breaker has been open (0 when closed): the alarm fires at 30 minutes. */
  breakerOpenSeconds: 'BreakerOpenSeconds',
  /** 1 while this container runs on its local fallback pace (the control table cannot be used). */
  fallback: 'PaceFallback',
} as const;
