/**
 * The ItemRows port (../items.ts) on the items table (ITEMS_TABLE_NAME): one strongly consistent
 * GetItem by the key (`connection`, `id`), or for a page one strongly consistent Query of the
 * connection's partition from the id after which it starts; the row's `item` map read back exactly
 * (fromAttributeValue: numbers keep their JSON text). AWS failures as the other adapters name them:
 * a TransientError for throttling and 5xx, an Error naming the operation otherwise; never a value.
 */
import { GetItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { fromAttributeValue } from '../../item-sync/adapters/attribute-values.js';
import { readFailure } from '../../shared/errors.js';
import type { ItemRows, StoredItem } from '../items.js';

export class DynamoDbItemRows implements ItemRows {
  constructor(
    private readonly dynamodb: DynamoDBClient,
    private readonly table: string,
  ) {}

  async get(connection: string, id: string): Promise<StoredItem | undefined> {
    let output;
    try {
      output = await this.dynamodb.send(new GetItemCommand({ TableName: this.table, Key: { connection: { S: connection }, id: { S: id } }, ConsistentRead: true }));
    } catch (error) {
      throw this.failure('GetItem', error);
    }
    return output.Item ? storedItemOf(connection, id, output.Item) : undefined;
  }

  async page(connection: string, afterId: string | undefined, limit: number): Promise<{ rows: StoredItem[]; lastId?: string }> {
    let output;
    try {
      output = await this.dynamodb.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: '#connection = :connection',
          ExpressionAttributeNames: { '#connection': 'connection' },
          ExpressionAttributeValues: { ':connection': { S: connection } },
          ConsistentRead: true,
          Limit: limit,
          ...(afterId !== undefined ? { ExclusiveStartKey: { connection: { S: connection }, id: { S: afterId } } } : {}),
        }),
      );
    } catch (error) {
      throw this.failure('Query', error);
    }
    const rows = (output.Items ?? []).map((row) => storedItemOf(connection, row['id']?.S ?? '', row));
    const lastId = output.LastEvaluatedKey?.['id']?.S;
    return { rows, ...(lastId !== undefined ? { lastId } : {}) };
  }

  private failure(operation: string, error: unknown): Error {
    return readFailure(`DynamoDB ${operation} on the items table ${this.table}`, error);
  }
}

function storedItemOf(connection: string, id: string, row: Record<string, AttributeValue>): StoredItem {
  const objectKey = row['itemObject']?.M?.['key']?.S;
  return {
    connection,
    id,
    type: row['type']?.S ?? '',
    revision: row['revision']?.S ?? row['revision']?.N ?? '',
    syncedAt: row['syncedAt']?.S ?? '',
    ...(row['deleted']?.BOOL === true ? { deleted: true } : {}),
    ...(objectKey !== undefined ? { objectKey } : row['item'] !== undefined ? { item: fromAttributeValue(row['item']) as Record<string, unknown> } : {}),
  };
}
