/**
 * The items table as the local run needs it: create it (partition key `connection`, sort key `id`,
 * as the stateful stack defines it), read every row back as plain JSON, keyed by rowKey.
 */
import { LOCAL_PAGE_ROWS } from './dynamodb-local.js';
import {
  CreateTableCommand,
  DescribeTableCommand,
  ResourceInUseException,
  ScanCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { fromAttributeValue } from '../../functions/item-sync/adapters/dynamodb-item-store.js';

/** One row of the items table (contract, "The items table"), unmarshalled. */
export interface ItemRow {
  connection: string;
  id: string;
  type?: string;
  revision?: string;
  item?: Record<string, unknown>;
  syncedAt?: string;
  deleted?: boolean;
  [attribute: string]: unknown;
}

/**
 * A row's key as one string: `<connection>/<id>` (a connection id has no `/`, so the first one
 * separates them).
 */
export function rowKey(connection: string, id: string): string {
  return `${connection}/${id}`;
}

/** Creates the items table (partition key `connection`, sort key `id`, strings; its stream of new and old images) unless it exists; waits until it is ACTIVE. */
export async function ensureItemsTable(dynamodb: DynamoDBClient, tableName: string): Promise<'created' | 'existed'> {
  let result: 'created' | 'existed' = 'created';
  try {
    await dynamodb.send(
      new CreateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [
          { AttributeName: 'connection', AttributeType: 'S' },
          { AttributeName: 'id', AttributeType: 'S' },
        ],
        KeySchema: [
          { AttributeName: 'connection', KeyType: 'HASH' },
          { AttributeName: 'id', KeyType: 'RANGE' },
        ],
        BillingMode: 'PAY_PER_REQUEST',
        // As the stateful stack defines it (infra/storage/storage.ts): the change events read it.
        StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
    result = 'existed';
  }
  await waitUntilActive(dynamodb, tableName);
  return result;
}

/** Waits until the table is ACTIVE (as in AWS, CreateTable may answer CREATING). */
export async function waitUntilActive(dynamodb: DynamoDBClient, tableName: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const described = await dynamodb.send(new DescribeTableCommand({ TableName: tableName }));
    if (described.Table?.TableStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`table ${tableName} did not become ACTIVE`);
}

/** Every row of the table, keyed by rowKey (a consistent scan, all pages). */
export async function readTable(dynamodb: DynamoDBClient, tableName: string): Promise<Map<string, ItemRow>> {
  const rows = new Map<string, ItemRow>();
  let startKey: Record<string, AttributeValue> | undefined;
  do {
    const page = await dynamodb.send(
      new ScanCommand({ TableName: tableName, ConsistentRead: true, Limit: LOCAL_PAGE_ROWS, ...(startKey ? { ExclusiveStartKey: startKey } : {}) }),
    );
    for (const raw of page.Items ?? []) {
      const row = fromAttributeValue({ M: raw }) as ItemRow;
      rows.set(rowKey(row.connection, row.id), row);
    }
    startKey = page.LastEvaluatedKey && Object.keys(page.LastEvaluatedKey).length > 0 ? page.LastEvaluatedKey : undefined;
  } while (startKey);
  return rows;
}

interface TableChanges {
  created: string[];
  updated: string[];
  deleted: string[];
}

/**
 * What a pass did to the table (row keys), from snapshots before and after: a row that appeared is created (or
 * deleted, if it appeared as a tombstone); a row whose `deleted` flag turned on is deleted; a row
 * whose revision changed (or that came back from deleted) is updated.
 */
export function diffTables(before: ReadonlyMap<string, ItemRow>, after: ReadonlyMap<string, ItemRow>): TableChanges {
  const changes: TableChanges = { created: [], updated: [], deleted: [] };
  for (const [key, row] of after) {
    const old = before.get(key);
    if (!old) {
      (row.deleted ? changes.deleted : changes.created).push(key);
    } else if (row.deleted && !old.deleted) {
      changes.deleted.push(key);
    } else if (!row.deleted && (old.deleted || old.revision !== row.revision)) {
      changes.updated.push(key);
    }
  }
  return changes;
}
