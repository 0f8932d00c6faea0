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
} as const;
