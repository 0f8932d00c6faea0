/**
 * The ChangesLog port (functions/shared/changes/feed.ts) on the changes table (CHANGES_TABLE_NAME):
 * partition key `connection` (S), sort key `seq` (N). Row `seq` 0 is the connection's head
 * (`head` N, `epoch` S); rows from 1 on are its changes (docs/changes.md, "The changes table").
 *
 * - head: one strongly consistent GetItem of `{connection, seq: 0}`;
 * - range: one strongly consistent Query, `seq` BETWEEN from AND to, at most `limit` rows (DynamoDB
 *   stops a page at 1 MB; the feed then answers fewer).
 *
 * A row that is not a change the log can hold (a kind outside the contract's, a missing
 * attribute) is an error naming its number, never its values. AWS failures as the other adapters
 * name them: a TransientError for throttling and 5xx, an Error naming the operation otherwise.
 */
import { GetItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CHANGE_KINDS, type ChangeKind } from '../changes/transition.js';
import type { ChangeRecord, ChangesLog, LogHead } from '../changes/feed.js';
import { readFailure } from '../errors.js';

/** The head's sort key: the change numbers start at 1. */
export const HEAD_SEQ = 0;

export class DynamoDbChangesLog implements ChangesLog {
  constructor(
    private readonly dynamodb: DynamoDBClient,
    private readonly table: string,
  ) {}

  async head(connection: string): Promise<LogHead | undefined> {
    let output;
    try {
      output = await this.dynamodb.send(
        new GetItemCommand({ TableName: this.table, Key: { connection: { S: connection }, seq: { N: String(HEAD_SEQ) } }, ConsistentRead: true }),
      );
    } catch (error) {
      throw this.failure('GetItem', error);
    }
    return headOf(output.Item);
  }

  async range(connection: string, from: number, to: number, limit: number): Promise<ChangeRecord[]> {
    let output;
    try {
      output = await this.dynamodb.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: '#connection = :connection AND #seq BETWEEN :from AND :to',
          ExpressionAttributeNames: { '#connection': 'connection', '#seq': 'seq' },
          ExpressionAttributeValues: { ':connection': { S: connection }, ':from': { N: String(from) }, ':to': { N: String(to) } },
          ConsistentRead: true,
          Limit: limit,
        }),
      );
    } catch (error) {
      throw this.failure('Query', error);
    }
    return (output.Items ?? []).map(changeOf);
  }

  private failure(operation: string, error: unknown): Error {
    return readFailure(`DynamoDB ${operation} on the changes table ${this.table}`, error);
  }
}

/** The head row as LogHead; undefined when there is none (no change yet). */
export function headOf(row: Record<string, AttributeValue> | undefined): LogHead | undefined {
  if (!row) return undefined;
  const head = Number(row['head']?.N);
  const epoch = row['epoch']?.S;
  if (!Number.isSafeInteger(head) || head < 0 || epoch === undefined || epoch === '') {
    throw new Error('the changes table holds a head row without a whole-number head and an epoch');
  }
  return { head, epoch };
}

function changeOf(row: Record<string, AttributeValue>): ChangeRecord {
  const seq = Number(row['seq']?.N);
  const change = row['change']?.S;
  const id = row['id']?.S;
  const revision = row['revision']?.S;
  const syncedAt = row['syncedAt']?.S;
  const expiresAt = Number(row['expiresAt']?.N);
  if (
    !Number.isSafeInteger(seq) ||
    !(CHANGE_KINDS as readonly string[]).includes(change ?? '') ||
    id === undefined ||
    revision === undefined ||
    syncedAt === undefined ||
    !Number.isFinite(expiresAt)
  ) {
    throw new Error(`the changes table holds change ${Number.isSafeInteger(seq) ? seq : '(no number)'} without the attributes a change has`);
  }
  return {
    seq,
    change: change as ChangeKind,
    id,
    type: row['type']?.S ?? null,
    revision,
    previousRevision: row['previousRevision']?.S ?? null,
    syncedAt,
    expiresAt,
  };
}
