/**
 * The items table's keys (docs/configuration.md, "The items table"), walked by parallel Scan
 * segments: projection `connection` and `id` only (the key), eventually consistent reads, `Limit`
 * rows per page. A page's LastEvaluatedKey is `{"connection": {"S": …}, "id": {"S": …}}`, the key of
 * the page's last row, and the core keeps it as such. The item count comes from DescribeTable
 * (DynamoDB refreshes it about every six hours).
 *
 * Failures (throttling that survived the SDK's retries, a missing table) are thrown: the tick fails
 * before anything of the page was sent or advanced, and the next tick reads the page again.
 */
import { DescribeTableCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ItemIds, ItemKey, Page, PageRequest } from '../ports.js';

export class DynamoDbItemIds implements ItemIds {
  constructor(
    private readonly client: DynamoDBClient,
    readonly tableName: string,
  ) {}

  async page(request: PageRequest): Promise<Page> {
    const output = await this.client.send(
      new ScanCommand({
        TableName: this.tableName,
        Segment: request.segment,
        TotalSegments: request.totalSegments,
        Limit: request.limit,
        ProjectionExpression: '#connection, #id',
        ExpressionAttributeNames: { '#connection': 'connection', '#id': 'id' },
        ...(request.after !== undefined
          ? { ExclusiveStartKey: { connection: { S: request.after.connection }, id: { S: request.after.id } } }
          : {}),
      }),
    );
    const keys: ItemKey[] = [];
    for (const row of output.Items ?? []) {
      const key = keyOf(row);
      if (key !== undefined) keys.push(key);
    }
    if (output.LastEvaluatedKey === undefined) return { keys };
    const after = keyOf(output.LastEvaluatedKey);
    if (after === undefined) throw new Error(`Scan of ${this.tableName} returned a LastEvaluatedKey without a string connection and id`);
    return { keys, after };
  }

  async approximateCount(): Promise<number | undefined> {
    const output = await this.client.send(new DescribeTableCommand({ TableName: this.tableName }));
    const count = output.Table?.ItemCount;
    return typeof count === 'number' && Number.isFinite(count) && count >= 0 ? count : undefined;
  }
}

/** The key of a row (or a LastEvaluatedKey): undefined unless both are strings. */
function keyOf(row: Record<string, AttributeValue>): ItemKey | undefined {
  const connection = row['connection']?.S;
  const id = row['id']?.S;
  return connection === undefined || id === undefined ? undefined : { connection, id };
}
