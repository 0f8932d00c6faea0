/**
 * The item sync's ConnectionAccess, wired: the per-container cache of connection-access.ts over the
 * connections table (CONNECTIONS_TABLE_NAME, dynamodb-connection-store.ts). Built once per
 * container, in the handler's module scope, so the cache lives as long as the container.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbConnectionStore } from '../adapters/dynamodb-connection-store.js';
import type { SyncConfig } from '../config.js';
import type { Clock, Log, ProviderClient } from '../ports.js';
import { CachedConnectionAccess } from './connection-access.js';
import type { ConnectionAccess, ConnectionStore } from './ports.js';
import type { RefreshResult } from './refresh.js';

export interface ConnectionAccessDeps {
  config: Pick<SyncConfig, 'connectionsTableName' | 'tokenRefreshMinutes' | 'tokenCacheSeconds' | 'connectionWaitSeconds' | 'paceScope'> & {
    provider: Pick<SyncConfig['provider'], 'timeoutMs'>;
  };
  dynamodb: DynamoDBClient;
  provider: ProviderClient;
  clock: Clock;
  logger: Log;
  /** The connections table; default the DynamoDB adapter over `dynamodb`. */
  store?: ConnectionStore;
  /** Told of every on-demand refresh's result (REFRESHER_METRIC_NAMES counts). */
  onRefresh?: (result: RefreshResult) => void;
  /** Connections cached at most; default 5,000. */
  cacheSize?: number;
}

export function createConnectionAccess(deps: ConnectionAccessDeps): ConnectionAccess {
  const { config } = deps;
  return new CachedConnectionAccess(
    {
      store: deps.store ?? new DynamoDbConnectionStore(deps.dynamodb, config.connectionsTableName),
      provider: deps.provider,
      clock: deps.clock,
      log: deps.logger,
      ...(deps.onRefresh ? { onRefresh: deps.onRefresh } : {}),
    },
    {
      paceScope: config.paceScope,
      tokenCacheSeconds: config.tokenCacheSeconds,
      tokenRefreshMinutes: config.tokenRefreshMinutes,
      connectionWaitSeconds: config.connectionWaitSeconds,
      providerTimeoutMs: config.provider.timeoutMs,
      ...(deps.cacheSize !== undefined ? { cacheSize: deps.cacheSize } : {}),
    },
  );
}
