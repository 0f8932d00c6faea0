/**
 * Service and metric names: what the functions publish (namespace ContentSync, dimension `service`,
 * and `stage` in a deployment with a stage) and what the dashboard and alarms read. Product
 * interface, listed in docs/operations.md. No imports, so the CDK app can use them without loading
 * the functions.
 */
export const METRICS_NAMESPACE = 'ContentSync';

/** The dimension every function's metrics carry: the function (Powertools' service name). */
export const SERVICE_DIMENSION = 'service';
/**
 * The second dimension of every function's metrics in a deployment with a stage (the context key
 * `stage`): two stages in one account and region publish apart. Without a stage it is absent, so a
 * deployment without one keeps its metrics, alarms and history as they were.
 */
export const STAGE_DIMENSION = 'stage';

/** The dimensions of `service`'s metrics in the deployment of `stage` (undefined: none). */
export function metricDimensions(service: string, stage: string | undefined): Record<string, string> {
  return stage === undefined ? { [SERVICE_DIMENSION]: service } : { [SERVICE_DIMENSION]: service, [STAGE_DIMENSION]: stage };
}

export const REFRESHER_SERVICE = 'token-refresher';
export const SYNC_SERVICE = 'item-sync';
export const RECONCILER_SERVICE = 'reconciler';

/**
 * Per refresher run (and per on-demand refresh in the item sync: refreshed, rotated, failed,
 * refused). No metric has a connection dimension: 10,000 connections would be 10,000 metrics;
 * per-connection health is in the connections table (`npm run connections -- list`).
 */
export const REFRESHER_METRIC_NAMES = {
  /** Access tokens refreshed. */
  refreshed: 'TokenRefreshed',
  /** Refresh tokens the provider rotated (stored). */
  rotated: 'RefreshTokenRotated',
  /** Refreshes that failed in a way that may pass (5xx, time-out, network); the connection stays active. */
  failed: 'TokenRefreshFailed',
  /** Refreshes the provider refused (401, 400, 403): the connection is now `failing`. */
  refused: 'TokenRefreshRefused',
  /** Connections by status, counted by every scheduled run (the alarm reads `ConnectionsFailing`). */
  active: 'ConnectionsActive',
  paused: 'ConnectionsPaused',
  failing: 'ConnectionsFailing',
  /** 1 when a run found the key that seals the tokens disabled or pending deletion (every refresh waits), else 0: one alarm. */
  keyUnavailable: 'ConnectionsKeyUnavailable',
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
  movedToBackground: 'RecordsMovedToBackground',
  rateLimited: 'ProviderRateLimited',
  // Discovery (docs/discovery.md): zeros when it is off.
  /** Child ids sent to the reconcile queue for checking. */
  childrenDiscovered: 'ChildrenDiscovered',
  /** Entries of folders' lists skipped (malformed, invalid id, the folder itself, duplicates) and lists that are not arrays. */
  childrenSkipped: 'ChildrenSkipped',
  /** Folders whose list of children is shorter than their total. */
  listingsTruncated: 'ListingsTruncated',
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

/** The change-events function: it announces every real change of an items-table row (docs/change-events.md). */
export const CHANGE_EVENTS_SERVICE = 'change-events';

/** Per stream batch, zeros included. */
export const CHANGE_EVENTS_METRIC_NAMES = {
  /** Events EventBridge accepted. */
  published: 'ChangeEventsPublished',
  /** Events still refused (or not sent because a call kept failing) after the bounded re-tries; their records are retried. */
  failed: 'ChangeEventsFailed',
  /** Stream records that announce nothing: a write that changed no revision or deleted flag, or a REMOVE. */
  ignored: 'StreamRecordsIgnored',
  /** Stream records handed back to the event source (the first one not announced and every one after it). */
  retried: 'StreamRecordsRetried',
} as const;

/** The changes writer (functions/changes-writer): it numbers the items table's stream into each connection's changes feed (docs/changes.md). */
export const CHANGES_WRITER_SERVICE = 'changes-writer';

/** Per stream batch, zeros included. */
export const CHANGES_WRITER_METRIC_NAMES = {
  /** Changes numbered into a connection's feed. */
  numbered: 'ChangesNumbered',
  /** Changes found numbered already (a batch delivered again). */
  already: 'ChangesAlreadyNumbered',
  /** Records of a connection whose erase runs or ran: no change numbered. */
  erased: 'ChangesOfErasedSkipped',
  /** Records not numbered for good: not readable as a change (a row the sync did not write), or a connection's log no retry mends; an error logged; the alarm reads it. */
  unreadable: 'ChangesUnreadable',
  /** Records handed back to the event source (a connection's first one not numbered; Lambda retries from the lowest). */
  retried: 'ChangeRecordsRetried',
} as const;

/** Per reconciler tick (functions/reconciler/app.ts). */
export const RECONCILER_METRIC_NAMES = {
  /** Ids sent to the reconcile queue by the tick. */
  enqueued: 'IdsEnqueued',
  /** The current pass's number (1 for the first pass). */
  pass: 'PassNumber',
  /** Seconds since the current pass started. */
  passAge: 'PassAgeSeconds',
  /** Projected pass length W = ids known ÷ achieved rate, seconds (the last pass's length once it ended). */
  projectedPass: 'ProjectedPassSeconds',
  /** The ids W counts: the larger of the table's item count and the ids sent this pass. */
  idsKnown: 'IdsKnown',
  /** Length of a pass, seconds: published once, by the tick that ends it. */
  passLength: 'PassLengthSeconds',
} as const;

/** The client API (functions/client-api): its log lines' service. */
export const API_SERVICE = 'client-api';
/** The eraser (functions/connection-eraser): its log lines' service. */
export const ERASER_SERVICE = 'connection-eraser';
