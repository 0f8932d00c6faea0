/**
 * The items table as after a first sync, written before virtual time runs: every provider item's
 * row as the sync writes it (the real item store's PutItem rows, sent with BatchWriteItem), under the
 * connection whose account holds the items.
 */
import { BatchWriteItemCommand, type AttributeValue, type DynamoDBClient, type PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDbItemStore } from '../../functions/item-sync/adapters/dynamodb-item-store.js';
import { validateItem } from '../../functions/item-sync/item.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { parseJson } from '../../functions/shared/json.js';
import type { ProviderModel } from '../simulator/provider-model.js';

/**
 * The rows the sync writes for these items of `connection` (its account's at the provider; created,
 * as after a first sync at `syncedAt`): the real item store's PutItem `Item`s, taken from a client
 * that only keeps them (no SDK stack: a million rows are made in seconds).
 */
export async function itemRows(
  provider: ProviderModel,
  ids: readonly string[],
  syncedAt: string,
  table: string,
  revisionField: string,
  connection: string = DEFAULT_CONNECTION,
): Promise<Array<Record<string, AttributeValue>>> {
  const account = provider.account(connection);
  const rows: Array<Record<string, AttributeValue>> = [];
  const capture = {
    send: async (command: PutItemCommand) => {
      rows.push(command.input.Item!);
      return {};
    },
  } as unknown as DynamoDBClient;
  const store = new DynamoDbItemStore(capture, table);
  for (const id of ids) {
    // As the provider client hands it over (parseJson), validated as the sync does.
    const valid = validateItem(parseJson(JSON.stringify(account.getItem(id))), id, revisionField);
    await store.put({ connection, id, type: valid.type, revision: valid.revision, item: valid.item, syncedAt }, { exists: false });
  }
  return rows;
}

/** BatchWriteItem, 25 rows a call, 16 calls in flight, unprocessed items sent again. */
export async function batchWrite(client: DynamoDBClient, table: string, rows: ReadonlyArray<Record<string, AttributeValue>>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < rows.length) {
      const chunk = rows.slice(next, next + 25);
      next += 25;
      let requests = chunk.map((Item) => ({ PutRequest: { Item } }));
      while (requests.length > 0) {
        const output = await client.send(new BatchWriteItemCommand({ RequestItems: { [table]: requests } }));
        requests = (output.UnprocessedItems?.[table] ?? []) as typeof requests;
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}
