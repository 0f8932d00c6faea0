/**
 * The ItemRows port (../items.ts) on the items table (ITEMS_TABLE_NAME): one strongly consistent
 * GetItem by the key (`connection`, `id`), the row's `item` map read back exactly
 * (fromAttributeValue: numbers keep their JSON text). AWS failures as the other adapters name them:
 * a TransientError for throttling and 5xx, an Error naming the operation otherwise; never a value.
 */
import { GetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { fromAttributeValue } from '../../item-sync/adapters/attribute-values.js';
import { awsErrorOf, TransientError } from '../../shared/errors.js';
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
      const { name, status, summary } = awsErrorOf(error);
      const message = `DynamoDB GetItem on the items table ${this.table} failed (${summary})`;
      throw status === undefined || status >= 500 || name === 'ProvisionedThroughputExceededException' || name === 'ThrottlingException' ? new TransientError(message) : new Error(message);
    }
    const row = output.Item;
    if (!row) return undefined;
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
}
