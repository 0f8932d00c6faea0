/**
 * The items table's ids (docs/configuration.md, "The items table"), walked by parallel Scan segments: projection
 * `id` only, eventually consistent reads, `Limit` rows per page. The table's key is `id` alone, so a
 * page's LastEvaluatedKey is `{"id": {"S": <the page's last id>}}` and the core keeps just the id.
 * The item count comes from DescribeTable (DynamoDB refreshes it about every six hours).
 *
 * Failures (throttling that survived the SDK's retries, a missing table) are thrown: the tick fails
 * before anything of the page was sent or advanced, and the next tick reads the page again.
 */
import { DescribeTableCommand, ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ItemIds, Page, PageRequest } from '../ports.js';

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
        ProjectionExpression: '#id',
        ExpressionAttributeNames: { '#id': 'id' },
        ...(request.after !== undefined ? { ExclusiveStartKey: { id: { S: request.after } } } : {}),
      }),
    );
    const ids: string[] = [];
    for (const row of output.Items ?? []) {
      const id = row['id']?.S;
      if (id !== undefined) ids.push(id);
    }
    const after = output.LastEvaluatedKey?.['id']?.S;
    if (output.LastEvaluatedKey !== undefined && after === undefined) {
      throw new Error(`Scan of ${this.tableName} returned a LastEvaluatedKey without a string id`);
    }
    return { ids, ...(after !== undefined ? { after } : {}) };
  }

  async approximateCount(): Promise<number | undefined> {
    const output = await this.client.send(new DescribeTableCommand({ TableName: this.tableName }));
    const count = output.Table?.ItemCount;
    return typeof count === 'number' && Number.isFinite(count) && count >= 0 ? count : undefined;
  }
}
