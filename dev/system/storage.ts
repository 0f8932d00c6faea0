/**
 * DynamoDB (AWS's DynamoDB Local) and S3 (s3rver) for the local system: in memory or on disk, with the items table, the control table, the changes table, the connections
 * table and the items bucket the stateful stack defines.
 */
import { rmSync } from 'node:fs';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { JavaMissingError } from '../fakes/dynamodb-local.js';
import { startLocalDynamo, type LocalDynamoDb } from '../fakes/local-dynamo.js';
import { startS3, type LocalS3 } from '../fakes/s3.js';
import type { LocalNames } from './names.js';

export interface StorageOptions {
  /** Folder for DynamoDB Local's database files (a server of its own); in memory when undefined (or when the folder cannot be opened). */
  dynamodbPath?: string;
  /** Folder for the objects; a temporary one when undefined (or when DynamoDB ended up in memory). */
  s3Path?: string;
  /** Deletes both folders first. */
  fresh?: boolean;
  /** DynamoDB's folder is removed when its server stops, however the run ends. */
  dynamodbTemporary?: boolean;
  /**
   * The changes table's time to live on, as deployed: DynamoDB Local then deletes expired changes
   * by the wall clock. Only for a run on the wall clock (the local run); off by default.
   */
  changesTimeToLive?: boolean;
  /** No items bucket (a scenario whose items all fit in a row). */
  noBucket?: boolean;
  /** How DynamoDB Local's JVM compiles, when this run starts one (ServerOptions.jit); default `full`. */
  jit?: 'quick' | 'full';
}

export interface Storage {
  readonly dynamo: LocalDynamoDb;
  /** 'disk' when DynamoDB Local keeps its data in `dynamodbPath`. */
  readonly dynamodbStorage: 'disk' | 'memory';
  readonly s3: LocalS3 | undefined;
  close(): Promise<void>;
}

/** Starts DynamoDB Local (or opens a namespace on the run's) and s3rver and creates the tables and the bucket of `names`; on failure, stops what started. */
export async function startStorage(names: LocalNames, options: StorageOptions = {}): Promise<Storage> {
  if (options.fresh) {
    for (const path of [options.dynamodbPath, options.s3Path]) if (path) rmSync(path, { recursive: true, force: true });
  }
  const { dynamo, storage } = await startDynamo(options);
  let s3: LocalS3 | undefined;
  const close = async (): Promise<void> => {
    await s3?.close().catch(() => undefined);
    await dynamo.close().catch(() => undefined);
  };
  try {
    await dynamo.createItemsTable(names.itemsTable);
    await dynamo.createControlTable(names.controlTable);
    await dynamo.createChangesTable(names.changesTable, { timeToLive: options.changesTimeToLive === true });
    await dynamo.createConnectionsTable(names.connectionsTable);
    if (!options.noBucket) {
      // The objects go with the table: on disk when it is, else in a temporary folder.
      s3 = await startS3(storage === 'disk' && options.s3Path ? { directory: options.s3Path } : {});
      await s3.createBucket(names.itemsBucket);
    }
    return { dynamo, dynamodbStorage: storage, s3, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * DynamoDB Local on disk when asked (a server of its own, its tables under one fixed namespace so
 * that the next run finds them); in memory when the folder cannot be used.
 */
async function startDynamo(options: StorageOptions): Promise<{ dynamo: LocalDynamoDb; storage: 'disk' | 'memory' }> {
  if (options.dynamodbPath) {
    const onDisk = await startLocalDynamo({ path: options.dynamodbPath, temporary: options.dynamodbTemporary === true, proxy: false, namespace: DISK_NAMESPACE, ...jitOf(options) }).catch(rethrowJava);
    if (onDisk) {
      const probe = onDisk.client();
      try {
        await probe.send(new ListTablesCommand({}));
        return { dynamo: onDisk, storage: 'disk' };
      } catch {
        await onDisk.close();
      } finally {
        probe.destroy();
      }
    }
  }
  return { dynamo: await startLocalDynamo({ proxy: false, ...jitOf(options) }), storage: 'memory' };
}

function jitOf(options: StorageOptions): { jit?: 'quick' | 'full' } {
  return options.jit ? { jit: options.jit } : {};
}

/** The namespace (access key) of the tables kept on disk. */
const DISK_NAMESPACE = 'localrun';

/** Java missing stops the run; any other failure to start on disk falls back to memory (undefined). */
function rethrowJava(error: unknown): undefined {
  if (error instanceof JavaMissingError) throw error;
  return undefined;
}
