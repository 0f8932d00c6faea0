/**
 * What every function is deployed with, as plain values: memory, time-out and environment, the
 * queues' numbers, the event sources' and the schedules'. The stacks build their resources from it
 * (infra/), and so does the local system (dev/system), so `npm start`, the bench, the soak and the
 * simulations run what `cdk deploy` creates, with no number typed twice.
 *
 * No aws-cdk-lib import: the development harness loads it without the CDK. The resource names are
 * whatever the caller has: CloudFormation tokens in the stacks, local names in dev/system.
 */
import { ENV } from '../functions/shared/config.js';
import { refresherRunMinutes } from '../functions/shared/connections/refresh-schedule.js';
import { MAX_RECEIVE_COUNT } from '../functions/shared/sync-queue.js';
import type { ContentSyncConfig } from './context.js';

/** Where the stateful resources are, as each function's environment names them. */
export interface ResourceNames {
  readonly itemsTableName: string;
  readonly itemsBucketName: string;
  readonly controlTableName: string;
  readonly deadLetterQueueUrl: string;
  readonly reconcileQueueUrl: string;
  /** The connections table: every connection's credentials and tokens (docs/connections.md). */
  readonly connectionsTableName: string;
  /** The change-event bus (its ARN when deployed). */
  readonly eventBusName: string;
}

/** One function as deployed. */
export interface FunctionDeployment {
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  /** X-Ray active tracing (the context key `tracing`, one for every function). */
  readonly tracing: boolean;
  /** The contract variables (ContentSyncFunction adds POWERTOOLS_*, NODE_OPTIONS and, with a stage, CONTENT_SYNC_STAGE). */
  readonly environment: Readonly<Record<string, string>>;
}

export const REFRESHER_MEMORY_MB = 256;
/**
 * A run starts no refresh with less time left than one provider call's time-out plus 10 s
 * (functions/token-refresher/app.ts): at the longest PROVIDER_TIMEOUT_MS (120 s) that is 130 s.
 * With the default 10 s, a run refreshes for 280 s: 2,800 getToken at the token pace's 10 a
 * second, where a run every 5 minutes has about 1,700 to do for 10,000 connections in use
 * (docs/connections.md, "Refresh at scale"). As long as the interval between two runs: they do not overlap.
 */
export const REFRESHER_TIMEOUT_SECONDS = 300;
/**
 * CPU comes with memory (one vCPU at 1,769 MB): at 512 MB one invocation sends about 4,350 to 4,700
 * ids/s, nearly four times what 100M ids a day need (docs/measurements.md, "One reconciler invocation").
 */
export const RECONCILER_MEMORY_MB = 512;
/** A tick runs up to 50 s (functions/reconciler/app.ts, DEFAULT_TUNING) of a schedule interval of one minute. */
export const RECONCILER_TIMEOUT_SECONDS = 60;
export const CHANGE_EVENTS_MEMORY_MB = 256;
export const CHANGE_EVENTS_TIMEOUT_SECONDS = 30;

/**
 * The token refresher: refreshes the connections' access tokens in the connections table, each in
 * use about every tokenRefreshMinutes, from runs 5 minutes apart (scheduleDeployment), every getToken
 * paced by the token endpoint's pace, whose rows are in the control table (REFRESH_CONCURRENCY,
 * IDLE_REFRESH_HOURS and TOKEN_REQUESTS_PER_SECOND keep the function's defaults).
 */
export function refresherDeployment(config: ContentSyncConfig, names: Pick<ResourceNames, 'connectionsTableName' | 'controlTableName'>): FunctionDeployment {
  return {
    memoryMb: REFRESHER_MEMORY_MB,
    timeoutSeconds: REFRESHER_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: {
      [ENV.baseUrl]: config.baseUrl,
      [ENV.connectionsTableName]: names.connectionsTableName,
      [ENV.controlTableName]: names.controlTableName,
      [ENV.tokenRefreshMinutes]: String(config.tokenRefreshMinutes),
    },
  };
}

/**
 * The item sync: its memory is the context key `syncMemorySize`; its time-out follows the batch
 * size (infra/context.ts, syncTimeoutSeconds).
 */
export function syncDeployment(config: ContentSyncConfig, names: ResourceNames): FunctionDeployment {
  return {
    memoryMb: config.syncMemorySize,
    timeoutSeconds: config.syncTimeoutSeconds,
    tracing: config.tracing,
    environment: {
      [ENV.baseUrl]: config.baseUrl,
      // It refreshes a connection's token on demand (CONNECTION_WAIT_SECONDS keeps the function's default).
      [ENV.connectionsTableName]: names.connectionsTableName,
      [ENV.tokenRefreshMinutes]: String(config.tokenRefreshMinutes),
      [ENV.paceScope]: config.paceScope,
      [ENV.itemsTableName]: names.itemsTableName,
      [ENV.itemsBucketName]: names.itemsBucketName,
      [ENV.revisionField]: config.revisionField,
      [ENV.deadLetterQueueUrl]: names.deadLetterQueueUrl,
      [ENV.controlTableName]: names.controlTableName,
      [ENV.usersReservedPercent]: String(config.usersReservedPercent),
      // Only when the operator knows the provider's limit; PACE_FALLBACK_REQUESTS_PER_SECOND and
      // SYNC_POSTPONE_MAX_SECONDS keep the function's defaults.
      ...(config.providerRequestsPerSecond === undefined ? {} : { [ENV.providerRequestsPerSecond]: String(config.providerRequestsPerSecond) }),
      // The background lane: discovery's children, and a connection's backlog in a users' batch.
      // (The reconcile queue exists in every deployment, whatever freshnessHours is; the local
      // system without it passes an empty URL, which leaves the variable unset.)
      ...(names.reconcileQueueUrl !== '' ? { [ENV.reconcileQueueUrl]: names.reconcileQueueUrl } : {}),
      ...discoveryEnvironment(config),
    },
  };
}

/** Discovery's variables, only when it is on (context `childrenPath`): the dot paths (its children go to the background lane). */
function discoveryEnvironment(config: ContentSyncConfig): Record<string, string> {
  const { discovery } = config;
  if (discovery === undefined) return {};
  return {
    [ENV.childrenPath]: discovery.childrenPath,
    [ENV.childIdPath]: discovery.childIdPath,
    ...(discovery.childRevisionPath !== undefined ? { [ENV.childRevisionPath]: discovery.childRevisionPath } : {}),
    ...(discovery.childrenTotalPath !== undefined ? { [ENV.childrenTotalPath]: discovery.childrenTotalPath } : {}),
  };
}

/** The reconciler; none when freshnessHours is 0. */
export function reconcilerDeployment(
  config: ContentSyncConfig,
  names: Pick<ResourceNames, 'itemsTableName' | 'controlTableName' | 'reconcileQueueUrl'>,
): FunctionDeployment | undefined {
  if (config.freshnessHours === 0) return undefined;
  return {
    memoryMb: RECONCILER_MEMORY_MB,
    timeoutSeconds: RECONCILER_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: {
      [ENV.itemsTableName]: names.itemsTableName,
      [ENV.controlTableName]: names.controlTableName,
      [ENV.reconcileQueueUrl]: names.reconcileQueueUrl,
      [ENV.freshnessHours]: String(config.freshnessHours),
      // RECONCILE_SEGMENTS and RECONCILE_HIGH_WATER keep the function's defaults.
    },
  };
}

/** The change-events function: it also keeps each connection's `idsKnown` and `lastWriteAt`. */
export function changeEventsDeployment(
  config: Pick<ContentSyncConfig, 'tracing'>,
  names: Pick<ResourceNames, 'eventBusName' | 'connectionsTableName'>,
): FunctionDeployment {
  return {
    memoryMb: CHANGE_EVENTS_MEMORY_MB,
    timeoutSeconds: CHANGE_EVENTS_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: { [ENV.eventBusName]: names.eventBusName, [ENV.connectionsTableName]: names.connectionsTableName },
  };
}

/** Every function of one deployment. */
export interface FunctionDeployments {
  readonly refresher: FunctionDeployment;
  readonly sync: FunctionDeployment;
  readonly reconciler: FunctionDeployment | undefined;
  readonly changeEvents: FunctionDeployment;
}

export function functionDeployments(config: ContentSyncConfig, names: ResourceNames): FunctionDeployments {
  return {
    refresher: refresherDeployment(config, names),
    sync: syncDeployment(config, names),
    reconciler: reconcilerDeployment(config, names),
    changeEvents: changeEventsDeployment(config, names),
  };
}

// ---- queues ----------------------------------------------------------------------------------------

/** SQS's maximum; a dead-letter (or failure) queue is where an operator looks after an incident. */
export const DEAD_LETTER_RETENTION_DAYS = 14;
/** SQS's default, stated: ids older than this are dropped by SQS, which the age alarm reports long before. */
export const QUEUE_RETENTION_DAYS = 4;
/** AWS's guidance for Lambda event sources: visibility time-out at least 6× the function time-out. */
export const VISIBILITY_FACTOR = 6;

/** A work queue (the sync queue, the reconcile queue) and its dead-letter queue. */
export interface WorkQueueDeployment {
  readonly visibilityTimeoutSeconds: number;
  readonly retentionDays: number;
  /** Receives before SQS moves a message to the dead-letter queue. */
  readonly maxReceiveCount: number;
  readonly deadLetterRetentionDays: number;
}

export function workQueueDeployment(config: ContentSyncConfig): WorkQueueDeployment {
  return {
    visibilityTimeoutSeconds: config.syncTimeoutSeconds * VISIBILITY_FACTOR,
    retentionDays: QUEUE_RETENTION_DAYS,
    maxReceiveCount: MAX_RECEIVE_COUNT,
    deadLetterRetentionDays: DEAD_LETTER_RETENTION_DAYS,
  };
}

// ---- event sources and schedules -------------------------------------------------------------------

/** The item sync's event source on a work queue (the sync queue and the reconcile queue alike). */
export interface SqsEventSourceDeployment {
  readonly batchSize: number;
  /** SQS requires a batching window for batches over 10: the shortest, BATCHING_WINDOW_SECONDS. */
  readonly maxBatchingWindowSeconds: number | undefined;
  readonly maxConcurrency: number;
  readonly reportBatchItemFailures: true;
}

/**
 * The batching window of batches over 10 records: SQS's shortest. An id sent to a quiet queue waits
 * up to this long for others to share its invocation; under load the batch fills at once.
 */
export const BATCHING_WINDOW_SECONDS = 1;

export function syncEventSourceDeployment(config: Pick<ContentSyncConfig, 'syncBatchSize' | 'syncMaxConcurrency'>): SqsEventSourceDeployment {
  return {
    batchSize: config.syncBatchSize,
    maxBatchingWindowSeconds: config.syncBatchSize > 10 ? BATCHING_WINDOW_SECONDS : undefined,
    maxConcurrency: config.syncMaxConcurrency,
    reportBatchItemFailures: true,
  };
}

/** Stream records per invocation: Lambda's default for DynamoDB streams (at most ten PutEvents calls). */
export const CHANGE_EVENTS_BATCH_SIZE = 100;
/** Retries of a failing batch (bisected) before its range goes to the failure queue. */
export const CHANGE_EVENTS_RETRY_ATTEMPTS = 10;
/** One batch per shard at a time (infra/change-events/change-events.ts says why). */
export const CHANGE_EVENTS_PARALLELIZATION_FACTOR = 1;

/** The change-events function's event source on the items table's stream. */
export interface StreamEventSourceDeployment {
  /** Where a new mapping starts: the oldest record the stream holds. */
  readonly startingPosition: 'TRIM_HORIZON';
  readonly batchSize: number;
  readonly parallelizationFactor: number;
  readonly reportBatchItemFailures: true;
  readonly bisectBatchOnError: true;
  /** Retries before the batch's shard and sequence range go to the failure queue. */
  readonly retryAttempts: number;
}

export function changeEventSourceDeployment(): StreamEventSourceDeployment {
  return {
    startingPosition: 'TRIM_HORIZON',
    batchSize: CHANGE_EVENTS_BATCH_SIZE,
    parallelizationFactor: CHANGE_EVENTS_PARALLELIZATION_FACTOR,
    reportBatchItemFailures: true,
    bisectBatchOnError: true,
    retryAttempts: CHANGE_EVENTS_RETRY_ATTEMPTS,
  };
}

/** Invocations that share a pass's segments (one schedule each). */
export const RECONCILER_WORKERS = 1;
export const RECONCILE_SCHEDULE_MINUTES = 1;

/**
 * The schedules: the refresher every 5 minutes, or every tokenRefreshMinutes when shorter
 * (functions/shared/connections/refresh-schedule.ts: the refreshes spread over the day's runs);
 * the reconciler (when there is one) every minute.
 */
export interface ScheduleDeployment {
  readonly refresherEveryMinutes: number;
  /** Undefined when freshnessHours is 0 (no reconciler). */
  readonly reconciler: { readonly everyMinutes: number; readonly workers: number } | undefined;
}

export function scheduleDeployment(config: ContentSyncConfig): ScheduleDeployment {
  return {
    refresherEveryMinutes: refresherRunMinutes(config.tokenRefreshMinutes),
    reconciler: config.freshnessHours === 0 ? undefined : { everyMinutes: RECONCILE_SCHEDULE_MINUTES, workers: RECONCILER_WORKERS },
  };
}

/** How EventBridge Scheduler delivers one schedule's invocations. */
export interface ScheduleDelivery {
  /** An invocation not delivered within this is dropped: the next run supersedes it. */
  readonly maxEventAgeMinutes: number;
  readonly retryAttempts: number;
}

/** The schedules' delivery: the refresher's retried, the reconciler's ticks never (they would overlap). */
export interface ScheduleDeliveryDeployment {
  readonly refresher: ScheduleDelivery;
  readonly reconciler: ScheduleDelivery;
}

export function scheduleDeliveryDeployment(config: ContentSyncConfig): ScheduleDeliveryDeployment {
  return {
    refresher: { maxEventAgeMinutes: Math.max(1, refresherRunMinutes(config.tokenRefreshMinutes)), retryAttempts: 2 },
    reconciler: { maxEventAgeMinutes: RECONCILE_SCHEDULE_MINUTES, retryAttempts: 0 },
  };
}
