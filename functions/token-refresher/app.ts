/**
 * The token refresher's handler, built from its dependencies: scheduled by EventBridge Scheduler, and
 * run once at deploy time (event `{"trigger": "deploy"}`). Thin: wire the adapters, call the core,
 * map the result. A deploy-time run while the credentials still hold the placeholder returns
 * `skipped` instead of failing the deploy; every other failure fails the invocation.
 * handler.ts builds it once per container from the environment.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import type { RefresherConfig } from '../shared/config.js';
import { CredentialsNotConfiguredError } from '../shared/errors.js';
import { REFRESHER_METRIC_NAMES, REFRESHER_SERVICE } from '../shared/metric-names.js';
import { createLogger, createMetrics, describeError } from '../shared/observability.js';
import { HttpProviderClient } from '../shared/provider/provider-client.js';
import { SecretsManagerAccessTokenStore } from '../shared/adapters/secrets-manager.js';
import { SecretsManagerCredentialsStore } from './adapters/secrets-manager.js';
import { systemClock, type Clock, type ProviderClient } from '../shared/ports.js';
import { refreshAccessToken } from './refresh.js';

export interface RefresherEvent {
  /** `deploy` when run by the deployment; anything else (or nothing) is a scheduled run. */
  trigger?: string;
}

export type RefresherResult =
  | { status: 'refreshed'; refreshedAt: string; rotated: boolean }
  | { status: 'skipped'; reason: string };

export interface RefresherHandlerDeps {
  config: RefresherConfig;
  secrets: SecretsManagerClient;
  provider?: ProviderClient;
  clock?: Clock;
  logger?: ReturnType<typeof createLogger>;
  metrics?: ReturnType<typeof createMetrics>;
}

export function createRefresherHandler(deps: RefresherHandlerDeps) {
  const logger = deps.logger ?? createLogger(REFRESHER_SERVICE);
  const metrics = deps.metrics ?? createMetrics(REFRESHER_SERVICE);
  const core = {
    provider: deps.provider ?? new HttpProviderClient(deps.config.provider),
    credentials: new SecretsManagerCredentialsStore(deps.secrets, deps.config.credentialsSecretId),
    accessTokens: new SecretsManagerAccessTokenStore(deps.secrets, deps.config.accessTokenSecretId),
    clock: deps.clock ?? systemClock,
    log: logger,
  };

  return async function handler(event: RefresherEvent | null | undefined, context?: Context): Promise<RefresherResult> {
    if (context) logger.addContext(context);
    const trigger = event?.trigger === 'deploy' ? 'deploy' : 'schedule';
    try {
      const result = await refreshAccessToken(core);
      metrics.addMetric(REFRESHER_METRIC_NAMES.refreshed, MetricUnit.Count, 1);
      if (result.rotated) metrics.addMetric(REFRESHER_METRIC_NAMES.rotated, MetricUnit.Count, 1);
      return { status: 'refreshed', ...result };
    } catch (error) {
      if (trigger === 'deploy' && error instanceof CredentialsNotConfiguredError) {
        logger.warn('token refresh skipped at deploy: credentials not configured yet', { error: describeError(error) });
        return { status: 'skipped', reason: error.message };
      }
      metrics.addMetric(REFRESHER_METRIC_NAMES.failed, MetricUnit.Count, 1);
      logger.error('token refresh failed', { trigger, error: describeError(error) });
      throw error;
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}
