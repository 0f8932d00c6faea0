/**
 * What a scenario asks of the system in virtual time (system.ts startSystem): its options, what it
 * watches as it happens, and the provider at a limit told to the system that the large scenarios share.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { StreamRecord } from '../../functions/change-events/ports.js';
import type { ReconcilerTuning } from '../../functions/reconciler/app.js';
import type { PaceScope } from '../../functions/shared/config.js';
import type { DynamoChaos, DynamoMeter } from '../fakes/dynamo-meter.js';
import type { SyncHandlerFn } from '../fakes/lambda.js';
import type { RateLimit } from '../simulator/provider-model.js';
import type { Tuning } from '../system/tuning.js';
import type { EventSourceName, MeterSource } from './meters.js';
import type { AccountsOption, DeepTreeShape } from './sim-provider.js';

export interface ReconcileOptions {
  /** The context key freshnessHours (above 0: a reconciler is deployed). */
  freshnessHours: number;
  /** The schedule's first tick this long after the start; default one interval. */
  firstTickAfterMs?: number;
  /** RECONCILE_SEGMENTS; default the function's (as the stack leaves it). */
  segments?: number;
  /** RECONCILE_HIGH_WATER; default the function's (as the stack leaves it). */
  highWater?: number;
  /** Overrides of the reconciler's tuning (app.ts DEFAULT_TUNING). */
  tuning?: Partial<ReconcilerTuning>;
}

/** What a scenario watches as it happens (its own counts, per id). */
export interface SystemObserver {
  /** The provider answered `status` (429 included) to a request for `itemId` from a sync container of `source`. */
  providerAnswer?(source: EventSourceName, itemId: string, status: number, at: number): void;
  /**
   * The sync logged a line about an item of `connection` (`record done`, `record postponed`,
   * `write race lost; …`: functions/item-sync/), at `at`.
   */
  itemLog?(source: EventSourceName, message: string, itemId: string, at: number, connection: string | undefined): void;
  /**
   * A sync container of `source` sent these messages to the queue `queueUrl` (one SendMessageBatch,
   * as SQS accepted it): discovery's children and a users' backlog to the reconcile queue, waiting
   * records to their own queue, dead letters.
   */
  syncSent?(source: EventSourceName, queueUrl: string, messages: ReadonlyArray<{ connection?: string; id: string }>, at: number): void;
  /** The reconciler sent these ids to the reconcile queue (one SendMessageBatch, as SQS accepted it). */
  reconcileSent?(ids: readonly string[], at: number): void;
  /** A function of `source` added this value to one of its metrics (`ChildrenDiscovered`, ...), at `at`. */
  metric?(source: MeterSource, name: string, value: number, at: number): void;
  /** The DynamoDB client of the sync's containers on `source`'s queue, once made (a scenario's own middleware). */
  syncDynamo?(client: DynamoDBClient, source: EventSourceName): void;
  /** The changes writer's DynamoDB client, once made (with `changesWriter`). */
  writerDynamo?(client: DynamoDBClient): void;
}

/** Faults a scenario injects into the sync and the stream (each counted where it is injected). */
export interface SyncFaults {
  /** Below the SDK's retries of the sync containers' DynamoDB client (lost answers, TransactionConflict...), counted in `meter`. */
  dynamo?: { meter: DynamoMeter; chaos: DynamoChaos };
  /** Wraps each sync container's handler as its event source invokes it (an invocation that fails after its work...). */
  invocation?(handler: SyncHandlerFn, source: EventSourceName): SyncHandlerFn;
  /** The stream's event source loses this batch: it moves past it without invoking the function (its events never reach the bus). */
  loseStreamBatch?(records: readonly StreamRecord[]): boolean;
  /** Below the SDK's retries of the changes writer's DynamoDB client (lost answers...), counted in `meter`. */
  writerDynamo?: { meter: DynamoMeter; chaos: DynamoChaos };
  /** The changes writer's invocation fails after its work: its batch comes again. */
  writerFailsAfterWork?(records: readonly StreamRecord[]): boolean;
}

/** Discovery's context keys (docs/discovery.md); `childIdPath` defaults as deployed. */
export interface DiscoveryContext {
  childrenPath: string;
  childIdPath?: string;
  childRevisionPath?: string;
  childrenTotalPath?: string;
}

export interface SystemOptions {
  /** Items of the account `default` (the connection `default`; none when 0). */
  ids: number;
  /** More accounts at the provider, each a connection of the system. */
  accounts?: AccountsOption;
  /** The account `default`'s items as a deep tree (generateDeepTree); default generateItemTree's. */
  tree?: DeepTreeShape;
  /** The provider's folders embed their children (every account's), at most `cap` a list. */
  children?: { cap: number };
  /** Discovery on, with these context keys. */
  discovery?: DiscoveryContext;
  seed: number;
  /** The provider's limit (unknown to the system unless `knownLimit`). */
  rateLimit?: RateLimit;
  /** The operator's providerRequestsPerSecond. */
  knownLimit?: number;
  /** The context key paceScope; default the deployed one. */
  paceScope?: PaceScope;
  /** The context key syncMaxConcurrency (sync invocations on each queue at once); default the deployed one. */
  syncMaxConcurrency?: number;
  /** The context key syncBatchSize; default the deployed one. */
  syncBatchSize?: number;
  providerLatencyMs: number;
  /** The context key tokenRefreshMinutes; default the deployed one. */
  tokenRefreshMinutes?: number;
  /** The functions' tunables beyond the deployed environment (dev/system/tuning.ts). */
  tuning?: Tuning;
  /** Reconciliation as deployed; none when undefined. */
  reconcile?: ReconcileOptions;
  observe?: SystemObserver;
  /** The real Powertools logger and metrics of every function, writing to counters (meter.logs); default loggers that keep nothing. */
  meterLogs?: boolean;
  /** Keep only this many of the provider model's recorded requests (long runs); default all. */
  recordedRequests?: number;
  /**
   * The items table's stream and the real change-events function on it (items-stream.ts: one
   * shard, PutEvents answered in process after this many ms of virtual time); none when undefined.
   */
  changeEvents?: { eventBridgeRoundTripMs: number };
  /** The changes writer on the items table's stream (each connection's changes feed); none when false or undefined. */
  changesWriter?: boolean;
  /** Faults injected into the sync's containers and the stream; none when undefined. */
  faults?: SyncFaults;
  /**
   * DynamoDB Local keeps the tables in files, in a temporary folder removed at `close()`, instead of
   * in its memory: a run whose tables outgrow the memory it may use (the million changes).
   */
  dynamodbOnDisk?: boolean;
}

/** What a scenario at a provider limit says of it: the limit, the latency. */
export interface LimitScale {
  seed: number;
  /** The provider's limit L, requests a second (one bucket, 429 with `Retry-After: 1` past it). */
  limit: number;
  providerLatencyMs: number;
  meterLogs?: boolean;
}

/**
 * The options every large scenario shares: the provider at L, told to the system
 * (`providerRequestsPerSecond`) unless `known` is false; the last 1,000 provider requests kept.
 */
export function atLimit(scale: LimitScale, known = true): Pick<SystemOptions, 'seed' | 'rateLimit' | 'knownLimit' | 'providerLatencyMs' | 'meterLogs' | 'recordedRequests'> {
  return {
    seed: scale.seed,
    rateLimit: { requestsPerSecond: scale.limit, retryAfterSeconds: 1 },
    ...(known ? { knownLimit: scale.limit } : {}),
    providerLatencyMs: scale.providerLatencyMs,
    ...(scale.meterLogs !== undefined ? { meterLogs: scale.meterLogs } : {}),
    recordedRequests: 1_000,
  };
}

/** One token-refresher invocation, as its schedule (or `refresh()`) made it. */
