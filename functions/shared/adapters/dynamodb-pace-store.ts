/**
 * A provider pace's shared state in the control table: one item per pace key, partition key `pk` =
 * `provider-pace#<pace key>` (the key the connection's access layer names: `client#<client id>` or
 * `connection#<connection id>`, PACE_SCOPE; the client id's row also holds the breaker of its
 * connections' paces under PACE_SCOPE=connection), holding `state` (the pace state as JSON text) and
 * `version` (a number raised by every write). Reads are strongly consistent; a write is conditional
 * on the version read, so that containers never overwrite each other's draws. Failures are thrown:
 * the pace then falls back to its local rate (provider-pace.ts).
 */
import { ConditionalCheckFailedException, GetItemCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { PaceStore } from '../provider/pace/provider-pace.js';
import type { PaceState } from '../provider/pace/pace-state.js';

/** The control table's partition key. */
export const CONTROL_TABLE_KEY = 'pk';
/** Every pace row's key value starts with this; the pace key follows. */
export const PACE_ROW_PREFIX = 'provider-pace#';

/** The control table's key value of the pace row of `paceKey`. */
export function paceRowKey(paceKey: string): string {
  return `${PACE_ROW_PREFIX}${paceKey}`;
}

export class DynamoDbPaceStore implements PaceStore {
  private readonly key: string;

  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
    /** The pace key (ConnectionGate.paceKey, or its breakerKey) whose row this is. */
    readonly paceKey: string,
  ) {
    this.key = paceRowKey(paceKey);
  }

  async read(): Promise<{ state: unknown; version: number } | undefined> {
    const output = await this.client.send(
      new GetItemCommand({
        TableName: this.tableName,
        Key: { [CONTROL_TABLE_KEY]: { S: this.key } },
        ConsistentRead: true,
      }),
    );
    const item = output.Item;
    if (!item) return undefined;
    const version = Number(item.version?.N);
    if (!Number.isSafeInteger(version) || version < 1) throw new Error('the pace row has no valid version');
    let state: unknown;
    try {
      state = JSON.parse(item.state?.S ?? '');
    } catch {
      state = undefined; // not a pace state: the pace starts afresh over it
    }
    return { state, version };
  }

  async write(state: PaceState, expectedVersion: number): Promise<'written' | 'conflict'> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            [CONTROL_TABLE_KEY]: { S: this.key },
            state: { S: JSON.stringify(state) },
            version: { N: String(expectedVersion + 1) },
          },
          ...(expectedVersion === 0
            ? { ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': CONTROL_TABLE_KEY } }
            : {
                ConditionExpression: '#version = :expected',
                ExpressionAttributeNames: { '#version': 'version' },
                ExpressionAttributeValues: { ':expected': { N: String(expectedVersion) } },
              }),
        }),
      );
      return 'written';
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return 'conflict';
      throw error;
    }
  }
}
