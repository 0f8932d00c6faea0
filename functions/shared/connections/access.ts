/**
 * The item sync's ConnectionAccess, wired: the per-container cache of connection-access.ts over the
 * connections table (CONNECTIONS_TABLE_NAME, its tokens sealed under CONNECTIONS_KEY_ARN: sealed-connection-store.ts), its on-demand refreshes
 * paced by the token endpoint's pace (token-pace.ts: its rows in the control table,
 * CONTROL_TABLE_NAME, dynamodb-pace-store.ts). Built once per container, in the handler's module
 * scope, so the cache and the paces live as long as the container.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { KmsClientSource } from '../adapters/kms-data-keys.js';
import { sealedConnectionStore } from '../adapters/sealed-connection-store.js';
import { DynamoDbPaceStore } from '../adapters/dynamodb-pace-store.js';
import type { SyncConfig } from '../config.js';
import type { Clock, Log, ProviderClient } from '../ports.js';
import type { PaceStore } from '../provider/pace/provider-pace.js';
import { CachedConnectionAccess } from './connection-access.js';
import type { ConnectionAccess, ConnectionStore } from './ports.js';
import type { RefreshResult } from './refresh.js';
import { TokenPaces } from './token-pace.js';

/** getToken calls one item-sync container makes at once at most (one per connection of a batch being refreshed). */
export const ON_DEMAND_TOKEN_CONCURRENCY = 1;

export interface ConnectionAccessDeps {
  config: Pick<SyncConfig, 'connectionsTableName' | 'connectionsKeyArn' | 'controlTableName' | 'tokenRefreshMinutes' | 'tokenRequestsPerSecond' | 'tokenCacheSeconds' | 'connectionWaitSeconds' | 'paceScope'> & {
    provider: Pick<SyncConfig['provider'], 'timeoutMs'>;
  };
  dynamodb: DynamoDBClient;
  /** Opens the tokens (and seals those an on-demand refresh writes) under CONNECTIONS_KEY_ARN. */
  kms: KmsClientSource;
  provider: ProviderClient;
  clock: Clock;
  logger: Log;
  /** The connections table; default the DynamoDB adapter over `dynamodb`. */
  store?: ConnectionStore;
  /** Told of every on-demand refresh's result (REFRESHER_METRIC_NAMES counts). */
  onRefresh?: (result: RefreshResult) => void;
  /** Connections cached at most; default 5,000. */
  cacheSize?: number;
  /** The shared state of a token pace; default its row of the control table (`provider-pace#<pace key>`). */
  tokenPaceStoreFor?: (paceKey: string) => PaceStore;
  /** Waits (for a slot of the token pace, between attempts at a write); default real time. */
  sleep?: (ms: number) => Promise<void>;
}

export function createConnectionAccess(deps: ConnectionAccessDeps): ConnectionAccess {
  const { config } = deps;
  return new CachedConnectionAccess(
    {
      store: deps.store ?? sealedConnectionStore({ dynamodb: deps.dynamodb, kms: deps.kms, config }),
      provider: deps.provider,
      clock: deps.clock,
      log: deps.logger,
      tokens: new TokenPaces(
        {
          storeFor: deps.tokenPaceStoreFor ?? ((paceKey) => new DynamoDbPaceStore(deps.dynamodb, config.controlTableName, paceKey)),
          clock: deps.clock,
          log: deps.logger,
          ...(deps.sleep ? { sleep: deps.sleep } : {}),
        },
        { ceiling: config.tokenRequestsPerSecond, concurrency: ON_DEMAND_TOKEN_CONCURRENCY },
      ),
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
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
