/**
 * What `npm run enqueue` reads ids from: a file or standard input, one per line, and the keys
 * (connection and id) an items table holds (--resync-table: every row, or one connection's rows).
 * Sending them is functions/shared/adapters/sqs-enqueue.ts (the client API sends the same way),
 * re-exported here for the tool, the local run and the simulations.
 */
import { QueryCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';

export * from '../../functions/shared/adapters/sqs-enqueue.js';

// ---- reading ids --------------------------------------------------------------------------------

/**
 * Ids from a text stream, one per line: surrounding whitespace (and a CR) trimmed, blank lines
 * skipped. An id with leading or trailing spaces can still be given as an argument.
 */
export async function readIdLines(input: NodeJS.ReadableStream): Promise<string[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of input) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
  return Buffer.concat(chunks)
    .toString('utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

export interface ScanOptions {
  onProgress?: (scanned: number) => void;
  /** Items per page (Limit); default none (1 MB pages). */
  pageSize?: number;
  /** Only this connection's rows: a Query on the partition key instead of a Scan. */
  connection?: string;
}

/** An items-table row's key: partition key `connection`, sort key `id`. */
export interface TableKey {
  connection: string;
  id: string;
}

/**
 * The key (connection and id) of every row in the table, whatever the row holds (its item inline,
 * or `itemObject` for an item in the items bucket; deleted rows included), with pagination and a
 * projection on the key only: a Scan, or with `connection` a Query on the partition key (that
 * connection's rows only).
 */
export async function scanTableKeys(dynamodb: DynamoDBClient, tableName: string, options: ScanOptions = {}): Promise<TableKey[]> {
  const keys: TableKey[] = [];
  let startKey: Record<string, AttributeValue> | undefined;
  const read = {
    TableName: tableName,
    ProjectionExpression: '#connection, #id',
    ...(options.pageSize ? { Limit: options.pageSize } : {}),
  };
  do {
    const exclusive = startKey ? { ExclusiveStartKey: startKey } : {};
    const page =
      options.connection === undefined
        ? await dynamodb.send(new ScanCommand({ ...read, ExpressionAttributeNames: { '#connection': 'connection', '#id': 'id' }, ...exclusive }))
        : await dynamodb.send(
            new QueryCommand({
              ...read,
              KeyConditionExpression: '#connection = :connection',
              ExpressionAttributeNames: { '#connection': 'connection', '#id': 'id' },
              ExpressionAttributeValues: { ':connection': { S: options.connection } },
              ...exclusive,
            }),
          );
    for (const item of page.Items ?? []) {
      const connection = item['connection']?.S;
      const id = item['id']?.S;
      if (connection !== undefined && id !== undefined) keys.push({ connection, id });
    }
    options.onProgress?.(keys.length);
    startKey = page.LastEvaluatedKey && Object.keys(page.LastEvaluatedKey).length > 0 ? page.LastEvaluatedKey : undefined;
  } while (startKey);
  return keys;
}
