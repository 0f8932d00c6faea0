/**
 * The connections CLI's import: every row of a one-account items table (key `id`) copied as the
 * connection `default`, each with PutItem conditional on `attribute_not_exists(id)`, so a row the
 * new deployment already wrote is kept. A row whose id breaks the item id rule (itemIdProblem: the
 * old table's partition key held up to 2,048 bytes, the items table's sort key holds 1,024) is not
 * written: it never could be. AWS failures are reported by name and status only (never a row's
 * values). (A connection's erase, `remove --purge`, is functions/shared/connections/erase.ts over
 * functions/shared/adapters/items-eraser.ts.)
 */
import { ConditionalCheckFailedException, PutItemCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { itemIdProblem } from '../../functions/item-sync/message.js';
import { awsFailure, call } from '../../functions/shared/adapters/items-eraser.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';

export { AwsCallError, awsFailure } from '../../functions/shared/adapters/items-eraser.js';

type Row = Record<string, AttributeValue>;

/** PutItem calls in flight at once during an import. */
const IMPORT_CONCURRENCY = 16;

export interface ItemsWork {
  dynamodb: DynamoDBClient;
  sleep: (ms: number) => Promise<void>;
  onProgress?: (line: string) => void;
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
