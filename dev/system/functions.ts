/**
 * The functions of the local system, each built as its handler.ts builds it (the app's factory,
 * its configuration read by the function's own loader from its environment) but from the local
 * deployment's environment and with the clients, clock and logs a scenario gives it. Each comes
 * with its deployed name, memory and time-out, which its invocations' contexts carry. The client
 * API's presigned URLs of the items bucket are signed with the S3 client it is given (the local
 * storage's: s3rver on 127.0.0.1, path-style, its key), so an `itemUrl` is one a plain GET reads
 * locally; in Lambda the function signs with its own role for the bucket in AWS.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { KMSClient } from '@aws-sdk/client-kms';
import type { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { Context } from 'aws-lambda';
import { createChangeEventsHandler, type ChangeEventsHandler } from '../../functions/change-events/app.js';
import { createChangesWriterHandler, type ChangesWriterHandler } from '../../functions/changes-writer/app.js';
import { createSyncHandler, type SyncHandler, type SyncHandlerDeps } from '../../functions/item-sync/app.js';
import { createReconcilerHandler, type ReconcilerHandler, type ReconcilerTuning } from '../../functions/reconciler/app.js';
import { createConnectionAccess } from '../../functions/shared/connections/access.js';
import { loadChangeEventsConfig, loadChangesWriterConfig, loadReconcilerConfig, loadRefresherConfig, loadSyncConfig, type ProviderConfig, type ReconcilerConfig } from '../../functions/shared/config.js';
import { SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import { createLogger } from '../../functions/shared/observability.js';
import { systemClock, type Clock } from '../../functions/shared/ports.js';
import { HttpProviderClient } from '../../functions/shared/provider/provider-client.js';
import { createRefresherHandler } from '../../functions/token-refresher/app.js';
import { createApiHandler, type ApiHandler } from '../../functions/client-api/app.js';
import type { ObjectLinks } from '../../functions/client-api/items.js';
import { createEraserHandler } from '../../functions/connection-eraser/app.js';
import { loadApiConfig, loadEraserConfig } from '../../functions/shared/client-config.js';
import type { FunctionDeployment } from '../../infra/deployment.js';
import { createContext } from '../fakes/lambda.js';
import type { Observability } from './observability.js';
import { kmsApi } from '../../functions/shared/adapters/kms-api.js';

export type RefresherHandler = ReturnType<typeof createRefresherHandler>;
export type EraserHandler = ReturnType<typeof createEraserHandler>;
export type { ApiHandler, ChangeEventsHandler, ChangesWriterHandler };

/** A function as built: its handler and what it is deployed with. */
export interface BuiltFunction<H> {
  readonly name: string;
  readonly handler: H;
  readonly memoryMb: number;
  readonly timeoutMs: number;
  readonly environment: Readonly<Record<string, string>>;
}

export const FUNCTION_NAMES = {
  refresher: 'content-sync-token-refresher',
  api: 'content-sync-client-api',
  eraser: 'content-sync-connection-eraser',
  sync: 'content-sync-item-sync',
  reconciler: 'content-sync-reconciler',
  changeEvents: 'content-sync-change-events',
  changesWriter: 'content-sync-changes-writer',
} as const;

/** What every function may be given instead of its defaults. */
interface CommonParts extends Partial<Observability> {
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
}

export interface RefresherParts extends CommonParts {
  dynamodb: DynamoDBClient;
  /** Seals and opens the tokens (the local KMS model). */
  kms: KMSClient;
  /** The provider reached through this fetch (a model in process); default the global fetch. */
  fetch?: typeof globalThis.fetch;
  /** [0, 1), for the token pace's jitter; default Math.random. */
  random?: () => number;
}

export interface SyncParts extends CommonParts, Pick<SyncHandlerDeps, 'paceStoreFor' | 'paceSettings' | 'random'> {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  kms: KMSClient;
  s3?: S3Client;
  fetch?: typeof globalThis.fetch;
}

export interface ApiParts extends CommonParts {
  dynamodb: DynamoDBClient;
  kms: KMSClient;
  sqs: SQSClient;
  /** Signs the presigned URLs of the items bucket; default the function's own client (the SDK's standard configuration, as in Lambda). */
  s3?: S3Client;
}

export interface EraserParts extends CommonParts {
  dynamodb: DynamoDBClient;
  s3: S3Client;
  sqs: SQSClient;
}

export interface ReconcilerParts extends CommonParts {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  /** Overrides of the reconciler's tuning (functions/reconciler/app.ts DEFAULT_TUNING). */
  tuning?: Partial<ReconcilerTuning>;
  /** Settings beyond what its variables allow (a bench's high-water mark above any table); default none. */
  beyondEnvironment?: Partial<ReconcilerConfig>;
}

export interface ChangeEventsParts extends CommonParts {
  /** The connections table's client (the connections' counters). */
  dynamodb: DynamoDBClient;
  /** The bus's client: no AWS backend models EventBridge, so a scenario answers it (in process, or metered). */
  eventbridge: EventBridgeClient;
}

export interface ChangesWriterParts extends CommonParts {
  /** The changes table's and the connections table's client. */
  dynamodb: DynamoDBClient;
  random?: () => number;
}

function built<H>(name: string, deployment: FunctionDeployment, handler: H): BuiltFunction<H> {
  return { name, handler, memoryMb: deployment.memoryMb, timeoutMs: deployment.timeoutSeconds * 1000, environment: deployment.environment };
}

function common(parts: CommonParts): CommonParts {
  const { clock, sleep, logger, metrics } = parts;
  return { ...(clock ? { clock } : {}), ...(sleep ? { sleep } : {}), ...(logger ? { logger } : {}), ...(metrics ? { metrics } : {}) };
}

/** The provider's client as handler.ts makes it, reaching the provider through `fetch` when given (a model in process). */
function providerClient(config: ProviderConfig, fetch: typeof globalThis.fetch | undefined): HttpProviderClient {
  return new HttpProviderClient(fetch ? { ...config, fetch } : config);
}

export function buildRefresher(deployment: FunctionDeployment, parts: RefresherParts, name: string = FUNCTION_NAMES.refresher): BuiltFunction<RefresherHandler> {
  const config = loadRefresherConfig(deployment.environment);
  const handler = createRefresherHandler({
    config,
    dynamodb: parts.dynamodb,
    kms: parts.kms,
    provider: providerClient(config.provider, parts.fetch),
    ...(parts.random ? { random: parts.random } : {}),
    ...common(parts),
  });
  return built(name, deployment, handler);
}

export function buildSyncContainer(deployment: FunctionDeployment, parts: SyncParts, name: string = FUNCTION_NAMES.sync): BuiltFunction<SyncHandler> {
  const config = loadSyncConfig(deployment.environment);
  // As handler.ts: one provider client and one logger for the batch and the connections' access.
  const provider = providerClient(config.provider, parts.fetch);
  const logger = parts.logger ?? createLogger(SYNC_SERVICE, { logLevel: config.logLevel, bufferDebug: true });
  const connections = createConnectionAccess({
    config,
    dynamodb: parts.dynamodb,
    kms: kmsApi(parts.kms),
    provider,
    clock: parts.clock ?? systemClock,
    logger,
    ...(parts.sleep ? { sleep: parts.sleep } : {}),
  });
  const handler = createSyncHandler({
    config,
    dynamodb: parts.dynamodb,
    sqs: parts.sqs,
    connections,
    provider,
    ...(parts.s3 ? { s3: parts.s3 } : {}),
    ...(parts.paceStoreFor ? { paceStoreFor: parts.paceStoreFor } : {}),
    ...(parts.paceSettings ? { paceSettings: parts.paceSettings } : {}),
    ...(parts.random ? { random: parts.random } : {}),
    ...common(parts),
    logger,
  });
  return built(name, deployment, handler);
}

export function buildApi(deployment: FunctionDeployment, parts: ApiParts, name: string = FUNCTION_NAMES.api): BuiltFunction<ApiHandler> {
  const config = loadApiConfig(deployment.environment);
  const { clock, logger, sleep } = parts;
  const handler = createApiHandler({
    config,
    dynamodb: parts.dynamodb,
    kms: parts.kms,
    sqs: parts.sqs,
    ...(parts.s3 ? { links: objectLinks(parts.s3, config.itemsBucketName) } : {}),
    ...(clock ? { clock } : {}),
    ...(logger ? { logger } : {}),
    ...(sleep ? { sleep } : {}),
  });
  return built(name, deployment, handler);
}

/** The client API's links over `s3`, its signer loaded at the first item held in the bucket (as the function loads its own). */
function objectLinks(s3: S3Client, bucket: string): ObjectLinks {
  let links: Promise<ObjectLinks> | undefined;
  return {
    urlFor: async (key, seconds) => {
      links ??= import('../../functions/client-api/adapters/s3-object-links.js').then((module) => new module.S3ObjectLinks(s3, bucket));
      return (await links).urlFor(key, seconds);
    },
  };
}

export function buildEraser(deployment: FunctionDeployment, parts: EraserParts, name: string = FUNCTION_NAMES.eraser): BuiltFunction<EraserHandler> {
  const config = loadEraserConfig(deployment.environment);
  const { clock, logger, sleep } = parts;
  const handler = createEraserHandler({
    config,
    dynamodb: parts.dynamodb,
    s3: parts.s3,
    sqs: parts.sqs,
    ...(clock ? { clock } : {}),
    ...(logger ? { logger } : {}),
    ...(sleep ? { sleep } : {}),
  });
  return built(name, deployment, handler);
}

export function buildReconciler(deployment: FunctionDeployment, parts: ReconcilerParts, name: string = FUNCTION_NAMES.reconciler): BuiltFunction<ReconcilerHandler> {
  const config = { ...loadReconcilerConfig(deployment.environment), ...parts.beyondEnvironment };
  const handler = createReconcilerHandler({
    config,
    dynamodb: parts.dynamodb,
    sqs: parts.sqs,
    ...(parts.tuning ? { tuning: parts.tuning } : {}),
    ...common(parts),
  });
  return built(name, deployment, handler);
}

/** The change-events function, fed by the items table's stream and the connections table's (event-sources.ts). */
export function buildChangeEvents(deployment: FunctionDeployment, parts: ChangeEventsParts, name: string = FUNCTION_NAMES.changeEvents): BuiltFunction<ChangeEventsHandler> {
  const config = loadChangeEventsConfig(deployment.environment);
  const handler = createChangeEventsHandler({ config, eventbridge: parts.eventbridge, dynamodb: parts.dynamodb, ...common(parts) });
  return built(name, deployment, handler);
}

/** The changes writer, fed by the items table's stream (event-sources.ts): each connection's changes feed. */
export function buildChangesWriter(deployment: FunctionDeployment, parts: ChangesWriterParts, name: string = FUNCTION_NAMES.changesWriter): BuiltFunction<ChangesWriterHandler> {
  const config = loadChangesWriterConfig(deployment.environment);
  const handler = createChangesWriterHandler({ config, dynamodb: parts.dynamodb, ...(parts.random ? { random: parts.random } : {}), ...common(parts) });
  return built(name, deployment, handler);
}

export interface InvocationOptions {
  /** The time the remaining time counts down in (a simulation's clock); default Date.now. */
  now?: () => number;
  awsRequestId?: string;
  logStreamName?: string;
  /** Another time-out than the deployed one (a bench's whole pass in one invocation). */
  timeoutMs?: number;
}

/** The context of one invocation of `fn`, its remaining time counting down from its time-out. */
export function invocationContext(fn: BuiltFunction<unknown>, region: string, options: InvocationOptions = {}): Context {
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? fn.timeoutMs;
  const deadline = now() + timeoutMs;
  return createContext(fn.name, region, timeoutMs, {
    remainingMs: () => deadline - now(),
    memoryMb: fn.memoryMb,
    ...(options.awsRequestId !== undefined ? { awsRequestId: options.awsRequestId } : {}),
    ...(options.logStreamName !== undefined ? { logStreamName: options.logStreamName } : {}),
  });
}
