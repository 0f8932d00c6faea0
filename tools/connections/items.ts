/**
 * The connections CLI's work on the items table and bucket:
 * - purge: a connection's rows in the items table (Query on the partition key `connection`,
 *   BatchWriteItem deletes of 25, unprocessed ones sent again with backoff) and its objects in the
 *   items bucket (every key under `items/<connection>/`, plus any other key its rows point to, as
 *   rows imported from a one-account table do; DeleteObjects of up to 1,000);
 * - import: every row of a one-account items table (key `id`) copied as the connection `default`,
 *   each with PutItem conditional on `attribute_not_exists(id)`, so a row the new deployment already
 *   wrote is kept. A row whose id breaks the item id rule (itemIdProblem: the old table's partition
 *   key held up to 2,048 bytes, the items table's sort key holds 1,024) is not written: it never could be.
 * AWS failures are reported by name and status only (never a row's values).
 */
import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  type AttributeValue,
  type DynamoDBClient,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { backoffDelayMs } from '../../functions/shared/backoff.js';
import { itemIdProblem } from '../../functions/item-sync/message.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';

type Row = Record<string, AttributeValue>;

/** Attempts at a batch's unprocessed deletes before giving up. */
const BATCH_ATTEMPTS = 8;
/** PutItem calls in flight at once during an import. */
const IMPORT_CONCURRENCY = 16;

export interface ItemsWork {
  dynamodb: DynamoDBClient;
  sleep: (ms: number) => Promise<void>;
  onProgress?: (line: string) => void;
}

/** A failed AWS call, named without its values. */
export class AwsCallError extends Error {
  override readonly name = 'AwsCallError';
}

export function awsFailure(what: string, error: unknown): AwsCallError {
  const { name, $metadata } = (error ?? {}) as { name?: string; $metadata?: { httpStatusCode?: number } };
  const status = $metadata?.httpStatusCode;
  return new AwsCallError(`${what} failed (${name ?? 'Error'}${status !== undefined ? `, HTTP ${status}` : ''})`);
}

async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw awsFailure(what, error);
  }
}

/**
 * Deletes every row of the connection in the items table; returns how many, and the object keys
 * they pointed to.
 */
export async function deleteConnectionRows(work: ItemsWork, itemsTable: string, connection: string): Promise<{ deleted: number; objectKeys: string[] }> {
  let deleted = 0;
  const objectKeys: string[] = [];
  let start: Row | undefined;
  do {
    const page = await call(`DynamoDB Query on the items table ${itemsTable}`, () =>
      work.dynamodb.send(
        new QueryCommand({
          TableName: itemsTable,
          KeyConditionExpression: '#connection = :connection',
          ProjectionExpression: '#connection, #id, itemObject',
          ExpressionAttributeNames: { '#connection': 'connection', '#id': 'id' },
          ExpressionAttributeValues: { ':connection': { S: connection } },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      ),
    );
    const rows = page.Items ?? [];
    for (const row of rows) {
      const key = row['itemObject']?.M?.['key']?.S;
      if (key !== undefined) objectKeys.push(key);
    }
    for (let i = 0; i < rows.length; i += 25) {
      const requests = rows.slice(i, i + 25).map((row) => ({ DeleteRequest: { Key: { connection: row['connection']!, id: row['id']! } } }));
      await batchWrite(work, itemsTable, requests);
      deleted += requests.length;
    }
    work.onProgress?.(`deleted ${deleted} rows`);
    start = page.LastEvaluatedKey;
  } while (start);
  return { deleted, objectKeys };
}

async function batchWrite(work: ItemsWork, table: string, requests: WriteRequest[]): Promise<void> {
  let pending = requests;
  for (let attempt = 1; pending.length > 0; attempt++) {
    const output = await call(`DynamoDB BatchWriteItem on the items table ${table}`, () =>
      work.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [table]: pending } })),
    );
    pending = output.UnprocessedItems?.[table] ?? [];
    if (pending.length === 0) return;
    if (attempt >= BATCH_ATTEMPTS) throw new AwsCallError(`DynamoDB BatchWriteItem on the items table ${table} left ${pending.length} deletes unprocessed after ${attempt} attempts`);
    await work.sleep(backoffDelayMs(attempt, { baseMs: 100, capMs: 5_000, jitter: 'equal' }, Math.random));
  }
}

/** Deletes every object under `items/<connection>/` and the given keys; returns how many were deleted. */
export async function deleteConnectionObjects(work: { s3: S3Client; onProgress?: (line: string) => void }, bucket: string, connection: string, extraKeys: readonly string[]): Promise<number> {
  const keys = new Set<string>(extraKeys);
  let token: string | undefined;
  do {
    const page = await call(`S3 ListObjectsV2 on the items bucket ${bucket}`, () =>
      work.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `items/${connection}/`, ContinuationToken: token })),
    );
    for (const object of page.Contents ?? []) if (object.Key !== undefined) keys.add(object.Key);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  const all = [...keys];
  let deleted = 0;
  for (let i = 0; i < all.length; i += 1000) {
    const chunk = all.slice(i, i + 1000);
    const output = await call(`S3 DeleteObjects on the items bucket ${bucket}`, () =>
      work.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true } })),
    );
    const errors = output.Errors ?? [];
    if (errors.length > 0) {
      const first = errors[0]!;
      throw new AwsCallError(`S3 DeleteObjects on the items bucket ${bucket} could not delete ${errors.length} objects (first: ${first.Code ?? 'error'} for ${first.Key ?? '?'})`);
    }
    deleted += chunk.length;
    work.onProgress?.(`deleted ${deleted} of ${all.length} objects`);
  }
  return deleted;
}

export interface ImportReport {
  /** Rows read from the old table. */
  read: number;
  copied: number;
  /** Rows the new table already held (written by the new deployment): kept. */
  kept: number;
  /** Rows without a string `id`: not copied. */
  skipped: number;
  /**
   * Rows whose id breaks the item id rule (itemIdProblem), with the rule's reason: not copied, and
   * no later run copies them (the items table cannot hold them; the item sync refuses such ids).
   */
  refused: Array<{ id: string; reason: string }>;
  /** Rows whose PutItem failed, with the reason (ids are not secrets): a later run may copy them. */
  failed: Array<{ id: string; reason: string }>;
}

/** Copies every row of the one-account table `fromTable` into `itemsTable` as the connection `default`. */
export async function importItems(work: ItemsWork, fromTable: string, itemsTable: string): Promise<ImportReport> {
  const report: ImportReport = { read: 0, copied: 0, kept: 0, skipped: 0, refused: [], failed: [] };
  let start: Row | undefined;
  do {
    const page = await call(`DynamoDB Scan on the old items table ${fromTable}`, () =>
      work.dynamodb.send(new ScanCommand({ TableName: fromTable, ConsistentRead: true, ExclusiveStartKey: start })),
    );
    const rows = page.Items ?? [];
    report.read += rows.length;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < rows.length) {
        const row = rows[next++]!;
        const id = row['id']?.S;
        if (id === undefined) {
          report.skipped += 1;
          continue;
        }
        const problem = itemIdProblem(id);
        if (problem !== undefined) {
          report.refused.push({ id, reason: problem });
          continue;
        }
        try {
          await work.dynamodb.send(
            new PutItemCommand({
              TableName: itemsTable,
              Item: { ...row, connection: { S: DEFAULT_CONNECTION } },
              ConditionExpression: 'attribute_not_exists(#id)',
              ExpressionAttributeNames: { '#id': 'id' },
            }),
          );
          report.copied += 1;
        } catch (error) {
          if (error instanceof ConditionalCheckFailedException) report.kept += 1;
          else report.failed.push({ id, reason: awsFailure('PutItem', error).message });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(IMPORT_CONCURRENCY, Math.max(1, rows.length)) }, worker));
    work.onProgress?.(`read ${report.read} rows: ${report.copied} copied, ${report.kept} kept`);
    start = page.LastEvaluatedKey;
  } while (start);
  return report;
}
