/**
 * The transactions the item sync sent before the changes writer numbered the items table's stream
 * (its change outbox, since removed: the sync now writes each row with one PutItem or UpdateItem),
 * for the tests of the harness's stream readers and meter on DynamoDB Local, which still read
 * transactions: an items-table row (partition `connection`, sort `id`), its change in the changes
 * table (partition `connection`, sort `seq`, a number) and the connection's head (`seq` 0), in one
 * request; `putRow` and `markDeleted` are the sync's row writes (their conditions as
 * dynamodb-item-store.ts sends them); and the records those tests read, as they compare them.
 */
import {
  CreateTableCommand,
  GetItemCommand,
  TransactWriteItemsCommand,
  type AttributeValue,
  type CancellationReason,
  type DynamoDBClient,
  type TransactWriteItem,
  type TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import type { LambdaStreamRecord } from '../../../dev/fakes/dynamodb-stream.js';
import type { LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';

export const ITEMS = 'items-table';
export const CHANGES = 'changes-table';
export const CONDITION_FAILED = { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' };
export const NONE = { Code: 'None' };

export type Row = Record<string, AttributeValue>;

/** The items table and the changes table, as the stateful stack keys them. */
export async function createTables(dynamo: LocalDynamoDb): Promise<void> {
  await dynamo.createItemsTable(ITEMS);
  const admin = dynamo.client();
  try {
    await admin.send(
      new CreateTableCommand({
        TableName: CHANGES,
        AttributeDefinitions: [
          { AttributeName: 'connection', AttributeType: 'S' },
          { AttributeName: 'seq', AttributeType: 'N' },
        ],
        KeySchema: [
          { AttributeName: 'connection', KeyType: 'HASH' },
          { AttributeName: 'seq', KeyType: 'RANGE' },
        ],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
  } finally {
    admin.destroy();
  }
}

export function itemRow(connection: string, id: string, revision: string, extra: Row = {}): Row {
  return { connection: { S: connection }, id: { S: id }, revision: { S: revision }, ...extra };
}

/** Put of an items row, on condition that there is none (`attribute_not_exists`) or that it has `expected` as revision. */
export function putRow(row: Row, expected?: string): TransactWriteItem {
  return {
    Put: {
      TableName: ITEMS,
      Item: row,
      ...(expected === undefined
        ? { ConditionExpression: 'attribute_not_exists(#id)', ExpressionAttributeNames: { '#id': 'id' } }
        : {
            ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
            ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
            ExpressionAttributeValues: { ':expected': { S: expected } },
          }),
    },
  };
}

/** Update marking an items row deleted, on condition that it has `expected` as revision (the sync's markDeleted). */
export function markDeleted(connection: string, id: string, expected: string, syncedAt: string): TransactWriteItem {
  return {
    Update: {
      TableName: ITEMS,
      Key: { connection: { S: connection }, id: { S: id } },
      UpdateExpression: 'SET #deleted = :true, #syncedAt = :syncedAt',
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted', '#syncedAt': 'syncedAt' },
      ExpressionAttributeValues: { ':expected': { S: expected }, ':true': { BOOL: true }, ':syncedAt': { S: syncedAt } },
    },
  };
}

/** Put of change `seq`, on condition that no row has that number. */
export function putChange(connection: string, seq: number, id: string): TransactWriteItem {
  return {
    Put: {
      TableName: CHANGES,
      Item: { connection: { S: connection }, seq: { N: String(seq) }, id: { S: id }, change: { S: 'created' } },
      ConditionExpression: 'attribute_not_exists(#seq)',
      ExpressionAttributeNames: { '#seq': 'seq' },
    },
  };
}

/** Update of the head `head` → `head + 1`, on condition that it is `head` (absent for 0); ALL_OLD on a failed condition. */
export function moveHead(connection: string, head: number, epoch = 'epoch-1'): TransactWriteItem {
  return {
    Update: {
      TableName: CHANGES,
      Key: { connection: { S: connection }, seq: { N: '0' } },
      UpdateExpression: 'SET #head = :next, #epoch = if_not_exists(#epoch, :epoch)',
      ConditionExpression: head === 0 ? 'attribute_not_exists(#head)' : '#head = :head',
      ExpressionAttributeNames: { '#head': 'head', '#epoch': 'epoch' },
      ExpressionAttributeValues: { ':next': { N: String(head + 1) }, ':epoch': { S: epoch }, ...(head === 0 ? {} : { ':head': { N: String(head) } }) },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    },
  };
}

/** The sync's three actions: `rowWrite`, change `head + 1` of `id`, the head moved from `head`. */
export function outbox(rowWrite: TransactWriteItem, connection: string, id: string, head: number, extra: Partial<TransactWriteItemsCommandInput> = {}): TransactWriteItemsCommand {
  return new TransactWriteItemsCommand({ TransactItems: [rowWrite, putChange(connection, head + 1, id), moveHead(connection, head)], ...extra });
}

export async function getRow(client: DynamoDBClient, table: string, key: Row): Promise<Row | undefined> {
  return (await client.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item;
}

export function headKey(connection: string): Row {
  return { connection: { S: connection }, seq: { N: '0' } };
}

/** The error a command ends with: its name, message, HTTP status and cancellation reasons (undefined when it succeeded). */
export async function refusal(
  client: DynamoDBClient,
  command: object,
): Promise<{ name: string; message: string; status?: number; reasons?: CancellationReason[] } | undefined> {
  try {
    // Any command; the cast only picks one of send's overloads.
    await client.send(command as TransactWriteItemsCommand);
    return undefined;
  } catch (error) {
    const e = error as { name: string; message: string; $metadata?: { httpStatusCode?: number }; CancellationReasons?: CancellationReason[] };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode, ...(e.CancellationReasons ? { reasons: e.CancellationReasons } : {}) };
  }
}

/** DynamoDB's message of a cancellation with these reason codes. */
export function cancelledMessage(...codes: string[]): string {
  return `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`;
}

/** Stream records as event name, keys and images (what the tests compare). */
export function shapes(records: readonly LambdaStreamRecord[]): Array<{ event?: string; keys?: object; old?: object; new?: object }> {
  return records.map((record) => ({
    event: record.eventName,
    keys: record.dynamodb.Keys,
    ...(record.dynamodb.OldImage ? { old: record.dynamodb.OldImage } : {}),
    new: record.dynamodb.NewImage,
  }));
}
