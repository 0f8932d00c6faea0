/**
 * Deploy-time configuration: the CDK context keys (docs/configuration.md, "Deploy time (CDK context)"), read and validated
 * ONCE into a typed, frozen object. Every problem throws a ConfigError whose message starts with
 * the key (`baseUrl: ...`), so `cdk synth` tells the operator exactly what to fix.
 *
 * Values come from `cdk.json` (numbers stay numbers) or from `-c key=value` (always strings), so
 * numbers are accepted in both forms; anything else (fractions, `12abc`, booleans) is rejected.
 */
import { normalizeBaseUrl } from '../functions/shared/base-url.js';
import { CHANGES_RETENTION_DAYS_RANGE, DEFAULTS, dotPathProblem, LOG_LEVELS, PACE_SCOPES, parseLogLevel, type LogLevel, type PaceScope } from '../functions/shared/config.js';
import { ConfigError } from '../functions/shared/errors.js';
import { stageProblem } from '../functions/shared/stage.js';

/** The context keys, as operators type them. Part of the product interface: keep them exactly. */
export const CONTEXT_KEYS = {
  baseUrl: 'baseUrl',
  tokenRefreshMinutes: 'tokenRefreshMinutes',
  revisionField: 'revisionField',
  syncBatchSize: 'syncBatchSize',
  syncMaxConcurrency: 'syncMaxConcurrency',
  syncMemorySize: 'syncMemorySize',
  tracing: 'tracing',
  alarmEmail: 'alarmEmail',
  providerRequestsPerSecond: 'providerRequestsPerSecond',
  freshnessHours: 'freshnessHours',
  usersReservedPercent: 'usersReservedPercent',
  paceScope: 'paceScope',
  logLevel: 'logLevel',
  // One deployment among several in an account and region (functions/shared/stage.ts).
  stage: 'stage',
  logRetentionDays: 'logRetentionDays',
  // How long a connection's changes stay readable from its changes feed (docs/changes.md).
  changesRetentionDays: 'changesRetentionDays',
  // Discovery (docs/discovery.md): absent childrenPath = off.
  childrenPath: 'childrenPath',
  childIdPath: 'childIdPath',
  childRevisionPath: 'childRevisionPath',
  childrenTotalPath: 'childrenTotalPath',
} as const;

/** Allowed range and default of each numeric key. */
export const NUMBER_RULES = {
  tokenRefreshMinutes: { min: 1, max: 1440, fallback: 30 },
  // 100 a batch, two at once per queue: what a pass and users' pushes cost (docs/cost.md).
  syncBatchSize: { min: 1, max: 10_000, fallback: 100 },
  syncMaxConcurrency: { min: 2, max: 1000, fallback: 2 },
  // The item sync's memory, MB (Lambda's range); CPU comes with it (one vCPU at 1,769 MB).
  syncMemorySize: { min: 128, max: 10_240, fallback: 256 },
  // Target length of a reconciliation pass; 0 turns reconciliation off (one year at most).
  freshnessHours: { min: 0, max: 8760, fallback: DEFAULTS.freshnessHours },
  // Percent of the provider pace the reconciliation sweep may never take: kept for users' ids.
  usersReservedPercent: { min: 0, max: 90, fallback: DEFAULTS.usersReservedPercent },
  // Days a change stays in the changes table (CHANGES_RETENTION_DAYS, whose range it shares): five weeks.
  changesRetentionDays: { ...CHANGES_RETENTION_DAYS_RANGE, fallback: 35 },
} as const;

/** Allowed range of the optional numeric keys (no default: unset means "not given"). */
export const OPTIONAL_NUMBER_RULES = {
  providerRequestsPerSecond: { min: 1, max: 100_000 },
} as const;

export const DEFAULT_REVISION_FIELD = 'revision';

/**
 * The retentions CloudWatch Logs allows, in days (aws-cdk-lib's RetentionDays but INFINITE, which
 * is no retention at all; test/infra/log-retention.test.ts holds the two together).
 */
export const LOG_RETENTION_DAYS: readonly number[] = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
];
export const DEFAULT_LOG_RETENTION_DAYS = 30;

/** A pragmatic address check (one `@`, no spaces, a dot in the domain); SNS confirms the rest. */
const EMAIL_PATTERN = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;

export interface ContentSyncConfig {
  /** Provider base address, normalized (no trailing slash). */
  readonly baseUrl: string;
  readonly tokenRefreshMinutes: number;
  readonly revisionField: string;
  readonly syncBatchSize: number;
  readonly syncMaxConcurrency: number;
  /** The item sync's memory, MB. */
  readonly syncMemorySize: number;
  /** X-Ray active tracing of every function (off by default: docs/cost.md). */
  readonly tracing: boolean;
  /** Subscribed to the alarm topic when set. */
  readonly alarmEmail: string | undefined;
  /**
   * The provider's known limit, requests a second: ceiling and starting rate of the one provider
   * pace every sync container shares. Unset: the pace finds the provider's limit itself.
   */
  readonly providerRequestsPerSecond: number | undefined;
  /**
   * Target length of a reconciliation pass, hours (every known id checked again once per pass);
   * 0: no reconciler (infra/reconciler).
   */
  readonly freshnessHours: number;
  /**
   * Percent of the provider pace reserved for users' ids: the reconciliation sweep never takes more
   * than the rest; users' ids may use all of it.
   */
  readonly usersReservedPercent: number;
  /**
   * The provider pace's scope: `client`, one pace for every connection with the same client id;
   * `connection`, one pace per connection (docs/connections.md, "The provider pace's scope").
   */
  readonly paceScope: PaceScope;
  /**
   * Every function's log level (POWERTOOLS_LOG_LEVEL): INFO by default; DEBUG adds the item sync's
   * per-record `record done` lines (docs/operations.md, "Logs").
   */
  readonly logLevel: LogLevel;
  /**
   * The deployment's stage: its stacks are `ContentSyncStateful-<stage>` and
   * `ContentSyncStateless-<stage>` (functions/shared/stage.ts); undefined: `ContentSyncStateful` and
   * `ContentSyncStateless`.
   */
  readonly stage: string | undefined;
  /** Days every log group of the stacks keeps its logs (one of LOG_RETENTION_DAYS). */
  readonly logRetentionDays: number;
  /**
   * Days a connection's changes stay readable from its changes feed: each change row expires this
   * long after it is written (the changes table's TTL attribute, `expiresAt`; docs/changes.md).
   */
  readonly changesRetentionDays: number;
  /**
   * Discovery (docs/discovery.md): where a folder item lists its children; undefined when
   * `childrenPath` is not given (discovery off).
   */
  readonly discovery: DiscoveryContext | undefined;
  /**
   * Derived: time-out of the sync function in seconds. 60 s covers batches up to the default 100
   * (at the pace's share of one of two containers, with re-tries); larger batches get 6 s per 10 records, capped
   * at Lambda's 900 s. The sync queue's visibility time-out is 6× this value.
   */
  readonly syncTimeoutSeconds: number;
}

/** The discovery keys, validated (dot paths); `childIdPath` with its default. */
export interface DiscoveryContext {
  readonly childrenPath: string;
  readonly childIdPath: string;
  readonly childRevisionPath: string | undefined;
  readonly childrenTotalPath: string | undefined;
}

/** Anything with CDK's context lookup: an App, a Stack or any construct's node. */
export interface ContextSource {
  tryGetContext(key: string): unknown;
  /** Every key given (a construct's node has it): a key this app does not read is refused. */
  getAllContext?(): Record<string, unknown>;
}

/**
 * Context keys that are CDK's own, beside those holding `:` (feature flags `@aws-cdk/…:…`, the CLI's
 * `aws:cdk:…`, the lookups cached in cdk.context.json such as `availability-zones:account=…`).
 */
export const CDK_OWN_CONTEXT_KEYS: readonly string[] = ['cli-telemetry', 'acknowledged-issue-numbers'];

/**
 * Refuses a context key this app does not read (a typo such as `changesRetentionDay` would otherwise
 * leave the default in place without a word), naming it and the nearest key it reads.
 */
export function refuseUnknownKeys(keys: readonly string[]): void {
  const known = Object.values(CONTEXT_KEYS) as string[];
  for (const key of keys) {
    if (known.includes(key) || key.includes(':') || CDK_OWN_CONTEXT_KEYS.includes(key)) continue;
    const nearest = known.map((name) => ({ name, distance: editDistance(key.toLowerCase(), name.toLowerCase()) })).sort((a, b) => a.distance - b.distance)[0]!;
    const hint = nearest.distance <= Math.max(2, Math.floor(nearest.name.length / 3)) ? `did you mean ${nearest.name}? ` : '';
    throw new ConfigError(key, `is not a context key of this app (${hint}the keys: docs/configuration.md, "Deploy time (CDK context)")`);
  }
}

/** Levenshtein distance: the fewest one-character edits from `a` to `b`. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const row = [i];
    for (let j = 1; j <= b.length; j += 1) row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    previous = row;
  }
  return previous[b.length]!;
}

export function syncTimeoutSeconds(batchSize: number): number {
  return Math.min(900, Math.max(60, Math.ceil(batchSize / 10) * 6));
}

/** Reads and validates every context key, and refuses one it does not read; throws ConfigError naming the first key at fault. */
export function readContentSyncConfig(source: ContextSource): ContentSyncConfig {
  if (source.getAllContext) refuseUnknownKeys(Object.keys(source.getAllContext()));
  const syncBatchSize = integer(source, 'syncBatchSize');
  return Object.freeze({
    baseUrl: baseUrl(source),
    tokenRefreshMinutes: integer(source, 'tokenRefreshMinutes'),
    revisionField: revisionField(source),
    syncBatchSize,
    syncMaxConcurrency: integer(source, 'syncMaxConcurrency'),
    syncMemorySize: integer(source, 'syncMemorySize'),
    tracing: flag(source, 'tracing', false),
    alarmEmail: alarmEmail(source),
    providerRequestsPerSecond: optionalInteger(source, 'providerRequestsPerSecond'),
    freshnessHours: integer(source, 'freshnessHours'),
    usersReservedPercent: integer(source, 'usersReservedPercent'),
    paceScope: paceScope(source),
    logLevel: logLevel(source),
    stage: stage(source),
    logRetentionDays: logRetentionDays(source),
    changesRetentionDays: integer(source, 'changesRetentionDays'),
    discovery: discovery(source),
    syncTimeoutSeconds: syncTimeoutSeconds(syncBatchSize),
  });
}

/** Context value as text, or undefined when unset or blank. Non-scalars are rejected. */
function text(source: ContextSource, key: string): string | undefined {
  const value = source.tryGetContext(key);
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' && typeof value !== 'number') {
    throw new ConfigError(key, `must be a single value, got ${JSON.stringify(value)}`);
  }
  const trimmed = String(value).trim();
  return trimmed === '' ? undefined : trimmed;
}

function baseUrl(source: ContextSource): string {
  const key = CONTEXT_KEYS.baseUrl;
  const raw = text(source, key);
  if (raw === undefined) {
    throw new ConfigError(key, 'is required: pass the provider address with -c baseUrl=https://host[/path] or set it in cdk.json');
  }
  try {
    return normalizeBaseUrl(raw);
  } catch (error) {
    throw new ConfigError(key, (error as Error).message);
  }
}

function integer(source: ContextSource, key: keyof typeof NUMBER_RULES): number {
  const { min, max, fallback } = NUMBER_RULES[key];
  const raw = text(source, key);
  return raw === undefined ? fallback : wholeNumber(key, raw, min, max);
}

function optionalInteger(source: ContextSource, key: keyof typeof OPTIONAL_NUMBER_RULES): number | undefined {
  const { min, max } = OPTIONAL_NUMBER_RULES[key];
  const raw = text(source, key);
  return raw === undefined ? undefined : wholeNumber(key, raw, min, max);
}

function wholeNumber(key: string, raw: string, min: number, max: number): number {
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(key, `must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function revisionField(source: ContextSource): string {
  const key = CONTEXT_KEYS.revisionField;
  return dotPath(key, text(source, key) ?? DEFAULT_REVISION_FIELD);
}

function dotPath(key: string, raw: string): string {
  const problem = dotPathProblem(raw);
  if (problem !== undefined) throw new ConfigError(key, problem);
  return raw;
}

function optionalDotPath(source: ContextSource, key: string): string | undefined {
  const raw = text(source, key);
  return raw === undefined ? undefined : dotPath(key, raw);
}

/**
 * The discovery keys: on when `childrenPath` is given. `childIdPath`, `childRevisionPath` or
 * `childrenTotalPath` without it would do nothing: an error naming the key.
 */
function discovery(source: ContextSource): DiscoveryContext | undefined {
  const childrenPath = optionalDotPath(source, CONTEXT_KEYS.childrenPath);
  const childIdPath = optionalDotPath(source, CONTEXT_KEYS.childIdPath);
  const childRevisionPath = optionalDotPath(source, CONTEXT_KEYS.childRevisionPath);
  const childrenTotalPath = optionalDotPath(source, CONTEXT_KEYS.childrenTotalPath);
  if (childrenPath === undefined) {
    const given: Array<[string, string | undefined]> = [
      [CONTEXT_KEYS.childIdPath, childIdPath],
      [CONTEXT_KEYS.childRevisionPath, childRevisionPath],
      [CONTEXT_KEYS.childrenTotalPath, childrenTotalPath],
    ];
    const stray = given.find(([, value]) => value !== undefined);
    if (stray) throw new ConfigError(stray[0], `is given without ${CONTEXT_KEYS.childrenPath}: without it discovery is off and this key does nothing`);
    return undefined;
  }
  return Object.freeze({ childrenPath, childIdPath: childIdPath ?? DEFAULTS.childIdPath, childRevisionPath, childrenTotalPath });
}

function paceScope(source: ContextSource): PaceScope {
  const key = CONTEXT_KEYS.paceScope;
  const raw = text(source, key);
  if (raw === undefined) return DEFAULTS.paceScope;
  if (!(PACE_SCOPES as readonly string[]).includes(raw)) {
    throw new ConfigError(key, `must be one of ${PACE_SCOPES.join(', ')}, got "${raw}"`);
  }
  return raw as PaceScope;
}

/** `true` or `false` (a JSON boolean in cdk.json, the word with `-c key=value`); `fallback` when unset. */
function flag(source: ContextSource, key: typeof CONTEXT_KEYS.tracing, fallback: boolean): boolean {
  const value = source.tryGetContext(key);
  if (typeof value === 'boolean') return value;
  const raw = text(source, key);
  if (raw === undefined) return fallback;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new ConfigError(key, `must be true or false, got "${raw}"`);
}

function logLevel(source: ContextSource): LogLevel {
  const key = CONTEXT_KEYS.logLevel;
  const raw = text(source, key);
  if (raw === undefined) return DEFAULTS.logLevel;
  const level = parseLogLevel(raw);
  if (level === undefined) throw new ConfigError(key, `must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
  return level;
}

function alarmEmail(source: ContextSource): string | undefined {
  const key = CONTEXT_KEYS.alarmEmail;
  const raw = text(source, key);
  if (raw === undefined) return undefined;
  if (!EMAIL_PATTERN.test(raw)) {
    throw new ConfigError(key, `must be an e-mail address such as ops@example.com, got "${raw}"`);
  }
  return raw;
}

function stage(source: ContextSource): string | undefined {
  const key = CONTEXT_KEYS.stage;
  const raw = text(source, key);
  if (raw === undefined) return undefined;
  const problem = stageProblem(raw);
  if (problem !== undefined) throw new ConfigError(key, problem);
  return raw;
}

function logRetentionDays(source: ContextSource): number {
  const key = CONTEXT_KEYS.logRetentionDays;
  const raw = text(source, key);
  if (raw === undefined) return DEFAULT_LOG_RETENTION_DAYS;
  const days = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!LOG_RETENTION_DAYS.includes(days)) {
    throw new ConfigError(key, `must be one of the retentions CloudWatch Logs allows (${LOG_RETENTION_DAYS.join(', ')} days), got "${raw}"`);
  }
  return days;
}
