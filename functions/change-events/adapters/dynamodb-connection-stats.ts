/**
 * ConnectionStats on the connections table (CONNECTIONS_TABLE_NAME, partition key `connection`):
 * one UpdateItem per connection and batch, touching only `idsKnown` and `lastWriteAt` (the
 * function's role may update nothing else), never creating a row:
 *
 *   SET lastWriteAt = :lastWriteAt [ADD idsKnown :created]
 *   if attribute_exists(connection) AND (attribute_not_exists(lastWriteAt) OR lastWriteAt < :lastWriteAt)
 *
 * DynamoDB has no "max" in an update, so "only if newer" is the condition. When it fails and rows
 * were created, the count is added alone (`ADD idsKnown :created` if attribute_exists(connection)):
 * a second call, only when the stored last write is not older than the batch's (another
 * container's later batch was counted first). A failed condition of that one means the connection
 * has no row (removed and deleted): nothing to do. No ReturnValues: nothing of the row is read.
 */
import { ConditionalCheckFailedException, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ConnectionStats, ConnectionStatsUpdate } from '../ports.js';

export class DynamoDbConnectionStats implements ConnectionStats {
  constructor(
    private readonly client: DynamoDBClient,
    /** CONNECTIONS_TABLE_NAME. */
    readonly tableName: string,
  ) {}

  async record(update: ConnectionStatsUpdate): Promise<'written' | 'unchanged'> {
    const { connection, created, lastWriteAt } = update;
    const key = { connection: { S: connection } };
    if (lastWriteAt !== undefined) {
      const written = await this.conditional(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: key,
          UpdateExpression: created > 0 ? 'SET #lastWriteAt = :lastWriteAt ADD #idsKnown :created' : 'SET #lastWriteAt = :lastWriteAt',
          ConditionExpression: 'attribute_exists(#connection) AND (attribute_not_exists(#lastWriteAt) OR #lastWriteAt < :lastWriteAt)',
          ExpressionAttributeNames: {
            '#connection': 'connection',
            '#lastWriteAt': 'lastWriteAt',
            ...(created > 0 ? { '#idsKnown': 'idsKnown' } : {}),
          },
          ExpressionAttributeValues: {
            ':lastWriteAt': { S: lastWriteAt },
            ...(created > 0 ? { ':created': { N: String(created) } } : {}),
          },
        }),
      );
      if (written || created === 0) return written ? 'written' : 'unchanged';
    } else if (created === 0) {
      return 'unchanged';
    }
    const added = await this.conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: key,
        UpdateExpression: 'ADD #idsKnown :created',
        ConditionExpression: 'attribute_exists(#connection)',
        ExpressionAttributeNames: { '#connection': 'connection', '#idsKnown': 'idsKnown' },
        ExpressionAttributeValues: { ':created': { N: String(created) } },
      }),
    );
    return added ? 'written' : 'unchanged';
  }

  /** Sends the update: true when written, false when its condition failed; anything else is thrown. */
  private async conditional(command: UpdateItemCommand): Promise<boolean> {
    try {
      await this.client.send(command);
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException || (error as { name?: string })?.name === 'ConditionalCheckFailedException') return false;
      throw error;
    }
  }
}
