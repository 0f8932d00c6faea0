/**
 * The change-events function's metric beside CHANGE_EVENTS_METRIC_NAMES (functions/shared/metric-names.ts):
 * published with them, per stream batch, zeros included, with the same dimensions (`service`, and
 * `stage` in a deployment with one); never a connection dimension. No imports, so the CDK app can
 * use it without loading the function.
 */
export const LIFECYCLE_METRIC_NAMES = {
  /** Of ChangeEventsPublished, the account lifecycle events (ConnectionAdded, ConnectionFailing, ...). */
  lifecycle: 'LifecycleEventsPublished',
} as const;
