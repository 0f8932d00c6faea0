/**
 * The token refresher's handler, built from its dependencies: run by EventBridge Scheduler every 5
 * minutes (every `tokenRefreshMinutes` when shorter: refresh-schedule.ts); an event
 * `{"trigger": "deploy"}` is a run like the others. Thin: wire the connections table, the token
 * endpoint's pace (its rows in the control table: token-pace.ts) and the provider, run the core
 * (run.ts), publish the counts. Connections by status (`ConnectionsActive`, `ConnectionsPaused`, `ConnectionsFailing`)
 * and refresh outcomes (`TokenRefreshed`, `RefreshTokenRotated`, `TokenRefreshFailed`,
 * `TokenRefreshRefused`), and `ConnectionsKeyUnavailable` (1 when the key that seals the tokens is
 * disabled or pending deletion), zeros included, no dimension per connection. A connection's failure never
 * fails the invocation; a scan that fails does. handler.ts builds it once per container.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { KMSClient } from '@aws-sdk/client-kms';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { kmsApi } from '../shared/adapters/kms-api.js';
import { sealedConnectionStore } from '../shared/adapters/sealed-connection-store.js';
import { DynamoDbPaceStore } from '../shared/adapters/dynamodb-pace-store.js';
import type { RefresherConfig } from '../shared/config.js';
import type { ConnectionStore } from '../shared/connections/ports.js';
import { TokenPaces } from '../shared/connections/token-pace.js';
import type { PaceStore } from '../shared/provider/pace/provider-pace.js';
import { REFRESHER_METRIC_NAMES, REFRESHER_SERVICE } from '../shared/metric-names.js';
import { createLogger, createMetrics, describeError } from '../shared/observability.js';
import { HttpProviderClient } from '../shared/provider/provider-client.js';
import { systemClock, type Clock, type ProviderClient } from '../shared/ports.js';
import { runRefresher, type RunReport } from './run.js';

export interface RefresherEvent {
  /** `deploy` when run by the deployment; anything else (or nothing) is a scheduled run. */
  trigger?: string;
}

export type RefresherResult = RunReport & { trigger: 'schedule' | 'deploy' };

/** Kept back from the invocation's remaining time beyond one provider call's time-out: the lease and result writes. */
export const MARGIN_BEYOND_TIMEOUT_MS = 10_000;

export interface RefresherHandlerDeps {
  config: RefresherConfig;
  dynamodb: DynamoDBClient;
  /** Opens the refresh tokens and seals the new tokens under CONNECTIONS_KEY_ARN. */
  kms: KMSClient;
  provider?: ProviderClient;
  clock?: Clock;
  logger?: ReturnType<typeof createLogger>;
  metrics?: ReturnType<typeof createMetrics>;
  /** The connections table; default the DynamoDB adapter over `dynamodb` (CONNECTIONS_TABLE_NAME). */
  store?: ConnectionStore;
  /** No refresh starts with less remaining time; default the provider time-out plus 10 s. */
  marginMs?: number;
  /** Lease owners' ids (tests); default a random UUID per refresh. */
  newOwner?: () => string;
  /** The shared state of a token pace; default its row of the control table (CONTROL_TABLE_NAME, `provider-pace#<pace key>`). */
  tokenPaceStoreFor?: (paceKey: string) => PaceStore;
  /** Waits (for a slot of the token pace, between attempts at a write); default real time. */
  sleep?: (ms: number) => Promise<void>;
  /** [0, 1), for the pace's jitter; default Math.random. */
  random?: () => number;
}

export type RefresherHandler = (event: RefresherEvent | null | undefined, context?: Context) => Promise<RefresherResult>;

export function createRefresherHandler(deps: RefresherHandlerDeps): RefresherHandler {
  const { config } = deps;
  const logger = deps.logger ?? createLogger(REFRESHER_SERVICE);
  const metrics = deps.metrics ?? createMetrics(REFRESHER_SERVICE, { stage: config.stage });
  const store = deps.store ?? sealedConnectionStore({ dynamodb: deps.dynamodb, kms: kmsApi(deps.kms), config });
  const provider = deps.provider ?? new HttpProviderClient(config.provider);
  const clock = deps.clock ?? systemClock;
  const marginMs = deps.marginMs ?? config.provider.timeoutMs + MARGIN_BEYOND_TIMEOUT_MS;
  // Per container: the token paces (their leases, what they know of their breakers) live as long as the handler.
  const tokens = new TokenPaces(
    {
      storeFor: deps.tokenPaceStoreFor ?? ((paceKey) => new DynamoDbPaceStore(deps.dynamodb, config.controlTableName, paceKey)),
      clock,
      log: logger,
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
      ...(deps.random ? { random: deps.random } : {}),
    },
    { ceiling: config.tokenRequestsPerSecond, concurrency: config.refreshConcurrency },
  );

  return async function handler(event, context) {
    if (context) logger.addContext(context);
    const trigger = event?.trigger === 'deploy' ? 'deploy' : 'schedule';
    try {
      const report = await runRefresher(
        {
          store,
          provider,
          clock,
          log: logger,
          tokens,
          marginMs,
          ...(deps.sleep ? { sleep: deps.sleep } : {}),
          ...(context ? { remainingMs: () => context.getRemainingTimeInMillis() } : {}),
          ...(deps.newOwner ? { newOwner: deps.newOwner } : {}),
        },
        { tokenRefreshMinutes: config.tokenRefreshMinutes, idleRefreshHours: config.idleRefreshHours, refreshConcurrency: config.refreshConcurrency },
      );
      const count = (name: string, value: number): void => void metrics.addMetric(name, MetricUnit.Count, value);
      count(REFRESHER_METRIC_NAMES.active, report.connections.active);
      count(REFRESHER_METRIC_NAMES.paused, report.connections.paused);
      count(REFRESHER_METRIC_NAMES.failing, report.connections.failing);
      count(REFRESHER_METRIC_NAMES.refreshed, report.refreshed);
      count(REFRESHER_METRIC_NAMES.rotated, report.rotated);
      count(REFRESHER_METRIC_NAMES.failed, report.failed);
      count(REFRESHER_METRIC_NAMES.refused, report.refused);
      count(REFRESHER_METRIC_NAMES.keyUnavailable, report.keyUnavailable ? 1 : 0);
      logger.info('token refresher run', { trigger, ...report, tokenPace: tokens.rates() });
      return { trigger, ...report };
    } catch (error) {
      logger.error('token refresher run failed: the connections table could not be scanned', { trigger, error: describeError(error) });
      throw error;
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}
