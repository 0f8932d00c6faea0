/**
 * What every function is deployed with, as plain values: memory, time-out and environment, the
 * queues' numbers, the event sources', the schedules' and the client API stage's throttling. The
 * stacks build their resources from it (infra/), and so does the local system (dev/system), so
 * `npm start`, the bench, the soak and the simulations run what `cdk deploy` creates, with no
 * number typed twice.
 *
 * No aws-cdk-lib import: the development harness loads it without the CDK. The resource names are
 * whatever the caller has: CloudFormation tokens in the stacks, local names in dev/system.
 */
import { CHANGES_WRITER_TIMEOUT_SECONDS } from '../functions/changes-writer/limits.js';
import { DEFAULTS, ENV } from '../functions/shared/config.js';
import { eraseSettleSeconds } from '../functions/shared/connections/erase.js';
import { refresherRunMinutes } from '../functions/shared/connections/refresh-schedule.js';
import { MAX_RECEIVE_COUNT } from '../functions/shared/sync-queue.js';
import type { ContentSyncConfig } from './context.js';

/** Where the stateful resources are, as each function's environment names them. */
export interface ResourceNames {
  readonly itemsTableName: string;
  readonly itemsBucketName: string;
  readonly controlTableName: string;
  /** The changes table: each connection's changes feed (infra/storage/changes-table.ts). */
  readonly changesTableName: string;
  readonly deadLetterQueueUrl: string;
  readonly reconcileQueueUrl: string;
  /** The connections table: every connection's credentials and tokens (docs/connections.md). */
  readonly connectionsTableName: string;
  /** The change-event bus (its ARN when deployed). */
  readonly eventBusName: string;
  /** The connections key (its ARN): every token is sealed under it (docs/connections.md). */
  readonly connectionsKeyArn: string;
  /** The sync queue: the users' lane the client API sends ids to. */
  readonly syncQueueUrl: string;
  /** The erase queue: one message per connection to erase (infra/connection-eraser). */
  readonly eraseQueueUrl: string;
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
export const CHANGES_WRITER_MEMORY_MB = 256;
export { CHANGES_WRITER_TIMEOUT_SECONDS };
export const CLIENT_API_MEMORY_MB = 256;
/**
 * A request is a few reads and writes of one connection (a KMS call when it puts credentials, up to
 * 100 SQS batches when it sends 1,000 ids): 10 s is ample, and well inside API Gateway's 30 s
 * integration limit, so a request never outlives its answer.
 */
export const CLIENT_API_TIMEOUT_SECONDS = 10;
export const ERASER_MEMORY_MB = 256;
/**
 * One run erases pages of rows and objects until its time is nearly out, then sends itself the rest
 * (ERASE_QUEUE_URL): a longer run only means fewer messages.
 */
export const ERASER_TIMEOUT_SECONDS = 300;

/**
 * The token refresher: refreshes the connections' access tokens in the connections table, each in
 * use about every tokenRefreshMinutes, from runs 5 minutes apart (scheduleDeployment), every getToken
 * paced by the token endpoint's pace, whose rows are in the control table (REFRESH_CONCURRENCY,
 * IDLE_REFRESH_HOURS and TOKEN_REQUESTS_PER_SECOND keep the function's defaults).
 */
export function refresherDeployment(
  config: ContentSyncConfig,
  names: Pick<ResourceNames, 'connectionsTableName' | 'connectionsKeyArn' | 'controlTableName'>,
): FunctionDeployment {
  return {
    memoryMb: REFRESHER_MEMORY_MB,
    timeoutSeconds: REFRESHER_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: {
      [ENV.baseUrl]: config.baseUrl,
      [ENV.connectionsTableName]: names.connectionsTableName,
      [ENV.connectionsKeyArn]: names.connectionsKeyArn,
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
      [ENV.connectionsKeyArn]: names.connectionsKeyArn,
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

/**
 * The changes writer: numbers the items table's stream into each connection's changes feed, each
 * change to expire changesRetentionDays after its write; it reads the connections table (a
 * connection being erased has nothing more numbered).
 */
export function changesWriterDeployment(
  config: Pick<ContentSyncConfig, 'tracing' | 'changesRetentionDays'>,
  names: Pick<ResourceNames, 'changesTableName' | 'connectionsTableName'>,
): FunctionDeployment {
  return {
    memoryMb: CHANGES_WRITER_MEMORY_MB,
    timeoutSeconds: CHANGES_WRITER_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: {
      [ENV.changesTableName]: names.changesTableName,
      [ENV.changesRetentionDays]: String(config.changesRetentionDays),
      [ENV.connectionsTableName]: names.connectionsTableName,
    },
  };
}

/**
 * The client API (docs/client-api.md): the connections (tokens sealed under the connections key),
 * the items it reads, the changes feed (each change carries its own expiry), the reconciler's cursor
 * (each connection's last pass), the users' lane (the sync queue), the background lane (the
 * reconcile queue) and the erase queue. ERASE_SETTLE_SECONDS,
 * the safety wait between a removal and its erase, follows the deployed sync's time-out and its
 * token cache (ACCESS_TOKEN_CACHE_SECONDS keeps the function's default; functions/shared/connections/erase.ts).
 */
export function apiDeployment(
  config: Pick<ContentSyncConfig, 'tracing' | 'freshnessHours' | 'syncTimeoutSeconds'>,
  names: Pick<
    ResourceNames,
    | 'connectionsTableName'
    | 'connectionsKeyArn'
    | 'itemsTableName'
    | 'itemsBucketName'
    | 'controlTableName'
    | 'changesTableName'
    | 'syncQueueUrl'
    | 'reconcileQueueUrl'
    | 'eraseQueueUrl'
  >,
): FunctionDeployment {
  return {
    memoryMb: CLIENT_API_MEMORY_MB,
    timeoutSeconds: CLIENT_API_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: {
      [ENV.connectionsTableName]: names.connectionsTableName,
      [ENV.connectionsKeyArn]: names.connectionsKeyArn,
      [ENV.itemsTableName]: names.itemsTableName,
      [ENV.itemsBucketName]: names.itemsBucketName,
      [ENV.changesTableName]: names.changesTableName,
      [ENV.controlTableName]: names.controlTableName,
      [ENV.syncQueueUrl]: names.syncQueueUrl,
      [ENV.reconcileQueueUrl]: names.reconcileQueueUrl,
      [ENV.eraseQueueUrl]: names.eraseQueueUrl,
      [ENV.freshnessHours]: String(config.freshnessHours),
      [ENV.eraseSettleSeconds]: String(eraseSettleSeconds(config.syncTimeoutSeconds, DEFAULTS.tokenCacheSeconds)),
    },
  };
}

/**
 * The eraser: a connection's rows, objects, changes feed and connection row; the erase queue for the
 * rest of a run cut short.
 */
export function eraserDeployment(
  config: Pick<ContentSyncConfig, 'tracing'>,
  names: Pick<ResourceNames, 'connectionsTableName' | 'itemsTableName' | 'itemsBucketName' | 'changesTableName' | 'eraseQueueUrl'>,
): FunctionDeployment {
  return {
    memoryMb: ERASER_MEMORY_MB,
    timeoutSeconds: ERASER_TIMEOUT_SECONDS,
    tracing: config.tracing,
    environment: {
      [ENV.connectionsTableName]: names.connectionsTableName,
      [ENV.itemsTableName]: names.itemsTableName,
      [ENV.itemsBucketName]: names.itemsBucketName,
      [ENV.changesTableName]: names.changesTableName,
      [ENV.eraseQueueUrl]: names.eraseQueueUrl,
    },
  };
}

/** Every function of one deployment. */
export interface FunctionDeployments {
  readonly refresher: FunctionDeployment;
  readonly sync: FunctionDeployment;
  readonly reconciler: FunctionDeployment | undefined;
  readonly changeEvents: FunctionDeployment;
  readonly changesWriter: FunctionDeployment;
  readonly api: FunctionDeployment;
  readonly eraser: FunctionDeployment;
}

export function functionDeployments(config: ContentSyncConfig, names: ResourceNames): FunctionDeployments {
  return {
    refresher: refresherDeployment(config, names),
    sync: syncDeployment(config, names),
    reconciler: reconcilerDeployment(config, names),
    changeEvents: changeEventsDeployment(config, names),
    changesWriter: changesWriterDeployment(config, names),
    api: apiDeployment(config, names),
    eraser: eraserDeployment(config, names),
  };
}

// ---- the client API's stage -------------------------------------------------------------------------

/**
 * The client API's stage throttling (every route, as the stage's default route settings): a steady
 * rate and a burst, requests a second, for the whole API. A request carries up to 1,000 ids, so
 * 50 a second is 50,000 ids a second offered, far past any provider's pace; the numbers bound the
 * function's concurrency (about 50 × its duration) and keep the application's loops from using the
 * account's API Gateway quota that other APIs share. Over them API Gateway answers 429.
 */
export const API_RATE_LIMIT_PER_SECOND = 50;
export const API_BURST_LIMIT = 100;

export interface ApiStageDeployment {
  readonly rateLimitPerSecond: number;
  readonly burstLimit: number;
}

export function apiStageDeployment(): ApiStageDeployment {
  return { rateLimitPerSecond: API_RATE_LIMIT_PER_SECOND, burstLimit: API_BURST_LIMIT };
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

/**
 * The erase queue and its dead-letter queue: made as a work queue, its visibility 6× the eraser's
 * time-out. A run cut short sends itself a new message, so the receive count counts failures only:
 * after MAX_RECEIVE_COUNT failed runs of one message it goes to the dead-letter queue (an alarm).
 */
export function eraseQueueDeployment(): WorkQueueDeployment {
  return {
    visibilityTimeoutSeconds: ERASER_TIMEOUT_SECONDS * VISIBILITY_FACTOR,
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

/**
 * Erases at once: Lambda's smallest maximum concurrency for an SQS source. One erase is one message
 * (a batch of one); two at a time keep the deletes' load on the items table and bucket small
 * beside the sync's writes, and more waiting erases simply wait their turn.
 */
export const ERASER_MAX_CONCURRENCY = 2;

/** The eraser's event source on the erase queue: one message (one connection) per invocation. */
export function eraseEventSourceDeployment(): SqsEventSourceDeployment {
  return { batchSize: 1, maxBatchingWindowSeconds: undefined, maxConcurrency: ERASER_MAX_CONCURRENCY, reportBatchItemFailures: true };
}

/** Stream records per invocation: Lambda's default for DynamoDB streams (at most ten PutEvents calls). */
export const CHANGE_EVENTS_BATCH_SIZE = 100;
/** Retries of a failing batch (bisected) before its range goes to the failure queue. */
export const CHANGE_EVENTS_RETRY_ATTEMPTS = 10;
/** One batch per shard at a time (infra/change-events/change-events.ts says why). */
export const CHANGE_EVENTS_PARALLELIZATION_FACTOR = 1;

/**
 * The change-events function's event sources: the items table's stream and the connections table's
 * (the account lifecycle events), with the same numbers.
 */
export interface StreamEventSourceDeployment {
  /** Where a new mapping starts: the oldest record the stream holds. */
  readonly startingPosition: 'TRIM_HORIZON';
  readonly batchSize: number;
  readonly parallelizationFactor: number;
  readonly reportBatchItemFailures: true;
  readonly bisectBatchOnError: true;
  /** Retries before the batch's shard and sequence range go to the failure queue; undefined: until its records leave the stream (24 hours). */
  readonly retryAttempts: number | undefined;
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

/**
 * Stream records per invocation of the changes writer: the more of one connection's changes a batch
 * holds, the fewer head moves (one per chunk: functions/shared/changes/sequencer.ts).
 */
export const CHANGES_WRITER_BATCH_SIZE = 1_000;

/**
 * The changes writer's event source: the items table's stream, one batch per shard at a time (a
 * shard's records numbered in order). Retried until the records leave the stream: the writer hands
 * a record back only for a failure that passes (DynamoDB, a head held by a writer that died), never
 * for a record that cannot be read (it counts it and goes on), so a retry is never used up by
 * waiting; records that leave the stream unnumbered go to the on-failure queue, which alarms.
 */
export function changesWriterEventSourceDeployment(): StreamEventSourceDeployment {
  return {
    startingPosition: 'TRIM_HORIZON',
    batchSize: CHANGES_WRITER_BATCH_SIZE,
    parallelizationFactor: 1,
    reportBatchItemFailures: true,
    bisectBatchOnError: true,
    retryAttempts: undefined,
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
