/**
 * DynamoDB (dynalite) and S3 (s3rver) for the local system: started in this process or in a child,
 * in memory or on disk, with the items table, the control table, the changes table, the connections
 * table and the items bucket the stateful stack defines.
 */
import { rmSync } from 'node:fs';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { startDynalite, type Dynalite } from '../fakes/dynalite.js';
import { startS3, type LocalS3 } from '../fakes/s3.js';
import type { LocalNames } from './names.js';

export interface StorageOptions {
  /** dynalite in this process (default) or in a child process (its CPU on another core). */
  where?: 'in-process' | 'child';
  /** Folder for dynalite's LevelDB files; in memory when undefined (or when the folder cannot be opened). */
  dynamodbPath?: string;
  /** Folder for the objects; a temporary one when undefined (or when DynamoDB ended up in memory). */
  s3Path?: string;
  /** Deletes both folders first. */
  fresh?: boolean;
  /** No items bucket (a scenario whose items all fit in a row). */
  noBucket?: boolean;
}

export interface Storage {
  readonly dynamo: Dynalite;
  /** 'disk' when dynalite keeps its data in `dynamodbPath`. */
  readonly dynamodbStorage: 'disk' | 'memory';
  readonly s3: LocalS3 | undefined;
  close(): Promise<void>;
}

/** Starts dynalite and s3rver and creates the tables and the bucket of `names`; on failure, stops what started. */
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
    await dynamo.createChangesTable(names.changesTable);
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

/** dynalite on disk when asked; in memory when the LevelDB folder cannot be opened (locked by another run, or no native binding). */
async function startDynamo(options: StorageOptions): Promise<{ dynamo: Dynalite; storage: 'disk' | 'memory' }> {
  const where = options.where ?? 'in-process';
  if (options.dynamodbPath) {
    const onDisk = await startDynalite({ path: options.dynamodbPath, proxy: false, where });
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
  return { dynamo: await startDynalite({ proxy: false, where }), storage: 'memory' };
}
