/**
 * The AWS side of a local run, on 127.0.0.1: DynamoDB (dynalite, its LevelDB files in a folder under
 * `.local/`), Secrets Manager and SQS (local/aws-emulator.ts). Sets the process environment the way
 * the deployed functions see theirs (the same variable names, and the SDK's standard endpoint
 * variables pointing here), then imports the real handler modules: they read that environment when
 * they load, exactly as in Lambda.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Server } from 'node:http';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { SyncHandlerFn } from '../fakes/lambda.js';
import { AwsEmulator } from '../fakes/aws-emulator.js';
import { ensureItemsTable } from '../fakes/items-table.js';
import { listenOnLoopback } from '../fakes/loopback.js';

const require = createRequire(import.meta.url);

export const LOCAL_REGION = 'eu-west-1';
export const LOCAL_NAMES = {
  table: 'content-sync-items-local',
  queue: 'content-sync-items-local',
  deadLetterQueue: 'content-sync-items-local-dlq',
  credentialsSecret: 'content-sync/local/credentials',
  accessTokenSecret: 'content-sync/local/access-token',
} as const;
/** As the deployed sync queue (infra: MAX_RECEIVE_COUNT). */
export const MAX_RECEIVE_COUNT = 5;

export interface LocalStackOptions {
  /** Folder for dynalite's LevelDB files; in memory when undefined. */
  dynamodbPath?: string;
  /** Deletes the folder first (a fresh table). */
  fresh?: boolean;
  providerBaseUrl: string;
  revisionField: string;
  /** The sync queue's visibility time-out in seconds: how long a retried record waits. */
  visibilityTimeoutSeconds: number;
  /** Extra environment for the functions (optional tunables such as SYNC_FETCH_ATTEMPTS). */
  extraEnv?: Record<string, string>;
}

export type RefresherHandlerFn = (event: { trigger?: string } | null, context?: import('aws-lambda').Context) => Promise<
  { status: 'refreshed'; refreshedAt: string; rotated: boolean } | { status: 'skipped'; reason: string }
>;

export interface LocalStack {
  emulator: AwsEmulator;
  region: string;
  dynamodbEndpoint: string;
  /** 'disk' when dynalite keeps its data in `dynamodbPath`, 'memory' otherwise. */
  dynamodbStorage: 'disk' | 'memory';
  tableName: string;
  queueUrl: string;
  queueArn: string;
  deadLetterQueueUrl: string;
  credentialsSecretId: string;
  accessTokenSecretId: string;
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  secrets: SecretsManagerClient;
  /** The environment set for the functions (no secret values in it). */
  env: Record<string, string>;
  /** Imports the deployed handler modules (after the environment is set). */
  importHandlers(): Promise<{ refresher: RefresherHandlerFn; sync: SyncHandlerFn }>;
  close(): Promise<void>;
}

interface Dynalite extends Server {
  close(callback?: (error?: Error) => void): this;
}

async function startDynalite(path: string | undefined): Promise<{ server: Dynalite; endpoint: string }> {
  const dynalite = require('dynalite') as (options: Record<string, unknown>) => Dynalite;
  if (path) mkdirSync(path, { recursive: true });
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, ...(path ? { path } : {}) });
  return { server, endpoint: `http://127.0.0.1:${await listenOnLoopback(server)}` };
}

function closeDynalite(server: Dynalite): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections?.();
    server.close(() => resolve());
  });
}

const STANDARD_ENV_TO_CLEAR = ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_ENDPOINT_URL', 'AWS_DEFAULT_PROFILE'];

/**
 * Starts everything and sets process.env. The previous values of every variable it touches are
 * restored by close().
 */
export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const region = LOCAL_REGION;
  if (options.dynamodbPath && options.fresh) rmSync(options.dynamodbPath, { recursive: true, force: true });

  let storage: 'disk' | 'memory' = options.dynamodbPath ? 'disk' : 'memory';
  let dyn = await startDynalite(options.dynamodbPath);
  const emulator = await AwsEmulator.start({ region });

  const saved = new Map<string, string | undefined>();
  const setEnv = (name: string, value: string | undefined): void => {
    if (!saved.has(name)) saved.set(name, process.env[name]);
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  };
  const restoreEnv = (): void => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };

  const cleanups: Array<() => Promise<void>> = [() => emulator.close(), () => closeDynalite(dyn.server)];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups) await cleanup().catch(() => undefined);
    restoreEnv();
  };

  try {
    // Standard SDK configuration: dummy credentials, a region, and the endpoints of the local servers.
    for (const name of STANDARD_ENV_TO_CLEAR) setEnv(name, undefined);
    setEnv('AWS_REGION', region);
    setEnv('AWS_ACCESS_KEY_ID', 'local');
    setEnv('AWS_SECRET_ACCESS_KEY', 'local');
    setEnv('AWS_EC2_METADATA_DISABLED', 'true');
    setEnv('AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED', 'true');
    setEnv('AWS_ENDPOINT_URL_DYNAMODB', dyn.endpoint);
    setEnv('AWS_ENDPOINT_URL_SECRETS_MANAGER', emulator.endpoint);
    setEnv('AWS_ENDPOINT_URL_SQS', emulator.endpoint);

    const dynamodb = new DynamoDBClient({});
    try {
      await dynamodb.send(new ListTablesCommand({}));
    } catch (error) {
      if (storage !== 'disk') throw error;
      // The LevelDB folder cannot be opened (locked by another run, or no native binding): go on in memory.
      await closeDynalite(dyn.server);
      dyn = await startDynalite(undefined);
      storage = 'memory';
      setEnv('AWS_ENDPOINT_URL_DYNAMODB', dyn.endpoint);
      dynamodb.destroy();
    }
    const dynamodbClient = storage === 'disk' ? dynamodb : new DynamoDBClient({});
    await ensureItemsTable(dynamodbClient, LOCAL_NAMES.table);

    const deadLetterQueueUrl = emulator.sqs.createQueue(LOCAL_NAMES.deadLetterQueue, { MessageRetentionPeriod: String(14 * 86_400) });
    const queueUrl = emulator.sqs.createQueue(LOCAL_NAMES.queue, {
      VisibilityTimeout: String(options.visibilityTimeoutSeconds),
      RedrivePolicy: JSON.stringify({
        deadLetterTargetArn: emulator.sqs.queue(LOCAL_NAMES.deadLetterQueue).arn,
        maxReceiveCount: MAX_RECEIVE_COUNT,
      }),
    });

    const env: Record<string, string> = {
      PROVIDER_BASE_URL: options.providerBaseUrl,
      CREDENTIALS_SECRET_ID: LOCAL_NAMES.credentialsSecret,
      ACCESS_TOKEN_SECRET_ID: LOCAL_NAMES.accessTokenSecret,
      ITEMS_TABLE_NAME: LOCAL_NAMES.table,
      REVISION_FIELD: options.revisionField,
      DEAD_LETTER_QUEUE_URL: deadLetterQueueUrl,
      ...options.extraEnv,
    };
    for (const [name, value] of Object.entries(env)) setEnv(name, value);

    const sqs = new SQSClient({});
    const secrets = new SecretsManagerClient({});
    cleanups.unshift(async () => {
      dynamodbClient.destroy();
      sqs.destroy();
      secrets.destroy();
    });

    return {
      emulator,
      region,
      dynamodbEndpoint: dyn.endpoint,
      dynamodbStorage: storage,
      tableName: LOCAL_NAMES.table,
      queueUrl,
      queueArn: emulator.sqs.queue(LOCAL_NAMES.queue).arn,
      deadLetterQueueUrl,
      credentialsSecretId: LOCAL_NAMES.credentialsSecret,
      accessTokenSecretId: LOCAL_NAMES.accessTokenSecret,
      dynamodb: dynamodbClient,
      sqs,
      secrets,
      env,
      async importHandlers() {
        // The deployed modules: they read process.env and create their SDK clients when they load.
        const refresher = await import('../../functions/token-refresher/handler.js');
        const sync = await import('../../functions/item-sync/handler.js');
        return {
          refresher: refresher.handler as unknown as RefresherHandlerFn,
          sync: sync.handler as unknown as SyncHandlerFn,
        };
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
