/**
 * The whole sync system in virtual time, for scenarios hours long: the real item-sync handlers
 * (createSyncHandler, one per container, each with its own pace client and token cache), the real
 * token refresher on its schedule, the real provider client over the provider model (rate limit,
 * outages), the real DynamoDB adapters on dynalite (items table and control table), and the
 * harness's SQS and Secrets Manager models behind real SDK clients. Lambda's event source mapping
 * polls the sync queue (runEventSource) with the deployed batch size, time-out and concurrency.
 */
import { DynamoDBClient, CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { createSyncHandler, type SyncHandler } from '../../functions/item-sync/app.js';
import { CONTROL_TABLE_KEY } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { loadRefresherConfig, loadSyncConfig } from '../../functions/shared/config.js';
import { HttpProviderClient } from '../../functions/shared/provider-client.js';
import { createRefresherHandler } from '../../functions/token-refresher/app.js';
import { startDynalite, type Dynalite } from '../fakes/dynalite.js';
import { attachSecrets, attachSqs, InProcessEventSource } from '../fakes/in-process-aws.js';
import { createContext, functionEnv, runEventSource, type DrainResult } from '../fakes/lambda.js';
import { LOCAL_REGION } from '../fakes/local-aws.js';
import { SecretStore } from '../fakes/secrets-model.js';
import { SqsModel } from '../fakes/sqs-model.js';
import { generateItemTree } from '../simulator/item-tree.js';
import { ProviderModel, type RateLimit } from '../simulator/provider-model.js';
import { modelFetch } from './model-fetch.js';
import { VirtualClock } from './virtual-clock.js';

/** As deployed (infra): maxReceiveCount of the sync queue, its visibility time-out, the function's time-out. */
export const MAX_RECEIVE_COUNT = 5;
export const FUNCTION_TIMEOUT_MS = 60_000;
export const VISIBILITY_TIMEOUT_SECONDS = 6 * 60;

export interface SystemOptions {
  ids: number;
  seed: number;
  /** The provider's limit (unknown to the system unless `knownLimit`). */
  rateLimit?: RateLimit;
  /** The operator's providerRequestsPerSecond. */
  knownLimit?: number;
  containers: number;
  providerLatencyMs: number;
  /** Virtual round trip of a DynamoDB call (pace draws and the items table). */
  dynamoRoundTripMs: number;
  tokenRefreshMinutes: number;
}

export interface SimSystem {
  clock: VirtualClock;
  provider: ProviderModel;
  sqs: SqsModel;
  secrets: SecretStore;
  dynamo: Dynalite;
  client: DynamoDBClient;
  ids: string[];
  queueUrl: string;
  dlqUrl: string;
  handlers: SyncHandler[];
  /** Polls the sync queue until `stop()` (or the queue is empty and `finished()`), in virtual time. */
  pollUntil(stop: () => boolean): Promise<DrainResult>;
  /** Runs the token refresher once (as its schedule does). */
  refresh(): Promise<unknown>;
  close(): Promise<void>;
}

export const ITEMS_TABLE = 'items';
export const CONTROL_TABLE = 'control';
const QUEUE = 'sync-queue';
const DLQ = 'sync-dlq';
const TOKEN_SECRET = 'access-token';
const CREDENTIALS_SECRET = 'credentials';

export async function startSystem(options: SystemOptions): Promise<SimSystem> {
  const clock = new VirtualClock();
  const items = generateItemTree({ count: options.ids, seed: options.seed });
  const provider = new ProviderModel({
    items,
    latencyMs: options.providerLatencyMs,
    now: () => clock.ms(),
    seed: options.seed,
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
  });
  const fetch = modelFetch(provider, clock);
  const sqs = new SqsModel({ clock: clock.asFakeClock() });
  const dlqUrl = sqs.createQueue(DLQ);
  const queueUrl = sqs.createQueue(QUEUE, {
    VisibilityTimeout: String(VISIBILITY_TIMEOUT_SECONDS),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: sqs.queue(DLQ).arn, maxReceiveCount: MAX_RECEIVE_COUNT }),
  });
  const secrets = new SecretStore({ clock: clock.asFakeClock() });
  secrets.set(CREDENTIALS_SECRET, JSON.stringify({ clientId: provider.clientId, refreshToken: provider.refreshToken }));
  secrets.set(TOKEN_SECRET, JSON.stringify({ accessToken: provider.issueAccessToken(), refreshedAt: clock.now().toISOString() }));

  const dynamo = await startDynalite({ proxy: false });
  const client = trackedDynamo(dynamo, clock, options.dynamoRoundTripMs);
  await dynamo.createItemsTable(ITEMS_TABLE);
  await createControlTable(dynamo.client()); // before virtual time runs: a plain client

  const env = functionEnv({
    baseUrl: 'http://127.0.0.1:1/api/v2',
    accessTokenSecretId: TOKEN_SECRET,
    credentialsSecretId: CREDENTIALS_SECRET,
    itemsTableName: ITEMS_TABLE,
    // Items here are small: the sync never loads its S3 adapter (none is given a client).
    itemsBucketName: 'items-bucket',
    revisionField: 'revision',
    deadLetterQueueUrl: dlqUrl,
    controlTableName: CONTROL_TABLE,
    ...(options.knownLimit !== undefined ? { providerRequestsPerSecond: String(options.knownLimit) } : {}),
  });
  const sqsClient = attachSqs(new SQSClient({ region: LOCAL_REGION, credentials: { accessKeyId: 'sim', secretAccessKey: 'sim' } }), sqs);
  const secretsClient = attachSecrets(
    new SecretsManagerClient({ region: LOCAL_REGION, credentials: { accessKeyId: 'sim', secretAccessKey: 'sim' } }),
    secrets,
  );
  const quiet = quietLogger();
  const syncConfig = loadSyncConfig(env);
  const handlers = Array.from({ length: options.containers }, () =>
    createSyncHandler({
      config: syncConfig,
      dynamodb: client,
      sqs: sqsClient,
      secrets: secretsClient,
      provider: new HttpProviderClient({ ...syncConfig.provider, fetch }),
      clock,
      sleep: clock.sleep,
      logger: quiet.logger,
      metrics: quiet.metrics,
    }),
  );
  const refresher = createRefresherHandler({
    config: loadRefresherConfig(env),
    secrets: secretsClient,
    provider: new HttpProviderClient({ ...loadRefresherConfig(env).provider, fetch }),
    clock,
    logger: quiet.logger,
    metrics: quiet.metrics,
  });

  const queue = new InProcessEventSource(sqs, QUEUE, 20);
  const context = (): Context => {
    const deadline = clock.ms() + FUNCTION_TIMEOUT_MS;
    return createContext('content-sync-item-sync', LOCAL_REGION, FUNCTION_TIMEOUT_MS, { remainingMs: () => deadline - clock.ms() });
  };

  let refreshing = true;
  const scheduleRefresh = (): void => {
    clock.at(clock.ms() + options.tokenRefreshMinutes * 60_000, () => {
      if (!refreshing) return;
      void refresher({ trigger: 'schedule' }).catch(() => undefined);
      scheduleRefresh();
    });
  };
  scheduleRefresh();

  return {
    clock,
    provider,
    sqs,
    secrets,
    dynamo,
    client,
    ids: items.map((item) => item.id),
    queueUrl,
    dlqUrl,
    handlers,
    async pollUntil(stop) {
      const run = runEventSource({
        queue,
        handlers,
        context,
        now: () => clock.ms(),
        timeLimitMs: Number.MAX_SAFE_INTEGER / 2,
        stop,
        finished: () => false,
      });
      const ended = new Promise<DrainResult>((resolve) => void run.then(resolve));
      let result: DrainResult | undefined;
      void ended.then((r) => (result = r));
      await clock.run(Number.MAX_SAFE_INTEGER, () => result !== undefined || (stop() && queueIdle(sqs)));
      sqs.close(); // ends the long polls
      await clock.run(clock.ms() + 60_000, () => result !== undefined);
      return ended;
    },
    refresh: () => refresher({ trigger: 'schedule' }),
    async close() {
      refreshing = false;
      await dynamo.close();
    },
  };
}

function queueIdle(_sqs: SqsModel): boolean {
  return true;
}

async function createControlTable(client: DynamoDBClient): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: CONTROL_TABLE,
      AttributeDefinitions: [{ AttributeName: CONTROL_TABLE_KEY, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: CONTROL_TABLE_KEY, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
}

/** A DynamoDB client whose calls hold virtual time still while dynalite answers, then take `roundTripMs` of it. */
function trackedDynamo(dynamo: Dynalite, clock: VirtualClock, roundTripMs: number): DynamoDBClient {
  const client = dynamo.client();
  client.middlewareStack.add(
    (next) => async (args) => {
      const result = await clock.track(next(args));
      if (roundTripMs > 0) await clock.sleep(roundTripMs);
      return result;
    },
    { step: 'initialize', priority: 'high', name: 'virtualTime' },
  );
  return client;
}

/** Logger and metrics that keep nothing: a simulation counts what happens itself. */
function quietLogger(): { logger: never; metrics: never } {
  const noop = (): void => undefined;
  const logger = { debug: noop, info: noop, warn: noop, error: noop, addContext: noop, appendKeys: noop } as unknown as never;
  const metrics = { addMetric: noop, publishStoredMetrics: noop, addDimension: noop } as unknown as never;
  return { logger, metrics };
}
