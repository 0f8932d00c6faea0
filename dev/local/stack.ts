/**
 * The AWS side of a local run, on 127.0.0.1: DynamoDB (dynalite, its LevelDB files in a folder under
 * `.local/`) with the items and control tables, S3 (s3rver, its files next to dynalite's, or in a
 * temporary folder when DynamoDB is in memory) with the items bucket, SQS and Secrets Manager (the
 * local emulator) with the sync queue, the reconcile queue and their dead-letter queues. Hands out
 * clients for them and the functions' environment (the deployed variable names, the reconciler's
 * included); nothing is set in process.env.
 */
import { rmSync } from 'node:fs';
import { ListTablesCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { MAX_RECEIVE_COUNT } from '../../functions/shared/sync-queue.js';
import { AwsEmulator } from '../fakes/aws-emulator.js';
import { startDynalite, type Dynalite } from '../fakes/dynalite.js';
import { functionEnv } from '../fakes/lambda.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../fakes/local-aws.js';
import { startS3, type LocalS3 } from '../fakes/s3.js';

const NAMES = {
  table: 'content-sync-items-local',
  bucket: 'content-sync-items-local',
  controlTable: 'content-sync-control-local',
  queue: 'content-sync-items-local',
  deadLetterQueue: 'content-sync-items-local-dlq',
  reconcileQueue: 'content-sync-reconcile-local',
  reconcileDeadLetterQueue: 'content-sync-reconcile-local-dlq',
  credentialsSecret: 'content-sync/local/credentials',
  accessTokenSecret: 'content-sync/local/access-token',
} as const;

export interface LocalStackOptions {
  /** Folder for dynalite's LevelDB files; in memory when undefined. */
  dynamodbPath?: string;
  /** Folder for the S3 objects (kept with the table: rows point to them); a temporary one when undefined. */
  s3Path?: string;
  /** Deletes the folder first (a fresh table). */
  fresh?: boolean;
  providerBaseUrl: string;
  revisionField: string;
  /** The sync queue's visibility time-out in seconds: how long a retried record waits (the reconcile queue's too). */
  visibilityTimeoutSeconds: number;
}

/**
 * The reconciler's target pass length locally: 0, "the next pass starts as soon as one ends"
 * (docs/reconciler.md), so a run's ticks never wait for a day to pass. A run stops ticking once
 * its pass has ended.
 */
export const LOCAL_FRESHNESS_HOURS = 0;

export interface LocalStack {
  emulator: AwsEmulator;
  region: string;
  dynamodbEndpoint: string;
  /** 'disk' when dynalite keeps its data in `dynamodbPath`, 'memory' otherwise. */
  dynamodbStorage: 'disk' | 'memory';
  tableName: string;
  s3Endpoint: string;
  /** The items bucket: items too large for a row. */
  bucketName: string;
  queueUrl: string;
  queueArn: string;
  deadLetterQueueUrl: string;
  /** The reconcile queue (the sync's second event source) and its own dead-letter queue. */
  reconcileQueueUrl: string;
  reconcileQueueArn: string;
  reconcileDeadLetterQueueUrl: string;
  credentialsSecretId: string;
  accessTokenSecretId: string;
  dynamodb: DynamoDBClient;
  /** Path-style, for s3rver. */
  s3: S3Client;
  sqs: SQSClient;
  secrets: SecretsManagerClient;
  /** The functions' environment (no secret values in it), for the configuration loaders. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Starts everything; close() stops it. */
export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  if (options.dynamodbPath && options.fresh) rmSync(options.dynamodbPath, { recursive: true, force: true });
  if (options.s3Path && options.fresh) rmSync(options.s3Path, { recursive: true, force: true });
  const { dynalite, storage } = await startDynamoDb(options.dynamodbPath);
  let objects: LocalS3;
  let emulator: AwsEmulator;
  try {
    // The objects go with the table: on disk when it is, else in a temporary folder.
    objects = await startS3(storage === 'disk' && options.s3Path ? { directory: options.s3Path } : {});
  } catch (error) {
    await dynalite.close();
    throw error;
  }
  try {
    emulator = await AwsEmulator.start({ region: LOCAL_REGION });
  } catch (error) {
    await objects.close().catch(() => undefined);
    await dynalite.close();
    throw error;
  }
  const dynamodb = dynalite.client();
  const s3 = objects.client();
  const clientConfig = { endpoint: emulator.endpoint, region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
  const sqs = new SQSClient(clientConfig);
  const secrets = new SecretsManagerClient(clientConfig);
  const close = async (): Promise<void> => {
    for (const client of [dynamodb, s3, sqs, secrets]) client.destroy();
    await emulator.close().catch(() => undefined);
    await objects.close().catch(() => undefined);
    await dynalite.close().catch(() => undefined);
  };
  try {
    await dynalite.createItemsTable(NAMES.table);
    await dynalite.createControlTable(NAMES.controlTable);
    await objects.createBucket(NAMES.bucket);
    const queues = createQueues(emulator, options.visibilityTimeoutSeconds);
    return {
      emulator,
      region: LOCAL_REGION,
      dynamodbEndpoint: dynalite.endpoint,
      dynamodbStorage: storage,
      tableName: NAMES.table,
      s3Endpoint: objects.endpoint,
      bucketName: NAMES.bucket,
      ...queues,
      credentialsSecretId: NAMES.credentialsSecret,
      accessTokenSecretId: NAMES.accessTokenSecret,
      dynamodb,
      s3,
      sqs,
      secrets,
      env: functionEnv({
        baseUrl: options.providerBaseUrl,
        credentialsSecretId: NAMES.credentialsSecret,
        accessTokenSecretId: NAMES.accessTokenSecret,
        itemsTableName: NAMES.table,
        itemsBucketName: NAMES.bucket,
        controlTableName: NAMES.controlTable,
        revisionField: options.revisionField,
        deadLetterQueueUrl: queues.deadLetterQueueUrl,
        reconcileQueueUrl: queues.reconcileQueueUrl,
        freshnessHours: String(LOCAL_FRESHNESS_HOURS),
      }),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** dynalite on disk when asked; in memory when the LevelDB folder cannot be opened (locked by another run, or no native binding). */
async function startDynamoDb(path: string | undefined): Promise<{ dynalite: Dynalite; storage: 'disk' | 'memory' }> {
  if (path) {
    const onDisk = await startDynalite({ path, proxy: false });
    const probe = onDisk.client();
    try {
      await probe.send(new ListTablesCommand({}));
      return { dynalite: onDisk, storage: 'disk' };
    } catch {
      await onDisk.close();
    } finally {
      probe.destroy();
    }
  }
  return { dynalite: await startDynalite({ proxy: false }), storage: 'memory' };
}

type Queues = Pick<
  LocalStack,
  'queueUrl' | 'queueArn' | 'deadLetterQueueUrl' | 'reconcileQueueUrl' | 'reconcileQueueArn' | 'reconcileDeadLetterQueueUrl'
>;

/**
 * The sync queue and the reconcile queue, each with the deployed redrive policy (MAX_RECEIVE_COUNT
 * receives) to its own dead-letter queue (14 days' retention, as deployed), and the same visibility.
 */
function createQueues(emulator: AwsEmulator, visibilityTimeoutSeconds: number): Queues {
  const pair = (name: string, deadLetterName: string): { url: string; arn: string; deadLetterUrl: string } => {
    const deadLetterUrl = emulator.sqs.createQueue(deadLetterName, { MessageRetentionPeriod: String(14 * 86_400) });
    const url = emulator.sqs.createQueue(name, {
      VisibilityTimeout: String(visibilityTimeoutSeconds),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: emulator.sqs.queue(deadLetterName).arn, maxReceiveCount: MAX_RECEIVE_COUNT }),
    });
    return { url, arn: emulator.sqs.queue(name).arn, deadLetterUrl };
  };
  const sync = pair(NAMES.queue, NAMES.deadLetterQueue);
  const reconcile = pair(NAMES.reconcileQueue, NAMES.reconcileDeadLetterQueue);
  return {
    queueUrl: sync.url,
    queueArn: sync.arn,
    deadLetterQueueUrl: sync.deadLetterUrl,
    reconcileQueueUrl: reconcile.url,
    reconcileQueueArn: reconcile.arn,
    reconcileDeadLetterQueueUrl: reconcile.deadLetterUrl,
  };
}
