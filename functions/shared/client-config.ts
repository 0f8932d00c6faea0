/**
 * Run-time configuration of the client API (functions/client-api) and of the eraser
 * (functions/connection-eraser), read and validated once when their module loads, with the names
 * (ENV) and rules of config.ts: every problem throws a ConfigError naming the variable.
 */
import {
  DEFAULTS,
  ENV,
  integer,
  kmsKeyArn,
  queueUrl,
  required,
  requiredInteger,
  s3Endpoint,
  stage,
  type ChangesConfig,
  type ConfiguredEndpoint,
  type Env,
  type MetricsConfig,
} from './config.js';

/** The longest safety wait before an erase (ERASE_SETTLE_SECONDS): past Lambda's 900 s and the token cache's 3,600 s. */
export const MAX_ERASE_SETTLE_SECONDS = 4_600;

export interface ApiConfig extends Pick<ChangesConfig, 'changesTableName'>, MetricsConfig {
  connectionsTableName: string;
  /** Seals a connection's refresh token when it is put (and opens the stored one to compare). */
  connectionsKeyArn: string;
  itemsTableName: string;
  itemsBucketName: string;
  /** The reconciler's cursor row (each connection's last pass). */
  controlTableName: string;
  /** The users' lane. */
  syncQueueUrl: string;
  /** The background lane. */
  reconcileQueueUrl: string;
  eraseQueueUrl: string;
  /** Context `freshnessHours` (a connection's `fresh`); 0: reconciliation off. */
  freshnessHours: number;
  /** The safety wait between a removal and its erase (the deployed sync's time-out: erase.ts). */
  eraseSettleSeconds: number;
  s3Endpoint: ConfiguredEndpoint | undefined;
}

export interface EraserConfig extends MetricsConfig {
  connectionsTableName: string;
  itemsTableName: string;
  itemsBucketName: string;
  /** The changes table: the connection's feed (its head row and its changes) is deleted with its rows. */
  changesTableName: string;
  /** Where an erase cut short sends itself again. */
  eraseQueueUrl: string;
}

export function loadApiConfig(env: Env = process.env): ApiConfig {
  return {
    connectionsTableName: required(env, ENV.connectionsTableName),
    connectionsKeyArn: kmsKeyArn(env, ENV.connectionsKeyArn),
    itemsTableName: required(env, ENV.itemsTableName),
    itemsBucketName: required(env, ENV.itemsBucketName),
    // The feed reads each change's own expiry: the retention is the sync's (CHANGES_RETENTION_DAYS).
    changesTableName: required(env, ENV.changesTableName),
    controlTableName: required(env, ENV.controlTableName),
    syncQueueUrl: queueUrl(env, ENV.syncQueueUrl),
    reconcileQueueUrl: queueUrl(env, ENV.reconcileQueueUrl),
    eraseQueueUrl: queueUrl(env, ENV.eraseQueueUrl),
    freshnessHours: integer(env, ENV.freshnessHours, DEFAULTS.freshnessHours, 0, 8760),
    // The stack sets it from the sync's time-out (at least 90): no default hides it.
    eraseSettleSeconds: requiredInteger(env, ENV.eraseSettleSeconds, 0, MAX_ERASE_SETTLE_SECONDS),
    s3Endpoint: s3Endpoint(env),
    stage: stage(env),
  };
}

export function loadEraserConfig(env: Env = process.env): EraserConfig {
  return {
    connectionsTableName: required(env, ENV.connectionsTableName),
    itemsTableName: required(env, ENV.itemsTableName),
    itemsBucketName: required(env, ENV.itemsBucketName),
    changesTableName: required(env, ENV.changesTableName),
    eraseQueueUrl: queueUrl(env, ENV.eraseQueueUrl),
    stage: stage(env),
  };
}
