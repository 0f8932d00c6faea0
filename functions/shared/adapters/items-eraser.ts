/**
 * The ItemsEraser port (functions/shared/connections/erase.ts) on the items table and bucket:
 * - rows: Query on the partition key `connection` (consistent, 1 MB pages), the object keys a
 *   page's rows name handed to the caller first (erase.ts deletes those that are the connection's
 *   with `deleteKeys`), then BatchWriteItem deletes of 25, unprocessed ones sent again with backoff;
 * - objects: every key under `items/<connection>/` (but a one-account deployment's key that a
 *   connection named like an id's hash would list: isOneAccountKey), DeleteObjects of up to 1,000;
 * - changes: the connection's partition of the changes table (its changes and its head), Query
 *   and BatchWriteItem deletes as for the rows.
 * Only that connection's partition and prefix are ever read or deleted. AWS failures are reported
 * by name and status only (never a row's values).
 */
import { BatchWriteItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient, type WriteRequest } from '@aws-sdk/client-dynamodb';
import { DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { backoffDelayMs } from '../backoff.js';
import type { EraseStep, ItemsEraser } from '../connections/erase.js';
import { awsErrorOf } from '../errors.js';

type Row = Record<string, AttributeValue>;

/** Attempts at a batch's unprocessed deletes before giving up. */
const BATCH_ATTEMPTS = 8;

/** A failed AWS call, named without its values. */
export class AwsCallError extends Error {
  override readonly name = 'AwsCallError';
}

export function awsFailure(what: string, error: unknown): AwsCallError {
  return new AwsCallError(`${what} failed (${awsErrorOf(error).summary})`);
}

export async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw awsFailure(what, error);
  }
}

/**
 * Whether a key listed under `items/<connection>/` is one a one-account deployment wrote for the
 * connection `default` (`items/<SHA-256 of the id>/<revision>/<file>`, imported rows keep it), not
 * the connection's: that happens only to a connection whose id is a 64-hex hash, whose own keys have
 * three parts under its prefix (`<SHA-256 of the id>/<revision>/<file>`), never two.
 */
export function isOneAccountKey(connection: string, key: string): boolean {
  return /^[0-9a-f]{64}$/.test(connection) && key.slice(objectPrefixOf(connection).length).split('/').length === 2;
}

/** The prefix of a connection's objects in the items bucket. */
export function objectPrefixOf(connection: string): string {
  return `items/${connection}/`;
}

export interface ItemsEraserDeps {
  dynamodb: DynamoDBClient;
  /** The S3 client, or how to get it when first needed (a module loaded lazily). */
  s3: S3Client | (() => Promise<S3Client>);
  itemsTable: string;
  itemsBucket: string;
  changesTable: string;
  sleep: (ms: number) => Promise<void>;
}

export class AwsItemsEraser implements ItemsEraser {
  private s3Client: Promise<S3Client> | undefined;

  constructor(private readonly deps: ItemsEraserDeps) {}

  private s3(): Promise<S3Client> {
    const { s3 } = this.deps;
    return (this.s3Client ??= typeof s3 === 'function' ? s3() : Promise.resolve(s3));
  }

  async deleteRows(connection: string, step: EraseStep & { beforeDelete(objectKeys: string[]): Promise<void> }): Promise<{ deleted: number; complete: boolean }> {
    return this.deletePartition(connection, { table: this.deps.itemsTable, what: 'the items table', sortKey: 'id', extra: ['itemObject'] }, step, async (rows) => {
      const objectKeys: string[] = [];
      for (const row of rows) {
        const key = row['itemObject']?.M?.['key']?.S;
        if (key !== undefined) objectKeys.push(key);
      }
      if (objectKeys.length > 0) await step.beforeDelete(objectKeys);
    });
  }

  async deleteChanges(connection: string, step: EraseStep): Promise<{ deleted: number; complete: boolean }> {
    return this.deletePartition(connection, { table: this.deps.changesTable, what: 'the changes table', sortKey: 'seq', extra: [] }, step);
  }

  /** Deletes a table's partition `connection`, page by page (a page's rows handed to `beforeDelete` first). */
  private async deletePartition(
    connection: string,
    table: { table: string; what: string; sortKey: string; extra: string[] },
    step: EraseStep,
    beforeDelete?: (rows: Row[]) => Promise<void>,
  ): Promise<{ deleted: number; complete: boolean }> {
    const { dynamodb } = this.deps;
    let deleted = 0;
    let start: Row | undefined;
    do {
      const page = await call(`DynamoDB Query on ${table.what} ${table.table}`, () =>
        dynamodb.send(
          new QueryCommand({
            TableName: table.table,
            KeyConditionExpression: '#connection = :connection',
            ProjectionExpression: ['#connection', '#sort', ...table.extra].join(', '),
            ExpressionAttributeNames: { '#connection': 'connection', '#sort': table.sortKey },
            ExpressionAttributeValues: { ':connection': { S: connection } },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        ),
      );
      const rows = page.Items ?? [];
      await beforeDelete?.(rows);
      for (let i = 0; i < rows.length; i += 25) {
        const requests = rows.slice(i, i + 25).map((row) => ({ DeleteRequest: { Key: { connection: row['connection']!, [table.sortKey]: row[table.sortKey]! } } }));
        await this.batchWrite(table, requests);
        deleted += requests.length;
      }
      await step.onProgress?.(deleted);
      start = page.LastEvaluatedKey;
    } while (start && !step.stop());
    return { deleted, complete: start === undefined };
  }

  async deleteKeys(keys: readonly string[]): Promise<number> {
    const all = [...new Set(keys)];
    for (let i = 0; i < all.length; i += 1000) await this.deleteChunk(all.slice(i, i + 1000));
    return all.length;
  }

  async deleteObjects(connection: string, step: EraseStep): Promise<{ deleted: number; complete: boolean }> {
    const { itemsBucket } = this.deps;
    const s3 = await this.s3();
    const prefix = objectPrefixOf(connection);
    const keys = new Set<string>();
    let token: string | undefined;
    do {
      const page = await call(`S3 ListObjectsV2 on the items bucket ${itemsBucket}`, () =>
        s3.send(new ListObjectsV2Command({ Bucket: itemsBucket, Prefix: prefix, ContinuationToken: token })),
      );
      for (const object of page.Contents ?? []) if (object.Key !== undefined && !isOneAccountKey(connection, object.Key)) keys.add(object.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    const all = [...keys];
    let deleted = 0;
    for (let i = 0; i < all.length; i += 1000) {
      if (i > 0 && step.stop()) return { deleted, complete: false };
      const chunk = all.slice(i, i + 1000);
      await this.deleteChunk(chunk);
      deleted += chunk.length;
      await step.onProgress?.(deleted);
    }
    return { deleted, complete: true };
  }

  /** One DeleteObjects of at most 1,000 keys; an error for any key it could not delete. */
  private async deleteChunk(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    const { itemsBucket } = this.deps;
    const s3 = await this.s3();
    const output = await call(`S3 DeleteObjects on the items bucket ${itemsBucket}`, () =>
      s3.send(new DeleteObjectsCommand({ Bucket: itemsBucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } })),
    );
    const errors = output.Errors ?? [];
    if (errors.length > 0) {
      const first = errors[0]!;
      throw new AwsCallError(`S3 DeleteObjects on the items bucket ${itemsBucket} could not delete ${errors.length} objects (first: ${first.Code ?? 'error'})`);
    }
  }

  private async batchWrite(table: { table: string; what: string }, requests: WriteRequest[]): Promise<void> {
    const { dynamodb } = this.deps;
    let pending = requests;
    for (let attempt = 1; pending.length > 0; attempt++) {
      const output = await call(`DynamoDB BatchWriteItem on ${table.what} ${table.table}`, () =>
        dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [table.table]: pending } })),
      );
      pending = output.UnprocessedItems?.[table.table] ?? [];
      if (pending.length === 0) return;
      if (attempt >= BATCH_ATTEMPTS) throw new AwsCallError(`DynamoDB BatchWriteItem on ${table.what} ${table.table} left ${pending.length} deletes unprocessed after ${attempt} attempts`);
      await this.deps.sleep(backoffDelayMs(attempt, { baseMs: 100, capMs: 5_000, jitter: 'equal' }, Math.random));
    }
  }
}
