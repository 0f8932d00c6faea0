/**
 * Run-time configuration: read and validated once, when a function's module loads (the client
 * API's and the eraser's: client-config.ts, from the same names and rules). Every problem
 * throws a ConfigError naming the environment variable (the rules: env-values.ts). Required values
 * have no default; the few tunables that do are documented in docs/configuration.md.
 */
import { normalizeBaseUrl } from './base-url.js';
import { integer, kmsKeyArn, optionalInteger, queueUrl, required, requiredInteger, type Env } from './env-values.js';
import { ConfigError } from './errors.js';
import { stageProblem } from './stage.js';

// The rules every variable is read by (./env-values.ts), where they have always been imported from.
export { integer, KMS_KEY_ARN_PATTERN, kmsKeyArn, optionalInteger, queueUrl, required, requiredInteger, type Env } from './env-values.js';

export interface ProviderConfig {
  /** Base address without trailing slash, e.g. `https://host/api/v2`. */
  baseUrl: string;
  /** Time-out of one provider request, in milliseconds. */
  timeoutMs: number;
  /** Largest response body read from the provider, in bytes. */
  maxResponseBytes: number;
}

/** Where the connections are (docs/connections.md) and how often their access tokens are refreshed. */
export interface ConnectionsConfig {
  /** The connections table: one row per connection, tokens included (encrypted with the stack's key). */
  connectionsTableName: string;
  /** The operator's KMS key that seals every token (CONNECTIONS_KEY_ARN: functions/shared/connections/sealing.ts). */
  connectionsKeyArn: string;
  /**
   * The refresh interval, in minutes (context `tokenRefreshMinutes`): an access token older than
   * this is refreshed before it is used, and a connection in use is refreshed by the refresher's
   * run before its token reaches this age.
   */
  tokenRefreshMinutes: number;
  /**
   * The token endpoint's pace (docs/connections.md, "The token pace"): its starting rate and its
   * ceiling, getToken calls a second for one client id across every container.
   */
  tokenRequestsPerSecond: number;
}

/** What every function's metrics carry beside `service` (functions/shared/observability.ts). */
export interface MetricsConfig {
  /**
   * The deployment's stage (CONTENT_SYNC_STAGE, the context key `stage`): every metric carries the
   * dimension `stage` too. Undefined in a deployment without a stage: `service` alone.
   */
  stage?: string | undefined;
}

export interface RefresherConfig extends ConnectionsConfig, MetricsConfig {
  provider: ProviderConfig;
  /** The control table: the token endpoint's pace rows (`provider-pace#token#<client id>`). */
  controlTableName: string;
  /** Connections refreshed at once by one run. */
  refreshConcurrency: number;
  /** An idle connection is refreshed when its token is this old (hours): its refresh token is kept alive. */
  idleRefreshHours: number;
}

/** The provider pace's scope (context `paceScope`): one pace per client id, or one per connection. */
export type PaceScope = 'client' | 'connection';
export const PACE_SCOPES: readonly PaceScope[] = ['client', 'connection'];

/** The functions' log level (context `logLevel`, POWERTOOLS_LOG_LEVEL): what each level prints is in docs/operations.md. */
export type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
export const LOG_LEVELS: readonly LogLevel[] = ['DEBUG', 'INFO', 'WARN', 'ERROR'];

/** `raw` as a log level (any case), or undefined when it is none. */
export function parseLogLevel(raw: string): LogLevel | undefined {
  const upper = raw.trim().toUpperCase();
  return (LOG_LEVELS as readonly string[]).includes(upper) ? (upper as LogLevel) : undefined;
}

/**
 * The changes table (docs/changes.md): each connection's changes feed, written by the changes
 * writer from the items table's stream, read by the client API (the eraser reads
 * CHANGES_TABLE_NAME alone).
 */
export interface ChangesConfig {
  changesTableName: string;
  /** Days a change stays readable (the context key `changesRetentionDays`): a change row expires after them. */
  changesRetentionDays: number;
}

/** CHANGES_RETENTION_DAYS's range, and the context key `changesRetentionDays`'s (infra/context.ts). */
export const CHANGES_RETENTION_DAYS_RANGE = { min: 1, max: 3650 } as const;

export interface SyncConfig extends ConnectionsConfig, MetricsConfig {
  provider: ProviderConfig;
  /**
   * The log level (POWERTOOLS_LOG_LEVEL, default INFO). Above DEBUG, an invocation's DEBUG lines
   * (`record done`) are kept in a buffer and printed only when it logs an error (observability.ts).
   */
  logLevel: LogLevel;
  /** One provider pace per client id (`client`) or per connection (`connection`). */
  paceScope: PaceScope;
  /** How long the messages of a paused or failing connection wait before they are looked at again, in seconds. */
  connectionWaitSeconds: number;
  itemsTableName: string;
  /** The items bucket: where an item too large for a row is stored whole (the row's `itemObject` points to it). */
  itemsBucketName: string;
  /** Dot path of the revision inside an item, split into its segments. */
  revisionField: string;
  deadLetterQueueUrl: string;
  /** Most provider requests in flight at once within one invocation. */
  fetchConcurrency: number;
  /** How long a container reuses the access token it read, in seconds. */
  tokenCacheSeconds: number;
  /** Attempts per item for transient provider failures (network, time-out, 408, 5xx) within one invocation. */
  fetchAttempts: number;
  /** Shortest delay, in seconds, before a rate-limited (429) record is delivered again. */
  rateLimitMinDelaySeconds: number;
  /** The control table: the provider pace's shared state. */
  controlTableName: string;
  /** The operator's known provider limit (requests a second): ceiling and starting rate of the pace. */
  providerRequestsPerSecond: number | undefined;
  /** Requests a second of one container while the control table cannot be used. */
  paceFallbackRate: number;
  /** Longest delay, in seconds, of the postponement schedule during an outage. */
  postponeMaxSeconds: number;
  /**
   * Percent of the provider pace reserved for users' ids (0–90): the reconciliation sweep never
   * takes more than the rest; users' ids may use all of it.
   */
  usersReservedPercent: number;
  /**
   * The S3 endpoint the SDK's standard configuration sets (AWS_ENDPOINT_URL_S3, else
   * AWS_ENDPOINT_URL), when one is set: the items bucket is then reached there, path-style.
   */
  s3Endpoint: ConfiguredEndpoint | undefined;
  /**
   * Discovery (docs/discovery.md): where a folder item lists its children, and the queue the
   * children are sent to for checking. Undefined when CHILDREN_PATH is not set (discovery off).
   */
  discovery: DiscoveryConfig | undefined;
  /**
   * The background lane (RECONCILE_QUEUE_URL, optional here: the stacks always deploy the reconcile
   * queue and set it): where a users' batch sends a connection's backlog. Unset: a backlog is
   * synced where it is.
   */
  backgroundQueueUrl?: string;
}

/** Where a folder item lists its children (context `childrenPath` and the keys beside it), and where they go. */
export interface DiscoveryConfig {
  /** Dot path of the array of a folder's children inside a folder item. */
  childrenPath: string;
  /** Dot path of a child's id inside one entry of that array. */
  childIdPath: string;
  /** Dot path of a child's revision inside one entry, when the entries carry one. */
  childRevisionPath?: string;
  /** Dot path in a folder item of the full number of its children, when the provider gives it. */
  childrenTotalPath?: string;
  /** The reconcile queue: children are sent there in the background lane. */
  queueUrl: string;
}

/** An endpoint set by one of the SDK's standard `AWS_ENDPOINT_URL*` variables. */
export interface ConfiguredEndpoint {
  url: string;
  /** The variable that set it (named in the errors of a request that cannot reach it). */
  variable: string;
}

/** The reconciler's configuration (functions/reconciler). */
export interface ReconcilerConfig extends MetricsConfig {
  itemsTableName: string;
  /** The control table: the reconciler's cursor row (`reconcile-cursor`). */
  controlTableName: string;
  /** Where the reconciler sends `{"connection": "<connection>", "id": "<id>"}` messages for the item sync. */
  reconcileQueueUrl: string;
  /**
   * Target length of a pass, in hours: a pass that ends sooner is followed by the next one only
   * this long after it started. 0: the next pass starts as soon as one ends.
   */
  freshnessHours: number;
  /** Parallel Scan segments (TotalSegments) of a new pass. */
  segments: number;
  /** The reconcile queue's backlog (visible, in flight and delayed) a tick fills up to. */
  highWater: number;
}

/** The change-events function's configuration (functions/change-events). */
export interface ChangeEventsConfig extends MetricsConfig {
  eventBusName: string;
  /** The connections table: each connection's `idsKnown` and `lastWriteAt` are kept from the changes. */
  connectionsTableName: string;
}

/** The changes writer (functions/changes-writer): numbers the items table's stream into the changes table. */
export interface ChangesWriterConfig extends ChangesConfig, MetricsConfig {
  /** The connections table: a connection whose erase runs (or ran) has no change numbered. */
  connectionsTableName: string;
}

export const ENV = {
  baseUrl: 'PROVIDER_BASE_URL',
  connectionsTableName: 'CONNECTIONS_TABLE_NAME',
  // The KMS key that seals the tokens (its ARN): the refresher, the item sync, the client API and the CLI.
  connectionsKeyArn: 'CONNECTIONS_KEY_ARN',
  tokenRefreshMinutes: 'TOKEN_REFRESH_MINUTES',
  tokenRequestsPerSecond: 'TOKEN_REQUESTS_PER_SECOND',
  refreshConcurrency: 'REFRESH_CONCURRENCY',
  idleRefreshHours: 'IDLE_REFRESH_HOURS',
  paceScope: 'PACE_SCOPE',
  // Read by Powertools' Logger in every function; the item sync also reads it (its DEBUG buffer).
  logLevel: 'POWERTOOLS_LOG_LEVEL',
  // Every function: the deployment's stage (set only when it has one), a dimension of every metric.
  stage: 'CONTENT_SYNC_STAGE',
  connectionWaitSeconds: 'CONNECTION_WAIT_SECONDS',
  itemsTableName: 'ITEMS_TABLE_NAME',
  itemsBucketName: 'ITEMS_BUCKET_NAME',
  revisionField: 'REVISION_FIELD',
  deadLetterQueueUrl: 'DEAD_LETTER_QUEUE_URL',
  timeoutMs: 'PROVIDER_TIMEOUT_MS',
  maxResponseBytes: 'PROVIDER_MAX_RESPONSE_BYTES',
  fetchConcurrency: 'SYNC_FETCH_CONCURRENCY',
  tokenCacheSeconds: 'ACCESS_TOKEN_CACHE_SECONDS',
  fetchAttempts: 'SYNC_FETCH_ATTEMPTS',
  rateLimitMinDelaySeconds: 'SYNC_RATE_LIMIT_MIN_DELAY_SECONDS',
  controlTableName: 'CONTROL_TABLE_NAME',
  providerRequestsPerSecond: 'PROVIDER_REQUESTS_PER_SECOND',
  paceFallbackRate: 'PACE_FALLBACK_REQUESTS_PER_SECOND',
  postponeMaxSeconds: 'SYNC_POSTPONE_MAX_SECONDS',
  usersReservedPercent: 'PROVIDER_USERS_RESERVED_PERCENT',
  // Discovery (the item sync; set only when it is on); its children go to RECONCILE_QUEUE_URL.
  childrenPath: 'CHILDREN_PATH',
  childIdPath: 'CHILD_ID_PATH',
  childRevisionPath: 'CHILD_REVISION_PATH',
  childrenTotalPath: 'CHILDREN_TOTAL_PATH',
  // The changes table (the changes writer, the client API; the eraser reads its name only).
  changesTableName: 'CHANGES_TABLE_NAME',
  changesRetentionDays: 'CHANGES_RETENTION_DAYS',
  // The reconciler (functions/reconciler); it also reads itemsTableName and controlTableName.
  reconcileQueueUrl: 'RECONCILE_QUEUE_URL',
  freshnessHours: 'FRESHNESS_HOURS',
  reconcileSegments: 'RECONCILE_SEGMENTS',
  reconcileHighWater: 'RECONCILE_HIGH_WATER',
  // The change-events function (functions/change-events): the bus the events go to, its name or ARN
  // (the stack sets the ARN).
  eventBusName: 'EVENT_BUS_NAME',
  // The client API (functions/client-api) and the eraser (functions/connection-eraser): client-config.ts.
  syncQueueUrl: 'SYNC_QUEUE_URL',
  eraseQueueUrl: 'ERASE_QUEUE_URL',
  eraseSettleSeconds: 'ERASE_SETTLE_SECONDS',
  // The AWS SDK's standard endpoint variables (local endpoints), as the item sync's S3 client needs them.
  s3EndpointUrl: 'AWS_ENDPOINT_URL_S3',
  endpointUrl: 'AWS_ENDPOINT_URL',
  ignoreConfiguredEndpointUrls: 'AWS_IGNORE_CONFIGURED_ENDPOINT_URLS',
} as const;

export const DEFAULTS = {
  timeoutMs: 10_000,
  // The largest item the sync stores: bigger than a DynamoDB row allows (those go to the items
  // bucket), and the bound of what one invocation holds in memory per item.
  maxResponseBytes: 16 * 1024 * 1024,
  // Requests in flight per container: two containers a lane reach 200 a second at 500 ms a request.
  fetchConcurrency: 50,
  tokenCacheSeconds: 60,
  tokenRefreshMinutes: 30,
  // The token endpoint's pace: 10,000 connections in use at tokenRefreshMinutes 30 need 5.6 a second.
  tokenRequestsPerSecond: 10,
  refreshConcurrency: 10,
  idleRefreshHours: 24,
  paceScope: 'client',
  logLevel: 'INFO',
  connectionWaitSeconds: 300,
  fetchAttempts: 3,
  rateLimitMinDelaySeconds: 60,
  paceFallbackRate: 1,
  postponeMaxSeconds: 30,
  usersReservedPercent: 20,
  // A child's id inside one entry of a folder's list of children (discovery).
  childIdPath: 'id',
  freshnessHours: 24,
  reconcileSegments: 8,
  // About 15 s of the sweep at 1,157 ids/s (100M ids a day): the queue never runs dry between ticks.
  reconcileHighWater: 20_000,
} as const;

/** A dot path: non-empty segments without whitespace, e.g. `revision` or `meta.rev`. */
export const REVISION_FIELD_PATTERN = /^[^.\s]+(\.[^.\s]+)*$/;

/** Why `value` is not a dot path (REVISION_FIELD_PATTERN), or undefined when it is one. */
export function dotPathProblem(value: string): string | undefined {
  return REVISION_FIELD_PATTERN.test(value) ? undefined : `must be a dot path such as "revision" or "meta.rev", got "${value}"`;
}

function baseUrl(env: Env): string {
  const raw = required(env, ENV.baseUrl);
  try {
    return normalizeBaseUrl(raw);
  } catch (error) {
    throw new ConfigError(ENV.baseUrl, (error as Error).message);
  }
}

function revisionField(env: Env): string {
  const raw = required(env, ENV.revisionField);
  const problem = dotPathProblem(raw);
  if (problem !== undefined) throw new ConfigError(ENV.revisionField, problem);
  return raw;
}

/** An optional dot path; undefined when unset or blank. */
function optionalDotPath(env: Env, key: string): string | undefined {
  const raw = env[key]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const problem = dotPathProblem(raw);
  if (problem !== undefined) throw new ConfigError(key, problem);
  return raw;
}

/**
 * Discovery: on when CHILDREN_PATH is set, and then RECONCILE_QUEUE_URL is required (the children
 * go there). CHILD_ID_PATH (default `id`), CHILD_REVISION_PATH and CHILDREN_TOTAL_PATH without
 * CHILDREN_PATH would do nothing: an error naming the variable.
 */
function discovery(env: Env): DiscoveryConfig | undefined {
  const childrenPath = optionalDotPath(env, ENV.childrenPath);
  const childIdPath = optionalDotPath(env, ENV.childIdPath);
  const childRevisionPath = optionalDotPath(env, ENV.childRevisionPath);
  const childrenTotalPath = optionalDotPath(env, ENV.childrenTotalPath);
  if (childrenPath === undefined) {
    const stray = [
      [ENV.childIdPath, childIdPath],
      [ENV.childRevisionPath, childRevisionPath],
      [ENV.childrenTotalPath, childrenTotalPath],
    ].find(([, value]) => value !== undefined);
    if (stray) throw new ConfigError(stray[0]!, `is set but ${ENV.childrenPath} is not: without it discovery is off and this does nothing`);
    return undefined;
  }
  return {
    childrenPath,
    childIdPath: childIdPath ?? DEFAULTS.childIdPath,
    ...(childRevisionPath !== undefined ? { childRevisionPath } : {}),
    ...(childrenTotalPath !== undefined ? { childrenTotalPath } : {}),
    queueUrl: queueUrl(env, ENV.reconcileQueueUrl),
  };
}

/**
 * The S3 endpoint as the SDK takes it from the environment: AWS_ENDPOINT_URL_S3, else
 * AWS_ENDPOINT_URL; none when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true. An http(s) URL.
 */
export function s3Endpoint(env: Env): ConfiguredEndpoint | undefined {
  if (env[ENV.ignoreConfiguredEndpointUrls]?.trim().toLowerCase() === 'true') return undefined;
  for (const variable of [ENV.s3EndpointUrl, ENV.endpointUrl]) {
    const raw = env[variable]?.trim();
    if (!raw) continue;
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError(variable, `must be an http(s) URL, got "${raw}"`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConfigError(variable, `must be an http(s) URL, got "${raw}"`);
    return { url: raw, variable };
  }
  return undefined;
}

export function loadProviderConfig(env: Env): ProviderConfig {
  return {
    baseUrl: baseUrl(env),
    timeoutMs: integer(env, ENV.timeoutMs, DEFAULTS.timeoutMs, 100, 120_000),
    maxResponseBytes: integer(env, ENV.maxResponseBytes, DEFAULTS.maxResponseBytes, 1024, 64 * 1024 * 1024),
  };
}

function logLevel(env: Env): LogLevel {
  const raw = env[ENV.logLevel]?.trim();
  if (raw === undefined || raw === '') return DEFAULTS.logLevel;
  const level = parseLogLevel(raw);
  if (level === undefined) throw new ConfigError(ENV.logLevel, `must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
  return level;
}

/**
 * The deployment's stage, by the context key's own rule (./stage.ts, which imports nothing: no
 * CDK in the functions); undefined when unset or blank.
 */
export function stage(env: Env): string | undefined {
  const raw = env[ENV.stage]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const problem = stageProblem(raw);
  if (problem !== undefined) throw new ConfigError(ENV.stage, problem);
  return raw;
}

function paceScope(env: Env): PaceScope {
  const raw = env[ENV.paceScope]?.trim();
  if (raw === undefined || raw === '') return DEFAULTS.paceScope;
  if (!(PACE_SCOPES as readonly string[]).includes(raw)) {
    throw new ConfigError(ENV.paceScope, `must be one of ${PACE_SCOPES.join(', ')}, got "${raw}"`);
  }
  return raw as PaceScope;
}

export function loadConnectionsConfig(env: Env = process.env): ConnectionsConfig {
  return {
    connectionsTableName: required(env, ENV.connectionsTableName),
    connectionsKeyArn: kmsKeyArn(env, ENV.connectionsKeyArn),
    tokenRefreshMinutes: integer(env, ENV.tokenRefreshMinutes, DEFAULTS.tokenRefreshMinutes, 1, 1440),
    tokenRequestsPerSecond: integer(env, ENV.tokenRequestsPerSecond, DEFAULTS.tokenRequestsPerSecond, 1, 1000),
  };
}

/** CHANGES_TABLE_NAME and CHANGES_RETENTION_DAYS, both required (the stacks set them). */
export function loadChangesConfig(env: Env = process.env): ChangesConfig {
  const { min, max } = CHANGES_RETENTION_DAYS_RANGE;
  return { changesTableName: required(env, ENV.changesTableName), changesRetentionDays: requiredInteger(env, ENV.changesRetentionDays, min, max) };
}

export function loadChangesWriterConfig(env: Env = process.env): ChangesWriterConfig {
  return { ...loadChangesConfig(env), connectionsTableName: required(env, ENV.connectionsTableName), stage: stage(env) };
}

export function loadRefresherConfig(env: Env = process.env): RefresherConfig {
  return {
    provider: loadProviderConfig(env),
    ...loadConnectionsConfig(env),
    controlTableName: required(env, ENV.controlTableName),
    refreshConcurrency: integer(env, ENV.refreshConcurrency, DEFAULTS.refreshConcurrency, 1, 100),
    idleRefreshHours: integer(env, ENV.idleRefreshHours, DEFAULTS.idleRefreshHours, 1, 24),
    stage: stage(env),
  };
}

export function loadSyncConfig(env: Env = process.env): SyncConfig {
  return {
    provider: loadProviderConfig(env),
    ...loadConnectionsConfig(env),
    logLevel: logLevel(env),
    paceScope: paceScope(env),
    connectionWaitSeconds: integer(env, ENV.connectionWaitSeconds, DEFAULTS.connectionWaitSeconds, 1, 900),
    itemsTableName: required(env, ENV.itemsTableName),
    itemsBucketName: required(env, ENV.itemsBucketName),
    revisionField: revisionField(env),
    deadLetterQueueUrl: queueUrl(env, ENV.deadLetterQueueUrl),
    fetchConcurrency: integer(env, ENV.fetchConcurrency, DEFAULTS.fetchConcurrency, 1, 100),
    tokenCacheSeconds: integer(env, ENV.tokenCacheSeconds, DEFAULTS.tokenCacheSeconds, 0, 3600),
    fetchAttempts: integer(env, ENV.fetchAttempts, DEFAULTS.fetchAttempts, 1, 10),
    rateLimitMinDelaySeconds: integer(env, ENV.rateLimitMinDelaySeconds, DEFAULTS.rateLimitMinDelaySeconds, 0, 43_200),
    controlTableName: required(env, ENV.controlTableName),
    providerRequestsPerSecond: optionalInteger(env, ENV.providerRequestsPerSecond, 1, 100_000),
    paceFallbackRate: integer(env, ENV.paceFallbackRate, DEFAULTS.paceFallbackRate, 1, 1_000),
    postponeMaxSeconds: integer(env, ENV.postponeMaxSeconds, DEFAULTS.postponeMaxSeconds, 15, 900),
    usersReservedPercent: integer(env, ENV.usersReservedPercent, DEFAULTS.usersReservedPercent, 0, 90),
    s3Endpoint: s3Endpoint(env),
    discovery: discovery(env),
    ...(env[ENV.reconcileQueueUrl] !== undefined && env[ENV.reconcileQueueUrl] !== '' ? { backgroundQueueUrl: queueUrl(env, ENV.reconcileQueueUrl) } : {}),
    stage: stage(env),
  };
}

/**
 * The reconciler's variables: ITEMS_TABLE_NAME, CONTROL_TABLE_NAME and RECONCILE_QUEUE_URL are
 * required; FRESHNESS_HOURS (0–8760, default 24), RECONCILE_SEGMENTS (1–100, default 8) and
 * RECONCILE_HIGH_WATER (10–100000, default 20000) have defaults.
 */
export function loadReconcilerConfig(env: Env = process.env): ReconcilerConfig {
  return {
    itemsTableName: required(env, ENV.itemsTableName),
    controlTableName: required(env, ENV.controlTableName),
    reconcileQueueUrl: queueUrl(env, ENV.reconcileQueueUrl),
    freshnessHours: integer(env, ENV.freshnessHours, DEFAULTS.freshnessHours, 0, 8760),
    segments: integer(env, ENV.reconcileSegments, DEFAULTS.reconcileSegments, 1, 100),
    highWater: integer(env, ENV.reconcileHighWater, DEFAULTS.reconcileHighWater, 10, 100_000),
    stage: stage(env),
  };
}

export function loadChangeEventsConfig(env: Env = process.env): ChangeEventsConfig {
  return { eventBusName: required(env, ENV.eventBusName), connectionsTableName: required(env, ENV.connectionsTableName), stage: stage(env) };
}
