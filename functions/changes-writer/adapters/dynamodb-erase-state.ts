/**
 * Whether a connection's changes may still be numbered, from its row in the connections table: one
 * strongly consistent GetItem of the row's key and `erase` only (ProjectionExpression; the role may
 * read no other attribute: infra/changes-writer). No row, or an erase running or done, is no.
 */
import { GetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { readFailure } from '../../shared/errors.js';
import type { ConnectionGate } from '../ports.js';

/** The attributes of a connection's row the changes writer reads. */
export const CHANGES_WRITER_CONNECTION_ATTRIBUTES: readonly string[] = ['connection', 'erase'];

export class DynamoDbConnectionGate implements ConnectionGate {
  constructor(
    private readonly dynamodb: DynamoDBClient,
    private readonly tableName: string,
  ) {}

  async open(connection: string): Promise<boolean> {
    let output;
    try {
      output = await this.dynamodb.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: { connection: { S: connection } },
          ConsistentRead: true,
          ProjectionExpression: '#connection, #erase',
          ExpressionAttributeNames: { '#connection': 'connection', '#erase': 'erase' },
        }),
      );
    } catch (error) {
      throw readFailure(`DynamoDB GetItem of connection ${JSON.stringify(connection)} on the connections table ${this.tableName}`, error);
    }
    if (output.Item === undefined) return false;
    const state = output.Item['erase']?.M?.['state']?.S;
    return state !== 'running' && state !== 'done';
  }
}
